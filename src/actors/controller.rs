//! The controller actor: the shell around the controller core
//! ([`crate::ctld::Core`]). It turns messages into core commands, reads
//! the clock for them, and carries out the effects the core returns:
//! records to the group-commit store first, then, once they are durable,
//! launches, signals, fan-outs, mail and the reply. It owns the actors the
//! effects are addressed to (a step actor per running job, a node actor
//! per node, a partition actor per partition, the root relay).
//!
//! Crash-only: a store write whose outcome is unknown stops the controller
//! through its fatal hook (the daemon exits; a restart recovers from disk),
//! and nothing that depended on the write leaves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::node::{
    AdminState, AdminUpdate, NodeActor, NodeChanged, Reachable, Registered, SetNodeConf,
};
use super::partition::{JobCounts, PartitionActor, SetPartitionConf};
use super::relay::{Fanout, GetRelayState, RelayActor, UpEvent};
use super::stats::{ActorStats, Counted};
use super::step::{
    AwaitLaunch, EndStep, ScriptExited, SignalStep, StepActor, StepEnded, WarnBeforeLimit,
};
use crate::config::{hostlist, Config};
use crate::ctld::{Command, Core, Effect, Output, Reply, StartJob};
use crate::model::job::{JobRecord, JobState, JobSubmit};
use crate::policy::authz::Caller;
use crate::state::store::{Recovered, Store};
use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;
use crate::wire::joblist::JobList;
use crate::wire::messages::{
    AcctQuery, ActorStatus, CancelReply, CancelRequest, CtldStats, ErrorCode, ErrorReply,
    JobUpdate, NodeUpdate, StatusReport, StepCancel, StepComplete, StepLaunched, StepRequest,
    SubmitReply, TreePlace, Usage,
};
use crate::wire::types::{AcctJob, NodeInfo, PartitionInfo};

const MAILBOX: usize = 8192;
/// How often the core's timers run (time-limit mail, purging finished jobs
/// older than MinJobAge). Slurm checks time limits about twice a minute.
const TICK_EVERY: Duration = Duration::from_secs(5);
/// How often partition actors' advisory counters are refreshed.
const COUNTS_EVERY: Duration = Duration::from_secs(1);

/// Called when a store write's outcome is unknown: the controller must
/// stop (the daemon exits and recovers from disk on restart).
pub type FatalHook = Arc<dyn Fn(String) + Send + Sync>;

/// Submit a job (sbatch, or the allocation of srun/salloc); `user` and
/// `group` are already resolved from its uid and gid.
#[derive(Message)]
#[rtype(result = "Result<SubmitReply, ErrorReply>")]
pub struct Submit {
    pub submit: JobSubmit,
    pub caller: Caller,
}

#[derive(Message)]
#[rtype(result = "JobList")]
pub struct GetJobs {
    pub ids: Vec<u32>,
    /// See [`JobQuery::brief`](crate::wire::messages::JobQuery::brief).
    pub brief: bool,
}

#[derive(Message)]
#[rtype(result = "Vec<NodeInfo>")]
pub struct GetNodes {
    pub names: Vec<String>,
}

#[derive(Message)]
#[rtype(result = "Vec<PartitionInfo>")]
pub struct GetPartitions;

#[derive(Message)]
#[rtype(result = "CancelReply")]
pub struct Cancel {
    pub req: CancelRequest,
    pub caller: Caller,
}

/// `scancel J.S`: cancel or signal one srun step.
#[derive(Message)]
#[rtype(result = "CancelReply")]
pub struct CancelStep {
    pub req: StepCancel,
    pub caller: Caller,
}

#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct UpdateNodes {
    pub update: NodeUpdate,
    pub user: String,
}

#[derive(Message)]
#[rtype(result = "StatusReport")]
pub struct GetStatus;

#[derive(Message)]
#[rtype(result = "()")]
struct RunSchedule;

/// Node and job counters for statistics (traffic fields left empty).
#[derive(Message)]
#[rtype(result = "CtldStats")]
pub struct GetCounts;

/// Resolve a hostlist to node ranks.
#[derive(Message)]
#[rtype(result = "GetRanksReply")]
pub struct GetRanks(pub String);

#[derive(MessageResponse)]
pub struct GetRanksReply(pub Result<RankSet, String>);

/// `scontrol hold/release/uhold/update JobId=...`, requeue, suspend, top.
#[derive(Message)]
#[rtype(result = "CancelReply")]
pub struct UpdateJobs {
    pub update: JobUpdate,
    pub caller: Caller,
}

/// srun: launch a step inside a running job.
#[derive(Message)]
#[rtype(result = "Result<StepLaunched, ErrorReply>")]
pub struct StartStep {
    pub req: StepRequest,
    pub caller: Caller,
}

/// srun: a step ended (and, for its own allocation, the job too).
#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct StepDone {
    pub done: StepComplete,
    pub caller: Caller,
}

/// The accounting records a `sacct` query selects.
#[derive(Message)]
#[rtype(result = "AcctReply")]
pub struct GetAcct(pub AcctQuery);

#[derive(MessageResponse)]
pub struct AcctReply {
    /// Records answered here: active jobs, and finished ones looked up by id.
    pub jobs: Vec<AcctJob>,
    /// Set when finished jobs must also be scanned from the store (no ids given).
    pub scan: Option<Store>,
}

/// Compress a rank set to a hostlist of node names.
#[derive(Message)]
#[rtype(result = "String")]
pub struct NamesOf(pub RankSet);

/// `scontrol reconfigure`: re-read slurm.conf and apply it, or say why not
/// (nothing is changed then).
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct Reconfigure;

/// The daemon is stopping: no more scheduling passes or timer ticks, so
/// nothing new starts before the final flush.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

/// Handles the controller hands to its connection layer.
#[derive(Clone)]
pub struct ControllerHandles {
    pub controller: Addr<ControllerActor>,
    pub controller_stats: Arc<ActorStats>,
    pub relay: Addr<RelayActor>,
    pub relay_stats: Arc<ActorStats>,
    pub node_count: u32,
}

struct StepHandle {
    addr: Addr<StepActor>,
    stats: Arc<ActorStats>,
}

type Partitions = HashMap<String, (Addr<PartitionActor>, Arc<ActorStats>)>;

pub struct ControllerActor {
    core: Core,
    store: Store,
    topo: Arc<Topology>,
    node_addrs: Vec<(Addr<NodeActor>, Arc<ActorStats>)>,
    partitions: Partitions,
    steps: HashMap<u32, StepHandle>,
    relay: Addr<RelayActor>,
    relay_stats: Arc<ActorStats>,
    schedule_queued: bool,
    /// Partition counters may have changed since they were last pushed.
    counts_dirty: bool,
    /// Scheduler pass timing: (passes, last, max, total) in microseconds.
    sched_timing: (u64, u64, u64, u64),
    stats: Arc<ActorStats>,
    fatal: FatalHook,
    /// Set once a store write failed: nothing more leaves.
    halted: Arc<AtomicBool>,
    /// Set by [`Stop`]: no new passes or ticks.
    stopping: bool,
}

impl ControllerActor {
    /// Build the controller and every actor it owns; returns the handles the
    /// network layer needs. `fatal` is called if a store write fails.
    pub fn start(
        conf: Arc<Config>,
        store: Store,
        recovered: Recovered,
        fatal: FatalHook,
    ) -> ControllerHandles {
        let n = conf.nodes.len() as u32;
        let topo = Arc::new(
            Topology::new(n.max(1), conf.tree_width.max(2)).unwrap_or_else(|_| {
                // Config validation guarantees width >= 2; keep a sane fallback anyway.
                Topology::new(n.max(1), 2).expect("width 2 is always valid")
            }),
        );
        let stats = ActorStats::new();
        let relay_stats = ActorStats::new();
        let cstats = stats.clone();
        let rstats = relay_stats.clone();
        let mut relay_out = None;
        let controller = ControllerActor::create(|ctx| {
            let me = ctx.address();
            let relay = RelayActor::new(
                None,
                topo.clone(),
                super::relay::Upstream::Controller(Counted::new(
                    me.clone().recipient(),
                    cstats.clone(),
                )),
                rstats.clone(),
            )
            .start();
            relay_out = Some(relay.clone());
            let admin: HashMap<String, AdminState> = recovered
                .node_admin
                .iter()
                .filter_map(|(name, bytes)| {
                    rmp_serde::from_slice(bytes).ok().map(|a| (name.clone(), a))
                })
                .collect();
            let timeout = Duration::from_secs(conf.slurmd_timeout_s);
            let node_addrs = conf
                .nodes
                .iter()
                .enumerate()
                .map(|(rank, nc)| {
                    let st = ActorStats::new();
                    let actor = NodeActor::new(
                        rank as u32,
                        Arc::new(nc.clone()),
                        admin.get(&nc.name).cloned().unwrap_or_default(),
                        timeout,
                        conf.return_to_service,
                        Counted::new(me.clone().recipient(), cstats.clone()),
                        st.clone(),
                    );
                    (actor.start(), st)
                })
                .collect();
            let partitions = conf
                .partitions
                .iter()
                .map(|pc| {
                    let st = ActorStats::new();
                    let addr = PartitionActor::new(Arc::new(pc.clone()), st.clone()).start();
                    (pc.name.clone(), (addr, st))
                })
                .collect();
            let now = chrono::Utc::now().timestamp();
            let (core, out) = Core::recover(
                conf.clone(),
                recovered.jobs,
                recovered.next_job_id,
                &admin,
                now,
            );
            let mut actor = ControllerActor {
                core,
                store,
                topo: topo.clone(),
                node_addrs,
                partitions,
                steps: HashMap::new(),
                relay,
                relay_stats: rstats.clone(),
                schedule_queued: false,
                counts_dirty: true,
                sched_timing: (0, 0, 0, 0),
                stats: cstats.clone(),
                fatal,
                halted: Arc::new(AtomicBool::new(false)),
                stopping: false,
            };
            let resumed = actor.carry_out(out, ctx);
            ctx.spawn(resumed.map(|_| ()).into_actor(&actor));
            actor
        });
        ControllerHandles {
            controller,
            controller_stats: stats,
            relay: relay_out.expect("relay is created in the controller's constructor"),
            relay_stats,
            node_count: conf.nodes.len() as u32,
        }
    }

    /// Decide `cmd` now and carry out what the core decided.
    fn run(&mut self, cmd: Command, ctx: &mut Context<Self>) -> BoxFuture<'static, Option<Reply>> {
        self.stats.handled();
        let now = chrono::Utc::now().timestamp();
        let out = self.core.apply(now, cmd);
        self.carry_out(out, ctx)
    }

    /// Write the output's records, make local changes at once (step actors,
    /// timers, configuration), and return a future that, once the records
    /// are durable, sends everything else and yields the reply. If the write
    /// fails, the fatal hook runs and nothing is sent.
    fn carry_out(
        &mut self,
        out: Output,
        ctx: &mut Context<Self>,
    ) -> BoxFuture<'static, Option<Reply>> {
        let Output {
            persist,
            effects,
            mut reply,
        } = out;
        let durable = (!persist.is_empty()).then(|| self.store.submit(persist));
        self.counts_dirty = true;
        let mut gates = Vec::new();
        let mut deferred: Vec<Deferred> = Vec::new();
        for e in effects {
            match e {
                Effect::StartJob(s) => {
                    if let Some(gate) = self.spawn_step(*s, ctx) {
                        gates.push(gate);
                    }
                }
                Effect::Reschedule => self.queue_schedule(ctx),
                Effect::WakeAt(t) => {
                    let wait = u64::try_from(t - chrono::Utc::now().timestamp()).unwrap_or(0);
                    ctx.run_later(Duration::from_secs(wait), |act, ctx| {
                        act.queue_schedule(ctx)
                    });
                }
                Effect::Reconfigured(conf) => self.apply_conf(&conf),
                Effect::EndJob {
                    job_id,
                    state,
                    reason,
                    exit,
                    cause,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = EndStep {
                            state,
                            reason,
                            exit,
                            cause,
                        };
                        deferred.push(Deferred::EndStep(h.addr.clone(), msg));
                    }
                }
                Effect::SignalJob {
                    job_id,
                    signal,
                    batch_only,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = SignalStep { signal, batch_only };
                        deferred.push(Deferred::Signal(h.addr.clone(), msg));
                    }
                }
                Effect::ScriptExited {
                    job_id,
                    status,
                    usage,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = ScriptExited(status, usage);
                        deferred.push(Deferred::ScriptExited(h.addr.clone(), msg));
                    }
                }
                Effect::Fanout {
                    targets,
                    cmd,
                    budget,
                } => {
                    let msg = Fanout {
                        targets,
                        cmd,
                        budget,
                    };
                    deferred.push(Deferred::Fanout(
                        self.relay.clone(),
                        self.relay_stats.clone(),
                        msg,
                    ));
                }
                Effect::LaunchStep {
                    targets,
                    launch,
                    budget,
                } => {
                    let job = self.steps.get(&launch.job_id).map(|h| {
                        h.stats.sent();
                        h.addr.clone()
                    });
                    let (job_id, step_id) = (launch.job_id, launch.step_id);
                    let msg = Fanout {
                        targets,
                        cmd: crate::wire::messages::NodeCommand::RunStep(launch),
                        budget,
                    };
                    deferred.push(Deferred::LaunchStep {
                        job,
                        job_id,
                        step_id,
                        relay: self.relay.clone(),
                        relay_stats: self.relay_stats.clone(),
                        msg,
                        me: ctx.address(),
                    });
                }
                Effect::Mail(m) => {
                    deferred.push(Deferred::Mail(self.core.conf().mail_prog.clone(), *m))
                }
            }
        }
        let fatal = self.fatal.clone();
        let halted = self.halted.clone();
        async move {
            if let Some(durable) = durable {
                let failure = match durable.await {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some("state store writer has stopped".to_string()),
                };
                if let Some(e) = failure {
                    // Crash-only: what depended on this write never leaves,
                    // not even a launch whose gate would open on drop.
                    std::mem::forget(gates);
                    if !halted.swap(true, Ordering::SeqCst) {
                        tracing::error!(error = %e, "state store write failed; stopping the controller");
                        fatal(e);
                    }
                    return None;
                }
            }
            if halted.load(Ordering::SeqCst) {
                std::mem::forget(gates);
                return None;
            }
            for g in gates {
                let _ = g.send(());
            }
            for d in deferred {
                if let Err(e) = d.run().await {
                    if let Some(Reply::Step(r @ Ok(_))) = &mut reply {
                        *r = Err(ErrorReply {
                            code: ErrorCode::Internal,
                            message: e,
                        });
                    }
                }
            }
            reply
        }
        .boxed()
    }

    /// Start job `s.job_id`'s actor: it launches the job once the returned
    /// gate fires, or adopts it as already running (no launch, no gate).
    fn spawn_step(
        &mut self,
        s: StartJob,
        ctx: &mut Context<Self>,
    ) -> Option<tokio::sync::oneshot::Sender<()>> {
        let st = ActorStats::new();
        let launching = s.launch.is_some();
        let actor = StepActor::new(
            s.job_id,
            s.ranks,
            s.launch.map(|l| *l),
            s.time_left,
            self.core.conf().kill_wait_s,
            self.relay.clone(),
            self.relay_stats.clone(),
            Counted::new(ctx.address().recipient(), self.stats.clone()),
            st.clone(),
            self.topo.max_depth(),
        )
        .with_warning(s.warn.map(|w| WarnBeforeLimit {
            signal: w.signal,
            before: Duration::from_secs(u64::from(w.secs)),
            batch_only: w.batch_only,
        }));
        let (open, gate) = tokio::sync::oneshot::channel();
        let addr = if launching {
            actor.with_gate(gate).start()
        } else {
            actor.start()
        };
        self.steps.insert(s.job_id, StepHandle { addr, stats: st });
        launching.then_some(open)
    }

    fn queue_schedule(&mut self, ctx: &mut Context<Self>) {
        if !self.schedule_queued && !self.stopping {
            self.schedule_queued = true;
            ctx.notify(RunSchedule);
        }
    }

    /// Push partition counters to the partition actors (advisory: at most
    /// once per `COUNTS_EVERY`, and only if they may have changed).
    fn push_partition_counts(&mut self) {
        if !self.counts_dirty {
            return;
        }
        self.counts_dirty = false;
        for (name, (addr, st)) in &self.partitions {
            let c = self.core.jobs().counts(name);
            st.sent();
            if addr
                .try_send(JobCounts {
                    pending: c.pending,
                    running: c.running,
                })
                .is_err()
            {
                st.handled(); // dropped: counters are advisory
            }
        }
    }

    /// Follow a configuration the core accepted: partition actors (new ones
    /// started, removed ones dropped) and node actors' settings.
    fn apply_conf(&mut self, conf: &Config) {
        let mut partitions = HashMap::new();
        for pc in &conf.partitions {
            let pconf = Arc::new(pc.clone());
            let entry = match self.partitions.remove(&pc.name) {
                Some((addr, st)) => {
                    st.sent();
                    addr.do_send(SetPartitionConf(pconf));
                    (addr, st)
                }
                None => {
                    let st = ActorStats::new();
                    (PartitionActor::new(pconf, st.clone()).start(), st)
                }
            };
            partitions.insert(pc.name.clone(), entry);
        }
        self.partitions = partitions;
        let timeout = Duration::from_secs(conf.slurmd_timeout_s);
        for (nc, (addr, st)) in conf.nodes.iter().zip(&self.node_addrs) {
            st.sent();
            addr.do_send(SetNodeConf {
                conf: Arc::new(nc.clone()),
                slurmd_timeout: timeout,
                return_to_service: conf.return_to_service,
            });
        }
    }
}

/// An effect waiting for its records to be durable, with its addressee
/// already looked up.
enum Deferred {
    EndStep(Addr<StepActor>, EndStep),
    Signal(Addr<StepActor>, SignalStep),
    ScriptExited(Addr<StepActor>, ScriptExited),
    Fanout(Addr<RelayActor>, Arc<ActorStats>, Fanout),
    LaunchStep {
        job: Option<Addr<StepActor>>,
        job_id: u32,
        step_id: u32,
        relay: Addr<RelayActor>,
        relay_stats: Arc<ActorStats>,
        msg: Fanout,
        me: Addr<ControllerActor>,
    },
    Mail(std::path::PathBuf, crate::mail::Mail),
}

impl Deferred {
    /// Send it. Fire-and-forget effects are spawned; a step launch is
    /// awaited, since srun's reply depends on it (`Err` fails the reply).
    async fn run(self) -> Result<(), String> {
        match self {
            Deferred::EndStep(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::Signal(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::ScriptExited(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::Fanout(relay, st, msg) => {
                actix::spawn(async move {
                    st.sent();
                    let failed: Vec<String> = match relay.send(msg).await {
                        Ok(o) => o.into_iter().filter_map(|o| o.result.err()).collect(),
                        Err(e) => vec![e.to_string()],
                    };
                    if !failed.is_empty() {
                        tracing::warn!(errors = %failed.join("; "), "node command not delivered everywhere");
                    }
                });
            }
            Deferred::LaunchStep {
                job,
                job_id,
                step_id,
                relay,
                relay_stats,
                msg,
                me,
            } => {
                // The job's own launch may still be on its way down the tree
                // (srun asks as soon as the job is running): the step follows it.
                let outcome = async {
                    if let Some(job) = job {
                        if !job.send(AwaitLaunch).await.unwrap_or(false) {
                            return Err("the job's launch failed or the job is ending".to_string());
                        }
                    }
                    relay_stats.sent();
                    let outcomes = relay.send(msg).await.map_err(|e| e.to_string())?;
                    let failed: Vec<String> = outcomes
                        .into_iter()
                        .filter_map(|o| o.result.err())
                        .collect();
                    if failed.is_empty() {
                        Ok(())
                    } else {
                        Err(failed.join("; "))
                    }
                }
                .await;
                if let Err(e) = outcome {
                    let _ = me.send(LaunchFailed { job_id, step_id }).await;
                    return Err(format!("step launch failed: {e}"));
                }
            }
            Deferred::Mail(prog, m) => {
                tracing::info!(to = %m.to, subject = %m.subject, "mailing");
                crate::mail::send(&prog, m);
            }
        }
        Ok(())
    }
}

/// A step's launch did not reach every node.
#[derive(Message)]
#[rtype(result = "()")]
struct LaunchFailed {
    job_id: u32,
    step_id: u32,
}

impl Actor for ControllerActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        ctx.run_interval(COUNTS_EVERY, |act, _| act.push_partition_counts());
        ctx.run_interval(TICK_EVERY, |act, ctx| {
            if act.stopping {
                return;
            }
            let done = act.run(Command::Tick, ctx);
            ctx.spawn(done.map(|_| ()).into_actor(act));
        });
    }
}

/// Run `cmd` and answer with what `pick` takes from its reply (`gone` if
/// the controller stopped before it could answer).
macro_rules! answer {
    ($self:ident, $ctx:ident, $cmd:expr, $pat:pat => $val:expr, $gone:expr) => {{
        let done = $self.run($cmd, $ctx);
        Box::pin(async move {
            match done.await {
                Some($pat) => $val,
                _ => $gone,
            }
        })
    }};
}

fn internal(message: &str) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message: message.into(),
    }
}

impl Handler<Stop> for ControllerActor {
    type Result = ();
    fn handle(&mut self, _msg: Stop, _ctx: &mut Context<Self>) {
        self.stats.handled();
        tracing::info!("controller stopping: no more scheduling passes");
        self.stopping = true;
    }
}

impl Handler<RunSchedule> for ControllerActor {
    type Result = ();
    fn handle(&mut self, _msg: RunSchedule, ctx: &mut Context<Self>) {
        self.schedule_queued = false;
        if self.stopping {
            return;
        }
        let t0 = std::time::Instant::now();
        let now = chrono::Utc::now().timestamp();
        let out = self.core.apply(now, Command::Schedule);
        let us = t0.elapsed().as_micros() as u64;
        let (n, _, max, total) = self.sched_timing;
        self.sched_timing = (n + 1, us, max.max(us), total + us);
        let done = self.carry_out(out, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}

impl Handler<Submit> for ControllerActor {
    type Result = ResponseFuture<Result<SubmitReply, ErrorReply>>;
    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::Submit {
            submit: Box::new(msg.submit),
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Submit(r) => r, Err(internal("could not save job state")))
    }
}

impl Handler<Cancel> for ControllerActor {
    type Result = ResponseFuture<CancelReply>;
    fn handle(&mut self, msg: Cancel, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::Cancel {
            req: msg.req,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => r, CancelReply { results: Vec::new() })
    }
}

impl Handler<CancelStep> for ControllerActor {
    type Result = ResponseFuture<CancelReply>;
    fn handle(&mut self, msg: CancelStep, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::CancelStep {
            req: msg.req,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => r, CancelReply { results: Vec::new() })
    }
}

impl Handler<UpdateJobs> for ControllerActor {
    type Result = ResponseFuture<CancelReply>;
    fn handle(&mut self, msg: UpdateJobs, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::UpdateJobs {
            update: msg.update,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => r, CancelReply { results: Vec::new() })
    }
}

impl Handler<StartStep> for ControllerActor {
    type Result = ResponseFuture<Result<StepLaunched, ErrorReply>>;
    fn handle(&mut self, msg: StartStep, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::StartStep {
            req: Box::new(msg.req),
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Step(r) => r, Err(internal("controller is shutting down")))
    }
}

impl Handler<LaunchFailed> for ControllerActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: LaunchFailed, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::StepLaunchFailed {
            job_id: msg.job_id,
            step_id: msg.step_id,
        };
        let done = self.run(cmd, ctx);
        Box::pin(async move {
            done.await;
        })
    }
}

impl Handler<StepDone> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: StepDone, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::StepDone {
            done: msg.done,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Done(r) => r, Err(internal("controller is shutting down")))
    }
}

impl Handler<StepEnded> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: StepEnded, ctx: &mut Context<Self>) {
        self.steps.remove(&msg.job_id);
        let cmd = Command::JobEnded {
            job_id: msg.job_id,
            state: msg.state,
            exit: msg.exit,
            reason: msg.reason,
            usage: msg.usage,
        };
        let done = self.run(cmd, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}

impl Handler<NodeChanged> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: NodeChanged, ctx: &mut Context<Self>) {
        let cmd = Command::NodeChanged {
            status: Box::new(msg.status),
            lost: msg.lost,
            registration: msg.registration.map(Box::new),
        };
        let done = self.run(cmd, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}

impl Handler<Reconfigure> for ControllerActor {
    type Result = ResponseFuture<Result<(), String>>;
    fn handle(&mut self, _msg: Reconfigure, ctx: &mut Context<Self>) -> Self::Result {
        // A small file, read on an operator's request: not worth a round
        // trip off the actor.
        let new = match Config::load(&self.core.conf().path) {
            Ok(c) => c,
            Err(e) => {
                let e = e.to_string();
                return Box::pin(async move { Err(e) });
            }
        };
        let cmd = Command::Reconfigure {
            conf: Some(Arc::new(new)),
        };
        answer!(self, ctx, cmd, Reply::Reconfigure(r) => r, Err("controller is shutting down".into()))
    }
}

impl Handler<UpdateNodes> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: UpdateNodes, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let invalid = |message: String| ErrorReply {
            code: ErrorCode::InvalidNodeName,
            message,
        };
        let names = match hostlist::expand(&msg.update.nodes) {
            Ok(n) => n,
            Err(e) => {
                let e = invalid(format!("Invalid node name specified: {e}"));
                return Box::pin(async move { Err(e) });
            }
        };
        let mut targets = Vec::new();
        for n in &names {
            match self.core.conf().node_index(n) {
                Some(r) => targets.push(self.node_addrs[r].clone()),
                None => {
                    let e = invalid(format!("Invalid node name specified: {n}"));
                    return Box::pin(async move { Err(e) });
                }
            }
        }
        let Some(state) = msg.update.state else {
            return Box::pin(async { Ok(()) });
        };
        let reason = msg.update.reason;
        let user = msg.user;
        let store = self.store.clone();
        Box::pin(async move {
            for (addr, st) in targets {
                st.sent();
                let m = AdminUpdate {
                    state,
                    reason: reason.clone(),
                    user: user.clone(),
                };
                if let Ok(Err(e)) = addr.send(m).await {
                    return Err(ErrorReply {
                        code: ErrorCode::InvalidRequest,
                        message: e,
                    });
                }
            }
            // The store applies batches in order: an empty commit is a barrier
            // behind the admin-state writes the node changes queued above.
            store.commit(Vec::new()).await.map_err(|e| ErrorReply {
                code: ErrorCode::Internal,
                message: format!("could not save node state: {e}"),
            })
        })
    }
}

impl Handler<UpEvent> for ControllerActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: UpEvent, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        match msg {
            UpEvent::Registered { hello, via } => {
                let Some((addr, st)) = self.node_addrs.get(hello.rank as usize).cloned() else {
                    return Box::pin(async {});
                };
                if self
                    .core
                    .conf()
                    .nodes
                    .get(hello.rank as usize)
                    .map(|n| n.name.as_str())
                    != Some(hello.node.as_str())
                {
                    tracing::warn!(rank = hello.rank, node = %hello.node, "registration with mismatched name ignored");
                    return Box::pin(async {});
                }
                Box::pin(async move {
                    st.sent();
                    let _ = addr.send(Registered { hello, via }).await;
                })
            }
            UpEvent::Liveness { added, removed } => {
                let mut sends = Vec::new();
                for (set, live) in [(added, true), (removed, false)] {
                    for r in set.iter() {
                        if let Some((a, st)) = self.node_addrs.get(r as usize) {
                            st.sent();
                            sends.push((a.clone(), live));
                        }
                    }
                }
                Box::pin(async move {
                    for (a, live) in sends {
                        let _ = a.send(Reachable(live)).await;
                    }
                })
            }
            UpEvent::BatchFinished(b) => {
                let step = self
                    .steps
                    .get(&b.job_id)
                    .map(|h| (h.addr.clone(), h.stats.clone()));
                Box::pin(async move {
                    if let Some((addr, st)) = step {
                        st.sent();
                        let _ = addr.send(ScriptExited(b.status, b.usage)).await;
                    }
                })
            }
        }
    }
}

impl Handler<GetJobs> for ControllerActor {
    type Result = MessageResult<GetJobs>;
    fn handle(&mut self, msg: GetJobs, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let now = chrono::Utc::now().timestamp();
        MessageResult(
            self.core
                .job_infos(&msg.ids, msg.brief, now)
                .into_iter()
                .collect(),
        )
    }
}

impl Handler<GetNodes> for ControllerActor {
    type Result = MessageResult<GetNodes>;
    fn handle(&mut self, msg: GetNodes, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        MessageResult(self.core.node_infos(&msg.names))
    }
}

impl Handler<GetPartitions> for ControllerActor {
    type Result = MessageResult<GetPartitions>;
    fn handle(&mut self, _msg: GetPartitions, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        MessageResult(self.core.partition_infos())
    }
}

impl Handler<GetStatus> for ControllerActor {
    type Result = ResponseFuture<StatusReport>;
    fn handle(&mut self, _msg: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let conf = self.core.conf().clone();
        let jobs = self.core.jobs();
        let (pending, running) = conf
            .partitions
            .iter()
            .map(|p| jobs.counts(&p.name))
            .fold((0, 0), |(pd, r), c| (pd + c.pending, r + c.running));
        let mut actors = vec![ActorStatus {
            kind: "controller".into(),
            name: conf.control_host.clone(),
            state: format!(
                "jobs={} pending={} running={} next_job_id={}",
                jobs.len(),
                pending,
                running,
                self.core.next_job_id()
            ),
            mailbox_depth: self.stats.depth(),
            handled: self.stats.total(),
        }];
        for p in &conf.partitions {
            if let Some((_, st)) = self.partitions.get(&p.name) {
                let c = jobs.counts(&p.name);
                actors.push(ActorStatus {
                    kind: "partition".into(),
                    name: p.name.clone(),
                    state: format!(
                        "{} nodes={} pending={} running={}",
                        p.state.name(),
                        p.nodes.len(),
                        c.pending,
                        c.running
                    ),
                    mailbox_depth: st.depth(),
                    handled: st.total(),
                });
            }
        }
        let mut tree = Vec::new();
        for (rank, (_, st)) in self.node_addrs.iter().enumerate() {
            let Some(info) = self.core.node_info(rank) else {
                continue;
            };
            actors.push(ActorStatus {
                kind: "node".into(),
                name: info.name.clone(),
                state: info.scontrol_state(),
                mailbox_depth: st.depth(),
                handled: st.total(),
            });
            tree.push(TreePlace {
                node: info.name.clone(),
                rank: rank as u32,
                parent: self
                    .topo
                    .parent(rank as u32)
                    .and_then(|p| conf.nodes.get(p as usize))
                    .map(|n| n.name.clone()),
                attached_to: info.attached_to.clone(),
                live: !info.not_responding,
            });
        }
        for (id, h) in &self.steps {
            actors.push(ActorStatus {
                kind: "step".into(),
                name: format!("{id}.batch"),
                state: "running".into(),
                mailbox_depth: h.stats.depth(),
                handled: h.stats.total(),
            });
        }
        let relay = self.relay.clone();
        let rstats = self.relay_stats.clone();
        let controller = conf.control_host.clone();
        let width = conf.tree_width;
        Box::pin(async move {
            rstats.sent();
            if let Ok(rs) = relay.send(GetRelayState).await {
                actors.insert(
                    1,
                    ActorStatus {
                        kind: "relay".into(),
                        name: "root".into(),
                        state: format!(
                            "attached={} live={} pending_fanouts={}",
                            rs.attached.len(),
                            rs.live.len(),
                            rs.pending_fanouts
                        ),
                        mailbox_depth: rs.mailbox_depth,
                        handled: rs.handled,
                    },
                );
            }
            StatusReport {
                controller,
                tree_width: width,
                actors,
                tree,
            }
        })
    }
}

impl Handler<GetCounts> for ControllerActor {
    type Result = MessageResult<GetCounts>;
    fn handle(&mut self, _msg: GetCounts, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let (nodes, pending, running) = self.core.node_counts();
        let c = self.core.counters();
        let ended = |s: JobState| c.ended.get(&s).copied().unwrap_or(0);
        MessageResult(CtldStats {
            nodes,
            jobs_pending: pending,
            jobs_running: running,
            jobs_submitted: c.submitted,
            jobs_started: c.started,
            jobs_completed: ended(JobState::Completed),
            jobs_failed: ended(JobState::Failed)
                + ended(JobState::NodeFail)
                + ended(JobState::Timeout),
            jobs_cancelled: ended(JobState::Cancelled),
            sched_cycles: self.sched_timing.0,
            sched_last_us: self.sched_timing.1,
            sched_max_us: self.sched_timing.2,
            sched_total_us: self.sched_timing.3,
            now: chrono::Utc::now().timestamp(),
            ..Default::default()
        })
    }
}

impl Handler<GetRanks> for ControllerActor {
    type Result = GetRanksReply;
    fn handle(&mut self, msg: GetRanks, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let names = match hostlist::expand(&msg.0) {
            Ok(n) => n,
            Err(e) => return GetRanksReply(Err(format!("Invalid node name specified: {e}"))),
        };
        let mut ranks = RankSet::new();
        for n in names {
            match self.core.conf().node_index(&n) {
                Some(r) => {
                    ranks.insert(r as u32);
                }
                None => return GetRanksReply(Err(format!("Invalid node name specified: {n}"))),
            }
        }
        GetRanksReply(Ok(ranks))
    }
}

impl Handler<NamesOf> for ControllerActor {
    type Result = String;
    fn handle(&mut self, msg: NamesOf, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let conf = self.core.conf();
        let names: Vec<&str> = msg
            .0
            .iter()
            .map(|r| conf.nodes.get(r as usize).map_or("?", |n| n.name.as_str()))
            .collect();
        hostlist::compress(&names)
    }
}

impl Handler<GetAcct> for ControllerActor {
    type Result = AcctReply;
    fn handle(&mut self, msg: GetAcct, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let q = msg.0;
        let now = chrono::Utc::now().timestamp();
        let live = |j: &JobRecord| !j.state.is_finished();
        let mut jobs = Vec::new();
        if q.job_ids.is_empty() {
            for j in self.core.jobs().values().filter(|j| live(j)) {
                let a = self.core.acct_of(j, Usage::default());
                if crate::state::acct::matches(&a, &q, now) {
                    jobs.push(a);
                }
            }
            return AcctReply {
                jobs,
                scan: Some(self.store.clone()),
            };
        }
        // Finished array tasks are found in the store's array index too.
        let mut ids = self.core.resolve_ids(&q.job_ids);
        let mut seen: std::collections::HashSet<u32> = ids.iter().copied().collect();
        for &id in &q.job_ids {
            for m in self.store.acct_array_members(id).unwrap_or_default() {
                if seen.insert(m) {
                    ids.push(m);
                }
            }
        }
        for id in ids {
            let rec = match self.core.jobs().get(id) {
                Some(j) if live(j) => Some(self.core.acct_of(j, Usage::default())),
                // Finished: the stored record has the step's usage.
                _ => self.store.acct_get(id).ok().flatten(),
            };
            if let Some(a) = rec.filter(|a| crate::state::acct::matches(a, &q, now)) {
                jobs.push(a);
            }
        }
        AcctReply { jobs, scan: None }
    }
}
