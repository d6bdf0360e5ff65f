//! Which ranks are reachable through one hop, reported upward by change.
//!
//! Each hop keeps, per direct link, the set of ranks that link's peer says it can reach, plus its
//! own rank when it is a relay. The union is the hop's live set. Upward it sends only the net
//! change since its last report (flux's overlay does the same), so a quiet cluster costs nothing
//! and a lost link costs one message however many ranks sat behind it. Losing a link drops that
//! link's whole set in O(#ranges); an adopted grandchild simply becomes one more link.
//!
//! This module owns the bookkeeping only: it does not decide when a link is lost (the link actor
//! does, from traffic and heartbeats), nor log transitions, nor convert to the wire type
//! `HealthDelta`, whose two fields match [`Delta`]'s.

use std::collections::BTreeMap;

use crate::tree::rankset::RankSet;

/// A change in a live set: ranks that became reachable and ranks that stopped being reachable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    pub added: RankSet,
    pub removed: RankSet,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// Liveness of everything reachable through one hop.
#[derive(Debug, Clone, Default)]
pub struct SubtreeHealth {
    own: Option<u32>,
    /// Per direct link (keyed by the peer's rank): the ranks reachable through it, always
    /// including the peer itself.
    links: BTreeMap<u32, RankSet>,
    /// The live set as last reported upward.
    reported: RankSet,
    /// Whether anything was touched since the last report; lets a quiet hop skip the diff.
    touched: bool,
}

impl SubtreeHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks this hop's own rank live (a relay; the controller has none).
    pub fn set_self(&mut self, rank: u32) {
        self.own = Some(rank);
        self.touched = true;
    }

    /// A direct link to `child` came up. The link starts out carrying just `child`; its peer's
    /// full report fills in the rest, so nothing stale survives from an earlier link.
    pub fn attach(&mut self, child: u32) {
        self.links.insert(child, RankSet::from_ranks([child]));
        self.touched = true;
    }

    /// The link to `child` was lost: everything reachable only through it is gone at once.
    /// Returns what the link carried, or `None` if there was no such link.
    pub fn detach(&mut self, child: u32) -> Option<RankSet> {
        let carried = self.links.remove(&child)?;
        self.touched = true;
        Some(carried)
    }

    /// Folds in `child`'s report about its subtree. The child itself stays live whatever the
    /// report says, since its link is up. Returns `false`, changing nothing, when there is no
    /// link to `child` (a report that raced with the link's loss).
    pub fn apply(&mut self, child: u32, delta: &Delta) -> bool {
        let Some(carried) = self.links.get_mut(&child) else {
            return false;
        };
        let mut next = carried.union(&delta.added).difference(&delta.removed);
        next.insert(child);
        *carried = next;
        self.touched = true;
        true
    }

    /// Peers of the links currently up, ascending.
    pub fn attached(&self) -> impl Iterator<Item = u32> + '_ {
        self.links.keys().copied()
    }

    /// Every rank reachable through this hop, itself included.
    pub fn live(&self) -> RankSet {
        let own = self
            .own
            .map(|r| RankSet::from_ranks([r]))
            .unwrap_or_default();
        self.links
            .values()
            .fold(own, |all, carried| all.union(carried))
    }

    /// The net change since the last report, or `None` when there is none to send.
    pub fn take_delta(&mut self) -> Option<Delta> {
        if !self.touched {
            return None;
        }
        self.touched = false;
        let live = self.live();
        let delta = Delta {
            added: live.difference(&self.reported),
            removed: self.reported.difference(&live),
        };
        self.reported = live;
        (!delta.is_empty()).then_some(delta)
    }

    /// The whole live set as an `added` delta, for a freshly (re)attached upward link whose
    /// parent knows nothing yet; later deltas are relative to it.
    pub fn full_report(&mut self) -> Delta {
        self.touched = false;
        self.reported = self.live();
        Delta {
            added: self.reported.clone(),
            removed: RankSet::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::topology::Topology;

    fn set(range: std::ops::Range<u32>) -> RankSet {
        RankSet::from_range(range)
    }

    fn added(ranks: RankSet) -> Delta {
        Delta {
            added: ranks,
            removed: RankSet::new(),
        }
    }

    #[test]
    fn nothing_changed_means_no_delta() {
        let mut h = SubtreeHealth::new();
        assert_eq!(h.take_delta(), None);
        h.attach(3);
        assert_eq!(h.take_delta(), Some(added(RankSet::from_ranks([3]))));
        assert_eq!(h.take_delta(), None);
        h.attach(3);
        assert_eq!(
            h.take_delta(),
            None,
            "re-attaching an attached leaf changes nothing"
        );
        assert!(h.apply(3, &added(RankSet::from_ranks([3]))));
        assert_eq!(
            h.take_delta(),
            None,
            "a report repeating what we know changes nothing"
        );
    }

    #[test]
    fn detach_drops_everything_behind_the_link_at_once() {
        let mut h = SubtreeHealth::new();
        h.set_self(0);
        h.attach(1);
        h.attach(6);
        assert!(h.apply(1, &added(set(1..6))));
        assert!(h.apply(6, &added(set(6..10))));
        assert_eq!(h.take_delta(), Some(added(set(0..10))));
        assert_eq!(h.detach(1), Some(set(1..6)));
        assert_eq!(h.live(), RankSet::from_ranks([0, 6, 7, 8, 9]));
        assert_eq!(
            h.take_delta(),
            Some(Delta {
                added: RankSet::new(),
                removed: set(1..6)
            })
        );
        assert_eq!(h.detach(1), None, "second detach is a no-op");
        assert_eq!(h.take_delta(), None);
        assert_eq!(h.attached().collect::<Vec<_>>(), vec![6]);
    }

    #[test]
    fn child_reports_add_and_remove_but_never_the_child_itself() {
        let mut h = SubtreeHealth::new();
        h.attach(10);
        h.apply(10, &added(set(10..20)));
        h.take_delta();
        let report = Delta {
            added: RankSet::new(),
            removed: RankSet::from_ranks([10, 12, 13]),
        };
        assert!(h.apply(10, &report));
        assert_eq!(
            h.take_delta(),
            Some(Delta {
                added: RankSet::new(),
                removed: set(12..14)
            })
        );
        assert!(h.live().contains(10), "a child with a live link is live");
    }

    #[test]
    fn report_from_an_unattached_child_is_ignored() {
        let mut h = SubtreeHealth::new();
        assert!(!h.apply(5, &added(set(5..9))));
        assert!(h.live().is_empty());
        assert_eq!(h.take_delta(), None);
    }

    #[test]
    fn reattach_forgets_what_the_old_link_carried() {
        let mut h = SubtreeHealth::new();
        h.attach(1);
        h.apply(1, &added(set(1..6)));
        h.take_delta();
        // The link flaps; the new report no longer mentions 4 and 5, which died meanwhile.
        h.attach(1);
        h.apply(1, &added(set(1..4)));
        assert_eq!(
            h.take_delta(),
            Some(Delta {
                added: RankSet::new(),
                removed: set(4..6)
            })
        );
    }

    #[test]
    fn dead_relay_whose_children_reattach_shows_only_itself_removed() {
        let topo = Topology::new(40, 3).unwrap();
        let mut controller = SubtreeHealth::new();
        for child in topo.children(None) {
            controller.attach(child);
            controller.apply(child, &added(RankSet::from_range(topo.subtree(child))));
        }
        assert_eq!(controller.take_delta(), Some(added(set(0..40))));

        // Relay 0 dies; its children 1, 6, 10 re-attach to the controller within the interval.
        assert_eq!(controller.detach(0), Some(set(0..14)));
        for orphan in topo.children(Some(0)) {
            controller.attach(orphan);
            controller.apply(orphan, &added(RankSet::from_range(topo.subtree(orphan))));
        }
        assert_eq!(
            controller.take_delta(),
            Some(Delta {
                added: RankSet::new(),
                removed: RankSet::from_ranks([0])
            })
        );

        // Relay 0 returns while its children stay adopted: only 0 comes back.
        controller.attach(0);
        controller.apply(0, &added(RankSet::from_ranks([0])));
        assert_eq!(
            controller.take_delta(),
            Some(added(RankSet::from_ranks([0])))
        );

        // A child moves back under 0: the overlap during the move never shows as a removal.
        controller.apply(0, &added(set(1..6)));
        controller.detach(1);
        assert_eq!(controller.take_delta(), None);
        assert_eq!(controller.live(), set(0..40));
    }

    #[test]
    fn relay_adopting_a_grandchild_reports_no_loss() {
        let topo = Topology::new(40, 3).unwrap();
        let mut relay = SubtreeHealth::new();
        relay.set_self(0);
        for child in topo.children(Some(0)) {
            relay.attach(child);
            relay.apply(child, &added(RankSet::from_range(topo.subtree(child))));
        }
        let first = relay.full_report();
        assert_eq!(first, added(set(0..14)));
        assert_eq!(
            relay.take_delta(),
            None,
            "the full report is the new baseline"
        );

        // Child 1 ([1, 6)) dies; its children re-attach to relay 0.
        relay.detach(1);
        for grandchild in topo.children(Some(1)) {
            relay.attach(grandchild);
            relay.apply(
                grandchild,
                &added(RankSet::from_range(topo.subtree(grandchild))),
            );
        }
        let delta = relay.take_delta().unwrap();
        assert_eq!(delta.removed, RankSet::from_ranks([1]));
        assert!(delta.added.is_empty());
    }

    #[test]
    fn full_report_after_reattaching_upward_covers_everything() {
        let mut h = SubtreeHealth::new();
        h.set_self(7);
        h.attach(8);
        h.apply(8, &added(set(8..12)));
        h.take_delta();
        h.detach(8);
        let full = h.full_report();
        assert_eq!(full, added(RankSet::from_ranks([7])));
        assert!(full.removed.is_empty());
        assert_eq!(h.take_delta(), None);
        assert!(!full.is_empty());
        assert!(Delta::default().is_empty());
    }
}
