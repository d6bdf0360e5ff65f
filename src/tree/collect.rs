//! Collecting exactly one outcome per target of a forwarded command, and the deadlines that make
//! a whole tree answer in time.
//!
//! A [`Collector`] is the bookkeeping one hop keeps for one forwarded command: which targets have
//! an outcome, which are outstanding, and the outcomes grouped so that 10,000 identical
//! acknowledgements travel upward as one `(RankSet, result)` pair. Late, repeated or foreign
//! outcomes are counted and dropped, never double-counted; a lost child link and the deadline turn
//! outstanding targets into explicit failures. It takes `now` as an argument and never reads a
//! clock; arming timers and sending the result upward is the actor's job.
//!
//! Grouping compares results with `PartialEq` against each distinct result seen so far, so it is
//! meant for replies that are mostly alike (acks, a few error kinds); a command whose every node
//! answers differently costs O(outcomes × distinct results), unless the hop gives the collector
//! a key for its results ([`Collector::with_key`]: `canopy exec`'s outputs), which makes the
//! search a hash lookup.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::tree::rankset::RankSet;

/// The failure recorded for targets still outstanding at the deadline.
pub const TIMED_OUT: &str = "timed out";
/// The failure recorded for targets still outstanding when a collector is finished early.
pub const NO_REPLY: &str = "no reply before the collection was closed";
/// The most a hop holds back from its children's budget to relay their answers upward.
pub const HOP_MARGIN: Duration = Duration::from_millis(250);

/// Outcomes of one forwarded command, one per target.
#[derive(Debug, Clone)]
pub struct Collector<R> {
    targets: RankSet,
    outstanding: RankSet,
    deadline: Instant,
    /// Distinct results, each with the ranks that produced it; the sets are pairwise disjoint.
    outcomes: Vec<(RankSet, Result<R, String>)>,
    duplicates: u64,
    strays: u64,
    /// A hash of a result, where the command's results have one, and the outcomes with
    /// each hash: equal results have equal keys, so only those are compared.
    index: Option<KeyIndex<R>>,
}

/// A result's key for [`Collector::with_key`] (`None`: compared the slow way).
pub type KeyFn<R> = fn(&Result<R, String>) -> Option<u64>;

/// The key function and the outcomes (their indices) under each key.
type KeyIndex<R> = (KeyFn<R>, HashMap<u64, Vec<usize>>);

impl<R: Clone + PartialEq> Collector<R> {
    pub fn new(targets: RankSet, deadline: Instant) -> Self {
        Collector {
            outstanding: targets.clone(),
            targets,
            deadline,
            outcomes: Vec::new(),
            duplicates: 0,
            strays: 0,
            index: None,
        }
    }

    /// Group results by `key` first: equal results must have equal keys. For commands
    /// whose every node may answer differently (`canopy exec`'s outputs).
    pub fn with_key(mut self, key: KeyFn<R>) -> Self {
        self.index = Some((key, HashMap::new()));
        self
    }

    /// Records `result` for the outstanding ranks among `ranks`. Ranks that already have an
    /// outcome count as duplicates, ranks that were never targets as strays; neither changes
    /// any outcome.
    pub fn record(&mut self, ranks: &RankSet, result: Result<R, String>) {
        let fresh = ranks.intersection(&self.outstanding);
        let known = ranks.intersection(&self.targets).len();
        self.duplicates += known - fresh.len();
        self.strays += ranks.len() - known;
        self.settle(fresh, result);
    }

    /// As [`Collector::record`], for a result known to differ from every other (a probe's
    /// stamps name its target): it opens its own group without searching for an equal one, so a
    /// node set's distinct answers cost O(outcomes) rather than O(outcomes²).
    pub fn record_distinct(&mut self, ranks: &RankSet, result: Result<R, String>) {
        let fresh = ranks.intersection(&self.outstanding);
        let known = ranks.intersection(&self.targets).len();
        self.duplicates += known - fresh.len();
        self.strays += ranks.len() - known;
        if fresh.is_empty() {
            return;
        }
        self.outstanding = self.outstanding.difference(&fresh);
        self.outcomes.push((fresh, result));
    }

    /// Fails whichever of `ranks` are still outstanding (say, those sent through a child link
    /// that was just lost) and returns them. Ranks with an outcome already keep it, and are not
    /// counted as duplicates: failing a whole branch is not a repeated answer.
    pub fn fail(&mut self, ranks: &RankSet, reason: impl Into<String>) -> RankSet {
        let fresh = ranks.intersection(&self.outstanding);
        self.settle(fresh.clone(), Err(reason.into()));
        fresh
    }

    /// Once `now` has reached the deadline, fails every outstanding target with [`TIMED_OUT`]
    /// and returns them; before it, does nothing and returns an empty set.
    pub fn expire(&mut self, now: Instant) -> RankSet {
        if now < self.deadline {
            return RankSet::new();
        }
        let late = std::mem::take(&mut self.outstanding);
        self.settle(late.clone(), Err(TIMED_OUT.to_string()));
        late
    }

    pub fn is_complete(&self) -> bool {
        self.outstanding.is_empty()
    }

    pub fn outstanding(&self) -> RankSet {
        self.outstanding.clone()
    }

    pub fn targets(&self) -> &RankSet {
        &self.targets
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Ranks answered again after they already had an outcome.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Ranks answered that were never targets.
    pub fn strays(&self) -> u64 {
        self.strays
    }

    /// The outcomes grouped by identical result, in order of first appearance; together the
    /// sets are exactly the targets. Anything still outstanding fails with [`NO_REPLY`].
    pub fn finish(mut self) -> Vec<(RankSet, Result<R, String>)> {
        let left = std::mem::take(&mut self.outstanding);
        self.settle(left, Err(NO_REPLY.to_string()));
        self.outcomes
    }

    /// Gives `ranks` (all outstanding) the outcome `result`.
    fn settle(&mut self, ranks: RankSet, result: Result<R, String>) {
        if ranks.is_empty() {
            return;
        }
        self.outstanding = self.outstanding.difference(&ranks);
        let key = self.index.as_ref().and_then(|(f, _)| f(&result));
        if let (Some(k), Some((_, map))) = (key, self.index.as_mut()) {
            let same = map.entry(k).or_default();
            let outcomes = &mut self.outcomes;
            match same.iter().copied().find(|&i| outcomes[i].1 == result) {
                Some(i) => outcomes[i].0 = outcomes[i].0.union(&ranks),
                None => {
                    same.push(outcomes.len());
                    outcomes.push((ranks, result));
                }
            }
            return;
        }
        match self.outcomes.iter_mut().find(|(_, r)| *r == result) {
            Some((set, _)) => *set = set.union(&ranks),
            None => self.outcomes.push((ranks, result)),
        }
    }
}

/// The time a hop gives its children, out of the `parent_budget` it has to answer its own
/// parent, when `depth_below` levels of nodes hang below it.
///
/// The hop keeps back a margin for relaying the answers upward:
/// `margin = min(HOP_MARGIN, parent_budget / (2 · (depth_below + 1)))`, and the children get
/// `parent_budget − margin`. Starting from [`root_budget`]`(base, max_depth)` with
/// `base ≥ (max_depth + 2) · HOP_MARGIN`, every hop keeps exactly `HOP_MARGIN` and the leaves get
/// the whole `base`. With shorter budgets (tests, impatient clients) each hop keeps a share that
/// shrinks with the depth still to go, so its children always get at least half of its budget.
pub fn child_budget(parent_budget: Duration, depth_below: u32) -> Duration {
    let hops_left = depth_below.saturating_add(1);
    let share = parent_budget / hops_left.saturating_mul(2);
    parent_budget - share.min(HOP_MARGIN)
}

/// The budget the controller starts a command with: `base` for the leaves' own work, plus
/// `HOP_MARGIN` for every level a reply has to climb through (`max_depth` levels).
pub fn root_budget(base: Duration, max_depth: u32) -> Duration {
    base.saturating_add(HOP_MARGIN.saturating_mul(max_depth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::topology::Topology;

    fn set(ranks: std::ops::Range<u32>) -> RankSet {
        RankSet::from_range(ranks)
    }

    fn start() -> (Instant, Collector<u8>) {
        let now = Instant::now();
        (
            now,
            Collector::new(set(0..10), now + Duration::from_secs(5)),
        )
    }

    #[test]
    fn records_each_target_once_and_counts_repeats_and_strays() {
        let (_, mut c) = start();
        c.record(&set(0..4), Ok(1));
        assert_eq!(c.outstanding(), set(4..10));
        c.record(&set(2..6), Ok(2));
        assert_eq!(c.duplicates(), 2, "ranks 2 and 3 were already answered");
        c.record(&set(8..14), Err("boom".into()));
        assert_eq!(c.strays(), 4, "ranks 10..14 were never targets");
        assert_eq!(c.duplicates(), 2);
        assert!(!c.is_complete());
        c.record(&set(6..8), Ok(1));
        assert!(c.is_complete());
        assert_eq!(c.targets(), &set(0..10));
        let out = c.finish();
        assert_eq!(
            out,
            vec![
                (RankSet::from_ranks([0, 1, 2, 3, 6, 7]), Ok(1)),
                (set(4..6), Ok(2)),
                (set(8..10), Err("boom".to_string())),
            ]
        );
    }

    #[test]
    fn distinct_results_open_their_own_groups_and_still_count_once() {
        let (_, mut c) = start();
        c.record_distinct(&set(0..2), Ok(1));
        c.record_distinct(&set(2..3), Ok(1));
        c.record_distinct(&set(1..4), Ok(9));
        assert_eq!(c.duplicates(), 2, "ranks 1 and 2 were already answered");
        c.record_distinct(&set(9..12), Ok(3));
        assert_eq!(c.strays(), 2);
        c.record(&set(4..9), Err("gone".into()));
        assert!(c.is_complete());
        assert_eq!(
            c.finish(),
            vec![
                (set(0..2), Ok(1)),
                (set(2..3), Ok(1)),
                (set(3..4), Ok(9)),
                (set(9..10), Ok(3)),
                (set(4..9), Err("gone".to_string())),
            ]
        );
    }

    #[test]
    fn fail_settles_only_outstanding_ranks_without_counting_duplicates() {
        let (_, mut c) = start();
        c.record(&set(0..3), Ok(7));
        let failed = c.fail(&set(0..5), "link to 0 lost");
        assert_eq!(failed, set(3..5));
        assert_eq!(c.duplicates(), 0);
        assert_eq!(c.outstanding(), set(5..10));
        assert!(c.fail(&set(20..30), "not ours").is_empty());
        assert_eq!(c.strays(), 0);
        let out = c.finish();
        assert_eq!(out[1], (set(3..5), Err("link to 0 lost".to_string())));
    }

    #[test]
    fn expire_fails_outstanding_only_at_or_after_the_deadline() {
        let (now, mut c) = start();
        c.record(&set(0..5), Ok(0));
        assert!(c.expire(now + Duration::from_secs(4)).is_empty());
        assert_eq!(c.outstanding(), set(5..10));
        let late = c.expire(c.deadline());
        assert_eq!(late, set(5..10));
        assert!(c.is_complete());
        assert!(
            c.expire(now + Duration::from_secs(60)).is_empty(),
            "nothing left to expire"
        );
        c.record(&set(5..10), Ok(0));
        assert_eq!(
            c.duplicates(),
            5,
            "a reply after the timeout does not overturn it"
        );
        let out = c.finish();
        assert_eq!(
            out,
            vec![(set(0..5), Ok(0)), (set(5..10), Err(TIMED_OUT.to_string()))]
        );
    }

    #[test]
    fn finish_fails_whatever_is_still_outstanding() {
        let (_, mut c) = start();
        c.record(&set(0..9), Ok(3));
        let out = c.finish();
        assert_eq!(
            out,
            vec![(set(0..9), Ok(3)), (set(9..10), Err(NO_REPLY.to_string()))]
        );
    }

    #[test]
    fn identical_results_from_ten_thousand_nodes_group_into_one_entry() {
        let now = Instant::now();
        let mut c: Collector<String> = Collector::new(set(0..10_000), now);
        for rank in (0..10_000).rev() {
            c.record(&RankSet::from_ranks([rank]), Ok("done".to_string()));
        }
        assert_eq!(c.finish(), vec![(set(0..10_000), Ok("done".to_string()))]);
    }

    #[test]
    fn empty_target_set_is_complete_at_once() {
        let c: Collector<u8> = Collector::new(RankSet::new(), Instant::now());
        assert!(c.is_complete());
        assert!(c.finish().is_empty());
    }

    #[test]
    fn root_budget_adds_a_margin_per_level() {
        let base = Duration::from_secs(10);
        assert_eq!(root_budget(base, 0), base);
        assert_eq!(root_budget(base, 3), base + HOP_MARGIN * 3);
        assert_eq!(root_budget(Duration::MAX, 3), Duration::MAX);
    }

    #[test]
    fn generous_budgets_hand_the_leaves_exactly_the_base() {
        for (n, width) in [(10_000, 16), (50_000, 2), (5, 2)] {
            let topo = Topology::new(n, width).unwrap();
            let depth = topo.max_depth();
            let base = HOP_MARGIN * (depth + 2);
            let mut budget = root_budget(base, depth);
            // Follow the deepest path: the controller, then relays with ever fewer levels below.
            for below in (1..=depth).rev() {
                let next = child_budget(budget, below);
                assert_eq!(
                    budget - next,
                    HOP_MARGIN,
                    "n={n} w={width} level with {below} below"
                );
                budget = next;
            }
            assert_eq!(budget, base);
        }
    }

    #[test]
    fn short_budgets_shrink_gently_and_always_leave_time_to_answer() {
        for ms in [1u64, 10, 100, 999, 5000] {
            for below in [1u32, 2, 5, 31] {
                let parent = Duration::from_millis(ms);
                let child = child_budget(parent, below);
                assert!(
                    child < parent,
                    "{ms}ms, {below} below: no time kept to answer"
                );
                assert!(
                    child >= parent / 2,
                    "{ms}ms, {below} below: gave away too much"
                );
                assert!(parent - child <= HOP_MARGIN);
            }
        }
        assert_eq!(child_budget(Duration::ZERO, 3), Duration::ZERO);
        // An absurd depth must not overflow the arithmetic.
        assert!(child_budget(Duration::from_secs(1), u32::MAX) <= Duration::from_secs(1));
    }

    /// Grouping by key gives exactly the groups, in the same order, that the search through
    /// every distinct result gives, whatever mix of keyed and unkeyed results arrives.
    #[test]
    fn keyed_grouping_matches_the_plain_search_seeded() {
        let seed = std::env::var("CANOPY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(17);
        println!("seed {seed}");
        let mut rng = crate::tree::test_rng::Lcg::new(seed);
        // Odd results have no key; collisions are forced by a key of value % 7.
        fn key(r: &Result<u32, String>) -> Option<u64> {
            match r {
                Ok(v) if v % 2 == 0 => Some(u64::from(v % 7)),
                _ => None,
            }
        }
        for _ in 0..50 {
            let n = 1 + rng.below(300);
            let now = Instant::now();
            let mut plain = Collector::<u32>::new(set(0..n), now);
            let mut keyed = Collector::<u32>::new(set(0..n), now).with_key(key);
            for r in 0..n {
                let result = match rng.below(10) {
                    0 => Err(format!("e{}", rng.below(3))),
                    _ => Ok(rng.below(40)),
                };
                let one = RankSet::from_ranks([r]);
                plain.record(&one, result.clone());
                keyed.record(&one, result);
            }
            assert_eq!(keyed.finish(), plain.finish(), "seed {seed}");
        }
    }
}
