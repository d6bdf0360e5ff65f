//! The typed envelope: header plus the `Body` enum of every message canopy
//! speaks, between CLI and controller and along the relay tree.
//!
//! Naming: commands are imperative (`SubmitJob`, `Forward`), events past tense
//! (`StepFinished`), replies end in `Reply`. MessagePack encodes structs as maps
//! with named fields, so a field can be added with `#[serde(default)]` without
//! breaking a peer one version behind.

use serde::{Deserialize, Serialize};

use super::joblist::JobList;
use super::types::{ArrayTask, JobSubmit, NodeInfo, PartitionInfo, UnixTime};
use crate::tree::rankset::RankSet;

pub use crate::model::acct::Usage;
pub use crate::model::job::ExitStatus;
pub use crate::model::node::NodeResources;

/// Current protocol version; receivers accept this and the one before it.
pub const PROTOCOL_VERSION: u16 = 1;
/// Oldest protocol version still accepted.
pub const MIN_PROTOCOL_VERSION: u16 = 1;

/// Per-frame header, authenticated together with the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub version: u16,
    /// `Body::kind()` of the body, so policy can be applied before decoding it.
    pub kind: String,
    /// Correlation id: a reply carries the id of its request; 0 = unsolicited.
    pub corr: u64,
    /// Fresh random id per daemon (or CLI) start.
    pub boot_id: u64,
}

/// Machine-readable error class carried in [`ErrorReply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidPartition,
    NoDefaultPartition,
    InvalidNodeCount,
    InvalidTimeLimit,
    NodeConfigUnavailable,
    InvalidJobId,
    AlreadyDone,
    InvalidNodeName,
    PermissionDenied,
    QueueFull,
    NotReady,
    Internal,
    InvalidArraySpec,
    DependencyProblem,
    /// slurm.conf could not be read, or needs a restart to apply.
    InvalidConfig,
    /// The user's RPC rate limit is exceeded (Slurm's
    /// SLURMCTLD_COMMUNICATIONS_BACKOFF): wait, then send it again.
    Backoff,
    /// Slurm's ESLURM_NODES_BUSY ("Requested nodes are busy").
    NodesBusy,
    /// Slurm's ESLURM_INVALID_NODE_STATE.
    InvalidNodeState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PongReply {
    pub host: String,
    pub boot_id: u64,
    pub started: UnixTime,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitReply {
    pub job_id: u32,
    /// Set for `--test-only`: the estimate instead of a queued job.
    #[serde(default)]
    pub will_run: Option<WillRun>,
}

/// When and where a `--test-only` job would start (nothing is queued).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WillRun {
    pub start_time: UnixTime,
    pub cpus: u32,
    /// Compressed hostlist.
    pub nodes: String,
    pub partition: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobQuery {
    /// Empty = all jobs.
    pub job_ids: Vec<u32>,
    /// Include jobs that finished within MinJobAge.
    pub include_finished: bool,
    /// Leave out each job's paths, command and submit line: a listing such
    /// as squeue's default never shows them.
    #[serde(default)]
    pub brief: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeQuery {
    /// Empty = all nodes.
    pub names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub job_ids: Vec<u32>,
    /// `None` = cancel the job; `Some(sig)` = only deliver the signal.
    pub signal: Option<i32>,
    /// `-b`: signal only the batch shell.
    pub batch_only: bool,
    /// The ids are exact job ids: an array id means only that task, not
    /// (as a user-typed id does) the whole array.
    #[serde(default)]
    pub exact: bool,
}

/// `scancel J.S`: cancel (`signal: None`) or signal one srun step of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCancel {
    pub job_id: u32,
    pub step_id: u32,
    pub signal: Option<i32>,
    /// Cancel with SIGTERM first and SIGKILL after KillWait (srun's `-K`
    /// and `-W` ending their own step), not SIGKILL at once.
    #[serde(default)]
    pub terminate: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelReply {
    /// Per requested id: `None` = done, `Some(message)` = the error for that id.
    pub results: Vec<(u32, Option<String>)>,
}

/// `scontrol hold/release/uhold/update JobId=...`: what to change on each job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobUpdate {
    pub job_ids: Vec<u32>,
    /// `Some(true)` hold, `Some(false)` release.
    pub hold: Option<bool>,
    /// `uhold`: a user hold even when an operator asks.
    pub user_hold: bool,
    /// Minutes; `Some(0)` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    pub partition: Option<String>,
    pub num_nodes: Option<u32>,
    pub name: Option<String>,
    /// Operators only; 0 holds the job.
    pub priority: Option<u32>,
    /// `requeue` / `requeuehold`: back to PENDING under the same id.
    #[serde(default)]
    pub requeue: Option<RequeueKind>,
    /// `suspend` (true) / `resume` (false); operators only.
    #[serde(default)]
    pub suspend: Option<bool>,
    /// The ids are raw job ids, already resolved by the client (`A_T`
    /// names): an array id is not widened to all its tasks.
    #[serde(default)]
    pub exact: bool,
    /// `scontrol top`: move the jobs ahead of their owner's other pending
    /// jobs in the same partition.
    #[serde(default)]
    pub top: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequeueKind {
    /// Eligible again at once.
    Requeue,
    /// Requeued and held.
    Hold,
}

/// `scontrol update NodeName=... State=...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeUpdateState {
    Drain,
    Down,
    Resume,
    Undrain,
    Idle,
    /// Power down once idle (`scontrol power down`).
    PowerDown,
    /// Drain, then power down once idle (`scontrol power down asap`).
    PowerDownAsap,
    /// Power down at once, requeueing its jobs (`scontrol power down force`).
    PowerDownForce,
    /// Power up a powered-down node (`scontrol power up`).
    PowerUp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeUpdate {
    /// Hostlist expression.
    pub nodes: String,
    pub state: Option<NodeUpdateState>,
    pub reason: Option<String>,
}

/// One actor as `canopy status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActorStatus {
    pub kind: String,
    pub name: String,
    pub state: String,
    pub mailbox_depth: i64,
    pub handled: u64,
}

/// One node's place in the relay tree, as seen by the controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreePlace {
    pub node: String,
    pub rank: u32,
    /// Natural parent by topology (`None` = the controller).
    pub parent: Option<String>,
    /// Where it is attached now (`None` = controller or unknown).
    pub attached_to: Option<String>,
    pub live: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub controller: String,
    pub tree_width: u32,
    pub actors: Vec<ActorStatus>,
    pub tree: Vec<TreePlace>,
}

/// Traffic and handling time for one message kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStat {
    pub kind: String,
    pub count: u64,
    pub bytes: u64,
    /// Total time spent answering (client requests only), microseconds.
    pub total_us: u64,
}

/// Node counts by state, as the controller sees them now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCounts {
    pub total: u32,
    pub idle: u32,
    pub mixed: u32,
    pub allocated: u32,
    pub down: u32,
    pub drain: u32,
    pub unknown: u32,
    pub not_responding: u32,
}

/// Controller statistics (`canopy stats`, sdiag, the load harness).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CtldStats {
    pub started: UnixTime,
    /// Frames and bytes received from node links (heartbeats, events, replies).
    pub node_frames_in: u64,
    pub node_bytes_in: u64,
    /// Frames and bytes received from clients (CLI and tools).
    pub client_frames_in: u64,
    pub client_bytes_in: u64,
    pub by_kind: Vec<KindStat>,
    pub nodes: NodeCounts,
    pub jobs_pending: u32,
    pub jobs_running: u32,
    pub jobs_submitted: u64,
    pub jobs_started: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    pub jobs_cancelled: u64,
    /// Scheduling passes and their cost, microseconds.
    #[serde(default)]
    pub sched_cycles: u64,
    #[serde(default)]
    pub sched_last_us: u64,
    #[serde(default)]
    pub sched_max_us: u64,
    #[serde(default)]
    pub sched_total_us: u64,
    /// When the job counters were last reset (controller start).
    #[serde(default)]
    pub now: UnixTime,
    /// The controller port's connection limit (`conmgr_max_connections`),
    /// connections open now, the most open at once, and how many were
    /// refused at the limit since start. (Default: peers before these
    /// fields report zeros.)
    #[serde(default)]
    pub connections_max: u64,
    #[serde(default)]
    pub connections_current: u64,
    #[serde(default)]
    pub connections_peak: u64,
    #[serde(default)]
    pub connections_refused: u64,
    /// Credentials refused since start, by reason (bad_signature,
    /// unknown_key, expired, future_dated, before_start, replayed,
    /// replay_cache_full).
    #[serde(default)]
    pub auth_refused_by: Vec<(String, u64)>,
    /// Bad peers since start: unreadable frames, rejected credentials,
    /// connections that did not authenticate in time, idle connections
    /// closed, node-daemon messages from other uids, and large
    /// unauthenticated frames refused for want of budget.
    #[serde(default)]
    pub bad_frames: u64,
    #[serde(default)]
    pub auth_rejected: u64,
    #[serde(default)]
    pub auth_timeouts: u64,
    #[serde(default)]
    pub idle_closed: u64,
    #[serde(default)]
    pub not_daemon: u64,
    #[serde(default)]
    pub preauth_refused: u64,
    /// Per-user RPC rate limiting (`rl_enable`): its settings, users
    /// tracked, RPCs told to back off, RPCs let through because the table
    /// was full, and the users limited most `(uid, count)`.
    #[serde(default)]
    pub rl_enabled: bool,
    #[serde(default)]
    pub rl_bucket_size: u32,
    #[serde(default)]
    pub rl_refill_rate: u32,
    #[serde(default)]
    pub rl_refill_period: u32,
    #[serde(default)]
    pub rl_table_size: u32,
    #[serde(default)]
    pub rl_users: u64,
    #[serde(default)]
    pub rl_limited: u64,
    #[serde(default)]
    pub rl_table_full: u64,
    #[serde(default)]
    pub rl_top: Vec<(u32, u64)>,
    /// The backfill scheduler's counters (sdiag's "Backfilling stats").
    #[serde(default)]
    pub backfill: BackfillDiag,
}

/// Backfill figures for sdiag: counts from the core, cycle times (µs)
/// measured by the controller around each pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackfillDiag {
    pub backfilled: u64,
    pub cycles: u64,
    pub last_cycle_when: Option<UnixTime>,
    pub last_us: u64,
    pub max_us: u64,
    pub total_us: u64,
    pub last_depth: u32,
    pub last_depth_try: u32,
    pub depth_sum: u64,
    pub depth_try_sum: u64,
    pub last_queue_len: u32,
    pub queue_len_sum: u64,
    pub last_table_size: u32,
    pub table_size_sum: u64,
}

/// Fan a no-op out to nodes through the relay tree (operators only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BroadcastRequest {
    /// Hostlist; `None` = every node.
    pub nodes: Option<String>,
    pub budget_ms: u64,
}

/// How a broadcast went: exactly one outcome per target is checked here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BroadcastReply {
    pub targets: u64,
    pub ok: u64,
    /// Failed node sets (hostlists) with their reasons.
    pub failed: Vec<(String, String)>,
    /// Targets with no outcome at all (must be 0).
    pub missing: u64,
    /// Outcomes beyond one per target (must be 0).
    pub duplicates: u64,
    pub elapsed_us: u64,
}

/// What a node knows about one job it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobOnNode {
    Running,
    /// The batch script ended but the controller has not cleaned the job up.
    BatchFinished(ExitStatus),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    pub job_id: u32,
    pub state: JobOnNode,
}

/// A node daemon introducing itself to its parent (forwarded up to the
/// controller as `Register`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub node: String,
    pub rank: u32,
    pub boot_id: u64,
    pub started: UnixTime,
    pub version: String,
    pub resources: NodeResources,
    pub jobs: Vec<JobReport>,
}

/// The controller's answer to a joining dynamic node: its rank, its line as the controller
/// keeps it, the relay tree's shape (`fixed`, `capacity`: see `tree::topology`) and the lines
/// of its ancestors, so that it can find its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeJoined {
    pub rank: u32,
    pub line: String,
    pub fixed: u32,
    pub capacity: u32,
    /// (rank, node line), nearest first.
    pub ancestors: Vec<(u32, String)>,
}

/// A node's Hello on its way up to the controller, with where it is attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub hello: Hello,
    /// Rank of the relay holding the node's link (`None` = the controller).
    pub parent: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// Who accepted the link: a node name or `controller`.
    pub parent: String,
    /// Seconds between heartbeats expected on an idle link.
    pub heartbeat_ms: u64,
}

/// Subtree liveness change, sent upward only when something changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthDelta {
    /// Ranks that became reachable through the sender.
    pub added: RankSet,
    /// Ranks that stopped being reachable through the sender.
    pub removed: RankSet,
}

/// Step events flowing up from a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchFinished {
    pub job_id: u32,
    pub node: String,
    pub status: ExitStatus,
    #[serde(default)]
    pub usage: Usage,
}

/// A node's measurement of an srun step whose tasks there have all ended,
/// read from the step's cgroups just before they are removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepUsageReport {
    pub job_id: u32,
    pub step_id: u32,
    pub usage: crate::model::acct::NodeUsage,
}

/// `sstat`: the running steps of one job (`step: None` = as `sstat -j J`
/// picks them, see `all`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStatRequest {
    pub job_id: u32,
    /// `J.S`; `J.batch` is [`StatStep::Batch`].
    pub step: Option<StatStep>,
    /// `-a`: every running step, the batch step included.
    pub all: bool,
}

/// A step `sstat` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StatStep {
    Batch,
    Numbered(u32),
}

/// One running step's usage now, summed over its nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStat {
    pub job_id: u32,
    pub step: StatStep,
    /// The nodes that answered, compressed.
    pub nodes: String,
    pub totals: crate::model::acct::StepTotals,
    /// The step's processes, per node (`sstat -i`).
    pub pids: Vec<(String, Vec<u32>)>,
}

/// Everything the node needs to start a job's batch script (or, on the
/// non-batch nodes, just to hold the allocation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobLaunch {
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub partition: String,
    pub cluster: String,
    /// Node that runs the script.
    pub batch_host: String,
    /// Allocated nodes in order, compressed.
    pub nodelist: String,
    pub num_nodes: u32,
    /// CPUs allocated per node, in nodelist order.
    pub cpus_per_node: Vec<u32>,
    /// Tasks per node, in nodelist order.
    pub tasks_per_node: Vec<u32>,
    pub ntasks: u32,
    /// Whether -n / --ntasks-per-node was given (SLURM_NTASKS is only set then).
    pub ntasks_set: bool,
    pub cpus_per_task: Option<u32>,
    pub mem_per_node_mb: Option<u64>,
    pub mem_per_cpu_mb: Option<u64>,
    pub time_limit_min: Option<u32>,
    pub script: String,
    #[serde(default)]
    pub script_args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: String,
    pub submit_dir: String,
    pub submit_host: String,
    pub stdout: String,
    pub stderr: Option<String>,
    pub stdin: Option<String>,
    pub start_time: UnixTime,
    pub restarts: u32,
    /// An srun/salloc allocation: nothing runs until steps are launched.
    #[serde(default)]
    pub interactive: bool,
    /// Set for array tasks (SLURM_ARRAY_*, `%A`/`%a`).
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// Append to the output files instead of truncating them
    /// (`--open-mode=append`, and every run after a requeue).
    #[serde(default)]
    pub open_append: bool,
    /// `-A` (SLURM_JOB_ACCOUNT), if given.
    #[serde(default)]
    pub account: Option<String>,
    /// What each node gives the job, in nodelist order (as runs of equal shares).
    #[serde(default)]
    pub held: super::shares::Shares,
    /// GRES, GPU and binding options as asked (for the `SLURM_*` echoes).
    #[serde(default)]
    pub resources: crate::model::tres::ResourceRequest,
}

/// A job's or step's resources on one node, by identity: what the node
/// confines it to (cpuset, memory limit, devices) and tells it about
/// (`SLURM_JOB_GPUS`, `CUDA_VISIBLE_DEVICES`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeShare {
    /// Slurm's abstract CPU ids (the node maps them to the OS's numbering).
    pub cpu_ids: Vec<u32>,
    /// MiB; 0 = no limit.
    pub mem_mb: u64,
    pub gres: Vec<crate::model::tres::GresAlloc>,
}

impl NodeShare {
    /// Node-local GPU indices, ascending.
    pub fn gpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .gres
            .iter()
            .filter(|g| g.name == "gpu")
            .flat_map(|g| g.indices.iter().copied())
            .collect();
        v.sort_unstable();
        v
    }
}

/// What a node's Prolog and Epilog are told about a job (slurmd's job
/// environment and the credential's fields): a launch without its script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScriptJob {
    pub job_id: u32,
    pub cluster: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub partition: String,
    pub nodelist: String,
    pub num_nodes: u32,
    pub cpus_per_node: Vec<u32>,
    pub ntasks: u32,
    pub workdir: String,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub stdin: Option<String>,
    pub restarts: u32,
    pub account: Option<String>,
}

impl ScriptJob {
    pub fn from_launch(l: &JobLaunch) -> ScriptJob {
        ScriptJob {
            job_id: l.job_id,
            cluster: l.cluster.clone(),
            user: l.user.clone(),
            uid: l.uid,
            gid: l.gid,
            partition: l.partition.clone(),
            nodelist: l.nodelist.clone(),
            num_nodes: l.num_nodes,
            cpus_per_node: l.cpus_per_node.clone(),
            ntasks: l.ntasks,
            workdir: l.workdir.clone(),
            stdout: (!l.interactive).then(|| l.stdout.clone()),
            stderr: l.stderr.clone(),
            stdin: l.stdin.clone(),
            restarts: l.restarts,
            account: l.account.clone(),
        }
    }
}

/// What a node daemon runs as Prolog and Epilog, and how (sent again when
/// `scontrol reconfigure` changes it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeScriptConf {
    pub prolog: Option<String>,
    pub epilog: Option<String>,
    /// `PrologEpilogTimeout` (seconds); `None` waits for ever.
    pub timeout_s: Option<u32>,
    /// `PrologFlags=Serial`.
    pub serial: bool,
}

/// Which node script failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeScript {
    Prolog,
    Epilog,
}

/// node → controller: a Prolog or Epilog failed (non-zero exit, a signal,
/// the timeout, or it could not run) on `node` for job `job_id`; the
/// controller drains the node and, for a Prolog, requeues the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptFailure {
    pub job_id: u32,
    pub node: String,
    pub script: NodeScript,
    /// What happened, for the log.
    pub detail: String,
}

/// `srun`: run a step inside a running job's allocation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRequest {
    pub job_id: u32,
    /// `-N`: the first N nodes of the allocation (default: all).
    pub nodes: Option<u32>,
    /// `-n` (default: the job's task count on those nodes).
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: String,
    /// Where node daemons send task output and exit statuses.
    pub io_addr: String,
    /// Echoed by the nodes so srun knows their connections belong to this step.
    pub io_token: u64,
    /// `-o`/`-e` per-task file patterns (`%t`, `%j`, ...); `None` = stream to srun.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// Which tasks read srun's standard input (`-i`).
    #[serde(default)]
    pub stdin: StdinTarget,
    /// `-w`: nodes of the allocation the step must use (hostlist).
    #[serde(default)]
    pub nodelist: Option<String>,
    /// `-x`: nodes of the allocation the step must not use (hostlist).
    #[serde(default)]
    pub exclude: Option<String>,
    /// srun's host and pid, for `scontrol show step`.
    #[serde(default)]
    pub srun_host: String,
    #[serde(default)]
    pub srun_pid: u32,
    /// `-i` with `%` fields (`in.%t`): each task reads its own file, opened
    /// on its node.
    #[serde(default)]
    pub stdin_pattern: Option<String>,
    /// `--pty`: task 0 runs on a pseudo-terminal of this size.
    #[serde(default)]
    pub pty: Option<WindowSize>,
    /// `--multi-prog`: each task's program, from srun's file (`argv` then
    /// holds the file's name).
    #[serde(default)]
    pub multi_prog: Option<MultiProg>,
    /// `--open-mode=append` (or `SLURM_OPEN_MODE=a`): output files are
    /// appended to rather than truncated first.
    #[serde(default)]
    pub open_append: bool,
    /// The step's GRES, GPUs, shape and binding options.
    #[serde(default)]
    pub resources: crate::model::tres::ResourceRequest,
}

/// A parsed `--multi-prog` file (see `exec::multiprog`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiProg {
    /// The file's name, for error messages.
    pub file: String,
    pub lines: Vec<MultiProgLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiProgLine {
    /// Line number in the file, for error messages.
    pub line: u32,
    /// Inclusive rank ranges; `None` is `*`.
    pub ranks: Option<Vec<(u32, u32)>>,
    /// Program and arguments, `%t`/`%o` not yet filled in.
    pub argv: Vec<String>,
}

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSize {
    pub rows: u16,
    pub cols: u16,
}

impl Default for WindowSize {
    /// What a terminal without a size is taken to be.
    fn default() -> Self {
        WindowSize { rows: 24, cols: 80 }
    }
}

/// Which of a step's tasks get srun's standard input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StdinTarget {
    /// Every task reads a copy (Slurm's default, `-i all`).
    #[default]
    All,
    /// Only this task (`-i <taskid>`); the others read /dev/null.
    Task(u32),
    /// No task (`-i none`): every task reads /dev/null.
    None,
}

impl StdinTarget {
    pub fn includes(self, task: u32) -> bool {
        match self {
            StdinTarget::All => true,
            StdinTarget::Task(t) => t == task,
            StdinTarget::None => false,
        }
    }
}

/// Where a step runs, as the controller laid it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLaunched {
    pub job_id: u32,
    pub step_id: u32,
    /// Compressed hostlist of the step's nodes, in order.
    pub nodelist: String,
    pub tasks_per_node: Vec<u32>,
}

/// What a node needs to start its share of a step's tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLaunch {
    pub job_id: u32,
    pub step_id: u32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: String,
    pub nodelist: String,
    pub tasks_per_node: Vec<u32>,
    pub cpus_per_task: Option<u32>,
    pub job_nodelist: String,
    pub partition: String,
    pub cluster: String,
    pub io_addr: String,
    pub io_token: u64,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// Set when the job is an array task (`%A`/`%a`, SLURM_ARRAY_*).
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// Which tasks get a pipe for srun's standard input.
    #[serde(default)]
    pub stdin: StdinTarget,
    /// `-i` pattern opened per task on the node (see [`StepRequest`]).
    #[serde(default)]
    pub stdin_pattern: Option<String>,
    /// `--pty`: task 0's pseudo-terminal size; the other tasks' output is
    /// discarded, as in Slurm.
    #[serde(default)]
    pub pty: Option<WindowSize>,
    /// `--multi-prog`: per-task programs, checked against the task count.
    #[serde(default)]
    pub multi_prog: Option<MultiProg>,
    /// Append to output files (see [`StepRequest`]).
    #[serde(default)]
    pub open_append: bool,
    /// What each of the step's nodes gives it, in nodelist order (as runs of equal
    /// shares).
    #[serde(default)]
    pub held: super::shares::Shares,
    /// The step's GRES, GPU and binding options.
    #[serde(default)]
    pub resources: crate::model::tres::ResourceRequest,
}

/// Output of one task, streamed to srun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOutput {
    pub task: u32,
    pub stderr: bool,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// Standard input for a step's tasks, forwarded by srun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStdin {
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// A node's I/O link to srun introduces itself with this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepIoHello {
    pub job_id: u32,
    pub step_id: u32,
    pub token: u64,
    pub node: String,
    /// Global ranks of the tasks this node runs.
    pub tasks: Vec<u32>,
}

/// srun reports a finished step for accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepComplete {
    pub job_id: u32,
    pub step_id: u32,
    pub exit: ExitStatus,
    pub start_time: UnixTime,
    /// For an allocation srun created itself: end the job too.
    pub release: bool,
}

/// A command fanned out to a set of nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodeCommand {
    /// Does nothing; used to measure fan-out.
    Noop,
    Launch(Box<JobLaunch>),
    /// Deliver a signal to a job's processes.
    Signal {
        job_id: u32,
        signal: i32,
        batch_only: bool,
        /// Only the srun steps' tasks, not the batch shell (`--signal`
        /// without `B:`).
        #[serde(default)]
        steps_only: bool,
        /// Only this srun step's tasks (`scancel -s SIG J.S`).
        #[serde(default)]
        step: Option<u32>,
    },
    /// Cancel one srun step here: its kill note to srun, then SIGKILL to
    /// its tasks, as slurmstepd does for `scancel J.S`; or, with
    /// `kill_wait_s`, SIGCONT+SIGTERM first and SIGKILL that much later.
    KillStep {
        job_id: u32,
        step_id: u32,
        #[serde(default)]
        kill_wait_s: Option<u32>,
    },
    /// End a job on the node: SIGCONT+SIGTERM, SIGKILL after `kill_wait_s`,
    /// then forget it.
    Terminate {
        job_id: u32,
        kill_wait_s: u32,
        /// Why the job is being killed, when it did not end by itself: the
        /// node writes Slurm's `*** JOB N ON node CANCELLED AT ... ***` line
        /// to the batch script's stderr.
        #[serde(default)]
        cause: Option<KillCause>,
        /// How the job ended, for the Epilog's `SLURM_JOB_EXIT_CODE`.
        #[serde(default)]
        exit: Option<ExitStatus>,
    },
    /// Send a fresh `Register` upward (after a relay re-attached, or the
    /// controller restarted).
    Reregister,
    /// Start this node's tasks of an srun step.
    RunStep(Box<StepLaunch>),
    /// Re-read the key files (`scontrol reconfigure` after a key rotation).
    ReloadKeys,
    /// `PrologFlags=Alloc`: run the Prolog for this job now, before its
    /// launch; answered `Ack`, or `PrologFailed` (the failure itself comes
    /// up as a [`ScriptFailure`]).
    Prolog(Box<ScriptJob>),
    /// Run these Prolog and Epilog from now on (`scontrol reconfigure`).
    SetScripts(Box<NodeScriptConf>),
    /// `sstat`: this node's current usage of these running steps of a job.
    StatSteps {
        job_id: u32,
        steps: Vec<StatStep>,
    },
    /// Dynamic node `node` was deleted (`scontrol delete nodename=`): its daemon stops, so
    /// that its link does not hold the rank the next created node is given. A daemon of
    /// another name at that rank (the node created since) ignores it.
    Retire {
        node: String,
    },
    /// `canopy top`: each daemon's relay answers from its actors' published
    /// counters (not through the agent), and every hop folds its subtree's
    /// answers into one bounded summary (`console::top`).
    TopActors(crate::console::top::TopQuery),
    /// `canopy exec`: run a command here as the caller; answered `Exec`.
    Exec(Box<super::exec::ExecSpec>),
    /// Ctrl-C on `canopy exec`: kill the run `token` here if `uid` owns it
    /// (or an operator asks); answered `Ack`.
    ExecInterrupt {
        token: u64,
        uid: u32,
        operator: bool,
    },
    /// `canopy tree --node`: what this hop's relay knows of `rank` (its link to it, its live
    /// set, its own parent link); answered by the relay itself, never queued behind the agent.
    HopView {
        rank: u32,
    },
    /// `canopy ping`: each hop stamps it; the target's agent answers `Ack`.
    Probe,
    /// `canopy trace fanout`: this node's record of broadcast `origin`
    /// (answered by its relay from its ring, never by the agent).
    FanoutTrace {
        origin: u64,
    },
    /// `canopy debug`: raise (or with no flags, clear) this daemon's log
    /// detail; answered by the relay with `NodeReply::Debug`.
    SetDebug(DebugSet),
    /// `canopy debug --show`: what is raised here now.
    ShowDebug,
}

/// `canopy debug` as it travels to each node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugSet {
    /// Checked flag names; empty = revert everything now.
    pub flags: Vec<String>,
    pub level: String,
    pub for_secs: u64,
    /// Wall-clock second the asker computed for the revert (shown, not used
    /// as the deadline: each daemon counts `for_secs` on its own clock).
    pub until: UnixTime,
}

/// Why a running job is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KillCause {
    Cancelled,
    TimeLimit,
    NodeFailure,
    /// `scontrol requeue` of a running job.
    Requeue,
    /// Preempted (cancelled or requeued) for a more important job.
    Preempted,
}

impl KillCause {
    /// What follows `CANCELLED AT <time>` in Slurm's banner.
    pub fn suffix(self) -> &'static str {
        match self {
            KillCause::Cancelled => "",
            KillCause::TimeLimit => " DUE TO TIME LIMIT",
            KillCause::NodeFailure => " DUE TO NODE FAILURE",
            KillCause::Requeue => " DUE TO JOB REQUEUE",
            KillCause::Preempted => " DUE TO PREEMPTION",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodeReply {
    Ack,
    Launched,
    /// Signal delivered to `processes` processes (0 = job not running there).
    Signalled {
        processes: u32,
    },
    Terminated,
    /// This node's Prolog failed; the controller hears why separately.
    PrologFailed,
    /// `StatSteps`: each asked-for step running here, its usage and pids.
    StepStats(Vec<(StatStep, crate::model::acct::NodeUsage, Vec<u32>)>),
    /// `TopActors`: a subtree's folded summary.
    Top(Box<crate::console::top::TopSummary>),
    /// `canopy exec`: how the command ended here and what it printed.
    Exec(super::exec::ExecOutput),
    /// `HopView`'s answer.
    HopView(crate::console::tree::HopReport),
    /// A probe's stamps, controller first (each relay prepends its own).
    Probe(crate::console::trace::ProbePath),
    /// A relay's record of one broadcast (`None`: it has none).
    FanoutRecord(Option<Box<crate::console::trace::FanoutRecord>>),
    /// The flags raised on this daemon now.
    Debug(Vec<crate::console::debug::Raised>),
}

/// The outcome for a group of targets that all got the same result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub ranks: RankSet,
    pub result: Result<NodeReply, String>,
}

/// A command addressed to a node set, travelling down the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forward {
    /// Chosen by the hop that sent this frame; echoed in the reply.
    pub id: u64,
    pub targets: RankSet,
    /// Time left for the whole subtree to answer, in milliseconds.
    pub budget_ms: u64,
    pub cmd: NodeCommand,
    /// The controller's id for the whole broadcast, the same at every hop
    /// (`canopy trace fanout` finds each relay's record of it by this);
    /// 0 from a peer that predates it.
    #[serde(default)]
    pub origin: u64,
}

/// Exactly one outcome per target of the matching [`Forward`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForwardReply {
    pub id: u64,
    pub outcomes: Vec<Outcome>,
}

/// Every message canopy speaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Body {
    Ok,
    Error(ErrorReply),

    // CLI <-> controller
    Ping,
    Pong(PongReply),
    SubmitJob(Box<JobSubmit>),
    SubmitReply(SubmitReply),
    QueryJobs(JobQuery),
    Jobs(JobList),
    QueryNodes(NodeQuery),
    Nodes(Vec<NodeInfo>),
    QueryPartitions,
    Partitions(Vec<PartitionInfo>),
    CancelJobs(CancelRequest),
    CancelReply(CancelReply),
    UpdateNodes(NodeUpdate),
    QueryStatus,
    Status(Box<StatusReport>),
    QueryStats,
    Stats(Box<CtldStats>),
    LaunchStep(Box<StepRequest>),
    StepLaunched(StepLaunched),
    StepComplete(StepComplete),
    StepIoHello(StepIoHello),
    TaskOutput(TaskOutput),
    TaskExit {
        task: u32,
        status: ExitStatus,
    },
    /// srun → node, on a step's I/O link: bytes for the tasks reading
    /// standard input; an empty `data` closes their stdin.
    StepStdin(StepStdin),
    /// srun → node, on a step's I/O link: signal every task of the step here.
    SignalTasks {
        signal: i32,
    },
    /// node → srun, on a step's I/O link: the step is being killed (the job
    /// or the step was cancelled); srun says so, as Slurm's does.
    StepAborted,
    /// srun → node, on a step's I/O link: srun's terminal was resized
    /// (`--pty`); the node resizes the task's pty.
    WindowChange(WindowSize),
    /// `scancel J.S`; answered with `CancelReply`.
    CancelStep(StepCancel),
    UpdateJobs(JobUpdate),
    /// Per job: `None` = done, `Some(message)` = why not.
    UpdateJobsReply(CancelReply),
    QueryAcct(AcctQuery),
    Acct(Vec<crate::wire::types::AcctJob>),
    Broadcast(BroadcastRequest),
    BroadcastReply(BroadcastReply),
    /// `scontrol reconfigure` (operators): re-read slurm.conf; `Ok` or `Error`.
    Reconfigure,
    /// sprio: pending jobs' priority factors.
    QueryPriority(crate::wire::priority::PriorityQuery),
    Priority(Box<crate::wire::priority::PriorityReport>),
    /// sshare: associations' shares and usage.
    QueryShares(crate::wire::priority::ShareQuery),
    Shares(Box<crate::wire::priority::ShareReport>),
    /// sacctmgr add/modify/delete; answered with `AcctMgrReply`.
    AcctMgr(Box<AcctMgrRequest>),
    AcctMgrReply(AcctMgrReply),
    /// sacctmgr show/list: the whole association database.
    QueryAccounts,
    Accounts(Box<crate::model::assoc::AssocDb>),
    /// `scontrol create reservation` (operators); `ResvCreated` or `Error`.
    CreateResv(crate::wire::resv::ResvSpec),
    /// The name of the reservation made.
    ResvCreated(String),
    /// `scontrol update reservation` (operators); `Ok` or `Error`.
    UpdateResv(crate::wire::resv::ResvSpec),
    /// `scontrol delete reservation` (operators); `Ok` or `Error`.
    DeleteResv(String),
    /// `scontrol show reservation`, `sinfo -T`; answered with `Reservations`.
    QueryResv,
    Reservations(Vec<crate::model::reservation::Reservation>),
    /// `scontrol show licenses`; answered with `Licenses`.
    QueryLicenses,
    Licenses(Vec<crate::wire::resv::LicenseInfo>),
    /// `scontrol create NodeName=...` (operators): the node line; `Ok` or `Error`.
    CreateNode(String),
    /// `scontrol delete nodename=<hostlist>` (operators); `Ok` or `Error`.
    DeleteNode(String),
    /// `canopy-noded -Z` (the daemons' identity): its node line; `NodeJoined` or `Error`.
    JoinNode(String),
    NodeJoined(Box<NodeJoined>),

    // node daemons and relays
    Hello(Hello),
    Welcome(Welcome),
    /// A Hello forwarded upward by a relay.
    Register(Registration),
    Keepalive,
    Health(HealthDelta),
    BatchFinished(BatchFinished),
    /// A Prolog or Epilog failed on a node (travels up like `BatchFinished`).
    ScriptFailed(ScriptFailure),
    /// node → controller (up the tree): an srun step's usage on a node.
    StepUsage(StepUsageReport),
    /// `sstat`; answered with `StepStats` (or `Error`).
    QueryStepStats(StepStatRequest),
    StepStats(Vec<StepStat>),
    Forward(Box<Forward>),
    ForwardReply(ForwardReply),

    // operator console (issue 18)
    /// `canopy top` (operators): the busiest actors of every daemon in scope.
    QueryTop(crate::console::top::TopQuery),
    Top(Box<crate::console::top::TopReport>),
    /// `canopy stats`, sdiag: the latency histograms; `reset` (operators)
    /// empties them after reading.
    QueryLatency(LatencyQuery),
    Latency(Box<crate::console::latency::LatencyReport>),
    /// `canopy exec`; answered with `ExecReply` (or `Error`).
    Exec(super::exec::ExecRequest),
    ExecReply(Box<super::exec::ExecReport>),
    /// Ctrl-C on `canopy exec`; answered `Ok`.
    ExecInterrupt(super::exec::ExecInterrupt),
    /// `canopy tree`: subtree health from what the controller holds; answered with `Tree`.
    QueryTree(crate::console::tree::TreeQuery),
    Tree(Box<crate::console::tree::TreeReport>),
    /// `canopy events`; answered with `Events` (held up to `wait_ms` when following).
    QueryEvents(crate::console::events::EventQuery),
    Events(Box<crate::console::events::EventReport>),
    /// `canopy ping` (operators); answered with `ProbeReply`.
    Probe(ProbeRequest),
    ProbeReply(Box<ProbeReport>),
    /// `canopy trace fanout` (operators); answered with `FanoutTraceReply`.
    TraceFanout(FanoutTraceRequest),
    FanoutTraceReply(Box<FanoutTraceReport>),
    /// `canopy debug` (operators); answered with `DebugReply`.
    Debug(DebugRequest),
    DebugReply(DebugReport),
}

/// What `canopy stats` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyQuery {
    #[serde(default)]
    pub reset: bool,
}

impl Body {
    /// Stable message-kind name (also used for per-kind statistics and policy).
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Ok => "Ok",
            Body::Error(_) => "Error",
            Body::Ping => "Ping",
            Body::Pong(_) => "Pong",
            Body::SubmitJob(_) => "SubmitJob",
            Body::SubmitReply(_) => "SubmitReply",
            Body::QueryJobs(_) => "QueryJobs",
            Body::Jobs(_) => "Jobs",
            Body::QueryNodes(_) => "QueryNodes",
            Body::Nodes(_) => "Nodes",
            Body::QueryPartitions => "QueryPartitions",
            Body::Partitions(_) => "Partitions",
            Body::CancelJobs(_) => "CancelJobs",
            Body::CancelReply(_) => "CancelReply",
            Body::UpdateNodes(_) => "UpdateNodes",
            Body::QueryStatus => "QueryStatus",
            Body::Status(_) => "Status",
            Body::QueryStats => "QueryStats",
            Body::QueryPriority(_) => "QueryPriority",
            Body::Priority(_) => "Priority",
            Body::QueryShares(_) => "QueryShares",
            Body::Shares(_) => "Shares",
            Body::LaunchStep(_) => "LaunchStep",
            Body::StepLaunched(_) => "StepLaunched",
            Body::StepComplete(_) => "StepComplete",
            Body::StepIoHello(_) => "StepIoHello",
            Body::TaskOutput(_) => "TaskOutput",
            Body::TaskExit { .. } => "TaskExit",
            Body::StepStdin(_) => "StepStdin",
            Body::SignalTasks { .. } => "SignalTasks",
            Body::StepAborted => "StepAborted",
            Body::WindowChange(_) => "WindowChange",
            Body::CancelStep(_) => "CancelStep",
            Body::UpdateJobs(_) => "UpdateJobs",
            Body::UpdateJobsReply(_) => "UpdateJobsReply",
            Body::QueryAcct(_) => "QueryAcct",
            Body::Acct(_) => "Acct",
            Body::Stats(_) => "Stats",
            Body::Broadcast(_) => "Broadcast",
            Body::Reconfigure => "Reconfigure",
            Body::AcctMgr(_) => "AcctMgr",
            Body::AcctMgrReply(_) => "AcctMgrReply",
            Body::QueryAccounts => "QueryAccounts",
            Body::Accounts(_) => "Accounts",
            Body::CreateResv(_) => "CreateResv",
            Body::ResvCreated(_) => "ResvCreated",
            Body::UpdateResv(_) => "UpdateResv",
            Body::DeleteResv(_) => "DeleteResv",
            Body::QueryResv => "QueryResv",
            Body::Reservations(_) => "Reservations",
            Body::QueryLicenses => "QueryLicenses",
            Body::Licenses(_) => "Licenses",
            Body::CreateNode(_) => "CreateNode",
            Body::DeleteNode(_) => "DeleteNode",
            Body::JoinNode(_) => "JoinNode",
            Body::NodeJoined(_) => "NodeJoined",
            Body::BroadcastReply(_) => "BroadcastReply",
            Body::Hello(_) => "Hello",
            Body::Welcome(_) => "Welcome",
            Body::Register(_) => "Register",
            Body::Keepalive => "Keepalive",
            Body::Health(_) => "Health",
            Body::BatchFinished(_) => "BatchFinished",
            Body::ScriptFailed(_) => "ScriptFailed",
            Body::StepUsage(_) => "StepUsage",
            Body::QueryStepStats(_) => "QueryStepStats",
            Body::StepStats(_) => "StepStats",
            Body::Forward(_) => "Forward",
            Body::ForwardReply(_) => "ForwardReply",
            Body::QueryTop(_) => "QueryTop",
            Body::Top(_) => "Top",
            Body::QueryLatency(_) => "QueryLatency",
            Body::Latency(_) => "Latency",
            Body::Exec(_) => "Exec",
            Body::ExecReply(_) => "ExecReply",
            Body::ExecInterrupt(_) => "ExecInterrupt",
            Body::QueryTree(_) => "QueryTree",
            Body::Tree(_) => "Tree",
            Body::QueryEvents(_) => "QueryEvents",
            Body::Events(_) => "Events",
            Body::Probe(_) => "Probe",
            Body::ProbeReply(_) => "ProbeReply",
            Body::TraceFanout(_) => "TraceFanout",
            Body::FanoutTraceReply(_) => "FanoutTraceReply",
            Body::Debug(_) => "Debug",
            Body::DebugReply(_) => "DebugReply",
        }
    }
}

/// A verified, decoded frame. Facts known only locally (who sent it, as vouched
/// by the credential) travel beside the body, never inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub header: Header,
    pub uid: u32,
    pub gid: u32,
    pub body: Body,
}

/// What `sacct` asks for. Filters combine with AND; empty lists match all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcctQuery {
    pub job_ids: Vec<u32>,
    /// Only these users' jobs (uids); empty = all users (`-a`) or, for
    /// non-operators, the caller's own (decided by the CLI).
    pub uids: Vec<u32>,
    pub names: Vec<String>,
    pub partitions: Vec<String>,
    pub states: Vec<crate::wire::types::JobState>,
    /// Jobs that were eligible/running/ended within [start, end]; `None` = open.
    pub start: Option<crate::wire::types::UnixTime>,
    pub end: Option<crate::wire::types::UnixTime>,
    /// `-D`: every run of a requeued job, not only the last.
    #[serde(default)]
    pub duplicates: bool,
}

/// sacctmgr's change: the request, and whether to keep it (`false`: say
/// what would change, for sacctmgr's commit prompt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcctMgrRequest {
    pub req: crate::model::assoc::request::AcctRequest,
    pub commit: bool,
}

/// What sacctmgr prints: `lines` on stdout when `ok`, else on stderr
/// (and it exits 1). `changed`: whether there is anything to commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctMgrReply {
    pub ok: bool,
    pub changed: bool,
    pub lines: Vec<String>,
}

/// `canopy ping NODESET`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRequest {
    /// Hostlist.
    pub nodes: String,
    /// Probe rounds, one after another (at most [`PROBE_MAX_COUNT`]).
    pub count: u32,
    pub budget_ms: u64,
    /// How many of the slowest paths to show in full.
    pub keep: u32,
}

/// The most rounds one `canopy ping` may ask for.
pub const PROBE_MAX_COUNT: u32 = 10;

/// A probed path with its names resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedPath {
    pub target: String,
    /// Hop names, controller first.
    pub hops: Vec<String>,
    pub breakdown: crate::console::trace::Breakdown,
}

/// One probe round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeRound {
    pub targets: u64,
    pub answered: u64,
    pub spread: crate::console::trace::Spread,
    /// The slowest paths in full, slowest first.
    pub slowest: Vec<NamedPath>,
    /// Answered paths not shown in full.
    pub omitted: u64,
    /// Hostlist of the nodes past the straggler threshold.
    pub stragglers: String,
    pub straggler_threshold_us: u64,
    /// Non-responders: (hostlist, reason).
    pub failed: Vec<(String, String)>,
    /// The controller's time for the round, from the request to the last answer.
    pub elapsed_us: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub rounds: Vec<ProbeRound>,
}

/// `canopy trace fanout`: which broadcast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FanoutTraceRequest {
    pub pick: crate::console::trace::FanoutPick,
    pub budget_ms: u64,
    /// How many late nodes to name one by one.
    pub keep: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FanoutTraceReport {
    /// `None`: no recent broadcast matched (the ring is bounded).
    pub fold: Option<crate::console::trace::FanoutFold>,
    /// Rank -> name for every rank the fold mentions.
    pub names: Vec<(u32, String)>,
    /// Nodes that did not answer the trace query itself: (hostlist, reason).
    pub unreachable: Vec<(String, String)>,
    /// Late nodes beyond `keep` not named one by one.
    pub late_omitted: u64,
    /// Broadcasts the controller still remembers (kind, job, origin), newest last.
    pub recent: Vec<(String, Option<u32>, u64)>,
}

/// `canopy debug`: raise, clear or show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugRequest {
    /// Hostlist; `None` = every node (only for `show`).
    pub nodes: Option<String>,
    /// `None` = show what is raised.
    pub set: Option<DebugSet>,
    pub budget_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DebugReport {
    /// Nodes answering alike folded: (hostlist, what is raised there).
    pub groups: Vec<(String, Vec<crate::console::debug::Raised>)>,
    /// Nodes that did not answer: (hostlist, reason).
    pub failed: Vec<(String, String)>,
}
