//! A job's base state, as squeue, scontrol and sacct name it. Its own
//! module because the job record and its dependencies both use it.

use serde::{Deserialize, Serialize};

/// Base job state (Slurm's `JOB_*` base states). The default is where every
/// job starts: PENDING.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    #[default]
    Pending,
    Running,
    Suspended,
    Completing,
    /// Shown for a running job whose PrologSlurmctld still runs (Slurm's
    /// CONFIGURING flag); never stored as a job's state.
    Configuring,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
    /// An earlier run of a requeued job, as accounting keeps it (sacct
    /// `-D`); never a live job's state.
    Requeued,
}

impl JobState {
    /// Long name as squeue `%T` / scontrol `JobState=` / sacct print it.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Configuring => "CONFIGURING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Requeued => "REQUEUED",
        }
    }

    /// Compact code as squeue `%t` prints it.
    pub fn code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completing => "CG",
            JobState::Configuring => "CF",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
            JobState::Requeued => "RQ",
        }
    }

    /// Parse either the long name or the compact code, case-insensitively.
    pub fn parse(s: &str) -> Option<JobState> {
        const ALL: [JobState; 15] = [
            JobState::Pending,
            JobState::Running,
            JobState::Suspended,
            JobState::Completing,
            JobState::Configuring,
            JobState::Completed,
            JobState::Cancelled,
            JobState::Failed,
            JobState::Timeout,
            JobState::NodeFail,
            JobState::Preempted,
            JobState::BootFail,
            JobState::Deadline,
            JobState::OutOfMemory,
            JobState::Requeued,
        ];
        ALL.into_iter()
            .find(|st| st.name().eq_ignore_ascii_case(s) || st.code().eq_ignore_ascii_case(s))
    }

    /// True once the job can never run again (without a requeue).
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Pending
                | JobState::Running
                | JobState::Suspended
                | JobState::Completing
                | JobState::Configuring
        )
    }
}
