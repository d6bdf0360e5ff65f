//! Domain types that travel on the wire: job, node and partition records as the
//! controller reports them, their states, and the job submission request.
//!
//! These are plain data (no logic beyond naming states): the controller fills
//! them, the CLI formats them. Field names are stable MessagePack map keys, so a
//! field may be added (with `#[serde(default)]`) without breaking older peers.

use serde::{Deserialize, Serialize};

pub use crate::model::acct::{AcctJob, AcctStep};
pub use crate::model::job::{
    ArraySpec, ArrayTask, Exclusive, JobState, JobSubmit, SignalSpec, StepKind,
};
pub use crate::model::node::NodeBaseState;
pub use crate::model::partition::PartitionState;
pub use crate::model::time::UnixTime;

/// One job as the controller reports it. A list of them travels as a
/// [`JobList`](super::joblist::JobList), column by column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub partition: String,
    pub state: JobState,
    /// Pending reason or terminal reason (`None`, `Priority`, `Resources`,
    /// `JobHeldUser`, `NonZeroExitCode`, ...).
    pub reason: String,
    pub priority: u32,
    pub submit_time: UnixTime,
    pub eligible_time: Option<UnixTime>,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    /// Compressed hostlist of allocated nodes ("" while pending).
    pub nodes: String,
    pub num_nodes: u32,
    pub num_cpus: u32,
    pub num_tasks: u32,
    pub cpus_per_task: u32,
    /// Per-node memory in MiB actually allocated/requested.
    pub mem_per_node_mb: u64,
    /// Exit status: (code, signal).
    pub exit_code: (i32, i32),
    pub workdir: String,
    pub stdout: String,
    pub stderr: String,
    pub stdin: String,
    pub command: String,
    pub submit_line: String,
    pub batch_host: Option<String>,
    pub restarts: u32,
    /// Minimum nodes asked (for the pending view).
    pub req_nodes: u32,
    /// Set for array tasks.
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// What the job still waits for (`afterok:12(unfulfilled)`); "" = none.
    #[serde(default)]
    pub dependency: String,
    /// When one record stands for several pending tasks of an array (as
    /// squeue shows them without `-r`): their indices, e.g. `1-3%2`.
    #[serde(default)]
    pub array_pending: Option<String>,
    /// `-w` as given ("" = none).
    #[serde(default)]
    pub req_node_list: String,
    /// `-x` as given ("" = none).
    #[serde(default)]
    pub exc_node_list: String,
    /// `-A` ("" = none, shown `(null)`).
    #[serde(default)]
    pub account: String,
    /// The job's QOS ("" = none known, shown `(null)`).
    #[serde(default)]
    pub qos: String,
    #[serde(default)]
    pub comment: String,
    /// `--constraint` ("" = none).
    #[serde(default)]
    pub features: String,
    #[serde(default)]
    pub exclusive: Option<Exclusive>,
    /// `OverSubscribe=` of scontrol and squeue's `%h`, as the controller
    /// works it out from the job and its partition (`OK`, `YES`, `NO`,
    /// `USER`, `MCS`); empty from an older controller.
    #[serde(default)]
    pub over_subscribe: String,
    #[serde(default)]
    pub no_requeue: bool,
    #[serde(default)]
    pub nice: i32,
    /// `TresPerNode=` / `squeue -o %b` (`gres/gpu:2`), empty when none.
    #[serde(default)]
    pub tres_per_node: String,
    /// GRES asked for in all, by name (ReqTRES's `gres/gpu=`).
    #[serde(default)]
    pub req_gres: Vec<(String, u64)>,
    /// GRES held in all, by name (AllocTRES's `gres/gpu=`).
    #[serde(default)]
    pub alloc_gres: Vec<(String, u64)>,
    /// `scontrol show job -d`: what each node gives the job, runs of nodes
    /// with the same share together.
    #[serde(default)]
    pub node_detail: Vec<JobNodeDetail>,
    /// `--reservation` ("" = none, shown `(null)`).
    #[serde(default)]
    pub reservation: String,
    /// `-L` as Slurm shows it (`fluent:1`), "" = none.
    #[serde(default)]
    pub licenses: String,
    /// A pending job's planned start from the last backfill pass
    /// (`squeue --start`, `scontrol show job` StartTime=).
    #[serde(default)]
    pub sched_start: Option<UnixTime>,
    /// The nodes planned for it (`SchedNodeList=`, squeue's SCHEDNODES);
    /// empty when none.
    #[serde(default)]
    pub sched_nodes: String,
    /// When it was last suspended or resumed (`SuspendTime=`).
    #[serde(default)]
    pub suspend_time: Option<UnixTime>,
    /// Seconds it ran before its latest suspension (`SecsPreSuspend=`).
    #[serde(default)]
    pub secs_pre_suspend: u64,
    /// Seconds it has been suspended in this run, up to now.
    #[serde(default)]
    pub suspended_secs: u64,
    /// `--mem-per-cpu` (asked, or the partition's DefMemPerCPU): scontrol
    /// prints `MinMemoryCPU=` with it instead of `MinMemoryNode=`.
    #[serde(default)]
    pub mem_per_cpu_mb: Option<u64>,
    /// Left out of squeue's listing for the asker unless `-a` (or `-j`):
    /// its partition is hidden from them.
    #[serde(default)]
    pub hidden: bool,
}

/// One `Nodes=n[1-2] CPU_IDs=0-3 Mem=1000 GRES=gpu:a100:2(IDX:0-1)` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobNodeDetail {
    pub nodes: String,
    pub cpu_ids: String,
    pub mem_mb: u64,
    pub gres: String,
}

/// One node as the controller reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub addr: String,
    pub hostname: String,
    pub port: u16,
    pub base: NodeBaseState,
    pub drain: bool,
    pub not_responding: bool,
    /// Node rank in the relay tree (its position in the configured node order).
    pub rank: u32,
    /// The node this one is attached to right now (`None` = the controller, or detached).
    pub attached_to: Option<String>,
    pub cpus: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
    pub alloc_cpus: u32,
    pub alloc_mem_mb: u64,
    pub features: Vec<String>,
    pub gres: String,
    pub weight: u32,
    pub partitions: Vec<String>,
    pub reason: Option<String>,
    pub reason_user: Option<String>,
    pub reason_time: Option<UnixTime>,
    pub boot_time: Option<UnixTime>,
    pub slurmd_start_time: Option<UnixTime>,
    pub last_busy: Option<UnixTime>,
    pub version: String,
    /// GRES configured, by name (CfgTRES's `gres/gpu=`).
    #[serde(default)]
    pub cfg_gres: Vec<(String, u64)>,
    /// GRES held, by name (AllocTRES).
    #[serde(default)]
    pub alloc_gres: Vec<(String, u64)>,
    /// `GresUsed=gpu:a100:2(IDX:0-1)`.
    #[serde(default)]
    pub gres_used: String,
    /// Its last registration had less than slurm.conf says (Slurm's
    /// INVALID_REG flag).
    #[serde(default)]
    pub invalid_reg: bool,
    /// In an active reservation (Slurm's RESERVED flag).
    #[serde(default)]
    pub reserved: bool,
    /// In an active MAINT reservation (Slurm's MAINT flag).
    #[serde(default)]
    pub maint: bool,
    /// Created dynamically (`canopy-noded -Z`, `scontrol create node`): Slurm's
    /// DYNAMIC_NORM flag.
    #[serde(default)]
    pub dynamic: bool,
    /// Boards as configured.
    #[serde(default = "one_board")]
    pub boards: u32,
    /// TmpDisk as configured, MiB.
    #[serde(default)]
    pub tmp_disk_mb: u64,
    /// Node attributes canopy accepts but ignores (CoreSpecCount, CPUSpecList,
    /// MemSpecLimit, ...), as written: `scontrol show node` prints them as Slurm does.
    #[serde(default)]
    pub ignored_attrs: Vec<(String, String)>,
    /// Power saving's flags (see [`NodePower`]).
    #[serde(default)]
    pub power: NodePower,
}

fn one_board() -> u32 {
    1
}

/// A node's power-saving flags, as Slurm names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePower {
    /// `State=CLOUD` in slurm.conf.
    pub cloud: bool,
    /// POWER_DOWN: a power-down was asked for and waits for its jobs.
    pub power_down: bool,
    pub powered_down: bool,
    pub powering_up: bool,
    pub powering_down: bool,
}

impl NodeInfo {
    /// `State=` text as scontrol prints it, e.g. `IDLE`, `IDLE+DRAIN`,
    /// `DOWN+NOT_RESPONDING`.
    pub fn scontrol_state(&self) -> String {
        // Slurm 22.05's flag order (`IDLE+CLOUD+DRAIN+POWER_DOWN`,
        // `DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING`,
        // `IDLE+CLOUD+NOT_RESPONDING+POWERING_UP`, as a real slurmctld prints).
        let mut s = self.base.name().to_string();
        let p = self.power;
        if p.cloud {
            s.push_str("+CLOUD");
        }
        if self.drain {
            s.push_str("+DRAIN");
        }
        if self.dynamic {
            // Slurm 22.05 shows a node `scontrol create` made FUTURE as FUTURE+DYNAMIC_NORM.
            s.push_str("+DYNAMIC_NORM");
        }
        if self.invalid_reg {
            s.push_str("+INVALID_REG");
        }
        if self.maint {
            s.push_str("+MAINT");
        }
        if p.power_down {
            s.push_str("+POWER_DOWN");
        }
        if p.powered_down {
            s.push_str("+POWERED_DOWN");
        }
        if self.not_responding {
            s.push_str("+NOT_RESPONDING");
        }
        if self.reserved {
            s.push_str("+RESERVED");
        }
        if p.powering_up {
            s.push_str("+POWERING_UP");
        }
        if p.powering_down {
            s.push_str("+POWERING_DOWN");
        }
        s
    }
}

/// One partition as the controller reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub name: String,
    pub default: bool,
    pub state: PartitionState,
    /// Minutes; `None` = UNLIMITED.
    pub max_time_min: Option<u32>,
    /// Minutes; `None` = NONE.
    pub default_time_min: Option<u32>,
    /// `None` = UNLIMITED.
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
    /// Compressed hostlist.
    pub nodes: String,
    pub node_names: Vec<String>,
    pub total_cpus: u32,
    pub total_nodes: u32,
    /// Sum of the nodes' RealMemory, in MiB.
    #[serde(default)]
    pub total_mem_mb: u64,
    /// PriorityTier, GraceTime (and the partition's own PreemptMode).
    #[serde(default)]
    pub preempt: crate::model::partition::PartPreempt,
    /// The mode its jobs are preempted with: its own, else the cluster's
    /// (as `scontrol show partition` prints it).
    #[serde(default = "preempt_off")]
    pub preempt_mode: String,
    #[serde(default = "one")]
    pub priority_job_factor: u16,
    #[serde(default = "one")]
    pub priority_tier: u16,
    /// `AllowAccounts`/`DenyAccounts`/`AllowQos`/`DenyQos`/`QOS`.
    #[serde(default)]
    pub access: crate::model::partition::PartitionAccess,
    /// Hidden, AllowGroups, OverSubscribe, memory settings, ... as configured.
    #[serde(default)]
    pub opts: crate::model::part_opts::PartOpts,
    /// Left out of listings for the asker unless they pass `-a`: a
    /// `Hidden` partition, or one whose `AllowGroups` leaves them out
    /// (operators see every partition, as in slurmctld).
    #[serde(default)]
    pub hidden: bool,
}

fn one() -> u16 {
    1
}

fn preempt_off() -> String {
    "OFF".into()
}
