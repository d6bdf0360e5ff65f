//! The backfill timeline: what every node will have free over future time,
//! from running jobs' expected ends and the holds a backfill pass lays down
//! (jobs it starts now, reservations for jobs it cannot start yet).
//!
//! Slurm's `node_space_map` is a list of time slices, each with a bitmap of
//! the nodes wholly free in it; a reservation splits slices and is made of
//! whole nodes, so a sub-node job reserves a full node and partly used
//! nodes count as busy. canopy keeps instead, per node, a short sorted list
//! of usage changes (a running job's end, a hold's start and end) in counts
//! (CPUs, memory, GPUs). Why:
//!
//! - cores, memory and GRES of partly used nodes are counted, so a job that
//!   fits on a half-free node backfills onto it, and a reservation takes
//!   only what its job asks;
//! - adding a hold touches only its own nodes (no slice splitting over all
//!   10,000 nodes, no per-slice bitmap copies), so 1,000 reservations cost
//!   1,000 × (nodes of the job) list inserts;
//! - a query looks at each node's few changes only: "the earliest time each
//!   node has room for one unit of the job for its whole run" is O(changes)
//!   per node (read from the node's folded usage steps), and the job's
//!   earliest start follows from the k-th smallest of those (k = the nodes
//!   it needs at least) by a fixpoint that only moves forward in time;
//!   each node enters it with a bound from two flat per-node times (its
//!   first free CPU, its first idle moment) and is read only when the
//!   search reaches that bound.
//!
//! Counts only filter; the final answer always comes from the production
//! placement ([`crate::sched::place`]) run on each candidate node's state
//! over the whole interval: the current node, minus running jobs ended by
//! then, plus every hold overlapping the interval (their CPU ids and GRES
//! devices by identity). Summing holds that overlap the interval but not
//! each other over-counts: that errs on the side of never delaying anyone.
//!
//! Advance reservations are fences: per node, the windows it is set aside
//! for ([`crate::sched::gate::Aside`]). A fence is not usage: it binds only
//! the jobs it does not exempt ([`Exempt`]: a reservation's own jobs may
//! use its nodes), so each query says which job asks, and a node's earliest
//! start for that job is pushed past every binding fence its run would meet.
//!
//! Times are Unix seconds; ends are rounded up to `bf_resolution` (a node
//! is taken as busy until the next resolution step), as Slurm does.

use crate::model::job::Allocation;
use crate::sched::gate::{Aside, Exempt};
use crate::sched::placement::GresSlot;
use crate::sched::{place, MemRequest, NodeSlot, Request};

/// The search's heap: (a node's earliest start from the time searched, its
/// preference position, its rank, whether that start is exact or only a
/// bound), least first.
type Frontier = std::collections::BinaryHeap<std::cmp::Reverse<(i64, usize, u32, bool)>>;

/// A time no job reaches: what a job without any limit "ends" at.
pub const NEVER: i64 = i64::MAX / 4;

/// Usage counts of one node (CPUs, MiB, GPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Use {
    cpus: i64,
    mem: i64,
    gpus: i64,
}

impl Use {
    fn add(&mut self, o: Use, sign: i64) {
        self.cpus += sign * o.cpus;
        self.mem += sign * o.mem;
        self.gpus += sign * o.gpus;
    }
}

/// What a change does to a node's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A running (or just started) job ends: its resources come back.
    Release,
    /// A reservation ends.
    End,
    /// A reservation begins (it ends at `Change::end`).
    Start,
}

/// One change of a node's usage at `at`; `alloc`/`part` point at the
/// allocation (and its index for this node) for the exact state.
#[derive(Debug, Clone, Copy)]
struct Change {
    at: i64,
    kind: Kind,
    delta: Use,
    /// For a `Start`: when that reservation ends.
    end: i64,
    alloc: u32,
    part: u32,
}

impl Change {
    /// Releases and ends sort before starts at the same instant, so a
    /// node handed from one job to the next is never counted twice.
    fn key(&self) -> (i64, Kind) {
        (self.at, self.kind)
    }
    fn sign(&self) -> i64 {
        match self.kind {
            Kind::Start => 1,
            Kind::Release | Kind::End => -1,
        }
    }
}

/// A window a node is set aside for: `[start, end)`, for the jobs
/// `Exempt` lets through (`id`, `maint`: what it asks).
#[derive(Debug, Clone, Copy)]
struct Fence {
    start: i64,
    end: i64,
    id: u32,
    maint: bool,
}

/// A node's usage from `at` until the next step: its changes folded,
/// kept beside them so a search reads usage instead of summing deltas.
#[derive(Debug, Clone, Copy)]
struct Step {
    at: i64,
    used: Use,
}

/// The least one node must give a job (counts; placement decides the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Need {
    pub cpus: u32,
    pub mem: u64,
    pub gpus: u64,
    /// `--exclusive`: nothing else on the node.
    pub whole: bool,
    /// `--mem=0` with memory consumed: all of the node's memory.
    pub all_mem: bool,
    /// The fewest nodes the job can use.
    pub nodes: u32,
    /// The job may share CPUs (`OverSubscribe`): CPU counts, which add up
    /// shared CPUs once per job, do not bound it; placement decides.
    pub shares: bool,
}

impl Need {
    /// A necessary (not sufficient) condition for `req` on one node, and
    /// the fewest nodes it can use given the largest node's CPUs.
    pub fn of(req: &Request, largest_cpus: u32) -> Need {
        let gpu = |g: &Option<crate::model::tres::GresRequest>| {
            g.as_ref()
                .filter(|g| g.name == "gpu")
                .map_or(0, |g| g.count)
        };
        let gres_gpus: u64 = req
            .res
            .gres
            .iter()
            .filter(|g| g.name == "gpu")
            .map(|g| g.count)
            .sum();
        let gpus = gres_gpus
            .max(gpu(&req.res.gpus_per_node))
            .max(gpu(&req.res.gpus_per_task));
        // With -N the tasks are spread: every node gets at least its share.
        let tasks = match req.nodes {
            Some(n) if n > 0 => (req.ntasks / n).max(1),
            _ => 1,
        };
        let cpus = req.cpus_per_task.max(1).saturating_mul(tasks);
        let mem = match req.mem {
            MemRequest::None | MemRequest::PerNode(0) => 0,
            MemRequest::PerNode(m) => m,
            MemRequest::PerCpu(m) => m.saturating_mul(u64::from(cpus)),
            MemRequest::PerGpu(m) => m.saturating_mul(gpus),
        };
        let total_cpus = u64::from(req.ntasks) * u64::from(req.cpus_per_task.max(1));
        let by_cpus = total_cpus.div_ceil(u64::from(largest_cpus.max(1)));
        let nodes = u64::from(req.min_nodes()).max(by_cpus).max(1);
        Need {
            cpus,
            mem: if req.cr.memory { mem } else { 0 },
            gpus,
            whole: req.exclusive,
            all_mem: req.cr.memory && matches!(req.mem, MemRequest::PerNode(0)),
            nodes: u32::try_from(nodes).unwrap_or(u32::MAX),
            shares: req.share.as_ref().is_some_and(|t| t.shares()) && !req.exclusive,
        }
    }
}

/// The timeline of one backfill pass.
pub struct Timeline {
    now: i64,
    resolution: i64,
    /// Capacity per node.
    cap: Vec<Use>,
    /// Usage per node now (from the slots, kept up to date as jobs start).
    cur: Vec<Use>,
    /// Whether each node can take work at all (up, not drained).
    up: Vec<bool>,
    /// Per node: changes in time order.
    changes: Vec<Vec<Change>>,
    /// Per node: its usage after each change time (derived from `cur` and
    /// `changes`, rebuilt for the nodes a start or a hold touches).
    steps: Vec<Vec<Step>>,
    /// Per node, flat (a search reads these for every candidate, and a
    /// node's own lists only when the search gets to it): the first time
    /// it has a CPU free, and the first time it is idle ([`NEVER`]: not
    /// in sight). No job starts on a node sooner.
    free_any: Vec<i64>,
    free_idle: Vec<i64>,
    /// Per node: the windows it is set aside for, by start.
    fences: Vec<Vec<Fence>>,
    /// Every allocation a change points at.
    allocs: Vec<Allocation>,
    /// Reservations laid down so far.
    holds: usize,
    /// Whether memory is consumed (`_Memory`).
    memory: bool,
    /// Node states over an interval, built on demand (index = rank).
    scratch: Vec<NodeSlot>,
    /// Up nodes by free CPUs now (free CPUs → how many nodes), their
    /// total, and how many are idle: a job that cannot start now, by
    /// these counts alone, costs no look at any node.
    free_hist: std::collections::BTreeMap<i64, u32>,
    free_total: i64,
    idle: u32,
}

fn gpus_of(gres: &[GresSlot], used: bool) -> i64 {
    gres.iter()
        .filter(|g| g.name == "gpu")
        .map(|g| if used { g.used() } else { g.total() })
        .sum::<u64>() as i64
}

impl Timeline {
    /// The timeline at `now` of `slots`, with `running` jobs (expected end,
    /// allocation) giving their resources back at their ends, rounded up to
    /// `resolution` seconds. Ends at or after [`NEVER`] never come.
    pub fn new(
        now: i64,
        resolution: i64,
        slots: &[NodeSlot],
        running: impl IntoIterator<Item = (i64, Allocation)>,
        memory: bool,
    ) -> Timeline {
        let cap = slots
            .iter()
            .map(|s| Use {
                cpus: i64::from(s.cpus),
                mem: s.mem_mb as i64,
                gpus: gpus_of(&s.gres, false),
            })
            .collect();
        let cur = slots
            .iter()
            .map(|s| Use {
                cpus: i64::from(s.alloc_cpus),
                mem: s.alloc_mem_mb as i64,
                gpus: gpus_of(&s.gres, true),
            })
            .collect();
        let mut t = Timeline {
            now,
            resolution: resolution.max(1),
            cap,
            cur,
            up: slots.iter().map(|s| s.available).collect(),
            changes: vec![Vec::new(); slots.len()],
            fences: vec![Vec::new(); slots.len()],
            steps: vec![Vec::new(); slots.len()],
            free_any: vec![NEVER; slots.len()],
            free_idle: vec![NEVER; slots.len()],
            allocs: Vec::new(),
            holds: 0,
            memory,
            scratch: slots.to_vec(),
            free_hist: Default::default(),
            free_total: 0,
            idle: 0,
        };
        for n in 0..slots.len() {
            t.count_free(n, 1);
        }
        for (end, alloc) in running {
            // A job past its limit still holds its nodes now (its
            // teardown is under way): taken to end within a step.
            let at = if end <= now {
                now + t.resolution
            } else {
                t.round_up(end)
            };
            t.push(alloc, |_| vec![(at, Kind::Release, 0)], false);
        }
        for c in &mut t.changes {
            c.sort_by_key(Change::key);
        }
        for n in 0..slots.len() {
            t.restep(n);
        }
        t
    }

    /// Rebuild `node`'s steps from its usage now and its changes.
    fn restep(&mut self, node: usize) {
        let mut u = self.cur[node];
        let steps = &mut self.steps[node];
        steps.clear();
        for c in &self.changes[node] {
            u.add(c.delta, c.sign());
            match steps.last_mut() {
                Some(last) if last.at == c.at => last.used = u,
                _ => steps.push(Step { at: c.at, used: u }),
            }
        }
        let cpus = self.cap[node].cpus;
        let first = |ok: &dyn Fn(&Use) -> bool| {
            if ok(&self.cur[node]) {
                return self.now;
            }
            steps.iter().find(|s| ok(&s.used)).map_or(NEVER, |s| s.at)
        };
        let any = first(&|u| u.cpus < cpus);
        let idle = first(&|u| u.cpus == 0);
        self.free_any[node] = any;
        self.free_idle[node] = idle;
    }

    /// `t` rounded up to the resolution (`now` and [`NEVER`] stay).
    pub fn round_up(&self, t: i64) -> i64 {
        if t <= self.now || t >= NEVER {
            return t.max(self.now);
        }
        let r = self.resolution;
        t.div_euclid(r) * r + if t.rem_euclid(r) == 0 { 0 } else { r }
    }

    /// How long a job of `secs` holds its nodes, rounded up.
    pub fn span(&self, secs: i64) -> i64 {
        if secs >= NEVER {
            return NEVER;
        }
        let r = self.resolution;
        (secs.max(1) + r - 1) / r * r
    }

    fn use_of(alloc: &Allocation, i: usize) -> Use {
        let gpus: u64 = alloc
            .gres
            .get(i)
            .map(|g| g.iter().filter(|g| g.name == "gpu").map(|g| g.count).sum())
            .unwrap_or(0);
        Use {
            cpus: i64::from(alloc.cpus.get(i).copied().unwrap_or(0)),
            mem: alloc.mem_mb as i64,
            gpus: gpus as i64,
        }
    }

    /// Record `alloc` and the changes `at(i)` gives for each of its nodes
    /// (time, kind, a start's end), kept in order when `sorted`.
    fn push(
        &mut self,
        alloc: Allocation,
        at: impl Fn(usize) -> Vec<(i64, Kind, i64)>,
        sorted: bool,
    ) {
        let idx = self.allocs.len() as u32;
        for (i, &rank) in alloc.ranks.iter().enumerate() {
            let delta = Self::use_of(&alloc, i);
            let Some(list) = self.changes.get_mut(rank as usize) else {
                continue;
            };
            for (when, kind, end) in at(i) {
                if when >= NEVER {
                    continue;
                }
                let c = Change {
                    at: when,
                    kind,
                    delta,
                    end,
                    alloc: idx,
                    part: i as u32,
                };
                if sorted {
                    let pos = list.partition_point(|x| x.key() <= c.key());
                    list.insert(pos, c);
                } else {
                    list.push(c);
                }
            }
            if sorted {
                self.restep(rank as usize);
            }
        }
        self.allocs.push(alloc);
    }

    /// A job starts now on `alloc` (already held on the slots the caller
    /// passes as `base`) and runs `secs`: its resources are used from now
    /// and come back at its (rounded) end.
    pub fn start(&mut self, alloc: Allocation, secs: i64) {
        for (i, &rank) in alloc.ranks.iter().enumerate() {
            let u = Self::use_of(&alloc, i);
            let r = rank as usize;
            if r < self.cur.len() {
                self.count_free(r, -1);
                self.cur[r].add(u, 1);
                self.count_free(r, 1);
            }
        }
        let end = self.now.saturating_add(self.span(secs));
        self.push(alloc, |_| vec![(end, Kind::Release, 0)], true);
    }

    /// Reserve `alloc` over `[start, start + secs)` for a job that cannot
    /// start now: later queries see it taken.
    pub fn reserve(&mut self, alloc: Allocation, start: i64, secs: i64) {
        let end = start.saturating_add(self.span(secs)).min(NEVER);
        self.push(
            alloc,
            |_| vec![(start, Kind::Start, end), (end, Kind::End, 0)],
            true,
        );
        self.holds += 1;
    }

    /// Set nodes aside over windows (advance reservations): a job a window
    /// binds is never placed on its nodes across it.
    pub fn set_aside(&mut self, asides: &[Aside]) {
        for a in asides.iter().filter(|a| a.end > self.now) {
            let f = Fence {
                start: a.start,
                end: a.end,
                id: a.id,
                maint: a.maint,
            };
            for &r in a.ranks.iter() {
                if let Some(list) = self.fences.get_mut(r as usize) {
                    list.push(f);
                }
            }
        }
        for list in &mut self.fences {
            list.sort_by_key(|f| (f.start, f.end));
        }
    }

    /// The latest end of the fences of `node` that bind `exempt` and meet
    /// `[t, t + d)`, if any.
    fn fenced(&self, node: usize, t: i64, d: i64, exempt: Exempt) -> Option<i64> {
        let end = t.saturating_add(d);
        self.fences[node]
            .iter()
            .take_while(|f| f.start < end)
            .filter(|f| f.end > t && exempt.binds(f.id, f.maint))
            .map(|f| f.end)
            .max()
    }

    /// Reservations laid down so far.
    pub fn holds(&self) -> usize {
        self.holds
    }

    /// Usage changes kept over all nodes (Slurm's "table size" counts its
    /// node-space records, which grow the same way).
    pub fn size(&self) -> usize {
        self.changes.iter().map(Vec::len).sum()
    }

    fn room(&self, node: usize, used: Use, need: &Need) -> bool {
        let cap = self.cap[node];
        let mem_ok = !self.memory
            || if need.all_mem {
                used.mem == 0
            } else {
                cap.mem - used.mem >= need.mem as i64
            };
        if need.whole {
            return used.cpus == 0 && mem_ok && used.gpus == 0;
        }
        (need.shares || cap.cpus - used.cpus >= i64::from(need.cpus))
            && mem_ok
            && cap.gpus - used.gpus >= need.gpus as i64
    }

    /// The earliest `t` in `[from, limit]` at which `node` has room for
    /// `need` through `[t, t + d)` and no fence binding `exempt` meets
    /// that run; `None` if there is none.
    pub fn node_free_from(
        &self,
        node: usize,
        need: &Need,
        from: i64,
        d: i64,
        limit: i64,
        exempt: Exempt,
    ) -> Option<i64> {
        let mut from = from;
        loop {
            let t = self.room_from(node, need, from, d, limit)?;
            match self.fenced(node, t, d, exempt) {
                None => return Some(t),
                // Past the fence (its end rounded up, as Slurm rounds a
                // reservation's end), and look again from there.
                Some(end) => from = self.round_up(end).max(t + 1),
            }
            if from > limit {
                return None;
            }
        }
    }

    /// The earliest `t` in `[from, limit]` at which `node` has room for
    /// `need` through `[t, t + d)`; `None` if there is none. One sweep
    /// over the node's changes: every step without room pushes the
    /// earliest start past its end.
    fn room_from(&self, node: usize, need: &Need, from: i64, d: i64, limit: i64) -> Option<i64> {
        if !self.up.get(node).copied().unwrap_or(false) {
            return None;
        }
        let c = self.cap[node];
        if c.cpus < i64::from(need.cpus) || c.gpus < need.gpus as i64 {
            return None;
        }
        let steps = &self.steps[node];
        let mut i = steps.partition_point(|s| s.at <= from);
        let mut u = match i {
            0 => self.cur[node],
            _ => steps[i - 1].used,
        };
        let mut t = from;
        loop {
            // From here to the next step the usage is `u`.
            let next = steps.get(i).map_or(NEVER, |s| s.at);
            if !self.room(node, u, need) {
                t = next;
            } else if next >= t.saturating_add(d) {
                return (t <= limit).then_some(t);
            }
            if t > limit || i >= steps.len() {
                return None;
            }
            u = steps[i].used;
            i += 1;
        }
    }

    /// The next time after `t` that `node`'s usage goes down.
    fn next_drop(&self, node: usize, t: i64) -> Option<i64> {
        self.changes[node]
            .iter()
            .find(|c| c.at > t && c.kind != Kind::Start)
            .map(|c| c.at)
    }

    /// The state of `node` over `[t, t + d)` into the scratch copy: the
    /// node now, minus running jobs ended by `t`, plus every reservation
    /// that overlaps the interval.
    fn build(&mut self, node: usize, base: &NodeSlot, t: i64, d: i64) {
        let end = t.saturating_add(d);
        let mut s = base.clone();
        for c in &self.changes[node] {
            let Some(alloc) = self.allocs.get(c.alloc as usize) else {
                continue;
            };
            match c.kind {
                Kind::Release if c.at <= t => hold_one(&mut s, alloc, c.part as usize, false),
                Kind::Start if c.at < end && c.end > t => {
                    hold_one(&mut s, alloc, c.part as usize, true)
                }
                _ => {}
            }
        }
        self.scratch[node] = s;
    }

    /// Try to place `req` at `t` for `d` seconds on `nodes` (ranks in
    /// preference order), with `base` the nodes as they are now.
    pub fn place_at(
        &mut self,
        req: &Request,
        nodes: &[u32],
        base: &[NodeSlot],
        t: i64,
        d: i64,
    ) -> Option<Allocation> {
        for &r in nodes {
            if let Some(b) = base.get(r as usize) {
                self.build(r as usize, b, t, d);
            }
        }
        place(req, nodes, &self.scratch)
    }

    /// The earliest time in `[from, limit]` that `req` (at least
    /// `need.nodes` nodes, each with room for `need`) can hold what it
    /// needs of `candidates` for `d` seconds, with its allocation.
    /// `busy_first`: prefer nodes in use now (`bf_busy_nodes`); `exempt`:
    /// the fences that leave this job alone.
    ///
    /// Each node's earliest fitting start sits in a min-heap; the time
    /// moves forward to the next one, and only nodes passed over are
    /// looked at again, so a search costs one look at every candidate plus
    /// a few per node that comes free on the way.
    #[allow(clippy::too_many_arguments)]
    pub fn earliest(
        &mut self,
        req: &Request,
        need: &Need,
        candidates: &[u32],
        base: &[NodeSlot],
        from: i64,
        d: i64,
        limit: i64,
        busy_first: bool,
        exempt: Exempt,
    ) -> Option<(i64, Allocation)> {
        use std::cmp::Reverse;
        let k = need.nodes.max(1) as usize;
        if candidates.len() < k {
            return None;
        }
        // Preference order of each candidate, to hand placement its nodes
        // in the partition's order. Each entry: (time, position, rank,
        // exact); an inexact time is only a bound (no start sooner).
        //
        // Every candidate starts in the heap with the bound its flat
        // counts give (its first free CPU, or its first idle moment for a
        // job that needs all of it), and is looked at only when the search
        // reaches that time: a search that ends early never reads the
        // nodes busy until later. The answer is the one looking at every
        // node from the start would give.
        let mut entries = Vec::with_capacity(candidates.len());
        for (pos, &r) in candidates.iter().enumerate() {
            let n = r as usize;
            let Some(c) = self.cap.get(n) else {
                continue;
            };
            if !self.up[n] || c.cpus < i64::from(need.cpus) || c.gpus < need.gpus as i64 {
                continue;
            }
            let bound = if need.shares {
                from
            } else if need.whole || i64::from(need.cpus) >= c.cpus {
                self.free_idle[n]
            } else {
                self.free_any[n]
            };
            if bound <= limit {
                entries.push(Reverse((bound.max(from), pos, r, false)));
            }
        }
        let mut heap = Frontier::from(entries);
        let mut t = from;
        let mut ready: Vec<(usize, u32)> = Vec::new();
        loop {
            if t > limit || heap.len() + ready.len() < k {
                return None;
            }
            // Nodes passed over: where can they start from t on?
            for (pos, r) in ready.drain(..) {
                if let Some(f) = self.node_free_from(r as usize, need, t, d, limit, exempt) {
                    heap.push(Reverse((f, pos, r, true)));
                }
            }
            // The nodes free at t, in preference order (the heap's): the
            // first few are the usual answer, so the rest stay in the heap
            // until those fail (bf_busy_nodes reorders all of them, so it
            // takes all at once).
            let few = if busy_first { usize::MAX } else { k * 2 + 8 };
            self.pop_ready(&mut heap, &mut ready, t, few, (need, d, limit, exempt));
            if ready.len() >= k {
                let mut nodes: Vec<u32> = ready.iter().map(|&(_, r)| r).collect();
                if busy_first {
                    nodes.sort_by_key(|&r| self.cur[r as usize].cpus == 0);
                }
                let mut tried = self.place_at(req, &nodes[..nodes.len().min(few)], base, t, d);
                if tried.is_none() {
                    let before = ready.len();
                    self.pop_ready(
                        &mut heap,
                        &mut ready,
                        t,
                        usize::MAX,
                        (need, d, limit, exempt),
                    );
                    if ready.len() > before {
                        let nodes: Vec<u32> = ready.iter().map(|&(_, r)| r).collect();
                        tried = self.place_at(req, &nodes, base, t, d);
                    }
                }
                if let Some(a) = tried {
                    return Some((t, a));
                }
            }
            // Not yet: the next node to come free, or (enough nodes by
            // count, not by placement) the next release on a ready node.
            let next_free = heap.peek().map(|&Reverse((f, _, _, _))| f);
            let next_drop = if ready.len() >= k {
                ready
                    .iter()
                    .filter_map(|&(_, r)| self.next_drop(r as usize, t))
                    .min()
            } else {
                None
            };
            t = match (next_free, next_drop) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => return None,
            };
        }
    }

    /// Move the heap's nodes free at `t` into `ready` (in the heap's
    /// order: preference), up to `most` of them; entries older than `t`,
    /// or only bounds, are looked at again from `t` on the way.
    fn pop_ready(
        &self,
        heap: &mut Frontier,
        ready: &mut Vec<(usize, u32)>,
        t: i64,
        most: usize,
        (need, d, limit, exempt): (&Need, i64, i64, Exempt),
    ) {
        use std::cmp::Reverse;
        while let Some(&Reverse((f, pos, r, exact))) = heap.peek() {
            if f > t || ready.len() >= most {
                break;
            }
            heap.pop();
            if f < t || !exact {
                if let Some(f) = self.node_free_from(r as usize, need, t, d, limit, exempt) {
                    heap.push(Reverse((f, pos, r, true)));
                }
            } else {
                ready.push((pos, r));
            }
        }
    }

    /// Add (`sign` 1) or take away (−1) `node`'s free CPUs in the counts.
    fn count_free(&mut self, node: usize, sign: i64) {
        if !self.up[node] {
            return;
        }
        let free = (self.cap[node].cpus - self.cur[node].cpus).max(0);
        self.free_total += sign * free;
        if self.cur[node].cpus == 0 {
            self.idle = self.idle.saturating_add_signed(sign as i32);
        }
        let e = self.free_hist.entry(free).or_default();
        *e = e.saturating_add_signed(sign as i32);
        if *e == 0 {
            self.free_hist.remove(&free);
        }
    }

    /// Could a job needing `need` on each of its nodes and `cpus` in all
    /// start now, by the counts of free CPUs alone? (No: it cannot.)
    pub fn may_start_now(&self, need: &Need, cpus: u64) -> bool {
        if need.shares {
            return true;
        }
        if self.free_total < i64::try_from(cpus).unwrap_or(i64::MAX) {
            return false;
        }
        if need.whole {
            return self.idle >= need.nodes;
        }
        let roomy: u32 = self
            .free_hist
            .range(i64::from(need.cpus)..)
            .map(|(_, &n)| n)
            .sum();
        roomy >= need.nodes
    }

    /// Is any CPU of `node` free now (the nodes worth trying for a start now)?
    pub fn has_room_now(&self, node: usize) -> bool {
        self.up.get(node).copied().unwrap_or(false) && self.cap[node].cpus > self.cur[node].cpus
    }

    pub fn now(&self) -> i64 {
        self.now
    }
}

/// Hold (or give back) the `i`-th node share of `alloc` on one slot. A
/// count GRES held by two reservations over one interval is summed (more
/// than any one instant holds: safe); CPUs and devices are a union.
fn hold_one(s: &mut NodeSlot, alloc: &Allocation, i: usize, hold: bool) {
    crate::sched::share::hold_node(s, alloc, i, hold, false);
}
