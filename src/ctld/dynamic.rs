//! Dynamic nodes in the controller core, as Slurm 22.05 has them: `scontrol create
//! NodeName=... State=FUTURE|CLOUD`, a `canopy-noded -Z` joining (slurmd -Z, whose node the
//! controller creates from the line the daemon sends), and `scontrol delete nodename=`.
//!
//! The configuration decides what a line means and which rank and partitions a node gets
//! (`config::dynamic`); this file checks who asks, refuses to delete a node jobs or reservations
//! still use (Slurm's "Requested nodes are busy"), grows or vacates the core's per-rank state, and
//! puts every dynamic node's line in the store before anything is answered, so that the nodes
//! come back, at the same ranks, after a restart.
//!
//! Does not: start or stop node daemons, or talk to them (the shell replies to the joining
//! daemon, which then registers with its rank like any other).

use std::sync::Arc;

use super::command::{Effect, Output, Reply};
use super::core::{partition_layout, Core};
use crate::config::dynamic::{node_line, DynamicError};
use crate::config::{hostlist, ConfNodeState, Config};
use crate::model::node::NodeStatus;
use crate::model::time::UnixTime;
use crate::policy::authz::{self, Action, Caller};
use crate::sched::NodeSlot;
use crate::state::store::Op;
use crate::wire::messages::{ErrorCode, ErrorReply, NodeCommand};

/// A node made or found: its rank and its line as the controller keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlace {
    pub rank: u32,
    pub line: String,
}

/// Tell the daemon of deleted dynamic node `name`, at `rank`, to stop.
pub(super) fn retire(rank: u32, name: &str) -> Effect {
    Effect::Fanout {
        targets: crate::tree::rankset::RankSet::from_ranks([rank]),
        cmd: NodeCommand::Retire {
            node: name.to_string(),
        },
        budget: std::time::Duration::from_secs(10),
    }
}

fn refused(code: ErrorCode, message: impl Into<String>) -> ErrorReply {
    ErrorReply {
        code,
        message: message.into(),
    }
}

fn from_dynamic(e: DynamicError) -> ErrorReply {
    let code = match &e {
        DynamicError::State | DynamicError::NotDynamic(_) => ErrorCode::InvalidNodeState,
        DynamicError::Unknown(_) | DynamicError::Exists(_) | DynamicError::TooMany(_) => {
            ErrorCode::InvalidNodeName
        }
        DynamicError::Line(_) => ErrorCode::InvalidRequest,
    };
    refused(code, e.to_string())
}

impl Core {
    /// `scontrol create NodeName=...`.
    pub(super) fn create_nodes(
        &mut self,
        line: &str,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = self.check_admin(caller).and_then(|()| {
            let (conf, ranks) = self
                .conf
                .with_created_nodes(line, true)
                .map_err(from_dynamic)?;
            Ok(self.adopt_created(conf, &ranks, now, out))
        });
        out.reply = Some(Reply::Nodes(r));
    }

    /// A `canopy-noded -Z` asks for its place: a node the configuration lacks is created from
    /// `line` (NodeAddr from `peer` unless the line gives one, as slurmctld takes a dynamic
    /// node's address from its registration); a node that exists keeps its rank, a FUTURE one
    /// becomes a normal node, and a dynamic one takes the address it now registers from.
    pub(super) fn join_node(
        &mut self,
        line: &str,
        peer: Option<&str>,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = self.try_join(line, peer, now, out);
        out.reply = Some(Reply::Nodes(r));
    }

    fn try_join(
        &mut self,
        line: &str,
        peer: Option<&str>,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<Vec<NodePlace>, ErrorReply> {
        let has_addr = line.split_whitespace().any(|kv| {
            kv.split_once('=')
                .is_some_and(|(k, _)| k.eq_ignore_ascii_case("NodeAddr"))
        });
        let line = match peer {
            Some(ip) if !has_addr => format!("{line} NodeAddr={ip}"),
            _ => line.to_string(),
        };
        let mut read = self.conf.read_node_line(&line).map_err(from_dynamic)?;
        if read.len() != 1 {
            return Err(refused(
                ErrorCode::InvalidNodeName,
                "a node daemon registers exactly one node",
            ));
        }
        let (node, _) = read.remove(0);
        let Some(rank) = self.conf.node_index(&node.name) else {
            let (conf, ranks) = self
                .conf
                .with_created_nodes(&line, false)
                .map_err(from_dynamic)?;
            tracing::info!(node = %node.name, rank = ranks[0], "dynamic node created at registration");
            return Ok(self.adopt_created(conf, &ranks, now, out));
        };
        let known = &self.conf.nodes[rank];
        if !known.dynamic {
            // slurm.conf lists it: it registers as any listed node does.
            return Ok(vec![NodePlace {
                rank: rank as u32,
                line: node_line(known),
            }]);
        }
        let moved =
            (&known.addr, &known.hostname, known.port) != (&node.addr, &node.hostname, node.port);
        let future = known.state == ConfNodeState::Future;
        if moved || future {
            let mut conf = (*self.conf).clone();
            let kept = &mut conf.nodes[rank];
            kept.addr = node.addr.clone();
            kept.hostname = node.hostname.clone();
            kept.port = node.port;
            if future {
                kept.state = ConfNodeState::Unknown;
            }
            let line = node_line(kept);
            tracing::info!(node = %node.name, rank, addr = %node.addr, future, "dynamic node registers from a new address or leaves FUTURE");
            self.conf = Arc::new(conf);
            if let Some(st) = self.nodes.get_mut(rank) {
                st.future = false;
            }
            out.persist.push(Op::PutDynNode {
                offset: (rank - self.conf.fixed_nodes) as u32,
                line,
            });
            self.arm_node_deadline(rank as u32, now, out);
            out.effect(Effect::Reconfigured(self.conf.clone()));
        }
        Ok(vec![NodePlace {
            rank: rank as u32,
            line: node_line(&self.conf.nodes[rank]),
        }])
    }

    /// `scontrol delete nodename=<hostlist>`: as slurmctld does, each named node that is
    /// dynamic and unused goes; the others stay, named in one refusal
    /// (`failed to delete nodes ...`) with the last one's reason.
    pub(super) fn delete_nodes(&mut self, names: &str, caller: Caller, out: &mut Output) {
        let r = self.try_delete(names, caller, out);
        out.reply = Some(Reply::Done(r));
    }

    fn try_delete(
        &mut self,
        names: &str,
        caller: Caller,
        out: &mut Output,
    ) -> Result<(), ErrorReply> {
        self.check_admin(caller)?;
        let names = hostlist::expand(names).map_err(|e| {
            refused(
                ErrorCode::InvalidNodeName,
                format!("Invalid node name specified: {e}"),
            )
        })?;
        let mut conf = (*self.conf).clone();
        let mut gone = Vec::with_capacity(names.len());
        let (mut failed, mut code) = (Vec::new(), ErrorCode::InvalidNodeName);
        for name in &names {
            let deleted = conf.with_deleted_node(name);
            match deleted {
                Ok((_, rank)) if self.node_busy(rank) => {
                    tracing::warn!(node = %name, "node can't be deleted because it's still in use");
                    failed.push(name.clone());
                    code = ErrorCode::NodesBusy;
                }
                Ok((next, rank)) => {
                    conf = next;
                    gone.push((name.clone(), rank));
                }
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "node not deleted");
                    failed.push(name.clone());
                    code = from_dynamic(e).code;
                }
            }
        }
        for (name, rank) in &gone {
            let i = *rank as usize;
            out.persist
                .push(Op::DeleteDynNode((i - conf.fixed_nodes) as u32));
            out.persist.push(Op::NodeAdmin {
                name: name.clone(),
                state: None,
            });
            if let Some(slot) = self.slots.get_mut(i) {
                *slot = NodeSlot::for_node(&conf.nodes[i], None);
                slot.available = false;
            }
            if let Some(st) = self.nodes.get_mut(i) {
                // Reachability belongs to the rank's link, not to the node: the tree reports
                // only changes, so a node made here later starts from what the tree last said.
                *st = NodeStatus {
                    responding: st.responding,
                    ..blank_status(*rank, false)
                };
            }
            if let Some(d) = self.node_deadline.get_mut(i) {
                *d = None;
            }
            tracing::info!(node = %name, rank, "dynamic node deleted");
            // Its daemon, if still linked, would hold the rank the next node is given.
            out.effect(retire(*rank, name));
        }
        if !gone.is_empty() {
            self.set_conf(Arc::new(conf), out);
            // Nothing of power saving's may name a vacant rank.
            for (_, rank) in &gone {
                self.power.forget(*rank);
            }
            self.power_reconfigured();
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(refused(
                code,
                format!("failed to delete nodes {}", hostlist::compress(&failed)),
            ))
        }
    }

    /// Jobs running, suspended or completing on the node, or a reservation holding it.
    fn node_busy(&self, rank: u32) -> bool {
        let slot = self.slots.get(rank as usize);
        slot.is_some_and(|s| s.alloc_cpus > 0 || s.alloc_mem_mb > 0)
            || self
                .jobs
                .running()
                .any(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
            || self.resv.all.values().any(|r| r.ranks.contains(&rank))
    }

    fn check_admin(&self, caller: Caller) -> Result<(), ErrorReply> {
        authz::check(caller, Action::UpdateNode, None)
            .map_err(|d| refused(ErrorCode::PermissionDenied, d.0.to_string()))
    }

    /// Take `conf` with new nodes at `ranks`: their lines are persisted first, then the
    /// core's per-rank state grows (or a vacant rank is filled) and partitions follow.
    fn adopt_created(
        &mut self,
        conf: Config,
        ranks: &[u32],
        now: UnixTime,
        out: &mut Output,
    ) -> Vec<NodePlace> {
        let mut placed = Vec::with_capacity(ranks.len());
        for &rank in ranks {
            let i = rank as usize;
            let nc = &conf.nodes[i];
            let line = node_line(nc);
            out.persist.push(Op::PutDynNode {
                offset: (i - conf.fixed_nodes) as u32,
                line: line.clone(),
            });
            let slot = NodeSlot::for_node(nc, conf.node_gres(i));
            let st = blank_status(rank, nc.state == ConfNodeState::Future);
            if i < self.nodes.len() {
                self.slots[i] = slot;
                // A reused rank: whether its link is up is still the tree's last word (a
                // deleted node's daemon leaving and this one attaching may fold to no change).
                let responding = self.nodes[i].responding;
                self.nodes[i] = NodeStatus { responding, ..st };
                self.node_deadline[i] = None;
            } else {
                self.slots.push(slot);
                self.nodes.push(st);
                self.node_deadline.push(None);
            }
            placed.push(NodePlace { rank, line });
        }
        self.set_conf(Arc::new(conf), out);
        for &rank in ranks {
            // A CLOUD node starts powered down, as one listed in the file
            // does; its power state is stored with its admin state.
            let i = rank as usize;
            let cloud = self.conf.nodes.get(i).map(|n| n.state) == Some(ConfNodeState::Cloud);
            if let (true, Some(st)) = (cloud, self.nodes.get_mut(i)) {
                st.admin.power = Core::initial_power(ConfNodeState::Cloud, now);
                let state = rmp_serde::to_vec_named(&st.admin).ok();
                out.persist.push(Op::NodeAdmin {
                    name: self.conf.nodes[i].name.clone(),
                    state,
                });
                if let Some(slot) = self.slots.get_mut(i) {
                    slot.available = false;
                }
            }
            // One that never registers goes DOWN after SlurmdTimeout like any
            // node (a powered-down one has no daemon to wait for).
            self.arm_node_deadline(rank, now, out);
        }
        // Power saving watches the new nodes (or excludes them) as it would
        // after a restart.
        self.power_reconfigured();
        placed
    }

    /// A configuration with nodes added or removed: partitions follow it.
    fn set_conf(&mut self, conf: Arc<Config>, out: &mut Output) {
        let (part_ranks, node_parts) = partition_layout(&conf);
        self.part_ranks = part_ranks;
        self.node_parts = node_parts;
        self.conf = conf.clone();
        out.effect(Effect::Reconfigured(conf));
        out.effect(Effect::Reschedule);
    }
}

fn blank_status(rank: u32, future: bool) -> NodeStatus {
    NodeStatus {
        rank,
        registered: false,
        boot_id: 0,
        responding: false,
        admin: Default::default(),
        resources: None,
        boot_time: None,
        attached_to: None,
        future,
        invalid_reg: false,
        reg_addr: None,
    }
}

#[cfg(test)]
#[path = "dynamic_tests.rs"]
mod tests;
