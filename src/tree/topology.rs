//! The relay tree's shape, as pure arithmetic over ranks `0..n` and a fan-out width.
//!
//! Layout (Slurm's "consecutive hosts together"): the controller covers `[0, n)` and cuts it into
//! at most `width` consecutive chunks as evenly as possible, the first `m % chunks` of them one
//! rank longer. Each chunk's first rank heads it; the head of `[p, p + size)` cuts `[p + 1,
//! p + size)` the same way to find its own children. Every subtree is therefore one contiguous
//! rank range, which is what lets the planner and the health tracker work with ranges instead of
//! per-node walks. Nothing here is materialised: every answer costs O(depth).
//!
//! Depth bound: a tree of depth `d` below the controller holds at most
//! `cap(d) = w + w² + … + w^d` nodes, and this layout reaches exactly the smallest `d` with
//! `cap(d) ≥ n` (so it is as shallow as any width-`w` tree can be). That `d` lies in
//! `[floor(log_w n), max(1, ceil(log_w n))]` for `n ≥ 1`.
//!
//! Dynamic nodes (`canopy-noded -Z`, `scontrol create node`) get appended ranks: the ranks
//! `[fixed, n)` after the nodes slurm.conf lists form a separate region of fixed-size *blocks* of
//! [`dynamic_block`]`(width)` ranks (`1 + w + w²`: a head, `w` relays under it and `w` leaves under
//! each), one block after another. Each block's head is a direct child of the controller, and
//! inside a block ranks are laid out as above, over the block's *full* size, whatever part of it is
//! in use. So a rank's parent, depth and ancestors depend only on `fixed`, the width and the rank
//! itself, never on how many ranks follow it: adding dynamic nodes never re-ranks or re-parents
//! an existing node, so the routes relays hold and the health they fold upward stay valid, and the
//! configured nodes' layout is the same as without any dynamic region. Ranks past `n` are absent;
//! a subtree is its full-size range cut at `n`, which is still one contiguous range. The controller
//! builds the tree over `MaxNodeCount` ranks, so every daemon computes the same shape from the same
//! slurm.conf, before any dynamic node exists.
//!
//! This module owns only the shape; which nodes are alive or attached where is `plan`'s and
//! `health`'s business. The controller is the root and has no rank; it appears as `None`.

use std::ops::Range;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopologyError {
    #[error("tree width {width} is too small; a relay tree needs a width of at least 2")]
    WidthTooSmall { width: u32 },
}

/// The tree over ranks `0..n` with fan-out `width`; ranks from `fixed` on are the dynamic region.
///
/// Methods taking a rank treat ranks `>= n` as absent: no parent (`None`), empty subtree and
/// children, depth 0. Callers holding a rank from the network check it with [`Topology::contains`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    n: u32,
    width: u32,
    /// Ranks `0..fixed` are laid out as one tree under the controller; the rest in blocks.
    fixed: u32,
}

/// Ranks per block of the dynamic region: a head, `width` relays and `width` leaves under each.
pub fn dynamic_block(width: u32) -> u32 {
    width
        .saturating_add(1)
        .saturating_mul(width)
        .saturating_add(1)
}

impl Topology {
    pub fn new(n: u32, width: u32) -> Result<Self, TopologyError> {
        Self::with_dynamic(n, n, width)
    }

    /// The tree over the `fixed` configured nodes, and room for dynamic nodes up to `capacity`
    /// ranks in all (`MaxNodeCount`; below `fixed` it means none).
    pub fn with_dynamic(fixed: u32, capacity: u32, width: u32) -> Result<Self, TopologyError> {
        if width < 2 {
            return Err(TopologyError::WidthTooSmall { width });
        }
        Ok(Topology {
            n: capacity.max(fixed),
            width,
            fixed,
        })
    }

    /// Ranks of the nodes slurm.conf lists; ranks from here on are dynamic.
    pub fn fixed(&self) -> u32 {
        self.fixed
    }

    /// Number of nodes (ranks `0..n`).
    pub fn len(&self) -> u32 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn contains(&self, rank: u32) -> bool {
        rank < self.n
    }

    /// `None` when `rank` is a direct child of the controller (or not in the tree).
    pub fn parent(&self, rank: u32) -> Option<u32> {
        let mut parent = None;
        let mut last = None;
        for chunk in self.walk(rank) {
            parent = last;
            last = Some(chunk.start);
        }
        parent
    }

    /// Direct children of `me` (`None` = the controller), ascending.
    pub fn children(&self, me: Option<u32>) -> Vec<u32> {
        self.child_ranges(me).map(|r| r.start).collect()
    }

    /// The subtrees of `me`'s direct children, ascending; each range's first rank is the child.
    pub fn child_ranges(&self, me: Option<u32>) -> ChildRanges {
        match me {
            None => {
                let mut c = ChildRanges::split(0..self.fixed, self.width);
                c.blocks = self.fixed..self.n;
                c.block = dynamic_block(self.width);
                c
            }
            Some(rank) if rank >= self.fixed => {
                // Split the full-size subtree, as every other rank of the block does; cut at n.
                let full = self.walk(rank).last().unwrap_or(rank..rank);
                let mut c = ChildRanges::split(full.start.saturating_add(1)..full.end, self.width);
                c.clip = self.n;
                c
            }
            Some(_) => ChildRanges::split(self.below(me), self.width),
        }
    }

    /// The ranks `rank` heads, itself included.
    pub fn subtree(&self, rank: u32) -> Range<u32> {
        let full = self.walk(rank).last().unwrap_or(rank..rank);
        full.start..full.end.min(self.n)
    }

    /// The ranks strictly below `me` (`None` = every rank).
    pub fn below(&self, me: Option<u32>) -> Range<u32> {
        match me {
            None => 0..self.n,
            Some(rank) => {
                let subtree = self.subtree(rank);
                // An absent rank has an empty subtree; keep the range empty rather than reversed.
                subtree.start.saturating_add(1).min(subtree.end)..subtree.end
            }
        }
    }

    /// 1 for a direct child of the controller; 0 for a rank not in the tree.
    pub fn depth(&self, rank: u32) -> u32 {
        // At most 32 levels: every level at least halves the span.
        self.walk(rank).count() as u32
    }

    /// Depth of the deepest rank (0 for an empty tree).
    pub fn max_depth(&self) -> u32 {
        let mut depth = self.levels_in(self.fixed);
        let block = dynamic_block(self.width);
        let dynamic = self.n - self.fixed;
        if dynamic >= block {
            depth = depth.max(1 + self.levels_in(block - 1));
        }
        if dynamic % block != 0 {
            // The last block, in use only up to n.
            depth = depth.max(1 + self.height(Some(self.n - dynamic % block)));
        }
        depth
    }

    /// Levels of nodes below `me` (`None` = the controller, giving `max_depth`); 0 for a leaf.
    pub fn height(&self, me: Option<u32>) -> u32 {
        match me {
            None => self.max_depth(),
            Some(rank) if rank >= self.fixed && self.contains(rank) => {
                let full = self.walk(rank).last().unwrap_or(rank..rank);
                self.cut_height(full.start + 1..full.end)
            }
            Some(_) => {
                let below = self.below(me);
                self.levels_in(below.end - below.start)
            }
        }
    }

    /// Levels in the full-size span `below` (a head's ranks under it) once cut at `n`: chunks
    /// wholly in use have the closed-form height; only the one cut chunk is recursed into, so
    /// this costs O(width · depth).
    fn cut_height(&self, below: Range<u32>) -> u32 {
        if below.start >= self.n {
            return 0;
        }
        if below.end <= self.n {
            return self.levels_in(below.end - below.start);
        }
        let mut levels = 0;
        for chunk in ChildRanges::split(below, self.width) {
            if chunk.start >= self.n {
                break;
            }
            let under = if chunk.end <= self.n {
                self.levels_in(chunk.end - chunk.start - 1)
            } else {
                self.cut_height(chunk.start + 1..chunk.end)
            };
            levels = levels.max(1 + under);
        }
        levels
    }

    /// Proper ancestors of `rank`, nearest first (the controller is not listed).
    pub fn ancestors(&self, rank: u32) -> Vec<u32> {
        let mut heads = self.heads_to(rank);
        heads.pop();
        heads.reverse();
        heads
    }

    /// The hops a message from `from` takes to reach `to`: every rank strictly below `from` down
    /// to and including `to`. Empty when `from == Some(to)`; `None` when `to` is not in `from`'s
    /// subtree.
    pub fn route(&self, from: Option<u32>, to: u32) -> Option<Vec<u32>> {
        let mut heads = self.heads_to(to);
        if heads.is_empty() {
            return None;
        }
        match from {
            None => Some(heads),
            Some(from) => {
                let at = heads.iter().position(|&h| h == from)?;
                Some(heads.split_off(at + 1))
            }
        }
    }

    /// Whether `a` is a proper ancestor of `b`.
    pub fn is_ancestor(&self, a: u32, b: u32) -> bool {
        a != b && self.subtree(a).contains(&b)
    }

    /// Ranks heading each level from the controller down to `rank` (empty if absent).
    fn heads_to(&self, rank: u32) -> Vec<u32> {
        self.walk(rank).map(|chunk| chunk.start).collect()
    }

    /// The full-size chunks holding `rank`, from the controller's split down (not cut at `n`).
    fn walk(&self, rank: u32) -> Walk {
        if !self.contains(rank) {
            return Walk {
                span: 0..0,
                rank,
                width: self.width,
                first: None,
            };
        }
        if rank < self.fixed {
            return Walk {
                span: 0..self.fixed,
                rank,
                width: self.width,
                first: None,
            };
        }
        // A dynamic rank: its block is the controller-level chunk, then the usual split inside.
        let block = dynamic_block(self.width);
        let start = self.fixed + (rank - self.fixed) / block * block;
        let end = start.saturating_add(block);
        Walk {
            span: if start == rank { 0..0 } else { start + 1..end },
            rank,
            width: self.width,
            first: Some(start..end),
        }
    }

    /// Depth of a subtree holding `m` nodes below its head. The deepest path always follows a
    /// largest chunk, since depth never decreases as a span grows.
    fn levels_in(&self, mut m: u32) -> u32 {
        let mut levels = 0;
        while m > 0 {
            levels += 1;
            m = m.div_ceil(m.min(self.width)) - 1;
        }
        levels
    }
}

/// The subtrees a span of ranks is cut into: at most `width` consecutive chunks, the first
/// `len % chunks` one longer than the rest; each cut at `clip`. At the controller, the dynamic
/// region's blocks follow.
#[derive(Debug, Clone)]
pub struct ChildRanges {
    next: u32,
    left: u32,
    base: u32,
    longer: u32,
    clip: u32,
    /// Dynamic blocks still to give, `block` ranks each (the last one cut at the range's end).
    blocks: Range<u32>,
    block: u32,
}

impl ChildRanges {
    fn split(span: Range<u32>, width: u32) -> Self {
        let len = span.end.saturating_sub(span.start);
        let chunks = len.min(width);
        let (base, longer) = match chunks {
            0 => (0, 0),
            _ => (len / chunks, len % chunks),
        };
        ChildRanges {
            next: span.start,
            left: chunks,
            base,
            longer,
            clip: u32::MAX,
            blocks: 0..0,
            block: 1,
        }
    }

    /// The chunk of `span` holding `rank` (which must lie in `span`), by arithmetic.
    fn containing(span: Range<u32>, width: u32, rank: u32) -> Range<u32> {
        let ChildRanges {
            next: start,
            base,
            longer,
            ..
        } = Self::split(span, width);
        let offset = rank - start;
        let long_part = longer * (base + 1);
        let (chunk_start, size) = if offset < long_part {
            (start + offset / (base + 1) * (base + 1), base + 1)
        } else {
            (start + long_part + (offset - long_part) / base * base, base)
        };
        chunk_start..chunk_start + size
    }
}

impl Iterator for ChildRanges {
    type Item = Range<u32>;

    fn next(&mut self) -> Option<Range<u32>> {
        if self.left > 0 && self.next < self.clip {
            let size = self.base + u32::from(self.longer > 0);
            self.longer = self.longer.saturating_sub(1);
            self.left -= 1;
            let chunk = self.next..self.next + size;
            self.next = chunk.end;
            return Some(chunk.start..chunk.end.min(self.clip));
        }
        self.left = 0;
        if self.blocks.is_empty() {
            return None;
        }
        let start = self.blocks.start;
        let end = start.saturating_add(self.block).min(self.blocks.end);
        self.blocks.start = end;
        Some(start..end)
    }
}

/// The chunks containing `rank` at each level, from the controller's split downward; the last
/// one is `rank`'s own subtree.
struct Walk {
    span: Range<u32>,
    rank: u32,
    width: u32,
    /// A dynamic rank's block, given before the split inside it.
    first: Option<Range<u32>>,
}

impl Iterator for Walk {
    type Item = Range<u32>;

    fn next(&mut self) -> Option<Range<u32>> {
        if let Some(block) = self.first.take() {
            return Some(block);
        }
        if !self.span.contains(&self.rank) {
            return None;
        }
        let chunk = ChildRanges::containing(self.span.clone(), self.width, self.rank);
        // Below a chunk's head come the rest of its ranks; once `rank` heads a chunk, stop.
        self.span = if chunk.start == self.rank {
            0..0
        } else {
            chunk.start + 1..chunk.end
        };
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The tree built explicitly from the layout's definition, with subtrees measured by
    /// counting descendants rather than trusted from the construction.
    struct Oracle {
        parent: Vec<Option<u32>>,
        children: HashMap<Option<u32>, Vec<u32>>,
        depth: Vec<u32>,
        size: Vec<u32>,
        max_descendant: Vec<u32>,
        deepest_below: Vec<u32>,
    }

    impl Oracle {
        /// The configured ranks as one tree, then whole blocks of the dynamic region each under
        /// the controller, built at full size and only then cut at `cap`.
        fn build_dynamic(fixed: u32, cap: u32, width: u32) -> Self {
            let n = cap.max(fixed);
            let block = dynamic_block(width);
            let blocks = (n - fixed).div_ceil(block);
            let full = (fixed + blocks * block) as usize;
            let mut o = Oracle {
                parent: vec![None; full],
                children: HashMap::new(),
                depth: vec![0; full],
                size: vec![1; full],
                max_descendant: (0..full as u32).collect(),
                deepest_below: Vec::new(),
            };
            o.place(0, fixed, None, 1, width);
            for b in 0..blocks {
                let start = fixed + b * block;
                o.parent[start as usize] = None;
                o.depth[start as usize] = 1;
                o.children.entry(None).or_default().push(start);
                o.place(start + 1, start + block, Some(start), 2, width);
            }
            o.parent.truncate(n as usize);
            o.depth.truncate(n as usize);
            o.size.truncate(n as usize);
            o.max_descendant.truncate(n as usize);
            for kids in o.children.values_mut() {
                kids.retain(|&k| k < n);
            }
            o.children.retain(|_, kids| !kids.is_empty());
            o.deepest_below = o.depth.clone();
            // Children always have larger ranks than their parent, so one reverse pass folds
            // each subtree into its parent.
            for r in (0..n as usize).rev() {
                if let Some(p) = o.parent[r] {
                    let p = p as usize;
                    o.size[p] += o.size[r];
                    o.max_descendant[p] = o.max_descendant[p].max(o.max_descendant[r]);
                    o.deepest_below[p] = o.deepest_below[p].max(o.deepest_below[r]);
                }
            }
            o
        }

        fn place(&mut self, lo: u32, hi: u32, parent: Option<u32>, depth: u32, width: u32) {
            let m = hi - lo;
            if m == 0 {
                return;
            }
            let chunks = m.min(width);
            let mut start = lo;
            for i in 0..chunks {
                let size = m / chunks + u32::from(i < m % chunks);
                self.parent[start as usize] = parent;
                self.depth[start as usize] = depth;
                self.children.entry(parent).or_default().push(start);
                self.place(start + 1, start + size, Some(start), depth + 1, width);
                start += size;
            }
        }

        fn ancestors(&self, rank: u32) -> Vec<u32> {
            let mut out = Vec::new();
            let mut at = self.parent[rank as usize];
            while let Some(p) = at {
                out.push(p);
                at = self.parent[p as usize];
            }
            out
        }
    }

    const WIDTHS: [u32; 6] = [2, 3, 16, 32, 50, 64];

    fn sizes(width: u32) -> Vec<u32> {
        let mut sizes = vec![0, 1, 2, 3, 7, 100, 997, 20_000, 50_000, 20_011];
        sizes.extend([
            width - 1,
            width,
            width + 1,
            width * width - 1,
            width * width,
            width * width + 1,
        ]);
        sizes.extend(
            [width * width * width + 1]
                .into_iter()
                .filter(|&s| s <= 60_000),
        );
        sizes
    }

    fn check_against_oracle(n: u32, width: u32) {
        check_dynamic_against_oracle(n, n, width);
    }

    fn check_dynamic_against_oracle(fixed: u32, cap: u32, width: u32) {
        let topo = Topology::with_dynamic(fixed, cap, width).unwrap();
        let o = Oracle::build_dynamic(fixed, cap, width);
        let n = cap.max(fixed);
        let ctx = format!("fixed={fixed} n={n} width={width}");
        assert_eq!(
            topo.children(None),
            o.children.get(&None).cloned().unwrap_or_default(),
            "{ctx}"
        );
        assert_eq!(
            topo.max_depth(),
            o.depth.iter().copied().max().unwrap_or(0),
            "{ctx}"
        );
        assert_eq!(topo.height(None), topo.max_depth());
        for r in 0..n {
            let i = r as usize;
            assert_eq!(topo.parent(r), o.parent[i], "{ctx} parent of {r}");
            assert_eq!(topo.depth(r), o.depth[i], "{ctx} depth of {r}");
            let subtree = topo.subtree(r);
            assert_eq!(subtree, r..r + o.size[i], "{ctx} subtree of {r}");
            assert_eq!(
                o.max_descendant[i],
                subtree.end - 1,
                "{ctx}: subtree of {r} not contiguous"
            );
            let kids = o.children.get(&Some(r)).cloned().unwrap_or_default();
            assert_eq!(topo.children(Some(r)), kids, "{ctx} children of {r}");
            let ancestors = o.ancestors(r);
            assert_eq!(topo.ancestors(r), ancestors, "{ctx} ancestors of {r}");
            let height = o.deepest_below[i] - o.depth[i];
            assert_eq!(topo.height(Some(r)), height, "{ctx} height of {r}");
            let mut path: Vec<u32> = ancestors.iter().rev().copied().collect();
            path.push(r);
            assert_eq!(
                topo.route(None, r),
                Some(path.clone()),
                "{ctx} route to {r}"
            );
            if let Some(&top) = ancestors.last() {
                assert_eq!(topo.route(Some(top), r), Some(path[1..].to_vec()));
                assert!(topo.is_ancestor(top, r));
                assert!(!topo.is_ancestor(r, top));
            }
        }
    }

    #[test]
    fn matches_explicit_tree_for_all_widths_and_awkward_sizes() {
        for width in WIDTHS {
            for n in sizes(width) {
                check_against_oracle(n, width);
            }
        }
    }

    #[test]
    fn dynamic_region_matches_explicit_tree() {
        for width in [2, 3, 4, 5, 16] {
            let block = dynamic_block(width);
            for fixed in [0, 1, 2, 7, 100] {
                let mut extra: Vec<u32> = (0..3 * block + 2).collect();
                extra.extend([5 * block, 5 * block + 1, 7 * block - 1]);
                for e in extra {
                    check_dynamic_against_oracle(fixed, fixed + e, width);
                }
            }
        }
    }

    /// The promise dynamic nodes rely on: growing the dynamic region (nodes joining, one at a
    /// time or many) never changes where an existing rank sits, and the configured nodes sit
    /// exactly where they would without any dynamic region.
    #[test]
    fn appending_ranks_never_moves_an_existing_rank() {
        let seed = 0x17d;
        println!("seed {seed}");
        let mut rng = crate::tree::test_rng::Lcg::new(seed);
        for _ in 0..300 {
            let width = 2 + rng.below(20);
            let fixed = rng.below(400);
            let before = fixed + rng.below(3 * dynamic_block(width) + 5);
            let after = before + 1 + rng.below(2 * dynamic_block(width));
            let (small, big) = (
                Topology::with_dynamic(fixed, before, width).unwrap(),
                Topology::with_dynamic(fixed, after, width).unwrap(),
            );
            let plain = Topology::new(fixed, width).unwrap();
            let ctx = format!("seed={seed} width={width} fixed={fixed} {before}->{after}");
            for r in 0..before {
                assert_eq!(small.parent(r), big.parent(r), "{ctx} parent of {r}");
                assert_eq!(
                    small.ancestors(r),
                    big.ancestors(r),
                    "{ctx} ancestors of {r}"
                );
                assert_eq!(small.depth(r), big.depth(r), "{ctx} depth of {r}");
                assert!(big.subtree(r).start == r && big.subtree(r).end >= small.subtree(r).end);
                if r < fixed {
                    assert_eq!(big.parent(r), plain.parent(r), "{ctx} configured {r}");
                    assert_eq!(big.subtree(r), plain.subtree(r), "{ctx} configured {r}");
                    assert_eq!(big.children(Some(r)), plain.children(Some(r)), "{ctx}");
                }
            }
            // The controller's children only grow, by whole new block heads.
            let (old, new) = (small.children(None), big.children(None));
            assert_eq!(&new[..old.len()], &old[..], "{ctx}");
        }
    }

    #[test]
    fn dynamic_blocks_hang_under_the_controller() {
        // Width 3: blocks of 1 + 3 + 9 = 13 ranks after the 5 configured ones.
        assert_eq!(dynamic_block(3), 13);
        let topo = Topology::with_dynamic(5, 5 + 13 + 2, 3).unwrap();
        assert_eq!(topo.fixed(), 5);
        assert_eq!(topo.children(None), vec![0, 2, 4, 5, 18]);
        assert_eq!(topo.parent(5), None);
        assert_eq!(topo.children(Some(5)), vec![6, 10, 14]);
        assert_eq!(topo.parent(19), Some(18));
        assert_eq!(topo.subtree(18), 18..20);
        assert_eq!(topo.max_depth(), 3);
        assert!(!topo.contains(20));
        // No room asked for: no dynamic region, and the plain layout.
        assert_eq!(
            Topology::with_dynamic(5, 3, 3).unwrap(),
            Topology::new(5, 3).unwrap()
        );
    }

    #[test]
    fn matches_explicit_tree_for_every_small_size() {
        for width in [2, 3, 4, 5] {
            for n in 0..200 {
                check_against_oracle(n, width);
            }
        }
    }

    /// `w + w² + … + w^d`, the most nodes a depth-`d` tree of width `w` can hold.
    fn capacity(width: u32, depth: u32) -> u128 {
        (1..=depth).map(|k| u128::from(width).pow(k)).sum()
    }

    fn log_floor_ceil(n: u32, width: u32) -> (u32, u32) {
        let (mut floor, mut power) = (0, 1u128);
        while power * u128::from(width) <= u128::from(n) {
            power *= u128::from(width);
            floor += 1;
        }
        let ceil = if power == u128::from(n) {
            floor
        } else {
            floor + 1
        };
        (floor, ceil)
    }

    #[test]
    fn depth_is_the_optimum_and_within_log_bounds() {
        let mut ns: Vec<u32> = (1..3000).collect();
        ns.extend([
            10_000,
            20_000,
            50_000,
            65_536,
            1 << 20,
            1_000_000_007,
            u32::MAX,
        ]);
        for width in 2..=64 {
            for &n in &ns {
                let topo = Topology::new(n, width).unwrap();
                let d = topo.max_depth();
                assert!(capacity(width, d) >= u128::from(n), "n={n} w={width} d={d}");
                assert!(
                    capacity(width, d - 1) < u128::from(n),
                    "n={n} w={width}: not minimal"
                );
                let (floor, ceil) = log_floor_ceil(n, width);
                assert!(
                    d >= floor && d <= ceil.max(1),
                    "n={n} w={width} d={d} log in [{floor},{ceil}]"
                );
            }
        }
        assert_eq!(Topology::new(0, 2).unwrap().max_depth(), 0);
    }

    #[test]
    fn huge_trees_answer_without_overflow() {
        let topo = Topology::new(u32::MAX, 2).unwrap();
        let last = u32::MAX - 1;
        assert_eq!(
            topo.depth(last),
            topo.route(None, last).unwrap().len() as u32
        );
        assert_eq!(topo.subtree(last), last..u32::MAX);
        assert_eq!(topo.children(None).len(), 2);
        let sum: u64 = topo
            .child_ranges(None)
            .map(|r| u64::from(r.end - r.start))
            .sum();
        assert_eq!(sum, u64::from(u32::MAX));
    }

    #[test]
    fn route_from_outside_the_subtree_is_none() {
        let topo = Topology::new(100, 3).unwrap();
        let kids = topo.children(None);
        assert_eq!(kids, vec![0, 34, 67]);
        assert_eq!(topo.route(Some(0), 50), None);
        assert_eq!(topo.route(Some(34), 34), Some(vec![]));
        assert_eq!(topo.route(None, 100), None);
        assert!(!topo.is_ancestor(34, 34));
        assert!(!topo.is_ancestor(0, 34));
    }

    #[test]
    fn absent_ranks_have_no_place_in_the_tree() {
        let topo = Topology::new(10, 4).unwrap();
        assert!(!topo.contains(10));
        assert_eq!(topo.parent(10), None);
        assert_eq!(topo.depth(10), 0);
        assert!(topo.subtree(10).is_empty());
        assert!(topo.children(Some(10)).is_empty());
        assert!(topo.below(Some(10)).is_empty());
        assert!(topo.ancestors(10).is_empty());
        assert!(!topo.is_ancestor(10, 10));
    }

    #[test]
    fn width_below_two_is_rejected() {
        for width in [0, 1] {
            assert_eq!(
                Topology::new(10, width),
                Err(TopologyError::WidthTooSmall { width })
            );
        }
        let msg = Topology::new(10, 1).unwrap_err().to_string();
        assert!(msg.contains("width 1"), "{msg}");
        let topo = Topology::new(5, 2).unwrap();
        assert_eq!((topo.len(), topo.width(), topo.is_empty()), (5, 2, false));
        assert!(Topology::new(0, 2).unwrap().is_empty());
    }
}
