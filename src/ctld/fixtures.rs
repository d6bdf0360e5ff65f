//! Records the core's unit tests share.

use crate::model::job::{Allocation, JobRecord, JobState, JobSubmit};

/// Job `id`, running since t=10 on node `rank` with one CPU.
pub(crate) fn running(id: u32, rank: u32) -> JobRecord {
    JobRecord {
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
    }
}
