//! The core's vocabulary: the commands it takes, the effects and reply it
//! returns.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::mail::Mail;
use crate::model::acct::Usage;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    CancelReply, CancelRequest, ErrorReply, Hello, JobLaunch, JobUpdate, KillCause, NodeCommand,
    NodeUpdate, ScriptFailure, StepCancel, StepComplete, StepLaunch, StepLaunched, StepRequest,
    SubmitReply,
};

/// Everything that can change the controller's state. Each carries what it
/// needs to be replayed: ids and times are assigned inside `apply`, from
/// the state and `now`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
    /// sbatch, or the allocation srun/salloc make; `user` and `group` are
    /// already resolved from the uid and gid by the shell.
    Submit {
        submit: Box<JobSubmit>,
        caller: Caller,
    },
    /// scancel (ids, or a signal for them).
    Cancel { req: CancelRequest, caller: Caller },
    /// scancel J.S.
    CancelStep { req: StepCancel, caller: Caller },
    /// scontrol hold/release/update/requeue/suspend/resume/top.
    UpdateJobs { update: JobUpdate, caller: Caller },
    /// srun: a step inside a running job.
    StartStep {
        req: Box<StepRequest>,
        caller: Caller,
    },
    /// The step's launch did not reach every node.
    StepLaunchFailed { job_id: u32, step_id: u32 },
    /// srun: a step ended (and, for its own allocation, the job too).
    StepDone { done: StepComplete, caller: Caller },
    /// A node measured an srun step's processes as the step ended there
    /// (its cgroup's peak memory and CPU times).
    StepUsage {
        job_id: u32,
        step_id: u32,
        usage: crate::model::acct::NodeUsage,
    },
    /// A scheduling pass (the shell coalesces requests for one).
    Schedule,
    /// A backfill pass (the shell's `bf_interval` timer): the quick pass,
    /// then backfill over the whole queue (`SchedulerType=sched/builtin`:
    /// the quick pass only).
    Backfill,
    /// A job is over on every node.
    JobEnded {
        job_id: u32,
        state: JobState,
        exit: ExitStatus,
        reason: JobReason,
        usage: Usage,
    },
    /// A node daemon (re-)registered, with the jobs it holds, attached
    /// under relay `via` (`None`: directly to the controller).
    NodeRegistered { hello: Box<Hello>, via: Option<u32> },
    /// The relay tree's health delta: ranks that became reachable, and
    /// ranks that stopped being so.
    NodeReachability { added: Vec<u32>, removed: Vec<u32> },
    /// scontrol update NodeName=... State=... Reason=...; `user` is the
    /// caller's name, resolved by the shell, for the reason's author.
    UpdateNodes {
        update: NodeUpdate,
        user: String,
        caller: Caller,
    },
    /// The periodic timer: time-limit mail, purging old jobs.
    Tick,
    /// scontrol reconfigure, with the file already read and parsed (the
    /// shell reads it: reading a file is I/O).
    Reconfigure { conf: Arc<Config> },
    /// A node's Prolog or Epilog failed (see `prolog.rs`).
    NodeScriptFailed { failure: ScriptFailure },
    /// The PrologSlurmctld of run `run` (the job's restart count) of job
    /// `job_id` ended, successfully or not; the shell ran it.
    CtldPrologDone { job_id: u32, run: u32, ok: bool },
    /// `PrologFlags=Alloc`: every node's Prolog of run `run` of job
    /// `job_id` succeeded (the job's step actor saw them; it launches now).
    NodePrologsDone { job_id: u32, run: u32 },
    /// sacctmgr add/modify/delete; `commit` false only says what would
    /// change. `user` is the caller's name, resolved by the shell.
    Accounts {
        req: Box<crate::model::assoc::request::AcctRequest>,
        commit: bool,
        user: String,
        caller: Caller,
    },
    /// `scontrol create reservation` (users named in it already checked
    /// to exist by the shell: a passwd lookup is I/O).
    CreateResv {
        spec: crate::wire::resv::ResvSpec,
        caller: Caller,
    },
    /// `scontrol update reservation`.
    UpdateResv {
        spec: crate::wire::resv::ResvSpec,
        caller: Caller,
    },
    /// `scontrol delete reservation`.
    DeleteResv { name: String, caller: Caller },
    /// A node's link to the controller comes from `addr` (sent before its
    /// registration): a cloud node's NodeAddr with `cloud_reg_addrs`.
    NodeAddress { node: String, addr: String },
    /// The shell's `power_save_interval` timer: a power-saving pass that
    /// also looks for nodes idle longer than SuspendTime (`power.rs`).
    PowerSave,
    /// `scontrol create NodeName=...` (see `dynamic.rs`).
    CreateNodes { line: String, caller: Caller },
    /// `canopy-noded -Z` asks for its rank with the node line it built;
    /// `peer` is the address its request came from.
    /// Only the daemons' identity may send it (checked at the door).
    JoinNode { line: String, peer: Option<String> },
    /// `scontrol delete nodename=<hostlist>`.
    DeleteNodes { names: String, caller: Caller },
}

/// The reply to the command's caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Submit(Result<SubmitReply, ErrorReply>),
    /// Per-job results (cancel, update).
    Results(CancelReply),
    Step(Result<StepLaunched, ErrorReply>),
    Done(Result<(), ErrorReply>),
    Reconfigure(Result<(), String>),
    /// sacctmgr: the lines to print, or the refusal's.
    Accounts(Result<crate::model::assoc::edit::Outcome, crate::model::assoc::edit::Refused>),
    /// A reservation made: its name.
    Resv(Result<String, ErrorReply>),
    /// Nodes created or joined: their ranks and lines.
    Nodes(Result<Vec<super::dynamic::NodePlace>, ErrorReply>),
}

/// A job's step actor to create.
#[derive(Debug, Clone, PartialEq)]
pub struct StartJob {
    pub job_id: u32,
    pub ranks: RankSet,
    /// The launch to fan out once the start is on disk; `None` adopts a
    /// job already running (after a controller restart).
    pub launch: Option<Box<JobLaunch>>,
    /// The launch also waits for [`Effect::ReleaseLaunch`] (the job is
    /// CONFIGURING while its PrologSlurmctld runs).
    pub held: bool,
}

/// A PrologSlurmctld or EpilogSlurmctld for the shell to run, off its
/// event loop, as the controller's own user.
#[derive(Debug, Clone, PartialEq)]
pub struct CtldScript {
    pub job_id: u32,
    /// The job's restart count: which run of the job this is for.
    pub run: u32,
    pub prolog: bool,
    /// The script's path (slurmctld runs it as given, no glob).
    pub pattern: String,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

/// Which power-saving program to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerAction {
    Suspend,
    Resume,
    ResumeFail,
}

/// A SuspendProgram, ResumeProgram or ResumeFailProgram for the shell to
/// run off its event loop, as slurmctld runs it: `program NODELIST`.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerProgram {
    pub action: PowerAction,
    pub program: String,
    /// argv\[1\]: the nodes as a host list expression.
    pub nodes: String,
    /// ResumeProgram only: the JSON for `SLURM_RESUME_FILE`.
    pub resume_file: Option<String>,
}

/// Something the shell must carry out once the command's records are on
/// disk (creating actors excepted: they are local and gate themselves).
#[derive(Debug, Clone)]
pub enum Effect {
    StartJob(Box<StartJob>),
    /// Tear a running job down on every node and report how it ended.
    EndJob {
        job_id: u32,
        state: JobState,
        reason: JobReason,
        exit: Option<ExitStatus>,
        cause: Option<KillCause>,
    },
    SignalJob {
        job_id: u32,
        signal: i32,
        batch_only: bool,
        /// Only the srun steps' tasks (`--signal` without `B:`).
        steps_only: bool,
    },
    /// A node reported the batch script's end (registration after a gap).
    ScriptExited {
        job_id: u32,
        status: ExitStatus,
        usage: Usage,
    },
    /// A command to nodes through the relay tree; failures are logged.
    Fanout {
        targets: RankSet,
        cmd: NodeCommand,
        budget: Duration,
    },
    /// An srun step's launch: after the job's own launch, fanned out; a
    /// failure comes back as [`Command::StepLaunchFailed`] and fails the reply.
    LaunchStep {
        targets: RankSet,
        launch: Box<StepLaunch>,
        budget: Duration,
    },
    Mail(Box<Mail>),
    /// Run a scheduling pass at this time.
    WakeAt(UnixTime),
    /// Run a scheduling pass soon.
    Reschedule,
    /// The configuration changed: routing and partition actors follow it.
    Reconfigured(Arc<Config>),
    /// Run a PrologSlurmctld (its end comes back as
    /// [`Command::CtldPrologDone`]) or an EpilogSlurmctld (only logged).
    RunCtldScript(Box<CtldScript>),
    /// A held launch may go (the PrologSlurmctld succeeded).
    ReleaseLaunch {
        job_id: u32,
    },
    /// Kill job `job_id`'s PrologSlurmctld: the job ended while CONFIGURING.
    StopCtldPrologs {
        job_id: u32,
    },
    /// Run a power-saving program (its outcome is only logged: a node that
    /// does not come up is caught by ResumeTimeout).
    RunPowerProgram(Box<PowerProgram>),
    /// Something for `canopy events`' log (the shell stamps the time).
    Event(crate::console::events::Event),
}

/// What one command produced.
#[derive(Debug, Default)]
pub struct Output {
    /// Written, in order, before anything below leaves the controller.
    pub persist: Vec<Op>,
    pub effects: Vec<Effect>,
    pub reply: Option<Reply>,
}

impl Output {
    pub(super) fn effect(&mut self, e: Effect) {
        self.effects.push(e);
    }
}
