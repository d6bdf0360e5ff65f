//! The relay agent: one per daemon, the controller's included.
//!
//! It owns the links to attached descendants (natural children, or orphans that
//! re-attached after their parent died), splits every downward [`Forward`] by
//! child subtree, collects exactly one outcome per target, and folds subtree
//! liveness into deltas sent upward only when something changed. In the
//! controller it is the root (`me = None`) and its upward output becomes
//! [`UpEvent`]s; in a node daemon its upward output goes to the parent link.
//!
//! The planning, collecting and health bookkeeping are the pure cores in
//! `crate::tree`; this actor only moves messages between them and the links.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::{mpsc, oneshot};

use super::agent_link::{RunCommand, SendUp};
use super::registry::ActorRegistry;
use super::stats::{ActorStats, Counted};
use crate::console::latency::Latency;
use crate::console::trace::{hop_at_target, hop_via_child, FanoutRecord, Leg, ProbePath};
use crate::tree::collect::{child_budget, Collector};
use crate::tree::health::SubtreeHealth;
use crate::tree::plan::split;
use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;
use crate::wire::messages::{
    BatchFinished, Body, Forward, ForwardReply, HealthDelta, Hello, NodeCommand, NodeReply,
    Outcome, Registration, ScriptFailure,
};

/// Mailbox bound: network readers wait (back-pressure) once it is full.
const MAILBOX: usize = 4096;
/// Health changes are batched for this long before going upward, so a burst
/// (a relay dying and its children re-attaching) becomes one net delta.
const HEALTH_FLUSH: Duration = Duration::from_millis(100);
/// Retry delay for held upward messages when the parent link is congested.
const HELD_RETRY: Duration = Duration::from_millis(50);
/// Bytes of `canopy exec` output one fan-out's answer carries at most,
/// upward or to the local asker; beyond it outputs are dropped and counted
/// as cut. Small, because a relay keeps every child's answer until all are
/// in: the root holds at most this much per child.
const RELAY_EXEC_BUDGET: usize = 4 << 20;
/// Upward messages kept while this relay has no parent (oldest dropped beyond).
const DETACHED_QUEUE: usize = 65_536;
/// Recent fan-outs each relay remembers for `canopy trace fanout`: a bounded
/// ring of small records (about 130 bytes, plus a few per child), filled with
/// timestamps the relay takes anyway.
const FANOUT_RING: usize = 32;

/// What the root relay reports to the controller.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub enum UpEvent {
    /// A node (re-)registered; `via` is the rank it is attached to (`None` = controller).
    Registered {
        hello: Hello,
        via: Option<u32>,
        /// The address its link to the controller comes from (`None` when
        /// it is attached to a relay).
        addr: Option<std::net::IpAddr>,
    },
    /// Subtree reachability changed.
    Liveness {
        added: RankSet,
        removed: RankSet,
    },
    BatchFinished(BatchFinished),
    /// A node's Prolog or Epilog failed.
    ScriptFailed(ScriptFailure),
    StepUsage(crate::wire::messages::StepUsageReport),
}

/// A descendant's link came up (after its Hello was accepted).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ChildAttached {
    pub rank: u32,
    pub link_id: u64,
    pub tx: mpsc::Sender<Body>,
    pub hello: Hello,
    /// Where the link comes from (what a cloud node's NodeAddr becomes).
    pub peer: Option<std::net::IpAddr>,
}

/// A descendant's link went away.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ChildDetached {
    pub rank: u32,
    pub link_id: u64,
}

/// A frame from an attached descendant.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromChild {
    pub rank: u32,
    pub link_id: u64,
    pub body: Body,
    /// When the link reader read it (the mailbox wait starts here).
    pub received: Instant,
}

/// Fan a command out to `targets` and gather one outcome per target.
#[derive(Message)]
#[rtype(result = "Vec<Outcome>")]
pub struct Fanout {
    pub targets: RankSet,
    pub cmd: NodeCommand,
    pub budget: Duration,
}

/// A Forward received from this daemon's parent (node daemons only), and
/// when the link reader read it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromParent(pub Forward, pub Instant);

/// A console fan-out (`canopy ping`, `trace fanout`, `debug`) that the
/// controller's RPC layer asked for at `asked`; kept out of the ring.
#[derive(Message)]
#[rtype(result = "Vec<Outcome>")]
pub struct ConsoleFanout {
    pub targets: RankSet,
    pub cmd: NodeCommand,
    pub budget: Duration,
    pub asked: Instant,
}

/// This relay's records of its recent fan-outs, oldest first.
#[derive(Message)]
#[rtype(result = "Vec<FanoutRecord>")]
pub struct GetFanoutRecords;

/// The parent link changed (node daemons only).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetUpstream {
    pub tx: Option<mpsc::Sender<Body>>,
    pub parent: Option<String>,
    /// Rank of the new parent (`None` = the controller).
    pub parent_rank: Option<u32>,
}

/// Observable state.
#[derive(Message)]
#[rtype(result = "RelayState")]
pub struct GetRelayState;

/// What this relay knows of one rank (`canopy tree --node`, asked directly on the node's
/// listener when the tree cannot reach it).
#[derive(Message)]
#[rtype(result = "crate::console::tree::HopReport")]
pub struct GetHopView(pub u32);

/// Stop the relay (its daemon is shutting down).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RelayState {
    pub me: Option<u32>,
    /// Attached descendants, by rank.
    pub attached: Vec<u32>,
    pub live: RankSet,
    pub pending_fanouts: usize,
    pub upstream: Option<String>,
    pub mailbox_depth: i64,
    pub handled: u64,
}

/// Where this relay's upward traffic goes.
pub enum Upstream {
    Controller(Counted<UpEvent>),
    Node {
        /// The local node agent (`RunCommand` is all the relay asks of it).
        agent: Recipient<RunCommand>,
        parent: Option<mpsc::Sender<Body>>,
        parent_name: Option<String>,
        parent_rank: Option<u32>,
    },
}

struct Link {
    link_id: u64,
    tx: mpsc::Sender<Body>,
}

enum ReplyTo {
    Local(oneshot::Sender<Vec<Outcome>>),
    Parent { id: u64 },
}

struct Pending {
    collector: Collector<NodeReply>,
    via: Vec<(u32, RankSet)>,
    reply: ReplyTo,
    /// The deadline timer, cancelled when the fan-out completes first.
    timer: Option<SpawnHandle>,
    /// A `canopy top` fan-out: its answers are folded before going upward.
    top: Option<crate::console::top::TopQuery>,
    /// When it started, and how deep its deepest target is (latency
    /// histograms, root relay only).
    started: Instant,
    depth: u32,
    clock: FanClock,
}

/// Timestamps of one fan-out on this daemon's clock: what `canopy ping`
/// and `canopy trace fanout` are made of. A handful of `Instant::now()`
/// per fan-out and per child is all it costs when nobody asks.
struct FanClock {
    received: Instant,
    handled: Instant,
    origin: u64,
    kind: &'static str,
    job_id: Option<u32>,
    started: i64,
    /// The command is the console's own (never recorded in the ring).
    console: bool,
    probe: bool,
    /// Every node's answer differs (probes, trace records): never grouped.
    distinct: bool,
    sent: Vec<(u32, Instant)>,
    /// (child, its answer read off the link, handled here).
    back: Vec<(u32, Instant, Instant)>,
    local_done: Option<Instant>,
}

/// The kind and job a fan-out's record is found by.
fn cmd_kind(cmd: &NodeCommand) -> (&'static str, Option<u32>) {
    match cmd {
        NodeCommand::Noop => ("Noop", None),
        NodeCommand::Launch(l) => ("Launch", Some(l.job_id)),
        NodeCommand::Signal { job_id, .. } => ("Signal", Some(*job_id)),
        NodeCommand::KillStep { job_id, .. } => ("KillStep", Some(*job_id)),
        NodeCommand::Terminate { job_id, .. } => ("Terminate", Some(*job_id)),
        NodeCommand::Reregister => ("Reregister", None),
        NodeCommand::RunStep(s) => ("RunStep", Some(s.job_id)),
        NodeCommand::ReloadKeys => ("ReloadKeys", None),
        NodeCommand::Prolog(j) => ("Prolog", Some(j.job_id)),
        NodeCommand::SetScripts(_) => ("SetScripts", None),
        NodeCommand::StatSteps { job_id, .. } => ("StatSteps", Some(*job_id)),
        NodeCommand::Probe => ("Probe", None),
        NodeCommand::FanoutTrace { .. } => ("FanoutTrace", None),
        NodeCommand::SetDebug(_) => ("SetDebug", None),
        NodeCommand::ShowDebug => ("ShowDebug", None),
        NodeCommand::Retire { .. } => ("Retire", None),
        NodeCommand::TopActors(_) => ("TopActors", None),
        NodeCommand::Exec(_) => ("Exec", None),
        NodeCommand::ExecInterrupt { .. } => ("ExecInterrupt", None),
        NodeCommand::HopView { .. } => ("HopView", None),
    }
}

/// The console's own commands: never kept in the trace ring (a `canopy top` left
/// refreshing would push the launches out) nor in the fan-out latency histograms (an
/// exec lasts as long as the user's command).
fn is_console(cmd: &NodeCommand) -> bool {
    matches!(
        cmd,
        NodeCommand::Probe
            | NodeCommand::FanoutTrace { .. }
            | NodeCommand::SetDebug(_)
            | NodeCommand::ShowDebug
            | NodeCommand::TopActors(_)
            | NodeCommand::Exec(_)
            | NodeCommand::ExecInterrupt { .. }
            | NodeCommand::HopView { .. }
    )
}

/// An exec result's key for the collector's grouping (equal outputs hash alike).
fn exec_key(r: &Result<NodeReply, String>) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    match r {
        Ok(NodeReply::Exec(o)) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            o.hash(&mut h);
            Some(h.finish())
        }
        _ => None,
    }
}

fn us_between(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_micros() as u64
}

pub struct RelayActor {
    me: Option<u32>,
    topo: Arc<Topology>,
    links: HashMap<u32, Link>,
    health: SubtreeHealth,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    up: Upstream,
    /// Registrations and job events that arrived while no parent was attached.
    held: std::collections::VecDeque<Body>,
    /// A health flush is scheduled (no periodic timers: an idle relay costs nothing).
    flush_armed: bool,
    held_retry_armed: bool,
    stats: Arc<ActorStats>,
    /// This daemon's actors, read for `canopy top` without their mailboxes.
    registry: Option<Arc<ActorRegistry>>,
    /// The controller's fan-out latency by depth (root relay only).
    latency: Option<Arc<Latency>>,
    /// Recent fan-outs, oldest first (`canopy trace fanout`).
    ring: std::collections::VecDeque<FanoutRecord>,
    /// High bits of the broadcast ids this relay originates (the root's),
    /// fresh per start, so a record from before a controller restart is
    /// never taken for a new broadcast.
    origin_salt: u64,
}

impl RelayActor {
    pub fn new(me: Option<u32>, topo: Arc<Topology>, up: Upstream, stats: Arc<ActorStats>) -> Self {
        let mut health = SubtreeHealth::new();
        if let Some(r) = me {
            health.set_self(r);
        }
        RelayActor {
            me,
            topo,
            links: HashMap::new(),
            health,
            pending: HashMap::new(),
            next_id: 1,
            up,
            held: std::collections::VecDeque::new(),
            flush_armed: false,
            held_retry_armed: false,
            stats,
            registry: None,
            latency: None,
            ring: std::collections::VecDeque::new(),
            origin_salt: crate::daemon::new_boot_id() << 32,
        }
    }

    /// Answer `canopy top` for this daemon from `registry` (and register
    /// this relay in it).
    pub fn with_registry(mut self, registry: Arc<ActorRegistry>) -> Self {
        let name = match self.me {
            Some(r) => format!("rank {r}"),
            None => "root".to_string(),
        };
        registry.register("relay", &name, &self.stats);
        self.registry = Some(registry);
        self
    }

    /// Record each completed fan-out's time by its deepest target's depth.
    pub fn with_latency(mut self, latency: Arc<Latency>) -> Self {
        self.latency = Some(latency);
        self
    }

    /// What `canopy top` shows for this relay; called when links change
    /// (rare), not per message.
    fn publish_state(&self) {
        if self.registry.is_some() {
            self.stats.publish(format!(
                "attached={} live={}",
                self.links.len(),
                self.health.live().len()
            ));
        }
    }

    /// The name this hop's folded `canopy top` summaries carry.
    fn head_name(&self) -> String {
        match (&self.registry, self.me) {
            (Some(r), _) => r.daemon().to_string(),
            (None, Some(me)) => format!("rank {me}"),
            (None, None) => "controller".to_string(),
        }
    }

    fn attached(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.links.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Start a fan-out; its result goes to `reply` once complete or expired.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        targets: RankSet,
        cmd: NodeCommand,
        budget: Duration,
        reply: ReplyTo,
        received: Instant,
        origin: u64,
        ctx: &mut Context<Self>,
    ) {
        let id = self.next_id;
        self.next_id += 1;
        tracing::debug!(me = ?self.me, id, targets = ?targets, ?budget, "fan-out start");
        let (kind, job_id) = cmd_kind(&cmd);
        let mut clock = FanClock {
            received,
            handled: Instant::now(),
            origin: if origin == 0 {
                self.origin_salt | id
            } else {
                origin
            },
            kind,
            job_id,
            started: chrono::Utc::now().timestamp(),
            console: is_console(&cmd),
            probe: matches!(cmd, NodeCommand::Probe),
            distinct: matches!(cmd, NodeCommand::Probe | NodeCommand::FanoutTrace { .. }),
            sent: Vec::new(),
            back: Vec::new(),
            local_done: None,
        };
        if clock.probe {
            tracing::trace!(me = ?self.me, id, origin = clock.origin, "probe stamped on its way down");
        }
        let deadline = Instant::now() + budget;
        let mut collector = Collector::new(targets.clone(), deadline);
        if matches!(cmd, NodeCommand::Exec(_)) {
            // Every node may print something else (`hostname`): grouped by hash, not by a
            // search through every distinct output so far.
            collector = collector.with_key(exec_key);
        }
        let plan = split(&self.topo, self.me, &targets, &self.attached());
        if !plan.unreachable.is_empty() {
            collector.fail(&plan.unreachable, "node is not reachable");
        }
        let mut via = Vec::with_capacity(plan.via.len());
        for (child, sub) in plan.via {
            let depth_below = self.topo.height(Some(child));
            let fwd = Forward {
                id,
                targets: sub.clone(),
                budget_ms: child_budget(budget, depth_below).as_millis() as u64,
                cmd: cmd.clone(),
                origin: clock.origin,
            };
            let sent = self
                .links
                .get(&child)
                .map(|l| l.tx.try_send(Body::Forward(Box::new(fwd))).is_ok())
                .unwrap_or(false);
            if sent {
                clock.sent.push((child, Instant::now()));
                via.push((child, sub));
            } else {
                collector.fail(&sub, format!("link to rank {child} is congested or gone"));
            }
        }
        if plan.local {
            if let (Some(me), NodeCommand::TopActors(q)) = (self.me, &cmd) {
                // Read here, from the published counters: the agent's
                // mailbox is never involved, so a stuck agent is reported
                // rather than waited on.
                let result = match &self.registry {
                    Some(reg) => Ok(NodeReply::Top(Box::new(reg.summary(q)))),
                    None => Err("this daemon publishes no actor counters".to_string()),
                };
                collector.record(&RankSet::from_ranks([me]), result);
            } else if let (Some(me), NodeCommand::Noop) = (self.me, &cmd) {
                // A no-op needs no trip to the agent: this daemon answering is the point.
                collector.record(&RankSet::from_ranks([me]), Ok(NodeReply::Ack));
                clock.local_done = Some(Instant::now());
            } else if let (Some(me), Some(answer)) = (self.me, self.answer_here(&cmd, ctx)) {
                // The console's questions about this daemon itself.
                collector.record(&RankSet::from_ranks([me]), answer);
                clock.local_done = Some(Instant::now());
            } else if let (Some(me), NodeCommand::HopView { rank }) = (self.me, &cmd) {
                // Answered from this relay's own links: no trip through the agent's mailbox.
                let view = self.hop_view(me, *rank);
                collector.record(&RankSet::from_ranks([me]), Ok(NodeReply::HopView(view)));
                clock.local_done = Some(Instant::now());
            } else if let (Some(me), Upstream::Node { agent, .. }) = (self.me, &self.up) {
                let agent = agent.clone();
                let cmd2 = cmd.clone();
                let probe = clock.probe;
                ctx.spawn(
                    async move { agent.send(RunCommand(cmd2)).await }
                        .into_actor(self)
                        .map(move |res, act, ctx| {
                            let result = match res {
                                // The probe's stamps are filled in as it climbs.
                                Ok(Ok(NodeReply::Ack)) if probe => {
                                    Ok(NodeReply::Probe(ProbePath::default()))
                                }
                                Ok(r) => r,
                                Err(e) => Err(format!("node agent unavailable: {e}")),
                            };
                            if let Some(p) = act.pending.get_mut(&id) {
                                p.clock.local_done = Some(Instant::now());
                            }
                            act.record(id, &RankSet::from_ranks([me]), result, ctx);
                        }),
                );
            }
        }
        // Answered synchronously (a leaf's no-op, or nothing reachable):
        // no deadline timer needed.
        let timer = (!collector.is_complete())
            .then(|| ctx.run_later(budget, move |act, ctx| act.expire(id, ctx)));
        let top = match &cmd {
            NodeCommand::TopActors(q) => Some(q.clone()),
            _ => None,
        };
        // Ranks are numbered level by level, so a range's deepest rank is
        // (nearly always) its last; dynamic blocks may differ by a level.
        let depth = match self.latency {
            Some(_) => targets
                .ranges()
                .iter()
                .map(|&(_, end)| self.topo.depth(end.saturating_sub(1)))
                .max()
                .unwrap_or(0),
            None => 0,
        };
        self.pending.insert(
            id,
            Pending {
                collector,
                via,
                reply,
                timer,
                top,
                started: Instant::now(),
                depth,
                clock,
            },
        );
        self.maybe_finish(id, ctx);
    }

    /// The relay's own answer to a console command addressed to this
    /// daemon (`None`: not one of those; the agent answers it).
    fn answer_here(
        &mut self,
        cmd: &NodeCommand,
        ctx: &mut Context<Self>,
    ) -> Option<Result<NodeReply, String>> {
        match cmd {
            NodeCommand::FanoutTrace { origin } => {
                let rec = self.ring.iter().rev().find(|r| r.origin == *origin);
                Some(Ok(NodeReply::FanoutRecord(rec.cloned().map(Box::new))))
            }
            NodeCommand::ShowDebug => Some(Ok(NodeReply::Debug(crate::daemon::debuglog::show()))),
            NodeCommand::SetDebug(set) => {
                Some(match crate::daemon::debuglog::apply(set, Instant::now()) {
                    Ok((shown, next)) => {
                        if let Some(at) = next {
                            self.arm_debug_revert(at, ctx);
                        }
                        Ok(NodeReply::Debug(shown))
                    }
                    Err(e) => Err(e),
                })
            }
            _ => None,
        }
    }

    /// Revert raised log detail when it is due: this daemon holds the
    /// deadline, so it reverts even if the controller is gone.
    fn arm_debug_revert(&mut self, at: Instant, ctx: &mut Context<Self>) {
        let wait = at.saturating_duration_since(Instant::now());
        ctx.run_later(wait, |act, ctx| {
            if let Some(next) = crate::daemon::debuglog::expire(Instant::now()) {
                act.arm_debug_revert(next, ctx);
            }
        });
    }

    /// Stamp each probe outcome with this hop, and keep the fan-out's record.
    fn stamp(&mut self, clock: &FanClock, via: &[(u32, RankSet)], outcomes: &mut [Outcome]) {
        let answered = Instant::now();
        if clock.probe {
            for o in outcomes.iter_mut() {
                let Ok(NodeReply::Probe(path)) = &mut o.result else {
                    continue;
                };
                let first = o.ranks.iter().next();
                let hop = match via
                    .iter()
                    .find(|(_, s)| first.is_some_and(|r| s.contains(r)))
                {
                    Some((child, _)) => {
                        let sent = clock.sent.iter().find(|(c, _)| c == child).map(|x| x.1);
                        let back = clock.back.iter().find(|(c, _, _)| c == child);
                        match (sent, back) {
                            (Some(sent), Some(&(_, read, handled))) => hop_via_child(
                                self.me,
                                clock.received,
                                clock.handled,
                                sent,
                                (read, handled),
                                answered,
                            ),
                            _ => continue,
                        }
                    }
                    None => hop_at_target(
                        self.me,
                        clock.received,
                        clock.handled,
                        clock.local_done.unwrap_or(answered),
                        answered,
                    ),
                };
                path.hops.insert(0, hop);
            }
        }
        if clock.console {
            return;
        }
        let legs = via
            .iter()
            .map(|(child, sub)| Leg {
                child: *child,
                targets: sub.len(),
                sent_us: clock
                    .sent
                    .iter()
                    .find(|(c, _)| c == child)
                    .map_or(0, |(_, t)| us_between(clock.handled, *t)),
                back_us: clock
                    .back
                    .iter()
                    .find(|(c, _, _)| c == child)
                    .map(|(_, read, _)| us_between(clock.handled, *read)),
                failed: outcomes
                    .iter()
                    .filter(|o| o.result.is_err())
                    .map(|o| o.ranks.intersection(sub).len())
                    .sum(),
            })
            .collect();
        if self.ring.len() >= FANOUT_RING {
            self.ring.pop_front();
        }
        self.ring.push_back(FanoutRecord {
            origin: clock.origin,
            kind: clock.kind.into(),
            job_id: clock.job_id,
            rank: self.me,
            started: clock.started,
            targets: outcomes.iter().map(|o| o.ranks.len()).sum(),
            queued_us: us_between(clock.received, clock.handled),
            legs,
            local_us: clock.local_done.map(|t| us_between(clock.handled, t)),
            done_us: us_between(clock.handled, answered),
        });
    }

    fn record(
        &mut self,
        id: u64,
        ranks: &RankSet,
        result: Result<NodeReply, String>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.collector.record(ranks, result);
            self.maybe_finish(id, ctx);
        }
    }

    fn expire(&mut self, id: u64, ctx: &mut Context<Self>) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.collector.expire(Instant::now());
            self.maybe_finish(id, ctx);
        }
    }

    fn maybe_finish(&mut self, id: u64, ctx: &mut Context<Self>) {
        let done = self
            .pending
            .get(&id)
            .is_some_and(|p| p.collector.is_complete());
        if !done {
            return;
        }
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        tracing::debug!(me = ?self.me, id, "fan-out complete");
        if let Some(t) = p.timer {
            ctx.cancel_future(t);
        }
        if let (Some(l), false) = (&self.latency, p.clock.console) {
            l.record_fanout(p.depth, p.started.elapsed().as_micros() as u64);
        }
        let mut outcomes: Vec<Outcome> = p
            .collector
            .finish()
            .into_iter()
            .map(|(ranks, result)| Outcome { ranks, result })
            .collect();
        if let Some(q) = &p.top {
            // One summary per hop, whatever the subtree's size.
            outcomes = crate::console::top::fold_outcomes(&self.head_name(), outcomes, q);
        }
        self.stamp(&p.clock, &p.via, &mut outcomes);
        // Many distinct `canopy exec` outputs must still fit one frame, and
        // the root's asker is bound as a parent is.
        crate::console::fold::bound_exec_replies(&mut outcomes, RELAY_EXEC_BUDGET);
        match p.reply {
            ReplyTo::Local(tx) => {
                let _ = tx.send(outcomes);
            }
            ReplyTo::Parent { id } => {
                self.send_parent(Body::ForwardReply(ForwardReply { id, outcomes }), ctx);
            }
        }
    }

    fn send_parent(&mut self, body: Body, ctx: &mut Context<Self>) {
        let Upstream::Node { parent, .. } = &self.up else {
            return;
        };
        let body = match parent {
            Some(tx) => match tx.try_send(body) {
                Ok(()) => return,
                Err(e) => e.into_inner(),
            },
            None => body,
        };
        // Registrations and job ends must not be lost while the parent link is
        // down or congested: hold them until a parent is attached. Health is
        // re-sent in full on attach, and replies are moot once the asker is gone.
        if matches!(
            body,
            Body::Register(_) | Body::BatchFinished(_) | Body::ScriptFailed(_) | Body::StepUsage(_)
        ) {
            if self.held.len() >= DETACHED_QUEUE {
                self.held.pop_front();
                tracing::warn!("upward queue full; dropping the oldest held message");
            }
            self.held.push_back(body);
            self.flush_held(ctx);
        } else {
            tracing::debug!(
                msg_kind = body.kind(),
                "no parent link; upward message dropped"
            );
        }
    }

    /// Send what was held while detached, in order, until the link is full;
    /// retry shortly if anything is left.
    fn flush_held(&mut self, ctx: &mut Context<Self>) {
        let Upstream::Node {
            parent: Some(tx), ..
        } = &self.up
        else {
            return;
        };
        while let Some(body) = self.held.pop_front() {
            if let Err(e) = tx.try_send(body) {
                self.held.push_front(e.into_inner());
                break;
            }
        }
        if !self.held.is_empty() && !self.held_retry_armed {
            self.held_retry_armed = true;
            ctx.run_later(HELD_RETRY, |act, ctx| {
                act.held_retry_armed = false;
                act.flush_held(ctx);
            });
        }
    }

    /// Schedule one health flush after `HEALTH_FLUSH`, unless one is pending.
    fn arm_flush(&mut self, ctx: &mut Context<Self>) {
        if !self.flush_armed {
            self.flush_armed = true;
            ctx.run_later(HEALTH_FLUSH, |act, ctx| {
                act.flush_armed = false;
                act.flush_health(ctx);
            });
        }
    }

    /// Push an event to the controller (root relay) preserving order.
    fn emit(&mut self, ev: UpEvent, ctx: &mut Context<Self>) {
        if let Upstream::Controller(r) = &self.up {
            let r = r.clone();
            ctx.wait(
                async move {
                    if let Err(e) = r.send(ev).await {
                        tracing::error!(error = %e, "controller unavailable");
                    }
                }
                .into_actor(self),
            );
        }
    }

    fn flush_health(&mut self, ctx: &mut Context<Self>) {
        let Some(delta) = self.health.take_delta() else {
            return;
        };
        match &self.up {
            Upstream::Controller(_) => self.emit(
                UpEvent::Liveness {
                    added: delta.added,
                    removed: delta.removed,
                },
                ctx,
            ),
            Upstream::Node { .. } => self.send_parent(
                Body::Health(HealthDelta {
                    added: delta.added,
                    removed: delta.removed,
                }),
                ctx,
            ),
        }
    }

    /// Fail, at once, every outstanding target routed through `child`.
    fn fail_via(&mut self, child: u32, ctx: &mut Context<Self>) {
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            if let Some(p) = self.pending.get_mut(&id) {
                let lost: Vec<RankSet> = p
                    .via
                    .iter()
                    .filter(|(c, _)| *c == child)
                    .map(|(_, s)| s.clone())
                    .collect();
                for s in lost {
                    p.collector
                        .fail(&s, format!("link to rank {child} was lost"));
                }
            }
            self.maybe_finish(id, ctx);
        }
    }
}

impl RelayActor {
    /// What this hop knows of `rank` (`canopy tree --node`).
    fn hop_view(&self, me: u32, rank: u32) -> crate::console::tree::HopReport {
        let (upstream_rank, upstream_up) = match &self.up {
            Upstream::Controller(_) => (None, true),
            Upstream::Node {
                parent,
                parent_rank,
                ..
            } => (*parent_rank, parent.is_some()),
        };
        crate::console::tree::HopReport {
            me,
            linked: self.links.contains_key(&rank),
            reaches: self.health.live().contains(rank),
            upstream_rank,
            upstream_up,
            direct: false,
        }
    }
}

impl Actor for RelayActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        // The root's own first flush reports nothing; kept for symmetry.
        self.arm_flush(ctx);
    }
}

impl Handler<ChildAttached> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: ChildAttached, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        tracing::info!(rank = msg.rank, node = %msg.hello.node, boot_id = msg.hello.boot_id, "child attached");
        if self.links.contains_key(&msg.rank) {
            // A fresh link replaces a stale one: fail what went through the old one.
            self.fail_via(msg.rank, ctx);
        }
        self.links.insert(
            msg.rank,
            Link {
                link_id: msg.link_id,
                tx: msg.tx,
            },
        );
        self.health.attach(msg.rank);
        self.publish_state();
        self.arm_flush(ctx);
        let reg = Registration {
            hello: msg.hello,
            parent: self.me,
        };
        self.forward_register(reg, msg.peer, ctx);
    }
}

impl RelayActor {
    fn forward_register(
        &mut self,
        reg: Registration,
        peer: Option<std::net::IpAddr>,
        ctx: &mut Context<Self>,
    ) {
        match &self.up {
            Upstream::Controller(_) => self.emit(
                UpEvent::Registered {
                    hello: reg.hello,
                    via: reg.parent,
                    addr: peer,
                },
                ctx,
            ),
            Upstream::Node { .. } => self.send_parent(Body::Register(reg), ctx),
        }
    }
}

impl Handler<ChildDetached> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: ChildDetached, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let current = self.links.get(&msg.rank).map(|l| l.link_id);
        if current != Some(msg.link_id) {
            return; // an older link; already replaced
        }
        tracing::warn!(rank = msg.rank, "child link lost");
        self.links.remove(&msg.rank);
        self.health.detach(msg.rank);
        self.publish_state();
        self.arm_flush(ctx);
        self.fail_via(msg.rank, ctx);
    }
}

impl Handler<FromChild> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: FromChild, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        if self.links.get(&msg.rank).map(|l| l.link_id) != Some(msg.link_id) {
            return;
        }
        match msg.body {
            Body::Health(d) => {
                let delta = crate::tree::health::Delta {
                    added: d.added,
                    removed: d.removed,
                };
                self.health.apply(msg.rank, &delta);
                self.arm_flush(ctx);
            }
            Body::ForwardReply(r) => {
                if let Some(p) = self.pending.get_mut(&r.id) {
                    p.clock.back.push((msg.rank, msg.received, Instant::now()));
                    // Only accept outcomes for targets actually routed via this child.
                    let routed: RankSet = p
                        .via
                        .iter()
                        .filter(|(c, _)| *c == msg.rank)
                        .fold(RankSet::new(), |acc, (_, s)| acc.union(s));
                    for o in r.outcomes {
                        let ranks = o.ranks.intersection(&routed);
                        // Probe stamps and trace records differ per node:
                        // searching for an equal group would cost O(n²).
                        if p.clock.distinct && o.result.is_ok() {
                            p.collector.record_distinct(&ranks, o.result);
                        } else {
                            p.collector.record(&ranks, o.result);
                        }
                    }
                    self.maybe_finish(r.id, ctx);
                }
            }
            // Registered through a relay: its address is the relay's business.
            Body::Register(reg) => self.forward_register(reg, None, ctx),
            Body::BatchFinished(b) => match &self.up {
                Upstream::Controller(_) => self.emit(UpEvent::BatchFinished(b), ctx),
                Upstream::Node { .. } => self.send_parent(Body::BatchFinished(b), ctx),
            },
            Body::ScriptFailed(f) => match &self.up {
                Upstream::Controller(_) => self.emit(UpEvent::ScriptFailed(f), ctx),
                Upstream::Node { .. } => self.send_parent(Body::ScriptFailed(f), ctx),
            },
            Body::StepUsage(u) => match &self.up {
                Upstream::Controller(_) => self.emit(UpEvent::StepUsage(u), ctx),
                Upstream::Node { .. } => self.send_parent(Body::StepUsage(u), ctx),
            },
            Body::Keepalive => {}
            other => {
                tracing::warn!(
                    rank = msg.rank,
                    msg_kind = other.kind(),
                    "unexpected message from child"
                );
            }
        }
    }
}

impl Handler<Fanout> for RelayActor {
    type Result = ResponseFuture<Vec<Outcome>>;
    fn handle(&mut self, msg: Fanout, ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let (tx, rx) = oneshot::channel();
        let targets = msg.targets.clone();
        let now = Instant::now();
        self.start(
            msg.targets,
            msg.cmd,
            msg.budget,
            ReplyTo::Local(tx),
            now,
            0,
            ctx,
        );
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                vec![Outcome {
                    ranks: targets,
                    result: Err("relay stopped".into()),
                }]
            })
        })
    }
}

impl Handler<FromParent> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: FromParent, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let f = msg.0;
        let budget = Duration::from_millis(f.budget_ms);
        let reply = ReplyTo::Parent { id: f.id };
        self.start(f.targets, f.cmd, budget, reply, msg.1, f.origin, ctx);
    }
}

impl Handler<SetUpstream> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: SetUpstream, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let attached = msg.tx.is_some();
        if let Upstream::Node {
            parent,
            parent_name,
            parent_rank,
            ..
        } = &mut self.up
        {
            *parent = msg.tx;
            *parent_name = msg.parent;
            *parent_rank = msg.parent_rank;
        }
        if attached {
            // A new parent knows nothing of our subtree: report all of it, and
            // ask every live descendant to re-register through us.
            let full = self.health.full_report();
            self.send_parent(
                Body::Health(HealthDelta {
                    added: full.added,
                    removed: full.removed,
                }),
                ctx,
            );
            self.flush_held(ctx);
            let mut below = self.health.live();
            if let Some(me) = self.me {
                below = below.difference(&RankSet::from_ranks([me]));
            }
            if !below.is_empty() {
                let (tx, _rx) = oneshot::channel();
                self.start(
                    below,
                    NodeCommand::Reregister,
                    Duration::from_secs(10),
                    ReplyTo::Local(tx),
                    Instant::now(),
                    0,
                    ctx,
                );
            }
        }
    }
}

impl Handler<SendUp> for RelayActor {
    type Result = ();
    fn handle(&mut self, msg: SendUp, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let body = match (msg.0, &self.up) {
            // Only the relay knows where this node is attached right now.
            (Body::Register(mut reg), Upstream::Node { parent_rank, .. }) => {
                reg.parent = *parent_rank;
                Body::Register(reg)
            }
            (b, _) => b,
        };
        self.send_parent(body, ctx);
    }
}

impl Handler<GetRelayState> for RelayActor {
    type Result = MessageResult<GetRelayState>;
    fn handle(&mut self, _msg: GetRelayState, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(RelayState {
            me: self.me,
            attached: self.attached(),
            live: self.health.live(),
            pending_fanouts: self.pending.len(),
            upstream: match &self.up {
                Upstream::Controller(_) => None,
                Upstream::Node { parent_name, .. } => parent_name.clone(),
            },
            mailbox_depth: self.stats.depth(),
            handled: self.stats.total(),
        })
    }
}

impl Handler<Stop> for RelayActor {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
        self.links.clear();
        ctx.stop();
    }
}

impl Handler<GetHopView> for RelayActor {
    type Result = MessageResult<GetHopView>;
    fn handle(&mut self, msg: GetHopView, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.hop_view(self.me.unwrap_or(u32::MAX), msg.0))
    }
}

impl Handler<ConsoleFanout> for RelayActor {
    type Result = ResponseFuture<Vec<Outcome>>;
    fn handle(&mut self, msg: ConsoleFanout, ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let (tx, rx) = oneshot::channel();
        let targets = msg.targets.clone();
        let reply = ReplyTo::Local(tx);
        self.start(msg.targets, msg.cmd, msg.budget, reply, msg.asked, 0, ctx);
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                vec![Outcome {
                    ranks: targets,
                    result: Err("relay stopped".into()),
                }]
            })
        })
    }
}

impl Handler<GetFanoutRecords> for RelayActor {
    type Result = MessageResult<GetFanoutRecords>;
    fn handle(&mut self, _msg: GetFanoutRecords, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.ring.iter().cloned().collect())
    }
}
