//! Resources by identity through the core: a GPU cluster's jobs get
//! distinct cores and GPU indices, wait when none are free, and keep what
//! they hold across a controller restart.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ctld::fixtures::{reach, register};
use crate::ctld::{Command, Core, Reply};
use crate::model::job::{JobState, JobSubmit};
use crate::model::tres::{parse_gpus, GresRequest};
use crate::policy::authz::Caller;

/// Two nodes of 2 sockets × 4 cores × 2 threads, two GPUs each: GPU 0 near
/// socket 0 (cores 0-3), GPU 1 near socket 1 (cores 4-7).
fn cluster() -> Config {
    let dir = std::env::temp_dir().join(format!("canopy-tres-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let slurm = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nGresTypes=gpu\n\
                 NodeName=n[1-2] Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=1000 Gres=gpu:a100:2\n\
                 PartitionName=p Nodes=n[1-2] Default=YES\n";
    let gres = "Name=gpu Type=a100 File=/dev/null Cores=0-3\nName=gpu Type=a100 File=/dev/zero Cores=4-7\n";
    Config::parse_str_with_gres(
        slurm,
        &dir.join("slurm.conf"),
        Some((gres, &dir.join("gres.conf"))),
    )
    .unwrap()
}

fn start(conf: Config, jobs: Vec<crate::model::job::JobRecord>) -> Core {
    let (mut core, _) = Core::recover(Arc::new(conf), jobs, None, &HashMap::new(), 1000);
    for rank in 0..2 {
        register(&mut core, rank, 1000);
        reach(&mut core, rank, true, 1000);
    }
    core
}

fn submit(core: &mut Core, f: impl FnOnce(&mut JobSubmit)) -> Result<u32, String> {
    let mut s = JobSubmit {
        name: "j".into(),
        uid: 1000,
        script: "#!/bin/sh\ntrue\n".into(),
        ..Default::default()
    };
    f(&mut s);
    let out = core.apply(
        1001,
        Command::Submit {
            submit: Box::new(s),
            caller: Caller {
                uid: 1000,
                operator: false,
            },
        },
    );
    match out.reply {
        Some(Reply::Submit(r)) => r.map(|r| r.job_id).map_err(|e| e.message),
        other => panic!("{other:?}"),
    }
}

fn gpu(n: u64) -> GresRequest {
    GresRequest {
        name: "gpu".into(),
        type_: None,
        count: n,
    }
}

#[test]
fn gpu_jobs_get_their_own_gpus_and_the_cores_beside_them() {
    let mut core = start(cluster(), vec![]);
    core.apply(1002, Command::Schedule);
    // One GPU, two tasks: GPU 0 and socket 0's first core (both threads).
    let a = submit(&mut core, |s| {
        s.ntasks = Some(2);
        s.resources.gres = vec![gpu(1)];
    })
    .unwrap();
    // A second: GPU 1, and cores from socket 1, beside it.
    let b = submit(&mut core, |s| s.resources.gres = vec![gpu(1)]).unwrap();
    core.apply(1003, Command::Schedule);
    let alloc = |core: &Core, id| core.jobs().get(id).unwrap().alloc.clone().unwrap();
    let (aa, ab) = (alloc(&core, a), alloc(&core, b));
    assert_eq!(
        (aa.ranks.clone(), aa.cpu_ids[0].clone()),
        (vec![0], vec![0, 1])
    );
    assert_eq!(aa.gres[0][0].indices, vec![0]);
    assert_eq!(
        (ab.ranks.clone(), ab.cpu_ids[0].clone()),
        (vec![0], vec![8, 9])
    );
    assert_eq!(ab.gres[0][0].indices, vec![1]);
    // A whole node's GPUs: n2. Then nothing is left: the next one waits.
    let c = submit(&mut core, |s| {
        s.resources.gpus_per_node = Some(parse_gpus("2", "gpus-per-node").unwrap())
    })
    .unwrap();
    let d = submit(&mut core, |s| s.resources.gres = vec![gpu(1)]).unwrap();
    core.apply(1004, Command::Schedule);
    assert_eq!(alloc(&core, c).ranks, vec![1]);
    assert_eq!(alloc(&core, c).gres[0][0].indices, vec![0, 1]);
    assert_eq!(core.jobs().get(d).unwrap().state, JobState::Pending);
    // What the views show.
    let info = core.job_info(core.jobs().get(a).unwrap(), false, 1004);
    assert_eq!(info.alloc_gres, vec![("gpu".to_string(), 1)]);
    assert_eq!(info.node_detail[0].cpu_ids, "0-1");
    assert_eq!(info.node_detail[0].gres, "gpu:a100:1(IDX:0)");
    assert_eq!(info.tres_per_node, "gres/gpu:1");
    let node = core.node_info(0).unwrap();
    assert_eq!(node.gres_used, "gpu:a100:2(IDX:0-1)");
    assert_eq!(node.cfg_gres, vec![("gpu".to_string(), 2)]);
    assert_eq!(node.alloc_cpus, 4);

    // A restarted controller holds the same CPUs and GPUs: d still waits,
    // and the nodes show what they showed.
    let records: Vec<_> = core.jobs().values().cloned().collect();
    let before = (core.node_info(0).unwrap(), core.node_info(1).unwrap());
    let mut core = start(cluster(), records);
    core.apply(1005, Command::Schedule);
    assert_eq!(core.jobs().get(d).unwrap().state, JobState::Pending);
    let after = (core.node_info(0).unwrap(), core.node_info(1).unwrap());
    assert_eq!(
        (after.0.gres_used, after.0.alloc_cpus, after.1.gres_used),
        (before.0.gres_used, before.0.alloc_cpus, before.1.gres_used)
    );
    for cpu in [0, 1, 8, 9] {
        assert!(core.slots()[0].used.contains(cpu), "cpu {cpu}");
    }
    assert!(!core.slots()[0].used.contains(2));
}

#[test]
fn gres_the_cluster_lacks_is_refused_with_slurms_words() {
    let mut core = start(cluster(), vec![]);
    let e = submit(&mut core, |s| {
        s.resources.gres = vec![GresRequest {
            name: "fpga".into(),
            type_: None,
            count: 1,
        }]
    })
    .unwrap_err();
    assert_eq!(e, "Invalid generic resource (gres) specification");
    // More GPUs per node than any node has: never.
    let e = submit(&mut core, |s| s.resources.gres = vec![gpu(3)]).unwrap_err();
    assert_eq!(e, "Requested node configuration is not available");
    // A type no node has: never.
    let e = submit(&mut core, |s| {
        s.resources.gres = vec![GresRequest {
            name: "gpu".into(),
            type_: Some("h100".into()),
            count: 1,
        }]
    })
    .unwrap_err();
    assert_eq!(e, "Requested node configuration is not available");
    // --gpus=3 over the job fits on two nodes.
    let ok = submit(&mut core, |s| {
        s.min_nodes = Some(2);
        s.resources.gpus = Some(parse_gpus("3", "gpus").unwrap())
    })
    .unwrap();
    core.apply(1002, Command::Schedule);
    let a = core.jobs().get(ok).unwrap().alloc.clone().unwrap();
    let held: u64 = a.gres.iter().flatten().map(|g| g.count).sum();
    assert_eq!(held, 3);
}
