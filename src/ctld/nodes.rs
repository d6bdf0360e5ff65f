//! Node health, decided by the core: registration, reachability through
//! the relay tree, not responding → DOWN after `SlurmdTimeout`,
//! `ReturnToService`, and operators' DRAIN/DOWN/RESUME.
//!
//! Each node that stops being reachable (or has not been reachable since
//! the controller started) gets a deadline `now + SlurmdTimeout`, with a
//! wake-up; a scheduling pass at or after it sets the node DOWN ("Not
//! responding") and fails its jobs, unless the node came back first. The
//! deadlines are derived state: recovery gives every node a fresh one, as
//! slurmctld gives every node a fresh timeout after its own restart.

use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::config::{hostlist, ConfNodeState, Config};
use crate::model::job::JobState;
use crate::model::node::{AdminState, NodeStatus, PowerDownMode, PowerState, Reason};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::authz::{self, Action, Caller};
use crate::state::store::Op;
use crate::wire::messages::{ErrorCode, ErrorReply, Hello, NodeUpdate, NodeUpdateState};

/// The reason text the not-responding rule sets; `ReturnToService=1`
/// revives only nodes DOWN for this reason.
pub(super) const NOT_RESPONDING: &str = "Not responding";

/// Every configured node's status at start-up: the admin state the store
/// kept, and what slurm.conf's `State=` says (DOWN/FAIL, DRAIN, FUTURE).
pub(super) fn initial_nodes(
    conf: &Config,
    stored: &std::collections::HashMap<String, AdminState>,
    now: UnixTime,
) -> Vec<NodeStatus> {
    conf.nodes
        .iter()
        .enumerate()
        .map(|(rank, nc)| {
            let mut admin = stored.get(&nc.name).cloned().unwrap_or_default();
            if admin.power.is_none() {
                admin.power = Core::initial_power(nc.state, now);
            }
            let reason = |text: &str| Reason {
                text: nc.reason.clone().unwrap_or_else(|| text.to_string()),
                user: "root".into(),
                time: now,
            };
            match nc.state {
                ConfNodeState::Down | ConfNodeState::Fail if admin.down.is_none() => {
                    admin.down = Some(reason("Configured DOWN"))
                }
                ConfNodeState::Drain if admin.drain.is_none() => {
                    admin.drain = Some(reason("Configured DRAIN"))
                }
                _ => {}
            }
            NodeStatus {
                rank: rank as u32,
                registered: false,
                boot_id: 0,
                responding: false,
                admin,
                resources: None,
                boot_time: None,
                attached_to: None,
                future: nc.state == ConfNodeState::Future,
                invalid_reg: false,
                reg_addr: None,
            }
        })
        .collect()
}

impl Core {
    /// Every node not yet reachable gets its not-responding deadline (at
    /// recovery: a node that never shows up goes DOWN like one that
    /// stopped answering).
    pub(super) fn arm_node_deadlines(&mut self, now: UnixTime, out: &mut Output) {
        for rank in 0..self.nodes.len() as u32 {
            self.arm_node_deadline(rank, now, out);
        }
    }

    pub(super) fn arm_node_deadline(&mut self, rank: u32, now: UnixTime, out: &mut Output) {
        let timeout = self.conf.slurmd_timeout_s;
        let Some(st) = self.nodes.get(rank as usize) else {
            return;
        };
        // A node powered down (or on its way) has no daemon to hear from;
        // a deleted dynamic node's rank has no node to wait for.
        let vacant = self.conf.nodes.get(rank as usize).is_some_and(|n| n.vacant);
        if timeout == 0
            || st.future
            || st.responding
            || vacant
            || st.power_state() != PowerState::On
        {
            return;
        }
        let at = now.saturating_add(i64::try_from(timeout).unwrap_or(i64::MAX));
        self.node_deadline[rank as usize] = Some(at);
        self.node_deadlines.insert((at, rank));
        out.effect(Effect::WakeAt(at));
    }

    /// A node daemon registered (first start, restart, or after a gap),
    /// with the jobs it holds. Reachability comes only from the relay
    /// tree (see [`Core::node_reachability`]): a registration and a death
    /// inside one health interval must not leave the node marked
    /// responding.
    pub(super) fn node_registered(
        &mut self,
        hello: &Hello,
        via: Option<u32>,
        now: UnixTime,
        out: &mut Output,
    ) {
        let rank = hello.rank;
        let here = self.conf.nodes.get(rank as usize);
        // A deleted dynamic node's daemon still running: its rank is a hole, or belongs to
        // the node created since. Told to stop, or its link keeps holding the rank.
        let dynamic_rank = rank as usize >= self.conf.fixed_nodes;
        let elsewhere = self
            .conf
            .node_index(&hello.node)
            .filter(|&i| i != rank as usize);
        if let Some(now_at) = elsewhere {
            // Not deleted: a restart with a changed node list moved it, and only a
            // restarted daemon learns its new rank.
            tracing::warn!(rank, now_at, node = %hello.node, "registration at the node's old rank ignored; restart its daemon");
            return;
        }
        if here.is_some_and(|n| n.vacant)
            || (dynamic_rank && here.is_some_and(|n| n.name != hello.node))
        {
            tracing::warn!(rank, node = %hello.node, "registration of a deleted node ignored; its daemon is told to stop");
            out.effect(super::dynamic::retire(rank, &hello.node));
            return;
        }
        if here.map(|n| n.name.as_str()) != Some(&hello.node) {
            tracing::warn!(rank, node = %hello.node, "registration with mismatched name ignored");
            return;
        }
        if !self.power_registered(rank, now, out) {
            return;
        }
        let rtos = self.conf.return_to_service;
        // As slurmctld: an invalid registration revives nothing (`register.rs`).
        let invalid = self.validate_registration(rank, &hello.resources);
        self.change_node(rank, now, false, out, |st| {
            if st.registered && st.boot_id != hello.boot_id {
                tracing::info!(node = %hello.node, boot_id = hello.boot_id, "node daemon restarted");
            }
            st.registered = true;
            st.boot_id = hello.boot_id;
            st.boot_time = Some(hello.started);
            st.resources = Some(hello.resources.clone());
            st.attached_to = via;
            if invalid.is_none() {
                st.invalid_reg = false;
                revive(st, rtos, &hello.node);
            }
        });
        if let Some(reason) = invalid {
            self.drain_invalid(rank, reason, now, out);
        }
        // Revived (or never timed) while the tree does not reach it yet: if
        // the reachability never comes, it goes DOWN again at the timeout.
        if self
            .node_deadline
            .get(rank as usize)
            .copied()
            .flatten()
            .is_none()
        {
            self.arm_node_deadline(rank, now, out);
        }
        self.reconcile(rank, hello, out);
        out.effect(Effect::Reschedule);
    }

    /// The relay tree's health delta: these ranks became reachable, those
    /// stopped being so.
    pub(super) fn node_reachability(
        &mut self,
        added: &[u32],
        removed: &[u32],
        now: UnixTime,
        out: &mut Output,
    ) {
        let rtos = self.conf.return_to_service;
        for &rank in added {
            if self.nodes.get(rank as usize).is_none_or(|st| st.responding) {
                continue;
            }
            if let Some(d) = self.node_deadline.get_mut(rank as usize) {
                *d = None;
            }
            let name = self.node_name(rank).to_string();
            tracing::info!(node = %name, "node reachable");
            self.change_node(rank, now, false, out, |st| {
                st.responding = true;
                // Registration and reachability arrive separately; either
                // may be last.
                if st.registered {
                    revive(st, rtos, &name);
                }
            });
        }
        for &rank in removed {
            if self
                .nodes
                .get(rank as usize)
                .is_none_or(|st| !st.responding)
            {
                continue;
            }
            tracing::info!(node = %self.node_name(rank), "node unreachable");
            self.change_node(rank, now, false, out, |st| st.responding = false);
            self.arm_node_deadline(rank, now, out);
        }
        out.effect(Effect::Reschedule);
    }

    /// Not-responding deadlines that have come: the node is set DOWN and
    /// its jobs fail. A deadline the node outlived by coming back (or by
    /// being set DOWN already) is stale and ignored.
    pub(super) fn node_deadlines_due(&mut self, now: UnixTime, out: &mut Output) {
        while let Some(&(at, rank)) = self.node_deadlines.first() {
            if at > now {
                break;
            }
            self.node_deadlines.remove(&(at, rank));
            let i = rank as usize;
            if self.node_deadline.get(i).copied().flatten() != Some(at) {
                continue;
            }
            self.node_deadline[i] = None;
            let Some(st) = self.nodes.get(i) else {
                continue;
            };
            if st.responding
                || st.admin.down.is_some()
                || st.future
                || st.power_state() != PowerState::On
            {
                continue;
            }
            tracing::warn!(node = %self.node_name(rank), "node not responding, setting DOWN");
            self.change_node(rank, now, true, out, |st| {
                st.admin.down = Some(Reason {
                    text: NOT_RESPONDING.into(),
                    user: "root".into(),
                    time: now,
                })
            });
        }
    }

    /// `scontrol update NodeName=... State=...`: every name must be known
    /// before anything changes; the reply leaves once the new admin states
    /// are on disk.
    pub(super) fn update_nodes(
        &mut self,
        update: &NodeUpdate,
        user: &str,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = self.try_update_nodes(update, user, caller, now, out);
        out.reply = Some(Reply::Done(r));
    }

    fn try_update_nodes(
        &mut self,
        update: &NodeUpdate,
        user: &str,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<(), ErrorReply> {
        authz::check(caller, Action::UpdateNode, None).map_err(|d| ErrorReply {
            code: ErrorCode::PermissionDenied,
            message: d.0.to_string(),
        })?;
        let invalid = |message: String| ErrorReply {
            code: ErrorCode::InvalidNodeName,
            message,
        };
        let names = hostlist::expand(&update.nodes)
            .map_err(|e| invalid(format!("Invalid node name specified: {e}")))?;
        let mut ranks = Vec::with_capacity(names.len());
        for n in &names {
            match self.conf.node_index(n) {
                Some(r) => ranks.push(r as u32),
                None => return Err(invalid(format!("Invalid node name specified: {n}"))),
            }
        }
        let Some(state) = update.state else {
            return Ok(());
        };
        let reason = || Reason {
            text: update.reason.clone().unwrap_or_default(),
            user: user.to_string(),
            time: now,
        };
        let power = match state {
            NodeUpdateState::PowerDown => Some(PowerDownMode::Normal),
            NodeUpdateState::PowerDownAsap => Some(PowerDownMode::Asap),
            NodeUpdateState::PowerDownForce => Some(PowerDownMode::Force),
            _ => None,
        };
        if let Some(mode) = power {
            for rank in ranks {
                self.power_down(rank, mode, user, now, out);
            }
            out.effect(Effect::Reschedule);
            return Ok(());
        }
        if state == NodeUpdateState::PowerUp {
            for rank in ranks {
                self.power_up(rank);
            }
            out.effect(Effect::Reschedule);
            return Ok(());
        }
        for rank in ranks {
            if matches!(state, NodeUpdateState::Resume | NodeUpdateState::Idle) {
                self.power_cancel_down(rank, now, out);
            }
            let was_down = self
                .nodes
                .get(rank as usize)
                .is_some_and(|st| st.admin.down.is_some());
            let lost = state == NodeUpdateState::Down && !was_down;
            self.change_node(rank, now, lost, out, |st| match state {
                NodeUpdateState::Drain => st.admin.drain = Some(reason()),
                NodeUpdateState::Down => st.admin.down = Some(reason()),
                NodeUpdateState::Resume | NodeUpdateState::Idle => {
                    st.admin.drain = None;
                    st.admin.down = None;
                    // The operator vouches for it until it registers again.
                    st.invalid_reg = false;
                }
                NodeUpdateState::Undrain => st.admin.drain = None,
                // Handled above.
                NodeUpdateState::PowerDown
                | NodeUpdateState::PowerDownAsap
                | NodeUpdateState::PowerDownForce
                | NodeUpdateState::PowerUp => {}
            });
            // A node resumed while still unreachable goes DOWN again after
            // the timeout, as in Slurm.
            if was_down
                && self
                    .nodes
                    .get(rank as usize)
                    .is_some_and(|s| s.admin.down.is_none())
            {
                self.arm_node_deadline(rank, now, out);
            }
        }
        out.effect(Effect::Reschedule);
        Ok(())
    }

    /// Change one node's status: a changed admin state is persisted (it
    /// survives a restart), placement follows whether it may take work,
    /// and `lost` (it just went DOWN) fails the jobs running on it.
    pub(super) fn change_node(
        &mut self,
        rank: u32,
        now: UnixTime,
        lost: bool,
        out: &mut Output,
        f: impl FnOnce(&mut NodeStatus),
    ) {
        let Some(st) = self.nodes.get_mut(rank as usize) else {
            return;
        };
        let before = st.admin.clone();
        let was = super::console::Before {
            admin: before.clone(),
            responding: st.responding,
            registered: st.registered,
            attached_to: st.attached_to,
        };
        f(st);
        let (admin, schedulable) = (st.admin.clone(), st.schedulable());
        if let Some(slot) = self.slots.get_mut(rank as usize) {
            slot.available = schedulable;
        }
        if lost {
            // Suspended jobs too: their processes are gone with the node.
            let victims: Vec<(u32, bool)> = self
                .jobs
                .running()
                .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended))
                .filter(|j| j.ending_as.is_none())
                .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
                .map(|j| (j.job_id, j.state == JobState::Suspended))
                .collect();
            for (id, suspended) in victims {
                tracing::warn!(job_id = id, node = %self.node_name(rank), "node lost; job ends NODE_FAIL");
                if suspended {
                    self.jobs.set_suspended(id, false);
                    self.jobs.modify(id, |j| j.suspend.resume(now));
                }
                self.end_job(id, JobState::NodeFail, JobReason::NodeDown, None, None, out);
            }
        }
        // The node's new state is written after its jobs' ends: a write
        // cut short may keep the jobs' ends without the DOWN (the node
        // times out again after a restart), never a DOWN node whose jobs
        // still look running.
        if admin != before {
            let state = if admin == AdminState::default() {
                None
            } else {
                rmp_serde::to_vec_named(&admin).ok()
            };
            out.persist.push(Op::NodeAdmin {
                name: self.node_name(rank).to_string(),
                state,
            });
        }
        self.node_change_events(rank, &was, out);
    }

    /// Each node's status (for views and tests).
    pub fn nodes(&self) -> &[NodeStatus] {
        &self.nodes
    }
}

/// `ReturnToService`: 1 revives nodes DOWN for not responding, 2 any DOWN.
fn revive(st: &mut NodeStatus, return_to_service: u8, name: &str) {
    // A node that registered with less than configured stays DOWN.
    if st.invalid_reg {
        return;
    }
    let revive = match &st.admin.down {
        Some(r) if r.text == NOT_RESPONDING => return_to_service >= 1,
        Some(_) => return_to_service >= 2,
        None => false,
    };
    if revive {
        tracing::info!(node = %name, "node responding again, returned to service");
        st.admin.down = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::NOT_RESPONDING;
    use crate::config::Config;
    use crate::ctld::fixtures::{hello, node_failed, running};
    use crate::ctld::{Command, Core, Effect, Output, Reply};
    use crate::model::job::JobState;
    use crate::model::node::{AdminState, Reason};
    use crate::policy::authz::Caller;
    use crate::state::store::Op;
    use crate::wire::messages::{ErrorCode, NodeUpdate, NodeUpdateState};

    const T0: i64 = 1000;

    fn core_with(extra: &str, rtos: u8, jobs: Vec<crate::model::job::JobRecord>) -> (Core, Output) {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=60\nReturnToService={rtos}\n\
             NodeName=n[1-2] CPUs=2\n{extra}PartitionName=p Nodes=ALL\n"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        Core::recover(Arc::new(conf), jobs, None, &HashMap::new(), T0)
    }

    use crate::ctld::fixtures::{reach, register};

    fn update(core: &mut Core, caller: Caller, state: NodeUpdateState, now: i64) -> Output {
        core.apply(
            now,
            Command::UpdateNodes {
                update: NodeUpdate {
                    nodes: "n1".into(),
                    state: Some(state),
                    reason: Some("fan".into()),
                },
                user: "admin".into(),
                caller,
            },
        )
    }

    fn down_reason(core: &Core, rank: usize) -> Option<String> {
        core.nodes()[rank]
            .admin
            .down
            .as_ref()
            .map(|r| r.text.clone())
    }

    /// A node that never shows up goes DOWN at SlurmdTimeout after the
    /// controller started; one that stops answering, SlurmdTimeout after
    /// it stopped; with ReturnToService=1 it comes back when reachable.
    #[test]
    fn silent_node_goes_down_after_the_timeout_and_returns_when_reachable() {
        let (mut core, out) = core_with("", 1, vec![]);
        assert!(out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::WakeAt(t) if *t == T0 + 60)));
        register(&mut core, 0, T0 + 1);
        reach(&mut core, 0, true, T0 + 1);
        // n2 never came: DOWN at the deadline, not before.
        core.apply(T0 + 59, Command::Schedule);
        assert_eq!(down_reason(&core, 1), None);
        core.apply(T0 + 60, Command::Schedule);
        assert_eq!(down_reason(&core, 1).as_deref(), Some(NOT_RESPONDING));
        assert_eq!(down_reason(&core, 0), None, "n1 answered in time");
        // n1 stops answering at T0+100: DOWN at T0+160 and its job fails.
        let (mut core, _) = core_with("", 1, vec![running(5, 0)]);
        register(&mut core, 0, T0);
        reach(&mut core, 0, true, T0);
        let out = reach(&mut core, 0, false, T0 + 100);
        assert!(out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::WakeAt(t) if *t == T0 + 160)));
        assert!(node_failed(&core.apply(T0 + 159, Command::Schedule)).is_empty());
        let out = core.apply(T0 + 160, Command::Schedule);
        assert_eq!(node_failed(&out), vec![5]);
        // The DOWN is persisted, so it survives a restart.
        assert!(out
            .persist
            .iter()
            .any(|op| matches!(op, Op::NodeAdmin { name, state: Some(_) } if name == "n1")));
        assert!(!core.slots()[0].available);
        // Reachable again: ReturnToService=1 puts it back in service.
        let out = reach(&mut core, 0, true, T0 + 200);
        assert_eq!(down_reason(&core, 0), None);
        assert!(core.slots()[0].available);
        assert!(out
            .persist
            .iter()
            .any(|op| matches!(op, Op::NodeAdmin { name, state: None } if name == "n1")));
    }

    /// A registration that revives a DOWN node the relay tree does not
    /// reach yet gives it a fresh timeout: it cannot stay up unreachable.
    #[test]
    fn a_node_revived_by_registration_alone_times_out_again() {
        let (mut core, _) = core_with("", 1, vec![]);
        core.apply(T0 + 60, Command::Schedule);
        assert_eq!(down_reason(&core, 0).as_deref(), Some(NOT_RESPONDING));
        let out = register(&mut core, 0, T0 + 100);
        assert_eq!(down_reason(&core, 0), None, "ReturnToService=1 revives");
        assert!(out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::WakeAt(t) if *t == T0 + 160)));
        core.apply(T0 + 160, Command::Schedule);
        assert_eq!(down_reason(&core, 0).as_deref(), Some(NOT_RESPONDING));
    }

    /// A node that answers again before its deadline is not set DOWN by
    /// the stale deadline; losing it again starts a new one.
    #[test]
    fn a_stale_deadline_is_ignored() {
        let (mut core, _) = core_with("", 1, vec![]);
        register(&mut core, 0, T0);
        reach(&mut core, 0, true, T0);
        reach(&mut core, 0, false, T0 + 10);
        reach(&mut core, 0, true, T0 + 20);
        reach(&mut core, 0, false, T0 + 50);
        core.apply(T0 + 70, Command::Schedule);
        assert_eq!(down_reason(&core, 0), None, "the first deadline is stale");
        core.apply(T0 + 110, Command::Schedule);
        assert_eq!(down_reason(&core, 0).as_deref(), Some(NOT_RESPONDING));
    }

    /// ReturnToService=0 keeps a DOWN node DOWN until an operator resumes
    /// it; a plain user may not; ReturnToService=2 revives any DOWN.
    #[test]
    fn return_to_service_and_operators() {
        let (mut core, _) = core_with("", 0, vec![]);
        core.apply(T0 + 60, Command::Schedule);
        register(&mut core, 0, T0 + 61);
        reach(&mut core, 0, true, T0 + 61);
        assert!(core.nodes()[0].responding);
        assert_eq!(down_reason(&core, 0).as_deref(), Some(NOT_RESPONDING));
        let user = Caller {
            uid: 1000,
            operator: false,
        };
        let out = update(&mut core, user, NodeUpdateState::Resume, T0 + 62);
        match out.reply {
            Some(Reply::Done(Err(e))) => assert_eq!(e.code, ErrorCode::PermissionDenied),
            other => panic!("{other:?}"),
        }
        assert!(out.persist.is_empty());
        let out = update(&mut core, Caller::ROOT, NodeUpdateState::Resume, T0 + 62);
        assert!(matches!(out.reply, Some(Reply::Done(Ok(())))));
        assert!(core.nodes()[0].schedulable());
        // ReturnToService=2: an operator's DOWN too is undone by a new
        // registration.
        let (mut core, _) = core_with("", 2, vec![]);
        update(&mut core, Caller::ROOT, NodeUpdateState::Down, T0);
        assert_eq!(down_reason(&core, 0).as_deref(), Some("fan"));
        register(&mut core, 0, T0 + 1);
        assert_eq!(down_reason(&core, 0), None);
    }

    /// An operator's DOWN fails the node's jobs (suspended ones too) once;
    /// DRAIN leaves them running and keeps new work off; the reason
    /// records who and when.
    #[test]
    fn operator_down_and_drain() {
        let mut suspended = running(6, 0);
        suspended.state = JobState::Suspended;
        let (mut core, _) = core_with("", 0, vec![running(5, 0), suspended, running(7, 1)]);
        for r in 0..2 {
            register(&mut core, r, T0);
            reach(&mut core, r, true, T0);
        }
        let out = update(&mut core, Caller::ROOT, NodeUpdateState::Drain, T0 + 5);
        assert!(node_failed(&out).is_empty());
        assert!(!core.slots()[0].available && core.nodes()[0].responding);
        let r = core.nodes()[0].admin.drain.clone().unwrap();
        assert_eq!(
            r,
            Reason {
                text: "fan".into(),
                user: "admin".into(),
                time: T0 + 5
            }
        );
        let out = update(&mut core, Caller::ROOT, NodeUpdateState::Down, T0 + 6);
        let mut failed = node_failed(&out);
        failed.sort();
        assert_eq!(failed, vec![5, 6]);
        assert_eq!(core.jobs().get(6).unwrap().state, JobState::Running);
        let out = update(&mut core, Caller::ROOT, NodeUpdateState::Down, T0 + 7);
        assert!(
            node_failed(&out).is_empty(),
            "a node already DOWN loses nothing more"
        );
        // UNDRAIN lifts the drain only.
        update(&mut core, Caller::ROOT, NodeUpdateState::Undrain, T0 + 8);
        let st = &core.nodes()[0];
        assert!(st.admin.drain.is_none() && st.admin.down.is_some());
    }

    /// Every name must be known before anything changes.
    #[test]
    fn an_unknown_name_changes_nothing() {
        let (mut core, _) = core_with("", 0, vec![]);
        let out = core.apply(
            T0,
            Command::UpdateNodes {
                update: NodeUpdate {
                    nodes: "n[1-3]".into(),
                    state: Some(NodeUpdateState::Drain),
                    reason: Some("x".into()),
                },
                user: "root".into(),
                caller: Caller::ROOT,
            },
        );
        match out.reply {
            Some(Reply::Done(Err(e))) => {
                assert_eq!(e.code, ErrorCode::InvalidNodeName);
                assert!(e.message.contains("n3"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        assert!(out.persist.is_empty());
        assert!(core
            .nodes()
            .iter()
            .all(|n| n.admin == AdminState::default()));
    }

    /// A silent node an operator resumes from DOWN goes DOWN again after
    /// a fresh timeout, as in Slurm.
    #[test]
    fn resuming_a_silent_node_restarts_its_clock() {
        let (mut core, _) = core_with("", 0, vec![]);
        core.apply(T0 + 60, Command::Schedule);
        assert!(down_reason(&core, 0).is_some());
        let out = update(&mut core, Caller::ROOT, NodeUpdateState::Resume, T0 + 100);
        assert!(out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::WakeAt(t) if *t == T0 + 160)));
        core.apply(T0 + 159, Command::Schedule);
        assert_eq!(down_reason(&core, 0), None);
        core.apply(T0 + 160, Command::Schedule);
        assert_eq!(down_reason(&core, 0).as_deref(), Some(NOT_RESPONDING));
    }

    /// slurm.conf's State= sets the start: DOWN and DRAIN with the
    /// configured reason, FUTURE nodes never time out; a stored admin state
    /// wins over the file's.
    #[test]
    fn configured_states_and_stored_admin_state() {
        let extra = "NodeName=n3 CPUs=2 State=DRAIN Reason=\"rack work\"\n\
                     NodeName=n4 CPUs=2 State=DOWN\nNodeName=n5 CPUs=2 State=FUTURE\n";
        let (mut core, _) = core_with(extra, 0, vec![]);
        let n = core.nodes();
        assert_eq!(n[2].admin.drain.as_ref().unwrap().text, "rack work");
        assert_eq!(n[3].admin.down.as_ref().unwrap().text, "Configured DOWN");
        assert!(n[4].future);
        core.apply(T0 + 1000, Command::Schedule);
        assert!(
            core.nodes()[4].admin.down.is_none(),
            "FUTURE nodes do not time out"
        );
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\n{extra}PartitionName=p Nodes=ALL\n"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let stored = AdminState {
            drain: Some(Reason {
                text: "kept".into(),
                user: "ops".into(),
                time: 5,
            }),
            down: None,
            power: None,
        };
        let admin = HashMap::from([("n3".to_string(), stored.clone())]);
        let (core, _) = Core::recover(Arc::new(conf), vec![], None, &admin, T0);
        assert_eq!(core.nodes()[2].admin, stored);
    }

    /// A registration naming another node's rank is ignored.
    #[test]
    fn a_mismatched_registration_is_ignored() {
        let (mut core, _) = core_with("", 0, vec![]);
        let mut h = hello(0, &[]);
        h.node = "n2".into();
        let out = core.apply(
            T0,
            Command::NodeRegistered {
                hello: Box::new(h),
                via: None,
            },
        );
        assert!(out.effects.is_empty() && out.persist.is_empty());
        assert!(!core.nodes()[0].registered && !core.nodes()[1].registered);
    }
}
