//! The shell's crash-only behaviour, with a real store whose writes are
//! made to fail: nothing that depended on a failed write is answered, the
//! fatal hook runs once, no later command is decided, and what a restart
//! recovers is exactly what was acknowledged.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ControllerActor, FatalHook, Submit};
use crate::config::Config;
use crate::model::job::JobSubmit;
use crate::policy::authz::Caller;
use crate::state::store::Store;

fn conf(dir: &Path) -> Arc<Config> {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=ctl(127.0.0.1)\nStateSaveLocation={}\n\
         NodeName=n[1-2] CPUs=2 RealMemory=1000\nPartitionName=p Nodes=n[1-2] Default=YES\n",
        dir.display()
    );
    Arc::new(Config::parse_str(&text, &dir.join("slurm.conf")).expect("test config parses"))
}

fn held_job() -> Submit {
    Submit {
        submit: JobSubmit {
            name: "held".into(),
            user: "root".into(),
            script: "#!/bin/sh\ntrue\n".into(),
            hold: true,
            ..Default::default()
        },
        caller: Caller::ROOT,
    }
}

/// Open the store again once the old writer thread has let go of it.
fn reopen(dir: &Path) -> crate::state::store::Recovered {
    for _ in 0..100 {
        if let Ok((_, r)) = Store::open(dir) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("store at {} could not be reopened", dir.display());
}

#[test]
fn a_failed_write_stops_the_controller_and_nothing_that_depended_on_it_leaves() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fatal_calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = fatal_calls.clone();
    let fatal: FatalHook = Arc::new(move |e| calls.lock().expect("lock").push(e));
    let conf = conf(dir.path());
    let (first, second, third) = {
        let sys = actix::System::new();
        let r = sys.block_on(async {
            let (store, recovered) = Store::open(dir.path()).expect("store opens");
            let h = ControllerActor::start(conf, store.clone(), recovered, fatal);
            let first = h
                .controller
                .send(held_job())
                .await
                .expect("controller alive");
            store.fail_writes(true);
            let second = h
                .controller
                .send(held_job())
                .await
                .expect("controller alive");
            // The store works again, but this controller has stopped deciding.
            store.fail_writes(false);
            let third = h
                .controller
                .send(held_job())
                .await
                .expect("controller alive");
            (first, second, third)
        });
        drop(sys);
        r
    };
    let first = first.expect("the first submission is acknowledged");
    assert!(
        second.is_err(),
        "a submission whose write failed was acknowledged: {second:?}"
    );
    assert!(
        third.is_err(),
        "a halted controller acknowledged a submission: {third:?}"
    );
    let calls = fatal_calls.lock().expect("lock").clone();
    assert_eq!(calls, vec!["injected write failure".to_string()]);
    // After the restart: exactly the acknowledged job.
    let back = reopen(dir.path());
    let ids: Vec<u32> = back.jobs.iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![first.job_id]);
}
