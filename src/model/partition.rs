//! A partition as the domain sees it: its state, which accounts and QOS it
//! takes, and how its jobs are preempted.

use serde::{Deserialize, Serialize};

/// Partition state as configured/updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionState {
    Up,
    Down,
    Drain,
    Inactive,
}

impl PartitionState {
    pub fn name(self) -> &'static str {
        match self {
            PartitionState::Up => "UP",
            PartitionState::Down => "DOWN",
            PartitionState::Drain => "DRAIN",
            PartitionState::Inactive => "INACTIVE",
        }
    }
}

/// Which accounts and QOS a partition takes, and its own QOS (whose
/// limits apply to every job in it). Names lower-cased; `None` = ALL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionAccess {
    pub allow_accounts: Option<Vec<String>>,
    pub deny_accounts: Vec<String>,
    pub allow_qos: Option<Vec<String>>,
    pub deny_qos: Vec<String>,
    pub qos: Option<String>,
}

/// What happens to a preempted job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreemptAction {
    #[default]
    Off,
    /// Killed; it ends PREEMPTED.
    Cancel,
    /// Killed and put back in the queue (its run is accounted PREEMPTED).
    Requeue,
    /// Stopped while the preemptor runs (needs gang scheduling).
    Suspend,
}

impl PreemptAction {
    pub fn name(self) -> &'static str {
        match self {
            PreemptAction::Off => "OFF",
            PreemptAction::Cancel => "CANCEL",
            PreemptAction::Requeue => "REQUEUE",
            PreemptAction::Suspend => "SUSPEND",
        }
    }
}

/// A `PreemptMode` value: one action, optionally with `GANG` or `WITHIN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PreemptMode {
    pub action: PreemptAction,
    pub gang: bool,
    pub within: bool,
}

impl PreemptMode {
    /// As `scontrol show config` / `show partition` print it (slurmctld's
    /// `preempt_mode_string`: the modifier first; `OFF` with one is the
    /// modifier alone).
    pub fn name(self) -> String {
        let action = self.action.name();
        let modifier = if self.gang {
            Some("GANG")
        } else if self.within {
            Some("WITHIN")
        } else {
            None
        };
        match (modifier, self.action) {
            (None, _) => action.to_string(),
            (Some(m), PreemptAction::Off) => m.to_string(),
            (Some(m), _) => format!("{m},{action}"),
        }
    }
}

/// A partition's preemption settings. (Its `PriorityTier`, which decides
/// who preempts whom, is read with the priority keys:
/// the config's `priority.partition(name).tier`.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartPreempt {
    /// `PreemptMode` for jobs of this partition; `None`: the global mode.
    pub mode: Option<PreemptMode>,
    /// `GraceTime`, seconds: a preempted job gets SIGCONT and SIGTERM and
    /// this long before it is killed or requeued.
    pub grace_s: u32,
}
