//! Domain types that travel on the wire: job, node and partition records as the
//! controller reports them, their states, and the job submission request.
//!
//! These are plain data (no logic beyond naming states): the controller fills
//! them, the CLI formats them. Field names are stable MessagePack map keys, so a
//! field may be added (with `#[serde(default)]`) without breaking older peers.

use serde::{Deserialize, Serialize};

/// Unix time in whole seconds.
pub type UnixTime = i64;

/// Base job state (Slurm's `JOB_*` base states). The default is where every
/// job starts: PENDING.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    #[default]
    Pending,
    Running,
    Suspended,
    Completing,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
}

impl JobState {
    /// Long name as squeue `%T` / scontrol `JobState=` / sacct print it.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
        }
    }

    /// Compact code as squeue `%t` prints it.
    pub fn code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completing => "CG",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
        }
    }

    /// Parse either the long name or the compact code, case-insensitively.
    pub fn parse(s: &str) -> Option<JobState> {
        const ALL: [JobState; 13] = [
            JobState::Pending,
            JobState::Running,
            JobState::Suspended,
            JobState::Completing,
            JobState::Completed,
            JobState::Cancelled,
            JobState::Failed,
            JobState::Timeout,
            JobState::NodeFail,
            JobState::Preempted,
            JobState::BootFail,
            JobState::Deadline,
            JobState::OutOfMemory,
        ];
        ALL.into_iter()
            .find(|st| st.name().eq_ignore_ascii_case(s) || st.code().eq_ignore_ascii_case(s))
    }

    /// True once the job can never run again (without a requeue).
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended | JobState::Completing
        )
    }
}

/// Base node state. Flags (drain, not responding, ...) live beside it in [`NodeInfo`].
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

/// `--array`: which indices to run and how many may run at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Sorted, unique.
    pub indices: Vec<u32>,
    /// The `:N` of the spec (SLURM_ARRAY_TASK_STEP); 1 when not one step.
    pub step: u32,
    /// `%N`: at most N tasks running at once.
    pub throttle: Option<u32>,
}

/// One array task's place in its array: its `A_T` name and the
/// `SLURM_ARRAY_*` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The id the array was submitted as (`A`); one task's own id.
    pub array_job_id: u32,
    pub task_id: u32,
    pub min: u32,
    pub max: u32,
    pub count: u32,
    pub step: u32,
    pub throttle: Option<u32>,
}

/// How a submitted job's batch script is run; everything `sbatch` can ask for
/// in this release. Produced by the CLI, validated by the controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSubmit {
    /// `-J`; the CLI fills in the script's basename (or `wrap`/`sbatch`).
    pub name: String,
    /// `-p`; `None` means the default partition.
    pub partition: Option<String>,
    /// `-N min[-max]`; `None` means "derive from tasks" (at least 1).
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    /// `-n`
    pub ntasks: Option<u32>,
    /// `-c`
    pub cpus_per_task: Option<u32>,
    /// `--ntasks-per-node`
    pub ntasks_per_node: Option<u32>,
    /// `--mem` in MiB (0 = all of each node's memory).
    pub mem_per_node_mb: Option<u64>,
    /// `--mem-per-cpu` in MiB.
    pub mem_per_cpu_mb: Option<u64>,
    /// `-t` in minutes; `Some(0)` or `None` with `time_unlimited` = no limit.
    /// `None` = partition DefaultTime (or MaxTime).
    pub time_limit_min: Option<u32>,
    /// `-o` pattern (unexpanded); `None` = `slurm-%j.out`.
    pub stdout: Option<String>,
    /// `-e` pattern; `None` = same file as stdout.
    pub stderr: Option<String>,
    /// `-i` pattern; `None` = /dev/null.
    pub stdin: Option<String>,
    /// `-D`, absolute; defaults to the submit directory.
    pub workdir: String,
    /// The submit directory (SLURM_SUBMIT_DIR).
    pub submit_dir: String,
    pub submit_host: String,
    /// The batch script text (starts with `#!`).
    pub script: String,
    /// The environment the script runs with, already filtered by `--export`.
    pub env: Vec<(String, String)>,
    /// `--hold`
    pub hold: bool,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// The command line as typed (sacct SubmitLine).
    pub submit_line: String,
    /// `Command=` in scontrol: the script path, or `(null)` for stdin/--wrap.
    pub command: String,
    /// Arguments given after the script path.
    #[serde(default)]
    pub script_args: Vec<String>,
    /// An allocation for srun/salloc: no batch script runs; the job ends
    /// when its client releases it.
    #[serde(default)]
    pub interactive: bool,
    /// `-a/--array`.
    #[serde(default)]
    pub array: Option<ArraySpec>,
    /// `-d/--dependency`, as typed (the controller parses and checks it).
    #[serde(default)]
    pub dependency: Option<String>,
    /// `--kill-on-invalid-dep`; `None` = the cluster default (no).
    #[serde(default)]
    pub kill_on_invalid_dep: Option<bool>,
    /// `--signal=[B:]SIG[@secs]`.
    #[serde(default)]
    pub signal: Option<SignalSpec>,
    /// `--open-mode=append` (default: truncate).
    #[serde(default)]
    pub open_append: bool,
    /// `--begin`: not eligible to start before this time.
    #[serde(default)]
    pub begin_time: Option<UnixTime>,
    /// `-w/--nodelist`: nodes the job must be given (hostlist).
    #[serde(default)]
    pub req_nodes: Option<String>,
    /// `-x/--exclude`: nodes the job must not be given (hostlist).
    #[serde(default)]
    pub exc_nodes: Option<String>,
    /// `--test-only`: say when and where the job would start; queue nothing.
    #[serde(default)]
    pub test_only: bool,
    /// `-A/--account`, lower-cased as Slurm stores it.
    #[serde(default)]
    pub account: Option<String>,
    /// `--comment`.
    #[serde(default)]
    pub comment: Option<String>,
    /// `-C/--constraint`, in Slurm's spelling (`a,b` shown as `a&b`).
    #[serde(default)]
    pub constraint: Option<String>,
    /// `--exclusive[=user|mcs]`.
    #[serde(default)]
    pub exclusive: Option<Exclusive>,
    /// `--no-requeue`: the job may not be requeued (`Requeue=0`).
    #[serde(default)]
    pub no_requeue: bool,
    /// `--nice`: subtracted from the job's priority.
    #[serde(default)]
    pub nice: i32,
    /// `--priority`: a fixed priority, honoured for operators only.
    #[serde(default)]
    pub priority: Option<u32>,
    /// `--mail-type`, as `crate::mail` flags (0: no mail).
    #[serde(default)]
    pub mail_type: u32,
    /// `--mail-user` (default: the job's user).
    #[serde(default)]
    pub mail_user: Option<String>,
    /// `--reservation`: canopy has none, so any name is refused.
    #[serde(default)]
    pub reservation: Option<String>,
    /// `-L/--licenses`: each name must be one slurm.conf's `Licenses` lists.
    #[serde(default)]
    pub licenses: Option<String>,
}

/// `--exclusive`'s forms. canopy gives every form whole nodes; `User` and
/// `Mcs` are kept so they are shown as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exclusive {
    Node,
    User,
    Mcs,
}

impl Exclusive {
    /// squeue's `%h` and scontrol's `OverSubscribe=`.
    pub fn oversubscribe(e: Option<Exclusive>) -> &'static str {
        match e {
            None => "OK",
            Some(Exclusive::Node) => "NO",
            Some(Exclusive::User) => "USER",
            Some(Exclusive::Mcs) => "MCS",
        }
    }

    /// scontrol's `Exclusive=` (the newer spelling of the same).
    pub fn exclusive(e: Option<Exclusive>) -> &'static str {
        match e {
            None => "NO",
            Some(Exclusive::Node) => "NODE",
            Some(Exclusive::User) => "USER",
            Some(Exclusive::Mcs) => "MCS",
        }
    }
}

/// `--signal`: send `signal` `secs` before the time limit, to the steps'
/// tasks or (with `B:`) only to the batch shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalSpec {
    pub signal: i32,
    pub secs: u32,
    pub batch_only: bool,
}

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
    #[serde(default)]
    pub comment: String,
    /// `--constraint` ("" = none).
    #[serde(default)]
    pub features: String,
    #[serde(default)]
    pub exclusive: Option<Exclusive>,
    #[serde(default)]
    pub no_requeue: bool,
    #[serde(default)]
    pub nice: i32,
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
}

impl NodeInfo {
    /// `State=` text as scontrol prints it, e.g. `IDLE`, `IDLE+DRAIN`,
    /// `DOWN+NOT_RESPONDING`.
    pub fn scontrol_state(&self) -> String {
        let mut s = self.base.name().to_string();
        if self.drain {
            s.push_str("+DRAIN");
        }
        if self.not_responding {
            s.push_str("+NOT_RESPONDING");
        }
        s
    }
}

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
}

/// Which step of a job an accounting row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepKind {
    /// The batch script (`N.batch`).
    Batch,
    /// The external step created with PrologFlags=Contain (`N.extern`).
    Extern,
    /// An srun step (`N.0`, `N.1`, ...).
    Numbered(u32),
}

/// Resources and outcome of one step, as `sacct` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcctStep {
    pub kind: StepKind,
    /// `batch`, `extern`, or the srun command name.
    pub name: String,
    pub state: JobState,
    pub exit_code: (i32, i32),
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    /// Compressed hostlist.
    pub nodes: String,
    pub num_nodes: u32,
    pub num_tasks: u32,
    pub alloc_cpus: u32,
    /// Peak resident memory of the step's processes, KiB (0 = not measured).
    pub max_rss_kb: u64,
    /// Peak virtual memory, KiB (0 = not measured).
    pub max_vmsize_kb: u64,
    /// CPU time used, milliseconds.
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    /// Where the step's srun runs (empty for batch steps).
    #[serde(default)]
    pub srun_host: String,
    #[serde(default)]
    pub srun_pid: u32,
}

/// One job as `sacct` shows it: the allocation plus its steps. Kept by the
/// controller for good (unlike squeue's view, which forgets after MinJobAge).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcctJob {
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub partition: String,
    /// Empty when no account was given.
    pub account: String,
    pub qos: String,
    pub cluster: String,
    pub state: JobState,
    /// Pending or terminal reason (`None`, `NonZeroExitCode`, ...).
    pub reason: String,
    pub exit_code: (i32, i32),
    /// Highest exit code of any step (`code:signal`).
    pub derived_exit_code: (i32, i32),
    pub submit_time: UnixTime,
    pub eligible_time: Option<UnixTime>,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    /// Compressed hostlist; empty while pending.
    pub nodes: String,
    pub num_nodes: u32,
    pub req_nodes: u32,
    pub alloc_cpus: u32,
    pub req_cpus: u32,
    pub num_tasks: u32,
    /// Requested memory: MiB per node, or per CPU when `mem_per_cpu`.
    pub req_mem_mb: u64,
    pub mem_per_cpu: bool,
    pub workdir: String,
    pub submit_line: String,
    pub priority: u32,
    pub restarts: u32,
    pub comment: String,
    pub steps: Vec<AcctStep>,
    /// Set for array tasks.
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// `--constraint` as shown ("" = none).
    #[serde(default)]
    pub constraints: String,
}
