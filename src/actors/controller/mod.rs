//! The controller actor: the shell around the controller core
//! ([`crate::ctld::Core`]). It turns messages into core commands, reads
//! the clock for them, and carries out the effects the core returns:
//! records to the group-commit store first, then, once they are durable,
//! launches, signals, fan-outs, mail and the reply. It owns the actors the
//! effects are addressed to (a step actor per running job, a partition
//! actor per partition, the root relay). Node health is the core's.
//!
//! Crash-only: a store write whose outcome is unknown stops the controller
//! through its fatal hook (the daemon exits; a restart recovers from disk),
//! and nothing that depended on the write leaves.
//!
//! This file holds the actor, its messages and the handlers that feed the
//! core; `effects.rs` carries the core's output out, `queries.rs` answers
//! the read-only views and the node-facing messages.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::partition::PartitionActor;
use super::relay::RelayActor;
use super::stats::{ActorStats, Counted};
use super::step::{StepActor, StepEnded};
use crate::config::Config;
use crate::ctld::{Command, Core, Reply};
use crate::model::job::JobSubmit;
use crate::model::node::AdminState;
use crate::policy::authz::Caller;
use crate::state::store::{Recovered, Store};
use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;
use crate::wire::joblist::JobList;
use crate::wire::messages::{
    AcctQuery, CancelReply, CancelRequest, CtldStats, ErrorCode, ErrorReply, JobUpdate, NodeUpdate,
    StatusReport, StepCancel, StepComplete, StepLaunched, StepRequest, SubmitReply,
};
use crate::wire::types::{AcctJob, NodeInfo, PartitionInfo};

const MAILBOX: usize = 8192;

mod accounts;
pub mod console;
pub mod dynamic;
mod effects;
pub mod exec;
mod power;
mod priority;
mod queries;
pub mod resv;

pub use self::priority::{GetPriority, GetShares};
pub use accounts::{AccountsChange, GetAccounts};

/// How often the core's timers run (time-limit mail, purging finished jobs
/// older than MinJobAge). Slurm checks time limits about twice a minute.
const TICK_EVERY: Duration = Duration::from_secs(5);
/// How often power saving's timer ticks (`ctld::power`).
const POWER_TICK: Duration = Duration::from_secs(1);
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
    /// Who asks: `PrivateData` decides what they see.
    pub caller: Caller,
    /// The asker's groups: jobs of partitions their AllowGroups leave
    /// them out of are marked hidden.
    pub groups: Vec<String>,
}

#[derive(Message)]
#[rtype(result = "Vec<NodeInfo>")]
pub struct GetNodes {
    pub names: Vec<String>,
    pub caller: Caller,
}

#[derive(Message)]
#[rtype(result = "Vec<PartitionInfo>")]
pub struct GetPartitions {
    pub caller: Caller,
    /// The asker's groups (see [`GetJobs::groups`]).
    pub groups: Vec<String>,
}

#[derive(Message)]
#[rtype(result = "Option<CancelReply>")]
pub struct Cancel {
    pub req: CancelRequest,
    pub caller: Caller,
}

/// `scancel J.S`: cancel or signal one srun step.
#[derive(Message)]
#[rtype(result = "Option<CancelReply>")]
pub struct CancelStep {
    pub req: StepCancel,
    pub caller: Caller,
}

#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct UpdateNodes {
    pub update: NodeUpdate,
    /// The caller's name, the reason's author.
    pub user: String,
    pub caller: Caller,
}

#[derive(Message)]
#[rtype(result = "StatusReport")]
pub struct GetStatus {
    /// Who asks: `PrivateData` hides others' jobs, the nodes and the
    /// partitions from `canopy status` as from squeue and sinfo.
    pub caller: Caller,
}

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
#[rtype(result = "Option<CancelReply>")]
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

/// `sstat`: the running steps to ask and their nodes (see
/// `Core::stat_targets`).
#[derive(Message)]
#[rtype(
    result = "Result<Vec<(crate::wire::messages::StatStep, RankSet)>, crate::wire::messages::ErrorReply>"
)]
pub struct StatTargets {
    pub req: crate::wire::messages::StepStatRequest,
    pub caller: Caller,
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
    /// How many ranks the node table has now (dynamic nodes change it): read with
    /// [`ControllerHandles::nodes_now`].
    pub node_count: Arc<std::sync::atomic::AtomicU32>,
    /// The controller daemon's actors, read by `canopy top` without going
    /// through their mailboxes.
    pub registry: Arc<crate::actors::registry::ActorRegistry>,
    /// Request and fan-out latency histograms (`canopy stats`, sdiag).
    pub latency: Arc<crate::console::latency::Latency>,
    /// The relay tree's shape (a subtree's ranks for `canopy top`).
    pub topo: Arc<Topology>,
    /// `canopy events`' log (followers wait on it, not on the controller's mailbox).
    pub events: crate::daemon::event_log::EventLog,
    /// `canopy exec` runs in progress per user (`daemon::rpc_exec`).
    pub execs: Arc<crate::daemon::rpc_exec::ExecSlots>,
}

impl ControllerHandles {
    /// The node table's ranks now: `0..nodes_now()` is every node, dynamic ones included.
    pub fn nodes_now(&self) -> u32 {
        self.node_count.load(std::sync::atomic::Ordering::Relaxed)
    }
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
    partitions: Partitions,
    steps: HashMap<u32, StepHandle>,
    relay: Addr<RelayActor>,
    relay_stats: Arc<ActorStats>,
    schedule_queued: bool,
    /// Partition counters may have changed since they were last pushed.
    counts_dirty: bool,
    /// Scheduler pass timing: (passes, last, max, total) in microseconds.
    sched_timing: (u64, u64, u64, u64),
    /// Backfill pass timing: (last, max, total) in microseconds.
    bf_timing: (u64, u64, u64),
    stats: Arc<ActorStats>,
    fatal: FatalHook,
    /// Set once a store write failed: nothing more leaves.
    halted: Arc<AtomicBool>,
    /// Jobs whose start is not yet durable, so their launch has not left:
    /// a cancel may stop them at once, since nothing reached a node.
    unlaunched: Arc<std::sync::Mutex<std::collections::HashSet<u32>>>,
    /// Set by [`Stop`]: no new passes or ticks.
    stopping: bool,
    /// Wake-up times already armed (`--begin` times), each once.
    armed: std::collections::BTreeSet<i64>,
    /// Running PrologSlurmctld scripts, by job and run (its restart
    /// count), to kill if the job ends.
    ctld_prologs: HashMap<(u32, u32), crate::exec::prolog::Stop>,
    /// This daemon's actors for `canopy top` (steps and partitions made
    /// later register here too).
    registry: Arc<crate::actors::registry::ActorRegistry>,
    /// Where the core's events go (`canopy events`).
    events: crate::daemon::event_log::EventLog,
    /// The node table's size, shared with the connection layer (`ControllerHandles`).
    node_count: Arc<std::sync::atomic::AtomicU32>,
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
        let events = crate::daemon::event_log::EventLog::in_memory(
            crate::console::events::DEFAULT_RETENTION_S,
        );
        Self::start_with_events(conf, store, recovered, fatal, events)
    }

    /// [`ControllerActor::start`], recording events in `events` (the daemon's, kept on disk).
    pub fn start_with_events(
        conf: Arc<Config>,
        store: Store,
        recovered: Recovered,
        fatal: FatalHook,
        events: crate::daemon::event_log::EventLog,
    ) -> ControllerHandles {
        let events_out = events.clone();
        let conf = dynamic::with_stored(conf, &recovered.dyn_nodes);
        // Room for every dynamic node MaxNodeCount allows, so that adding one never moves
        // another (`tree::topology`).
        let (fixed, capacity) = conf.tree_ranks();
        let topo = Arc::new(
            Topology::with_dynamic(fixed, capacity, conf.tree_width.max(2)).unwrap_or_else(|_| {
                // Config validation guarantees width >= 2; keep a sane fallback anyway.
                Topology::with_dynamic(fixed, capacity, 2).expect("width 2 is always valid")
            }),
        );
        let stats = ActorStats::new();
        let relay_stats = ActorStats::new();
        let cstats = stats.clone();
        let rstats = relay_stats.clone();
        let registry = crate::actors::registry::ActorRegistry::new("controller");
        let node_count = Arc::new(std::sync::atomic::AtomicU32::new(conf.nodes.len() as u32));
        registry.register("controller", &conf.control_host, &stats);
        let latency = Arc::new(crate::console::latency::Latency::new(
            chrono::Utc::now().timestamp(),
        ));
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
            .with_registry(registry.clone())
            .with_latency(latency.clone())
            .start();
            relay_out = Some(relay.clone());
            let admin: HashMap<String, AdminState> = recovered
                .node_admin
                .iter()
                .filter_map(|(name, bytes)| match rmp_serde::from_slice(bytes) {
                    Ok(a) => Some((name.clone(), a)),
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "stored admin state unreadable; ignored");
                        None
                    }
                })
                .collect();
            let partitions = conf
                .partitions
                .iter()
                .map(|pc| {
                    let st = ActorStats::new();
                    registry.register("partition", &pc.name, &st);
                    let addr = PartitionActor::new(Arc::new(pc.clone()), st.clone()).start();
                    (pc.name.clone(), (addr, st))
                })
                .collect();
            // Records from before group names were kept get theirs now, so
            // their mail names the group (a lookup per gid, at start-up).
            let mut jobs = recovered.jobs;
            let mut groups: HashMap<u32, String> = HashMap::new();
            for j in jobs.iter_mut().filter(|j| j.submit.group.is_empty()) {
                let gid = j.submit.gid;
                j.submit.group = groups
                    .entry(gid)
                    .or_insert_with(|| {
                        crate::exec::identity::group_name(gid).unwrap_or_else(|| gid.to_string())
                    })
                    .clone();
            }
            let now = chrono::Utc::now().timestamp();
            let (mut core, mut out) =
                Core::recover(conf.clone(), jobs, recovered.next_job_id, &admin, now);
            // The association database first: fair share and the QOS
            // and association priorities that usage restores read it.
            core.recover_accounts(recovered.accounts);
            core.restore_usage(recovered.usage, now);
            let resv_out =
                core.restore_reservations(recovered.reservations, recovered.resv_suffix, now);
            out.persist.extend(resv_out.persist);
            out.effects.extend(resv_out.effects);
            let mut actor = ControllerActor {
                core,
                store,
                topo: topo.clone(),
                partitions,
                steps: HashMap::new(),
                relay,
                relay_stats: rstats.clone(),
                schedule_queued: false,
                counts_dirty: true,
                sched_timing: (0, 0, 0, 0),
                bf_timing: (0, 0, 0),
                stats: cstats.clone(),
                fatal,
                halted: Arc::new(AtomicBool::new(false)),
                unlaunched: Arc::default(),
                stopping: false,
                armed: Default::default(),
                ctld_prologs: HashMap::new(),
                registry: registry.clone(),
                events,
                node_count: node_count.clone(),
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
            node_count,
            registry,
            latency,
            topo,
            events: events_out,
            execs: Arc::default(),
        }
    }

    /// Decide `cmd` now and carry out what the core decided.
    fn run(&mut self, cmd: Command, ctx: &mut Context<Self>) -> BoxFuture<'static, Option<Reply>> {
        let _busy = self.stats.handled();
        if self.halted.load(std::sync::atomic::Ordering::SeqCst) {
            // A write failed: this controller decides nothing more (the
            // daemon is exiting; a restart recovers from disk).
            return Box::pin(async { None });
        }
        let now = chrono::Utc::now().timestamp();
        let out = self.core.apply(now, cmd);
        self.carry_out(out, ctx)
    }
}

#[cfg(test)]
mod tests;

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
            // The daemon's other actors, from their published counters (a few atomics
            // each); a stuck controller is seen by `canopy top`, which reads them too.
            let stuck_ms = crate::console::top::DEFAULT_STUCK_MS;
            for who in act.registry.stuck_now(stuck_ms) {
                act.events
                    .actor_stuck(&who, Duration::from_millis(stuck_ms));
            }
        });
        let sched = self.core.conf().sched.clone();
        // The backfill pass every `bf_interval` (never under sched/builtin).
        if let Some(secs) = sched.backfill_every() {
            ctx.run_interval(Duration::from_secs(secs.max(1).into()), |act, ctx| {
                act.run_backfill(ctx)
            });
        }
        // Power saving's timer: the core decides what is due (idle nodes
        // every `power_save_interval`, timeouts, queued power-ups), so
        // `scontrol reconfigure` may turn power saving on or retime it; a
        // tick with nothing due costs the core nothing.
        ctx.run_interval(POWER_TICK, |act, ctx| {
            if act.stopping {
                return;
            }
            let done = act.run(Command::PowerSave, ctx);
            ctx.spawn(done.map(|_| ()).into_actor(act));
        });
        // A full quick pass every `sched_interval`, events or not.
        if sched.sched_interval_s > 0 {
            let every = Duration::from_secs(sched.sched_interval_s.into());
            ctx.run_interval(every, |act, ctx| act.queue_schedule(ctx));
        }
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
        let _busy = self.stats.handled();
        tracing::info!("controller stopping: no more scheduling passes");
        self.stopping = true;
    }
}

impl ControllerActor {
    /// One backfill pass, timed for sdiag.
    fn run_backfill(&mut self, ctx: &mut Context<Self>) {
        if self.stopping || self.halted.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let t0 = std::time::Instant::now();
        let now = chrono::Utc::now().timestamp();
        let out = self.core.apply(now, Command::Backfill);
        let us = t0.elapsed().as_micros() as u64;
        let (_, max, total) = self.bf_timing;
        self.bf_timing = (us, max.max(us), total + us);
        let done = self.carry_out(out, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}

impl Handler<RunSchedule> for ControllerActor {
    type Result = ();
    fn handle(&mut self, _msg: RunSchedule, ctx: &mut Context<Self>) {
        self.schedule_queued = false;
        if self.stopping || self.halted.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let t0 = std::time::Instant::now();
        let now = chrono::Utc::now().timestamp();
        let out = self.core.apply(now, Command::Schedule);
        let us = t0.elapsed().as_micros() as u64;
        let (n, _, max, total) = self.sched_timing;
        self.sched_timing = (n + 1, us, max.max(us), total + us);
        // What `canopy top` shows for this actor, readable while it is busy.
        let jobs = self.core.jobs();
        self.stats
            .publish(format!("jobs={} sched_passes={}", jobs.len(), n + 1));
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
    type Result = ResponseFuture<Option<CancelReply>>;
    fn handle(&mut self, msg: Cancel, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::Cancel {
            req: msg.req,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => Some(r), None)
    }
}

impl Handler<CancelStep> for ControllerActor {
    type Result = ResponseFuture<Option<CancelReply>>;
    fn handle(&mut self, msg: CancelStep, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::CancelStep {
            req: msg.req,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => Some(r), None)
    }
}

impl Handler<UpdateJobs> for ControllerActor {
    type Result = ResponseFuture<Option<CancelReply>>;
    fn handle(&mut self, msg: UpdateJobs, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::UpdateJobs {
            update: msg.update,
            caller: msg.caller,
        };
        answer!(self, ctx, cmd, Reply::Results(r) => Some(r), None)
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
        if let Ok(mut u) = self.unlaunched.lock() {
            u.remove(&msg.job_id);
        }
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

impl Handler<Reconfigure> for ControllerActor {
    type Result = ResponseFuture<Result<(), String>>;
    fn handle(&mut self, _msg: Reconfigure, ctx: &mut Context<Self>) -> Self::Result {
        // A small file, read on an operator's request: not worth a round
        // trip off the actor.
        let new = match Config::load(&self.core.conf().path) {
            Ok(c) => {
                // The same notes as at start, so a changed file is checked as loudly.
                c.log_load_notes();
                c
            }
            Err(e) => {
                let e = e.to_string();
                return Box::pin(async move { Err(e) });
            }
        };
        let cmd = Command::Reconfigure {
            conf: Arc::new(new),
        };
        answer!(self, ctx, cmd, Reply::Reconfigure(r) => r, Err("controller is shutting down".into()))
    }
}
