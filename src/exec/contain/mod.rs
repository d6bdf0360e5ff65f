//! Containment of job steps in cgroups: Slurm's task/cgroup (cpuset, memory, devices
//! limits) and proctrack/cgroup (find and kill every process a step made, including
//! double-forked daemons that left its session), as a library the node daemon calls.
//!
//! [`Containment::start`] looks at what the host mounts (or what `CgroupPlugin` forces)
//! and picks cgroup v1 (`cgroup_v1`), v2 (`cgroup_v2`) or, without a usable cgroupfs
//! (not root, read-only, not a cgroup mount, `CgroupPlugin=disabled`), an unconfined mode
//! (`none`) that says why once and otherwise does nothing: the daemon keeps working.
//!
//! Layout, one canopy root per node daemon (several run on one machine in tests):
//! - v1: `<mount>/<controller>/canopy_<node>/uid_<uid>/job_<id>/step_<s>/task_<n>`, Slurm's
//!   `slurm/uid_X/job_Y/step_Z/task_N` with the root renamed, in each of the hierarchies
//!   freezer (always: it is the process tracker), memory and cpuacct (accounting, OOM
//!   count; limits only with ConstrainRAMSpace/ConstrainSwapSpace), cpuset (ConstrainCores)
//!   and devices (ConstrainDevices). `task_<n>` exists only in memory and cpuacct (per-task
//!   accounting); in the others a task's process stays in its step.
//! - v2: `<mount>/canopy_<node>/job_<id>/step_<s>/task_<n>`, made directly under the mount
//!   (Slurm's `IgnoreSystemd=yes` shape: no D-Bus scope). Controllers are enabled in the
//!   root's and each job's `cgroup.subtree_control`, never in a step's, so processes may
//!   live in a step as well as in its tasks (v2's no-internal-process rule only binds
//!   cgroups that enable controllers for their children).
//!
//! Steps are named as Slurm names them: `step_batch`, `step_extern`, `step_interactive`,
//! `step_<n>`.
//!
//! How the node daemon uses it (the blocking calls belong on a blocking thread):
//! ```text
//! let containment = Containment::start(&cgroup_conf, node);        // once, at start-up
//! let job = containment.job(job_id, uid, &JobLimits { cpus, mem_bytes, devices, .. })?;
//! let step = job.step(StepName::Numbered(0), &JobLimits::default())?;
//! let task = step.task(rank)?;                                     // kept until exit
//! let attach = task.attach().try_clone()?;
//! unsafe { command.pre_exec(move || attach.apply()) };             // in before exec
//! // step end / scancel / time limit:
//! step.kill_all()?;                       // every process, daemons included; waits
//! let oom = step.oom_kills() > 0;         // → OUT_OF_MEMORY
//! let usage = step.usage();               // MaxRSS, CPU times for accounting
//! step.remove()?;  job.remove()?;         // when the job's last step is gone
//! ```
//!
//! Why not the `cgroups-rs` crate the design names: it cannot move a process from a
//! `pre_exec` hook (its `add_task` formats strings and opens files, which allocates after
//! fork), it has no `memory.events`/`memory.peak` reader and no v2 device program, and
//! 0.5.1 depends on zbus 5 and a second nix (0.25) that canopy would build for nothing.
//! The files canopy drives are a dozen `key value` texts; writing them directly is smaller
//! than adapting the crate. v2 device fencing is an eBPF program canopy assembles itself
//! (`bpf_devices`), since cgroups-rs has none.

mod bpf_devices;
mod cgroup_v1;
mod cgroup_v2;
mod fs;
mod none;

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::config::cgroup::{CgroupConf, CgroupPlugin, MemoryLimits};

/// How long `kill_all` waits for a subtree to empty before it gives up.
pub const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long `remove` retries a cgroup the kernel still counts as busy.
pub const REMOVE_WAIT: Duration = Duration::from_secs(1);

/// What went wrong, naming the path and the operation.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("cgroup: {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cgroup: {}: {pids} process(es) still inside after {waited:?}", path.display())]
    NotEmpty {
        path: PathBuf,
        pids: usize,
        waited: Duration,
    },
    #[error("cgroup: device rule {}: not a character or block device", path.display())]
    NotDevice { path: PathBuf },
}

/// Which kind of containment is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    Unconfined,
    V1,
    V2,
}

/// Containment as the node daemon's state view prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContainmentState {
    pub mode: Mode,
    pub roots: Vec<PathBuf>,
    pub unconfined_reason: Option<String>,
}

/// A step's name, as Slurm writes it in the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepName {
    Batch,
    Extern,
    Interactive,
    Numbered(u32),
}

impl fmt::Display for StepName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepName::Batch => f.write_str("batch"),
            StepName::Extern => f.write_str("extern"),
            StepName::Interactive => f.write_str("interactive"),
            StepName::Numbered(n) => write!(f, "{n}"),
        }
    }
}

/// Device files a job may use (e.g. its allocated `/dev/nvidia1`) and those of the same
/// GRES it may not (`/dev/nvidia0`); other devices are left alone, as Slurm does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRules {
    pub allow: Vec<PathBuf>,
    pub deny: Vec<PathBuf>,
}

/// What a job (or a step, within its job) is allowed. `None` leaves the field to the
/// level above. Each field is applied only when cgroup.conf constrains it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobLimits {
    /// OS cpu ids for the cpuset (ConstrainCores).
    pub cpus: Option<Vec<u32>>,
    /// NUMA memory nodes for the cpuset; the parent's when `None`.
    pub mems: Option<Vec<u32>>,
    /// The memory allocation in bytes; AllowedRAMSpace, MinRAMSpace, MaxRAMPercent and the
    /// swap keys turn it into limits ([`CgroupConf::memory_limits`]).
    pub mem_bytes: Option<u64>,
    /// ConstrainDevices: v1 `devices.deny`/`allow`; v2 an eBPF device program.
    pub devices: Option<DeviceRules>,
}

/// A cgroup's accounting. Fields are `None` where the kernel or the mode gives nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupUsage {
    /// v1 `memory.max_usage_in_bytes`; v2 `memory.peak` (kernel ≥ 5.19).
    pub max_rss_bytes: Option<u64>,
    /// v1 `memory.stat` total_rss; v2 `memory.stat` anon.
    pub current_rss_bytes: Option<u64>,
    /// v1 `cpuacct.stat` (USER_HZ ticks, so 10 ms steps); v2 `cpu.stat`.
    pub user_cpu_us: Option<u64>,
    pub system_cpu_us: Option<u64>,
    /// v1 `cpuacct.usage`; v2 `cpu.stat` usage_usec.
    pub total_cpu_us: Option<u64>,
}

/// Knobs of [`Containment::start_with`] that are not in cgroup.conf.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Kill processes left in this node's hierarchy by a daemon that crashed. Off by
    /// default: a restarted daemon re-adopts running jobs, so their processes must live;
    /// only empty leftover cgroups are removed.
    pub kill_stale: bool,
}

/// The limits of one level, resolved against cgroup.conf (and device files stat'ed) in
/// the daemon, before anything is written.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolved {
    cpus: Option<String>,
    mems: Option<String>,
    memory: Option<MemoryLimits>,
    swappiness: Option<u64>,
    devices: Option<ResolvedDevices>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResolvedDevices {
    /// `c 195:1` / `b 8:0` (type, major:minor), ready for v1 `devices.allow`/`deny`.
    allow: Vec<String>,
    deny: Vec<String>,
}

enum Backend {
    Unconfined(none::Unconfined),
    V1(cgroup_v1::V1),
    V2(cgroup_v2::V2),
}

struct Inner {
    backend: Backend,
    conf: CgroupConf,
    /// The node's memory, for MaxRAMPercent/MaxSwapPercent (`MemTotal`).
    node_ram: u64,
}

/// The node daemon's containment: made once at start, cheap to clone.
#[derive(Clone)]
pub struct Containment {
    inner: Arc<Inner>,
}

impl fmt::Debug for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Containment")
            .field("mode", &self.mode())
            .field("roots", &self.roots())
            .finish()
    }
}

impl Containment {
    /// Detect, make this node's root, check it can be written, clean empty leftovers.
    /// Never fails: without a usable cgroupfs it returns an unconfined containment that
    /// has logged one warning saying why.
    pub fn start(conf: &CgroupConf, node: &str) -> Containment {
        Containment::start_with(conf, node, StartOptions::default())
    }

    pub fn start_with(conf: &CgroupConf, node: &str, options: StartOptions) -> Containment {
        let root_name = format!("canopy_{}", sanitize(node));
        let backend = match detect(conf) {
            Detected::Disabled => Backend::Unconfined(none::Unconfined::new(
                "CgroupPlugin=disabled in cgroup.conf".into(),
                false,
            )),
            Detected::None(reason) => Backend::Unconfined(none::Unconfined::new(reason, true)),
            Detected::V1 => match cgroup_v1::V1::start(conf, &root_name) {
                Ok(v1) => Backend::V1(v1),
                Err(reason) => Backend::Unconfined(none::Unconfined::new(reason, true)),
            },
            Detected::V2 => match cgroup_v2::V2::start(conf, &root_name) {
                Ok(v2) => Backend::V2(v2),
                Err(reason) => Backend::Unconfined(none::Unconfined::new(reason, true)),
            },
        };
        let containment = Containment::from_backend(backend, conf.clone(), node_ram());
        containment.clean_stale(options);
        containment
    }

    fn from_backend(backend: Backend, conf: CgroupConf, node_ram: u64) -> Containment {
        Containment {
            inner: Arc::new(Inner {
                backend,
                conf,
                node_ram,
            }),
        }
    }

    pub fn mode(&self) -> Mode {
        match self.inner.backend {
            Backend::Unconfined(_) => Mode::Unconfined,
            Backend::V1(_) => Mode::V1,
            Backend::V2(_) => Mode::V2,
        }
    }

    /// Whether jobs' device rules are enforced here (v1's devices controller, or v2's
    /// device programs); without it a job may open any GPU.
    pub fn fences_devices(&self) -> bool {
        match &self.inner.backend {
            Backend::Unconfined(_) => false,
            Backend::V1(v1) => v1.fences_devices(),
            Backend::V2(v2) => v2.fences_devices(),
        }
    }

    /// Why steps run unconfined; `None` when they are confined.
    pub fn unconfined_reason(&self) -> Option<&str> {
        match &self.inner.backend {
            Backend::Unconfined(u) => Some(u.reason()),
            _ => None,
        }
    }

    /// What the daemon's observable state shows about containment.
    pub fn state(&self) -> ContainmentState {
        ContainmentState {
            mode: self.mode(),
            roots: self.roots(),
            unconfined_reason: self.unconfined_reason().map(str::to_string),
        }
    }

    /// This node's root in each hierarchy (none when unconfined).
    pub fn roots(&self) -> Vec<PathBuf> {
        self.inner.dirs(Path::new(""))
    }

    /// Make (or reopen, after a daemon restart) the job's cgroup and apply its limits.
    pub fn job(
        &self,
        job_id: u32,
        uid: u32,
        limits: &JobLimits,
    ) -> Result<JobCgroup, ContainError> {
        let rel = match self.inner.backend {
            // v2 has no per-user level: nothing is set there, and one level less to make.
            Backend::V2(_) => PathBuf::from(format!("job_{job_id}")),
            _ => PathBuf::from(format!("uid_{uid}/job_{job_id}")),
        };
        let resolved = self.inner.resolve(limits)?;
        let mut group = Group {
            inner: self.inner.clone(),
            rel,
            removed: false,
        };
        if let Err(e) = group.make(&resolved, Level::Job) {
            tracing::warn!(job_id, error = %e, "cgroup: job setup failed");
            if let (Backend::V1(v1), Some(uid_dir)) = (&self.inner.backend, group.rel.parent()) {
                v1.remove_if_empty(uid_dir);
            }
            return Err(e);
        }
        tracing::debug!(job_id, uid, "cgroup: job ready");
        Ok(JobCgroup {
            job_id,
            uid,
            group,
            resolved,
        })
    }

    /// Remove this node's root and every empty cgroup in it (daemon shutdown, tests);
    /// fails, naming it, on a cgroup that still holds processes.
    pub fn remove_root(&self) -> Result<(), ContainError> {
        for root in self.roots() {
            fs::remove_tree(&root, REMOVE_WAIT)?;
        }
        Ok(())
    }

    fn clean_stale(&self, options: StartOptions) {
        let roots = self.roots();
        if roots.is_empty() {
            return;
        }
        if options.kill_stale {
            let everything = Group {
                inner: self.inner.clone(),
                rel: PathBuf::new(),
                removed: true,
            };
            if let Err(e) = everything.kill_all() {
                tracing::warn!(error = %e, "cgroup: could not kill leftover processes");
            }
        }
        let (mut removed, mut kept) = (0, 0);
        for root in &roots {
            let (r, k) = fs::prune(root, false);
            removed += r;
            kept += k;
        }
        if removed + kept > 0 {
            tracing::info!(
                removed,
                kept,
                "cgroup: leftover cgroups from an earlier daemon (kept ones hold processes)"
            );
        }
    }
}

impl Inner {
    fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        match &self.backend {
            Backend::Unconfined(_) => Vec::new(),
            Backend::V1(v1) => v1.dirs(rel),
            Backend::V2(v2) => vec![v2.dir(rel)],
        }
    }

    /// Where a process of `rel` is moved, one directory per hierarchy.
    fn attach_dirs(&self, rel: &Path) -> Vec<PathBuf> {
        match &self.backend {
            Backend::V1(v1) => v1.attach_dirs(rel),
            _ => self.dirs(rel),
        }
    }

    /// The directory whose `cgroup.procs` tree lists every process of `rel`.
    fn procs_dir(&self, rel: &Path) -> Option<PathBuf> {
        match &self.backend {
            Backend::Unconfined(_) => None,
            Backend::V1(v1) => Some(v1.freezer_dir(rel)),
            Backend::V2(v2) => Some(v2.dir(rel)),
        }
    }

    fn freeze(&self, rel: &Path, frozen: bool) -> Result<(), ContainError> {
        match &self.backend {
            Backend::Unconfined(_) => Ok(()),
            Backend::V1(v1) => v1.freeze(rel, frozen),
            Backend::V2(v2) => v2.freeze(rel, frozen),
        }
    }

    fn resolve(&self, limits: &JobLimits) -> Result<Resolved, ContainError> {
        let conf = &self.conf;
        let mut out = Resolved::default();
        if conf.constrain_cores {
            out.cpus = limits.cpus.as_deref().map(fs::id_list);
            out.mems = limits.mems.as_deref().map(fs::id_list);
        }
        if let Some(bytes) = limits.mem_bytes {
            out.memory = conf.memory_limits(bytes, self.node_ram);
            out.swappiness = out.memory.and(conf.memory_swappiness);
        }
        if conf.constrain_devices {
            if let Some(rules) = &limits.devices {
                out.devices = Some(ResolvedDevices {
                    allow: rules
                        .allow
                        .iter()
                        .map(|p| device_rule(p))
                        .collect::<Result<_, _>>()?,
                    deny: rules
                        .deny
                        .iter()
                        .map(|p| device_rule(p))
                        .collect::<Result<_, _>>()?,
                });
            }
        }
        Ok(out)
    }
}

/// `c MAJ:MIN` for a device file, read in the daemon (stat is not for after fork).
fn device_rule(path: &Path) -> Result<String, ContainError> {
    let meta = std::fs::metadata(path).map_err(|e| fs::io_error("stat device", path, e))?;
    let kind = if meta.file_type().is_char_device() {
        'c'
    } else if meta.file_type().is_block_device() {
        'b'
    } else {
        return Err(ContainError::NotDevice {
            path: path.to_path_buf(),
        });
    };
    let dev = meta.rdev();
    Ok(format!(
        "{kind} {}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Job,
    Step,
    Task,
}

/// One cgroup (a job, step or task), as a path relative to the node's root in each
/// hierarchy.
struct Group {
    inner: Arc<Inner>,
    rel: PathBuf,
    removed: bool,
}

impl Group {
    fn child(&self, name: &str) -> Group {
        Group {
            inner: self.inner.clone(),
            rel: self.rel.join(name),
            removed: false,
        }
    }

    fn make(&mut self, limits: &Resolved, level: Level) -> Result<(), ContainError> {
        // A cgroup that existed before (a daemon restart reopening a running job) is
        // never removed on failure: its empty steps may be about to be used.
        let existed = self
            .inner
            .dirs(&self.rel)
            .first()
            .is_some_and(|d| d.exists());
        let result = match &self.inner.backend {
            Backend::Unconfined(_) => Ok(()),
            Backend::V1(v1) => v1.make(&self.rel, limits, level),
            Backend::V2(v2) => v2.make(&self.rel, limits, level),
        };
        if result.is_err() {
            if !existed {
                // Leave nothing half made.
                for dir in self.inner.dirs(&self.rel) {
                    let _ = fs::remove_tree(&dir, Duration::ZERO);
                }
            }
            // Dealt with: the handle is dropped without touching the cgroup again.
            self.removed = true;
        }
        result
    }

    fn attach(&self) -> Result<Attach, ContainError> {
        let mut fds = Vec::new();
        for dir in self.inner.attach_dirs(&self.rel) {
            let path = dir.join("cgroup.procs");
            // std opens with O_CLOEXEC: the descriptors vanish at exec in the child.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| fs::io_error("open", &path, e))?;
            fds.push(OwnedFd::from(file));
        }
        Ok(Attach { fds })
    }

    fn pids(&self) -> Vec<i32> {
        self.inner
            .procs_dir(&self.rel)
            .and_then(|dir| fs::procs_tree(&dir).ok())
            .unwrap_or_default()
    }

    /// Freeze, send `signal` to every process of the subtree, thaw. Freezing first means
    /// nothing can fork between the listing and the signal. Returns how many were sent.
    fn signal_all(&self, signal: Signal) -> Result<usize, ContainError> {
        let Some(dir) = self.inner.procs_dir(&self.rel) else {
            return Ok(0);
        };
        // A cgroup that cannot freeze (v2 before kernel 5.2 has no cgroup.freeze) is
        // still signalled: a fork may slip through, which kill_all's next round catches.
        let frozen = match self.inner.freeze(&self.rel, true) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "cgroup: signalling without freezing");
                false
            }
        };
        let listed = fs::procs_tree(&dir);
        let mut sent = 0;
        if let Ok(pids) = &listed {
            for &pid in pids {
                // ESRCH: it exited after the listing; nothing to do.
                if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).is_ok() {
                    sent += 1;
                }
            }
        }
        // Always thaw, even when listing failed: a frozen step must not stay frozen.
        if frozen {
            self.inner.freeze(&self.rel, false)?;
        }
        listed.map(|_| sent)
    }

    fn kill_all(&self) -> Result<(), ContainError> {
        let Some(dir) = self.inner.procs_dir(&self.rel) else {
            return Ok(());
        };
        // Nothing inside (the usual case when a step or job ends): no freeze. On v1 a
        // freeze of a cgroup whose children were just removed stays FREEZING for tens
        // of milliseconds, and it was most of a launch's teardown. A cgroup already
        // gone (the job's teardown removed it under a step's) holds nothing either.
        match fs::procs_tree(&dir) {
            Ok(pids) if pids.is_empty() => return Ok(()),
            Err(ContainError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(())
            }
            _ => {}
        }
        let started = Instant::now();
        // v2's cgroup.kill kills the whole subtree at once, forks in flight included.
        if let Backend::V2(v2) = &self.inner.backend {
            if v2.kill(&self.rel)? && wait_empty(&dir, Duration::from_millis(500))? {
                return Ok(());
            }
        }
        loop {
            self.signal_all(Signal::SIGKILL)?;
            if wait_empty(&dir, Duration::from_millis(200))? {
                return Ok(());
            }
            if started.elapsed() >= KILL_WAIT {
                return Err(ContainError::NotEmpty {
                    pids: fs::procs_tree(&dir)?.len(),
                    path: dir,
                    waited: started.elapsed(),
                });
            }
        }
    }

    fn oom_kills(&self) -> u64 {
        match &self.inner.backend {
            Backend::Unconfined(_) => 0,
            Backend::V1(v1) => v1.oom_kills(&self.rel),
            Backend::V2(v2) => v2.oom_kills(&self.rel),
        }
    }

    fn usage(&self) -> CgroupUsage {
        match &self.inner.backend {
            Backend::Unconfined(_) => CgroupUsage::default(),
            Backend::V1(v1) => v1.usage(&self.rel),
            Backend::V2(v2) => v2.usage(&self.rel),
        }
    }

    fn remove(&mut self) -> Result<(), ContainError> {
        self.removed = true;
        for dir in self.inner.dirs(&self.rel) {
            fs::remove_tree(&dir, REMOVE_WAIT)?;
        }
        Ok(())
    }
}

impl Drop for Group {
    /// Remove what is empty, without waiting or killing: a dropped handle must never block
    /// or panic. Cgroups that still hold processes stay for `kill_all` + `remove`.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        for dir in self.inner.dirs(&self.rel) {
            if let Err(e) = fs::remove_tree(&dir, Duration::ZERO) {
                tracing::debug!(error = %e, "cgroup: left in place on drop");
            }
        }
    }
}

/// Poll until no live process is left under `dir`, for at most `wait`.
fn wait_empty(dir: &Path, wait: Duration) -> Result<bool, ContainError> {
    let deadline = Instant::now() + wait;
    loop {
        if fs::procs_tree(dir)?.is_empty() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A job's cgroup. Keep it as long as the job has steps: dropping it removes whatever
/// of the job's hierarchy is empty.
pub struct JobCgroup {
    job_id: u32,
    /// The job's owner (whose `canopy exec` may be adopted into it).
    uid: u32,
    group: Group,
    /// The limits written at the job's level.
    resolved: Resolved,
}

impl JobCgroup {
    pub fn job_id(&self) -> u32 {
        self.job_id
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Make (or reopen) a step's cgroup under the job; `limits` narrows the job's.
    pub fn step(&self, step: StepName, limits: &JobLimits) -> Result<StepCgroup, ContainError> {
        let mut resolved = self.group.inner.resolve(limits)?;
        // Memory limits and device rules bind a cgroup's whole subtree: a step
        // whose own are the job's (the usual srun step) needs them written
        // once, at the job. Its cpuset is always filled (v1 takes no process
        // into an empty one).
        // (Not on a v1 kernel without the oom_kill counter: there a step's
        // OOM is seen only through its own memory.failcnt.)
        let inherits = match &self.group.inner.backend {
            Backend::V1(v1) => v1.counts_oom_kills(),
            _ => true,
        };
        if inherits
            && resolved.memory == self.resolved.memory
            && resolved.swappiness == self.resolved.swappiness
        {
            resolved.memory = None;
            resolved.swappiness = None;
        }
        if resolved.devices == self.resolved.devices {
            resolved.devices = None;
        }
        let mut group = self.group.child(&format!("step_{step}"));
        group.make(&resolved, Level::Step).inspect_err(|e| {
            tracing::warn!(job_id = self.job_id, step_id = %step, error = %e, "cgroup: step setup failed");
        })?;
        Ok(StepCgroup {
            job_id: self.job_id,
            step,
            group,
        })
    }

    /// The job's directory in each hierarchy.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.group.inner.dirs(&self.group.rel)
    }

    /// Live pids anywhere in the job.
    pub fn pids(&self) -> Vec<i32> {
        self.group.pids()
    }

    pub fn signal_all(&self, signal: Signal) -> Result<usize, ContainError> {
        self.group.signal_all(signal)
    }

    /// Kill every process of every step and wait (at most [`KILL_WAIT`]) until none is
    /// left. Blocking: call it from a blocking thread, never from the event loop.
    pub fn kill_all(&self) -> Result<(), ContainError> {
        let result = self.group.kill_all();
        if let Err(e) = &result {
            tracing::warn!(job_id = self.job_id, error = %e, "cgroup: kill_all");
        }
        result
    }

    /// OOM kills anywhere in the job (see the version modules for how each counts).
    pub fn oom_kills(&self) -> u64 {
        self.group.oom_kills()
    }

    pub fn usage(&self) -> CgroupUsage {
        self.group.usage()
    }

    /// Let go of this handle without removing anything: another handle to the same
    /// job's cgroup (made by a racing launch) stays in charge of it.
    pub fn keep(mut self) {
        self.group.removed = true;
    }

    /// Remove the job's cgroups, steps first. Fails (naming the cgroup) while processes
    /// remain: `kill_all` first.
    ///
    /// The user's `uid_N` level (v1) stays for the user's next job: making a cgroup
    /// again right after removing one of the same name waits for the kernel to let
    /// the old one go (7–11 ms measured in a launch), and the levels are few (one
    /// per user) and go with the node's root.
    pub fn remove(mut self) -> Result<(), ContainError> {
        self.group.remove()
    }
}

/// A step's cgroup.
pub struct StepCgroup {
    job_id: u32,
    step: StepName,
    group: Group,
}

impl StepCgroup {
    pub fn name(&self) -> StepName {
        self.step
    }

    /// The step's directory in each hierarchy.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.group.inner.dirs(&self.group.rel)
    }

    /// Ready to move a process into the step itself (the step daemon, a batch script).
    pub fn attach(&self) -> Result<Attach, ContainError> {
        self.group.attach()
    }

    /// Make task `n`'s cgroup under the step (per-task accounting, as Slurm's `task_N`).
    pub fn task(&self, n: u32) -> Result<TaskCgroup, ContainError> {
        let mut group = self.group.child(&format!("task_{n}"));
        group.make(&Resolved::default(), Level::Task)?;
        let attach = group.attach()?;
        Ok(TaskCgroup {
            task: n,
            group,
            attach,
        })
    }

    /// Live pids anywhere in the step, tasks included.
    pub fn pids(&self) -> Vec<i32> {
        self.group.pids()
    }

    /// Send `signal` to every process of the step (frozen while signalled).
    pub fn signal_all(&self, signal: Signal) -> Result<usize, ContainError> {
        let sent = self.group.signal_all(signal)?;
        tracing::debug!(job_id = self.job_id, step_id = %self.step, ?signal, sent, "cgroup: signalled step");
        Ok(sent)
    }

    /// Kill every process of the step, daemons that left its session included, and wait
    /// (at most [`KILL_WAIT`]) until none is left. Blocking.
    pub fn kill_all(&self) -> Result<(), ContainError> {
        let result = self.group.kill_all();
        if let Err(e) = &result {
            tracing::warn!(job_id = self.job_id, step_id = %self.step, error = %e, "cgroup: kill_all");
        }
        result
    }

    pub fn oom_kills(&self) -> u64 {
        self.group.oom_kills()
    }

    pub fn usage(&self) -> CgroupUsage {
        self.group.usage()
    }

    /// Remove the step's cgroups, tasks first; retries while the kernel reaps.
    pub fn remove(mut self) -> Result<(), ContainError> {
        self.group.remove()
    }
}

/// A task's cgroup and the ready-made [`Attach`] into it. Keep it until the task's
/// process is inside: dropping it removes the cgroup while it is still empty.
pub struct TaskCgroup {
    task: u32,
    group: Group,
    attach: Attach,
}

impl TaskCgroup {
    pub fn task(&self) -> u32 {
        self.task
    }

    pub fn attach(&self) -> &Attach {
        &self.attach
    }

    pub fn paths(&self) -> Vec<PathBuf> {
        self.group.inner.dirs(&self.group.rel)
    }

    pub fn usage(&self) -> CgroupUsage {
        self.group.usage()
    }
}

/// Moves a process into a cgroup (one `cgroup.procs` per hierarchy), opened in the
/// parent so that the child only writes: [`Attach::apply`] allocates nothing and makes
/// only write(2) calls, so it is safe in a `pre_exec` closure, where the process must be
/// inside before it execs, let alone forks.
#[derive(Debug)]
pub struct Attach {
    fds: Vec<OwnedFd>,
}

impl Attach {
    /// An attach that does nothing (unconfined).
    pub fn none() -> Attach {
        Attach { fds: Vec::new() }
    }

    /// A second handle on the same cgroups (the descriptors duplicated), e.g. to move one
    /// into a `pre_exec` closure per spawned task.
    pub fn try_clone(&self) -> io::Result<Attach> {
        let fds = self
            .fds
            .iter()
            .map(|fd| fd.try_clone())
            .collect::<io::Result<_>>()?;
        Ok(Attach { fds })
    }

    /// Move the calling process in. For `pre_exec`: "0" names the writer itself, so no
    /// pid needs formatting after fork.
    pub fn apply(&self) -> io::Result<()> {
        for fd in &self.fds {
            nix::unistd::write(fd, b"0\n").map_err(io::Error::from)?;
        }
        Ok(())
    }

    /// Move process `pid` in, from the parent (e.g. a process made before the step).
    pub fn apply_to(&self, pid: u32) -> io::Result<()> {
        let text = format!("{pid}\n");
        for fd in &self.fds {
            nix::unistd::write(fd, text.as_bytes()).map_err(io::Error::from)?;
        }
        Ok(())
    }
}

enum Detected {
    Disabled,
    None(String),
    V1,
    V2,
}

/// What `CgroupPlugin` and the mount say, without writing anything.
fn detect(conf: &CgroupConf) -> Detected {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    let mount = &conf.mountpoint;
    let fs_type = |path: &Path| statfs(path).ok().map(|s| s.filesystem_type());
    let is_v2 = fs_type(mount) == Some(CGROUP2_SUPER_MAGIC);
    // v1 (and the "hybrid" layout, which Slurm also drives as v1): a tmpfs of per-
    // controller mounts; the freezer is the one canopy cannot do without.
    let is_v1 = fs_type(&mount.join("freezer")) == Some(CGROUP_SUPER_MAGIC);
    match conf.plugin {
        CgroupPlugin::Disabled => Detected::Disabled,
        CgroupPlugin::V2 if is_v2 => Detected::V2,
        CgroupPlugin::V1 if is_v1 => Detected::V1,
        CgroupPlugin::Autodetect if is_v2 => Detected::V2,
        CgroupPlugin::Autodetect if is_v1 => Detected::V1,
        CgroupPlugin::V1 => Detected::None(format!(
            "CgroupPlugin=cgroup/v1 but {} is not a cgroup v1 freezer mount",
            mount.join("freezer").display()
        )),
        CgroupPlugin::V2 => Detected::None(format!(
            "CgroupPlugin=cgroup/v2 but {} is not a cgroup2 mount",
            mount.display()
        )),
        CgroupPlugin::Autodetect => Detected::None(format!(
            "no cgroup v1 freezer or cgroup2 file system at {}",
            mount.display()
        )),
    }
}

/// The node's memory from /proc/meminfo; unknown means no MaxRAMPercent cap.
fn node_ram() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| fs::keyed(&text.replace(':', ""), "MemTotal"))
        .map_or(u64::MAX, |kib| kib.saturating_mul(1024))
}

/// A node name as one safe path component.
fn sanitize(node: &str) -> String {
    node.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
