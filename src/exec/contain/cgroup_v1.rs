//! cgroup v1: one directory per controller hierarchy, `<mount>/<controller>/canopy_<node>/
//! uid_<uid>/job_<id>/step_<s>/task_<n>`, as Slurm's `slurm/uid_X/job_Y/step_Z/task_N`;
//! the `task_<n>` level only in memory and cpuacct, as Slurm makes it.
//!
//! - freezer: always; it lists every process (proctrack) and stops forks while signalling.
//! - memory, cpuacct: whenever mounted, for accounting and the OOM count; memory limits
//!   (`memory.limit_in_bytes`, `memory.soft_limit_in_bytes`, `memory.memsw.limit_in_bytes`)
//!   only when cgroup.conf constrains RAM or swap.
//! - cpuset: with ConstrainCores. N.B. a new v1 cpuset starts with empty `cpuset.cpus` and
//!   `cpuset.mems`, and no process can join it until both are set: every level copies its
//!   parent's before narrowing.
//! - devices: with ConstrainDevices; `devices.deny`/`devices.allow` take `c MAJ:MIN rwm`.
//!   A child copies its parent's rules when made, so job-level rules bind its steps.
//!
//! OOM count: `memory.oom_control`'s `oom_kill` line (kernel ≥ 4.13). v1 counts a kill in
//! the victim's own memory cgroup only, so a job's or step's count is the sum over its
//! subtree. On older kernels the line is missing and a cgroup whose `memory.failcnt` is
//! non-zero (it hit its limit at least once) counts as one kill: an approximation, since
//! hitting the limit usually means reclaim, not always a kill.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::statfs::{statfs, CGROUP_SUPER_MAGIC};

use super::{fs, CgroupUsage, ContainError, Level, Resolved};
use crate::config::cgroup::CgroupConf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctl {
    Freezer,
    Memory,
    Cpuacct,
    Cpuset,
    Devices,
}

impl Ctl {
    /// Whether a task gets its own cgroup in this hierarchy. Only the accounting
    /// ones, as Slurm's jobacct_gather/cgroup makes `task_N` in memory and cpuacct
    /// for per-task MaxRSS and CPU; proctrack keeps the freezer at the step, and
    /// task/cgroup confines cpusets and devices per step (tasks are bound with
    /// sched_setaffinity). Each level skipped is a mkdir, an rmdir and, for a cpuset,
    /// three writes fewer per task launched: the confined launch's largest cost.
    fn has_task_level(self) -> bool {
        matches!(self, Ctl::Memory | Ctl::Cpuacct)
    }

    fn name(self) -> &'static str {
        match self {
            Ctl::Freezer => "freezer",
            Ctl::Memory => "memory",
            Ctl::Cpuacct => "cpuacct",
            Ctl::Cpuset => "cpuset",
            Ctl::Devices => "devices",
        }
    }
}

pub(super) struct V1 {
    /// This node's root in each hierarchy used.
    hiers: Vec<(Ctl, PathBuf)>,
    /// `memory.memsw.*` is absent when the kernel does not account swap
    /// (`swapaccount=0`); said once.
    memsw_warned: AtomicBool,
    /// Held while a job is made and while a `uid_N` level is removed: that level is
    /// shared by the user's jobs, and one being removed while a job is made below it
    /// fails the job (the dying cgroup refuses writes). Found by the concurrent test.
    uid_level: Mutex<()>,
    /// `memory.oom_control` has the `oom_kill` counter (kernel ≥ 4.13).
    counts_oom_kills: bool,
}

impl V1 {
    /// Make the root in each hierarchy canopy uses; `Err` says why v1 is unusable.
    pub(super) fn start(conf: &CgroupConf, root_name: &str) -> Result<V1, String> {
        let memory_limits = conf.constrain_ram_space || conf.constrain_swap_space;
        let wanted = [
            (Ctl::Freezer, true, true),
            (Ctl::Memory, true, memory_limits),
            (Ctl::Cpuacct, true, false),
            (Ctl::Cpuset, conf.constrain_cores, true),
            (Ctl::Devices, conf.constrain_devices, true),
        ];
        let mut hiers = Vec::new();
        for (ctl, used, required) in wanted {
            if !used {
                continue;
            }
            let mount = conf.mountpoint.join(ctl.name());
            let mounted = statfs(&mount).is_ok_and(|s| s.filesystem_type() == CGROUP_SUPER_MAGIC);
            if !mounted {
                if required {
                    return Err(format!(
                        "{} is not a cgroup v1 mount (the {} controller is needed)",
                        mount.display(),
                        ctl.name()
                    ));
                }
                tracing::info!(
                    controller = ctl.name(),
                    "cgroup v1: controller not mounted; not used"
                );
                continue;
            }
            let root = mount.join(root_name);
            fs::mkdir(&root).map_err(|e| e.to_string())?;
            // mkdir of a root that exists succeeds for anyone: check we can move processes.
            let procs = root.join("cgroup.procs");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&procs)
                .map_err(|e| format!("cannot write {}: {e}", procs.display()))?;
            match ctl {
                Ctl::Cpuset => inherit_root_cpuset(&root).map_err(|e| e.to_string())?,
                // Kernels before 5.x let a memory cgroup's children be accounted apart
                // from it; the job's limit must bind its steps, as in Slurm.
                Ctl::Memory => use_hierarchy(&root),
                _ => {}
            }
            hiers.push((ctl, root));
        }
        tracing::info!(
            controllers = ?hiers.iter().map(|(c, _)| c.name()).collect::<Vec<_>>(),
            root = root_name,
            "cgroup v1: steps are contained"
        );
        let counts_oom_kills = hiers
            .iter()
            .find(|(c, _)| *c == Ctl::Memory)
            .and_then(|(_, root)| {
                fs::read_opt(&root.join("memory.oom_control"))
                    .ok()
                    .flatten()
            })
            .is_some_and(|t| fs::keyed(&t, "oom_kill").is_some());
        Ok(V1 {
            hiers,
            memsw_warned: AtomicBool::new(false),
            uid_level: Mutex::new(()),
            counts_oom_kills,
        })
    }

    /// The directories of `rel` in each hierarchy that has that level: a task's
    /// cgroup exists only in memory and cpuacct (see [`Ctl::has_task_level`]).
    pub(super) fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        let task = is_task(rel);
        self.hiers
            .iter()
            .filter(|(ctl, _)| !task || ctl.has_task_level())
            .map(|(_, root)| under(root, rel))
            .collect()
    }

    /// Where a process of `rel` goes in each hierarchy: a task's own cgroup where it
    /// has one, else its step's.
    pub(super) fn attach_dirs(&self, rel: &Path) -> Vec<PathBuf> {
        let task = is_task(rel);
        self.hiers
            .iter()
            .map(|(ctl, root)| match rel.parent() {
                Some(step) if task && !ctl.has_task_level() => under(root, step),
                _ => under(root, rel),
            })
            .collect()
    }

    fn dir(&self, ctl: Ctl, rel: &Path) -> Option<PathBuf> {
        self.hiers
            .iter()
            .find(|(c, _)| *c == ctl)
            .map(|(_, root)| under(root, rel))
    }

    /// Whether the devices hierarchy is used (ConstrainDevices, mounted).
    pub(super) fn fences_devices(&self) -> bool {
        self.hiers.iter().any(|(c, _)| *c == Ctl::Devices)
    }

    pub(super) fn freezer_dir(&self, rel: &Path) -> PathBuf {
        // start() refuses v1 without the freezer, so this is always found.
        self.dir(Ctl::Freezer, rel)
            .unwrap_or_else(|| PathBuf::from("/nonexistent-freezer"))
    }

    /// Make every missing level of `rel` in each hierarchy, then apply `limits` to its
    /// last level.
    pub(super) fn make(
        &self,
        rel: &Path,
        limits: &Resolved,
        level: Level,
    ) -> Result<(), ContainError> {
        let _uid_level = (level == Level::Job).then(|| self.lock_uid_level());
        let last = rel.components().count();
        for (ctl, root) in &self.hiers {
            if level == Level::Task && !ctl.has_task_level() {
                continue;
            }
            // Whether this call made the last level: a new cpuset gets its limits as
            // it is filled, one write each.
            let made_last = std::cell::Cell::new(false);
            let dir = fs::make_path(root, rel, |made| match ctl {
                Ctl::Cpuset => {
                    let depth = made
                        .strip_prefix(root)
                        .map_or(0, |r| r.components().count());
                    if depth == last {
                        made_last.set(true);
                        fill_cpuset(made, limits.cpus.as_deref(), limits.mems.as_deref())
                    } else {
                        fill_cpuset(made, None, None)
                    }
                }
                _ => Ok(()),
            })?;
            match ctl {
                Ctl::Cpuset if !made_last.get() => {
                    if let Some(cpus) = &limits.cpus {
                        fs::write(&dir.join("cpuset.cpus"), cpus)?;
                    }
                    if let Some(mems) = &limits.mems {
                        fs::write(&dir.join("cpuset.mems"), mems)?;
                    }
                }
                Ctl::Cpuset => {}
                Ctl::Memory => self.set_memory(&dir, limits)?,
                Ctl::Devices => {
                    if let Some(devices) = &limits.devices {
                        for rule in &devices.deny {
                            fs::write(&dir.join("devices.deny"), &format!("{rule} rwm"))?;
                        }
                        for rule in &devices.allow {
                            fs::write(&dir.join("devices.allow"), &format!("{rule} rwm"))?;
                        }
                    }
                }
                Ctl::Freezer | Ctl::Cpuacct => {}
            }
        }
        Ok(())
    }

    fn set_memory(&self, dir: &Path, limits: &Resolved) -> Result<(), ContainError> {
        let Some(memory) = limits.memory else {
            return Ok(());
        };
        let limit = dir.join("memory.limit_in_bytes");
        let memsw = dir.join("memory.memsw.limit_in_bytes");
        // The kernel keeps limit ≤ memsw limit. A new cgroup has both unlimited, so the
        // limit goes first; raising an existing one past its memsw needs memsw first.
        if let Err(e) = fs::write(&limit, &memory.ram.to_string()) {
            match memory.ram_and_swap {
                Some(both) if memsw.exists() => {
                    fs::write(&memsw, &both.to_string())?;
                    fs::write(&limit, &memory.ram.to_string())?;
                }
                _ => return Err(e),
            }
        }
        fs::write(
            &dir.join("memory.soft_limit_in_bytes"),
            &memory.soft.to_string(),
        )?;
        if let Some(both) = memory.ram_and_swap {
            if memsw.exists() {
                fs::write(&memsw, &both.to_string())?;
            } else if !self.memsw_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "cgroup v1: no memory.memsw.limit_in_bytes (kernel swap accounting off); \
                     ConstrainSwapSpace is not enforced"
                );
            }
        }
        if let Some(swappiness) = limits.swappiness {
            fs::write(&dir.join("memory.swappiness"), &swappiness.to_string())?;
        }
        Ok(())
    }

    pub(super) fn freeze(&self, rel: &Path, frozen: bool) -> Result<(), ContainError> {
        let state = self.freezer_dir(rel).join("freezer.state");
        let want = if frozen { "FROZEN" } else { "THAWED" };
        fs::write(&state, want)?;
        if frozen {
            // FREEZING until every task has stopped; a task stuck in the kernel can hold
            // it there, so wait briefly and signal anyway.
            let deadline = Instant::now() + Duration::from_secs(1);
            while fs::read(&state)?.trim() != want && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Whether a step may leave its memory limit to its job's: only where the
    /// kernel counts OOM kills. Older kernels are read through a cgroup's
    /// own `memory.failcnt`, which counts only at the level whose limit was hit.
    pub(super) fn counts_oom_kills(&self) -> bool {
        self.counts_oom_kills
    }

    pub(super) fn oom_kills(&self, rel: &Path) -> u64 {
        let Some(top) = self.dir(Ctl::Memory, rel) else {
            return 0;
        };
        let mut total = 0;
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            let control = fs::read_opt(&dir.join("memory.oom_control")).ok().flatten();
            total += match control.as_deref().and_then(|t| fs::keyed(t, "oom_kill")) {
                Some(kills) => kills,
                // Kernel < 4.13: no counter. Having hit the limit counts as one.
                None if control.is_some() => {
                    let failcnt = fs::read_opt(&dir.join("memory.failcnt")).ok().flatten();
                    u64::from(
                        failcnt
                            .and_then(|t| t.trim().parse::<u64>().ok())
                            .unwrap_or(0)
                            > 0,
                    )
                }
                None => 0,
            };
            stack.extend(fs::subdirs(&dir).unwrap_or_default());
        }
        total
    }

    pub(super) fn usage(&self, rel: &Path) -> CgroupUsage {
        let mut usage = CgroupUsage::default();
        let number = |path: PathBuf| -> Option<u64> {
            fs::read_opt(&path).ok().flatten()?.trim().parse().ok()
        };
        if let Some(dir) = self.dir(Ctl::Memory, rel) {
            usage.max_rss_bytes = number(dir.join("memory.max_usage_in_bytes"));
            let stat = fs::read_opt(&dir.join("memory.stat")).ok().flatten();
            usage.current_rss_bytes = stat.as_deref().and_then(|t| fs::keyed(t, "total_rss"));
        }
        if let Some(dir) = self.dir(Ctl::Cpuacct, rel) {
            // cpuacct.stat counts USER_HZ ticks.
            let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                .ok()
                .flatten()
                .and_then(|hz| u64::try_from(hz).ok())
                .filter(|&hz| hz > 0)
                .unwrap_or(100);
            let stat = fs::read_opt(&dir.join("cpuacct.stat")).ok().flatten();
            let ticks = |key| stat.as_deref().and_then(|t| fs::keyed(t, key));
            usage.user_cpu_us = ticks("user").map(|t| t * 1_000_000 / hz);
            usage.system_cpu_us = ticks("system").map(|t| t * 1_000_000 / hz);
            usage.total_cpu_us = number(dir.join("cpuacct.usage")).map(|ns| ns / 1000);
        }
        usage
    }

    fn lock_uid_level(&self) -> MutexGuard<'_, ()> {
        // The lock guards no data, so a panic while it was held left nothing torn.
        self.uid_level
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remove the `uid_N` level `rel` in each hierarchy if it is empty; busy is fine
    /// (the user's other jobs).
    pub(super) fn remove_if_empty(&self, rel: &Path) {
        let _uid_level = self.lock_uid_level();
        for dir in self.dirs(rel) {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// The node's root takes its parent's CPUs and memory nodes where it has none (just
/// made), and keeps `sched_load_balance` on: it is what balances the jobs below it.
fn inherit_root_cpuset(root: &Path) -> Result<(), ContainError> {
    let Some(parent) = root.parent() else {
        return Ok(());
    };
    for file in ["cpuset.mems", "cpuset.cpus"] {
        if fs::read(&root.join(file))?.trim().is_empty() {
            let value = fs::read(&parent.join(file))?;
            if !value.trim().is_empty() {
                fs::write(&root.join(file), value.trim())?;
            }
        }
    }
    Ok(())
}

/// Whether `rel` names a task's cgroup (`.../step_S/task_N`).
fn is_task(rel: &Path) -> bool {
    rel.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("task_"))
}

fn under(root: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// Turn on `memory.use_hierarchy` where it is off (it is always on, and read-only, from
/// kernel 5.x). It can only change while the cgroup has no children: a leftover root
/// with jobs in it keeps its setting, said once here.
fn use_hierarchy(root: &Path) {
    let path = root.join("memory.use_hierarchy");
    if let Ok(Some(value)) = fs::read_opt(&path) {
        if value.trim() == "0" {
            if let Err(e) = fs::write(&path, "1") {
                tracing::warn!(error = %e, "cgroup v1: memory.use_hierarchy stays 0; job memory limits do not bind steps");
            }
        }
    }
}

/// Give a cpuset made below the node's root its CPUs and memory nodes (`cpus`/`mems`,
/// else its parent's), without which no process can join it.
///
/// First `cpuset.sched_load_balance` is turned off, while the cpuset is still empty (a
/// change then costs nothing). On v1 every write of `cpuset.cpus` to a load-balanced
/// cpuset, and the removal of one, makes the kernel rebuild the scheduler's domains,
/// walking every cpuset on the host: measured here at 0.2–0.4 ms a write, over 1 ms
/// with 1,500 cpusets present (512 node daemons on one host), and a launch made five
/// such writes and three removals per node. The flag changes nothing else: the node's
/// root keeps it on, and a load-balanced cpuset's domain covers all below it, whatever
/// their own flags (the kernel's cgroup-v1/cpusets.rst, "sched_load_balance").
fn fill_cpuset(dir: &Path, cpus: Option<&str>, mems: Option<&str>) -> Result<(), ContainError> {
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    if let Err(e) = fs::write(&dir.join("cpuset.sched_load_balance"), "0") {
        tracing::debug!(error = %e, "cgroup v1: cpuset stays load-balanced");
    }
    // A cpuset lacking either takes no process; the order does not matter.
    for (file, value) in [("cpuset.mems", mems), ("cpuset.cpus", cpus)] {
        let value = match value {
            Some(v) => v.to_string(),
            None => fs::read(&parent.join(file))?.trim().to_string(),
        };
        if !value.is_empty() {
            fs::write(&dir.join(file), &value)?;
        }
    }
    Ok(())
}
