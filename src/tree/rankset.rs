//! `RankSet`: a set of node ranks stored as sorted, disjoint, non-adjacent half-open ranges.
//!
//! Ranks travel in every forwarded command and every reply, and relay subtrees are contiguous rank
//! ranges, so a range list keeps "all 10,000 nodes" down to one pair on the wire and makes the
//! planner's per-subtree splits a binary search plus a copy. This module owns the set algebra and
//! the validation of sets arriving from the network; it knows nothing about the tree's shape.
//!
//! Rank `u32::MAX` cannot be stored (ranges are half-open with a `u32` end). It is never a valid
//! rank: a topology holds at most `u32::MAX` nodes, numbered `0..u32::MAX`.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a range list received from a peer is not a valid [`RankSet`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RankSetError {
    #[error("rank range #{index} [{start}, {end}) is empty or reversed")]
    EmptyRange { index: usize, start: u32, end: u32 },
    #[error(
        "rank range #{index} starts at {start}, before the previous range ends at {previous_end}"
    )]
    OutOfOrder {
        index: usize,
        previous_end: u32,
        start: u32,
    },
}

/// A set of ranks. The serde form is just the list of `[start, end)` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<(u32, u32)>", into = "Vec<(u32, u32)>")]
pub struct RankSet {
    /// Invariant: each `start < end`, and each range ends strictly before the next one starts,
    /// so equal sets have equal representations (derived `PartialEq`/`Hash` are set equality).
    ranges: Vec<(u32, u32)>,
}

impl RankSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_range(range: Range<u32>) -> Self {
        let mut set = Self::new();
        set.insert_range(range);
        set
    }

    /// Builds a set from ranks in any order, with repeats allowed. `u32::MAX` is skipped.
    pub fn from_ranks(ranks: impl IntoIterator<Item = u32>) -> Self {
        let mut sorted: Vec<u32> = ranks.into_iter().filter(|&r| r != u32::MAX).collect();
        sorted.sort_unstable();
        let mut set = Self::new();
        for rank in sorted {
            set.push_back(rank, rank + 1);
        }
        set
    }

    /// Adds one rank; returns whether it was newly added (`false` for `u32::MAX`).
    pub fn insert(&mut self, rank: u32) -> bool {
        let Some(end) = rank.checked_add(1) else {
            return false;
        };
        if self.contains(rank) {
            return false;
        }
        self.insert_range(rank..end);
        true
    }

    pub fn insert_range(&mut self, range: Range<u32>) {
        if range.start >= range.end {
            return;
        }
        // Ranges that overlap or touch `range` merge with it into one.
        let first = self.ranges.partition_point(|&(_, e)| e < range.start);
        let past = self.ranges.partition_point(|&(s, _)| s <= range.end);
        let (mut start, mut end) = (range.start, range.end);
        if first < past {
            start = start.min(self.ranges[first].0);
            end = end.max(self.ranges[past - 1].1);
        }
        self.ranges.splice(first..past, [(start, end)]);
    }

    pub fn remove_range(&mut self, range: Range<u32>) {
        if range.start >= range.end {
            return;
        }
        let first = self.ranges.partition_point(|&(_, e)| e <= range.start);
        let past = self.ranges.partition_point(|&(s, _)| s < range.end);
        if first >= past {
            return;
        }
        // Only the first and last affected ranges can stick out past `range`.
        let (head_start, tail_end) = (self.ranges[first].0, self.ranges[past - 1].1);
        let mut keep = Vec::with_capacity(2);
        if head_start < range.start {
            keep.push((head_start, range.start));
        }
        if tail_end > range.end {
            keep.push((range.end, tail_end));
        }
        self.ranges.splice(first..past, keep);
    }

    pub fn contains(&self, rank: u32) -> bool {
        let after = self.ranges.partition_point(|&(s, _)| s <= rank);
        after
            .checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .is_some_and(|&(_, e)| rank < e)
    }

    /// Number of ranks (not ranges).
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| u64::from(e - s)).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Ranks in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(s, e)| s..e)
    }

    /// The canonical `[start, end)` ranges, ascending.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn union(&self, other: &RankSet) -> RankSet {
        let mut out = RankSet::new();
        let (mut a, mut b) = (
            self.ranges.iter().peekable(),
            other.ranges.iter().peekable(),
        );
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) if x.0 <= y.0 => a.next().map(|_| x),
                (Some(_), Some(&&y)) => b.next().map(|_| y),
                (Some(_), None) => a.next().copied(),
                (None, Some(_)) => b.next().copied(),
                (None, None) => break,
            };
            if let Some((s, e)) = next {
                out.push_back(s, e);
            }
        }
        out
    }

    pub fn intersection(&self, other: &RankSet) -> RankSet {
        let mut out = RankSet::new();
        let (mut i, mut j) = (0, 0);
        while let (Some(&(s1, e1)), Some(&(s2, e2))) = (self.ranges.get(i), other.ranges.get(j)) {
            let (lo, hi) = (s1.max(s2), e1.min(e2));
            if lo < hi {
                out.ranges.push((lo, hi));
            }
            // Advance whichever range ends first; the other may still overlap the next one.
            if e1 <= e2 {
                i += 1;
            } else {
                j += 1;
            }
        }
        out
    }

    /// Ranks in `self` but not in `other`.
    pub fn difference(&self, other: &RankSet) -> RankSet {
        let mut out = RankSet::new();
        let mut j = 0;
        for &(s, e) in &self.ranges {
            let mut cursor = s;
            // Skip ranges of `other` that end before this one starts.
            while other.ranges.get(j).is_some_and(|&(_, oe)| oe <= cursor) {
                j += 1;
            }
            let mut k = j;
            while let Some(&(os, oe)) = other.ranges.get(k) {
                if os >= e {
                    break;
                }
                if os > cursor {
                    out.ranges.push((cursor, os));
                }
                cursor = cursor.max(oe);
                if oe >= e {
                    break;
                }
                k += 1;
            }
            if cursor < e {
                out.ranges.push((cursor, e));
            }
        }
        out
    }

    pub fn is_disjoint(&self, other: &RankSet) -> bool {
        let (mut i, mut j) = (0, 0);
        while let (Some(&(s1, e1)), Some(&(s2, e2))) = (self.ranges.get(i), other.ranges.get(j)) {
            if s1.max(s2) < e1.min(e2) {
                return false;
            }
            if e1 <= e2 {
                i += 1;
            } else {
                j += 1;
            }
        }
        true
    }

    /// The part of this set inside `range`, in O(log #ranges + #ranges in the result).
    pub fn intersect_range(&self, range: Range<u32>) -> RankSet {
        let first = self.ranges.partition_point(|&(_, e)| e <= range.start);
        let ranges = self.ranges[first..]
            .iter()
            .take_while(|&&(s, _)| s < range.end)
            .map(|&(s, e)| (s.max(range.start), e.min(range.end)))
            .filter(|&(s, e)| s < e)
            .collect();
        RankSet { ranges }
    }

    /// Adds `other` to this set; O(#ranges of `other`) when every rank in `other` comes after
    /// this set's last range, as when building a set piece by piece in ascending order.
    pub fn append(&mut self, other: RankSet) {
        let in_order = match (self.ranges.last(), other.ranges.first()) {
            (Some(&(_, end)), Some(&(start, _))) => start >= end,
            _ => true,
        };
        if in_order {
            for (s, e) in other.ranges {
                self.push_back(s, e);
            }
        } else {
            *self = self.union(&other);
        }
    }

    /// Appends `[start, end)`, which must not start before the last range does; merges it into
    /// the last range when they overlap or touch.
    fn push_back(&mut self, start: u32, end: u32) {
        match self.ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => self.ranges.push((start, end)),
        }
    }
}

impl TryFrom<Vec<(u32, u32)>> for RankSet {
    type Error = RankSetError;

    /// Accepts sorted, disjoint, non-empty ranges; touching ranges are merged so the result is
    /// canonical.
    fn try_from(ranges: Vec<(u32, u32)>) -> Result<Self, Self::Error> {
        let mut set = RankSet::new();
        for (index, &(start, end)) in ranges.iter().enumerate() {
            if start >= end {
                return Err(RankSetError::EmptyRange { index, start, end });
            }
            if let Some(&(_, previous_end)) = set.ranges.last() {
                if start < previous_end {
                    return Err(RankSetError::OutOfOrder {
                        index,
                        previous_end,
                        start,
                    });
                }
            }
            set.push_back(start, end);
        }
        Ok(set)
    }
}

impl From<RankSet> for Vec<(u32, u32)> {
    fn from(set: RankSet) -> Self {
        set.ranges
    }
}

impl FromIterator<u32> for RankSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Self::from_ranks(iter)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::tree::test_rng::Lcg;

    fn set(ranges: &[(u32, u32)]) -> RankSet {
        let mut s = RankSet::new();
        for &(a, b) in ranges {
            s.insert_range(a..b);
        }
        s
    }

    fn model(s: &RankSet) -> BTreeSet<u32> {
        s.iter().collect()
    }

    fn assert_canonical(s: &RankSet) {
        for &(a, b) in s.ranges() {
            assert!(a < b, "empty range in {s:?}");
        }
        for w in s.ranges().windows(2) {
            assert!(w[0].1 < w[1].0, "unsorted or touching ranges in {s:?}");
        }
    }

    #[test]
    fn insert_merges_touching_and_overlapping_ranges() {
        let mut s = set(&[(0, 3), (10, 12)]);
        assert!(s.insert(3));
        assert_eq!(s.ranges(), &[(0, 4), (10, 12)]);
        assert!(!s.insert(11), "already present");
        s.insert_range(4..10);
        assert_eq!(s.ranges(), &[(0, 12)]);
        s.insert_range(20..20);
        assert_eq!(s.ranges(), &[(0, 12)], "empty range is a no-op");
        assert_eq!(s.len(), 12);
    }

    #[test]
    fn u32_max_is_not_storable() {
        let mut s = RankSet::new();
        assert!(!s.insert(u32::MAX));
        assert!(s.is_empty());
        assert!(s.insert(u32::MAX - 1));
        assert!(s.contains(u32::MAX - 1));
        assert!(!s.contains(u32::MAX));
        assert_eq!(RankSet::from_ranks([u32::MAX, 5]).ranges(), &[(5, 6)]);
    }

    #[test]
    fn remove_range_splits_and_trims() {
        let mut s = RankSet::from_range(0..100);
        s.remove_range(10..20);
        assert_eq!(s.ranges(), &[(0, 10), (20, 100)]);
        s.remove_range(5..25);
        assert_eq!(s.ranges(), &[(0, 5), (25, 100)]);
        s.remove_range(200..300);
        s.remove_range(50..50);
        assert_eq!(s.ranges(), &[(0, 5), (25, 100)]);
        s.remove_range(0..1000);
        assert!(s.is_empty());
    }

    #[test]
    fn from_ranks_sorts_and_dedups() {
        let s = RankSet::from_ranks([9, 3, 4, 3, 5, 1, 10]);
        assert_eq!(s.ranges(), &[(1, 2), (3, 6), (9, 11)]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 3, 4, 5, 9, 10]);
        let collected: RankSet = [2u32, 1, 0].into_iter().collect();
        assert_eq!(collected, RankSet::from_range(0..3));
    }

    #[test]
    fn append_in_order_and_out_of_order() {
        let mut s = RankSet::from_range(0..5);
        s.append(RankSet::from_ranks([5, 6, 9]));
        assert_eq!(s.ranges(), &[(0, 7), (9, 10)]);
        s.append(RankSet::from_ranks([1, 8, 20]));
        assert_eq!(s.ranges(), &[(0, 7), (8, 10), (20, 21)]);
        s.append(RankSet::new());
        assert_eq!(s.ranges(), &[(0, 7), (8, 10), (20, 21)]);
        let mut empty = RankSet::new();
        empty.append(RankSet::from_range(3..4));
        assert_eq!(empty.ranges(), &[(3, 4)]);
    }

    #[test]
    fn intersect_range_clips_to_bounds() {
        let s = set(&[(0, 5), (10, 20), (30, 40)]);
        assert_eq!(
            s.intersect_range(3..35).ranges(),
            &[(3, 5), (10, 20), (30, 35)]
        );
        assert_eq!(s.intersect_range(5..10), RankSet::new());
        assert_eq!(s.intersect_range(12..13).ranges(), &[(12, 13)]);
        let reversed = Range { start: 50, end: 40 };
        assert_eq!(s.intersect_range(reversed), RankSet::new());
    }

    #[test]
    fn random_operations_match_btreeset_model() {
        let mut rng = Lcg::new(7);
        for round in 0..400 {
            let mut a = RankSet::new();
            let mut b = RankSet::new();
            let (mut ma, mut mb) = (BTreeSet::new(), BTreeSet::new());
            for _ in 0..rng.below(12) {
                for (s, m) in [(&mut a, &mut ma), (&mut b, &mut mb)] {
                    let lo = rng.below(200);
                    let hi = lo + rng.below(30);
                    if rng.chance(70) {
                        s.insert_range(lo..hi);
                        m.extend(lo..hi);
                    } else {
                        s.remove_range(lo..hi);
                        m.retain(|x| !(lo..hi).contains(x));
                    }
                    let one = rng.below(220);
                    assert_eq!(s.insert(one), m.insert(one));
                }
            }
            for s in [&a, &b] {
                assert_canonical(s);
            }
            assert_eq!(model(&a), ma, "round {round}");
            assert_eq!(a.len(), ma.len() as u64);
            for probe in 0..240 {
                assert_eq!(a.contains(probe), ma.contains(&probe));
            }
            let checks = [
                (a.union(&b), ma.union(&mb).copied().collect::<BTreeSet<_>>()),
                (a.intersection(&b), ma.intersection(&mb).copied().collect()),
                (a.difference(&b), ma.difference(&mb).copied().collect()),
                (b.difference(&a), mb.difference(&ma).copied().collect()),
            ];
            for (got, want) in checks {
                assert_canonical(&got);
                assert_eq!(model(&got), want, "round {round}: {a:?} vs {b:?}");
            }
            assert_eq!(a.is_disjoint(&b), ma.is_disjoint(&mb));
            let lo = rng.below(220);
            let hi = rng.below(220);
            let clipped = a.intersect_range(lo..hi);
            assert_canonical(&clipped);
            let want: BTreeSet<u32> = ma
                .iter()
                .copied()
                .filter(|x| (lo..hi).contains(x))
                .collect();
            assert_eq!(model(&clipped), want);
            assert_eq!(
                RankSet::from_ranks(ma.iter().copied()),
                a,
                "canonical form is unique"
            );
        }
    }

    #[test]
    fn serde_form_is_compact_and_round_trips() {
        let all = RankSet::from_range(0..10_000);
        let bytes = rmp_serde::to_vec(&all).unwrap();
        assert!(
            bytes.len() <= 8,
            "10,000 contiguous ranks took {} bytes",
            bytes.len()
        );
        let back: RankSet = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, all);

        let scattered = RankSet::from_ranks((0..1000).map(|r| r * 3));
        let back: RankSet = rmp_serde::from_slice(&rmp_serde::to_vec(&scattered).unwrap()).unwrap();
        assert_eq!(back, scattered);
    }

    #[test]
    fn deserialize_merges_touching_ranges() {
        let bytes = rmp_serde::to_vec(&vec![(0u32, 5u32), (5, 9)]).unwrap();
        let s: RankSet = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(s.ranges(), &[(0, 9)]);
    }

    #[test]
    fn deserialize_rejects_empty_or_reversed_range() {
        for bad in [vec![(0u32, 5u32), (7, 7)], vec![(9, 3)]] {
            let err = RankSet::try_from(bad.clone()).unwrap_err();
            assert!(matches!(err, RankSetError::EmptyRange { .. }), "{err}");
            let bytes = rmp_serde::to_vec(&bad).unwrap();
            let wire = rmp_serde::from_slice::<RankSet>(&bytes).unwrap_err();
            assert!(wire.to_string().contains("empty or reversed"), "{wire}");
        }
        assert_eq!(
            RankSet::try_from(vec![(0, 5), (7, 7)]),
            Err(RankSetError::EmptyRange {
                index: 1,
                start: 7,
                end: 7
            })
        );
    }

    #[test]
    fn deserialize_rejects_unsorted_or_overlapping_ranges() {
        assert_eq!(
            RankSet::try_from(vec![(10, 20), (0, 5)]),
            Err(RankSetError::OutOfOrder {
                index: 1,
                previous_end: 20,
                start: 0
            })
        );
        assert_eq!(
            RankSet::try_from(vec![(0, 10), (9, 12)]),
            Err(RankSetError::OutOfOrder {
                index: 1,
                previous_end: 10,
                start: 9
            })
        );
        let bytes = rmp_serde::to_vec(&vec![(10u32, 20u32), (0, 5)]).unwrap();
        let wire = rmp_serde::from_slice::<RankSet>(&bytes).unwrap_err();
        assert!(
            wire.to_string().contains("before the previous range ends"),
            "{wire}"
        );
    }

    #[test]
    fn deserialize_rejects_wrong_shape() {
        let bytes = rmp_serde::to_vec(&"not ranks").unwrap();
        assert!(rmp_serde::from_slice::<RankSet>(&bytes).is_err());
    }
}
