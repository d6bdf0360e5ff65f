//! A requeued job's earlier runs through the core: each keeps its own
//! accounting record (sacct `-D`), ended REQUEUED, with its own times and
//! nodes; the last run's record carries them to the store.

use std::collections::HashMap;
use std::sync::Arc;

use super::command::{Command, Output, Reply};
use super::core::Core;
use crate::config::Config;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::wire::messages::{AcctQuery, JobUpdate, RequeueKind};

fn core() -> Core {
    let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2] Default=YES\n";
    let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let (mut c, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000);
    for rank in 0..2 {
        crate::ctld::fixtures::register(&mut c, rank, 1000);
        crate::ctld::fixtures::reach(&mut c, rank, true, 1000);
    }
    c
}

fn submit(c: &mut Core, now: i64) -> u32 {
    let s = JobSubmit {
        name: "j".into(),
        user: "alice".into(),
        uid: 1000,
        script: "#!/bin/sh\ntrue\n".into(),
        ..Default::default()
    };
    let caller = Caller {
        uid: 1000,
        operator: false,
    };
    match c
        .apply(
            now,
            Command::Submit {
                submit: Box::new(s),
                caller,
            },
        )
        .reply
    {
        Some(Reply::Submit(Ok(r))) => r.job_id,
        other => panic!("{other:?}"),
    }
}

fn requeue(c: &mut Core, id: u32, now: i64) {
    c.apply(
        now,
        Command::UpdateJobs {
            update: JobUpdate {
                job_ids: vec![id],
                requeue: Some(RequeueKind::Requeue),
                ..Default::default()
            },
            caller: Caller::ROOT,
        },
    );
}

fn ended(c: &mut Core, id: u32, state: JobState, now: i64) -> Output {
    c.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Default::default(),
        },
    )
}

#[test]
fn each_run_of_a_requeued_job_is_its_own_record() {
    let mut c = core();
    let id = submit(&mut c, 1000);
    c.apply(1000, Command::Schedule);
    // A running job requeued: torn down, then pending again.
    requeue(&mut c, id, 1060);
    ended(&mut c, id, JobState::Cancelled, 1061);
    let j = c.jobs().get(id).unwrap();
    assert_eq!((j.state, j.restarts), (JobState::Pending, 1));
    let first = &j.earlier_runs[0];
    assert_eq!(
        (first.state, first.start_time, first.end_time),
        (JobState::Requeued, Some(1000), Some(1061))
    );
    assert_eq!((first.nodes.as_str(), first.num_nodes), ("n1", 1));
    // Its batch step went with it, killed.
    assert_eq!(first.steps[0].state, JobState::Cancelled);
    // The second run completes; then a finished job is requeued too.
    c.apply(1100, Command::Schedule);
    let out = ended(&mut c, id, JobState::Completed, 1200);
    requeue(&mut c, id, 1300);
    c.apply(1300, Command::Schedule);
    ended(&mut c, id, JobState::Completed, 1400);
    let j = c.jobs().get(id).unwrap();
    let states: Vec<_> = j.earlier_runs.iter().map(|r| r.state).collect();
    assert_eq!(states, [JobState::Requeued, JobState::Requeued]);
    assert_eq!(j.earlier_runs[1].end_time, Some(1200));
    // The record stored at the second run's end already held the first.
    let stored = out.persist.iter().find_map(|op| match op {
        Op::PutAcct(a) if a.job_id == id => Some(a.clone()),
        _ => None,
    });
    assert_eq!(stored.unwrap().earlier_runs.len(), 1);

    // sacct lists the last run only; with -D every run, oldest first.
    let record = c.acct_of(j, Default::default());
    let plain = AcctQuery::default();
    let rows = crate::state::acct::runs(record.clone(), &plain, 2000);
    assert_eq!(rows.len(), 1);
    assert!(rows[0].earlier_runs.is_empty());
    let dup = AcctQuery {
        duplicates: true,
        ..Default::default()
    };
    let rows = crate::state::acct::runs(record.clone(), &dup, 2000);
    let listed: Vec<_> = rows.iter().map(|r| (r.state, r.end_time)).collect();
    assert_eq!(
        listed,
        [
            (JobState::Requeued, Some(1061)),
            (JobState::Requeued, Some(1200)),
            (JobState::Completed, Some(1400)),
        ]
    );
    // -D -s REQUEUED: the job is selected by its earlier runs, and only
    // they are listed.
    let rq = AcctQuery {
        duplicates: true,
        states: vec![JobState::Requeued],
        ..Default::default()
    };
    assert!(crate::state::acct::matches(&record, &rq, 2000));
    assert_eq!(crate::state::acct::runs(record.clone(), &rq, 2000).len(), 2);
    let rq_plain = AcctQuery {
        states: vec![JobState::Requeued],
        ..Default::default()
    };
    assert!(!crate::state::acct::matches(&record, &rq_plain, 2000));
}

/// A job record and an accounting record written before earlier runs
/// were kept still read back (with none).
#[test]
fn records_without_earlier_runs_still_read() {
    fn without_field<T: serde::Serialize + serde::de::DeserializeOwned>(t: &T) -> T {
        let mut v = serde_json::to_value(t).unwrap();
        let removed = v
            .as_object_mut()
            .and_then(|m| m.remove("earlier_runs"))
            .is_some();
        assert!(removed);
        serde_json::from_value(v).unwrap()
    }
    let mut c = core();
    let id = submit(&mut c, 1000);
    let j = c.jobs().get(id).unwrap().clone();
    assert!(without_field(&j).earlier_runs.is_empty());
    let a = c.acct_of(&j, Default::default());
    assert!(without_field(&a).earlier_runs.is_empty());
}
