//! The controller actor: the job table, the scheduler's view of every node,
//! and the durable record of both. It admits jobs (after their partition has
//! validated them), schedules FIFO with consumable CPUs and memory, starts a
//! step actor per started job, finalizes jobs when their step ends, and
//! reconciles what nodes report after a restart on either side.
//!
//! Every accepted change is written through the group-commit store before the
//! client is answered (submit, cancel) or before the effect leaves the
//! controller (a start is durable before its launch is fanned out).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::node::{
    AdminState, AdminUpdate, NodeActor, NodeChanged, NodeStatus, Reachable, Registered, SetNodeConf,
};
use super::partition::{JobCounts, PartitionActor, SetPartitionConf};
use super::relay::{Fanout, GetRelayState, RelayActor, UpEvent};
use super::stats::{ActorStats, Counted};
use super::step::{
    AwaitLaunch, EndStep, ScriptExited, SignalStep, StepActor, StepEnded, WarnBeforeLimit,
};
use crate::config::hostlist;
use crate::config::Config;
use crate::mail;
use crate::model::dependency::Dependency;
use crate::model::job::JobRecord;
use crate::model::reason::JobReason;
use crate::sched::priority::BasicPriority;
use crate::sched::table::{JobTable, PartitionView, Resolved};
use crate::sched::{self, Infeasible, NodeSlot, Request, RequestError};
use crate::state::store::{Op, Recovered, Store};
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;
use crate::wire::joblist::JobList;
use crate::wire::messages::{
    AcctQuery, ActorStatus, CancelReply, CancelRequest, CtldStats, ErrorCode, ErrorReply,
    ExitStatus, JobLaunch, JobOnNode, JobUpdate, KillCause, NodeCommand, NodeCounts, NodeUpdate,
    RequeueKind, StatusReport, StepCancel, StepComplete, StepLaunch, StepLaunched, StepRequest,
    SubmitReply, TreePlace, Usage, WillRun,
};
use crate::wire::types::{
    AcctJob, AcctStep, ArraySpec, ArrayTask, JobInfo, JobState, JobSubmit, NodeBaseState, NodeInfo,
    PartitionInfo, StepKind, UnixTime,
};

const MAILBOX: usize = 8192;
/// How often finished jobs older than MinJobAge are purged.
const PURGE_EVERY: Duration = Duration::from_secs(5);
/// How often partition actors' advisory counters are refreshed.
const COUNTS_EVERY: Duration = Duration::from_secs(1);
/// How often running jobs are checked for time-limit mail (Slurm checks
/// about twice a minute).
const MAIL_CHECK_EVERY: Duration = Duration::from_secs(5);

/// How long a job's last run took (to its end, or until now).
fn run_secs(j: &JobRecord) -> u64 {
    let end = j.end_time.unwrap_or_else(|| chrono::Utc::now().timestamp());
    u64::try_from(end - j.start_time.unwrap_or(end)).unwrap_or(0)
}

/// Admit a validated submission: assign an id and make it durable (or,
/// for `--test-only`, use up an id and say when the job would start).
#[derive(Message)]
#[rtype(result = "Result<SubmitReply, ErrorReply>")]
pub struct Admit {
    pub submit: Arc<JobSubmit>,
    pub partition: String,
    pub time_limit_min: Option<u32>,
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
pub struct Cancel(pub CancelRequest);

/// `scancel J.S`: cancel or signal one srun step.
#[derive(Message)]
#[rtype(result = "CancelReply")]
pub struct CancelStep {
    pub req: StepCancel,
    pub uid: u32,
    pub operator: bool,
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

/// `scontrol hold/release/uhold/update JobId=...`.
#[derive(Message)]
#[rtype(result = "CancelReply")]
pub struct UpdateJobs {
    pub update: JobUpdate,
    /// Operators may set priorities, place admin holds and raise limits.
    pub operator: bool,
    /// Only the owner (or an operator) may change a job.
    pub uid: u32,
}

/// srun: launch a step inside a running job.
#[derive(Message)]
#[rtype(result = "Result<StepLaunched, ErrorReply>")]
pub struct StartStep {
    pub req: StepRequest,
    pub uid: u32,
    pub operator: bool,
}

/// srun: a step ended (and, for its own allocation, the job too).
#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct StepDone {
    pub done: StepComplete,
    pub uid: u32,
    pub operator: bool,
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

/// Partition actors by name, with their mailbox counters.
pub type PartitionMap = HashMap<String, (Addr<PartitionActor>, Arc<ActorStats>)>;

/// How a submission finds its partition actor.
pub struct Routing {
    pub partitions: PartitionMap,
    pub default_partition: Option<String>,
    /// slurm.conf's `Licenses` names: the ones jobs may ask for.
    pub licenses: Vec<String>,
}

/// The routing, shared by the controller (its only writer, at start and on
/// reconfigure) and every client connection. Readers take a snapshot.
#[derive(Clone)]
pub struct SharedRouting(Arc<std::sync::RwLock<Arc<Routing>>>);

impl SharedRouting {
    fn new(r: Routing) -> SharedRouting {
        SharedRouting(Arc::new(std::sync::RwLock::new(Arc::new(r))))
    }

    /// The current routing (a poisoned lock still holds a whole value: the
    /// writer only ever swaps the pointer).
    pub fn get(&self) -> Arc<Routing> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn set(&self, r: Routing) {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = Arc::new(r);
    }
}

/// Handles the controller hands to its connection layer.
#[derive(Clone)]
pub struct ControllerHandles {
    pub controller: Addr<ControllerActor>,
    pub controller_stats: Arc<ActorStats>,
    pub routing: SharedRouting,
    pub relay: Addr<RelayActor>,
    pub relay_stats: Arc<ActorStats>,
    pub node_count: u32,
}

struct StepHandle {
    addr: Addr<StepActor>,
    stats: Arc<ActorStats>,
}

pub struct ControllerActor {
    conf: Arc<Config>,
    topo: Arc<Topology>,
    store: Store,
    jobs: JobTable,
    /// Node rank → the partitions it belongs to (precomputed for node views).
    node_parts: Vec<Vec<String>>,
    /// Partition counters changed since they were last pushed to partition actors.
    counts_dirty: bool,
    next_job_id: u32,
    /// priority/basic's count-down for newly eligible jobs.
    priority: BasicPriority,
    slots: Vec<NodeSlot>,
    nodes: Vec<NodeStatus>,
    node_addrs: Vec<(Addr<NodeActor>, Arc<ActorStats>)>,
    part_ranks: Vec<(String, Vec<u32>)>,
    routing: SharedRouting,
    steps: HashMap<u32, StepHandle>,
    relay: Addr<RelayActor>,
    relay_stats: Arc<ActorStats>,
    schedule_queued: bool,
    /// Scheduler pass timing: (passes, last, max, total) in microseconds.
    sched_timing: (u64, u64, u64, u64),
    /// Lifetime counters (sdiag-style).
    submitted: u64,
    started: u64,
    ended: HashMap<JobState, u64>,
    stats: Arc<ActorStats>,
}

impl ControllerActor {
    /// Build the controller and every actor it owns; returns the handles the
    /// network layer needs.
    pub fn start(conf: Arc<Config>, store: Store, recovered: Recovered) -> ControllerHandles {
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
        let mut routing_out = None;
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
            let mut node_addrs = Vec::with_capacity(conf.nodes.len());
            let mut nodes = Vec::with_capacity(conf.nodes.len());
            let mut slots = Vec::with_capacity(conf.nodes.len());
            for (rank, nc) in conf.nodes.iter().enumerate() {
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
                let addr = actor.start();
                nodes.push(NodeStatus {
                    rank: rank as u32,
                    registered: false,
                    boot_id: 0,
                    responding: false,
                    admin: admin.get(&nc.name).cloned().unwrap_or_default(),
                    resources: None,
                    boot_time: None,
                    attached_to: None,
                    future: false,
                });
                slots.push(NodeSlot {
                    cpus: nc.cpus,
                    mem_mb: nc.real_memory_mb,
                    alloc_cpus: 0,
                    alloc_mem_mb: 0,
                    available: false,
                });
                node_addrs.push((addr, st));
            }
            let mut partitions = HashMap::new();
            for pc in &conf.partitions {
                let st = ActorStats::new();
                let addr = PartitionActor::new(Arc::new(pc.clone()), st.clone()).start();
                partitions.insert(pc.name.clone(), (addr, st));
            }
            let routing = SharedRouting::new(Routing {
                partitions,
                default_partition: default_partition_name(&conf),
                licenses: conf.licenses.clone(),
            });
            routing_out = Some(routing.clone());
            let (part_ranks, node_parts) = partition_layout(&conf);
            let priority =
                BasicPriority::recover(recovered.jobs.iter().map(|j| (j.priority, j.priority_set)));
            let jobs = JobTable::from_records(recovered.jobs);
            let next_job_id = recovered
                .next_job_id
                .unwrap_or(conf.first_job_id)
                .max(conf.first_job_id);
            let mut actor = ControllerActor {
                conf: conf.clone(),
                topo: topo.clone(),
                store,
                jobs,
                node_parts,
                counts_dirty: true,
                next_job_id,
                priority,
                slots,
                nodes,
                node_addrs,
                part_ranks,
                routing,
                steps: HashMap::new(),
                relay,
                relay_stats: rstats.clone(),
                schedule_queued: false,
                sched_timing: (0, 0, 0, 0),
                submitted: 0,
                started: 0,
                ended: HashMap::new(),
                stats: cstats.clone(),
            };
            actor.adopt_running(ctx);
            actor
        });
        ControllerHandles {
            controller,
            controller_stats: stats,
            routing: routing_out.expect("routing is created in the controller's constructor"),
            relay: relay_out.expect("relay is created in the controller's constructor"),
            relay_stats,
            node_count: conf.nodes.len() as u32,
        }
    }

    /// After a restart: re-reserve resources of running jobs and re-create
    /// their step actors without launching anything.
    fn adopt_running(&mut self, ctx: &mut Context<Self>) {
        let running: Vec<u32> = self.jobs.running().map(|j| j.job_id).collect();
        for id in running {
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            if let Some(a) = &job.alloc {
                sched::apply(a, &mut self.slots);
            }
            let ending = job.ending_as;
            let cause = job.requeue.is_some().then_some(KillCause::Requeue);
            tracing::info!(job_id = id, "adopting running job after restart");
            self.spawn_step(id, None, ctx);
            if let (Some(state), Some(h)) = (ending, self.steps.get(&id)) {
                h.stats.sent();
                let _ = h.addr.try_send(EndStep {
                    state,
                    reason: JobReason::None,
                    exit: None,
                    cause,
                });
            }
        }
        self.queue_schedule(ctx);
    }

    /// A schedule pass when a `--begin` time comes (none for past times:
    /// the pass that admitted the job already saw it eligible).
    fn schedule_at(&mut self, begin: Option<UnixTime>, ctx: &mut Context<Self>) {
        let now = chrono::Utc::now().timestamp();
        if let Some(wait) = begin
            .and_then(|t| u64::try_from(t - now).ok())
            .filter(|&w| w > 0)
        {
            ctx.run_later(Duration::from_secs(wait), |act, ctx| {
                act.queue_schedule(ctx)
            });
        }
    }

    fn queue_schedule(&mut self, ctx: &mut Context<Self>) {
        if !self.schedule_queued {
            self.schedule_queued = true;
            ctx.notify(RunSchedule);
        }
    }

    fn persist(&self, ids: &[u32]) -> tokio::sync::oneshot::Receiver<Result<(), String>> {
        let ops = ids
            .iter()
            .filter_map(|&id| self.jobs.get(id))
            .map(|j| Op::PutJob(Box::new(j.clone())))
            .collect();
        self.store.submit(ops)
    }

    /// Persist finished jobs together with their accounting records.
    fn persist_final(
        &self,
        ids: &[u32],
        usage: Usage,
    ) -> tokio::sync::oneshot::Receiver<Result<(), String>> {
        let mut ops = Vec::with_capacity(ids.len() * 2);
        for j in ids.iter().filter_map(|&id| self.jobs.get(id)) {
            ops.push(Op::PutJob(Box::new(j.clone())));
            ops.push(Op::PutAcct(Box::new(self.acct_of(j, usage))));
        }
        // Every path that ends a job comes through here, once per job.
        self.mail_finished(ids);
        self.store.submit(ops)
    }

    /// BEGIN mail for jobs that just started. An array (without
    /// ARRAY_TASKS) is mailed once, with the first of its tasks to start.
    fn mail_started(&self, started: &[u32]) {
        let batch: std::collections::HashSet<u32> = started.iter().copied().collect();
        let mut arrays = std::collections::HashSet::new();
        for j in started.iter().filter_map(|&id| self.jobs.get(id)) {
            let flags = j.submit.mail_type;
            if flags & mail::BEGIN == 0 {
                continue;
            }
            let summary = match j.array {
                Some(a) if flags & mail::ARRAY_TASKS == 0 => {
                    // Each array is looked at once per pass, however many
                    // of its tasks start in it.
                    if !arrays.insert(a.array_job_id) {
                        continue;
                    }
                    let earlier = self
                        .jobs
                        .array_members(a.array_job_id)
                        .any(|t| t.start_time.is_some() && !batch.contains(&t.job_id));
                    if earlier {
                        continue;
                    }
                    true
                }
                _ => false,
            };
            let acct = self.acct_of(j, Usage::default());
            let to = self.mail_to(j);
            self.send_mail(mail::began(&acct, to, &group_of(j.submit.gid), summary));
        }
    }

    /// END or FAIL mail for jobs that just finished; an array (without
    /// ARRAY_TASKS) gets its summary when its last task finishes.
    fn mail_finished(&self, ids: &[u32]) {
        let mut arrays = std::collections::HashSet::new();
        for j in ids.iter().filter_map(|&id| self.jobs.get(id)) {
            let flags = j.submit.mail_type;
            if flags & (mail::END | mail::FAIL) == 0 {
                continue;
            }
            let (to, group) = (self.mail_to(j), group_of(j.submit.gid));
            let sent = match j.array {
                Some(a) if flags & mail::ARRAY_TASKS == 0 => {
                    if !arrays.insert(a.array_job_id) {
                        continue;
                    }
                    let tasks: Vec<&JobRecord> = self.jobs.array_members(a.array_job_id).collect();
                    if tasks.iter().any(|t| !t.state.is_finished()) {
                        continue;
                    }
                    let accts: Vec<AcctJob> = tasks
                        .iter()
                        .map(|t| self.acct_of(t, Usage::default()))
                        .collect();
                    let refs: Vec<&AcctJob> = accts.iter().collect();
                    mail::array_ended(&refs, flags, to, &group)
                }
                _ => mail::ended(&self.acct_of(j, Usage::default()), flags, to, &group),
            };
            if let Some(m) = sent {
                self.send_mail(m);
            }
        }
    }

    /// A mail for an event in job `id`'s life, if its `--mail-type` has
    /// `flag` (see `mail::event`).
    fn mail_event(
        &self,
        id: u32,
        flag: u32,
        what: &str,
        run_secs: Option<u64>,
        state: Option<JobState>,
    ) {
        let Some(j) = self.jobs.get(id).filter(|j| j.submit.mail_type & flag != 0) else {
            return;
        };
        let acct = self.acct_of(j, Usage::default());
        let m = mail::event(
            &acct,
            self.mail_to(j),
            &group_of(j.submit.gid),
            what,
            run_secs,
            state,
        );
        self.send_mail(m);
    }

    /// TIME_LIMIT_50/80/90 (and TIME_LIMIT, if the check comes before the
    /// kill) for running jobs that have reached that share of their limit;
    /// each is sent once per run.
    fn mail_time_limits(&mut self) {
        let now = chrono::Utc::now().timestamp();
        let mut due: Vec<(u32, u32, &'static str, u64)> = Vec::new();
        for j in self.jobs.running() {
            let (Some(limit), Some(start)) = (j.time_limit_min, j.start_time) else {
                continue;
            };
            // Not for a job already being torn down (cancelled, requeued).
            if j.submit.mail_type == 0 || j.state != JobState::Running || j.ending_as.is_some() {
                continue;
            }
            let run = u64::try_from(now - start).unwrap_or(0);
            let limit_s = u64::from(limit) * 60;
            for (bit, what) in mail::time_limit_due(j.submit.mail_type, j.mail_sent, run, limit_s) {
                due.push((j.job_id, bit, what, run));
            }
        }
        if due.is_empty() {
            return;
        }
        let mut ids = Vec::new();
        for (id, bit, what, run) in due {
            let state = Some(JobState::Running);
            self.mail_event(id, bit, what, Some(run), state);
            self.jobs.modify(id, |j| j.mail_sent |= bit);
            ids.push(id);
        }
        ids.dedup();
        drop(self.persist(&ids));
    }

    fn mail_to(&self, j: &JobRecord) -> String {
        mail::recipient(
            j.submit.mail_user.as_deref(),
            &j.submit.user,
            self.conf.mail_domain.as_deref(),
        )
    }

    fn send_mail(&self, m: mail::Mail) {
        tracing::info!(to = %m.to, subject = %m.subject, "mailing");
        mail::send(&self.conf.mail_prog, m);
    }

    /// A job's accounting view, with node names resolved.
    fn acct_of(&self, j: &JobRecord, usage: Usage) -> AcctJob {
        let (nodes, batch_host) = match &j.alloc {
            Some(a) => (
                self.nodelist(&a.ranks),
                a.ranks.first().map(|&r| self.node_name(r).to_string()),
            ),
            None => (String::new(), None),
        };
        j.to_acct(nodes, batch_host, &self.conf.cluster_name, usage)
    }

    fn node_name(&self, rank: u32) -> &str {
        self.conf
            .nodes
            .get(rank as usize)
            .map(|n| n.name.as_str())
            .unwrap_or("?")
    }

    fn nodelist(&self, ranks: &[u32]) -> String {
        let names: Vec<&str> = ranks.iter().map(|&r| self.node_name(r)).collect();
        hostlist::compress(&names)
    }

    fn schedule(&mut self, ctx: &mut Context<Self>) {
        self.schedule_queued = false;
        let parts: Vec<PartitionView<'_>> = self
            .conf
            .partitions
            .iter()
            .zip(&self.part_ranks)
            .map(|(p, (_, ranks))| PartitionView {
                name: &p.name,
                state: p.state,
                ranks,
            })
            .collect();
        let now = chrono::Utc::now().timestamp();
        let t0 = std::time::Instant::now();
        let resolved = self.jobs.resolve_dependencies(now);
        let conf = &self.conf;
        let started = self
            .jobs
            .schedule(&parts, &mut self.slots, now, conf.as_ref());
        let us = t0.elapsed().as_micros() as u64;
        let (n, _, max, total) = self.sched_timing;
        self.sched_timing = (n + 1, us, max.max(us), total + us);
        self.dependencies_resolved(resolved, ctx);
        if started.is_empty() {
            return;
        }
        self.mail_started(&started);
        // Starting jobs may satisfy `after` dependencies: look again.
        self.queue_schedule(ctx);
        self.started += started.len() as u64;
        self.counts_dirty = true;
        // The job actors exist at once, so a cancel or an srun step that
        // comes next finds them; each launches once the start is on disk.
        let durable = self.persist(&started);
        let gates: Vec<_> = started
            .iter()
            .map(|&id| {
                let (open, gate) = tokio::sync::oneshot::channel();
                self.spawn_step(id, Some(gate), ctx);
                open
            })
            .collect();
        actix::spawn(async move {
            if !matches!(durable.await, Ok(Ok(()))) {
                tracing::error!("could not persist job starts; launching anyway");
            }
            for g in gates {
                let _ = g.send(());
            }
        });
    }

    /// Persist dependency changes; jobs killed for an impossible dependency
    /// are final.
    fn dependencies_resolved(&mut self, r: Resolved, ctx: &mut Context<Self>) {
        if r.changed.is_empty() && r.killed.is_empty() {
            return;
        }
        for &id in &r.never {
            self.mail_event(id, mail::INVALID_DEPEND, "Invalid dependency", None, None);
        }
        for &id in &r.killed {
            tracing::info!(job_id = id, "cancelled: dependency can never be satisfied");
            *self.ended.entry(JobState::Cancelled).or_default() += 1;
        }
        drop(self.persist(&r.changed));
        drop(self.persist_final(&r.killed, Usage::default()));
        self.counts_dirty = true;
        if !r.changed.is_empty() {
            self.queue_schedule(ctx);
        }
    }

    /// Start job `id`'s actor: it launches the job once `launch` fires, or
    /// adopts it as already running (`None`, after a restart).
    fn spawn_step(
        &mut self,
        id: u32,
        launch: Option<tokio::sync::oneshot::Receiver<()>>,
        ctx: &mut Context<Self>,
    ) {
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        let Some(alloc) = &job.alloc else {
            return;
        };
        let ranks = RankSet::from_ranks(alloc.ranks.iter().copied());
        let launch_msg = launch.is_some().then(|| self.launch_message(job));
        let time_limit = job.time_limit_min.map(|m| {
            let elapsed = chrono::Utc::now().timestamp() - job.start_time.unwrap_or(0);
            Duration::from_secs((u64::from(m) * 60).saturating_sub(elapsed.max(0) as u64))
        });
        let st = ActorStats::new();
        let addr = StepActor::new(
            id,
            ranks,
            launch_msg,
            time_limit,
            self.conf.kill_wait_s,
            self.relay.clone(),
            self.relay_stats.clone(),
            Counted::new(ctx.address().recipient(), self.stats.clone()),
            st.clone(),
            self.topo.max_depth(),
        )
        .with_warning(job.submit.signal.map(|s| WarnBeforeLimit {
            signal: s.signal,
            before: Duration::from_secs(u64::from(s.secs)),
            batch_only: s.batch_only,
        }));
        let addr = match launch {
            Some(gate) => addr.with_gate(gate),
            None => addr,
        }
        .start();
        self.steps.insert(id, StepHandle { addr, stats: st });
    }

    fn launch_message(&self, j: &JobRecord) -> JobLaunch {
        let alloc = j.alloc.clone().unwrap_or(crate::model::job::Allocation {
            ranks: vec![],
            cpus: vec![],
            tasks: vec![],
            mem_mb: 0,
        });
        let s = &j.submit;
        JobLaunch {
            job_id: j.job_id,
            name: s.name.clone(),
            user: s.user.clone(),
            uid: s.uid,
            gid: s.gid,
            partition: j.partition.clone(),
            cluster: self.conf.cluster_name.clone(),
            batch_host: alloc
                .ranks
                .first()
                .map(|&r| self.node_name(r).to_string())
                .unwrap_or_default(),
            nodelist: self.nodelist(&alloc.ranks),
            num_nodes: alloc.ranks.len() as u32,
            cpus_per_node: alloc.cpus.clone(),
            tasks_per_node: alloc.tasks.clone(),
            ntasks: alloc.tasks.iter().sum(),
            ntasks_set: s.ntasks.is_some() || s.ntasks_per_node.is_some(),
            cpus_per_task: s.cpus_per_task,
            mem_per_node_mb: s
                .mem_per_node_mb
                .map(|m| if m == 0 { alloc.mem_mb } else { m }),
            mem_per_cpu_mb: s.mem_per_cpu_mb,
            time_limit_min: j.time_limit_min,
            script: s.script.clone(),
            script_args: s.script_args.clone(),
            env: s.env.clone(),
            workdir: s.workdir.clone(),
            submit_dir: s.submit_dir.clone(),
            submit_host: s.submit_host.clone(),
            stdout: s.stdout.clone().unwrap_or_else(|| default_stdout(j).into()),
            stderr: s.stderr.clone(),
            stdin: s.stdin.clone(),
            start_time: j.start_time.unwrap_or(0),
            restarts: j.restarts,
            interactive: s.interactive,
            array: j.array,
            open_append: s.open_append || j.restarts > 0,
            account: s.account.clone(),
        }
    }

    /// Push partition counters to the partition actors (advisory: at most
    /// once per `COUNTS_EVERY`, and only if they changed).
    fn push_partition_counts(&mut self) {
        if !self.counts_dirty {
            return;
        }
        self.counts_dirty = false;
        let routing = self.routing.get();
        for (name, (addr, st)) in routing.partitions.iter() {
            let c = self.jobs.counts(name);
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

    /// A job as clients see it; `brief` leaves the paths, command and submit
    /// line empty (a listing does not show them, so they are not copied).
    fn job_info(&self, j: &JobRecord, brief: bool) -> JobInfo {
        let s = &j.submit;
        let (nodes, num_nodes, num_cpus, num_tasks, mem) = match &j.alloc {
            Some(a) => (
                self.nodelist(&a.ranks),
                a.ranks.len() as u32,
                a.total_cpus(),
                a.tasks.iter().sum(),
                a.mem_mb,
            ),
            None => {
                let req = Request::from_submit(s);
                (
                    String::new(),
                    req.min_nodes(),
                    req.ntasks * req.cpus_per_task,
                    req.ntasks,
                    s.mem_per_node_mb.or(s.mem_per_cpu_mb).unwrap_or(0),
                )
            }
        };
        let state = if j.ending_as.is_some() {
            JobState::Completing
        } else {
            j.state
        };
        let mut info = JobInfo {
            job_id: j.job_id,
            name: s.name.clone(),
            user: s.user.clone(),
            uid: s.uid,
            gid: s.gid,
            partition: j.partition.clone(),
            state,
            reason: self
                .jobs
                .reason(j, chrono::Utc::now().timestamp())
                .to_string(),
            priority: j.priority,
            submit_time: j.submit_time,
            eligible_time: Some(s.begin_time.unwrap_or(j.submit_time).max(j.submit_time)),
            start_time: j.start_time,
            end_time: j.end_time,
            time_limit_min: j.time_limit_min,
            nodes,
            num_nodes,
            num_cpus,
            num_tasks,
            cpus_per_task: s.cpus_per_task.unwrap_or(1),
            mem_per_node_mb: mem,
            exit_code: (j.exit.code, j.exit.signal),
            // Filled in below unless the query is brief.
            workdir: String::new(),
            stdout: String::new(),
            stderr: String::new(),
            stdin: String::new(),
            command: String::new(),
            submit_line: String::new(),
            batch_host: j
                .alloc
                .as_ref()
                .and_then(|a| a.ranks.first())
                .map(|&r| self.node_name(r).to_string()),
            restarts: j.restarts,
            req_nodes: s.min_nodes.unwrap_or(1),
            array: j.array,
            dependency: j
                .dependency
                .as_ref()
                .map(ToString::to_string)
                .filter(|d| d != "(null)")
                .unwrap_or_default(),
            array_pending: None,
            req_node_list: s.req_nodes.clone().unwrap_or_default(),
            exc_node_list: s.exc_nodes.clone().unwrap_or_default(),
            account: s.account.clone().unwrap_or_default(),
            comment: s.comment.clone().unwrap_or_default(),
            features: s.constraint.clone().unwrap_or_default(),
            exclusive: s.exclusive,
            no_requeue: s.no_requeue,
            nice: s.nice,
        };
        if !brief {
            // Shown as the batch script's files are named: the job's own
            // fields expanded and placed under its working directory.
            use crate::exec::pattern::{expand, resolve, PatternContext};
            let ctx = PatternContext {
                job_id: j.job_id,
                array_job_id: j.array.map(|a| a.array_job_id),
                array_task_id: j.array.map(|a| a.task_id),
                job_name: s.name.clone(),
                user: s.user.clone(),
                first_node: info.batch_host.clone().unwrap_or_default(),
                restart: j.restarts,
                ..PatternContext::default()
            };
            let shown = |pattern: &str| {
                resolve(&expand(pattern, &ctx), std::path::Path::new(&s.workdir))
                    .to_string_lossy()
                    .into_owned()
            };
            let out = s.stdout.as_deref().unwrap_or(default_stdout(j));
            info.workdir = s.workdir.clone();
            info.stdout = shown(out);
            info.stderr = shown(s.stderr.as_deref().unwrap_or(out));
            info.stdin = shown(s.stdin.as_deref().unwrap_or("/dev/null"));
            info.command = s.command.clone();
            info.submit_line = s.submit_line.clone();
        }
        info
    }

    fn node_info(&self, rank: usize) -> Option<NodeInfo> {
        let c = self.conf.nodes.get(rank)?;
        let st = self.nodes.get(rank)?;
        let slot = self.slots.get(rank)?;
        let base = if st.future {
            NodeBaseState::Future
        } else if st.admin.down.is_some() {
            NodeBaseState::Down
        } else if !st.registered {
            NodeBaseState::Unknown
        } else if slot.alloc_cpus == 0 {
            NodeBaseState::Idle
        } else if slot.alloc_cpus >= slot.cpus {
            NodeBaseState::Allocated
        } else {
            NodeBaseState::Mixed
        };
        let reason = st.admin.down.as_ref().or(st.admin.drain.as_ref());
        let res = st.resources.clone().unwrap_or_default();
        Some(NodeInfo {
            name: c.name.clone(),
            addr: c.addr.clone(),
            hostname: c.hostname.clone(),
            port: c.port,
            base,
            drain: st.admin.drain.is_some(),
            not_responding: !st.responding && !st.future,
            rank: rank as u32,
            attached_to: st.attached_to.map(|r| self.node_name(r).to_string()),
            cpus: c.cpus,
            sockets: c.sockets,
            cores_per_socket: c.cores_per_socket,
            threads_per_core: c.threads_per_core,
            real_memory_mb: c.real_memory_mb,
            alloc_cpus: slot.alloc_cpus,
            alloc_mem_mb: slot.alloc_mem_mb,
            features: c.features.clone(),
            gres: c.gres.clone(),
            weight: c.weight,
            partitions: self.node_parts.get(rank).cloned().unwrap_or_default(),
            reason: reason.map(|r| r.text.clone()),
            reason_user: reason.map(|r| r.user.clone()),
            reason_time: reason.map(|r| r.time),
            boot_time: st.boot_time,
            slurmd_start_time: st.boot_time,
            last_busy: None,
            version: if res.cpus > 0 {
                env!("CARGO_PKG_VERSION").to_string()
            } else {
                "(null)".into()
            },
        })
    }

    fn end_job(&mut self, ev: StepEnded, ctx: &mut Context<Self>) {
        self.steps.remove(&ev.job_id);
        let now = chrono::Utc::now().timestamp();
        let (id, state, exit, usage) = (ev.job_id, ev.state, ev.exit, ev.usage);
        let Some(alloc) = self.jobs.finish(id, state, exit, ev.reason, now) else {
            return;
        };
        sched::release(&alloc, &mut self.slots);
        *self.ended.entry(state).or_default() += 1;
        tracing::info!(
            job_id = id,
            state = state.name(),
            code = exit.code,
            signal = exit.signal,
            "job ended"
        );
        let durable = self.persist_final(&[id], usage);
        ctx.spawn(
            async move {
                let _ = durable.await;
            }
            .into_actor(self),
        );
        if let Some(j) = self.jobs.get(id).filter(|_| state == JobState::Timeout) {
            if j.mail_sent & mail::TIME_LIMIT == 0 {
                let run = run_secs(j);
                let what = mail::TIME_LIMIT_MAILS[3].2;
                self.mail_event(
                    id,
                    mail::TIME_LIMIT,
                    what,
                    Some(run),
                    Some(JobState::Running),
                );
            }
        }
        if let Some(hold) = self.jobs.get(id).and_then(|j| j.requeue.clone()) {
            // `scontrol requeue` of a running job: the run is accounted for
            // above; the job itself starts over.
            let run = self.jobs.get(id).map(run_secs);
            self.jobs.requeue(id, hold);
            self.mail_event(id, mail::REQUEUE, "Requeued", run, None);
            drop(self.persist(&[id]));
        }
        self.counts_dirty = true;
        self.queue_schedule(ctx);
    }

    /// Mark a running job as tearing down (shown CG) and tell its step.
    fn end_step(&mut self, id: u32, state: JobState, reason: JobReason) {
        self.end_step_with(id, state, reason, None, None)
    }

    /// As `end_step`, recording `exit` as the job's exit status.
    fn end_step_with(
        &mut self,
        id: u32,
        state: JobState,
        reason: JobReason,
        exit: Option<ExitStatus>,
        cause: Option<KillCause>,
    ) {
        self.jobs.mark_ending(id, state);
        if let Some(h) = self.steps.get(&id) {
            h.stats.sent();
            let addr = h.addr.clone();
            let msg = EndStep {
                state,
                reason,
                exit,
                cause,
            };
            actix::spawn(async move {
                let _ = addr.send(msg).await;
            });
        }
    }

    fn reconcile(
        &mut self,
        rank: u32,
        hello: &crate::wire::messages::Hello,
        ctx: &mut Context<Self>,
    ) {
        let mut stray = Vec::new();
        for rep in &hello.jobs {
            let ours = self.jobs.get(rep.job_id).filter(|j| {
                matches!(j.state, JobState::Running | JobState::Completing)
                    && j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank))
            });
            match (ours, &rep.state) {
                (Some(j), JobOnNode::BatchFinished(status)) => {
                    let batch = j.alloc.as_ref().and_then(|a| a.ranks.first()) == Some(&rank);
                    if batch {
                        if let Some(h) = self.steps.get(&rep.job_id) {
                            h.stats.sent();
                            let addr = h.addr.clone();
                            let msg = ScriptExited(*status, Usage::default());
                            actix::spawn(async move {
                                let _ = addr.send(msg).await;
                            });
                        }
                    }
                }
                (Some(_), JobOnNode::Running) => {}
                (None, _) => stray.push(rep.job_id),
            }
        }
        // Jobs we believe run here but a freshly started daemon cannot have.
        let lost: Vec<u32> = self
            .jobs
            .running()
            .filter(|j| j.state == JobState::Running && j.ending_as.is_none())
            .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
            .filter(|j| j.start_time.unwrap_or(0) < hello.started)
            .filter(|j| !hello.jobs.iter().any(|r| r.job_id == j.job_id))
            .map(|j| j.job_id)
            .collect();
        for id in lost {
            tracing::warn!(job_id = id, node = %hello.node, "node restarted without the job; NODE_FAIL");
            self.end_step(id, JobState::NodeFail, JobReason::NodeDown);
        }
        for id in stray {
            tracing::warn!(job_id = id, node = %hello.node, "node runs a job the controller did not launch; killing it");
            let relay = self.relay.clone();
            self.relay_stats.sent();
            let msg = Fanout {
                targets: RankSet::from_ranks([rank]),
                cmd: NodeCommand::Terminate {
                    job_id: id,
                    kill_wait_s: self.conf.kill_wait_s,
                    cause: None,
                },
                budget: Duration::from_secs(u64::from(self.conf.kill_wait_s) + 5),
            };
            ctx.spawn(
                async move {
                    let _ = relay.send(msg).await;
                }
                .into_actor(self),
            );
        }
    }

    fn purge_old(&mut self) {
        if self.conf.min_job_age_s == 0 {
            return;
        }
        let cutoff = chrono::Utc::now().timestamp() - self.conf.min_job_age_s as i64;
        let old = self.jobs.purge_finished_before(cutoff);
        if old.is_empty() {
            return;
        }
        // Purging is best effort: a crash before it is durable only delays it.
        drop(
            self.store
                .submit(old.into_iter().map(Op::DeleteJob).collect()),
        );
    }

    /// Ids for a submission of `n` jobs, in index order, and the id the
    /// submission is known by. For an array that first id goes to the
    /// highest index and the others follow in index order: what Slurm ends
    /// up with when the tasks start in order.
    fn alloc_ids(&mut self, n: usize) -> (u32, Vec<u32>) {
        let mut ids: Vec<u32> = (0..n).map(|_| self.alloc_next_id()).collect();
        let first = ids.first().copied().unwrap_or_default();
        ids.rotate_left(1);
        (first, ids)
    }

    /// One (not yet numbered) array task per index of `spec`, checked
    /// against MaxArraySize.
    fn array_tasks(&self, spec: &ArraySpec) -> Result<Vec<Option<ArrayTask>>, ErrorReply> {
        let invalid = || ErrorReply {
            code: ErrorCode::InvalidArraySpec,
            message: "Invalid job array specification".into(),
        };
        let (Some(&min), Some(&max)) = (spec.indices.first(), spec.indices.last()) else {
            return Err(invalid());
        };
        if max >= self.conf.max_array_size {
            return Err(invalid());
        }
        let count = spec.indices.len() as u32;
        Ok(spec
            .indices
            .iter()
            .map(|&task_id| {
                Some(ArrayTask {
                    array_job_id: 0,
                    task_id,
                    min,
                    max,
                    count,
                    step: spec.step.max(1),
                    throttle: spec.throttle,
                })
            })
            .collect())
    }

    /// Parse `--dependency` and check that every job it names is known (an
    /// unknown id is refused, as Slurm does).
    fn check_dependency(&self, spec: Option<&str>) -> Result<Option<Dependency>, ErrorReply> {
        let Some(spec) = spec else {
            return Ok(None);
        };
        Dependency::parse(spec)
            .and_then(|d| {
                d.validate_targets(|t| self.jobs.target_exists(t))
                    .map(|()| d)
            })
            .map(Some)
            .map_err(|e| {
                tracing::info!(dependency = spec, error = %e, "submission refused");
                ErrorReply {
                    code: ErrorCode::DependencyProblem,
                    message: e.slurm_message().into(),
                }
            })
    }

    /// Requested ids with each array id standing for all of its tasks (as
    /// in Slurm, `A` names the whole array), without duplicates, in order.
    fn resolve_ids(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len());
        let mut seen = std::collections::HashSet::new();
        for &id in ids {
            let members: Vec<u32> = self.jobs.array_members(id).map(|j| j.job_id).collect();
            let expanded = if members.is_empty() {
                vec![id]
            } else {
                members
            };
            for m in expanded {
                if seen.insert(m) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// [`Self::resolve_ids`] for accounting: finished tasks are found in the
    /// store's array index too.
    fn acct_ids(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = self.resolve_ids(ids);
        let mut seen: std::collections::HashSet<u32> = out.iter().copied().collect();
        for &id in ids {
            for m in self.store.acct_array_members(id).unwrap_or_default() {
                if seen.insert(m) {
                    out.push(m);
                }
            }
        }
        out
    }

    fn alloc_next_id(&mut self) -> u32 {
        let (first, max) = (
            self.conf.first_job_id,
            self.conf.max_job_id.max(self.conf.first_job_id),
        );
        loop {
            let id = self.next_job_id;
            self.next_job_id = if id >= max { first } else { id + 1 };
            if !self.jobs.contains(id) {
                return id;
            }
        }
    }
}

impl Actor for ControllerActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        ctx.run_interval(PURGE_EVERY, |act, _| act.purge_old());
        ctx.run_interval(COUNTS_EVERY, |act, _| act.push_partition_counts());
        ctx.run_interval(MAIL_CHECK_EVERY, |act, _| act.mail_time_limits());
        // Recovered jobs still waiting for their `--begin` time: one timer
        // per distinct time (an array's tasks share theirs).
        let begins: std::collections::BTreeSet<UnixTime> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .filter_map(|j| j.submit.begin_time)
            .collect();
        for t in begins {
            self.schedule_at(Some(t), ctx);
        }
    }
}

impl Handler<RunSchedule> for ControllerActor {
    type Result = ();
    fn handle(&mut self, _msg: RunSchedule, ctx: &mut Context<Self>) {
        self.schedule(ctx);
    }
}

impl Handler<Admit> for ControllerActor {
    type Result = ResponseFuture<Result<SubmitReply, ErrorReply>>;
    fn handle(&mut self, msg: Admit, ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        if self.jobs.active() >= self.conf.max_job_count as usize {
            return Box::pin(async {
                Err(ErrorReply {
                    code: ErrorCode::QueueFull,
                    message: "Slurm temporarily unable to accept job, sleeping and retrying".into(),
                })
            });
        }
        if msg.submit.test_only {
            return self.will_run(&msg);
        }
        let conf = self.conf.clone();
        let req = match Request::for_job(&msg.submit, conf.as_ref()) {
            Ok(r) => r,
            Err(e) => {
                let e = request_refusal(e);
                return Box::pin(async { Err(e) });
            }
        };
        let ranks = self.partition_ranks(&msg.partition);
        if let Err(why) = sched::feasible(&req, ranks, &self.slots) {
            let message = match why {
                Infeasible::TooManyNodes | Infeasible::NodeConfig => {
                    "Requested node configuration is not available"
                }
            };
            return Box::pin(async move {
                Err(ErrorReply {
                    code: ErrorCode::NodeConfigUnavailable,
                    message: message.into(),
                })
            });
        }
        let submit = Arc::unwrap_or_clone(msg.submit);
        let submit_begin = submit.begin_time;
        let dependency = match self.check_dependency(submit.dependency.as_deref()) {
            Ok(d) => d,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let tasks = match &submit.array {
            Some(spec) => match self.array_tasks(spec) {
                Ok(t) => t,
                Err(e) => return Box::pin(async move { Err(e) }),
            },
            None => vec![None],
        };
        if self.jobs.active() + tasks.len() > self.conf.max_job_count as usize {
            return Box::pin(async {
                Err(ErrorReply {
                    code: ErrorCode::QueueFull,
                    message: "Slurm temporarily unable to accept job, sleeping and retrying".into(),
                })
            });
        }
        let now = chrono::Utc::now().timestamp();
        let (id, ids) = self.alloc_ids(tasks.len());
        // One priority for the whole submission: an array's tasks queue
        // together. An operator's `--priority` is fixed; `--nice` lowers
        // (or, negative, raises) the count-down's value, as in priority/basic.
        let fixed = submit.priority;
        let priority = match (submit.hold, fixed) {
            (true, _) => 0,
            (false, Some(p)) => p,
            (false, None) => with_nice(self.priority.assign(), submit.nice),
        };
        let mut ops = Vec::with_capacity(tasks.len() + 1);
        for (job_id, array) in ids.into_iter().zip(tasks) {
            let array = array.map(|a| ArrayTask {
                array_job_id: id,
                ..a
            });
            let mut rec = new_record(
                job_id,
                submit.clone(),
                msg.partition.clone(),
                msg.time_limit_min,
                now,
                array,
            );
            rec.dependency = dependency.clone();
            rec.priority = priority;
            rec.priority_set = fixed.is_some_and(|p| p > 0);
            ops.push(Op::PutJob(Box::new(rec.clone())));
            self.jobs.admit(rec);
            self.submitted += 1;
        }
        tracing::info!(job_id = id, partition = %msg.partition, user = %submit.user, tasks = ops.len(), "job submitted");
        ops.push(Op::NextJobId(self.next_job_id));
        let durable = self.store.submit(ops);
        self.counts_dirty = true;
        self.queue_schedule(ctx);
        self.schedule_at(submit_begin, ctx);
        Box::pin(async move {
            match durable.await {
                Ok(Ok(())) => Ok(SubmitReply {
                    job_id: id,
                    will_run: None,
                }),
                _ => Err(ErrorReply {
                    code: ErrorCode::Internal,
                    message: "could not save job state".into(),
                }),
            }
        })
    }
}

impl ControllerActor {
    /// `--test-only`: use up a job id (as Slurm does, whatever the answer)
    /// and estimate the start from the running jobs' time limits.
    fn will_run(&mut self, msg: &Admit) -> ResponseFuture<Result<SubmitReply, ErrorReply>> {
        let id = self.alloc_next_id();
        let durable = self.store.submit(vec![Op::NextJobId(self.next_job_id)]);
        let now = chrono::Utc::now().timestamp();
        let partition = msg.partition.as_str();
        let ranks = self.partition_ranks(partition);
        let conf = &self.conf;
        let checked = Request::for_job(&msg.submit, conf.as_ref())
            .map_err(request_refusal)
            .and_then(|req| {
                sched::feasible(&req, ranks, &self.slots).map_err(|_| {
                    refused(
                        ErrorCode::NodeConfigUnavailable,
                        "Requested node configuration is not available",
                    )
                })?;
                Ok(req)
            });
        let req = match checked {
            Ok(r) => r,
            Err(e) => {
                return Box::pin(async move {
                    let _ = durable.await;
                    Err(e)
                })
            }
        };
        let begin = msg.submit.begin_time;
        let mut running: Vec<(UnixTime, &crate::model::job::Allocation)> = self
            .jobs
            .running()
            .filter_map(|j| {
                let end = j.start_time? + i64::from(j.time_limit_min?) * 60;
                Some((end, j.alloc.as_ref()?))
            })
            .collect();
        let when = sched::earliest_start(&req, ranks, &self.slots, &mut running, now);
        let reply = when.map(|(start, alloc)| WillRun {
            start_time: begin.map_or(start, |b| b.max(start)),
            cpus: alloc.cpus.iter().sum(),
            nodes: self.nodelist(&alloc.ranks),
            partition: partition.to_string(),
        });
        tracing::info!(job_id = id, partition, start = ?reply.as_ref().map(|w| w.start_time), "will-run test");
        Box::pin(async move {
            // The id is used up either way; only a failed save is an error.
            if !matches!(durable.await, Ok(Ok(()))) {
                return Err(refused(ErrorCode::Internal, "could not save job state"));
            }
            match reply {
                Some(w) => Ok(SubmitReply {
                    job_id: id,
                    will_run: Some(w),
                }),
                None => Err(refused(
                    ErrorCode::NodeConfigUnavailable,
                    "Requested nodes are busy",
                )),
            }
        })
    }
}

impl Handler<GetJobs> for ControllerActor {
    type Result = MessageResult<GetJobs>;
    fn handle(&mut self, msg: GetJobs, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let out = if msg.ids.is_empty() {
            self.jobs
                .values()
                .map(|j| self.job_info(j, msg.brief))
                .collect()
        } else {
            self.resolve_ids(&msg.ids)
                .into_iter()
                .filter_map(|id| self.jobs.get(id))
                .map(|j| self.job_info(j, msg.brief))
                .collect()
        };
        MessageResult(out)
    }
}

impl Handler<GetNodes> for ControllerActor {
    type Result = MessageResult<GetNodes>;
    fn handle(&mut self, msg: GetNodes, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let out = if msg.names.is_empty() {
            (0..self.conf.nodes.len())
                .filter_map(|r| self.node_info(r))
                .collect()
        } else {
            msg.names
                .iter()
                .filter_map(|n| self.conf.node_index(n))
                .filter_map(|r| self.node_info(r))
                .collect()
        };
        MessageResult(out)
    }
}

impl Handler<GetPartitions> for ControllerActor {
    type Result = MessageResult<GetPartitions>;
    fn handle(&mut self, _msg: GetPartitions, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let out = self
            .conf
            .partitions
            .iter()
            .map(|p| {
                let configured = || {
                    p.nodes
                        .iter()
                        .filter_map(|n| self.conf.node_index(n))
                        .filter_map(|i| self.conf.nodes.get(i))
                };
                let total_cpus = configured().map(|n| n.cpus).sum();
                let total_mem_mb = configured().map(|n| n.real_memory_mb).sum();
                PartitionInfo {
                    name: p.name.clone(),
                    default: p.default,
                    state: p.state,
                    max_time_min: p.max_time_min,
                    default_time_min: p.default_time_min,
                    max_nodes: p.max_nodes,
                    min_nodes: p.min_nodes,
                    nodes: hostlist::compress(&p.nodes),
                    node_names: p.nodes.clone(),
                    total_cpus,
                    total_nodes: p.nodes.len() as u32,
                    total_mem_mb,
                }
            })
            .collect();
        MessageResult(out)
    }
}

impl Handler<Cancel> for ControllerActor {
    type Result = ResponseFuture<CancelReply>;
    fn handle(&mut self, msg: Cancel, ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let req = msg.0;
        let mut results = Vec::new();
        let mut changed = Vec::new();
        let now = chrono::Utc::now().timestamp();
        let ids = if req.exact {
            req.job_ids.clone()
        } else {
            self.resolve_ids(&req.job_ids)
        };
        for id in ids {
            let Some(job) = self.jobs.get(id) else {
                results.push((id, Some("Invalid job id specified".to_string())));
                continue;
            };
            match (job.state, req.signal) {
                (s, _) if s.is_finished() || job.ending_as.is_some() => {
                    results.push((id, Some("Job/step already completing or completed".into())))
                }
                (JobState::Pending, None) => {
                    self.jobs.cancel_pending(id, now);
                    *self.ended.entry(JobState::Cancelled).or_default() += 1;
                    changed.push(id);
                    results.push((id, None));
                }
                (JobState::Pending, Some(_)) => {
                    results.push((id, Some("Job is pending execution".into())))
                }
                (_, Some(sig)) => {
                    self.signal_step(id, sig, req.batch_only);
                    results.push((id, None));
                }
                (_, None) => {
                    // Running: shown CG while every node tears it down.
                    self.end_step(id, JobState::Cancelled, JobReason::None);
                    changed.push(id);
                    results.push((id, None));
                }
            }
        }
        // Pending jobs cancelled here are final: record them for accounting too.
        let (finals, others): (Vec<u32>, Vec<u32>) = changed
            .iter()
            .partition(|&&id| self.jobs.get(id).is_some_and(|j| j.state.is_finished()));
        let durable = self.persist(&others);
        let durable_final = self.persist_final(&finals, Usage::default());
        self.counts_dirty = true;
        self.queue_schedule(ctx);
        Box::pin(async move {
            let _ = durable.await;
            let _ = durable_final.await;
            CancelReply { results }
        })
    }
}

impl Handler<CancelStep> for ControllerActor {
    type Result = MessageResult<CancelStep>;
    fn handle(&mut self, msg: CancelStep, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let r = msg.req;
        let result = self.cancel_step(&r, msg.operator, msg.uid).err();
        MessageResult(CancelReply {
            results: vec![(r.job_id, result)],
        })
    }
}

impl Handler<UpdateNodes> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: UpdateNodes, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let names = match hostlist::expand(&msg.update.nodes) {
            Ok(n) => n,
            Err(e) => {
                let message = format!("Invalid node name specified: {e}");
                return Box::pin(async move {
                    Err(ErrorReply {
                        code: ErrorCode::InvalidNodeName,
                        message,
                    })
                });
            }
        };
        let mut targets = Vec::new();
        for n in &names {
            match self.conf.node_index(n) {
                Some(r) => targets.push(self.node_addrs[r].clone()),
                None => {
                    let message = format!("Invalid node name specified: {n}");
                    return Box::pin(async move {
                        Err(ErrorReply {
                            code: ErrorCode::InvalidNodeName,
                            message,
                        })
                    });
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
            // behind the admin-state writes queued above.
            store.commit(Vec::new()).await.map_err(|e| ErrorReply {
                code: ErrorCode::Internal,
                message: format!("could not save node state: {e}"),
            })
        })
    }
}

impl Handler<NodeChanged> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: NodeChanged, ctx: &mut Context<Self>) {
        self.stats.handled();
        let rank = msg.status.rank;
        let Some(old) = self.nodes.get(rank as usize).cloned() else {
            return;
        };
        if old.admin != msg.status.admin {
            let name = self.node_name(rank).to_string();
            let state = if msg.status.admin == AdminState::default() {
                None
            } else {
                rmp_serde::to_vec_named(&msg.status.admin).ok()
            };
            // Durability barrier for operators: see `UpdateNodes`.
            drop(self.store.submit(vec![Op::NodeAdmin { name, state }]));
        }
        if let Some(slot) = self.slots.get_mut(rank as usize) {
            slot.available = msg.status.schedulable();
        }
        if let Some(n) = self.nodes.get_mut(rank as usize) {
            *n = msg.status;
        }
        if msg.lost {
            let victims: Vec<u32> = self
                .jobs
                .running()
                .filter(|j| j.state == JobState::Running)
                .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
                .map(|j| j.job_id)
                .collect();
            for id in victims {
                tracing::warn!(job_id = id, node = %self.node_name(rank), "node lost; job ends NODE_FAIL");
                self.end_step(id, JobState::NodeFail, JobReason::NodeDown);
            }
        }
        if let Some(hello) = msg.registration {
            self.reconcile(rank, &hello, ctx);
        }
        self.queue_schedule(ctx);
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
                if self.node_name(hello.rank) != hello.node {
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

impl Handler<StepEnded> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: StepEnded, ctx: &mut Context<Self>) {
        self.stats.handled();
        self.end_job(msg, ctx);
    }
}

impl Handler<GetStatus> for ControllerActor {
    type Result = ResponseFuture<StatusReport>;
    fn handle(&mut self, _msg: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let (pending, running) = self
            .conf
            .partitions
            .iter()
            .map(|p| self.jobs.counts(&p.name))
            .fold((0, 0), |(pd, r), c| (pd + c.pending, r + c.running));
        let mut actors = vec![ActorStatus {
            kind: "controller".into(),
            name: self.conf.control_host.clone(),
            state: format!(
                "jobs={} pending={} running={} next_job_id={}",
                self.jobs.len(),
                pending,
                running,
                self.next_job_id
            ),
            mailbox_depth: self.stats.depth(),
            handled: self.stats.total(),
        }];
        let routing = self.routing.get();
        for p in &self.conf.partitions {
            if let Some((_, st)) = routing.partitions.get(&p.name) {
                let c = self.jobs.counts(&p.name);
                let (pd, r) = (c.pending, c.running);
                actors.push(ActorStatus {
                    kind: "partition".into(),
                    name: p.name.clone(),
                    state: format!(
                        "{} nodes={} pending={} running={}",
                        p.state.name(),
                        p.nodes.len(),
                        pd,
                        r
                    ),
                    mailbox_depth: st.depth(),
                    handled: st.total(),
                });
            }
        }
        let mut tree = Vec::new();
        for (rank, (_, st)) in self.node_addrs.iter().enumerate() {
            let Some(info) = self.node_info(rank) else {
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
                    .map(|p| self.node_name(p).to_string()),
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
        let controller = self.conf.control_host.clone();
        let width = self.conf.tree_width;
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
        let mut n = NodeCounts {
            total: self.nodes.len() as u32,
            ..Default::default()
        };
        for (st, slot) in self.nodes.iter().zip(&self.slots) {
            if !st.responding && !st.future {
                n.not_responding += 1;
            }
            if st.admin.drain.is_some() {
                n.drain += 1;
            }
            if st.admin.down.is_some() {
                n.down += 1;
            } else if !st.registered {
                n.unknown += 1;
            } else if slot.alloc_cpus == 0 {
                n.idle += 1;
            } else if slot.alloc_cpus >= slot.cpus {
                n.allocated += 1;
            } else {
                n.mixed += 1;
            }
        }
        let (pending, running) = self
            .conf
            .partitions
            .iter()
            .map(|p| self.jobs.counts(&p.name))
            .fold((0, 0), |(pd, r), c| (pd + c.pending, r + c.running));
        let ended = |s: JobState| self.ended.get(&s).copied().unwrap_or(0);
        MessageResult(CtldStats {
            nodes: n,
            jobs_pending: pending,
            jobs_running: running,
            jobs_submitted: self.submitted,
            jobs_started: self.started,
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

impl ControllerActor {
    /// Configured node ranks of a hostlist (`-w`/`-x` of a step).
    fn ranks_of(&self, list: &str) -> Result<Vec<u32>, ErrorReply> {
        sched::node_ranks(list, &|n| self.conf.node_index(n))
            .map_err(|_| refused(ErrorCode::InvalidNodeName, "Invalid node name specified"))
    }

    /// A partition's node ranks (empty for an unknown name).
    fn partition_ranks(&self, name: &str) -> &[u32] {
        self.part_ranks
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[], |(_, r)| r.as_slice())
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
            match self.conf.node_index(&n) {
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
        let ranks: Vec<u32> = msg.0.iter().collect();
        self.nodelist(&ranks)
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
            for j in self.jobs.values().filter(|j| live(j)) {
                let a = self.acct_of(j, Usage::default());
                if crate::state::acct::matches(&a, &q, now) {
                    jobs.push(a);
                }
            }
            return AcctReply {
                jobs,
                scan: Some(self.store.clone()),
            };
        }
        for id in self.acct_ids(&q.job_ids) {
            let rec = match self.jobs.get(id) {
                Some(j) if live(j) => Some(self.acct_of(j, Usage::default())),
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

impl ControllerActor {
    /// Job `id`, if the caller may change it (its owner or an operator).
    fn owned_job(&self, id: u32, operator: bool, uid: u32) -> Result<&JobRecord, String> {
        let job = self
            .jobs
            .get(id)
            .ok_or_else(|| "Invalid job id specified".to_string())?;
        if !operator && job.submit.uid != uid {
            return Err("Access/permission denied".into());
        }
        Ok(job)
    }

    /// `scontrol top`: check each job as Slurm does (operators, or owners
    /// where `SchedulerParameters=enable_user_top`; pending and not held),
    /// then reorder the accepted ones. Returns the per-job results and the
    /// jobs whose priority changed.
    fn top_jobs(
        &mut self,
        ids: &[u32],
        operator: bool,
        uid: u32,
    ) -> (Vec<(u32, Option<String>)>, Vec<u32>) {
        let allowed = operator || self.conf.enable_user_top;
        let mut results = Vec::with_capacity(ids.len());
        let mut accepted = Vec::new();
        for &id in ids {
            let check = if allowed {
                self.owned_job(id, operator, uid).and_then(|j| {
                    if j.state != JobState::Pending {
                        Err("Job is no longer pending execution".to_string())
                    } else if j.priority == 0 {
                        Err("Job is in held state, pending scheduler release".to_string())
                    } else {
                        Ok(())
                    }
                })
            } else {
                Err("Access/permission denied".to_string())
            };
            if check.is_ok() {
                accepted.push(id);
            }
            results.push((id, check.err()));
        }
        let moved = self.jobs.top(&accepted);
        tracing::info!(jobs = ?accepted, moved = moved.len(), "jobs moved to the top");
        (results, moved)
    }

    /// Deliver `signal` to a running job's processes through its step actor.
    fn signal_step(&self, id: u32, signal: i32, batch_only: bool) {
        if let Some(h) = self.steps.get(&id) {
            h.stats.sent();
            let addr = h.addr.clone();
            actix::spawn(async move {
                let _ = addr.send(SignalStep { signal, batch_only }).await;
            });
        }
    }

    /// `scancel J.S`: the step's nodes kill it (and note it to srun, whose
    /// exit report then records it) or signal its tasks. The errors are the
    /// texts Slurm's controller gives; a pending job has no steps to act on,
    /// and a signal for a step that is not running is quietly dropped, as
    /// in Slurm.
    fn cancel_step(&mut self, r: &StepCancel, operator: bool, uid: u32) -> Result<(), String> {
        let job = self.owned_job(r.job_id, operator, uid)?;
        if job.state.is_finished() || job.ending_as.is_some() {
            return Err("Job/step already completing or completed".into());
        }
        if job.state == JobState::Pending {
            return Ok(());
        }
        let step = job
            .steps
            .iter()
            .find(|s| s.kind == StepKind::Numbered(r.step_id) && s.state == JobState::Running);
        let Some(step) = step else {
            return match r.signal {
                Some(_) => Ok(()),
                None => Err("Invalid job id specified".into()),
            };
        };
        let mut targets = RankSet::new();
        for name in hostlist::expand(&step.nodes).unwrap_or_default() {
            if let Some(rank) = self.conf.node_index(&name) {
                targets.insert(rank as u32);
            }
        }
        let (job_id, step_id) = (r.job_id, r.step_id);
        let cmd = match r.signal {
            None => NodeCommand::KillStep {
                job_id,
                step_id,
                kill_wait_s: r.terminate.then_some(self.conf.kill_wait_s),
            },
            Some(signal) => NodeCommand::Signal {
                job_id,
                signal,
                batch_only: false,
                steps_only: true,
                step: Some(step_id),
            },
        };
        tracing::info!(job_id, step_id, signal = ?r.signal, "cancelling step");
        let fanout = Fanout {
            targets,
            cmd,
            budget: root_budget(Duration::from_secs(10), self.topo.max_depth()),
        };
        let relay = self.relay.clone();
        self.relay_stats.sent();
        actix::spawn(async move {
            let failed: Vec<String> = match relay.send(fanout).await {
                Ok(o) => o.into_iter().filter_map(|o| o.result.err()).collect(),
                Err(e) => vec![e.to_string()],
            };
            if !failed.is_empty() {
                tracing::warn!(job_id, step_id, errors = %failed.join("; "), "step cancel not delivered everywhere");
            }
        });
        Ok(())
    }

    /// `requeue`, `requeuehold`, `suspend` and `resume` on job `id`; the
    /// error text is Slurm's.
    fn control_one(
        &mut self,
        id: u32,
        u: &JobUpdate,
        operator: bool,
        uid: u32,
    ) -> Result<(), String> {
        let job = self.owned_job(id, operator, uid)?;
        let (state, ending) = (job.state, job.ending_as.is_some());
        if let Some(suspend) = u.suspend {
            if !operator {
                return Err("Access/permission denied".into());
            }
            if !self.jobs.set_suspended(id, suspend) {
                return Err(match (suspend, state) {
                    (true, JobState::Suspended) => "Job already suspended".into(),
                    (false, JobState::Running) => "Job is not suspended".into(),
                    (_, JobState::Pending) => "Job is pending execution".into(),
                    _ => "Job/step already completing or completed".into(),
                });
            }
            let signal = if suspend { 19 } else { 18 }; // SIGSTOP / SIGCONT
            self.signal_step(id, signal, false);
            tracing::info!(job_id = id, suspend, "job suspend state changed");
            return Ok(());
        }
        if job.submit.no_requeue {
            // `--no-requeue`: refused whatever the state, as in Slurm.
            return Err("Requested operation is presently disabled".into());
        }
        let hold = u.requeue == Some(RequeueKind::Hold);
        let hold_reason = if operator {
            JobReason::JobHeldAdmin
        } else {
            JobReason::JobHeldUser
        };
        match state {
            JobState::Pending => Err("Job is pending execution".into()),
            _ if ending => Err("Job is currently being completed".into()),
            s if s.is_finished() => {
                let run = self.jobs.get(id).map(run_secs);
                self.jobs.requeue(id, hold.then_some(hold_reason));
                self.mail_event(id, mail::REQUEUE, "Requeued", run, None);
                tracing::info!(job_id = id, "finished job requeued");
                Ok(())
            }
            _ => {
                // Running or suspended: tear it down, then requeue (end_job).
                let held = hold.then_some(hold_reason);
                self.jobs.modify(id, |j| j.requeue = Some(held));
                if state == JobState::Suspended {
                    self.jobs.set_suspended(id, false);
                }
                self.end_step_with(
                    id,
                    JobState::Cancelled,
                    JobReason::None,
                    None,
                    Some(KillCause::Requeue),
                );
                tracing::info!(job_id = id, "running job requeued");
                Ok(())
            }
        }
    }

    /// Apply `u` to job `id` (most fields only while pending); the error text is Slurm's.
    fn update_one(
        &mut self,
        id: u32,
        u: &JobUpdate,
        operator: bool,
        uid: u32,
    ) -> Result<(), String> {
        let job = self.owned_job(id, operator, uid)?;
        let pending = job.state == JobState::Pending;
        let only_name = u.hold.is_none()
            && u.time_limit_min.is_none()
            && u.partition.is_none()
            && u.num_nodes.is_none()
            && u.priority.is_none();
        if !pending && !only_name {
            return Err(if job.state.is_finished() {
                "Job/step already completing or completed".into()
            } else {
                "Job is no longer pending execution".into()
            });
        }
        if u.priority.is_some() && !operator {
            return Err("Access/permission denied".into());
        }
        if u.hold == Some(false) && job.reason == JobReason::JobHeldAdmin && !operator {
            // Only an operator may release an admin hold.
            return Err("Access/permission denied".into());
        }
        let part_name = u.partition.clone().unwrap_or_else(|| job.partition.clone());
        let Some(part) = self.conf.partitions.iter().find(|p| p.name == part_name) else {
            return Err("Invalid partition name specified".into());
        };
        let limit = match u.time_limit_min {
            Some(0) => None,
            Some(m) => Some(m),
            None => job.time_limit_min,
        };
        let over = match (limit, part.max_time_min) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(l), Some(max)) => l > max,
        };
        if over && !operator {
            return Err("Requested time limit is invalid (missing or exceeds some limit)".into());
        }
        let nodes = u.num_nodes.or(job.submit.min_nodes).unwrap_or(1);
        if nodes as usize > part.nodes.len() {
            return Err("Requested node configuration is not available".into());
        }
        let held_reason = if operator && !u.user_hold {
            JobReason::JobHeldAdmin
        } else {
            JobReason::JobHeldUser
        };
        // A released job queues behind everything submitted so far, as in
        // Slurm's priority/basic.
        let released = u.hold == Some(false) && job.priority == 0;
        let (fixed, nice) = (job.submit.priority, job.submit.nice);
        let fresh = match (released, fixed) {
            (false, _) => 0,
            // An operator's `--priority` comes back with the release.
            (true, Some(p)) if p > 0 => p,
            (true, _) => with_nice(self.priority.assign(), nice),
        };
        self.jobs.modify(id, |j| {
            if let Some(n) = &u.name {
                j.submit.name = n.clone();
            }
            if !pending {
                return;
            }
            j.partition = part_name;
            j.time_limit_min = limit;
            if u.num_nodes.is_some() {
                j.submit.min_nodes = u.num_nodes;
            }
            if let Some(p) = u.priority {
                j.priority = p;
                j.priority_set = p > 0;
                j.submit.hold = p == 0;
                j.reason = if p == 0 { held_reason } else { JobReason::None };
            }
            match u.hold {
                Some(true) => {
                    j.submit.hold = true;
                    j.priority = 0;
                    j.reason = held_reason;
                }
                Some(false) => {
                    j.submit.hold = false;
                    if released {
                        j.priority = fresh;
                        j.priority_set = j.submit.priority.is_some_and(|p| p > 0);
                    }
                    j.reason = JobReason::None;
                }
                None => {}
            }
        });
        Ok(())
    }
}

impl Handler<Reconfigure> for ControllerActor {
    type Result = Result<(), String>;
    fn handle(&mut self, _msg: Reconfigure, ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        // A small file, read on an operator's request: not worth a round
        // trip off the actor.
        let new = Config::load(&self.conf.path).map_err(|e| e.to_string())?;
        let restart = self.conf.restart_only_changes(&new);
        if !restart.is_empty() {
            return Err(format!(
                "{} changed: that needs a restart of canopy-ctld and the node daemons; nothing was changed",
                restart.join(", ")
            ));
        }
        for p in &self.conf.partitions {
            let c = self.jobs.counts(&p.name);
            let active = c.pending + c.running;
            if active > 0 && !new.partitions.iter().any(|n| n.name == p.name) {
                return Err(format!(
                    "partition {} was removed but still has {active} active job(s); nothing was changed",
                    p.name
                ));
            }
        }
        self.apply_conf(Arc::new(new), ctx);
        Ok(())
    }
}

impl ControllerActor {
    /// Switch to `conf` (already checked against the running one): update
    /// partition actors (new ones started, removed ones dropped), node sizes
    /// and node actors' settings, then schedule, since a partition may have
    /// come up or grown.
    fn apply_conf(&mut self, conf: Arc<Config>, ctx: &mut Context<Self>) {
        let old = self.routing.get();
        let mut partitions = HashMap::new();
        for pc in &conf.partitions {
            let pconf = Arc::new(pc.clone());
            let entry = match old.partitions.get(&pc.name) {
                Some((addr, st)) => {
                    st.sent();
                    addr.do_send(SetPartitionConf(pconf));
                    (addr.clone(), st.clone())
                }
                None => {
                    let st = ActorStats::new();
                    (PartitionActor::new(pconf, st.clone()).start(), st)
                }
            };
            partitions.insert(pc.name.clone(), entry);
        }
        self.routing.set(Routing {
            partitions,
            default_partition: default_partition_name(&conf),
            licenses: conf.licenses.clone(),
        });
        let timeout = Duration::from_secs(conf.slurmd_timeout_s);
        for (rank, nc) in conf.nodes.iter().enumerate() {
            // A running job keeps what it holds even if the node shrank;
            // new work sees the new size.
            if let Some(slot) = self.slots.get_mut(rank) {
                slot.cpus = nc.cpus;
                slot.mem_mb = nc.real_memory_mb;
            }
            if let Some((addr, st)) = self.node_addrs.get(rank) {
                st.sent();
                addr.do_send(SetNodeConf {
                    conf: Arc::new(nc.clone()),
                    slurmd_timeout: timeout,
                    return_to_service: conf.return_to_service,
                });
            }
        }
        let (part_ranks, node_parts) = partition_layout(&conf);
        self.part_ranks = part_ranks;
        self.node_parts = node_parts;
        tracing::info!(
            path = %conf.path.display(),
            partitions = conf.partitions.len(),
            nodes = conf.nodes.len(),
            "configuration re-read and applied"
        );
        self.conf = conf;
        self.counts_dirty = true;
        self.queue_schedule(ctx);
    }
}

impl Handler<UpdateJobs> for ControllerActor {
    type Result = ResponseFuture<CancelReply>;
    fn handle(&mut self, msg: UpdateJobs, ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let mut results = Vec::new();
        let mut changed = Vec::new();
        let ids = if msg.update.exact {
            msg.update.job_ids.clone()
        } else {
            self.resolve_ids(&msg.update.job_ids)
        };
        if msg.update.top {
            let (r, moved) = self.top_jobs(&ids, msg.operator, msg.uid);
            results = r;
            changed = moved;
        }
        for id in ids.into_iter().filter(|_| !msg.update.top) {
            let u = &msg.update;
            let r = if u.requeue.is_some() || u.suspend.is_some() {
                self.control_one(id, u, msg.operator, msg.uid)
            } else {
                self.update_one(id, u, msg.operator, msg.uid)
            };
            if r.is_ok() {
                changed.push(id);
            }
            results.push((id, r.err()));
        }
        let durable = self.persist(&changed);
        self.counts_dirty = true;
        self.queue_schedule(ctx);
        Box::pin(async move {
            let _ = durable.await;
            CancelReply { results }
        })
    }
}

/// The partition a job without `-p` goes to: the `Default=YES` one, else
/// the first.
fn default_partition_name(conf: &Config) -> Option<String> {
    conf.default_partition()
        .or_else(|| conf.partitions.first())
        .map(|p| p.name.clone())
}

/// Each partition's node ranks (in preference order), and each node's
/// partitions.
#[allow(clippy::type_complexity)]
fn partition_layout(conf: &Config) -> (Vec<(String, Vec<u32>)>, Vec<Vec<String>>) {
    let mut part_ranks = Vec::with_capacity(conf.partitions.len());
    let mut node_parts = vec![Vec::new(); conf.nodes.len()];
    for pc in &conf.partitions {
        let ranks: Vec<u32> = pc
            .nodes
            .iter()
            .filter_map(|n| conf.node_index(n).map(|i| i as u32))
            .collect();
        for &r in &ranks {
            if let Some(v) = node_parts.get_mut(r as usize) {
                v.push(pc.name.clone());
            }
        }
        part_ranks.push((pc.name.clone(), ranks));
    }
    (part_ranks, node_parts)
}

/// A new pending job.
fn new_record(
    job_id: u32,
    submit: JobSubmit,
    partition: String,
    time_limit_min: Option<u32>,
    now: UnixTime,
    array: Option<ArrayTask>,
) -> JobRecord {
    let held = submit.hold;
    JobRecord {
        job_id,
        submit,
        partition,
        time_limit_min,
        state: JobState::Pending,
        reason: if held {
            JobReason::JobHeldUser
        } else {
            JobReason::None
        },
        priority: if held { 0 } else { 1 },
        submit_time: now,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: ExitStatus::default(),
        restarts: 0,
        ending_as: None,
        next_step: 0,
        steps: Vec::new(),
        array,
        dependency: None,
        requeue: None,
        priority_set: false,
        mail_sent: 0,
    }
}

/// `slurm-%j.out`, or `slurm-%A_%a.out` for an array task.
fn default_stdout(j: &JobRecord) -> &'static str {
    if j.array.is_some() {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

fn refused(code: ErrorCode, message: impl Into<String>) -> ErrorReply {
    ErrorReply {
        code,
        message: message.into(),
    }
}

/// Slurm's refusal for a request that names nodes or features it lacks.
fn request_refusal(e: RequestError) -> ErrorReply {
    match e {
        RequestError::UnknownNode(_) => {
            refused(ErrorCode::InvalidNodeName, "Invalid node name specified")
        }
        RequestError::Constraint(c) => refused(ErrorCode::InvalidRequest, c.to_string()),
    }
}

/// priority/basic's value after `--nice`: lower for a positive nice, never
/// 0 (which means held) and never past the top.
fn with_nice(priority: u32, nice: i32) -> u32 {
    let adjusted = i64::from(priority) - i64::from(nice);
    adjusted.clamp(1, i64::from(u32::MAX - 1)) as u32
}

/// Tasks per node for `ntasks` over `nodes` nodes, block-distributed
/// (earlier nodes take the remainder). Fewer tasks than nodes use fewer nodes.
pub fn step_layout(ntasks: u32, nodes: u32) -> Vec<u32> {
    let nodes = nodes.min(ntasks).max(1);
    let (base, extra) = (ntasks / nodes, ntasks % nodes);
    (0..nodes).map(|i| base + u32::from(i < extra)).collect()
}

impl ControllerActor {
    /// Validate a step request and lay it out over the job's allocation.
    fn plan_step(&mut self, msg: &StartStep) -> Result<(StepLaunch, RankSet), ErrorReply> {
        let r = &msg.req;
        let job = self
            .jobs
            .get(r.job_id)
            .ok_or_else(|| refused(ErrorCode::InvalidJobId, "Invalid job id specified"))?;
        if !msg.operator && job.submit.uid != msg.uid {
            return Err(refused(
                ErrorCode::PermissionDenied,
                "Access/permission denied",
            ));
        }
        let alloc = match (&job.alloc, job.state, job.ending_as) {
            (Some(a), JobState::Running, None) => a.clone(),
            (_, JobState::Pending, _) => {
                return Err(refused(ErrorCode::InvalidJobId, "Job is pending execution"))
            }
            _ => {
                return Err(refused(
                    ErrorCode::AlreadyDone,
                    "Job/step already completing or completed",
                ))
            }
        };
        // The allocation's nodes this step may use, in allocation order:
        // `-w` ones first (they must all be used), then the rest unless `-x`.
        let unavailable = || {
            refused(
                ErrorCode::NodeConfigUnavailable,
                "Requested node configuration is not available",
            )
        };
        let required = match &r.nodelist {
            Some(l) => self.ranks_of(l)?,
            None => Vec::new(),
        };
        let excluded = match &r.exclude {
            Some(l) => self.ranks_of(l)?,
            None => Vec::new(),
        };
        if required
            .iter()
            .any(|n| !alloc.ranks.contains(n) || excluded.contains(n))
        {
            return Err(unavailable());
        }
        let mut pool: Vec<(u32, u32)> = alloc
            .ranks
            .iter()
            .zip(&alloc.tasks)
            .filter(|(n, _)| required.contains(n))
            .map(|(&n, &t)| (n, t))
            .collect();
        pool.extend(
            alloc
                .ranks
                .iter()
                .zip(&alloc.tasks)
                .filter(|(n, _)| !required.contains(n) && !excluded.contains(n))
                .map(|(&n, &t)| (n, t)),
        );
        let have = pool.len() as u32;
        let nodes = match r.nodes {
            Some(n) => n.max(required.len() as u32),
            None if required.is_empty() => have,
            None => required.len() as u32,
        };
        if nodes == 0 || nodes > have {
            return Err(unavailable());
        }
        let default_tasks: u32 = pool.iter().take(nodes as usize).map(|p| p.1).sum();
        let ntasks = r
            .ntasks
            .or(r.ntasks_per_node.map(|p| p * nodes))
            .unwrap_or(default_tasks.max(nodes))
            .max(1);
        if let Some(m) = &r.multi_prog {
            crate::exec::multiprog::check(m, ntasks)
                .map_err(|lines| refused(ErrorCode::InvalidRequest, lines.join("\n")))?;
        }
        let tasks_per_node = step_layout(ntasks, nodes);
        if tasks_per_node.len() < required.len() {
            // Fewer tasks than named nodes: some named node would go unused.
            return Err(unavailable());
        }
        // Tasks are laid out in the allocation's node order.
        let mut ranks: Vec<u32> = pool
            .iter()
            .take(tasks_per_node.len())
            .map(|p| p.0)
            .collect();
        ranks.sort_by_key(|n| alloc.ranks.iter().position(|a| a == n));
        let step_id = job.next_step;
        let now = chrono::Utc::now().timestamp();
        let nodelist = self.nodelist(&ranks);
        let launch = StepLaunch {
            job_id: r.job_id,
            step_id,
            name: r.name.clone(),
            user: job.submit.user.clone(),
            uid: job.submit.uid,
            gid: job.submit.gid,
            argv: r.argv.clone(),
            env: r.env.clone(),
            cwd: r.cwd.clone(),
            nodelist: nodelist.clone(),
            tasks_per_node: tasks_per_node.clone(),
            cpus_per_task: r.cpus_per_task,
            job_nodelist: self.nodelist(&alloc.ranks),
            partition: job.partition.clone(),
            cluster: self.conf.cluster_name.clone(),
            io_addr: r.io_addr.clone(),
            io_token: r.io_token,
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            array: job.array,
            stdin: r.stdin,
            stdin_pattern: r.stdin_pattern.clone(),
            pty: r.pty,
            multi_prog: r.multi_prog.clone(),
            open_append: r.open_append,
        };
        let step = AcctStep {
            kind: StepKind::Numbered(step_id),
            name: r.name.clone(),
            state: JobState::Running,
            exit_code: (0, 0),
            start_time: Some(now),
            end_time: None,
            nodes: nodelist,
            num_nodes: ranks.len() as u32,
            num_tasks: ntasks,
            alloc_cpus: ntasks * r.cpus_per_task.unwrap_or(1).max(1),
            max_rss_kb: 0,
            max_vmsize_kb: 0,
            user_cpu_ms: 0,
            system_cpu_ms: 0,
            srun_host: r.srun_host.clone(),
            srun_pid: r.srun_pid,
        };
        self.jobs.modify(r.job_id, |j| {
            j.next_step += 1;
            j.steps.push(step);
        });
        Ok((launch, RankSet::from_ranks(ranks)))
    }

    fn set_step_end(&mut self, job_id: u32, step_id: u32, exit: ExitStatus) {
        let now = chrono::Utc::now().timestamp();
        self.jobs.modify(job_id, |j| {
            if let Some(s) = j
                .steps
                .iter_mut()
                .find(|s| s.kind == StepKind::Numbered(step_id))
            {
                s.state = if exit.signal != 0 {
                    JobState::Cancelled
                } else if exit.code != 0 {
                    JobState::Failed
                } else {
                    JobState::Completed
                };
                s.exit_code = (exit.code, exit.signal);
                s.end_time = Some(now);
            }
        });
    }
}

impl Handler<StartStep> for ControllerActor {
    type Result = ResponseActFuture<Self, Result<StepLaunched, ErrorReply>>;
    fn handle(&mut self, msg: StartStep, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let (launch, targets) = match self.plan_step(&msg) {
            Ok(p) => p,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let (job_id, step_id) = (launch.job_id, launch.step_id);
        tracing::info!(job_id, step_id, nodes = %launch.nodelist, "launching step");
        let reply = StepLaunched {
            job_id,
            step_id,
            nodelist: launch.nodelist.clone(),
            tasks_per_node: launch.tasks_per_node.clone(),
        };
        let durable = self.persist(&[job_id]);
        let relay = self.relay.clone();
        let relay_stats = self.relay_stats.clone();
        let fanout = Fanout {
            targets,
            cmd: NodeCommand::RunStep(Box::new(launch)),
            budget: root_budget(Duration::from_secs(10), self.topo.max_depth()),
        };
        // The job's own launch may still be on its way down the tree (srun
        // asks as soon as the job is running): the step follows it.
        let job = self.steps.get(&job_id).map(|h| {
            h.stats.sent();
            h.addr.clone()
        });
        Box::pin(
            async move {
                let _ = durable.await;
                if let Some(job) = job {
                    if !job.send(AwaitLaunch).await.unwrap_or(false) {
                        return Err("the job's launch failed or the job is ending".to_string());
                    }
                }
                relay_stats.sent();
                relay.send(fanout).await.map_err(|e| e.to_string())
            }
            .into_actor(self)
            .map(move |outcomes, act, _| {
                let failed: Vec<String> = match outcomes {
                    Ok(o) => o.into_iter().filter_map(|o| o.result.err()).collect(),
                    Err(e) => vec![e],
                };
                if failed.is_empty() {
                    return Ok(reply);
                }
                act.set_step_end(job_id, step_id, ExitStatus { code: 1, signal: 0 });
                Err(refused(
                    ErrorCode::Internal,
                    format!("step launch failed: {}", failed.join("; ")),
                ))
            }),
        )
    }
}

impl Handler<StepDone> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: StepDone, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let d = msg.done;
        let owner = self.jobs.get(d.job_id).map(|j| j.submit.uid);
        match owner {
            None => {
                return Box::pin(async {
                    Err(refused(ErrorCode::InvalidJobId, "Invalid job id specified"))
                })
            }
            Some(uid) if !msg.operator && uid != msg.uid => {
                return Box::pin(async {
                    Err(refused(
                        ErrorCode::PermissionDenied,
                        "Access/permission denied",
                    ))
                })
            }
            Some(_) => {}
        }
        self.set_step_end(d.job_id, d.step_id, d.exit);
        let interactive = self
            .jobs
            .get(d.job_id)
            .is_some_and(|j| j.submit.interactive);
        if d.release && interactive {
            // srun made this allocation for one step: the job ends as the step did.
            let state = if d.exit.code == 0 && d.exit.signal == 0 {
                JobState::Completed
            } else {
                JobState::Failed
            };
            let reason = if state == JobState::Completed {
                JobReason::None
            } else {
                JobReason::NonZeroExitCode
            };
            self.end_step_with(d.job_id, state, reason, Some(d.exit), None);
        }
        let durable = self.persist(&[d.job_id]);
        Box::pin(async move {
            let _ = durable.await;
            Ok(())
        })
    }
}

/// A gid's group name (the gid itself when the system has no name for it).
fn group_of(gid: u32) -> String {
    crate::cli::format::group_name(gid).unwrap_or_else(|| gid.to_string())
}
