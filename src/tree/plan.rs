//! Splitting a forwarded command's targets among the links a hop currently holds.
//!
//! A hop (the controller, or a relay) forwards each target through the deepest attached
//! descendant whose subtree contains it. Normally the attached set is the hop's natural children;
//! after a relay dies its children re-attach to the nearest live ancestor, so a hop may also hold
//! grandchildren, and an adopted node takes its own subtree even when its old parent comes back.
//! Targets with no attached route, and targets outside the hop's subtree, come back as
//! `unreachable` so the caller can answer them with an explicit failure at once.
//!
//! Subtrees are contiguous rank ranges that are either nested or disjoint, so one sweep over the
//! sorted attached heads with a stack of open ranges assigns every gap to its innermost head; the
//! cost is O(A log A + A log R + R) for A attached heads and R target ranges, independent of how
//! many ranks the targets hold. This module decides routes only; sending and timing are the
//! relay actor's job.

use std::ops::Range;

use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;

/// Where each target of a forwarded command goes from one hop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The hop itself is a target (never true for the controller).
    pub local: bool,
    /// For each attached descendant that has targets, the targets to send through it; ascending
    /// by rank, empty sets left out.
    pub via: Vec<(u32, RankSet)>,
    /// Targets with no attached route below the hop, or outside its subtree.
    pub unreachable: RankSet,
}

/// Splits `targets` as seen from `me` (`None` = the controller) holding links to `attached`.
///
/// Entries of `attached` that are not strictly below `me` are ignored, as are repeats.
pub fn split(topo: &Topology, me: Option<u32>, targets: &RankSet, attached: &[u32]) -> Split {
    let scope = topo.below(me);
    let local = me.is_some_and(|rank| topo.contains(rank) && targets.contains(rank));
    let mut outside = targets.difference(&RankSet::from_range(scope.clone()));
    if let Some(rank) = me.filter(|_| local) {
        outside.remove_range(rank..rank + 1);
    }

    let mut heads: Vec<u32> = attached
        .iter()
        .copied()
        .filter(|rank| scope.contains(rank))
        .collect();
    heads.sort_unstable();
    heads.dedup();

    let mut sweep = Sweep {
        targets,
        via: Vec::with_capacity(heads.len()),
        stranded: RankSet::new(),
        open: vec![Open {
            slot: None,
            end: scope.end,
            cursor: scope.start,
        }],
    };
    for head in heads {
        sweep.enter(head, topo.subtree(head).end);
    }
    sweep.close_past(None);

    let Sweep { via, stranded, .. } = sweep;
    Split {
        local,
        via: via.into_iter().filter(|(_, set)| !set.is_empty()).collect(),
        unreachable: outside.union(&stranded),
    }
}

/// Where a node whose parent died should try to attach, in order: the dead parent's ancestors,
/// nearest first, then the controller (`None`). A direct child of the controller gets just
/// `[None]`.
pub fn reattach_candidates(topo: &Topology, rank: u32) -> Vec<Option<u32>> {
    let ancestors = topo
        .parent(rank)
        .map(|p| topo.ancestors(p))
        .unwrap_or_default();
    ancestors.into_iter().map(Some).chain([None]).collect()
}

/// An attached head's subtree whose targets are still being assigned.
struct Open {
    /// Index into `Sweep::via`, or `None` for the hop itself (its gaps are unreachable).
    slot: Option<usize>,
    end: u32,
    /// Start of the part of this range not yet assigned to it or to a nested head.
    cursor: u32,
}

struct Sweep<'a> {
    targets: &'a RankSet,
    via: Vec<(u32, RankSet)>,
    stranded: RankSet,
    /// Nested open ranges, outermost (the hop's own scope) first; never empty.
    open: Vec<Open>,
}

impl Sweep<'_> {
    /// Opens `head`'s subtree `[head, end)`, which heads arrive in ascending order.
    fn enter(&mut self, head: u32, end: u32) {
        // The hop's own scope contains every head, so it stays open here.
        self.close_past(Some(head));
        if let Some(top) = self.open.last_mut() {
            let gap = top.cursor..head;
            top.cursor = end;
            let slot = top.slot;
            self.assign(slot, gap);
        }
        self.via.push((head, RankSet::new()));
        self.open.push(Open {
            slot: Some(self.via.len() - 1),
            end,
            cursor: head,
        });
    }

    /// Closes the open ranges that do not contain `rank` (all of them for `None`), handing each
    /// its unassigned tail.
    fn close_past(&mut self, rank: Option<u32>) {
        while let Some(top) = self.open.last() {
            if rank.is_some_and(|r| r < top.end) {
                return;
            }
            let (slot, rest) = (top.slot, top.cursor..top.end);
            self.open.pop();
            self.assign(slot, rest);
        }
    }

    fn assign(&mut self, slot: Option<usize>, range: Range<u32>) {
        let part = self.targets.intersect_range(range);
        match slot.and_then(|i| self.via.get_mut(i)) {
            Some((_, set)) => set.append(part),
            None => self.stranded.append(part),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::tree::test_rng::Lcg;

    /// Routes each target on its own by walking up from it: the first attached node met on the
    /// way to `me` carries it.
    fn naive(topo: &Topology, me: Option<u32>, targets: &RankSet, attached: &[u32]) -> Split {
        let attached: BTreeSet<u32> = attached.iter().copied().collect();
        let mut via: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        let mut out = Split::default();
        let mut unreachable = BTreeSet::new();
        for t in targets.iter() {
            if Some(t) == me && topo.contains(t) {
                out.local = true;
                continue;
            }
            let mut chain = vec![t];
            chain.extend(topo.ancestors(t));
            let below_me = match me {
                None => topo.contains(t),
                Some(m) => chain.contains(&m),
            };
            let carrier = chain
                .iter()
                .take_while(|&&r| Some(r) != me)
                .find(|r| attached.contains(r));
            match carrier {
                Some(&c) if below_me => {
                    via.entry(c).or_default().insert(t);
                }
                _ => {
                    unreachable.insert(t);
                }
            }
        }
        out.via = via
            .into_iter()
            .map(|(c, s)| (c, s.into_iter().collect()))
            .collect();
        out.unreachable = unreachable.into_iter().collect();
        out
    }

    fn random_targets(rng: &mut Lcg, n: u32) -> RankSet {
        let mut t = RankSet::new();
        for _ in 0..rng.below(8) {
            let lo = rng.below(n + 10);
            t.insert_range(lo..lo + rng.below(n / 3 + 2));
        }
        for _ in 0..rng.below(30) {
            t.insert(rng.below(n + 10));
        }
        t
    }

    fn random_attached(rng: &mut Lcg, topo: &Topology, me: Option<u32>) -> Vec<u32> {
        let mut attached: Vec<u32> = topo
            .children(me)
            .into_iter()
            .filter(|_| rng.chance(70))
            .collect();
        let below = topo.below(me);
        for _ in 0..rng.below(10) {
            if !below.is_empty() {
                attached.push(below.start + rng.below(below.end - below.start));
            }
        }
        // Junk a caller should never pass but must not break the split.
        if rng.chance(20) {
            attached.push(rng.below(topo.len() + 5));
        }
        if let Some(m) = me.filter(|_| rng.chance(20)) {
            attached.push(m);
        }
        attached
    }

    #[test]
    fn matches_per_rank_oracle_on_random_cases() {
        let mut rng = Lcg::new(42);
        for case in 0..3000 {
            let n = 1 + rng.below(400);
            let width = [2, 3, 4, 16][rng.below(4) as usize];
            let topo = Topology::new(n, width).unwrap();
            let me = if rng.chance(40) {
                None
            } else {
                Some(rng.below(n))
            };
            let targets = random_targets(&mut rng, n);
            let attached = random_attached(&mut rng, &topo, me);
            let got = split(&topo, me, &targets, &attached);
            let want = naive(&topo, me, &targets, &attached);
            assert_eq!(
                got, want,
                "case {case}: n={n} w={width} me={me:?} attached={attached:?}"
            );
        }
    }

    /// Every target lands in exactly one of local / via / unreachable.
    fn assert_partition(split: &Split, targets: &RankSet, me: Option<u32>) {
        let mut seen = split.unreachable.clone();
        if split.local {
            let me = me.unwrap();
            assert!(!seen.contains(me));
            seen.insert(me);
        }
        for (_, set) in &split.via {
            assert!(seen.is_disjoint(set), "a target was routed twice");
            seen = seen.union(set);
        }
        assert_eq!(&seen, targets);
    }

    #[test]
    fn adopted_grandchildren_take_their_own_subtrees() {
        let topo = Topology::new(40, 3).unwrap();
        // The controller's children are 0, 14, 27; relay 0 heads [0, 14) with children 1, 6, 10.
        assert_eq!(topo.children(None), vec![0, 14, 27]);
        assert_eq!(topo.children(Some(0)), vec![1, 6, 10]);
        let all = RankSet::from_range(0..40);

        // Relay 0 died; its children re-attached to the controller.
        let s = split(&topo, None, &all, &[14, 27, 1, 6, 10]);
        assert_partition(&s, &all, None);
        let heads: Vec<u32> = s.via.iter().map(|(h, _)| *h).collect();
        assert_eq!(heads, vec![1, 6, 10, 14, 27]);
        assert_eq!(s.via[0].1, RankSet::from_range(1..6));
        assert_eq!(
            s.unreachable,
            RankSet::from_range(0..1),
            "the dead relay itself"
        );

        // Relay 0 came back while its children stay adopted: it carries only itself.
        let s = split(&topo, None, &all, &[0, 14, 27, 1, 6, 10]);
        assert_partition(&s, &all, None);
        assert_eq!(s.via[0], (0, RankSet::from_range(0..1)));
        assert!(s.unreachable.is_empty());
    }

    #[test]
    fn relay_keeps_itself_and_rejects_targets_outside_its_subtree() {
        let topo = Topology::new(40, 3).unwrap();
        let targets = RankSet::from_ranks([0, 3, 7, 14, 39]);
        let s = split(&topo, Some(0), &targets, &[1, 6, 10]);
        assert_partition(&s, &targets, Some(0));
        assert!(s.local);
        assert_eq!(
            s.via,
            vec![(1, RankSet::from_ranks([3])), (6, RankSet::from_ranks([7]))]
        );
        assert_eq!(s.unreachable, RankSet::from_ranks([14, 39]));

        let s = split(&topo, Some(0), &RankSet::from_ranks([7]), &[1, 6, 10]);
        assert!(!s.local);
    }

    #[test]
    fn nothing_attached_means_everything_unreachable() {
        let topo = Topology::new(100, 16).unwrap();
        let targets = RankSet::from_range(0..100);
        let s = split(&topo, None, &targets, &[]);
        assert_eq!(
            s,
            Split {
                local: false,
                via: vec![],
                unreachable: targets
            }
        );
        assert_eq!(
            split(&topo, None, &RankSet::new(), &[0, 7]),
            Split::default()
        );
    }

    #[test]
    fn fifty_thousand_scattered_targets_partition_exactly() {
        let topo = Topology::new(50_000, 32).unwrap();
        let targets = RankSet::from_ranks((0..50_000).filter(|r| r % 3 != 1));
        let mut attached = topo.children(None);
        attached.retain(|&c| c != topo.children(None)[5]);
        attached.extend(topo.children(Some(topo.children(None)[5])));
        let s = split(&topo, None, &targets, &attached);
        assert_partition(&s, &targets, None);
        assert_eq!(s.via.len(), 31 + 32);
        assert_eq!(s.unreachable.len(), 1);
    }

    #[test]
    fn reattach_goes_up_the_dead_parents_ancestors_then_to_the_controller() {
        let topo = Topology::new(1000, 2).unwrap();
        let deep = 999;
        let parent = topo.parent(deep).unwrap();
        let want: Vec<Option<u32>> = topo
            .ancestors(parent)
            .into_iter()
            .map(Some)
            .chain([None])
            .collect();
        let got = reattach_candidates(&topo, deep);
        assert_eq!(got, want);
        assert_eq!(got.len() as u32, topo.depth(deep) - 1);
        assert_eq!(got.first(), Some(&topo.parent(parent)));
        assert_eq!(reattach_candidates(&topo, 0), vec![None]);
        let child_of_top = topo.children(Some(0))[0];
        assert_eq!(reattach_candidates(&topo, child_of_top), vec![None]);
    }
}
