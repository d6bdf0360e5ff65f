//! Resources by identity on one node, as Slurm's select/cons_tres hands them
//! out: which abstract CPUs (whole cores by default), which GRES indices.
//!
//! Slurm numbers a node's CPUs abstractly, socket by socket, core by core,
//! thread by thread: id = (socket × cores_per_socket + core) × threads +
//! thread. The node daemon maps these ids onto the OS's numbering with
//! hwloc; the controller never needs to know it.
//!
//! A bitset over ids is written here rather than taken from a crate: it is a
//! `Vec<u64>` with four operations, and keeping it serialisable and
//! allocation-light on the 50,000-node path matters more than generality.

pub use crate::model::tres::{CrParams, CrUnit};
use crate::model::tres::{GresAlloc, GresFlags, GresRequest};

/// A node's CPU layout as the scheduler numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads: u32,
}

impl Layout {
    /// The layout behind `cpus`: slurm.conf may count CPUs as sockets,
    /// cores or threads (`CPUs=` matching one level of the topology), and
    /// the scheduler's unit is whatever CPUs counts.
    pub fn of(cpus: u32, sockets: u32, cores_per_socket: u32, threads: u32) -> Layout {
        let (s, c, t) = (sockets.max(1), cores_per_socket.max(1), threads.max(1));
        if s * c * t == cpus {
            Layout {
                sockets: s,
                cores_per_socket: c,
                threads: t,
            }
        } else if s * c == cpus {
            Layout {
                sockets: s,
                cores_per_socket: c,
                threads: 1,
            }
        } else if cpus % s == 0 && cpus > 0 {
            Layout {
                sockets: s,
                cores_per_socket: cpus / s,
                threads: 1,
            }
        } else {
            Layout {
                sockets: 1,
                cores_per_socket: cpus.max(1),
                threads: 1,
            }
        }
    }
    pub fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }
    pub fn cpus(&self) -> u32 {
        self.cores() * self.threads
    }
    pub fn socket_of_core(&self, core: u32) -> u32 {
        core / self.cores_per_socket.max(1)
    }
    /// The abstract CPU ids of a core.
    pub fn core_cpus(&self, core: u32) -> impl Iterator<Item = u32> {
        let t = self.threads;
        (core * t)..(core * t + t)
    }
}

/// A set of small ids (abstract CPUs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdSet(Vec<u64>);

impl IdSet {
    pub fn contains(&self, id: u32) -> bool {
        self.0
            .get((id / 64) as usize)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
    pub fn insert(&mut self, id: u32) {
        let i = (id / 64) as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] |= 1 << (id % 64);
    }
    pub fn remove(&mut self, id: u32) {
        if let Some(w) = self.0.get_mut((id / 64) as usize) {
            *w &= !(1 << (id % 64));
        }
        // No trailing empty words, so equal sets compare equal.
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

/// One GRES device (a GPU, or anything with `File=`) on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresDev {
    /// Node-local index, as Slurm numbers them per GRES name.
    pub index: u32,
    /// Abstract core ids close to it (gres.conf `Cores=`); `None` = any.
    pub cores: Option<Vec<u32>>,
    pub used: bool,
}

/// One kind of GRES on a node: `gpu:a100` with devices, or a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresSlot {
    pub name: String,
    pub type_: Option<String>,
    pub kind: GresKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GresKind {
    Devices(Vec<GresDev>),
    Count {
        total: u64,
        used: u64,
        /// `no_consume`: any number of jobs may each take up to `total`.
        no_consume: bool,
    },
}

impl GresSlot {
    fn matches(&self, r: &GresRequest) -> bool {
        self.name == r.name && (r.type_.is_none() || r.type_ == self.type_)
    }
    /// Units configured.
    pub fn total(&self) -> u64 {
        match &self.kind {
            GresKind::Devices(d) => d.len() as u64,
            GresKind::Count { total, .. } => *total,
        }
    }
    /// Units held by jobs.
    pub fn used(&self) -> u64 {
        match &self.kind {
            GresKind::Devices(d) => d.iter().filter(|d| d.used).count() as u64,
            GresKind::Count { used, .. } => *used,
        }
    }
    fn free(&self, idle: bool) -> u64 {
        match &self.kind {
            GresKind::Devices(d) => d.iter().filter(|d| idle || !d.used).count() as u64,
            GresKind::Count {
                total,
                used,
                no_consume,
            } => {
                if idle || *no_consume {
                    *total
                } else {
                    total.saturating_sub(*used)
                }
            }
        }
    }
}

/// The GRES one node must give a job, summed per name/type.
pub(crate) fn node_gres_need(
    per_node: &[GresRequest],
    tasks: u32,
    res: &crate::model::tres::ResourceRequest,
    job_share: Option<&GresRequest>,
) -> Vec<GresRequest> {
    let mut need: Vec<GresRequest> = Vec::new();
    let mut add = |r: &GresRequest, times: u64| {
        let count = r.count.saturating_mul(times);
        if count == 0 {
            return;
        }
        match need
            .iter_mut()
            .find(|n| n.name == r.name && n.type_ == r.type_)
        {
            Some(n) => n.count = n.count.max(count),
            None => need.push(GresRequest { count, ..r.clone() }),
        }
    };
    for r in per_node {
        add(r, 1);
    }
    if let Some(r) = &res.gpus_per_node {
        add(r, 1);
    }
    if let Some(r) = &res.gpus_per_task {
        add(r, u64::from(tasks));
    }
    if let Some(r) = &res.gpus_per_socket {
        add(r, u64::from(res.sockets_per_node.unwrap_or(1).max(1)));
    }
    if let Some(r) = job_share {
        add(r, 1);
    }
    need
}

/// What one node gives a job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodePick {
    pub cpu_ids: Vec<u32>,
    pub gres: Vec<GresAlloc>,
}

/// The shape of what is asked of one node.
pub(crate) struct Ask<'a> {
    pub tasks: u32,
    pub cpus_per_task: u32,
    pub res: &'a crate::model::tres::ResourceRequest,
    pub gres: &'a [GresRequest],
    pub exclusive: bool,
    pub cr: CrParams,
}

/// Choose `need`'s GRES on a node: free devices, lowest index first.
fn pick_gres(
    slots: &[GresSlot],
    need: &[GresRequest],
    idle: bool,
) -> Option<Vec<(usize, GresAlloc, Vec<usize>)>> {
    let mut out: Vec<(usize, GresAlloc, Vec<usize>)> = Vec::new();
    for r in need {
        let mut left = r.count;
        for (si, slot) in slots.iter().enumerate() {
            if left == 0 {
                break;
            }
            if !slot.matches(r) {
                continue;
            }
            match &slot.kind {
                GresKind::Devices(devs) => {
                    let taken_here: Vec<usize> = out
                        .iter()
                        .filter(|(s, ..)| *s == si)
                        .flat_map(|(_, _, d)| d.iter().copied())
                        .collect();
                    let mut positions = Vec::new();
                    for (di, d) in devs.iter().enumerate() {
                        if left == 0 {
                            break;
                        }
                        if (idle || !d.used) && !taken_here.contains(&di) {
                            positions.push(di);
                            left -= 1;
                        }
                    }
                    if !positions.is_empty() {
                        let mut indices: Vec<u32> =
                            positions.iter().map(|&p| devs[p].index).collect();
                        indices.sort_unstable();
                        out.push((
                            si,
                            GresAlloc {
                                name: slot.name.clone(),
                                type_: slot.type_.clone(),
                                count: indices.len() as u64,
                                indices,
                            },
                            positions,
                        ));
                    }
                }
                GresKind::Count { .. } => {
                    let take = slot.free(idle).min(left);
                    if take > 0 {
                        left -= take;
                        out.push((
                            si,
                            GresAlloc {
                                name: slot.name.clone(),
                                type_: slot.type_.clone(),
                                indices: Vec::new(),
                                count: take,
                            },
                            Vec::new(),
                        ));
                    }
                }
            }
        }
        if left > 0 {
            return None;
        }
    }
    Some(out)
}

/// Pick CPUs and GRES for `ask` on a node whose layout is `layout`, with
/// `used` CPUs and `gres` already held by others (`idle`: pretend none are,
/// for "could it ever run here").
pub(crate) fn pick(
    ask: &Ask<'_>,
    layout: Layout,
    used: &IdSet,
    gres: &[GresSlot],
    idle: bool,
    job_share: Option<&GresRequest>,
) -> Option<NodePick> {
    let res = ask.res;
    // -B / --sockets-per-node / --cores-per-socket / --threads-per-core
    // select nodes with at least that much hardware.
    if res.sockets_per_node.is_some_and(|s| s > layout.sockets)
        || res
            .cores_per_socket
            .is_some_and(|c| c > layout.cores_per_socket)
        || res.threads_per_core.is_some_and(|t| t > layout.threads)
    {
        return None;
    }
    let need = node_gres_need(ask.gres, ask.tasks, res, job_share);
    let chosen_gres = pick_gres(gres, &need, idle)?;
    let gpus: u64 = chosen_gres
        .iter()
        .filter(|(_, g, _)| g.name == "gpu")
        .map(|(_, g, _)| g.count)
        .sum();

    let free = |cpu: u32| idle || !used.contains(cpu);
    let core_free = |core: u32| layout.core_cpus(core).all(free);
    let threads = layout.threads.max(1);
    let usable = res.usable_threads(threads);
    let cpt = ask.cpus_per_task.max(1);
    let task_cpus = u64::from(ask.tasks) * u64::from(cpt);
    let cpus_needed = task_cpus.max(u64::from(res.cpus_per_gpu.unwrap_or(0)) * gpus);
    let one_per_core = ask.cr.one_task_per_core || res.ntasks_per_core == Some(1);
    // Cores the tasks need: whole cores, `usable` threads of each.
    let cores_needed = if one_per_core {
        u64::from(ask.tasks) * u64::from(cpt.div_ceil(usable))
    } else {
        cpus_needed.div_ceil(u64::from(usable))
    }
    .max(cpus_needed.div_ceil(u64::from(usable)));

    // Cores in preference order: close to the chosen GPUs first (only
    // those with --gres-flags=enforce-binding), then socket by socket.
    let mut affine: Option<Vec<u32>> = None;
    for (si, _, positions) in &chosen_gres {
        if let GresKind::Devices(devs) = &gres[*si].kind {
            for &p in positions {
                if let Some(cores) = &devs[p].cores {
                    affine
                        .get_or_insert_with(Vec::new)
                        .extend(cores.iter().copied());
                }
            }
        }
    }
    if res.gres_flags == Some(GresFlags::DisableBinding) {
        affine = None;
    }
    let all_cores = 0..layout.cores();
    let mut order: Vec<u32> = match &affine {
        Some(a) => {
            let mut near: Vec<u32> = all_cores.clone().filter(|c| a.contains(c)).collect();
            if res.gres_flags != Some(GresFlags::EnforceBinding) {
                near.extend(all_cores.filter(|c| !a.contains(c)));
            }
            near
        }
        None => all_cores.collect(),
    };
    // CR_CPU packs threads, partly used cores included (only it needs
    // the list: this runs for every candidate node of every pass).
    let thread_order: Vec<u32> = if ask.cr.unit == CrUnit::Cpu {
        order
            .iter()
            .flat_map(|&c| layout.core_cpus(c))
            .filter(|&cpu| free(cpu))
            .collect()
    } else {
        Vec::new()
    };
    order.retain(|&c| core_free(c));

    let mut cpu_ids: Vec<u32> = Vec::new();
    if ask.exclusive {
        if order.len() as u32 != layout.cores() && !idle {
            return None;
        }
        cpu_ids = (0..layout.cpus()).collect();
        if (order.len() as u64) < cores_needed {
            return None;
        }
    } else {
        match ask.cr.unit {
            CrUnit::Socket => {
                let sockets_needed = cores_needed.div_ceil(u64::from(layout.cores_per_socket));
                let mut taken = 0;
                for s in 0..layout.sockets {
                    if taken == sockets_needed {
                        break;
                    }
                    let cores = s * layout.cores_per_socket..(s + 1) * layout.cores_per_socket;
                    if cores.clone().all(core_free) {
                        cpu_ids.extend(cores.flat_map(|c| layout.core_cpus(c)));
                        taken += 1;
                    }
                }
                if taken < sockets_needed {
                    return None;
                }
            }
            CrUnit::Cpu if usable == threads && !one_per_core => {
                // Threads one by one, in core preference order.
                let mut ids: Vec<u32> = thread_order
                    .iter()
                    .copied()
                    .take(cpus_needed as usize)
                    .collect();
                if (ids.len() as u64) < cpus_needed {
                    return None;
                }
                ids.sort_unstable();
                cpu_ids = ids;
            }
            CrUnit::Cpu | CrUnit::Core => {
                let per_socket_cap = res
                    .ntasks_per_socket
                    .map(|n| u64::from(n) * u64::from(cpt).div_ceil(u64::from(usable)));
                let mut per_socket = vec![0u64; layout.sockets as usize];
                let mut cores = Vec::new();
                for &c in &order {
                    if cores.len() as u64 == cores_needed {
                        break;
                    }
                    let s = layout.socket_of_core(c) as usize;
                    if per_socket_cap.is_some_and(|cap| per_socket[s] >= cap) {
                        continue;
                    }
                    per_socket[s] += 1;
                    cores.push(c);
                }
                if (cores.len() as u64) < cores_needed {
                    return None;
                }
                cores.sort_unstable();
                cpu_ids = cores.iter().flat_map(|&c| layout.core_cpus(c)).collect();
            }
        }
    }
    Some(NodePick {
        cpu_ids,
        gres: chosen_gres.into_iter().map(|(_, g, _)| g).collect(),
    })
}

/// How many tasks of `cpus_per_task` CPUs fit on a node at most, by cores.
pub(crate) fn tasks_by_cores(
    layout: Layout,
    used: &IdSet,
    idle: bool,
    cpus_per_task: u32,
    res: &crate::model::tres::ResourceRequest,
    cr: CrParams,
) -> u32 {
    let usable = res.usable_threads(layout.threads);
    let free_cores = (0..layout.cores())
        .filter(|&c| idle || layout.core_cpus(c).all(|cpu| !used.contains(cpu)))
        .count() as u32;
    let cpt = cpus_per_task.max(1);
    if cr.one_task_per_core || res.ntasks_per_core == Some(1) {
        free_cores / cpt.div_ceil(usable)
    } else {
        free_cores * usable / cpt
    }
}

/// Mark a node's pick held (or, `hold == false`, given back).
pub(crate) fn hold(
    used: &mut IdSet,
    gres: &mut [GresSlot],
    cpu_ids: &[u32],
    allocs: &[GresAlloc],
    hold: bool,
) {
    for &c in cpu_ids {
        if hold {
            used.insert(c);
        } else {
            used.remove(c);
        }
    }
    for a in allocs {
        let Some(slot) = gres
            .iter_mut()
            .find(|s| s.name == a.name && s.type_ == a.type_)
        else {
            continue;
        };
        match &mut slot.kind {
            GresKind::Devices(devs) => {
                for d in devs.iter_mut().filter(|d| a.indices.contains(&d.index)) {
                    d.used = hold;
                }
            }
            GresKind::Count { used, .. } => {
                *used = if hold {
                    used.saturating_add(a.count)
                } else {
                    used.saturating_sub(a.count)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tres::{Hint, ResourceRequest};

    fn gpus(cores: &[&[u32]]) -> Vec<GresSlot> {
        vec![GresSlot {
            name: "gpu".into(),
            type_: Some("a100".into()),
            kind: GresKind::Devices(
                cores
                    .iter()
                    .enumerate()
                    .map(|(i, c)| GresDev {
                        index: i as u32,
                        cores: Some(c.to_vec()),
                        used: false,
                    })
                    .collect(),
            ),
        }]
    }

    fn ask<'a>(tasks: u32, cpt: u32, res: &'a ResourceRequest) -> Ask<'a> {
        Ask {
            tasks,
            cpus_per_task: cpt,
            res,
            gres: &res.gres,
            exclusive: false,
            cr: CrParams::default(),
        }
    }

    /// 2 sockets × 8 cores × 2 threads.
    const BIG: Layout = Layout {
        sockets: 2,
        cores_per_socket: 8,
        threads: 2,
    };

    #[test]
    fn select_type_parameters_read_as_slurm() {
        assert_eq!(CrParams::parse("").unwrap(), CrParams::default());
        let p = CrParams::parse("CR_CPU").unwrap();
        assert_eq!((p.unit, p.memory), (CrUnit::Cpu, false));
        let p = CrParams::parse("CR_Socket_Memory,CR_ONE_TASK_PER_CORE").unwrap();
        assert_eq!(
            (p.unit, p.memory, p.one_task_per_core),
            (CrUnit::Socket, true, true)
        );
        assert!(CrParams::parse("CR_Core,CR_CPU").is_err());
        assert!(CrParams::parse("CR_Bogus").is_err());
    }

    #[test]
    fn layouts_follow_what_cpus_counts() {
        assert_eq!(Layout::of(32, 2, 8, 2), BIG);
        assert_eq!(Layout::of(16, 2, 8, 2).threads, 1);
        assert_eq!(Layout::of(4, 4, 1, 1).cores(), 4);
        assert_eq!(Layout::of(6, 4, 1, 1).cpus(), 6);
        assert_eq!(BIG.core_cpus(3).collect::<Vec<_>>(), vec![6, 7]);
    }

    #[test]
    fn whole_cores_are_held_and_threads_counted() {
        let res = ResourceRequest::default();
        let p = pick(&ask(1, 1, &res), BIG, &IdSet::default(), &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, vec![0, 1]);
        let p = pick(&ask(3, 1, &res), BIG, &IdSet::default(), &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, vec![0, 1, 2, 3]);
        // nomultithread: one task per core, the sibling thread held too.
        let res = ResourceRequest {
            hint: Some(Hint::Nomultithread),
            ..Default::default()
        };
        let p = pick(&ask(3, 1, &res), BIG, &IdSet::default(), &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, vec![0, 1, 2, 3, 4, 5]);
        // Held cores are skipped.
        let mut used = IdSet::default();
        used.insert(0);
        let res = ResourceRequest::default();
        let p = pick(&ask(1, 1, &res), BIG, &used, &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, vec![2, 3]);
        // CR_CPU takes single threads, including a held core's sibling.
        let mut a = ask(1, 1, &res);
        a.cr.unit = CrUnit::Cpu;
        assert_eq!(
            pick(&a, BIG, &used, &[], false, None).unwrap().cpu_ids,
            vec![1]
        );
    }

    #[test]
    fn cores_near_the_gpus_come_first() {
        // GPU 0 on socket 0 (cores 0-7), GPU 1 on socket 1 (cores 8-15).
        let slots = gpus(&[&[0, 1, 2, 3, 4, 5, 6, 7], &[8, 9, 10, 11, 12, 13, 14, 15]]);
        let mut used = IdSet::default();
        let mut held = slots.clone();
        // Someone holds GPU 0: ours is GPU 1 and socket 1's cores.
        hold(
            &mut used,
            &mut held,
            &[],
            &[GresAlloc {
                name: "gpu".into(),
                type_: Some("a100".into()),
                indices: vec![0],
                count: 1,
            }],
            true,
        );
        let res = ResourceRequest {
            gres: vec![GresRequest {
                name: "gpu".into(),
                type_: None,
                count: 1,
            }],
            ..Default::default()
        };
        let p = pick(&ask(2, 1, &res), BIG, &used, &held, false, None).unwrap();
        assert_eq!(p.gres[0].indices, vec![1]);
        assert_eq!(p.cpu_ids, vec![16, 17]);
        // Enforced binding with no free core near a free GPU: no.
        for c in 8..16 {
            for cpu in BIG.core_cpus(c) {
                used.insert(cpu);
            }
        }
        let strict = ResourceRequest {
            gres_flags: Some(GresFlags::EnforceBinding),
            ..res.clone()
        };
        assert!(pick(&ask(1, 1, &strict), BIG, &used, &held, false, None).is_none());
        assert!(pick(&ask(1, 1, &res), BIG, &used, &held, false, None).is_some());
        // Too many GPUs: never here, even idle.
        let greedy = ResourceRequest {
            gpus_per_task: Some(GresRequest {
                name: "gpu".into(),
                type_: None,
                count: 1,
            }),
            ..Default::default()
        };
        assert!(pick(&ask(3, 1, &greedy), BIG, &used, &held, true, None).is_none());
        assert!(pick(&ask(2, 1, &greedy), BIG, &used, &held, true, None).is_some());
    }

    #[test]
    fn count_gres_and_sockets() {
        let slots = vec![GresSlot {
            name: "bw".into(),
            type_: None,
            kind: GresKind::Count {
                total: 100,
                used: 60,
                no_consume: false,
            },
        }];
        let res = ResourceRequest {
            gres: vec![GresRequest {
                name: "bw".into(),
                type_: None,
                count: 50,
            }],
            ..Default::default()
        };
        assert!(pick(
            &ask(1, 1, &res),
            BIG,
            &IdSet::default(),
            &slots,
            false,
            None
        )
        .is_none());
        assert!(pick(&ask(1, 1, &res), BIG, &IdSet::default(), &slots, true, None).is_some());
        let plain = ResourceRequest::default();
        let mut a = ask(1, 1, &plain);
        a.cr.unit = CrUnit::Socket;
        let p = pick(&a, BIG, &IdSet::default(), &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, (0..16).collect::<Vec<_>>());
        // --ntasks-per-socket=2 spreads four tasks over both sockets.
        let res = ResourceRequest {
            ntasks_per_socket: Some(2),
            ..Default::default()
        };
        let p = pick(&ask(4, 2, &res), BIG, &IdSet::default(), &[], false, None).unwrap();
        assert_eq!(p.cpu_ids, vec![0, 1, 2, 3, 16, 17, 18, 19]);
        // -B 4 wants four sockets.
        let res = ResourceRequest {
            sockets_per_node: Some(4),
            ..Default::default()
        };
        assert!(pick(&ask(1, 1, &res), BIG, &IdSet::default(), &[], true, None).is_none());
    }
}
