//! Accounting records: one job as `sacct` shows it, its steps, and what
//! their processes used. The controller keeps them for good.

use serde::{Deserialize, Serialize};

use super::job::{ArrayTask, JobState, StepKind};
use super::time::UnixTime;

/// Resources a step's processes used, as the kernel reported at reaping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub max_rss_kb: u64,
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
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
