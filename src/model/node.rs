//! A node as the controller sees it: its base state, the hardware its daemon
//! reported, the admin state an operator (or the not-responding rule) set,
//! and the status the controller core keeps for it (`ctld/nodes.rs`).

use serde::{Deserialize, Serialize};

use super::time::UnixTime;

/// Base node state. Flags (drain, not responding, ...) live beside it in `NodeInfo` (the wire's view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeBaseState {
    Unknown,
    Idle,
    Allocated,
    Mixed,
    Down,
    Future,
}

impl NodeBaseState {
    pub fn name(self) -> &'static str {
        match self {
            NodeBaseState::Unknown => "UNKNOWN",
            NodeBaseState::Idle => "IDLE",
            NodeBaseState::Allocated => "ALLOCATED",
            NodeBaseState::Mixed => "MIXED",
            NodeBaseState::Down => "DOWN",
            NodeBaseState::Future => "FUTURE",
        }
    }
}

/// Hardware a node daemon found (or was told to report).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeResources {
    pub cpus: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
    /// Fields added later default, so a peer one version older still
    /// decodes (0 boards: it did not say).
    #[serde(default)]
    pub boards: u32,
    /// GPUs the node's NVML found, in NVML index order.
    #[serde(default)]
    pub gpus: Vec<ReportedGpu>,
}

/// One GPU as a node daemon reports it at registration (what Slurm's
/// gpu/nvml plugin sends upward: index, type, file, local cores).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedGpu {
    /// NVML's index.
    pub index: u32,
    /// Slurm's type name (`nvidia_a100-sxm4-80gb`).
    pub type_name: String,
    /// Device file (`/dev/nvidia0`).
    pub file: String,
    /// Abstract core ids local to the GPU; empty when unknown.
    pub cores: Vec<u32>,
}

/// Why a node is unusable, and who said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub text: String,
    pub user: String,
    pub time: UnixTime,
}

/// Admin-set state that survives a controller restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminState {
    pub drain: Option<Reason>,
    /// Set by an operator (`State=DOWN`) or by the controller (not responding).
    pub down: Option<Reason>,
    /// Power saving's state (`ctld/power.rs`); `None`: what slurm.conf
    /// says (powered down for `State=CLOUD`, on otherwise). Kept with the
    /// admin state so a restart neither forgets a powered-down node nor
    /// takes a running cloud node for a powered-down one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<Power>,
}

/// Where a node is in power saving's cycle (Slurm's POWERED_DOWN,
/// POWERING_UP and POWERING_DOWN flags; `On` has none of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PowerState {
    #[default]
    On,
    /// `ResumeProgram` was run for it; it has not registered yet.
    PoweringUp,
    /// `SuspendProgram` was run for it; `SuspendTimeout` not over yet.
    PoweringDown,
    PoweredDown,
}

/// How a requested power-down treats the node's jobs (`scontrol update
/// State=POWER_DOWN[_ASAP|_FORCE]`, `scontrol power down [asap|force]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PowerDownMode {
    /// Once its jobs are done; no new ones meanwhile.
    Normal,
    /// Drained too (reason `POWER_DOWN_ASAP`), as Slurm does.
    Asap,
    /// At once: its jobs are requeued or cancelled.
    Force,
}

/// A node's power-saving record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Power {
    pub state: PowerState,
    /// When `state` began (ResumeTimeout and SuspendTimeout count from it).
    pub since: UnixTime,
    /// Slurm's POWER_DOWN flag: power it down once it is idle.
    #[serde(default)]
    pub down_requested: Option<PowerDownMode>,
}

/// A node's observable state, as the controller core keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub rank: u32,
    pub registered: bool,
    pub boot_id: u64,
    pub responding: bool,
    pub admin: AdminState,
    pub resources: Option<NodeResources>,
    pub boot_time: Option<UnixTime>,
    pub attached_to: Option<u32>,
    /// Future nodes never run jobs and are hidden in most views.
    pub future: bool,
    /// Slurm's INVALID_REG: the last registration reported less than
    /// slurm.conf says (`ctld/register.rs`). Not persisted: every
    /// registration decides it again.
    #[serde(default)]
    pub invalid_reg: bool,
    /// The address a cloud node registered from (`SlurmctldParameters=
    /// cloud_reg_addrs`): its NodeAddr until the next registration. Not
    /// persisted: every registration says it again.
    #[serde(default)]
    pub reg_addr: Option<String>,
}

impl NodeStatus {
    /// May the scheduler place new work here? A powered-down node may
    /// (placing a job there powers it up), one on its way down may not.
    pub fn schedulable(&self) -> bool {
        let up = match self.power_state() {
            PowerState::On => self.registered && self.responding,
            PowerState::PoweredDown | PowerState::PoweringUp => true,
            PowerState::PoweringDown => false,
        };
        up && self.admin.down.is_none()
            && self.admin.drain.is_none()
            && !self.future
            && self.admin.power.is_none_or(|p| p.down_requested.is_none())
    }

    pub fn power_state(&self) -> PowerState {
        self.admin.power.map_or(PowerState::On, |p| p.state)
    }
}
