//! Which CPUs and GPUs each task of a step gets on one node: Slurm's
//! task/affinity semantics as pure functions of the topology, the step's
//! allocated CPUs there and its `--cpu-bind` / `-m` / `--gpu-bind`; and
//! [`AffinityMask`], the one system call that applies a result in a
//! freshly forked child.
//!
//! How Slurm decides, restated (task/affinity `lllp_distribution`):
//! * An explicit mode (`none`, `map_cpu`, `mask_cpu`, `rank`, `*_ldom`)
//!   is used as given, after checking it stays inside the allocation;
//!   all but `map_cpu`/`mask_cpu` need the whole node (`none` on part of
//!   a node binds every task to the step's CPUs instead).
//! * A unit (`sockets`, `cores`, `threads`, `ldoms`), or with nothing
//!   given an *auto* unit, lays the allocated CPUs out to tasks: by
//!   socket-level distribution (block: consecutive; cyclic: one task per
//!   socket in turn; fcyclic: each CPU from the next socket), then widens
//!   each task's CPUs to whole cores / sockets / domains of the allocation.
//! * Auto binding: sockets if tasks x cpus-per-task equals the whole
//!   sockets allocated (and none partly), else cores likewise, else
//!   threads if it equals the allocated CPUs, else TaskPluginParam's
//!   `autobind=` ([`AutoBind`]), else every task gets all the step's CPUs.
//!
//! Masks and lists are computed on abstract CPU ids and converted to OS
//! ids at the end; the environment and verbose lines use OS ids, as the
//! kernel sees them.

use crate::exec::hw::{DetectedGpu, Topology};
use crate::model::binding::{
    BindError, BindMode, BindUnit, CpuBind, Distribution, GpuBind, GpuBindKind, IdSet, SocketDist,
};

/// TaskPluginParam's `autobind=`: the unit used when the allocation does
/// not itself say (Slurm's default: none, every task gets the step's CPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AutoBind {
    #[default]
    Off,
    Threads,
    Cores,
    Sockets,
}

impl AutoBind {
    /// From a TaskPluginParam value (`Autobind=Cores,Verbose`, ...); other
    /// words are ignored here.
    pub fn from_task_plugin_param(param: &str) -> Self {
        for w in param.split(',') {
            let w = w.trim().to_ascii_lowercase();
            match w.strip_prefix("autobind=") {
                Some("threads") => return AutoBind::Threads,
                Some("cores") => return AutoBind::Cores,
                Some("sockets") => return AutoBind::Sockets,
                _ => {}
            }
        }
        AutoBind::Off
    }
    fn unit(self) -> Option<BindUnit> {
        match self {
            AutoBind::Off => None,
            AutoBind::Threads => Some(BindUnit::Threads),
            AutoBind::Cores => Some(BindUnit::Cores),
            AutoBind::Sockets => Some(BindUnit::Sockets),
        }
    }
}

/// One task's binding on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskBinding {
    pub local_id: u32,
    pub global_id: u32,
    /// OS CPU ids to bind to; `None` leaves the task's affinity alone.
    pub os_cpus: Option<Vec<u32>>,
    /// SLURM_CPU_BIND, SLURM_CPU_BIND_TYPE, SLURM_CPU_BIND_LIST,
    /// SLURM_CPU_BIND_VERBOSE (the same for every task of the step here).
    pub env: Vec<(String, String)>,
    verbose: bool,
    /// `-cores` etc. after `cpu-bind` in the verbose line, `MASK`/`MAP `/...
    units: &'static str,
    word: &'static str,
    /// OS CPUs the task is bound to (empty when unbound).
    effective: IdSet,
}

impl TaskBinding {
    /// The line task/affinity writes to the task's stderr under
    /// `--cpu-bind=verbose`, e.g.
    /// `cpu-bind=MASK - n1, task  0  0 [4242]: mask 0x3 set`; `None` when
    /// not verbose.
    pub fn verbose_line(&self, node: &str, pid: u32) -> Option<String> {
        if !self.verbose {
            return None;
        }
        // Unbound tasks print an empty mask and no unit, as slurmstepd does.
        let (action, units) = if self.word == "NONE" {
            ("", "")
        } else {
            (" set", self.units)
        };
        Some(format!(
            "cpu-bind{units}={} - {node}, task {:2} {:2} [{pid}]: mask 0x{}{action}",
            self.word,
            self.global_id,
            self.local_id,
            self.effective.hex_trimmed()
        ))
    }
}

/// Whole and partial sockets and cores of an allocation, and its CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocShape {
    pub whole_node: bool,
    pub whole_sockets: u32,
    pub part_sockets: u32,
    pub whole_cores: u32,
    pub part_cores: u32,
    pub threads: u32,
}

/// The shape of an allocation given as `avail[abstract cpu]` (missing
/// entries count as not allocated).
pub fn alloc_shape(topo: &Topology, avail: &[bool]) -> AllocShape {
    let mut sh = AllocShape::default();
    let tpc = topo.threads_per_core;
    let mut node_full = true;
    for s in 0..topo.sockets {
        let (mut s_full, mut s_any) = (true, false);
        for c in 0..topo.cores_per_socket {
            let base = (s * topo.cores_per_socket + c) * tpc;
            let n = (base..base + tpc)
                .filter(|&i| avail.get(i as usize).copied().unwrap_or(false))
                .count() as u32;
            sh.threads += n;
            if n == tpc {
                sh.whole_cores += 1;
            } else {
                s_full = false;
                if n > 0 {
                    sh.part_cores += 1;
                }
            }
            s_any |= n > 0;
        }
        if s_full {
            sh.whole_sockets += 1;
        } else {
            node_full = false;
            if s_any {
                sh.part_sockets += 1;
            }
        }
    }
    sh.whole_node = node_full;
    sh
}

/// The unit auto binding picks for `ntasks * cpus_per_task` on this
/// allocation (`None`: no binding beyond the step's CPUs).
pub fn auto_bind_unit(
    shape: &AllocShape,
    ntasks: u32,
    cpus_per_task: u32,
    default: AutoBind,
) -> Option<BindUnit> {
    let want = ntasks * cpus_per_task;
    if want == shape.whole_sockets && shape.part_sockets == 0 {
        Some(BindUnit::Sockets)
    } else if want == shape.whole_cores && shape.part_cores == 0 {
        Some(BindUnit::Cores)
    } else if want == shape.threads {
        Some(BindUnit::Threads)
    } else {
        default.unit()
    }
}

/// Per-task bindings with Slurm's default TaskPluginParam (no autobind).
pub fn task_masks(
    topo: &Topology,
    alloc_cpus: &[u32],
    tasks: &[u32],
    cpus_per_task: u32,
    bind: &CpuBind,
    dist: &Distribution,
) -> Result<Vec<TaskBinding>, BindError> {
    task_masks_with(
        topo,
        alloc_cpus,
        tasks,
        cpus_per_task,
        bind,
        dist,
        AutoBind::Off,
    )
}

/// What the step's binding resolved to, before it is cut into tasks.
struct Resolved {
    per_task: Vec<Option<Vec<u32>>>, // abstract ids, or None
    word: &'static str,
    units: Option<BindUnit>,
    /// `mask_cpu:` etc. for SLURM_CPU_BIND_TYPE's second part.
    env_mode: &'static str,
    /// SLURM_CPU_BIND_LIST.
    list: String,
    /// Explicit lists are in OS ids already.
    os_ids: bool,
}

/// Per-task bindings. `alloc_cpus` are the abstract CPU ids this step was
/// given on this node, `tasks` the global ids of its tasks here in local
/// order; `auto` is TaskPluginParam's autobind.
pub fn task_masks_with(
    topo: &Topology,
    alloc_cpus: &[u32],
    tasks: &[u32],
    cpus_per_task: u32,
    bind: &CpuBind,
    dist: &Distribution,
    auto: AutoBind,
) -> Result<Vec<TaskBinding>, BindError> {
    let size = topo.cpus();
    let n = tasks.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut avail = vec![false; size as usize];
    for &c in alloc_cpus {
        *avail
            .get_mut(c as usize)
            .ok_or(BindError::NoSuchCpu { cpu: c, cpus: size })? = true;
    }
    let alloc: Vec<u32> = (0..size).filter(|&c| avail[c as usize]).collect();
    let alloc_os = IdSet::new(topo.to_os(&alloc));
    let outside = || BindError::OutsideAllocation {
        allocated: alloc_os.hex_full(size as usize),
    };
    let shape = alloc_shape(topo, &avail);
    let all_alloc = |word, units| Resolved {
        per_task: vec![Some(alloc.clone()); n],
        word,
        units,
        env_mode: "mask_cpu:",
        list: alloc_os.hex_full(size as usize),
        os_ids: false,
    };

    let resolved = if let Some(mode) = &bind.mode {
        let whole_needed = !matches!(mode, BindMode::MapCpu(_) | BindMode::MaskCpu(_));
        if whole_needed && !shape.whole_node {
            if *mode != BindMode::None {
                return Err(BindError::WholeNodeRequired(sprint_bind_type(topo, bind)));
            }
            // `none` on part of a node still keeps tasks on the step's CPUs.
            all_alloc("MASK", bind.unit)
        } else {
            explicit(topo, mode, bind.unit, n, &alloc_os, &outside)?
        }
    } else {
        let unit = bind
            .unit
            .or_else(|| auto_bind_unit(&shape, n as u32, cpus_per_task.max(1), auto));
        match unit {
            None => all_alloc("MASK", None),
            Some(unit) => {
                let masks = layout(topo, &avail, n, cpus_per_task.max(1), unit, dist)?;
                let list = masks
                    .iter()
                    .map(|m| IdSet::new(topo.to_os(m)).hex_full(size as usize))
                    .collect::<Vec<_>>()
                    .join(",");
                Resolved {
                    per_task: masks.into_iter().map(Some).collect(),
                    word: "MASK",
                    // Slurm clears the unit once masks are generated.
                    units: None,
                    env_mode: "mask_cpu:",
                    list,
                    os_ids: false,
                }
            }
        }
    };

    let env = cpu_bind_env(bind.verbose, &resolved);
    let units = match resolved.units {
        None => "",
        Some(BindUnit::Threads) => "-threads",
        Some(BindUnit::Cores) => "-cores",
        Some(BindUnit::Sockets) => "-sockets",
        Some(BindUnit::Ldoms) => "-ldoms",
    };
    Ok(tasks
        .iter()
        .enumerate()
        .map(|(i, &gid)| {
            let os = resolved.per_task[i].as_ref().map(|cpus| {
                if resolved.os_ids {
                    IdSet::new(cpus.clone()).ids().to_vec()
                } else {
                    topo.to_os(cpus)
                }
            });
            TaskBinding {
                local_id: i as u32,
                global_id: gid,
                effective: os.clone().map(IdSet::new).unwrap_or_default(),
                os_cpus: os,
                env: env.clone(),
                verbose: bind.verbose,
                units,
                word: resolved.word,
            }
        })
        .collect())
}

/// The binding as slurmd names it in messages (`slurm_sprint_cpu_bind_type`):
/// verbosity, unit, mode, and `one_thread` where the node has one thread
/// per core (Slurm then lays out one task per core).
fn sprint_bind_type(topo: &Topology, bind: &CpuBind) -> String {
    let mut parts = Vec::new();
    if bind.verbose {
        parts.push("verbose");
    }
    if let Some(u) = bind.unit {
        parts.push(u.name());
    }
    if let Some(m) = &bind.mode {
        parts.push(mode_name(m));
    }
    if bind.one_thread || topo.threads_per_core <= 1 {
        parts.push("one_thread");
    }
    parts.join(",")
}

fn mode_name(mode: &BindMode) -> &'static str {
    match mode {
        BindMode::None => "none",
        BindMode::Rank => "rank",
        BindMode::MapCpu(_) => "map_cpu",
        BindMode::MaskCpu(_) => "mask_cpu",
        BindMode::RankLdom => "rank_ldom",
        BindMode::MapLdom(_) => "map_ldom",
        BindMode::MaskLdom(_) => "mask_ldom",
    }
}

/// An explicit `--cpu-bind` mode on a node the step may use (checked by the caller).
fn explicit(
    topo: &Topology,
    mode: &BindMode,
    unit: Option<BindUnit>,
    n: usize,
    alloc_os: &IdSet,
    outside: &dyn Fn() -> BindError,
) -> Result<Resolved, BindError> {
    let ldoms = topo.ldoms();
    let ldom_cpus = |l: u32| -> Result<Vec<u32>, BindError> {
        if l >= ldoms {
            return Err(outside());
        }
        Ok(topo.ldom_cpus(l))
    };
    let r = |per_task, word, env_mode, list: String, os_ids| Resolved {
        per_task,
        word,
        units: unit,
        env_mode,
        list,
        os_ids,
    };
    Ok(match mode {
        BindMode::None => r(vec![None; n], "NONE", "none", String::new(), true),
        BindMode::Rank => {
            let cpus = topo.cpus().max(1);
            let per = (0..n as u32).map(|i| Some(vec![i % cpus])).collect();
            r(per, "RANK", "rank", String::new(), false)
        }
        BindMode::MapCpu(list) => {
            if list.iter().any(|&c| !alloc_os.contains(c)) {
                return Err(outside());
            }
            let per = (0..n).map(|i| Some(vec![list[i % list.len()]])).collect();
            let l = list
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            r(per, "MAP ", "map_cpu:", l, true)
        }
        BindMode::MaskCpu(masks) => {
            if masks
                .iter()
                .any(|m| m.is_empty() || m.ids().iter().any(|&c| !alloc_os.contains(c)))
            {
                return Err(outside());
            }
            let per = (0..n)
                .map(|i| Some(masks[i % masks.len()].ids().to_vec()))
                .collect();
            // slurmd rewrites the masks without `0x` (task_cpuset_to_str).
            let l = masks
                .iter()
                .map(IdSet::hex_trimmed)
                .collect::<Vec<_>>()
                .join(",");
            r(per, "MASK", "mask_cpu:", l, true)
        }
        BindMode::RankLdom => {
            let mut per = Vec::with_capacity(n);
            for i in 0..n as u32 {
                per.push(Some(ldom_cpus(i % ldoms.max(1))?));
            }
            r(per, "LDRANK", "rank_ldom", String::new(), false)
        }
        BindMode::MapLdom(list) => {
            let mut per = Vec::with_capacity(n);
            for i in 0..n {
                per.push(Some(ldom_cpus(list[i % list.len()])?));
            }
            let l = list
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            r(per, "LDMAP ", "map_ldom:", l, false)
        }
        BindMode::MaskLdom(masks) => {
            let mut per = Vec::with_capacity(n);
            for i in 0..n {
                let mut cpus = Vec::new();
                for &l in masks[i % masks.len()].ids() {
                    cpus.extend(ldom_cpus(l)?);
                }
                per.push(Some(cpus));
            }
            let l = masks
                .iter()
                .map(IdSet::to_string)
                .collect::<Vec<_>>()
                .join(",");
            r(per, "LDMASK", "mask_ldom:", l, false)
        }
    })
}

/// The four variables srun/slurmstepd export for the binding applied.
fn cpu_bind_env(verbose: bool, r: &Resolved) -> Vec<(String, String)> {
    let verb = if verbose { "verbose" } else { "quiet" };
    let mut ty = String::new();
    if let Some(u) = r.units {
        ty.push_str(u.name());
        ty.push(',');
    }
    ty.push_str(r.env_mode);
    let with_list = r.env_mode.ends_with(':');
    let list = if with_list {
        r.list.clone()
    } else {
        String::new()
    };
    vec![
        ("SLURM_CPU_BIND".into(), format!("{verb},{ty}{list}")),
        ("SLURM_CPU_BIND_LIST".into(), list),
        ("SLURM_CPU_BIND_TYPE".into(), ty),
        ("SLURM_CPU_BIND_VERBOSE".into(), verb.into()),
    ]
}

/// Deals allocated CPUs to tasks and widens each task's CPUs to `unit`.
fn layout(
    topo: &Topology,
    avail: &[bool],
    n: usize,
    cpus_per_task: u32,
    unit: BindUnit,
    dist: &Distribution,
) -> Result<Vec<Vec<u32>>, BindError> {
    let size = avail.len();
    let have = avail.iter().filter(|&&a| a).count();
    if have < n {
        return Err(BindError::TooFewCpus {
            cpus: have,
            tasks: n,
        });
    }
    // Fewer CPUs than asked: spread what there is evenly, as Slurm does.
    let cpt = if have < n * cpus_per_task as usize {
        (have / n) as u32
    } else {
        cpus_per_task
    };
    let tpc = topo.threads_per_core.max(1);
    // Binding to cores: a task that ends inside a core leaves the rest of
    // that core unused, so the next task starts on a fresh core.
    let skip = if unit == BindUnit::Cores {
        if cpt < tpc {
            (tpc - cpt) as usize
        } else {
            (cpt % tpc) as usize
        }
    } else {
        0
    };
    let mut masks = vec![Vec::new(); n];
    match dist.socket_level() {
        SocketDist::Block => {
            let (mut task, mut c) = (0usize, 0u32);
            while task < n {
                let before = task;
                let mut i = 0;
                while i < size {
                    if avail[i] {
                        masks[task].push(i as u32);
                        c += 1;
                        if c >= cpt {
                            i += skip;
                            c = 0;
                            task += 1;
                            if task >= n {
                                break;
                            }
                        }
                    }
                    i += 1;
                }
                if task == before {
                    return Err(BindError::TooFewCpus {
                        cpus: have,
                        tasks: n,
                    });
                }
            }
        }
        sd @ (SocketDist::Cyclic | SocketDist::Fcyclic) => {
            let sockets = topo.sockets.max(1) as usize;
            let per_socket = (topo.cores_per_socket * tpc) as usize;
            let mut cursor = vec![0usize; sockets];
            let (mut s, mut p, mut task) = (0usize, 0u32, 0usize);
            while task < n {
                let before = task;
                for _ in 0..size {
                    let orig = s;
                    while cursor[s] >= per_socket {
                        s = (s + 1) % sockets;
                        if s == orig {
                            // Every socket used up: start over (oversubscribe).
                            cursor.iter_mut().for_each(|x| *x = 0);
                        }
                    }
                    let bit = (cursor[s] + s * per_socket) % size;
                    cursor[s] += 1;
                    if !avail[bit] {
                        continue;
                    }
                    masks[task].push(bit as u32);
                    let mut switched = false;
                    if sd == SocketDist::Fcyclic {
                        s = (s + 1) % sockets;
                        switched = true;
                    }
                    p += 1;
                    if p < cpt {
                        continue;
                    }
                    cursor[s] += skip;
                    p = 0;
                    if !switched {
                        s = (s + 1) % sockets;
                    }
                    task += 1;
                    if task >= n {
                        break;
                    }
                }
                if task == before {
                    return Err(BindError::TooFewCpus {
                        cpus: have,
                        tasks: n,
                    });
                }
            }
        }
    }
    // Widen to the unit, staying inside the allocation.
    let group: Box<dyn Fn(u32) -> u32> = match unit {
        BindUnit::Threads => return Ok(sorted(masks)),
        BindUnit::Cores => Box::new(|c| topo.core_of(c)),
        BindUnit::Sockets => Box::new(|c| topo.socket_of(c)),
        BindUnit::Ldoms => Box::new(|c| topo.ldom_of(c)),
    };
    for m in &mut masks {
        let groups: Vec<u32> = m.iter().map(|&c| group(c)).collect();
        for c in 0..size as u32 {
            if avail[c as usize] && groups.contains(&group(c)) {
                m.push(c);
            }
        }
    }
    Ok(sorted(masks))
}

fn sorted(mut masks: Vec<Vec<u32>>) -> Vec<Vec<u32>> {
    for m in &mut masks {
        m.sort_unstable();
        m.dedup();
    }
    masks
}

/// A GPU the step was allocated on this node, with its local cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuAffinity {
    pub index: u32,
    /// Abstract core ids (gres.conf `Cores=`); empty: close to every CPU.
    pub cores: Vec<u32>,
}

impl From<&DetectedGpu> for GpuAffinity {
    fn from(g: &DetectedGpu) -> Self {
        GpuAffinity {
            index: g.index,
            cores: g.cores.clone(),
        }
    }
}

/// The GPU indices a task may use under `--gpu-bind`, from `gpus` (those
/// allocated to the step on this node). `task_os_cpus` is the task's CPU
/// binding (empty: unbound); `local_id` its rank on the node.
/// * closest: GPUs whose cores meet the task's; all of them if none do.
/// * single:N: one of the closest GPUs; tasks N at a time take the next one.
/// * per_task:N: N GPUs, the closest first, spread by task.
/// * map_gpu / mask_gpu: the entry for `local_id` (lists wrap), kept only if allocated.
/// * none: all of them.
pub fn task_gpus(
    topo: &Topology,
    gpus: &[GpuAffinity],
    task_os_cpus: &[u32],
    local_id: u32,
    bind: &GpuBind,
) -> Vec<u32> {
    let all: Vec<u32> = gpus.iter().map(|g| g.index).collect();
    let closest = || -> Vec<u32> {
        if task_os_cpus.is_empty() {
            return all.clone();
        }
        let cores = topo.os_cpus_to_cores(task_os_cpus);
        let near: Vec<u32> = gpus
            .iter()
            .filter(|g| g.cores.is_empty() || g.cores.iter().any(|c| cores.contains(c)))
            .map(|g| g.index)
            .collect();
        if near.is_empty() {
            all.clone()
        } else {
            near
        }
    };
    if all.is_empty() {
        return all;
    }
    let mut out = match &bind.kind {
        GpuBindKind::None => all.clone(),
        GpuBindKind::Closest => closest(),
        GpuBindKind::Single(per) => {
            let near = closest();
            vec![near[(local_id / (*per).max(1)) as usize % near.len()]]
        }
        GpuBindKind::PerTask(k) => {
            let near = closest();
            let mut order: Vec<u32> = near.clone();
            order.extend(all.iter().filter(|g| !near.contains(g)));
            let start = (local_id as usize * *k as usize) % order.len();
            order
                .iter()
                .cycle()
                .skip(start)
                .take((*k as usize).min(order.len()))
                .copied()
                .collect()
        }
        GpuBindKind::MapGpu(list) if !list.is_empty() => {
            let g = list[local_id as usize % list.len()];
            all.iter().copied().filter(|&x| x == g).collect()
        }
        GpuBindKind::MaskGpu(masks) if !masks.is_empty() => {
            let m = &masks[local_id as usize % masks.len()];
            all.iter().copied().filter(|&x| m.contains(x)).collect()
        }
        GpuBindKind::MapGpu(_) | GpuBindKind::MaskGpu(_) => all.clone(),
    };
    out.sort_unstable();
    out.dedup();
    out
}

/// A CPU affinity mask prepared in the parent, so the child only makes
/// the system call: `apply` allocates nothing and is safe in `pre_exec`.
#[derive(Clone)]
pub struct AffinityMask {
    set: nix::sched::CpuSet,
    empty: bool,
}

impl std::fmt::Debug for AffinityMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AffinityMask")
            .field("empty", &self.empty)
            .finish()
    }
}

/// The CPUs this machine has online (`/sys/devices/system/cpu/online`),
/// else the ones this process may use.
fn online_cpus() -> Vec<u32> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let mut out = Vec::new();
        for part in s.trim().split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                out.extend(a..=b);
            }
        }
        if !out.is_empty() {
            return out;
        }
    }
    let mut out = Vec::new();
    if let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        for i in 0..nix::sched::CpuSet::count() {
            if set.is_set(i).unwrap_or(false) {
                out.push(i as u32);
            }
        }
    }
    out
}

impl AffinityMask {
    /// Prepares a mask of these OS CPUs, less those the machine does not
    /// have. N.B. a simulated node's topology (HWLOC_SYNTHETIC) can be
    /// larger than the machine it runs on; binding its tasks to CPUs that
    /// do not exist would fail the launch, so what is left is applied, and
    /// if nothing is left the mask is empty and `apply` does nothing.
    pub fn new(os_cpus: &[u32]) -> Self {
        let online = online_cpus();
        let mut set = nix::sched::CpuSet::new();
        let mut empty = true;
        for &c in os_cpus {
            if online.contains(&c) && set.set(c as usize).is_ok() {
                empty = false;
            }
        }
        AffinityMask { set, empty }
    }

    /// True when nothing would be applied.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Binds the calling thread (in a child before exec: the whole new
    /// process). One system call, no allocation.
    pub fn apply(&self) -> std::io::Result<()> {
        if self.empty {
            return Ok(());
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.set)
            .map_err(std::io::Error::from)
    }
}

/// Binds the calling thread to these OS CPUs (prepares and applies; use
/// [`AffinityMask`] directly in `pre_exec`).
pub fn set_affinity(os_cpus: &[u32]) -> std::io::Result<()> {
    AffinityMask::new(os_cpus).apply()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cb(s: &str) -> CpuBind {
        CpuBind::parse(s).unwrap()
    }
    fn dist(s: &str) -> Distribution {
        Distribution::parse(s).unwrap()
    }
    fn masks(b: &[TaskBinding]) -> Vec<Vec<u32>> {
        b.iter()
            .map(|t| t.os_cpus.clone().unwrap_or_default())
            .collect()
    }
    fn env<'a>(t: &'a TaskBinding, k: &str) -> &'a str {
        t.env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
    fn all(t: &Topology) -> Vec<u32> {
        (0..t.cpus()).collect()
    }
    fn range(a: u32, b: u32) -> Vec<u32> {
        (a..b).collect()
    }

    #[test]
    fn cores_block_linear_and_intel() {
        let lin = Topology::uniform(2, 8, 2);
        let b = task_masks(
            &lin,
            &all(&lin),
            &[0, 1, 2, 3],
            1,
            &cb("cores"),
            &dist("block:block"),
        )
        .unwrap();
        assert_eq!(
            masks(&b),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        let intel = Topology::intel_style(2, 8, 2);
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1, 2, 3],
            1,
            &cb("cores"),
            &dist("block:block"),
        )
        .unwrap();
        // Same cores, OS numbering: core c of socket 0 is PUs c and c+16.
        assert_eq!(
            masks(&b),
            vec![vec![0, 16], vec![1, 17], vec![2, 18], vec![3, 19]]
        );
    }

    #[test]
    fn cores_cyclic_alternates_sockets() {
        let lin = Topology::uniform(2, 8, 2);
        let b = task_masks(
            &lin,
            &all(&lin),
            &[0, 1, 2, 3],
            1,
            &cb("cores"),
            &dist("block:cyclic"),
        )
        .unwrap();
        assert_eq!(
            masks(&b),
            vec![vec![0, 1], vec![16, 17], vec![2, 3], vec![18, 19]]
        );
        // No -m at all: cyclic at socket level too.
        let d = task_masks(
            &lin,
            &all(&lin),
            &[0, 1, 2, 3],
            1,
            &cb("cores"),
            &Distribution::default(),
        )
        .unwrap();
        assert_eq!(masks(&d), masks(&b));
        let intel = Topology::intel_style(2, 8, 2);
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1],
            1,
            &cb("cores"),
            &dist("cyclic:cyclic"),
        )
        .unwrap();
        assert_eq!(masks(&b), vec![vec![0, 16], vec![8, 24]]);
    }

    #[test]
    fn threads_block_cyclic_fcyclic_with_two_cpus_per_task() {
        let lin = Topology::uniform(2, 8, 2);
        let t = &[0, 1];
        let blk = task_masks(&lin, &all(&lin), t, 2, &cb("threads"), &dist("block:block")).unwrap();
        assert_eq!(masks(&blk), vec![vec![0, 1], vec![2, 3]]);
        let cyc = task_masks(
            &lin,
            &all(&lin),
            t,
            2,
            &cb("threads"),
            &dist("block:cyclic"),
        )
        .unwrap();
        assert_eq!(masks(&cyc), vec![vec![0, 1], vec![16, 17]]);
        let fcy = task_masks(
            &lin,
            &all(&lin),
            t,
            2,
            &cb("threads"),
            &dist("block:fcyclic"),
        )
        .unwrap();
        assert_eq!(masks(&fcy), vec![vec![0, 16], vec![1, 17]]);
    }

    #[test]
    fn sockets_bind_to_whole_sockets_of_the_allocation() {
        let intel = Topology::intel_style(2, 8, 2);
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1],
            1,
            &cb("sockets"),
            &dist("block:cyclic"),
        )
        .unwrap();
        assert_eq!(masks(&b)[0], [range(0, 8), range(16, 24)].concat());
        assert_eq!(masks(&b)[1], [range(8, 16), range(24, 32)].concat());
        // Only part of socket 0 allocated: the task gets that part.
        let lin = Topology::uniform(2, 8, 2);
        let b = task_masks(&lin, &range(0, 4), &[7], 1, &cb("sockets"), &dist("block")).unwrap();
        assert_eq!(masks(&b), vec![range(0, 4)]);
        assert_eq!(b[0].global_id, 7);
    }

    #[test]
    fn explicit_maps_and_masks_use_os_ids() {
        let intel = Topology::intel_style(2, 8, 2);
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1, 2],
            1,
            &cb("map_cpu:16,3"),
            &dist("block"),
        )
        .unwrap();
        assert_eq!(masks(&b), vec![vec![16], vec![3], vec![16]]);
        assert_eq!(env(&b[0], "SLURM_CPU_BIND"), "quiet,map_cpu:16,3");
        assert_eq!(env(&b[0], "SLURM_CPU_BIND_TYPE"), "map_cpu:");
        assert_eq!(env(&b[0], "SLURM_CPU_BIND_LIST"), "16,3");
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1],
            1,
            &cb("mask_cpu:0x3,0x30000"),
            &dist("block"),
        )
        .unwrap();
        assert_eq!(masks(&b), vec![vec![0, 1], vec![16, 17]]);
        // map_cpu outside the allocation.
        let e = task_masks(
            &intel,
            &range(0, 2),
            &[0],
            1,
            &cb("map_cpu:5"),
            &dist("block"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPU binding outside of job step allocation, allocated CPUs are: 0x00010001."
        );
    }

    #[test]
    fn rank_none_and_whole_node_rules() {
        let lin = Topology::uniform(2, 8, 2);
        let b = task_masks(&lin, &all(&lin), &[0, 1, 2], 1, &cb("rank"), &dist("block")).unwrap();
        assert_eq!(masks(&b), vec![vec![0], vec![1], vec![2]]);
        let intel = Topology::intel_style(2, 8, 2);
        let b = task_masks(
            &intel,
            &all(&intel),
            &[0, 1],
            1,
            &cb("rank"),
            &dist("block"),
        )
        .unwrap();
        assert_eq!(masks(&b), vec![vec![0], vec![16]]);
        let none = task_masks(&lin, &all(&lin), &[0, 1], 1, &cb("none"), &dist("block")).unwrap();
        assert!(none.iter().all(|t| t.os_cpus.is_none()));
        assert_eq!(env(&none[0], "SLURM_CPU_BIND"), "quiet,none");
        assert_eq!(env(&none[0], "SLURM_CPU_BIND_TYPE"), "none");
        // none on part of a node: tasks stay on the step's CPUs.
        let part = task_masks(&lin, &range(0, 4), &[0], 1, &cb("none"), &dist("block")).unwrap();
        assert_eq!(masks(&part), vec![range(0, 4)]);
        assert_eq!(
            task_masks(&lin, &range(0, 4), &[0], 1, &cb("rank"), &dist("block"))
                .unwrap_err()
                .to_string(),
            "Entire node must be allocated for rank"
        );
        let ld = task_masks(
            &lin,
            &all(&lin),
            &[0, 1, 2],
            1,
            &cb("rank_ldom"),
            &dist("block"),
        )
        .unwrap();
        assert_eq!(masks(&ld), vec![range(0, 16), range(16, 32), range(0, 16)]);
        let ld = task_masks(&lin, &all(&lin), &[0], 1, &cb("map_ldom:1"), &dist("block")).unwrap();
        assert_eq!(masks(&ld), vec![range(16, 32)]);
    }

    #[test]
    fn auto_binding_follows_the_allocation() {
        let lin = Topology::uniform(2, 8, 2);
        let none = CpuBind::default();
        // 2 tasks on 2 whole sockets: sockets.
        let b = task_masks(&lin, &all(&lin), &[0, 1], 16, &none, &dist("block")).unwrap();
        assert_eq!(masks(&b), vec![range(0, 16), range(16, 32)]);
        // 4 tasks x 1 on 4 whole cores: cores.
        let b = task_masks(
            &lin,
            &range(0, 8),
            &[0, 1, 2, 3],
            1,
            &none,
            &dist("block:block"),
        )
        .unwrap();
        assert_eq!(
            masks(&b),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(
            env(&b[0], "SLURM_CPU_BIND_LIST"),
            "0x00000003,0x0000000C,0x00000030,0x000000C0"
        );
        assert_eq!(env(&b[0], "SLURM_CPU_BIND_TYPE"), "mask_cpu:");
        assert_eq!(
            env(&b[0], "SLURM_CPU_BIND"),
            "quiet,mask_cpu:0x00000003,0x0000000C,0x00000030,0x000000C0"
        );
        assert_eq!(env(&b[0], "SLURM_CPU_BIND_VERBOSE"), "quiet");
        // 3 tasks on 3 CPUs spread over 2 cores: threads.
        let b = task_masks(&lin, &[0, 1, 2], &[0, 1, 2], 1, &none, &dist("block:block")).unwrap();
        assert_eq!(masks(&b), vec![vec![0], vec![1], vec![2]]);
        // 2 tasks on 8 CPUs: no unit fits; every task gets the step's CPUs...
        let b = task_masks(&lin, &range(0, 8), &[0, 1], 1, &none, &dist("block")).unwrap();
        assert_eq!(masks(&b), vec![range(0, 8), range(0, 8)]);
        assert_eq!(env(&b[0], "SLURM_CPU_BIND"), "quiet,mask_cpu:0x000000FF");
        // ...unless TaskPluginParam says autobind=cores.
        let auto = AutoBind::from_task_plugin_param("Autobind=Cores,verbose");
        assert_eq!(auto, AutoBind::Cores);
        let b = task_masks_with(
            &lin,
            &range(0, 8),
            &[0, 1],
            1,
            &none,
            &dist("block:block"),
            auto,
        )
        .unwrap();
        assert_eq!(masks(&b), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn verbose_lines_as_task_affinity_writes_them() {
        let lin = Topology::uniform(2, 8, 2);
        let b = task_masks(
            &lin,
            &all(&lin),
            &[0, 1],
            1,
            &cb("verbose,cores"),
            &dist("block:block"),
        )
        .unwrap();
        assert_eq!(
            b[1].verbose_line("n1", 4242).unwrap(),
            "cpu-bind=MASK - n1, task  1  1 [4242]: mask 0xc set"
        );
        assert_eq!(env(&b[0], "SLURM_CPU_BIND_VERBOSE"), "verbose");
        let b = task_masks(
            &lin,
            &all(&lin),
            &[12],
            1,
            &cb("verbose,map_cpu:17"),
            &dist("block"),
        )
        .unwrap();
        assert_eq!(
            b[0].verbose_line("n1", 7).unwrap(),
            "cpu-bind=MAP  - n1, task 12  0 [7]: mask 0x20000 set"
        );
        let b = task_masks(&lin, &all(&lin), &[0], 1, &cb("v,none"), &dist("block")).unwrap();
        assert_eq!(
            b[0].verbose_line("n1", 7).unwrap(),
            "cpu-bind=NONE - n1, task  0  0 [7]: mask 0x0"
        );
        let q = task_masks(&lin, &all(&lin), &[0], 1, &cb("cores"), &dist("block")).unwrap();
        assert_eq!(q[0].verbose_line("n1", 7), None);
    }

    #[test]
    fn layout_errors() {
        let lin = Topology::uniform(1, 2, 1);
        assert_eq!(
            task_masks(&lin, &[0], &[0, 1], 1, &cb("threads"), &dist("block")).unwrap_err(),
            BindError::TooFewCpus { cpus: 1, tasks: 2 }
        );
        assert!(matches!(
            task_masks(&lin, &[5], &[0], 1, &cb("threads"), &dist("block")).unwrap_err(),
            BindError::NoSuchCpu { cpu: 5, .. }
        ));
    }

    /// srun's options, tasks, cpus per task, --cpu-bind, -m, the step's
    /// CPUs and the mask list slurmd computed.
    type Case<'a> = (&'a str, u32, u32, &'a str, &'a str, Vec<u32>, &'a str);
    type OwnedCase<'a> = (&'a str, u32, u32, &'a str, &'a str, Vec<u32>, String);

    /// Cases run on slurmd 22.05.8 with TaskPlugin=task/affinity,
    /// CR_Core, and HWLOC_SYNTHETIC="package:2 core:8 pu:2" (2x8x2, linear
    /// numbering): srun's options, the CPUs the step was given, and the
    /// mask list slurmd logged (`_lllp_generate_cpu_bind`), which is
    /// SLURM_CPU_BIND_LIST.
    #[test]
    fn matches_slurm_22_05_task_affinity() {
        let t = Topology::uniform(2, 8, 2);
        let whole: Vec<u32> = all(&t);
        let cases: &[Case] = &[
            ("-n4 --cpu-bind=cores -m block:block", 4, 1, "cores", "block:block", range(0, 4),
             "0x00000003,0x0000000C,0x00000003,0x0000000C"),
            ("-n4 -m block:block", 4, 1, "", "block:block", range(0, 4),
             "0x00000001,0x00000002,0x00000004,0x00000008"),
            ("-n2 -c16", 2, 16, "", "", whole.clone(), "0x0000FFFF,0xFFFF0000"),
            ("-n4 --cpu-bind=cores -m block:cyclic", 4, 1, "cores", "block:cyclic", vec![0, 1, 16, 17],
             "0x00000003,0x00030000,0x00030000,0x00000003"),
            ("-n4 --cpu-bind=cores", 4, 1, "cores", "", vec![0, 1, 16, 17],
             "0x00000003,0x00030000,0x00030000,0x00000003"),
            ("-n2 -c2 --cpu-bind=threads -m block:fcyclic", 2, 2, "threads", "block:fcyclic", range(0, 4),
             "0x00000003,0x0000000C"),
            ("-n2 --cpu-bind=sockets", 2, 1, "sockets", "", range(0, 2), "0x00000003,0x00000003"),
            ("-n2 -c4 -m block:cyclic", 2, 4, "", "block:cyclic", range(0, 8), "0x0000000F,0x000000F0"),
            ("-n4 --cpu-bind=cores -m block:cyclic (socket 0 only)", 4, 1, "cores", "block:cyclic", range(0, 4),
             "0x00000003,0x0000000C,0x00000003,0x0000000C"),
            ("-n4 --cpu-bind=threads -m block:fcyclic", 4, 1, "threads", "block:fcyclic", vec![0, 1, 16, 17],
             "0x00000001,0x00010000,0x00000002,0x00020000"),
            ("-n2 (one core)", 2, 1, "", "", range(0, 2), "0x00000001,0x00000002"),
            ("-n16 --exclusive", 16, 1, "", "", whole.clone(),
             "0x00000003,0x00030000,0x0000000C,0x000C0000,0x00000030,0x00300000,0x000000C0,0x00C00000,0x00000300,0x03000000,0x00000C00,0x0C000000,0x00003000,0x30000000,0x0000C000,0xC0000000"),
            ("-n2 -c3 --cpu-bind=cores -m block:block", 2, 3, "cores", "block:block", range(0, 6),
             "0x0000000F,0x00000033"),
            ("-n2 -c3 --cpu-bind=cores -m block:cyclic", 2, 3, "cores", "block:cyclic", range(0, 6),
             "0x0000000F,0x00000033"),
            ("-n2 -c8 -m plane=2 --cpu-bind=cores", 2, 8, "cores", "plane=2", range(0, 16),
             "0x000000FF,0x0000FF00"),
            ("-n8 -m block:block --cpu-bind=sockets", 8, 1, "sockets", "block:block", range(0, 8),
             &["0x000000FF"; 8].join(",")),
            ("-n4 -c4 --cpu-bind=cores -m block:fcyclic", 4, 4, "cores", "block:fcyclic", range(0, 16),
             "0x0000000F,0x000000F0,0x00000F00,0x0000F000"),
            ("-n3 -c2 --cpu-bind=cores -m block:cyclic", 3, 2, "cores", "block:cyclic", range(0, 6),
             "0x00000003,0x0000000C,0x00000030"),
            ("-n2 -c16 --cpu-bind=sockets -m block:block", 2, 16, "sockets", "block:block", whole.clone(),
             "0x0000FFFF,0xFFFF0000"),
            ("-n6 --cpu-bind=threads -m cyclic:cyclic", 6, 1, "threads", "cyclic:cyclic", vec![0, 1, 2, 3, 16, 17],
             "0x00000001,0x00010000,0x00000002,0x00020000,0x00000004,0x00000008"),
        ];
        let cores16 = "0x00000003,0x00030000,0x0000000C,0x000C0000,0x00000030,0x00300000,0x000000C0,0x00C00000,0x00000300,0x03000000,0x00000C00,0x0C000000,0x00003000,0x30000000,0x0000C000,0xC0000000";
        let threads32 = "0x00000001,0x00010000,0x00000002,0x00020000,0x00000004,0x00040000,0x00000008,0x00080000,0x00000010,0x00100000,0x00000020,0x00200000,0x00000040,0x00400000,0x00000080,0x00800000,0x00000100,0x01000000,0x00000200,0x02000000,0x00000400,0x04000000,0x00000800,0x08000000,0x00001000,0x10000000,0x00002000,0x20000000,0x00004000,0x40000000,0x00008000,0x80000000";
        let mut all_cases: Vec<OwnedCase> = cases
            .iter()
            .map(|(a, n, c, b, d, al, want)| (*a, *n, *c, *b, *d, al.clone(), want.to_string()))
            .collect();
        all_cases.push((
            "-n32 --cpu-bind=cores",
            32,
            1,
            "cores",
            "",
            whole.clone(),
            format!("{cores16},{cores16}"),
        ));
        all_cases.push(("-n32", 32, 1, "", "", whole.clone(), threads32.to_string()));
        for (args, n, cpt, b, d, alloc, want) in all_cases {
            let bind = if b.is_empty() {
                CpuBind::default()
            } else {
                cb(b)
            };
            let dist = if d.is_empty() {
                Distribution::default()
            } else {
                dist(d)
            };
            let tasks: Vec<u32> = (0..n).collect();
            let got = task_masks(&t, &alloc, &tasks, cpt, &bind, &dist).unwrap();
            assert_eq!(env(&got[0], "SLURM_CPU_BIND_LIST"), want, "srun {args}");
        }
        // The same node with Intel-style OS numbering (hwloc's synthetic
        // `pu:2(indexes=0,16,1,17,...)`): the same layout, in OS ids.
        let intel = Topology::intel_style(2, 8, 2);
        let intel_cases: &[Case] = &[
            (
                "-n4 --cpu-bind=cores -m block:block",
                4,
                1,
                "cores",
                "block:block",
                range(0, 4),
                "0x00010001,0x00020002,0x00010001,0x00020002",
            ),
            (
                "-n4 --cpu-bind=cores -m block:cyclic",
                4,
                1,
                "cores",
                "block:cyclic",
                vec![0, 1, 16, 17],
                "0x00010001,0x01000100,0x01000100,0x00010001",
            ),
            (
                "-n2 -c16 --cpu-bind=sockets -m block:block",
                2,
                16,
                "sockets",
                "block:block",
                whole.clone(),
                "0x00FF00FF,0xFF00FF00",
            ),
            (
                "-n4 -m block:block",
                4,
                1,
                "",
                "block:block",
                range(0, 4),
                "0x00000001,0x00010000,0x00000002,0x00020000",
            ),
        ];
        for (args, n, cpt, b, d, alloc, want) in intel_cases {
            let bind = if b.is_empty() {
                CpuBind::default()
            } else {
                cb(b)
            };
            let tasks: Vec<u32> = (0..*n).collect();
            let got = task_masks(&intel, alloc, &tasks, *cpt, &bind, &dist(d)).unwrap();
            assert_eq!(
                env(&got[0], "SLURM_CPU_BIND_LIST"),
                *want,
                "srun {args} (Intel numbering)"
            );
        }
        assert_eq!(
            task_masks(
                &intel,
                &range(0, 2),
                &[0, 1],
                1,
                &cb("map_cpu:5,6"),
                &Distribution::default()
            )
            .unwrap_err()
            .to_string(),
            "CPU binding outside of job step allocation, allocated CPUs are: 0x00010001."
        );
        // And the errors slurmd logged for the same node.
        assert_eq!(
            task_masks(
                &t,
                &range(0, 2),
                &[0, 1],
                1,
                &cb("map_cpu:5,6"),
                &Distribution::default()
            )
            .unwrap_err()
            .to_string(),
            "CPU binding outside of job step allocation, allocated CPUs are: 0x00000003."
        );
        assert_eq!(
            task_masks(
                &t,
                &range(0, 6),
                &[0, 1, 2],
                1,
                &cb("rank_ldom"),
                &Distribution::default()
            )
            .unwrap_err()
            .to_string(),
            "Entire node must be allocated for rank_ldom"
        );
    }

    /// Environment and verbose lines seen in tasks of slurmd 22.05.8
    /// (task/affinity) on a node of 1 socket x 2 cores x 1 thread
    /// (HWLOC_SYNTHETIC="package:1 core:2 pu:1"), where binding really
    /// happens: `srun <args> bash -c 'echo $SLURM_CPU_BIND...'`.
    #[test]
    fn matches_slurm_22_05_env_and_verbose_lines() {
        let t = Topology::uniform(1, 2, 1);
        let check = |bind: &str, alloc: &[u32], n: u32, want_env: [&str; 3], lines: &[&str]| {
            let tasks: Vec<u32> = (0..n).collect();
            let b = task_masks(&t, alloc, &tasks, 1, &cb(bind), &Distribution::default())
                .unwrap_or_else(|e| panic!("--cpu-bind={bind}: {e}"));
            assert_eq!(
                env(&b[0], "SLURM_CPU_BIND"),
                want_env[0],
                "--cpu-bind={bind}"
            );
            assert_eq!(
                env(&b[0], "SLURM_CPU_BIND_TYPE"),
                want_env[1],
                "--cpu-bind={bind}"
            );
            assert_eq!(
                env(&b[0], "SLURM_CPU_BIND_LIST"),
                want_env[2],
                "--cpu-bind={bind}"
            );
            for (i, want) in lines.iter().enumerate() {
                assert_eq!(
                    b[i].verbose_line("vm", 100 + i as u32).as_deref(),
                    Some(*want)
                );
            }
        };
        check(
            "verbose,cores",
            &[0, 1],
            2,
            ["verbose,mask_cpu:0x1,0x2", "mask_cpu:", "0x1,0x2"],
            &[
                "cpu-bind=MASK - vm, task  0  0 [100]: mask 0x1 set",
                "cpu-bind=MASK - vm, task  1  1 [101]: mask 0x2 set",
            ],
        );
        check(
            "verbose,none",
            &[0, 1],
            2,
            ["verbose,none", "none", ""],
            &["cpu-bind=NONE - vm, task  0  0 [100]: mask 0x0"],
        );
        check(
            "verbose,map_cpu:1,0",
            &[0, 1],
            2,
            ["verbose,map_cpu:1,0", "map_cpu:", "1,0"],
            &["cpu-bind=MAP  - vm, task  0  0 [100]: mask 0x2 set"],
        );
        check(
            "v,mask_cpu:0x3,0x2",
            &[0, 1],
            2,
            ["verbose,mask_cpu:3,2", "mask_cpu:", "3,2"],
            &[
                "cpu-bind=MASK - vm, task  0  0 [100]: mask 0x3 set",
                "cpu-bind=MASK - vm, task  1  1 [101]: mask 0x2 set",
            ],
        );
        check(
            "verbose,mask_cpu:0x0003",
            &[0, 1],
            2,
            ["verbose,mask_cpu:3", "mask_cpu:", "3"],
            &[],
        );
        check(
            "verbose",
            &[0],
            1,
            ["verbose,mask_cpu:0x1", "mask_cpu:", "0x1"],
            &["cpu-bind=MASK - vm, task  0  0 [100]: mask 0x1 set"],
        );
        check(
            "verbose,rank_ldom",
            &[0, 1],
            2,
            ["verbose,rank_ldom", "rank_ldom", ""],
            &[
                "cpu-bind=LDRANK - vm, task  0  0 [100]: mask 0x3 set",
                "cpu-bind=LDRANK - vm, task  1  1 [101]: mask 0x3 set",
            ],
        );
        check(
            "verbose,rank",
            &[0, 1],
            2,
            ["verbose,rank", "rank", ""],
            &["cpu-bind=RANK - vm, task  0  0 [100]: mask 0x1 set"],
        );
        check(
            "verbose,sockets",
            &[0, 1],
            2,
            ["verbose,mask_cpu:0x3,0x3", "mask_cpu:", "0x3,0x3"],
            &[],
        );
        check(
            "verbose,threads,none",
            &[0],
            1,
            ["verbose,threads,mask_cpu:0x1", "threads,mask_cpu:", "0x1"],
            &["cpu-bind-threads=MASK - vm, task  0  0 [100]: mask 0x1 set"],
        );
        let quiet = task_masks(
            &t,
            &[0, 1],
            &[0, 1],
            1,
            &CpuBind::default(),
            &Distribution::default(),
        )
        .unwrap();
        assert_eq!(env(&quiet[0], "SLURM_CPU_BIND"), "quiet,mask_cpu:0x1,0x2");
        assert_eq!(env(&quiet[0], "SLURM_CPU_BIND_VERBOSE"), "quiet");
        for (bind, msg) in [
            (
                "verbose,rank",
                "Entire node must be allocated for verbose,rank,one_thread",
            ),
            (
                "verbose,map_ldom:0",
                "Entire node must be allocated for verbose,map_ldom,one_thread",
            ),
        ] {
            let e = task_masks(&t, &[0], &[0], 1, &cb(bind), &Distribution::default()).unwrap_err();
            assert_eq!(e.to_string(), msg);
        }
    }

    #[test]
    fn gpus_per_task() {
        let t = Topology::intel_style(2, 8, 2);
        let gpus = vec![
            GpuAffinity {
                index: 0,
                cores: range(0, 8),
            },
            GpuAffinity {
                index: 1,
                cores: range(8, 16),
            },
        ];
        let closest = GpuBind::parse("closest").unwrap();
        // Socket 0 core 0 is OS 0 and 16; socket 1 core 0 is OS 8 and 24.
        assert_eq!(task_gpus(&t, &gpus, &[0, 16], 0, &closest), vec![0]);
        assert_eq!(task_gpus(&t, &gpus, &[8, 24], 1, &closest), vec![1]);
        assert_eq!(task_gpus(&t, &gpus, &[0, 8], 0, &closest), vec![0, 1]);
        assert_eq!(task_gpus(&t, &gpus, &[], 0, &closest), vec![0, 1]);
        // No GPU near the task's CPUs: all of them.
        assert_eq!(task_gpus(&t, &gpus[..1], &[8], 0, &closest), vec![0]);
        let none = GpuBind::default();
        assert_eq!(task_gpus(&t, &gpus, &[0], 0, &none), vec![0, 1]);
        let single = GpuBind::parse("single:1").unwrap();
        assert_eq!(task_gpus(&t, &gpus, &[0, 8], 1, &single), vec![1]);
        assert_eq!(task_gpus(&t, &gpus, &[0], 3, &single), vec![0]);
        let map = GpuBind::parse("map_gpu:1,0").unwrap();
        assert_eq!(task_gpus(&t, &gpus, &[0], 0, &map), vec![1]);
        assert_eq!(task_gpus(&t, &gpus, &[0], 3, &map), vec![0]);
        let mask = GpuBind::parse("mask_gpu:0x3,0x2").unwrap();
        assert_eq!(task_gpus(&t, &gpus, &[0], 0, &mask), vec![0, 1]);
        assert_eq!(task_gpus(&t, &gpus, &[0], 1, &mask), vec![1]);
        let map_missing = GpuBind::parse("map_gpu:7").unwrap();
        assert!(task_gpus(&t, &gpus, &[0], 0, &map_missing).is_empty());
    }

    #[test]
    fn affinity_mask_restricts_a_child() {
        use std::os::unix::process::CommandExt;
        let mask = AffinityMask::new(&[0]);
        assert!(!mask.is_empty());
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        // SAFETY: apply() makes one system call and allocates nothing.
        unsafe {
            cmd.pre_exec(move || mask.apply());
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.split_whitespace().last(), Some("0"), "{text}");
    }

    #[test]
    fn affinity_mask_ignores_cpus_the_machine_lacks() {
        let mask = AffinityMask::new(&[100_000, 1_000_000]);
        assert!(mask.is_empty());
        assert!(mask.apply().is_ok());
    }
}
