//! cgroup v2: one tree, `<mount>/canopy_<node>/job_<id>/step_<s>/task_<n>`, made directly
//! under the mount (Slurm's `IgnoreSystemd=yes` shape; no systemd scope over D-Bus).
//!
//! Controllers: memory whenever the kernel offers it (accounting and `memory.events`;
//! `memory.max`/`memory.swap.max` only when RAM or swap is constrained) and cpuset with
//! ConstrainCores. They must be enabled in the mount root's `cgroup.subtree_control` for
//! canopy's root to get their files: canopy writes that only with `EnableControllers=yes`
//! (as Slurm does; under systemd they are normally enabled already) and otherwise says
//! which is missing and goes on without it. It enables them itself in its root and in
//! each job, never in a step, so a step may hold processes as well as task cgroups.
//!
//! Devices: v2 has no devices files. With ConstrainDevices, canopy attaches an eBPF
//! device program (`bpf_devices`) to each job (and to a step given its own rules) that
//! denies the job's `deny` list. Where the kernel refuses such programs (no
//! CONFIG_CGROUP_BPF, bpf(2) blocked by a seccomp profile) start logs one warning and
//! devices are NOT fenced: only CUDA_VISIBLE_DEVICES steers GPU use then.
//!
//! Processes are killed with `cgroup.kill` (kernel ≥ 5.14) where present, else by freezing
//! (`cgroup.freeze`), signalling each pid and thawing. The OOM count is `oom_kill` in the
//! cgroup's own `memory.events`, which is hierarchical: a job's count includes its steps'.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{bpf_devices, fs, CgroupUsage, ContainError, Level, Resolved};
use crate::config::cgroup::CgroupConf;

pub(super) struct V2 {
    root: PathBuf,
    /// Controllers enabled for canopy's jobs (`memory`, `cpuset`), in the order written.
    controllers: Vec<&'static str>,
    /// ConstrainDevices and the kernel loads device programs.
    devices: bool,
    /// `memory.swap.max` is absent without swap accounting; said once.
    swap_warned: AtomicBool,
}

impl V2 {
    /// Whether device programs are loaded (ConstrainDevices and a kernel that takes them).
    pub(super) fn fences_devices(&self) -> bool {
        self.devices
    }

    /// Make this node's root under a cgroup2 mount; `Err` says why v2 is unusable.
    pub(super) fn start(conf: &CgroupConf, root_name: &str) -> Result<V2, String> {
        V2::open(conf, &conf.mountpoint, conf.mountpoint.join(root_name))
    }

    /// `start` without the file-system check, so tests can aim it at a fake cgroupfs.
    pub(super) fn open(conf: &CgroupConf, mount: &Path, root: PathBuf) -> Result<V2, String> {
        let read = |name: &str| {
            fs::read_opt(&mount.join(name))
                .map(Option::unwrap_or_default)
                .map_err(|e| e.to_string())
        };
        let available = read("cgroup.controllers")?;
        let enabled = read("cgroup.subtree_control")?;
        let has = |list: &str, c: &str| list.split_whitespace().any(|w| w == c);

        let constrain_memory = conf.constrain_ram_space || conf.constrain_swap_space;
        let mut controllers = Vec::new();
        for (name, constrained) in [
            ("memory", constrain_memory),
            ("cpuset", conf.constrain_cores),
        ] {
            if name == "cpuset" && !constrained {
                continue;
            }
            if !has(&available, name) {
                if constrained {
                    tracing::warn!(controller = name, mount = %mount.display(), "cgroup v2: controller not available; it is NOT enforced");
                }
                continue;
            }
            if !has(&enabled, name) {
                if !conf.enable_controllers {
                    // A warning only where a limit is lost; for accounting alone, a note.
                    let what = "cgroup v2: controller not enabled in the mount's \
                                cgroup.subtree_control (EnableControllers=yes lets canopy \
                                enable it); not used";
                    if constrained {
                        tracing::warn!(controller = name, mount = %mount.display(), "{what}");
                    } else {
                        tracing::info!(controller = name, mount = %mount.display(), "{what}");
                    }
                    continue;
                }
                if let Err(e) =
                    fs::write(&mount.join("cgroup.subtree_control"), &format!("+{name}"))
                {
                    tracing::warn!(controller = name, error = %e, "cgroup v2: cannot enable controller; not used");
                    continue;
                }
            }
            controllers.push(name);
        }
        let devices = conf.constrain_devices
            && match bpf_devices::probe() {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e,
                        "cgroup v2: ConstrainDevices=yes, but this kernel refuses cgroup device \
                         programs: devices are NOT fenced; jobs can open every device");
                    false
                }
            };

        fs::mkdir(&root).map_err(|e| e.to_string())?;
        let procs = root.join("cgroup.procs");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| format!("cannot write {}: {e}", procs.display()))?;
        let v2 = V2 {
            root,
            controllers,
            devices,
            swap_warned: AtomicBool::new(false),
        };
        v2.enable_below(&v2.root).map_err(|e| e.to_string())?;
        tracing::info!(controllers = ?v2.controllers, root = %v2.root.display(), "cgroup v2: steps are contained");
        Ok(v2)
    }

    pub(super) fn dir(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn has(&self, controller: &str) -> bool {
        self.controllers.contains(&controller)
    }

    /// Give the children of `dir` canopy's controllers, in one write (the kernel takes a
    /// space-separated list).
    fn enable_below(&self, dir: &Path) -> Result<(), ContainError> {
        if self.controllers.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = self.controllers.iter().map(|c| format!("+{c}")).collect();
        fs::write(&dir.join("cgroup.subtree_control"), &list.join(" "))
    }

    pub(super) fn make(
        &self,
        rel: &Path,
        limits: &Resolved,
        level: Level,
    ) -> Result<(), ContainError> {
        let dir = fs::make_path(&self.root, rel, |_| Ok(()))?;
        if level == Level::Job {
            self.enable_below(&dir)?;
        }
        if self.has("cpuset") {
            // An empty cpuset.cpus in v2 means "the parent's", so nothing to copy.
            if let Some(cpus) = &limits.cpus {
                fs::write(&dir.join("cpuset.cpus"), cpus)?;
            }
            if let Some(mems) = &limits.mems {
                fs::write(&dir.join("cpuset.mems"), mems)?;
            }
        }
        if let (true, Some(devices)) = (self.devices, &limits.devices) {
            let denied: Vec<_> = devices
                .deny
                .iter()
                .filter_map(|rule| bpf_devices::Denied::parse(rule))
                .collect();
            bpf_devices::deny(&dir, &denied)?;
        }
        if let (true, Some(memory)) = (self.has("memory"), limits.memory) {
            fs::write(&dir.join("memory.max"), &memory.ram.to_string())?;
            if let Some(both) = memory.ram_and_swap {
                let swap_max = dir.join("memory.swap.max");
                if swap_max.exists() {
                    fs::write(&swap_max, &both.saturating_sub(memory.ram).to_string())?;
                } else if !self.swap_warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!("cgroup v2: no memory.swap.max (swap accounting off); ConstrainSwapSpace is not enforced");
                }
            }
        }
        Ok(())
    }

    pub(super) fn freeze(&self, rel: &Path, frozen: bool) -> Result<(), ContainError> {
        let dir = self.dir(rel);
        fs::write(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })?;
        if frozen {
            // Frozen once cgroup.events says so; bounded, since a task in an
            // uninterruptible sleep delays it and the signals must go out regardless.
            let events = dir.join("cgroup.events");
            let deadline = Instant::now() + Duration::from_secs(1);
            while let Some(text) = fs::read_opt(&events)? {
                if fs::keyed(&text, "frozen") == Some(1) || Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Write `cgroup.kill` where the kernel has it; false where it does not (< 5.14).
    pub(super) fn kill(&self, rel: &Path) -> Result<bool, ContainError> {
        let path = self.dir(rel).join("cgroup.kill");
        if !path.exists() {
            return Ok(false);
        }
        fs::write(&path, "1")?;
        Ok(true)
    }

    pub(super) fn oom_kills(&self, rel: &Path) -> u64 {
        fs::read_opt(&self.dir(rel).join("memory.events"))
            .ok()
            .flatten()
            .and_then(|t| fs::keyed(&t, "oom_kill"))
            .unwrap_or(0)
    }

    pub(super) fn usage(&self, rel: &Path) -> CgroupUsage {
        let dir = self.dir(rel);
        let text = |name: &str| fs::read_opt(&dir.join(name)).ok().flatten();
        let memory_stat = text("memory.stat");
        let cpu_stat = text("cpu.stat");
        let cpu = |key| cpu_stat.as_deref().and_then(|t| fs::keyed(t, key));
        CgroupUsage {
            // memory.peak came with kernel 5.19; before it there is no high-water mark.
            max_rss_bytes: text("memory.peak").and_then(|t| t.trim().parse().ok()),
            current_rss_bytes: memory_stat.as_deref().and_then(|t| fs::keyed(t, "anon")),
            user_cpu_us: cpu("user_usec"),
            system_cpu_us: cpu("system_usec"),
            total_cpu_us: cpu("usage_usec"),
        }
    }
}
