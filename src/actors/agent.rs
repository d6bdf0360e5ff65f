//! The node agent: the part of a node daemon that holds this node's jobs and
//! runs their batch scripts. Commands reach it from the local relay actor (a
//! fan-out that includes this node); process exits are reported upward.
//!
//! A node keeps every job until the controller tells it to `Terminate`, so a
//! finished script's exit status survives a lost link or a controller restart:
//! it is repeated in every `Hello`/`Register` until acknowledged that way.
//!
//! The agent shares its thread with the relay and every link, so it never
//! blocks: each launch (user lookup, spool files, the user's identity, the
//! files they named, the fork) runs on a per-job supervisor thread
//! (`crate::exec::supervisor`), and the agent only moves its outcome. What
//! runs here is recorded in the spool (`crate::exec::record`), so a daemon
//! restarted after `kill -9` finds its jobs' processes again, reports them
//! in its registration, and still reports a batch script's end.
//!
//! The Prolog and Epilog (when they run, and what a failure sends up) are
//! `agent/prolog.rs`'s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use nix::sys::signal::Signal;
use tokio::sync::oneshot;

use super::agent_link::{RunCommand, SendUp};
use super::stats::ActorStats;
use crate::exec::process::{signal_group, term_then_kill};
use crate::exec::record::{watch_until_ended, Adopted, JobRecord, Proc, RecordBook};
use crate::exec::supervisor::{
    supervise_batch, supervise_step, Abort, BatchRequest, BatchStarted, BatchSupervisor,
};
use crate::wire::messages::{
    BatchFinished, Body, ExitStatus, Hello, JobLaunch, JobOnNode, JobReport, KillCause,
    NodeCommand, NodeReply, NodeResources, Registration, ScriptJob, StepLaunch, Usage,
    PROTOCOL_VERSION,
};
use crate::wire::types::UnixTime;

mod prolog;

const MAILBOX: usize = 1024;
/// How long a batch launch's reply waits for the script to start. Most
/// launches settle well within it and answer as they always did (a failure
/// is the controller's `JobLaunchFailure`); one still blocked after it (a
/// FIFO as stdin, a hung file server) is answered `Launched`, as slurmd
/// answers once slurmstepd is forked, and a later failure ends the job
/// through `BatchFinished`. Well inside every hop's launch budget.
const LAUNCH_GRACE: Duration = Duration::from_secs(2);
/// How long a step start may take here. The controller gives a step
/// launch 10 s at the leaves and does not clean up after a failed one, so a
/// node answers first, gives up on the start, and kills what it starts
/// later: srun's `step launch failed` then leaves nothing running.
const STEP_START_LIMIT: Duration = Duration::from_secs(9);
/// How often a cancel knocks a blocked launch out of its syscall, and for
/// how long (a signal can land just before the thread blocks).
const INTERRUPT_EVERY: Duration = Duration::from_millis(100);
const INTERRUPT_FOR: Duration = Duration::from_secs(30);
/// How often a re-adopted batch script is looked for in /proc.
const ADOPTED_POLL: Duration = Duration::from_millis(250);
/// A launch whose failure is only known after `LAUNCH_GRACE` ends the job
/// with this status (`ExitCode=1:0`, as slurmstepd's failed launch).
const LATE_LAUNCH_FAILURE: ExitStatus = ExitStatus { code: 1, signal: 0 };
/// The exit status of a re-adopted script whose status could not be read:
/// it was not this daemon's child, so nothing can wait for it, and its
/// zombie is reaped by init. Slurm's slurmd, asked about a batch job whose
/// slurmstepd is already gone, reports it complete with status 0
/// (`ESLURMD_KILL_JOB_ALREADY_COMPLETE`), and so does this.
const UNKNOWN_EXIT: ExitStatus = ExitStatus { code: 0, signal: 0 };

/// The Hello this node introduces itself with right now.
#[derive(Message)]
#[rtype(result = "Hello")]
pub struct GetHello;

/// Tell the agent which relay carries its upward messages.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetRelay(pub Recipient<SendUp>);

/// A batch script ended (reaped by its supervisor, or seen gone in /proc).
#[derive(Message)]
#[rtype(result = "()")]
struct ProcessExited {
    job_id: u32,
    /// Which launch of the job id (a requeued job is launched again).
    seq: u64,
    status: ExitStatus,
    usage: Usage,
}

#[derive(Message)]
#[rtype(result = "AgentState")]
pub struct GetAgentState;

/// Stop the agent (its daemon is shutting down). Running jobs keep running.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AgentState {
    pub node: String,
    pub running: Vec<u32>,
    pub finished: Vec<(u32, ExitStatus)>,
    /// Jobs with a launch (batch script or step) still on its supervisor
    /// thread: a long-lived entry here is a launch blocked in the kernel.
    pub starting: Vec<u32>,
}

/// How jobs are executed on this node.
#[derive(Clone)]
pub enum ExecMode {
    /// Fork real processes; scripts are written under `spool`.
    Real { spool: PathBuf, conf_path: String },
    /// Pretend: a batch job "runs" for `run_for` and exits 0 (load testing).
    Simulated { run_for: Duration },
}

/// A launch of this job (its batch script, or a step) still on its
/// supervisor thread.
struct Starting {
    id: u64,
    /// `None`: the batch script.
    step: Option<u32>,
    abort: Abort,
}

struct LocalJob {
    /// Which launch of the job id this is.
    seq: u64,
    /// Process group of the batch script (0 if it does not run here).
    pgid: i32,
    /// The batch script's session leader, for the spool record.
    batch_proc: Option<Proc>,
    /// The srun tasks' session leaders, for the spool record.
    task_procs: Vec<Proc>,
    /// Launches not yet settled: a cancel interrupts them.
    starting: Vec<Starting>,
    /// The batch script's stderr (if it runs here), as opened for its user.
    batch_stderr: Option<std::fs::File>,
    /// The batch script's spool directory, removed with the job.
    spool_dir: Option<PathBuf>,
    /// Process groups of srun tasks started here (one per task).
    tasks: Vec<i32>,
    /// The srun steps started here, for their kill notes.
    steps: Vec<crate::exec::tasks::StartedStep>,
    finished: Option<ExitStatus>,
    /// The job's cgroup here (proctrack/cgroup), torn down with the job.
    cgroup: Option<Arc<crate::exec::contain::JobCgroup>>,
    /// The batch step's cgroup while the script runs (`sstat J.batch`).
    batch_step: Option<crate::exec::leaf::SharedStep>,
}

impl LocalJob {
    fn new(seq: u64) -> LocalJob {
        LocalJob {
            seq,
            pgid: 0,
            batch_proc: None,
            task_procs: Vec::new(),
            starting: Vec::new(),
            batch_stderr: None,
            spool_dir: None,
            tasks: Vec::new(),
            steps: Vec::new(),
            finished: None,
            cgroup: None,
            batch_step: None,
        }
    }

    /// The srun steps whose tasks may still run (their link to srun is open).
    fn live_steps(&self) -> impl Iterator<Item = &crate::exec::tasks::StartedStep> {
        self.steps.iter().filter(|s| s.notes.strong_count() > 0)
    }

    /// The process groups of step `id`, while it runs: once its link has
    /// closed they may have been reused by other processes.
    fn live_step_groups(&self, id: u32) -> impl Iterator<Item = i32> + '_ {
        self.live_steps()
            .filter(move |s| s.step_id == id)
            .flat_map(|s| s.groups.iter().copied())
            .filter(|&g| g > 0)
    }

    /// Give up on the launches `which` selects: each is interrupted until
    /// it settles (a launch that still starts its processes kills them).
    fn cancel_starting(&mut self, which: impl Fn(&Starting) -> bool) -> usize {
        let mut n = 0;
        for s in self.starting.iter().filter(|s| which(s)) {
            n += 1;
            cancel_launch(s.abort.clone());
        }
        self.starting.retain(|s| !which(s));
        n
    }

    /// Every process group of the job on this node.
    fn groups(&self) -> impl Iterator<Item = i32> + '_ {
        std::iter::once(self.pgid)
            .chain(self.tasks.iter().copied())
            .filter(|&g| g > 0)
    }
}

pub struct NodeAgent {
    node: String,
    rank: u32,
    /// Index of this node in each job's nodelist is computed per launch.
    boot_id: u64,
    started: UnixTime,
    resources: NodeResources,
    jobs: HashMap<u32, LocalJob>,
    relay: Option<Recipient<SendUp>>,
    mode: ExecMode,
    /// Signs the links to srun that carry step output.
    auth: Option<Arc<crate::wire::auth::Authenticator>>,
    /// The key file `auth`'s keys came from (re-read on `ReloadKeys`).
    key_path: Option<std::path::PathBuf>,
    /// Where what runs here is recorded (real jobs only).
    records: Option<RecordBook>,
    /// Jobs found again in the spool at start, adopted in `started`.
    adopted: Vec<Adopted>,
    /// The daemon's runtime, which step supervisors register children with.
    runtime: Option<tokio::runtime::Handle>,
    /// How jobs are tracked, confined and bound here (real nodes).
    leaf: Option<Arc<crate::exec::leaf::Leaf>>,
    next_seq: u64,
    stats: Arc<ActorStats>,
    /// The Prolog and Epilog (real jobs only; see `agent/prolog.rs`).
    scripts: Option<prolog::NodeScripts>,
    /// Batch launches a teardown gave up on, by their `Starting` id: told
    /// once each has cleaned up what it made. The teardown answers only
    /// then, as slurmd waits for a job's slurmstepd: the job's next run
    /// (a requeue) reuses its spool directory and cgroup.
    settling: HashMap<u64, oneshot::Sender<()>>,
    /// Cancelled to stop the whole daemon (`Retire`); none in tests and simulations.
    stop: Option<tokio_util::sync::CancellationToken>,
    /// `canopy exec` runs in progress here, by the client's token.
    execs: crate::exec::remote::Running,
}

/// A reply a handler gives later.
type Reply = ResponseActFuture<NodeAgent, Result<NodeReply, String>>;

fn now(r: Result<NodeReply, String>) -> Reply {
    Box::pin(fut::ready(r))
}

impl NodeAgent {
    pub fn new(
        node: String,
        rank: u32,
        boot_id: u64,
        resources: NodeResources,
        mode: ExecMode,
        stats: Arc<ActorStats>,
    ) -> Self {
        NodeAgent {
            node,
            rank,
            boot_id,
            started: chrono::Utc::now().timestamp(),
            resources,
            jobs: HashMap::new(),
            relay: None,
            mode,
            auth: None,
            key_path: None,
            records: None,
            adopted: Vec::new(),
            runtime: None,
            leaf: None,
            next_seq: 1,
            stats,
            scripts: None,
            settling: HashMap::new(),
            stop: None,
            execs: Default::default(),
        }
    }

    /// Track, confine and bind jobs as `leaf` says.
    pub fn with_leaf(mut self, leaf: Arc<crate::exec::leaf::Leaf>) -> Self {
        self.leaf = Some(leaf);
        self
    }

    /// Run `conf`'s Prolog and Epilog for the jobs here (`SLURM_CONF` is
    /// `conf_path` for them).
    pub fn with_scripts(
        mut self,
        conf: crate::wire::messages::NodeScriptConf,
        conf_path: String,
    ) -> Self {
        self.scripts = Some(prolog::NodeScripts::new(conf, conf_path));
        self
    }

    /// Give the agent the key it signs step I/O links with.
    pub fn with_auth(mut self, auth: Arc<crate::wire::auth::Authenticator>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Where the key came from, so that a rotation can be picked up.
    /// `token` stops the daemon: cancelled when the controller retires this node.
    pub fn with_stop(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.stop = Some(token);
        self
    }

    pub fn with_key_path(mut self, path: std::path::PathBuf) -> Self {
        self.key_path = Some(path);
        self
    }

    /// Record jobs in `records`, and take over `adopted`, the jobs an
    /// earlier daemon on this node left running (see `exec::record::recover`).
    pub fn with_records(mut self, records: RecordBook, adopted: Vec<Adopted>) -> Self {
        self.records = Some(records);
        self.adopted = adopted;
        self
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Write job `job_id`'s spool record as it stands (on the records thread).
    fn record(&self, job_id: u32) {
        let (Some(book), Some(j)) = (&self.records, self.jobs.get(&job_id)) else {
            return;
        };
        book.put(JobRecord {
            job_id,
            boot_id: book.boot_id().to_string(),
            batch: j.batch_proc,
            tasks: j.task_procs.clone(),
            spool_dir: j.spool_dir.clone(),
        });
    }

    /// Take over the jobs found in the spool: their processes are known by
    /// process group, and a batch script still running is watched in /proc
    /// until it ends.
    fn adopt(&mut self, ctx: &mut Context<Self>) {
        for a in std::mem::take(&mut self.adopted) {
            let rec = a.record;
            let job_id = rec.job_id;
            let seq = self.seq();
            let mut job = LocalJob::new(seq);
            job.pgid = rec.batch.map_or(0, |p| p.pid);
            job.batch_proc = rec.batch;
            job.tasks = rec.tasks.iter().map(|p| p.pid).collect();
            job.task_procs = rec.tasks.clone();
            job.spool_dir = rec.spool_dir.clone();
            if a.batch_ended {
                // It ended while no daemon watched: reported in the Hello.
                job.finished = Some(UNKNOWN_EXIT);
            }
            tracing::info!(
                job_id,
                node = %self.node,
                batch = ?rec.batch.map(|p| p.pid),
                tasks = rec.tasks.len(),
                batch_ended = a.batch_ended,
                "job re-adopted from the spool"
            );
            if let Some(p) = rec.batch {
                self.watch_adopted(job_id, seq, p, ctx);
            }
            self.jobs.insert(job_id, job);
            self.record(job_id);
        }
    }

    /// Report when re-adopted script `p` ends. It is not this daemon's
    /// child, so a thread polls /proc for it (reading its status if its
    /// zombie is seen before init reaps it).
    fn watch_adopted(&self, job_id: u32, seq: u64, p: Proc, ctx: &mut Context<Self>) {
        let (tx, rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("job{job_id}-watch"))
            .spawn(move || {
                let _ = tx.send(watch_until_ended(&p, ADOPTED_POLL));
            });
        if let Err(e) = spawned {
            tracing::error!(job_id, error = %e, "cannot watch the re-adopted batch script");
            return;
        }
        let me = ctx.address();
        actix::spawn(async move {
            let status = rx.await.ok().flatten();
            if status.is_none() {
                tracing::info!(
                    job_id,
                    "re-adopted batch script ended; its exit status is unknown"
                );
            }
            let _ = me
                .send(ProcessExited {
                    job_id,
                    seq,
                    status: status.unwrap_or(UNKNOWN_EXIT),
                    usage: Usage::default(),
                })
                .await;
        });
    }

    /// Start a step's tasks on its supervisor thread; answer once they run.
    fn run_step(&mut self, l: StepLaunch) -> Reply {
        let ExecMode::Real { .. } = &self.mode else {
            return now(Err("simulated nodes do not run srun steps".into()));
        };
        let Some(auth) = self.auth.clone() else {
            return now(Err("node agent has no key to reach srun".into()));
        };
        let Some(runtime) = self.runtime.clone() else {
            return now(Err("node agent has no runtime for step tasks".into()));
        };
        let index = crate::config::hostlist::expand(&l.nodelist)
            .ok()
            .and_then(|v| v.iter().position(|n| *n == self.node));
        let Some(index) = index else {
            return now(Err(format!(
                "{} is not in step nodelist {}",
                self.node, l.nodelist
            )));
        };
        let (job_id, step_id) = (l.job_id, l.step_id);
        let id = self.seq();
        let Some(job) = self.jobs.get_mut(&job_id) else {
            return now(Err(format!("job {job_id} is not running on this node")));
        };
        let seq = job.seq;
        let abort = Abort::new();
        let node = self.node.clone();
        let rx = match supervise_step(
            l.clone(),
            node.clone(),
            index,
            runtime,
            abort.clone(),
            self.leaf.clone(),
            job.cgroup.clone(),
        ) {
            Ok(rx) => rx,
            Err(e) => return now(Err(format!("cannot start the step's supervisor: {e}"))),
        };
        job.starting.push(Starting {
            id,
            step: Some(step_id),
            abort: abort.clone(),
        });
        let waited = async move { tokio::time::timeout(STEP_START_LIMIT, rx).await };
        Box::pin(waited.into_actor(self).map(move |waited, act, _ctx| {
            let forked = match waited {
                Ok(r) => {
                    r.unwrap_or_else(|_| Err("the step's supervisor ended unexpectedly".into()))
                }
                Err(_) => {
                    // Dropping the receiver makes a start that still
                    // completes kill its tasks; the cancel interrupts it.
                    if let Some(job) = act.jobs.get_mut(&job_id) {
                        job.starting.retain(|s| s.id != id);
                    }
                    cancel_launch(abort);
                    tracing::warn!(job_id, step_id, node = %node, "step start too slow; given up");
                    return Err(format!(
                        "step {job_id}.{step_id} did not start within {}s on {node}",
                        STEP_START_LIMIT.as_secs()
                    ));
                }
            };
            let job = act.jobs.get_mut(&job_id).filter(|j| j.seq == seq);
            let Some(job) = job else {
                if let Ok(f) = &forked {
                    f.kill();
                }
                return Err(format!(
                    "job {job_id} ended while step {step_id} was starting"
                ));
            };
            job.starting.retain(|s| s.id != id);
            let mut forked = forked?;
            if let Some(cg) = forked.cgroup.take() {
                match &job.cgroup {
                    None => job.cgroup = Some(cg),
                    // Two steps of an adopted job raced to make it: the
                    // second handle must not remove what the first holds.
                    Some(_) => {
                        if let Ok(cg) = Arc::try_unwrap(cg) {
                            cg.keep();
                        }
                    }
                }
            }
            if abort.is_cancelled() {
                forked.kill();
                return Err(format!(
                    "step {job_id}.{step_id} was cancelled while starting"
                ));
            }
            if let (Some(guard), Some(relay)) = (&forked.guard, &act.relay) {
                // The step's usage goes up once, from the teardown thread,
                // when its last task here has ended. `do_send`: one message
                // per step and node, not fed by the network.
                let relay = relay.clone();
                guard.on_end(Box::new(move |usage| {
                    relay.do_send(SendUp(Body::StepUsage(
                        crate::wire::messages::StepUsageReport {
                            job_id,
                            step_id,
                            usage,
                        },
                    )));
                }));
            }
            let procs: Vec<Proc> = forked.tasks.iter().map(|t| t.proc).collect();
            let step = crate::exec::tasks::start_step_io(forked, &l, &node, index, auth);
            tracing::info!(
                job_id,
                step_id,
                tasks = step.groups.len(),
                "step tasks started"
            );
            job.tasks.extend(step.groups.iter().copied());
            job.task_procs.extend(procs);
            // Forget steps whose link has closed (their tasks are done).
            job.steps.retain(|s| s.notes.strong_count() > 0);
            job.steps.push(step);
            act.record(job_id);
            Ok(NodeReply::Launched)
        }))
    }

    fn hello(&self) -> Hello {
        let mut jobs: Vec<JobReport> = self
            .jobs
            .iter()
            .map(|(&job_id, j)| JobReport {
                job_id,
                state: match j.finished {
                    Some(s) => JobOnNode::BatchFinished(s),
                    None => JobOnNode::Running,
                },
            })
            .collect();
        jobs.sort_by_key(|j| j.job_id);
        Hello {
            node: self.node.clone(),
            rank: self.rank,
            boot_id: self.boot_id,
            started: self.started,
            version: format!("{}/{}", env!("CARGO_PKG_VERSION"), PROTOCOL_VERSION),
            resources: self.resources.clone(),
            jobs,
        }
    }

    fn launch(&mut self, l: &JobLaunch, ctx: &mut Context<Self>) -> Reply {
        if self.jobs.contains_key(&l.job_id) {
            return now(Ok(NodeReply::Launched)); // a retried launch is idempotent
        }
        let job_id = l.job_id;
        let seq = self.seq();
        self.note_script_job(ScriptJob::from_launch(l));
        if l.batch_host != self.node || l.interactive {
            // Holding the allocation; srun steps may start processes later.
            self.jobs.insert(job_id, LocalJob::new(seq));
            self.record(job_id);
            let leaf = self
                .leaf
                .clone()
                .filter(|_| matches!(self.mode, ExecMode::Real { .. }));
            let Some(leaf) = leaf else {
                return now(Ok(NodeReply::Launched));
            };
            // The job's cgroup, with the job's share of this node, before
            // the launch is answered: its steps (launched only once every
            // node has answered) then live inside it, each narrowed to its
            // own share, and none of them can narrow the job's.
            let (uid, share) = (
                l.uid,
                l.held
                    .get(node_index(&l.nodelist, &self.node) as usize)
                    .cloned(),
            );
            return Box::pin(
                async move {
                    tokio::task::spawn_blocking(move || leaf.job(job_id, uid, share.as_ref()))
                        .await
                        .map_err(|e| format!("cannot set up the job's cgroup: {e}"))
                        .and_then(|r| r)
                }
                .into_actor(self)
                .map(move |made, act, _| {
                    let current = act.jobs.get_mut(&job_id).filter(|j| j.seq == seq);
                    match (made, current) {
                        (Ok(cg), Some(job)) => {
                            job.cgroup = cg;
                            Ok(NodeReply::Launched)
                        }
                        (Ok(cg), None) => {
                            // Ended while the cgroup was made.
                            if let Some(cg) = cg {
                                end_job_cgroup(cg);
                            }
                            Ok(NodeReply::Launched)
                        }
                        (Err(e), _) => {
                            tracing::error!(job_id, error = %e, "job not set up on this node");
                            act.jobs.remove(&job_id);
                            if let Some(book) = &act.records {
                                book.remove(job_id);
                            }
                            Err(e)
                        }
                    }
                }),
            );
        }
        if matches!(self.mode, ExecMode::Real { .. }) && !self.prolog_done(job_id) {
            if let Some(run) = self.prolog_run(job_id, ctx) {
                return self.batch_after_prolog(l.clone(), seq, run, ctx);
            }
        }
        self.start_batch(l, seq, ctx)
    }

    /// The batch script waits for this node's Prolog, which runs first
    /// (the default: at the job's first launch here). The launch is
    /// answered now: a failed Prolog is reported by itself, and a batch
    /// script that then cannot start ends the job as a late launch failure.
    fn batch_after_prolog(
        &mut self,
        l: JobLaunch,
        seq: u64,
        run: prolog::PrologRun,
        ctx: &mut Context<Self>,
    ) -> Reply {
        let job_id = l.job_id;
        self.jobs.insert(job_id, LocalJob::new(seq));
        self.record(job_id);
        ctx.spawn(run.into_actor(self).map(move |ok, act, ctx| {
            let current = act.jobs.get(&job_id).is_some_and(|j| j.seq == seq);
            if !ok || !current {
                // A failed Prolog: the controller requeues or cancels the
                // job, and its Terminate cleans up here.
                return;
            }
            let start = act.start_batch(&l, seq, ctx);
            ctx.spawn(start.map(move |r, act, ctx| {
                if let Err(e) = r {
                    tracing::error!(job_id, error = %e, "batch script could not start after the Prolog");
                    act.jobs.entry(job_id).or_insert_with(|| LocalJob::new(seq));
                    ctx.notify(ProcessExited {
                        job_id,
                        seq,
                        status: LATE_LAUNCH_FAILURE,
                        usage: Usage::default(),
                    });
                }
            }));
        }));
        now(Ok(NodeReply::Launched))
    }

    /// Start the batch script of `l` (launch number `seq`) here.
    fn start_batch(&mut self, l: &JobLaunch, seq: u64, ctx: &mut Context<Self>) -> Reply {
        let job_id = l.job_id;
        match &self.mode {
            ExecMode::Real { spool, conf_path } => {
                let abort = Abort::new();
                let req = BatchRequest {
                    launch: l.clone(),
                    node: self.node.clone(),
                    node_index: node_index(&l.nodelist, &self.node),
                    conf_path: conf_path.clone(),
                    spool: spool.clone(),
                    leaf: self.leaf.clone(),
                };
                let BatchSupervisor { started, exited } = match supervise_batch(req, abort.clone())
                {
                    Ok(s) => s,
                    Err(e) => {
                        return now(Err(format!("cannot start the job's supervisor: {e}")));
                    }
                };
                let mut job = LocalJob::new(seq);
                let id = self.seq();
                job.starting.push(Starting {
                    id,
                    step: None,
                    abort: abort.clone(),
                });
                self.jobs.insert(job_id, job);
                let (reply_tx, reply_rx) = oneshot::channel();
                ctx.spawn(started.into_actor(self).map(move |r, act, ctx| {
                    let r =
                        r.unwrap_or_else(|_| Err("the job's supervisor ended unexpectedly".into()));
                    let launch = BatchOutcome {
                        job_id,
                        seq,
                        id,
                        abort,
                    };
                    act.batch_started(launch, r, exited, reply_tx, ctx);
                }));
                Box::pin(
                    async move {
                        match tokio::time::timeout(LAUNCH_GRACE, reply_rx).await {
                            Ok(Ok(r)) => r,
                            Ok(Err(_)) => Err("the node agent dropped the launch".into()),
                            // Still starting: running, as far as the controller goes.
                            Err(_) => Ok(NodeReply::Launched),
                        }
                    }
                    .into_actor(self),
                )
            }
            ExecMode::Simulated { run_for } => {
                self.jobs.insert(job_id, LocalJob::new(seq));
                ctx.run_later(*run_for, move |_, ctx| {
                    ctx.notify(ProcessExited {
                        job_id,
                        seq,
                        status: ExitStatus::default(),
                        usage: Usage::default(),
                    })
                });
                now(Ok(NodeReply::Launched))
            }
        }
    }

    /// A batch supervisor settled its launch: the script runs, or could not
    /// start. `reply` answers the launch if it is still waiting.
    fn batch_started(
        &mut self,
        launch: BatchOutcome,
        r: Result<BatchStarted, String>,
        exited: oneshot::Receiver<(ExitStatus, Usage)>,
        reply: oneshot::Sender<Result<NodeReply, String>>,
        ctx: &mut Context<Self>,
    ) {
        let BatchOutcome {
            job_id,
            seq,
            id,
            abort,
        } = launch;
        let current = self
            .jobs
            .get_mut(&job_id)
            .filter(|j| j.seq == seq && !abort.is_cancelled());
        let Some(job) = current else {
            // Cancelled while it started: whatever it started dies now, and
            // the teardown waiting on it answers once that is cleaned up
            // (a launch that failed cleaned up after itself).
            let settled = self.settling.remove(&id);
            let leftovers = r.ok().map(|p| {
                tracing::info!(
                    job_id,
                    pid = p.pid,
                    "batch script of a cancelled job killed"
                );
                signal_group(p.pid, Signal::SIGKILL);
                (p.spool_dir, p.cgroup)
            });
            let _ = reply.send(Err(format!("job {job_id} ended while it was starting")));
            ctx.spawn(
                async move {
                    if let Some((dir, cgroup)) = leftovers {
                        let _ = tokio::task::spawn_blocking(move || {
                            remove_spool_dir_now(job_id, &dir);
                            if let Some(cg) = cgroup {
                                crate::exec::leaf::end_job(cg);
                            }
                        })
                        .await;
                    }
                    if let Some(tx) = settled {
                        let _ = tx.send(());
                    }
                }
                .into_actor(self),
            );
            return;
        };
        job.starting.retain(|s| s.id != id);
        match r {
            Ok(p) => {
                tracing::info!(job_id, pid = p.pid, node = %self.node, "batch script started");
                job.pgid = p.pid;
                job.batch_proc = Some(p.proc);
                job.batch_stderr = Some(p.stderr);
                job.spool_dir = Some(p.spool_dir);
                job.cgroup = p.cgroup;
                job.batch_step = p.batch_step;
                self.record(job_id);
                let me = ctx.address();
                actix::spawn(async move {
                    let (status, usage) = exited
                        .await
                        .unwrap_or((ExitStatus { code: 1, signal: 0 }, Usage::default()));
                    let _ = me
                        .send(ProcessExited {
                            job_id,
                            seq,
                            status,
                            usage,
                        })
                        .await;
                });
                let _ = reply.send(Ok(NodeReply::Launched));
            }
            Err(e) => {
                tracing::error!(job_id, node = %self.node, error = %e, "batch script could not start");
                if let Err(Err(e)) = reply.send(Err(e)) {
                    // Already answered `Launched`: the job ends as failed.
                    tracing::warn!(job_id, error = %e, "late launch failure reported as the script's end");
                    ctx.notify(ProcessExited {
                        job_id,
                        seq,
                        status: LATE_LAUNCH_FAILURE,
                        usage: Usage::default(),
                    });
                } else {
                    // The controller ends it as `JobLaunchFailure`.
                    self.jobs.remove(&job_id);
                }
            }
        }
    }

    fn send_up(&self, body: Body, ctx: &mut Context<Self>) {
        if let Some(relay) = &self.relay {
            let relay = relay.clone();
            ctx.wait(
                async move {
                    let _ = relay.send(SendUp(body)).await;
                }
                .into_actor(self),
            );
        }
    }
}

/// Cancel a launch and knock it out of a blocking call, repeatedly until it
/// settles (a signal can land just before its thread blocks).
/// Kill what is left of a job's cgroup and remove it, on a thread of its
/// own (it waits for the kernel).
fn end_job_cgroup(cg: Arc<crate::exec::contain::JobCgroup>) {
    let job_id = cg.job_id();
    let spawned = std::thread::Builder::new()
        .name(format!("job{job_id}-cgroup"))
        .spawn(move || crate::exec::leaf::end_job(cg));
    if let Err(e) = spawned {
        tracing::warn!(job_id, error = %e, "cannot start the job's cgroup teardown");
    }
}

fn cancel_launch(abort: Abort) {
    abort.cancel();
    actix::spawn(async move {
        let mut waited = Duration::ZERO;
        while !abort.is_settled() && waited < INTERRUPT_FOR {
            abort.interrupt();
            tokio::time::sleep(INTERRUPT_EVERY).await;
            waited += INTERRUPT_EVERY;
        }
    });
}

/// Who a settled batch launch belongs to.
struct BatchOutcome {
    job_id: u32,
    seq: u64,
    /// Its entry in the job's `starting`.
    id: u64,
    abort: Abort,
}

/// Remove a job's spool directory off the event loop (it may sit on a slow
/// disk).
fn remove_spool_dir(job_id: u32, dir: PathBuf) {
    tokio::task::spawn_blocking(move || remove_spool_dir_now(job_id, &dir));
}

fn remove_spool_dir_now(job_id: u32, dir: &std::path::Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(job_id, dir = %dir.display(), error = %e, "cannot remove the job's spool directory");
        }
    }
}

/// Slurm's note, in a killed batch job's stderr, of when and why it was
/// killed. Best effort: the kill goes ahead whether or not it is written.
///
/// It goes through the descriptor opened for the user at launch, and only if
/// that is a regular file: a FIFO or terminal named as output could block the
/// agent, and reopening the path would follow whatever the user put there
/// since.
fn write_banner(file: &std::fs::File, job_id: u32, node: &str, cause: KillCause) {
    use std::io::Write;
    let line = kill_note(&format!("JOB {job_id}"), node, cause);
    let written = file.metadata().and_then(|m| {
        if m.is_file() {
            let mut f = file;
            f.write_all(line.as_bytes())
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        tracing::warn!(job_id, error = %e, "cannot write the cancel note");
    }
}

/// slurmstepd's line for a killed job or step (`what` is `JOB 12` or
/// `STEP 12.0`), stamped now in local time.
fn kill_note(what: &str, node: &str, cause: KillCause) -> String {
    let when = crate::model::time::fmt_timestamp(Some(chrono::Utc::now().timestamp()));
    format!(
        "{}: error: *** {what} ON {node} CANCELLED AT {when}{} ***\n",
        crate::exec::identity::stepd_prefix(node),
        cause.suffix()
    )
}

/// Position of `node` in a compressed nodelist (0 if absent).
fn node_index(nodelist: &str, node: &str) -> u32 {
    crate::config::hostlist::expand(nodelist)
        .ok()
        .and_then(|v| v.iter().position(|n| n == node))
        .unwrap_or(0) as u32
}

impl Actor for NodeAgent {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        self.runtime = tokio::runtime::Handle::try_current().ok();
        self.adopt(ctx);
    }
}

impl Handler<SetRelay> for NodeAgent {
    type Result = ();
    fn handle(&mut self, msg: SetRelay, _ctx: &mut Context<Self>) {
        self.relay = Some(msg.0);
    }
}

impl Handler<GetHello> for NodeAgent {
    type Result = MessageResult<GetHello>;
    fn handle(&mut self, _msg: GetHello, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.hello())
    }
}

impl Handler<GetAgentState> for NodeAgent {
    type Result = MessageResult<GetAgentState>;
    fn handle(&mut self, _msg: GetAgentState, _ctx: &mut Context<Self>) -> Self::Result {
        let mut running: Vec<u32> = Vec::new();
        let mut finished = Vec::new();
        for (&id, j) in &self.jobs {
            match j.finished {
                Some(s) => finished.push((id, s)),
                None => running.push(id),
            }
        }
        running.sort_unstable();
        finished.sort_unstable_by_key(|f| f.0);
        let mut starting: Vec<u32> = self
            .jobs
            .iter()
            .filter(|(_, j)| !j.starting.is_empty())
            .map(|(&id, _)| id)
            .collect();
        starting.sort_unstable();
        MessageResult(AgentState {
            node: self.node.clone(),
            running,
            finished,
            starting,
        })
    }
}

impl Handler<ProcessExited> for NodeAgent {
    type Result = ();
    fn handle(&mut self, msg: ProcessExited, ctx: &mut Context<Self>) {
        let Some(job) = self.jobs.get_mut(&msg.job_id).filter(|j| j.seq == msg.seq) else {
            return;
        };
        job.finished = Some(msg.status);
        tracing::info!(
            job_id = msg.job_id,
            code = msg.status.code,
            signal = msg.status.signal,
            "batch script ended"
        );
        let body = Body::BatchFinished(BatchFinished {
            job_id: msg.job_id,
            node: self.node.clone(),
            status: msg.status,
            usage: msg.usage,
        });
        self.send_up(body, ctx);
    }
}

impl Handler<RunCommand> for NodeAgent {
    type Result = ResponseActFuture<Self, Result<NodeReply, String>>;
    fn handle(&mut self, msg: RunCommand, ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        match msg.0 {
            NodeCommand::Noop => now(Ok(NodeReply::Ack)),
            // The relay answers it from the published counters; it never
            // reaches here unless a peer sends it to the agent directly.
            NodeCommand::TopActors(_) => now(Err("answered by the relay, not the agent".into())),
            // The relay answers these from its own links; one that reaches the agent came from
            // a relay that could not (it never should).
            NodeCommand::HopView { .. } => now(Err("hop view is answered by the relay".into())),
            NodeCommand::ReloadKeys => {
                let (Some(auth), Some(path)) = (self.auth.clone(), self.key_path.clone()) else {
                    return now(Err("this node daemon holds no key file to re-read".into()));
                };
                let node = self.node.clone();
                // Reading files blocks: off the loop that forwards messages.
                Box::pin(
                    async move {
                        let read = tokio::task::spawn_blocking(move || {
                            crate::wire::auth::load_keyring(&path)
                        })
                        .await;
                        match read {
                            Ok(Ok(keys)) => {
                                auth.set_keys(keys);
                                tracing::info!(node = %node, "keys re-read");
                                Ok(NodeReply::Ack)
                            }
                            Ok(Err(e)) => Err(format!("keys not re-read: {e}")),
                            Err(e) => Err(format!("keys not re-read: {e}")),
                        }
                    }
                    .into_actor(self),
                )
            }
            NodeCommand::Retire { node } if node == self.node => {
                tracing::error!(node = %self.node, "this node was deleted from the cluster (scontrol delete nodename); canopy-noded stops");
                if let Some(stop) = &self.stop {
                    stop.cancel();
                }
                now(Ok(NodeReply::Ack))
            }
            NodeCommand::Retire { node } => {
                // The node deleted was an earlier holder of this rank.
                tracing::debug!(node = %self.node, retired = %node, "retire for another node ignored");
                now(Ok(NodeReply::Ack))
            }
            NodeCommand::Reregister => {
                let hello = self.hello();
                self.send_up(
                    Body::Register(Registration {
                        hello,
                        parent: None,
                    }),
                    ctx,
                );
                now(Ok(NodeReply::Ack))
            }
            NodeCommand::Launch(l) => self.launch(&l, ctx),
            NodeCommand::RunStep(l) => {
                // The job's first process here waits for this node's Prolog.
                let run = (!self.prolog_done(l.job_id))
                    .then(|| self.prolog_run(l.job_id, ctx))
                    .flatten();
                match run {
                    Some(run) if matches!(self.mode, ExecMode::Real { .. }) => {
                        let node = self.node.clone();
                        Box::pin(run.into_actor(self).then(move |ok, act, _| {
                            if ok {
                                act.run_step(*l)
                            } else {
                                now(Err(format!("Prolog failed on {node}")))
                            }
                        }))
                    }
                    _ => self.run_step(*l),
                }
            }
            NodeCommand::SetScripts(conf) => {
                if let Some(s) = &mut self.scripts {
                    tracing::info!(node = %self.node, prolog = ?conf.prolog, epilog = ?conf.epilog, "Prolog and Epilog changed");
                    s.conf = *conf;
                }
                now(Ok(NodeReply::Ack))
            }
            NodeCommand::Prolog(job) => {
                // PrologFlags=Alloc: the controller launches once every
                // node has answered.
                let job_id = job.job_id;
                self.note_script_job(*job);
                match self.prolog_run(job_id, ctx) {
                    None => now(Ok(NodeReply::Ack)),
                    Some(run) => Box::pin(
                        async move {
                            Ok(if run.await {
                                NodeReply::Ack
                            } else {
                                NodeReply::PrologFailed
                            })
                        }
                        .into_actor(self),
                    ),
                }
            }
            NodeCommand::StatSteps { job_id, steps } => {
                use crate::wire::messages::StatStep;
                let job = self.jobs.get(&job_id);
                let batch = job
                    .and_then(|j| j.batch_step.clone())
                    .filter(|_| steps.contains(&StatStep::Batch));
                let node = self.node.clone();
                let guards: Vec<_> = job
                    .map(|j| {
                        j.steps
                            .iter()
                            .filter_map(|s| s.guard.as_ref()?.upgrade())
                            .filter(|g| steps.contains(&StatStep::Numbered(g.step_id())))
                            .collect()
                    })
                    .unwrap_or_default();
                // Reading cgroup files blocks: off the event loop.
                Box::pin(
                    async move {
                        let read = tokio::task::spawn_blocking(move || {
                            let batch = batch
                                .and_then(|b| crate::exec::leaf::batch_usage(&b, &node))
                                .map(|(u, pids)| (StatStep::Batch, u, pids));
                            batch
                                .into_iter()
                                .chain(guards.iter().map(|g| {
                                    (StatStep::Numbered(g.step_id()), g.usage(), g.pids())
                                }))
                                .collect::<Vec<_>>()
                        })
                        .await;
                        read.map(NodeReply::StepStats)
                            .map_err(|e| format!("step usage not read: {e}"))
                    }
                    .into_actor(self),
                )
            }
            NodeCommand::Signal {
                job_id,
                signal,
                batch_only,
                steps_only,
                step,
            } => {
                let sig = match Signal::try_from(signal) {
                    Ok(s) => s,
                    Err(e) => return now(Err(format!("invalid signal {signal}: {e}"))),
                };
                let count = match self.jobs.get(&job_id) {
                    Some(j) if j.finished.is_none() || !j.tasks.is_empty() => {
                        // -b: only the batch shell; otherwise every group of the job.
                        let groups: Vec<i32> = if let Some(id) = step {
                            j.live_step_groups(id).collect()
                        } else if batch_only {
                            vec![j.pgid]
                        } else if steps_only {
                            j.tasks.iter().copied().filter(|&g| g > 0).collect()
                        } else {
                            j.groups().collect()
                        };
                        groups.into_iter().filter(|&g| signal_group(g, sig)).count() as u32
                    }
                    _ => 0,
                };
                now(Ok(NodeReply::Signalled { processes: count }))
            }
            NodeCommand::KillStep {
                job_id,
                step_id,
                kill_wait_s,
            } => {
                let Some(job) = self.jobs.get_mut(&job_id) else {
                    return now(Ok(NodeReply::Signalled { processes: 0 }));
                };
                job.cancel_starting(|s| s.step == Some(step_id));
                for step in job.live_steps().filter(|s| s.step_id == step_id) {
                    step.aborted();
                    step.note(&kill_note(
                        &format!("STEP {job_id}.{step_id}"),
                        &self.node,
                        KillCause::Cancelled,
                    ));
                }
                let groups: Vec<i32> = job.live_step_groups(step_id).collect();
                let count = match kill_wait_s {
                    None => groups
                        .into_iter()
                        .filter(|&g| signal_group(g, Signal::SIGKILL))
                        .count() as u32,
                    Some(w) => {
                        // srun ending its own step: the tasks may clean up.
                        let count = groups.len() as u32;
                        let wait = Duration::from_secs(u64::from(w));
                        actix::spawn(async move { term_then_kill(&groups, wait).await });
                        count
                    }
                };
                tracing::info!(job_id, step_id, groups = count, "step cancelled");
                now(Ok(NodeReply::Signalled { processes: count }))
            }
            NodeCommand::Terminate {
                job_id,
                kill_wait_s,
                cause,
                exit,
            } => {
                let Some(job) = self.jobs.get_mut(&job_id) else {
                    // Nothing runs here, but a Prolog may have: the Epilog
                    // runs on every node that knew the job.
                    if !self.knows_script_job(job_id) {
                        return now(Ok(NodeReply::Terminated));
                    }
                    return match self.epilog_run(job_id, exit, ctx) {
                        None => now(Ok(NodeReply::Terminated)),
                        Some(epilog) => Box::pin(
                            async move {
                                epilog.await;
                                Ok(NodeReply::Terminated)
                            }
                            .into_actor(self),
                        ),
                    };
                };
                // Launches still blocked give up; one that starts its
                // processes anyway kills them (the job is gone by then).
                let batch_starts: Vec<u64> = job
                    .starting
                    .iter()
                    .filter(|s| s.step.is_none())
                    .map(|s| s.id)
                    .collect();
                if job.cancel_starting(|_| true) > 0 {
                    tracing::info!(job_id, node = %self.node, "job cancelled while starting");
                }
                let mut banner = None;
                if let Some(cause) = cause {
                    // slurmstepd's line for each srun step still running here…
                    for step in job.live_steps() {
                        step.aborted();
                        step.note(&kill_note(
                            &format!("STEP {job_id}.{}", step.step_id),
                            &self.node,
                            cause,
                        ));
                    }
                    // …and for the batch script, in its stderr (written off
                    // the event loop: the file may be on a slow disk).
                    if let (Some(file), None) = (&job.batch_stderr, job.finished) {
                        banner = file.try_clone().ok().map(|f| (f, cause));
                    }
                }
                let groups: Vec<i32> = job.groups().collect();
                let wait = Duration::from_secs(u64::from(kill_wait_s));
                let node = self.node.clone();
                let settles: Vec<oneshot::Receiver<()>> = batch_starts
                    .into_iter()
                    .map(|id| {
                        let (tx, rx) = oneshot::channel();
                        self.settling.insert(id, tx);
                        rx
                    })
                    .collect();
                Box::pin(
                    async move {
                        if let Some((file, cause)) = banner {
                            let _ = tokio::task::spawn_blocking(move || {
                                write_banner(&file, job_id, &node, cause)
                            })
                            .await;
                        }
                        // A launch given up on is interrupted until it
                        // settles; past KillWait and the launch grace the
                        // teardown answers anyway (a call stuck beyond any
                        // signal), within the controller's budget for it.
                        let settled = async {
                            for rx in settles {
                                let _ = rx.await;
                            }
                        };
                        let settled = tokio::time::timeout(wait + LAUNCH_GRACE, settled);
                        let (_, settled) = tokio::join!(term_then_kill(&groups, wait), settled);
                        if settled.is_err() {
                            tracing::warn!(
                                job_id,
                                "a launch given up on has not settled; teardown answered anyway"
                            );
                        }
                    }
                    .into_actor(self)
                    .then(move |_, act, ctx| {
                        let gone = act.jobs.remove(&job_id);
                        let (spool, cgroup) = gone
                            .map(|j| (j.spool_dir, j.cgroup))
                            .unwrap_or((None, None));
                        if let Some(dir) = spool {
                            remove_spool_dir(job_id, dir);
                        }
                        if let Some(book) = &act.records {
                            book.remove(job_id);
                        }
                        tracing::info!(job_id, "job terminated on node");
                        // Its processes are gone: the Epilog runs, and the
                        // node answers once it is done (the job is CG until then).
                        let epilog = act.epilog_run(job_id, exit, ctx);
                        async move {
                            // Whatever escaped the process groups (a double
                            // fork out of the session) dies first, with its
                            // cgroup, so the Epilog finds the node clean.
                            if let Some(cg) = cgroup {
                                let _ = tokio::task::spawn_blocking(move || {
                                    crate::exec::leaf::end_job(cg)
                                })
                                .await;
                            }
                            if let Some(e) = epilog {
                                e.await;
                            }
                            Ok(NodeReply::Terminated)
                        }
                        .into_actor(act)
                    }),
                )
            }
            NodeCommand::Exec(spec) => self.exec(*spec),
            NodeCommand::ExecInterrupt {
                token,
                uid,
                operator,
            } => {
                if self.execs.interrupt(token, uid, operator) {
                    tracing::info!(node = %self.node, token, uid, "canopy exec interrupted");
                }
                now(Ok(NodeReply::Ack))
            }
            // The probe's last hop: answering from this mailbox is the point
            // (a launch waits in it too); the relay stamps the time.
            NodeCommand::Probe => now(Ok(NodeReply::Ack)),
            // The relay answers these itself; they never come here.
            NodeCommand::FanoutTrace { .. } | NodeCommand::SetDebug(_) | NodeCommand::ShowDebug => {
                now(Err("answered by the relay, not the node agent".into()))
            }
        }
    }
}

impl NodeAgent {
    /// `canopy exec` here: simulated nodes answer at once without forking
    /// (exit 0; `hostname` gives the node's name and `echo` its arguments,
    /// so a load test can make every node's output differ; anything else
    /// prints nothing); real ones run the command off the loop.
    fn exec(&mut self, spec: crate::wire::exec::ExecSpec) -> Reply {
        use crate::wire::exec::{ExecEnd, ExecOutput};
        if let ExecMode::Simulated { .. } = self.mode {
            let output = match spec.argv.split_first() {
                Some((cmd, _)) if cmd == "hostname" => format!("{}\n", self.node),
                Some((cmd, args)) if cmd == "echo" => format!("{}\n", args.join(" ")),
                _ => String::new(),
            };
            return now(Ok(NodeReply::Exec(ExecOutput {
                output: output.into_bytes(),
                code: 0,
                end: ExecEnd::Exited,
                cut: 0,
            })));
        }
        let token = spec.token;
        // An ordinary user's command joins one of their jobs here, as
        // pam_slurm_adopt places an ssh session: the job's limits and device
        // fence then bind it, and it ends with the job. Nodes that do not
        // track jobs by cgroup run it as before.
        use crate::exec::remote::Adopt;
        let leaf = self.leaf.clone().filter(|l| l.containment().is_some());
        let job = match leaf {
            Some(leaf) if !spec.jobs.is_empty() && spec.uid != 0 => {
                let uid = spec.uid;
                let here = |id: u32| {
                    let j = self.jobs.get(&id)?;
                    match &j.cgroup {
                        // Never another user's job, whatever the request says.
                        Some(cg) if cg.uid() != uid => None,
                        Some(cg) => Some(Adopt::Held(cg.clone())),
                        None => Some(Adopt::Track {
                            leaf: leaf.clone(),
                            job_id: id,
                            uid,
                        }),
                    }
                };
                match crate::exec::remote::choose_job(&spec.jobs, here) {
                    Some((_, adopt)) => Some(adopt),
                    None => {
                        return now(Err(format!(
                            "none of uid {uid}'s jobs has started on {} yet",
                            self.node
                        )))
                    }
                }
            }
            _ => None,
        };
        let stop = match self
            .execs
            .begin(token, spec.uid, job.as_ref().map(|j| j.job_id()))
        {
            Ok(stop) => stop,
            Err(crate::exec::remote::Refused::Interrupted) => {
                return now(Ok(NodeReply::Exec(ExecOutput {
                    output: Vec::new(),
                    code: 128 + nix::sys::signal::Signal::SIGKILL as i32,
                    end: ExecEnd::Interrupted,
                    cut: 0,
                })))
            }
            Err(why) => {
                return now(Err(format!(
                    "canopy exec {token:#x} on {}: {why}",
                    self.node
                )))
            }
        };
        tracing::info!(node = %self.node, token, uid = spec.uid, job_id = ?job.as_ref().map(|j| j.job_id()), argv = ?spec.argv, "canopy exec");
        let node = self.node.clone();
        Box::pin(
            crate::exec::remote::run(spec, node, stop, job.clone())
                .into_actor(self)
                .map(move |out, act, ctx| {
                    if let (Some(id), Some(job)) = (act.execs.end(token), job) {
                        // The last run in the job's extern step: what it left
                        // there (`setsid nohup cmd &`) goes with it, off the
                        // loop; no run joins the job until that is done.
                        ctx.spawn(
                            tokio::task::spawn_blocking(move || job.end())
                                .into_actor(act)
                                .map(move |_, act, _| act.execs.cleaned(id)),
                        );
                    }
                    Ok(NodeReply::Exec(out))
                }),
        )
    }
}

impl Handler<Stop> for NodeAgent {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
        self.relay = None;
        ctx.stop();
    }
}
