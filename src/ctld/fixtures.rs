//! Records the core's unit tests share.

use crate::ctld::{Effect, Output};
use crate::model::job::{Allocation, JobRecord, JobState, JobSubmit};
use crate::model::node::NodeResources;
use crate::wire::messages::{Hello, JobOnNode, JobReport};

/// Job `id`, running since t=10 on node `rank` with one CPU.
pub(crate) fn running(id: u32, rank: u32) -> JobRecord {
    JobRecord {
        earlier_runs: Vec::new(),
        job_id: id,
        submit: JobSubmit::default(),
        partition: "p".into(),
        time_limit_min: None,
        state: JobState::Running,
        reason: Default::default(),
        priority: 1,
        submit_time: 0,
        start_time: Some(10),
        end_time: None,
        alloc: Some(Allocation {
            ranks: vec![rank],
            cpus: vec![1],
            tasks: vec![1],
            mem_mb: 0,
            ..Default::default()
        }),
        exit: Default::default(),
        restarts: 0,
        ending_as: None,
        next_step: 0,
        steps: vec![],
        array: None,
        dependency: None,
        requeue: None,
        priority_set: false,
        mail_sent: 0,
        configuring: false,
        power_up: false,
        preempted: None,
        suspend: Default::default(),
        preempt_suspended: None,
    }
}

/// Node `n{rank+1}`'s registration, reporting `jobs` as running. Its daemon
/// has run since long before (t=1): only the controller restarted. It
/// reports more hardware than any test configures, so that the
/// registration is valid (`register.rs`'s tests report less).
pub(crate) fn hello(rank: u32, jobs: &[u32]) -> Hello {
    Hello {
        node: format!("n{}", rank + 1),
        rank,
        boot_id: 1,
        started: 1,
        version: "t".into(),
        resources: NodeResources {
            cpus: 4096,
            sockets: 16,
            cores_per_socket: 128,
            threads_per_core: 2,
            real_memory_mb: 1 << 30,
            boards: 1,
            gpus: Vec::new(),
        },
        jobs: jobs
            .iter()
            .map(|&job_id| JobReport {
                job_id,
                state: JobOnNode::Running,
            })
            .collect(),
    }
}

/// The jobs an output ends NODE_FAIL.
pub(crate) fn node_failed(out: &Output) -> Vec<u32> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::EndJob {
                job_id,
                state: JobState::NodeFail,
                ..
            } => Some(*job_id),
            _ => None,
        })
        .collect()
}

/// Node `rank` registers with the jobs the core placed on it.
pub(crate) fn register(core: &mut crate::ctld::Core, rank: u32, now: i64) -> Output {
    let jobs: Vec<u32> = core
        .jobs()
        .running()
        .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
        .map(|j| j.job_id)
        .collect();
    core.apply(
        now,
        crate::ctld::Command::NodeRegistered {
            hello: Box::new(hello(rank, &jobs)),
            via: None,
        },
    )
}

/// The relay tree reports node `rank` reachable (`live`) or not.
pub(crate) fn reach(core: &mut crate::ctld::Core, rank: u32, live: bool, now: i64) -> Output {
    let (added, removed) = if live {
        (vec![rank], vec![])
    } else {
        (vec![], vec![rank])
    };
    core.apply(
        now,
        crate::ctld::Command::NodeReachability { added, removed },
    )
}
