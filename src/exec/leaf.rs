//! What a node does with a job's share of it (the CPUs, memory and GRES the
//! controller chose by identity): Slurm's proctrack/cgroup, task/cgroup and
//! task/affinity in one place, between the launch messages and the
//! processes.
//!
//! - **Tracking** (`ProctrackType=proctrack/cgroup`, Slurm's default): every
//!   job gets a cgroup, and each of its steps one inside it, so that a
//!   step's end or a job's cancel finds and kills every process, including
//!   those that double-forked out of their session.
//! - **Confinement** (`TaskPlugin=task/cgroup` with cgroup.conf's
//!   `Constrain*`): the job's cpuset is its CPUs, its memory limit its
//!   memory, and of the node's GRES device files only its own are open to it.
//! - **Binding** (`TaskPlugin=task/affinity`): each task's CPU mask, as
//!   `exec::bind` computes it, and its GPUs (`--gpu-bind`).
//!
//! Everything here that touches the file system runs on a launch's own
//! thread (see `supervisor`), never on the event loop.

use std::path::PathBuf;
use std::sync::Arc;

use super::bind::{self, AffinityMask, AutoBind, GpuAffinity};
use super::contain::{
    Attach, CgroupUsage, Containment, DeviceRules, JobCgroup, JobLimits, StepCgroup, StepName,
};
use super::hw::topology::Topology;
use crate::model::acct::NodeUsage;
use crate::model::binding::{CpuBind, Distribution, GpuBind};
use crate::wire::messages::{NodeShare, StepLaunch};

/// One of the node's GRES device files.
#[derive(Debug, Clone)]
pub struct DeviceFile {
    pub name: String,
    pub index: u32,
    pub path: PathBuf,
    /// Abstract cores near it (gres.conf `Cores=`).
    pub cores: Vec<u32>,
}

/// The node's leaf settings, made once at start-up.
pub struct Leaf {
    pub node: String,
    /// `None` unless ProctrackType or TaskPlugin uses cgroups.
    containment: Option<Arc<Containment>>,
    /// task/cgroup: apply cgroup.conf's limits.
    confine: bool,
    /// ConstrainDevices under task/cgroup: GPUs are renumbered from 0.
    fence_devices: bool,
    /// task/affinity.
    affinity: bool,
    autobind: AutoBind,
    /// Maps Slurm's abstract CPU ids to this machine's.
    topo: Arc<Topology>,
    devices: Vec<DeviceFile>,
}

impl Leaf {
    /// Settings from slurm.conf and cgroup.conf for node `node`: whether to
    /// track, confine and bind; the machine's topology for binding; the
    /// node's device files (gres.conf's, and with AutoDetect the GPUs
    /// `detected_gpus` names). Blocking (reads cgroup.conf, probes the cgroup
    /// mount, asks hwloc): call it off the event loop.
    ///
    /// The node's cgroup root is named after the node and its spool
    /// directory (`canopy_n1_1a2b3c4d`): stable across restarts, so a
    /// restarted daemon finds its jobs, and distinct for daemons of
    /// different clusters on one host (test clusters all have an `n1`).
    pub fn for_node(
        conf: &crate::config::Config,
        node: &str,
        rank: usize,
        spool: &std::path::Path,
        detected: Option<Topology>,
        detected_gpus: &[crate::model::node::ReportedGpu],
    ) -> Leaf {
        let plugins = &conf.task_plugins;
        let confine = plugins.iter().any(|p| p == "task/cgroup");
        let affinity = plugins.iter().any(|p| p == "task/affinity");
        let cg_path = crate::config::cgroup::CgroupConf::path_beside(&conf.path);
        let cg = match crate::config::cgroup::CgroupConf::load(&cg_path) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(node, error = %e, "cgroup.conf unreadable; using Slurm's defaults");
                crate::config::cgroup::CgroupConf::default()
            }
        };
        for w in &cg.warnings {
            tracing::warn!(node, "{w}");
        }
        let containment = (conf.proctrack_cgroup || confine)
            .then(|| Arc::new(Containment::start(&cg, &root_id(node, spool))));
        let nc = conf.nodes.get(rank);
        let topo = machine_topology(nc, node, detected);
        let gres = conf.node_gres(rank);
        let mut devices: Vec<DeviceFile> = gres
            .map(|g| {
                g.devices
                    .iter()
                    .filter_map(|d| {
                        Some(DeviceFile {
                            name: d.name.clone(),
                            index: d.index,
                            path: PathBuf::from(d.file.as_ref()?),
                            cores: d.cores.clone().unwrap_or_default(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        // With AutoDetect=nvml the GPUs' files come from NVML, not from
        // gres.conf: without them a job would be neither fenced from the
        // GPUs it was not given nor renumbered (as slurmd, which takes its
        // GPU list from the detection).
        if gres.is_some_and(|g| g.detects()) {
            for g in detected_gpus {
                let known = devices
                    .iter()
                    .any(|d| d.name == "gpu" && d.index == g.index);
                if !known && !g.file.is_empty() {
                    devices.push(DeviceFile {
                        name: "gpu".into(),
                        index: g.index,
                        path: PathBuf::from(&g.file),
                        cores: g.cores.clone(),
                    });
                }
            }
        }
        Leaf {
            node: node.to_string(),
            containment,
            confine,
            fence_devices: confine && cg.constrain_devices,
            affinity,
            autobind: AutoBind::from_task_plugin_param(&conf.task_plugin_param),
            topo: Arc::new(topo),
            devices,
        }
    }

    pub fn containment(&self) -> Option<&Arc<Containment>> {
        self.containment.as_ref()
    }

    /// OS CPU ids of abstract ones this machine has.
    fn os_cpus(&self, ids: &[u32]) -> Vec<u32> {
        let mut v: Vec<u32> = ids
            .iter()
            .filter_map(|&c| self.topo.abstract_to_os(c))
            .collect();
        v.sort_unstable();
        v
    }

    /// The cgroup limits for `share` (none without task/cgroup).
    pub fn limits(&self, share: Option<&NodeShare>) -> JobLimits {
        let Some(share) = share.filter(|_| self.confine) else {
            return JobLimits::default();
        };
        let cpus = self.os_cpus(&share.cpu_ids);
        let held: Vec<&crate::model::tres::GresAlloc> = share.gres.iter().collect();
        let holds = |d: &DeviceFile| {
            held.iter()
                .any(|g| g.name == d.name && g.indices.contains(&d.index))
        };
        let devices = (!self.devices.is_empty()).then(|| DeviceRules {
            allow: self
                .devices
                .iter()
                .filter(|d| holds(d))
                .map(|d| d.path.clone())
                .collect(),
            deny: self
                .devices
                .iter()
                .filter(|d| !holds(d))
                .map(|d| d.path.clone())
                .collect(),
        });
        JobLimits {
            // A share naming no CPU this machine has (a simulated node
            // larger than its host) leaves the cpuset alone.
            cpus: (!cpus.is_empty()).then_some(cpus),
            mems: None,
            mem_bytes: (share.mem_mb > 0).then(|| share.mem_mb.saturating_mul(1 << 20)),
            devices,
        }
    }

    /// The job's cgroup for tracking only, no limits written: for a step
    /// whose job has none here (a job adopted after a daemon restart), so
    /// that the job's own limits, if any, are left as they are.
    pub fn track_job(&self, job_id: u32, uid: u32) -> Result<Option<Arc<JobCgroup>>, String> {
        self.job(job_id, uid, None)
    }

    /// Whether programs given `share`'s GPUs should see them renumbered
    /// from 0: only when the fence is really in place (a confined node
    /// whose cgroups work, and a device file for every GPU held), else
    /// `CUDA_VISIBLE_DEVICES` is all that steers a program to its own GPUs.
    pub fn renumbers(&self, share: Option<&NodeShare>) -> bool {
        let fenced = self.fence_devices
            && self
                .containment
                .as_ref()
                .is_some_and(|c| c.fences_devices());
        fenced
            && share.is_some_and(|s| {
                s.gpus()
                    .iter()
                    .all(|&i| self.devices.iter().any(|d| d.name == "gpu" && d.index == i))
            })
    }

    /// Make (or reopen) the job's cgroup. `Ok(None)`: this node does not
    /// track by cgroup.
    pub fn job(
        &self,
        job_id: u32,
        uid: u32,
        share: Option<&NodeShare>,
    ) -> Result<Option<Arc<JobCgroup>>, String> {
        let Some(c) = &self.containment else {
            return Ok(None);
        };
        c.job(job_id, uid, &self.limits(share))
            .map(|j| Some(Arc::new(j)))
            .map_err(|e| format!("cannot set up the job's cgroup: {e}"))
    }

    /// The per-task setup of a step's tasks on this node: CPU masks and
    /// binding variables (task/affinity), GPUs, and the verbose lines.
    pub fn tasks(
        &self,
        l: &StepLaunch,
        node_index: usize,
        ranks: std::ops::Range<u32>,
    ) -> Result<Vec<TaskSetup>, String> {
        let share = l.held.get(node_index);
        let tasks: Vec<u32> = ranks.collect();
        let res = &l.resources;
        let gpu_bind = match res.gpu_bind.as_deref().map(GpuBind::parse).transpose() {
            Ok(b) => b,
            Err(e) => return Err(e.to_string()),
        };
        let mut out: Vec<TaskSetup> = tasks.iter().map(|_| TaskSetup::default()).collect();
        // task/affinity; without it (or without CPU ids to bind to) the
        // tasks keep the step's cpuset.
        let alloc: Vec<u32> = share.map(|s| s.cpu_ids.clone()).unwrap_or_default();
        if self.affinity && !alloc.is_empty() {
            let cpu_bind = match res.cpu_bind.as_deref() {
                Some(t) => CpuBind::parse(t).map_err(|e| e.to_string())?,
                None => CpuBind::default(),
            };
            let dist = match res.distribution.as_deref() {
                Some(t) => Distribution::parse(t).map_err(|e| e.to_string())?,
                None => Distribution::default(),
            };
            let bindings = bind::task_masks_with(
                &self.topo,
                &alloc,
                &tasks,
                l.cpus_per_task.unwrap_or(1).max(1),
                &cpu_bind,
                &dist,
                self.autobind,
            )
            .map_err(|e| e.to_string())?;
            for (setup, b) in out.iter_mut().zip(bindings) {
                if let Some(cpus) = &b.os_cpus {
                    setup.affinity = Some(AffinityMask::new(cpus));
                    setup.os_cpus = cpus.clone();
                }
                setup.env.extend(b.env.iter().cloned());
                setup.verbose = b.verbose_line(&self.node, 0).map(|line| {
                    // The pid is only known in the child: split around it.
                    let (head, tail) = line.split_once("[0]").unwrap_or((&line, ""));
                    (format!("{head}["), format!("]{tail}\n"))
                });
            }
        }
        // GPUs: the step's, per task as --gpu-bind says.
        let gpus: Vec<u32> = share.map(NodeShare::gpus).unwrap_or_default();
        let renumber = self.renumbers(share);
        if !gpus.is_empty() {
            let affinity: Vec<GpuAffinity> = gpus
                .iter()
                .map(|&index| GpuAffinity {
                    index,
                    cores: self
                        .devices
                        .iter()
                        .find(|d| d.name == "gpu" && d.index == index)
                        .map(|d| d.cores.clone())
                        .unwrap_or_default(),
                })
                .collect();
            for (local, setup) in out.iter_mut().enumerate() {
                let mine = match &gpu_bind {
                    Some(b) => {
                        bind::task_gpus(&self.topo, &affinity, &setup.os_cpus, local as u32, b)
                    }
                    None => gpus.clone(),
                };
                setup
                    .env
                    .extend(super::env::gpu_vars(&gpus, "SLURM_STEP_GPUS", false));
                // Which of the step's GPUs this task should open.
                let visible: Vec<String> = mine
                    .iter()
                    .map(|g| {
                        if renumber {
                            gpus.iter().position(|x| x == g).unwrap_or(0).to_string()
                        } else {
                            g.to_string()
                        }
                    })
                    .collect();
                let visible = visible.join(",");
                setup
                    .env
                    .retain(|(k, _)| k != "CUDA_VISIBLE_DEVICES" && k != "GPU_DEVICE_ORDINAL");
                setup
                    .env
                    .push(("CUDA_VISIBLE_DEVICES".into(), visible.clone()));
                setup.env.push(("GPU_DEVICE_ORDINAL".into(), visible));
            }
        }
        Ok(out)
    }
}

/// What one task needs before it is forked.
#[derive(Default)]
pub struct TaskSetup {
    pub affinity: Option<AffinityMask>,
    pub os_cpus: Vec<u32>,
    /// Variables to add (binding, GPUs).
    pub env: Vec<(String, String)>,
    /// `--cpu-bind=verbose`: the line's text before and after the pid.
    pub verbose: Option<(String, String)>,
}

/// What names a node daemon's cgroup root (`canopy_<this>`): the node and
/// a tag of its spool directory.
pub fn root_id(node: &str, spool: &std::path::Path) -> String {
    format!("{node}_{:08x}", fnv1a(spool.as_os_str().as_encoded_bytes()))
}

/// FNV-1a, 32 bits: a short stable tag, not a security measure.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The topology binding uses: the machine's, when it has the shape
/// slurm.conf gives the node; else the configured shape numbered as Slurm
/// numbers it (a node configured unlike its host, as simulated and test
/// nodes are), whose CPUs the host lacks are then left out of masks.
fn machine_topology(
    nc: Option<&crate::config::NodeConf>,
    node: &str,
    detected: Option<Topology>,
) -> Topology {
    let layout = nc.map(|n| {
        crate::sched::Layout::of(n.cpus, n.sockets, n.cores_per_socket, n.threads_per_core)
    });
    // The daemon detected it already for its registration; else ask now.
    let detected = match detected {
        Some(t) => Ok(t),
        None => super::hw::topology::detect(),
    };
    match (detected, layout) {
        (Ok(t), Some(l))
            if t.sockets == l.sockets
                && t.cores_per_socket == l.cores_per_socket
                && t.threads_per_core == l.threads =>
        {
            t
        }
        (Ok(t), None) => t,
        (detected, Some(l)) => {
            if let Err(e) = detected {
                tracing::warn!(node, error = %e, "no hardware topology; binding by configured shape");
            }
            Topology::uniform(l.sockets, l.cores_per_socket, l.threads)
        }
        (Err(e), None) => {
            tracing::warn!(node, error = %e, "no hardware topology");
            Topology::uniform(1, 1, 1)
        }
    }
}

/// The batch step's cgroup in `job`, and the attach its script applies.
pub fn batch_step(job: &JobCgroup) -> Result<(StepCgroup, Attach), String> {
    let step = job
        .step(StepName::Batch, &JobLimits::default())
        .map_err(|e| format!("cannot set up the batch step's cgroup: {e}"))?;
    let attach = step
        .attach()
        .map_err(|e| format!("cannot set up the batch step's cgroup: {e}"))?;
    Ok((step, attach))
}

/// Write `head<pid>tail` to stderr from a forked child: no allocation
/// (the pid is formatted into a stack buffer).
pub fn write_verbose_in_child(head: &[u8], tail: &[u8]) {
    let mut digits = [0u8; 12];
    let mut n = std::process::id();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(2) };
    for part in [head, &digits[i..], tail] {
        let _ = nix::unistd::write(fd, part);
    }
}

/// Tear a finished step's cgroup down: kill whatever is left in it (a
/// daemon that double-forked away from its task), then remove it. Blocking
/// (waits for the kernel): run off the event loop.
pub fn end_step(step: StepCgroup, job_id: u32) {
    if let Err(e) = step.kill_all() {
        tracing::warn!(job_id, error = %e, "step's leftover processes not all killed");
    }
    if let Err(e) = step.remove() {
        tracing::warn!(job_id, error = %e, "step cgroup not removed");
    }
}

/// Tear a job's cgroup down at its end on this node (after its steps).
pub fn end_job(job: Arc<JobCgroup>) {
    let job_id = job.job_id();
    if let Err(e) = job.kill_all() {
        tracing::warn!(job_id, error = %e, "job's leftover processes not all killed");
    }
    match Arc::try_unwrap(job) {
        Ok(job) => {
            if let Err(e) = job.remove() {
                tracing::warn!(job_id, error = %e, "job cgroup not removed");
            }
        }
        // Another holder (a step still ending) removes it when it drops.
        Err(_) => tracing::debug!(job_id, "job cgroup still held; removed when released"),
    }
}

/// A step cgroup shared with readers (`sstat` of the batch step): its
/// owner takes it out to tear it down, after which readers find `None`.
pub type SharedStep = Arc<std::sync::Mutex<Option<StepCgroup>>>;

/// The batch step's usage now (one task, rank 0), and its processes; `None`
/// once the script has ended. Blocking (reads cgroup files).
pub fn batch_usage(step: &SharedStep, node: &str) -> Option<(NodeUsage, Vec<u32>)> {
    let held = step.lock().unwrap_or_else(|e| e.into_inner());
    let s = held.as_ref()?;
    let u = s.usage();
    let pids = s.pids().into_iter().map(|p| p as u32).collect();
    Some((node_usage(node, 0, u, &[u], s.oom_kills()), pids))
}

/// Where a step's usage goes when its last task has ended here.
pub type UsageSink = Box<dyn FnOnce(NodeUsage) + Send>;

/// A step's cgroups on this node, held while its tasks run: when the last
/// task has exited (the last holder drops), its usage is read and handed to
/// the sink (see [`StepGuard::on_end`]), then what is left in the step is
/// killed and the cgroup removed, on a thread of its own.
pub struct StepGuard {
    job_id: u32,
    step_id: u32,
    node: String,
    /// Step-wide rank of this node's first task (MaxRSSTask is step-wide).
    first_rank: u32,
    step: Option<StepCgroup>,
    /// Kept so their (still empty at fork) directories are not removed
    /// before the tasks are inside; read for per-task peaks.
    _tasks: Vec<super::contain::TaskCgroup>,
    sink: std::sync::Mutex<Option<UsageSink>>,
}

/// One node's usage of a step from its cgroup's numbers and its tasks':
/// MaxRSS per task (the highest one, step-wide rank), CPU times of the step.
/// Pure, so the aggregation rules are testable without cgroups.
pub fn node_usage(
    node: &str,
    first_rank: u32,
    step: CgroupUsage,
    tasks: &[CgroupUsage],
    oom_kills: u64,
) -> NodeUsage {
    let kb = |b: Option<u64>| b.unwrap_or(0) / 1024;
    let ms = |us: Option<u64>| us.unwrap_or(0) / 1000;
    let (mut max_task, mut max_task_kb, mut sum) = (first_rank, 0u64, 0u64);
    for (i, t) in tasks.iter().enumerate() {
        let peak = kb(t.max_rss_bytes);
        sum = sum.saturating_add(peak);
        if peak > max_task_kb {
            (max_task, max_task_kb) = (first_rank + i as u32, peak);
        }
    }
    // cpuacct.stat may be missing where cpuacct.usage is not: then the
    // total counts as user time, so TotalCPU stays right.
    let (user, system) = match (step.user_cpu_us, step.system_cpu_us) {
        (None, None) => (step.total_cpu_us, None),
        (u, s) => (u, s),
    };
    NodeUsage {
        node: node.to_string(),
        tasks: tasks.len() as u32,
        max_rss_kb: kb(step.max_rss_bytes),
        max_rss_task: max_task,
        max_rss_task_kb: max_task_kb,
        rss_sum_kb: sum,
        user_cpu_ms: ms(user),
        system_cpu_ms: ms(system),
        oom_kills,
    }
}

impl StepGuard {
    /// The step's cgroup in `job` and one per task; the attaches the tasks
    /// apply in their `pre_exec`.
    pub fn new(
        job: &JobCgroup,
        job_id: u32,
        step_id: u32,
        node: &str,
        ranks: std::ops::Range<u32>,
        limits: &JobLimits,
    ) -> Result<(StepGuard, Vec<Attach>), String> {
        let tasks = ranks.len() as u32;
        let err = |e: super::contain::ContainError| format!("cannot set up the step's cgroup: {e}");
        let step = job.step(StepName::Numbered(step_id), limits).map_err(err)?;
        let mut cgs = Vec::new();
        let mut attaches = Vec::new();
        for t in 0..tasks {
            let task = step.task(t).map_err(err)?;
            attaches.push(
                task.attach()
                    .try_clone()
                    .map_err(|e| format!("cannot set up the step's cgroup: {e}"))?,
            );
            cgs.push(task);
        }
        Ok((
            StepGuard {
                job_id,
                step_id,
                node: node.to_string(),
                first_rank: ranks.start,
                step: Some(step),
                _tasks: cgs,
                sink: std::sync::Mutex::new(None),
            },
            attaches,
        ))
    }

    /// Where the step's usage goes when its last task here has ended.
    pub fn on_end(&self, sink: UsageSink) {
        *self.sink.lock().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    /// The step's usage here so far. Blocking (reads cgroup files): call it
    /// off the event loop.
    pub fn usage(&self) -> NodeUsage {
        let Some(step) = &self.step else {
            return NodeUsage::default();
        };
        let tasks: Vec<CgroupUsage> = self._tasks.iter().map(|t| t.usage()).collect();
        node_usage(
            &self.node,
            self.first_rank,
            step.usage(),
            &tasks,
            step.oom_kills(),
        )
    }

    /// The step's processes here (`sstat -i`). Blocking.
    pub fn pids(&self) -> Vec<u32> {
        self.step
            .as_ref()
            .map(|s| s.pids().into_iter().map(|p| p as u32).collect())
            .unwrap_or_default()
    }

    pub fn step_id(&self) -> u32 {
        self.step_id
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        let Some(step) = self.step.take() else {
            return;
        };
        let job_id = self.job_id;
        let tasks = std::mem::take(&mut self._tasks);
        let sink = self
            .sink
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let (node, first_rank, step_id) = (self.node.clone(), self.first_rank, self.step_id);
        let spawned = std::thread::Builder::new()
            .name(format!("job{job_id}-stepend"))
            .spawn(move || {
                // Measured before the cgroups go: the kernel's numbers go
                // with them.
                if let Some(sink) = sink {
                    let per_task: Vec<CgroupUsage> = tasks.iter().map(|t| t.usage()).collect();
                    let usage =
                        node_usage(&node, first_rank, step.usage(), &per_task, step.oom_kills());
                    tracing::debug!(job_id, step_id, node = %node, max_rss_kb = usage.max_rss_kb, "step usage measured");
                    sink(usage);
                }
                drop(tasks);
                end_step(step, job_id);
            });
        if let Err(e) = spawned {
            tracing::warn!(job_id, error = %e, "cannot start the step's cgroup teardown");
        }
    }
}

impl Drop for Leaf {
    /// A daemon that stops cleanly takes its (empty) cgroup root with it;
    /// one that holds running jobs' cgroups keeps them for its successor.
    fn drop(&mut self) {
        if let Some(c) = self.containment.take() {
            if let Ok(c) = Arc::try_unwrap(c) {
                if let Err(e) = c.remove_root() {
                    tracing::debug!(node = %self.node, error = %e, "cgroup root kept");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(
        peak: u64,
        user_us: Option<u64>,
        sys_us: Option<u64>,
        total_us: Option<u64>,
    ) -> CgroupUsage {
        CgroupUsage {
            max_rss_bytes: Some(peak),
            current_rss_bytes: None,
            user_cpu_us: user_us,
            system_cpu_us: sys_us,
            total_cpu_us: total_us,
        }
    }

    #[test]
    fn a_nodes_usage_names_its_highest_task_step_wide() {
        let step = cg(300 << 20, Some(1_500_000), Some(250_000), Some(1_750_000));
        let tasks = [
            cg(100 << 20, None, None, None),
            cg(200 << 20, None, None, None),
        ];
        let u = node_usage("n2", 4, step, &tasks, 0);
        assert_eq!(u.tasks, 2);
        assert_eq!(u.max_rss_kb, 300 << 10);
        assert_eq!((u.max_rss_task, u.max_rss_task_kb), (5, 200 << 10));
        assert_eq!(u.rss_sum_kb, 300 << 10);
        assert_eq!((u.user_cpu_ms, u.system_cpu_ms), (1500, 250));
    }

    #[test]
    fn without_cpuacct_stat_the_total_counts_as_user_time() {
        let u = node_usage("n1", 0, cg(0, None, None, Some(2_000_000)), &[], 1);
        assert_eq!((u.user_cpu_ms, u.system_cpu_ms, u.oom_kills), (2000, 0, 1));
    }

    /// A leaf for node n1 of a GPU node whose gres.conf says only
    /// `autodetect`, cgroups switched off (no real cgroup is touched).
    fn gpu_leaf(autodetect: &str, gpus: &[crate::model::node::ReportedGpu]) -> Leaf {
        let dir = tempfile::tempdir().unwrap();
        let conf_path = dir.path().join("slurm.conf");
        std::fs::write(
            &conf_path,
            "ClusterName=t\nSlurmctldHost=h\nGresTypes=gpu\nTaskPlugin=task/cgroup\n\
             NodeName=n1 CPUs=2 Gres=gpu:tst:2\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("gres.conf"), autodetect).unwrap();
        std::fs::write(
            dir.path().join("cgroup.conf"),
            "CgroupPlugin=disabled\nConstrainDevices=yes\n",
        )
        .unwrap();
        let conf = crate::config::Config::load(&conf_path).unwrap();
        Leaf::for_node(&conf, "n1", 0, dir.path(), None, gpus)
    }

    fn detected(index: u32) -> crate::model::node::ReportedGpu {
        crate::model::node::ReportedGpu {
            index,
            type_name: "tst".into(),
            file: format!("/dev/nvidia{index}"),
            cores: vec![index],
        }
    }

    #[test]
    fn autodetected_gpus_are_fenced_from_jobs_not_given_them() {
        let leaf = gpu_leaf("AutoDetect=nvml\n", &[detected(0), detected(1)]);
        let paths = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        // A job holding GPU 1 may open it and not GPU 0.
        let share = NodeShare {
            cpu_ids: vec![0],
            mem_mb: 0,
            gres: vec![crate::model::tres::GresAlloc {
                name: "gpu".into(),
                type_: Some("tst".into()),
                indices: vec![1],
                count: 1,
            }],
        };
        let rules = leaf.limits(Some(&share)).devices.expect("device rules");
        assert_eq!(paths(&rules.allow), ["/dev/nvidia1"]);
        assert_eq!(paths(&rules.deny), ["/dev/nvidia0"]);
        // A job with no GPU is denied both: a step on a GPU node that asked
        // for none must not reach them.
        let plain = NodeShare {
            cpu_ids: vec![0],
            ..NodeShare::default()
        };
        let rules = leaf.limits(Some(&plain)).devices.expect("device rules");
        assert!(rules.allow.is_empty());
        assert_eq!(paths(&rules.deny), ["/dev/nvidia0", "/dev/nvidia1"]);
    }

    #[test]
    fn detected_gpus_are_ignored_without_autodetect() {
        let leaf = gpu_leaf("AutoDetect=off\n", &[detected(0)]);
        let share = NodeShare {
            cpu_ids: vec![0],
            ..NodeShare::default()
        };
        assert!(leaf.limits(Some(&share)).devices.is_none());
    }
}
