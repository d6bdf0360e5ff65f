//! The persisted form of a job: the submission plus everything the controller
//! decided about it. One record per job id, rewritten on every state change.

use serde::{Deserialize, Serialize};

use crate::wire::messages::ExitStatus;
use crate::wire::types::{JobState, JobSubmit, UnixTime};

/// Where a started job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Node ranks in allocation order (the batch host first).
    pub ranks: Vec<u32>,
    /// CPUs allocated on each node, same order.
    pub cpus: Vec<u32>,
    /// Tasks placed on each node, same order.
    pub tasks: Vec<u32>,
    /// Memory allocated on every node, MiB.
    pub mem_mb: u64,
}

impl Allocation {
    pub fn total_cpus(&self) -> u32 {
        self.cpus.iter().sum()
    }
}

/// A job as the controller keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u32,
    pub submit: JobSubmit,
    /// The resolved partition name.
    pub partition: String,
    /// Resolved limit in minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    pub state: JobState,
    pub reason: String,
    pub priority: u32,
    pub submit_time: UnixTime,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    pub alloc: Option<Allocation>,
    pub exit: ExitStatus,
    pub restarts: u32,
    /// Set while the job is being torn down: the state it ends in once every
    /// node has confirmed.
    #[serde(default)]
    pub ending_as: Option<JobState>,
}
