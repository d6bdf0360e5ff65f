//! Pure scheduling: turning a job's resource request into an allocation over
//! nodes with consumable CPUs and memory. No I/O, no clock, no actors: the
//! controller actor owns the tables and calls these functions.
//!
//! Placement is FIFO-friendly and deterministic: nodes are tried in rank
//! (configuration) order, so jobs pack onto the first nodes, like Slurm's
//! default with equal node weights.

pub mod array;

pub mod features;
pub mod gate;
#[cfg(test)]
mod part_tests;
pub mod pass;
pub mod placement;
pub mod preempt;
pub mod priority;
pub mod resv_gate;
pub mod share;
#[cfg(test)]
mod share_tests;
pub mod table;

pub use placement::{CrParams, CrUnit, GresDev, GresKind, GresSlot, IdSet, Layout};

use crate::model::job::Allocation;
use crate::model::job::JobSubmit;

/// What the scheduler knows about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlot {
    pub cpus: u32,
    pub mem_mb: u64,
    pub alloc_cpus: u32,
    pub alloc_mem_mb: u64,
    /// Up, registered and not drained.
    pub available: bool,
    /// Sockets, cores and threads, for CPUs by identity.
    pub layout: Layout,
    /// Abstract CPU ids held by running jobs.
    pub used: IdSet,
    /// The node's generic resources and which are held.
    pub gres: Vec<GresSlot>,
    /// CPUs shared by jobs of `OverSubscribe=YES`/`FORCE` partitions.
    pub share: Option<Box<share::NodeShare>>,
    /// CPUs held here by the jobs of each partition that sets `MaxCPUsPerNode`.
    pub part_cpus: Vec<(String, u32)>,
}

impl NodeSlot {
    /// CPUs the jobs of partition `part` hold here (counted for `MaxCPUsPerNode` only).
    pub fn part_cpus(&self, part: &str) -> u32 {
        self.part_cpus
            .iter()
            .find(|(p, _)| p == part)
            .map_or(0, |(_, n)| *n)
    }

    /// A node of `cpus` CPUs (one core each) and `mem_mb`, nothing held.
    pub fn plain(cpus: u32, mem_mb: u64) -> NodeSlot {
        NodeSlot {
            cpus,
            mem_mb,
            alloc_cpus: 0,
            alloc_mem_mb: 0,
            available: true,
            layout: Layout::of(cpus, 1, cpus, 1),
            used: IdSet::default(),
            gres: Vec::new(),
            share: None,
            part_cpus: Vec::new(),
        }
    }

    /// A configured node, nothing held, not yet available.
    pub fn for_node(
        nc: &crate::config::NodeConf,
        gres: Option<&crate::config::NodeGres>,
    ) -> NodeSlot {
        NodeSlot {
            cpus: nc.cpus,
            mem_mb: nc.real_memory_mb,
            alloc_cpus: 0,
            alloc_mem_mb: 0,
            available: false,
            layout: Layout::of(
                nc.cpus,
                nc.sockets,
                nc.cores_per_socket,
                nc.threads_per_core,
            ),
            used: IdSet::default(),
            gres: gres.map(gres_slots).unwrap_or_default(),
            share: None,
            part_cpus: Vec::new(),
        }
    }

    fn free_cpus(&self) -> u32 {
        self.cpus.saturating_sub(self.alloc_cpus)
    }
    fn free_mem(&self) -> u64 {
        self.mem_mb.saturating_sub(self.alloc_mem_mb)
    }
}

/// A node's configured GRES (slurm.conf `Gres=` filled in from gres.conf)
/// as slots: devices by (name, type) with their indices and cores, pools
/// as counts.
fn gres_slots(g: &crate::config::NodeGres) -> Vec<GresSlot> {
    let mut out: Vec<GresSlot> = Vec::new();
    for d in &g.devices {
        let dev = GresDev {
            index: d.index,
            cores: d.cores.clone(),
            used: false,
        };
        match out
            .iter_mut()
            .find(|s| s.name == d.name && s.type_ == d.type_)
        {
            Some(GresSlot {
                kind: GresKind::Devices(devs),
                ..
            }) => devs.push(dev),
            _ => out.push(GresSlot {
                name: d.name.clone(),
                type_: d.type_.clone(),
                kind: GresKind::Devices(vec![dev]),
            }),
        }
    }
    out.extend(g.pools.iter().map(|p| GresSlot {
        name: p.name.clone(),
        type_: p.type_.clone(),
        kind: GresKind::Count {
            total: p.count,
            used: 0,
            no_consume: p.no_consume,
        },
    }));
    out
}

/// A job's resource request in normalised form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Exact node count if the user gave `-N`.
    pub nodes: Option<u32>,
    pub ntasks: u32,
    pub cpus_per_task: u32,
    pub ntasks_per_node: Option<u32>,
    pub mem: MemRequest,
    /// `-w`: ranks the allocation must include.
    pub required: Vec<u32>,
    /// `-x`: ranks the allocation must not include.
    pub excluded: Vec<u32>,
    /// `--exclusive`: whole nodes, shared with no other job.
    pub exclusive: bool,
    /// `--constraint`: the node sets (sorted ranks) the job may use; with a
    /// matching OR, one per alternative, and all its nodes from one of them.
    pub node_sets: Option<Vec<Vec<u32>>>,
    /// GRES, GPUs, shape (`model::tres`).
    pub res: crate::model::tres::ResourceRequest,
    /// `SelectTypeParameters`.
    pub cr: CrParams,
    /// The partition's `MaxCPUsPerNode`: CPUs the partition's jobs may hold on one node,
    /// all together (`cap_part` names the partition they are counted under).
    pub max_cpus_per_node: Option<u32>,
    pub cap_part: Option<String>,
    /// The partition's `LLN` (or `CR_LLN`): least loaded nodes first.
    pub lln: bool,
    /// The job's partition shares CPUs (`OverSubscribe=YES`/`FORCE`): its
    /// name and the jobs per CPU this job allows (1: it does not share).
    pub share: Option<crate::model::job::ShareTag>,
}

/// A `-w`/`-x` list names a node the configuration does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownNode(pub String);

/// Why a job's request cannot be read against this cluster's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    UnknownNode(UnknownNode),
    Constraint(features::ConstraintError),
}

impl From<UnknownNode> for RequestError {
    fn from(e: UnknownNode) -> Self {
        RequestError::UnknownNode(e)
    }
}

/// How the scheduler finds nodes: by name (`-w`, `-x`) and by feature.
pub trait NodeDirectory {
    fn index(&self, name: &str) -> Option<usize>;
    /// The features of the node at `rank`.
    fn features(&self, rank: u32) -> &[String];
    fn count(&self) -> usize;
    /// `SelectTypeParameters`.
    fn cr(&self) -> CrParams {
        CrParams::default()
    }
    /// The settings of the partition called `name` (`None`: the default
    /// partition, for records from before the name was kept).
    fn partition_opts(&self, _name: Option<&str>) -> Option<&crate::model::part_opts::PartOpts> {
        None
    }
}

/// A bare name lookup: nodes without features (tests, simple callers).
impl<F: Fn(&str) -> Option<usize>> NodeDirectory for F {
    fn index(&self, name: &str) -> Option<usize> {
        self(name)
    }
    fn features(&self, _rank: u32) -> &[String] {
        &[]
    }
    fn count(&self) -> usize {
        0
    }
}

impl NodeDirectory for crate::config::Config {
    fn index(&self, name: &str) -> Option<usize> {
        self.node_index(name)
    }
    fn features(&self, rank: u32) -> &[String] {
        self.nodes
            .get(rank as usize)
            .map_or(&[], |n| n.features.as_slice())
    }
    fn count(&self) -> usize {
        self.nodes.len()
    }
    fn cr(&self) -> CrParams {
        self.select_params
    }
    fn partition_opts(&self, name: Option<&str>) -> Option<&crate::model::part_opts::PartOpts> {
        match name {
            Some(n) => self.partitions.iter().find(|p| p.name == n),
            None => crate::policy::admission::default_partition(self),
        }
        .map(|p| &p.opts)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemRequest {
    /// No memory asked: none is consumed.
    None,
    /// Per node; 0 means all of each node's memory.
    PerNode(u64),
    PerCpu(u64),
    /// `--mem-per-gpu`: times the GPUs held on each node.
    PerGpu(u64),
}

impl Request {
    pub fn from_submit(s: &JobSubmit) -> Request {
        let nodes = s.min_nodes;
        let ntasks = s
            .ntasks
            .unwrap_or_else(|| nodes.unwrap_or(1).max(1) * s.ntasks_per_node.unwrap_or(1).max(1));
        let mem = match (s.mem_per_node_mb, s.mem_per_cpu_mb) {
            (Some(m), _) => MemRequest::PerNode(m),
            (None, Some(m)) => MemRequest::PerCpu(m),
            (None, None) if let Some(m) = s.resources.mem_per_gpu_mb => MemRequest::PerGpu(m),
            // An exclusive job holds its nodes' memory too, as in Slurm.
            (None, None) if s.exclusive.is_some() => MemRequest::PerNode(0),
            (None, None) => MemRequest::None,
        };
        Request {
            nodes,
            ntasks: ntasks.max(1),
            cpus_per_task: s.cpus_per_task.unwrap_or(1).max(1),
            ntasks_per_node: s.ntasks_per_node,
            mem,
            required: Vec::new(),
            excluded: Vec::new(),
            exclusive: s.exclusive.is_some(),
            node_sets: None,
            res: s.resources.clone(),
            cr: CrParams::default(),
            max_cpus_per_node: None,
            cap_part: None,
            lln: false,
            share: None,
        }
    }

    /// As [`Request::from_submit`], with `-w`/`-x` resolved to ranks and
    /// `--constraint` to node sets through `nodes`. Naming nodes makes the
    /// job use at least that many.
    pub fn for_job(s: &JobSubmit, nodes: &dyn NodeDirectory) -> Result<Request, RequestError> {
        let mut req = Request::from_submit(s);
        req.cr = nodes.cr();
        let opts = nodes.partition_opts(s.partition.as_deref());
        req.max_cpus_per_node = opts.and_then(|o| o.max_cpus_per_node);
        req.cap_part = req
            .max_cpus_per_node
            .map(|_| s.partition.clone().unwrap_or_default());
        req.lln = req.cr.lln || opts.is_some_and(|o| o.lln);
        // Only YES/FORCE partitions with N > 1 keep rows of shares; an
        // exclusive job holds whole nodes and never shares.
        req.share = opts
            .filter(|o| o.oversubscribe.share_limit(true) > 1)
            .map(|o| crate::model::job::ShareTag {
                part: s.partition.clone().unwrap_or_default(),
                limit: if req.exclusive {
                    1
                } else {
                    o.oversubscribe.share_limit(s.oversubscribe)
                },
            });
        let node_index = |n: &str| nodes.index(n);
        let ranks = |list: &Option<String>| -> Result<Vec<u32>, UnknownNode> {
            let mut out = match list {
                Some(list) => node_ranks(list, &node_index)?,
                None => Vec::new(),
            };
            out.sort_unstable();
            out.dedup();
            Ok(out)
        };
        req.required = ranks(&s.req_nodes)?;
        req.excluded = ranks(&s.exc_nodes)?;
        if let Some(text) = &s.constraint {
            let parsed = features::Constraint::parse(text).map_err(RequestError::Constraint)?;
            if let Some(c) = parsed {
                let known = |f: &str| {
                    (0..nodes.count() as u32).any(|r| nodes.features(r).iter().any(|g| g == f))
                };
                if !c.features().into_iter().all(known) {
                    return Err(RequestError::Constraint(features::ConstraintError::Invalid));
                }
                req.node_sets = Some(c.node_sets(nodes.count(), |r| nodes.features(r)));
            }
        }
        if !req.required.is_empty() {
            let named = req.required.len() as u32;
            req.nodes = Some(req.nodes.unwrap_or(0).max(named));
        }
        Ok(req)
    }

    /// The nodes of `ranks` this request may use, in preference order:
    /// named nodes first, excluded ones left out.
    pub fn candidates<'a>(&self, ranks: &'a [u32]) -> std::borrow::Cow<'a, [u32]> {
        if self.required.is_empty() && self.excluded.is_empty() {
            return std::borrow::Cow::Borrowed(ranks);
        }
        let named = ranks
            .iter()
            .filter(|r| self.required.binary_search(r).is_ok());
        let rest = ranks.iter().filter(|r| {
            self.required.binary_search(r).is_err() && self.excluded.binary_search(r).is_err()
        });
        std::borrow::Cow::Owned(named.chain(rest).copied().collect())
    }

    /// Every named node is one of `ranks` and none is also excluded.
    pub fn named_nodes_fit(&self, ranks: &[u32]) -> bool {
        self.required
            .iter()
            .all(|r| ranks.contains(r) && self.excluded.binary_search(r).is_err())
    }

    /// The fewest nodes this request can use.
    pub fn min_nodes(&self) -> u32 {
        match (self.nodes, self.ntasks_per_node) {
            (Some(n), _) => n.max(1),
            (None, Some(per)) if per > 0 => self.ntasks.div_ceil(per),
            _ => 1,
        }
    }

    fn mem_on(&self, node: &NodeSlot, cpus: u32, gpus: u64) -> u64 {
        match self.mem {
            MemRequest::None => 0,
            MemRequest::PerNode(0) => node.mem_mb,
            MemRequest::PerNode(m) => m,
            MemRequest::PerCpu(m) => m.saturating_mul(u64::from(cpus)),
            MemRequest::PerGpu(m) => m.saturating_mul(gpus),
        }
    }

    /// Tasks that fit on a node with `cpus` free CPUs.
    fn tasks_fitting(&self, cpus: u32) -> u32 {
        let t = cpus / self.cpus_per_task;
        match self.ntasks_per_node {
            Some(per) if per > 0 => t.min(per),
            _ => t,
        }
    }
}

/// The configured ranks of a hostlist's nodes, in the list's order.
pub fn node_ranks(
    list: &str,
    node_index: &dyn Fn(&str) -> Option<usize>,
) -> Result<Vec<u32>, UnknownNode> {
    let names = crate::config::hostlist::expand(list).map_err(|_| UnknownNode(list.to_string()))?;
    names
        .into_iter()
        .map(|n| node_index(&n).map(|r| r as u32).ok_or(UnknownNode(n)))
        .collect()
}

/// Why a request can never run on a partition, whatever else is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Infeasible {
    /// More nodes than the partition has.
    TooManyNodes,
    /// No combination of the partition's nodes has enough CPUs/memory.
    NodeConfig,
}

/// `candidates` narrowed to each of the request's constraint node sets (one
/// list, all of them, without a constraint).
fn restricted<'a>(req: &Request, candidates: &'a [u32]) -> Vec<std::borrow::Cow<'a, [u32]>> {
    match &req.node_sets {
        None => vec![std::borrow::Cow::Borrowed(candidates)],
        Some(sets) => sets
            .iter()
            .map(|set| {
                std::borrow::Cow::Owned(
                    candidates
                        .iter()
                        .copied()
                        .filter(|r| set.binary_search(r).is_ok())
                        .collect(),
                )
            })
            .collect(),
    }
}

/// Try to place `req` on the `candidates` (ranks, in preference order) given the
/// current `slots`. Returns the allocation without applying it.
pub fn place(req: &Request, candidates: &[u32], slots: &[NodeSlot]) -> Option<Allocation> {
    restricted(req, candidates)
        .iter()
        .find_map(|c| place_in(req, c, slots))
}

fn place_in(req: &Request, candidates: &[u32], slots: &[NodeSlot]) -> Option<Allocation> {
    let ranks = req.candidates(candidates);
    // Idle CPUs first; a sharing job then tries CPUs its partition's
    // sharing jobs hold (cons_tres's step 1, then its rows).
    let mut alloc = place_with(req, &ranks, slots, false, false).or_else(|| {
        req.share
            .as_ref()
            .filter(|t| t.shares() && !req.exclusive)
            .and_then(|_| place_with(req, &ranks, slots, false, true))
    })?;
    if !req.required.is_empty() {
        // Named nodes were tried first; the job still sees its nodes in
        // configuration order (task 0 on the first), as in Slurm.
        let mut order: Vec<usize> = (0..alloc.ranks.len()).collect();
        order.sort_by_key(|&i| alloc.ranks[i]);
        let by = |v: &Vec<u32>| order.iter().map(|&i| v[i]).collect::<Vec<_>>();
        alloc.ranks = by(&alloc.ranks);
        alloc.cpus = by(&alloc.cpus);
        alloc.tasks = by(&alloc.tasks);
        alloc.cpu_ids = order.iter().map(|&i| alloc.cpu_ids[i].clone()).collect();
        alloc.gres = order.iter().map(|&i| alloc.gres[i].clone()).collect();
    }
    Some(alloc)
}

/// Could `req` ever run on `candidates` if they were all idle and up?
pub fn feasible(req: &Request, candidates: &[u32], slots: &[NodeSlot]) -> Result<(), Infeasible> {
    let mut why = Infeasible::NodeConfig;
    for c in restricted(req, candidates) {
        match feasible_in(req, &c, slots) {
            Ok(()) => return Ok(()),
            Err(e) => why = e,
        }
    }
    Err(why)
}

fn feasible_in(req: &Request, candidates: &[u32], slots: &[NodeSlot]) -> Result<(), Infeasible> {
    if !req.named_nodes_fit(candidates) {
        return Err(Infeasible::NodeConfig);
    }
    let candidates = req.candidates(candidates);
    if req.min_nodes() as usize > candidates.len() {
        return Err(Infeasible::TooManyNodes);
    }
    place_with(req, &candidates, slots, true, false)
        .map(|_| ())
        .ok_or(Infeasible::NodeConfig)
}

/// Place `req` on `candidates` in order. `idle`: as if every node were up
/// and empty ("could it ever run"); `overlap`: a sharing job may take CPUs
/// other sharing jobs hold ([`share::view`]).
fn place_with(
    req: &Request,
    candidates: &[u32],
    slots: &[NodeSlot],
    idle: bool,
    overlap: bool,
) -> Option<Allocation> {
    // LLN: the nodes with the most idle CPUs first (stable, so ties keep
    // the partition's order), as select/cons_tres's least-loaded-node
    // mode; named nodes keep their place at the front.
    let by_load: Vec<u32>;
    let candidates = if req.lln && !idle && req.required.is_empty() {
        let mut v = candidates.to_vec();
        v.sort_by_key(|&r| std::cmp::Reverse(slots.get(r as usize).map_or(0, NodeSlot::free_cpus)));
        by_load = v;
        &by_load[..]
    } else {
        candidates
    };
    // MaxCPUsPerNode: what one node may still give the partition's jobs (all of it when
    // asking whether the job could ever run).
    let cap = |cpus: u32, s: &NodeSlot| {
        req.max_cpus_per_node.map_or(cpus, |m| {
            let held = match &req.cap_part {
                Some(p) if !idle => s.part_cpus(p),
                _ => 0,
            };
            cpus.min(m.saturating_sub(held))
        })
    };
    // An exclusive job takes only nodes nothing else runs on.
    let usable = |s: &NodeSlot| {
        idle || (s.available && (!req.exclusive || s.alloc_cpus == 0) && !share::barred(req, s))
    };
    // What the job may take of a node: its CPUs held by others, its free count.
    let view = |s| share::view_of(req, s, idle, overlap);
    // Without `_Memory` in SelectTypeParameters memory only filters nodes.
    let mem_of = |s: &NodeSlot| {
        if idle || !req.cr.memory {
            s.mem_mb
        } else {
            s.free_mem()
        }
    };
    let mut alloc = Allocation::default();
    // One memory figure holds on every node of an allocation (what the
    // job is told and what each node reserves), so a node is taken only if
    // it, and every node taken before it, has room for the largest share
    // so far. N.B. a mem-per-cpu job with more tasks on its first node
    // needs that node's share everywhere.
    let mut min_free = u64::MAX;
    // `--gpus=N` is for the whole job: nodes give what they can, in order.
    let mut gpus_left = req.res.gpus.as_ref().map_or(0, |g| g.count);
    let cpt = req.cpus_per_task;
    let mut take = |alloc: &mut Allocation,
                    rank: u32,
                    slot: &NodeSlot,
                    (used, free): (&IdSet, u32),
                    tasks: u32|
     -> bool {
        // Too few CPUs left for the tasks at all: no need to pick any (a
        // full node costs one comparison, not a placement).
        if free < tasks.saturating_mul(cpt) {
            return false;
        }
        let share = req.res.gpus.as_ref().filter(|_| gpus_left > 0).map(|g| {
            let free: u64 = slot
                .gres
                .iter()
                .filter(|s| s.name == g.name && (g.type_.is_none() || s.type_ == g.type_))
                .map(|s| {
                    if idle {
                        s.total()
                    } else {
                        s.total().saturating_sub(s.used())
                    }
                })
                .sum();
            crate::model::tres::GresRequest {
                count: free.min(gpus_left),
                ..g.clone()
            }
        });
        let share = share.filter(|g| g.count > 0);
        let ask = placement::Ask {
            tasks,
            cpus_per_task: cpt,
            res: &req.res,
            gres: &req.res.gres,
            exclusive: req.exclusive,
            cr: req.cr,
        };
        let Some(pick) = placement::pick(&ask, slot.layout, used, &slot.gres, idle, share.as_ref())
        else {
            return false;
        };
        let cpus = if req.exclusive {
            free.max(pick.cpu_ids.len() as u32)
        } else {
            pick.cpu_ids.len() as u32
        };
        if free < cpus || (!req.exclusive && cap(cpus, slot) < cpus) {
            return false;
        }
        let gpus: u64 = pick
            .gres
            .iter()
            .filter(|g| g.name == "gpu")
            .map(|g| g.count)
            .sum();
        let mem = req.mem_on(slot, cpus, gpus).max(alloc.mem_mb);
        if mem_of(slot) < mem || min_free < mem {
            return false;
        }
        if let Some(g) = &share {
            gpus_left -= g.count;
        }
        alloc.ranks.push(rank);
        alloc.cpus.push(cpus);
        alloc.tasks.push(tasks);
        alloc.cpu_ids.push(pick.cpu_ids);
        alloc.gres.push(pick.gres);
        alloc.mem_mb = mem;
        alloc.share = req.share.clone();
        alloc.cap_part = req.cap_part.clone();
        min_free = min_free.min(mem_of(slot));
        true
    };
    match req.nodes {
        Some(n) => {
            // Exactly n nodes; tasks spread in blocks, earlier nodes taking the remainder.
            let n = n.max(1);
            let base = req.ntasks / n;
            let extra = req.ntasks % n;
            for &rank in candidates {
                if alloc.ranks.len() as u32 == n {
                    break;
                }
                let Some(slot) = slots.get(rank as usize) else {
                    continue;
                };
                let i = alloc.ranks.len() as u32;
                let tasks = (base + u32::from(i < extra)).max(1);
                if req
                    .ntasks_per_node
                    .is_some_and(|per| per > 0 && tasks > per)
                {
                    continue;
                }
                if usable(slot) {
                    let (used, free) = view(slot);
                    take(
                        &mut alloc,
                        rank,
                        slot,
                        (&used, free),
                        tasks.min(req.ntasks.max(1)),
                    );
                }
            }
            let named = req.required.iter().all(|r| alloc.ranks.contains(r));
            (alloc.ranks.len() as u32 == n && named && gpus_left == 0).then_some(alloc)
        }
        None => {
            // Fill nodes in order with as many tasks as fit (block distribution).
            let mut left = req.ntasks;
            for &rank in candidates {
                if left == 0 {
                    break;
                }
                let Some(slot) = slots.get(rank as usize) else {
                    continue;
                };
                if !usable(slot) {
                    continue;
                }
                let (used, free) = view(slot);
                let by_cores =
                    placement::tasks_by_cores(slot.layout, &used, idle, cpt, &req.res, req.cr);
                let mut tasks = req.tasks_fitting(cap(free, slot)).min(by_cores).min(left);
                // GPUs per task bound the tasks as cores do (cheaply, so
                // that a request no node can meet costs one look per node).
                if let Some(g) = req.res.gpus_per_task.as_ref().filter(|g| g.count > 0) {
                    let free: u64 = slot
                        .gres
                        .iter()
                        .filter(|s| s.name == g.name && (g.type_.is_none() || s.type_ == g.type_))
                        .map(|s| {
                            if idle {
                                s.total()
                            } else {
                                s.total().saturating_sub(s.used())
                            }
                        })
                        .sum();
                    tasks = tasks.min(u32::try_from(free / g.count).unwrap_or(u32::MAX));
                }
                // Other GRES or CPUs per GPU may fit fewer still: step down
                // (a few tries, then the next node).
                let mut tries = 0;
                while tasks > 0 && tries < 8 {
                    if take(&mut alloc, rank, slot, (&used, free), tasks) {
                        left -= tasks;
                        break;
                    }
                    tasks -= 1;
                    tries += 1;
                }
            }
            (left == 0 && gpus_left == 0).then_some(alloc)
        }
    }
}

/// When and where `req` could start (`--test-only`): now if it fits, else
/// as soon as enough running allocations have ended, taking each to end at
/// its time limit (`running`: expected end and allocation; jobs without a
/// limit never end). Pending jobs are not counted, as in Slurm's will-run
/// test. `None`: not before every limited job has ended.
pub fn earliest_start(
    req: &Request,
    candidates: &[u32],
    slots: &[NodeSlot],
    running: &mut [(i64, &Allocation)],
    now: i64,
) -> Option<(i64, Allocation)> {
    let mut slots = slots.to_vec();
    if let Some(a) = place(req, candidates, &slots) {
        return Some((now, a));
    }
    running.sort_by_key(|(end, _)| *end);
    for (end, alloc) in running.iter() {
        release(alloc, &mut slots);
        if let Some(a) = place(req, candidates, &slots) {
            return Some(((*end).max(now), a));
        }
    }
    None
}

/// Mark an allocation's resources used.
pub fn apply(alloc: &Allocation, slots: &mut [NodeSlot]) {
    for (i, &rank) in alloc.ranks.iter().enumerate() {
        if let Some(s) = slots.get_mut(rank as usize) {
            share::hold_node(s, alloc, i, true, false);
        }
    }
}

/// Give an allocation's resources back.
pub fn release(alloc: &Allocation, slots: &mut [NodeSlot]) {
    for (i, &rank) in alloc.ranks.iter().enumerate() {
        if let Some(s) = slots.get_mut(rank as usize) {
            share::hold_node(s, alloc, i, false, false);
        }
    }
}

/// Give back only an allocation's CPUs: a job suspended for a preemptor
/// keeps its memory and GRES.
pub fn release_cpus(alloc: &Allocation, slots: &mut [NodeSlot]) {
    for (i, &rank) in alloc.ranks.iter().enumerate() {
        if let Some(s) = slots.get_mut(rank as usize) {
            share::hold_node(s, alloc, i, false, true);
        }
    }
}

/// Hold (`true`) or give back CPUs on node `rank`: `ids` by identity,
/// `count` in the node's count; `part`: the job's `MaxCPUsPerNode` partition
/// (`Allocation::cap_part`), whose count follows the CPUs held.
pub fn hold_cpus(
    rank: u32,
    ids: &[u32],
    count: u32,
    slots: &mut [NodeSlot],
    hold: bool,
    part: Option<&str>,
) {
    if let Some(s) = slots.get_mut(rank as usize) {
        if let Some(p) = part {
            share::count_part(s, p, count, hold);
        }
        s.alloc_cpus = if hold {
            s.alloc_cpus.saturating_add(count)
        } else {
            s.alloc_cpus.saturating_sub(count)
        };
        placement::hold(&mut s.used, &mut s.gres, ids, &[], hold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(n: usize, cpus: u32, mem: u64) -> Vec<NodeSlot> {
        (0..n).map(|_| NodeSlot::plain(cpus, mem)).collect()
    }

    fn req(nodes: Option<u32>, ntasks: u32, cpt: u32, mem: MemRequest) -> Request {
        Request {
            nodes,
            ntasks,
            cpus_per_task: cpt,
            ntasks_per_node: None,
            required: Vec::new(),
            excluded: Vec::new(),
            mem,
            exclusive: false,
            node_sets: None,
            res: Default::default(),
            cr: CrParams::default(),
            max_cpus_per_node: None,
            cap_part: None,
            lln: false,
            share: None,
        }
    }

    fn submit(w: Option<&str>, x: Option<&str>, nodes: Option<u32>) -> JobSubmit {
        JobSubmit {
            req_nodes: w.map(str::to_string),
            exc_nodes: x.map(str::to_string),
            min_nodes: nodes,
            ..JobSubmit::default()
        }
    }

    /// Nodes `n0`..`n3` at ranks 0..3.
    fn index(name: &str) -> Option<usize> {
        name.strip_prefix('n')?
            .parse()
            .ok()
            .filter(|&i: &usize| i < 4)
    }

    #[test]
    fn named_nodes_are_used_and_excluded_ones_never() {
        let s = slots(4, 2, 1000);
        let all = [0, 1, 2, 3];
        // -w n2: one node, that one.
        let r = Request::for_job(&submit(Some("n2"), None, None), &index).unwrap();
        assert_eq!(place(&r, &all, &s).unwrap().ranks, vec![2]);
        // -N2 -w n3: the named node plus the first free one, in node order.
        let r = Request::for_job(&submit(Some("n3"), None, Some(2)), &index).unwrap();
        assert_eq!(place(&r, &all, &s).unwrap().ranks, vec![0, 3]);
        // -w n[1-2] asks for two nodes even without -N.
        let r = Request::for_job(&submit(Some("n[1-2]"), None, None), &index).unwrap();
        assert_eq!(place(&r, &all, &s).unwrap().ranks, vec![1, 2]);
        // -N3 -x n0,n1: only two nodes left, so never.
        let r = Request::for_job(&submit(None, Some("n0,n1"), Some(3)), &index).unwrap();
        assert!(place(&r, &all, &s).is_none());
        assert_eq!(feasible(&r, &all, &s), Err(Infeasible::TooManyNodes));
        // A named node that is busy blocks the job rather than being swapped.
        let mut busy = s.clone();
        busy[2].alloc_cpus = 2;
        let r = Request::for_job(&submit(Some("n2"), None, None), &index).unwrap();
        assert!(place(&r, &all, &busy).is_none());
        assert_eq!(feasible(&r, &all, &busy), Ok(()));
        // Named and excluded at once, or named outside the partition: never.
        let r = Request::for_job(&submit(Some("n1"), Some("n1"), None), &index).unwrap();
        assert_eq!(feasible(&r, &all, &s), Err(Infeasible::NodeConfig));
        let r = Request::for_job(&submit(Some("n3"), None, None), &index).unwrap();
        assert_eq!(feasible(&r, &[0, 1], &s), Err(Infeasible::NodeConfig));
        // Unknown names are reported.
        assert_eq!(
            Request::for_job(&submit(Some("n7"), None, None), &index),
            Err(RequestError::UnknownNode(UnknownNode("n7".into())))
        );
    }

    #[test]
    fn exclusive_jobs_take_whole_idle_nodes_and_constraints_narrow_them() {
        let mut s = slots(3, 4, 1000);
        s[0].alloc_cpus = 1;
        let mut r = req(None, 1, 1, MemRequest::None);
        r.exclusive = true;
        // Node 0 has three free CPUs, but it is not idle.
        let a = place(&r, &[0, 1, 2], &s).unwrap();
        assert_eq!((a.ranks, a.cpus), (vec![1], vec![4]));
        // With a matching OR, every node comes from one alternative.
        let mut r = req(Some(2), 2, 1, MemRequest::None);
        r.node_sets = Some(vec![vec![0, 1], vec![1, 2]]);
        s[0].available = false;
        assert_eq!(place(&r, &[0, 1, 2], &s).unwrap().ranks, vec![1, 2]);
        r.node_sets = Some(vec![vec![0, 1]]);
        assert!(place(&r, &[0, 1, 2], &s).is_none());
        assert!(feasible(&r, &[0, 1, 2], &s).is_ok());
        r.node_sets = Some(vec![vec![0]]);
        assert_eq!(feasible(&r, &[0, 1, 2], &s), Err(Infeasible::TooManyNodes));
    }

    #[test]
    fn earliest_start_waits_for_enough_running_jobs_to_end() {
        let mut s = slots(2, 2, 1000);
        let all = [0, 1];
        let whole = |n| Allocation {
            ranks: vec![n],
            cpus: vec![2],
            tasks: vec![2],
            mem_mb: 0,
            ..Default::default()
        };
        let (a0, a1) = (whole(0), whole(1));
        apply(&a0, &mut s);
        apply(&a1, &mut s);
        let two_nodes = req(Some(2), 2, 1, MemRequest::None);
        let one = req(None, 1, 1, MemRequest::None);
        // Ends at 500 and 300: one node frees at 300, both at 500.
        let mut running = vec![(500, &a0), (300, &a1)];
        let (t, a) = earliest_start(&one, &all, &s, &mut running, 100).unwrap();
        assert_eq!((t, a.ranks), (300, vec![1]));
        let (t, _) = earliest_start(&two_nodes, &all, &s, &mut running, 100).unwrap();
        assert_eq!(t, 500);
        // Free now: now. No limited job to wait for: never.
        assert_eq!(
            earliest_start(&one, &all, &slots(2, 2, 1000), &mut [], 100).map(|w| w.0),
            Some(100)
        );
        assert!(earliest_start(&one, &all, &s, &mut [], 100).is_none());
    }

    #[test]
    fn tasks_pack_onto_first_nodes() {
        let s = slots(4, 2, 1000);
        let a = place(&req(None, 3, 1, MemRequest::None), &[0, 1, 2, 3], &s).unwrap();
        assert_eq!(a.ranks, vec![0, 1]);
        assert_eq!(a.tasks, vec![2, 1]);
        assert_eq!(a.cpus, vec![2, 1]);
    }

    #[test]
    fn exact_node_count_spreads_tasks() {
        let s = slots(4, 4, 1000);
        let a = place(
            &req(Some(3), 4, 1, MemRequest::PerNode(100)),
            &[0, 1, 2, 3],
            &s,
        )
        .unwrap();
        assert_eq!(a.ranks, vec![0, 1, 2]);
        assert_eq!(a.tasks, vec![2, 1, 1]);
        assert_eq!(a.mem_mb, 100);
    }

    #[test]
    fn consumed_resources_block_until_released() {
        let mut s = slots(2, 2, 1000);
        let r = req(Some(2), 4, 1, MemRequest::PerCpu(100));
        let a = place(&r, &[0, 1], &s).unwrap();
        assert_eq!(a.mem_mb, 200);
        apply(&a, &mut s);
        assert!(place(&req(None, 1, 1, MemRequest::None), &[0, 1], &s).is_none());
        release(&a, &mut s);
        assert!(place(&req(None, 1, 1, MemRequest::None), &[0, 1], &s).is_some());
    }

    #[test]
    fn memory_is_consumable() {
        let mut s = slots(1, 8, 1000);
        let a = place(&req(None, 1, 1, MemRequest::PerNode(800)), &[0], &s).unwrap();
        apply(&a, &mut s);
        assert!(place(&req(None, 1, 1, MemRequest::PerNode(300)), &[0], &s).is_none());
        assert!(place(&req(None, 1, 1, MemRequest::PerNode(200)), &[0], &s).is_some());
        // --mem=0 wants the whole node's memory.
        assert!(place(&req(None, 1, 1, MemRequest::PerNode(0)), &[0], &s).is_none());
    }

    #[test]
    fn unavailable_nodes_are_skipped() {
        let mut s = slots(3, 1, 100);
        s[0].available = false;
        let a = place(&req(Some(2), 2, 1, MemRequest::None), &[0, 1, 2], &s).unwrap();
        assert_eq!(a.ranks, vec![1, 2]);
    }

    #[test]
    fn feasibility_ignores_current_load_but_not_shape() {
        let mut s = slots(2, 2, 100);
        s[0].alloc_cpus = 2;
        s[1].available = false;
        assert_eq!(
            feasible(&req(Some(2), 2, 1, MemRequest::None), &[0, 1], &s),
            Ok(())
        );
        assert_eq!(
            feasible(&req(Some(3), 3, 1, MemRequest::None), &[0, 1], &s),
            Err(Infeasible::TooManyNodes)
        );
        assert_eq!(
            feasible(&req(Some(1), 1, 4, MemRequest::None), &[0, 1], &s),
            Err(Infeasible::NodeConfig)
        );
        assert_eq!(
            feasible(&req(None, 1, 1, MemRequest::PerNode(500)), &[0, 1], &s),
            Err(Infeasible::NodeConfig)
        );
    }

    #[test]
    fn ntasks_per_node_caps_packing() {
        let s = slots(3, 8, 100);
        let mut r = req(None, 4, 1, MemRequest::None);
        r.ntasks_per_node = Some(2);
        assert_eq!(r.min_nodes(), 2);
        let a = place(&r, &[0, 1, 2], &s).unwrap();
        assert_eq!(a.tasks, vec![2, 2]);
    }
}
