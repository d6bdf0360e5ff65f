//! What the operator console needs from the core: the events a node's change makes (as
//! [`Effect::Event`]s for the shell to record in `canopy events`' log), and every node's facts
//! for `canopy tree`. Pure like the rest of the core: the events carry no time (the shell
//! stamps them), and the facts are read from state the core keeps anyway.

use super::command::{Effect, Output};
use super::core::Core;
use crate::console::events::{Event, EventKind};
use crate::console::tree::NodeFacts;
use crate::model::node::{AdminState, PowerState};

/// A node's status before a change, for [`Core::node_change_events`].
pub(super) struct Before {
    pub admin: AdminState,
    pub responding: bool,
    pub registered: bool,
    pub attached_to: Option<u32>,
}

impl Core {
    /// The events one node's change makes, from what it was to what it is now.
    pub(super) fn node_change_events(&self, rank: u32, was: &Before, out: &mut Output) {
        let Some(st) = self.nodes.get(rank as usize) else {
            return;
        };
        let name = self.node_name(rank);
        let mut ev = |kind, detail: String| {
            out.effect(Effect::Event(Event::new(kind, name, detail)));
        };
        match (&was.admin.down, &st.admin.down) {
            (None, Some(r)) => ev(EventKind::NodeDown, r.text.clone()),
            (Some(_), None) => ev(EventKind::NodeResume, "no longer down".into()),
            _ => {}
        }
        match (&was.admin.drain, &st.admin.drain) {
            (None, Some(r)) => ev(EventKind::NodeDrain, r.text.clone()),
            (Some(_), None) => ev(EventKind::NodeResume, "no longer drained".into()),
            _ => {}
        }
        match (was.responding, st.responding) {
            (false, true) => ev(EventKind::NodeUp, "reachable".into()),
            (true, false) => ev(EventKind::NodeUnreachable, "link lost".into()),
            _ => {}
        }
        // A node registering again under another relay (its own or its parent's link moved);
        // a first registration is no re-attachment.
        if was.registered && st.registered && was.attached_to != st.attached_to {
            let under = st
                .attached_to
                .map(|p| self.node_name(p).to_string())
                .unwrap_or_else(|| "controller".into());
            ev(EventKind::RelayReattach, format!("now under {under}"));
        }
    }

    /// Every rank's facts for `canopy tree` (`facts[rank]`).
    pub fn tree_facts(&self) -> Vec<NodeFacts> {
        let timeout = i64::try_from(self.conf.slurmd_timeout_s).unwrap_or(i64::MAX);
        self.conf
            .nodes
            .iter()
            .enumerate()
            .map(|(rank, c)| {
                let (Some(st), Some(slot)) = (self.nodes.get(rank), self.slots.get(rank)) else {
                    return NodeFacts {
                        name: c.name.clone(),
                        vacant: true,
                        ..Default::default()
                    };
                };
                let power = st.power_state();
                NodeFacts {
                    name: c.name.clone(),
                    vacant: c.vacant,
                    future: st.future,
                    down: st.admin.down.as_ref().map(|r| (r.text.clone(), r.time)),
                    drain: st.admin.drain.as_ref().map(|r| (r.text.clone(), r.time)),
                    registered: st.registered,
                    responding: st.responding,
                    powered: power == PowerState::On || power == PowerState::PoweringUp,
                    powered_down: matches!(
                        power,
                        PowerState::PoweredDown | PowerState::PoweringDown
                    ),
                    cpus: slot.cpus,
                    alloc_cpus: slot.alloc_cpus,
                    // The not-responding deadline was armed SlurmdTimeout after the loss.
                    lost_since: self
                        .node_deadline
                        .get(rank)
                        .copied()
                        .flatten()
                        .map(|at| at - timeout),
                    attached_to: st.attached_to,
                }
            })
            .collect()
    }
}
