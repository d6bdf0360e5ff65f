//! The controller's read-only views (squeue, sinfo, scontrol show,
//! sacct, sdiag, `canopy status`) and the node-facing messages that do not
//! go through the core (a batch script's end, which its step actor
//! decides), and the handlers that turn node events and operators' node
//! updates into core commands.

use actix::prelude::*;
use futures::FutureExt;

use super::ControllerActor;
use super::{
    AcctReply, GetAcct, GetCounts, GetJobs, GetNodes, GetPartitions, GetRanks, GetRanksReply,
    GetStatus, NamesOf, UpdateNodes,
};
use crate::actors::relay::{GetRelayState, UpEvent};
use crate::actors::step::ScriptExited;
use crate::config::hostlist;
use crate::ctld::{Command, Reply};
use crate::model::job::{JobRecord, JobState};
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    ActorStatus, CtldStats, ErrorCode, ErrorReply, StatusReport, TreePlace, Usage,
};

impl Handler<UpdateNodes> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: UpdateNodes, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::UpdateNodes {
            update: msg.update,
            user: msg.user,
            caller: msg.caller,
        };
        let done = self.run(cmd, ctx);
        Box::pin(async move {
            match done.await {
                Some(Reply::Done(r)) => r,
                _ => Err(ErrorReply {
                    code: ErrorCode::Internal,
                    message: "could not save node state".into(),
                }),
            }
        })
    }
}

impl Handler<UpEvent> for ControllerActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: UpEvent, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = match msg {
            UpEvent::Registered { hello, via, addr } => {
                // The address first, so the registration's views show it.
                if let Some(addr) = addr {
                    let done = self.run(
                        Command::NodeAddress {
                            node: hello.node.clone(),
                            addr: addr.to_string(),
                        },
                        ctx,
                    );
                    ctx.spawn(done.map(|_| ()).into_actor(self));
                }
                Command::NodeRegistered {
                    hello: Box::new(hello),
                    via,
                }
            }
            UpEvent::Liveness { added, removed } => Command::NodeReachability {
                added: added.iter().collect(),
                removed: removed.iter().collect(),
            },
            UpEvent::ScriptFailed(failure) => Command::NodeScriptFailed { failure },
            UpEvent::StepUsage(u) => Command::StepUsage {
                job_id: u.job_id,
                step_id: u.step_id,
                usage: u.usage,
            },
            UpEvent::BatchFinished(b) => {
                let _busy = self.stats.handled();
                let step = self
                    .steps
                    .get(&b.job_id)
                    .map(|h| (h.addr.clone(), h.stats.clone()));
                // Awaited, not `do_send`: the relay feeding this waits, so
                // a flood from the network meets the step's bounded mailbox.
                return Box::pin(async move {
                    if let Some((addr, st)) = step {
                        st.sent();
                        let _ = addr.send(ScriptExited(b.status, b.usage)).await;
                    }
                });
            }
        };
        // Decided now; the relay need not wait for the records to be on
        // disk (the effects wait for them themselves).
        let done = self.run(cmd, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
        Box::pin(async {})
    }
}

impl Handler<GetJobs> for ControllerActor {
    type Result = MessageResult<GetJobs>;
    fn handle(&mut self, msg: GetJobs, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let now = chrono::Utc::now().timestamp();
        MessageResult(
            self.core
                .job_infos(&msg.ids, msg.brief, now, msg.caller, &msg.groups)
                .into_iter()
                .collect(),
        )
    }
}

impl Handler<GetNodes> for ControllerActor {
    type Result = MessageResult<GetNodes>;
    fn handle(&mut self, msg: GetNodes, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let mut nodes = self.core.node_infos(&msg.names, msg.caller);
        self.core
            .mark_reserved(&mut nodes, chrono::Utc::now().timestamp());
        MessageResult(nodes)
    }
}

impl Handler<GetPartitions> for ControllerActor {
    type Result = MessageResult<GetPartitions>;
    fn handle(&mut self, msg: GetPartitions, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.core.partition_infos(msg.caller, &msg.groups))
    }
}

impl Handler<GetStatus> for ControllerActor {
    type Result = ResponseFuture<StatusReport>;
    fn handle(&mut self, msg: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let conf = self.core.conf().clone();
        let viewer = msg.caller;
        let hide = |private: bool| private && !viewer.operator;
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
        for p in conf
            .partitions
            .iter()
            .filter(|_| !hide(conf.private_data.partitions))
        {
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
        let shown_nodes = if hide(conf.private_data.nodes) {
            0
        } else {
            conf.nodes.len()
        };
        for rank in 0..shown_nodes {
            let Some(info) = self.core.node_info(rank) else {
                continue;
            };
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
        let visible = |id: u32| {
            jobs.get(id)
                .is_none_or(|j| self.core.may_see_job(viewer, j))
        };
        for (id, h) in self.steps.iter().filter(|(id, _)| visible(**id)) {
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
        let _busy = self.stats.handled();
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
            backfill: {
                let b = self.core.backfill_stats();
                crate::wire::messages::BackfillDiag {
                    backfilled: b.backfilled,
                    cycles: b.cycles,
                    last_cycle_when: b.last_cycle_when,
                    last_us: self.bf_timing.0,
                    max_us: self.bf_timing.1,
                    total_us: self.bf_timing.2,
                    last_depth: b.last_depth,
                    last_depth_try: b.last_depth_try,
                    depth_sum: b.depth_sum,
                    depth_try_sum: b.depth_try_sum,
                    last_queue_len: b.last_queue_len,
                    queue_len_sum: b.queue_len_sum,
                    last_table_size: b.last_table_size,
                    table_size_sum: b.table_size_sum,
                }
            },
            now: chrono::Utc::now().timestamp(),
            ..Default::default()
        })
    }
}

impl Handler<GetRanks> for ControllerActor {
    type Result = GetRanksReply;
    fn handle(&mut self, msg: GetRanks, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
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

impl Handler<super::StatTargets> for ControllerActor {
    type Result = Result<Vec<(crate::wire::messages::StatStep, RankSet)>, ErrorReply>;
    fn handle(&mut self, msg: super::StatTargets, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        self.core.stat_targets(&msg.req, msg.caller)
    }
}

impl Handler<NamesOf> for ControllerActor {
    type Result = String;
    fn handle(&mut self, msg: NamesOf, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
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
        let _busy = self.stats.handled();
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
