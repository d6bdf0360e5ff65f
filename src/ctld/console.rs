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
            // Folded by where it went and where it belongs: the children of one dead relay
            // moving to their grandparent are one line, and so are nodes coming home.
            let (fixed, capacity) = self.conf.tree_ranks();
            let natural = crate::tree::topology::Topology::with_dynamic(
                fixed,
                capacity,
                self.conf.tree_width.max(2),
            )
            .ok()
            .and_then(|t| t.parent(rank));
            let name_of = |r: Option<u32>| {
                r.map(|p| self.node_name(p).to_string())
                    .unwrap_or_else(|| "the controller".into())
            };
            let detail = if st.attached_to == natural {
                "back under its natural parent".to_string()
            } else {
                format!(
                    "now under {}, not its natural parent {}",
                    name_of(st.attached_to),
                    name_of(natural)
                )
            };
            ev(EventKind::RelayReattach, detail);
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::console::events::{Event, EventKind};
    use crate::console::tree::{classify, ProblemKind};
    use crate::ctld::fixtures::{hello, reach, register};
    use crate::ctld::{Command, Core, Effect, Output};

    fn core() -> Core {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=60\nTreeWidth=2\n\
                    NodeName=n[1-4] CPUs=2\nPartitionName=p Nodes=ALL\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        Core::recover(Arc::new(conf), Vec::new(), None, &HashMap::new(), 1000).0
    }

    fn events(out: &Output) -> Vec<(EventKind, String, String)> {
        out.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Event(Event {
                    kind,
                    subject,
                    detail,
                }) => Some((*kind, subject.clone(), detail.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn node_changes_make_events_and_tree_facts_follow() {
        let mut c = core();
        register(&mut c, 0, 1000);
        let out = reach(&mut c, 0, true, 1000);
        assert_eq!(
            events(&out),
            vec![(EventKind::NodeUp, "n1".into(), "reachable".into())]
        );
        let out = reach(&mut c, 0, false, 1010);
        assert_eq!(
            events(&out),
            vec![(EventKind::NodeUnreachable, "n1".into(), "link lost".into())]
        );
        let facts = c.tree_facts();
        assert_eq!(
            facts[0].lost_since,
            Some(1010),
            "SlurmdTimeout before the deadline"
        );
        let cl = classify(&facts[0]);
        assert_eq!(cl.state, "idle*");
        assert_eq!(cl.problem.map(|p| p.0), Some(ProblemKind::LinkLost));
        // Not responding past SlurmdTimeout: DOWN.
        let out = c.apply(1070, Command::Schedule);
        assert!(
            events(&out).contains(&(EventKind::NodeDown, "n1".into(), "Not responding".into())),
            "{:?}",
            events(&out)
        );
        assert_eq!(classify(&c.tree_facts()[0]).state, "down*");

        // n2 (rank 1, under n1 naturally) registers again under the controller: re-attached.
        c.apply(
            1000,
            Command::NodeRegistered {
                hello: Box::new(hello(1, &[])),
                via: Some(0),
            },
        );
        reach(&mut c, 1, true, 1000);
        let out = c.apply(
            1080,
            Command::NodeRegistered {
                hello: Box::new(hello(1, &[])),
                via: None,
            },
        );
        assert!(
            events(&out).contains(&(
                EventKind::RelayReattach,
                "n2".into(),
                "now under the controller, not its natural parent n1".into()
            )),
            "{:?}",
            events(&out)
        );
    }
}
