//! Containment against the real kernel (exec::contain): real cgroups, real processes.
//! Needs root and a cgroup v1 hierarchy (freezer, memory, cpuset, cpuacct) at
//! /sys/fs/cgroup, as on the development machines and CI; under CI a missing
//! prerequisite fails the test (common::require). The v2 test runs on the hybrid
//! layout's /sys/fs/cgroup/unified, which has no controllers but has cgroup.kill,
//! cgroup.freeze and cpu.stat. Each test uses its own node name, so they run in
//! parallel without meeting, and removes its root at the end.

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use canopy::config::cgroup::{CgroupConf, CgroupPlugin};
use canopy::exec::contain::{Attach, Containment, JobLimits, Mode, StepName};

const MIB: u64 = 1 << 20;

fn v1_ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let mounted = ["freezer", "memory", "cpuset", "cpuacct"].iter().all(|c| {
        Path::new("/sys/fs/cgroup")
            .join(c)
            .join("cgroup.procs")
            .exists()
    });
    common::require(
        root && mounted,
        "root and cgroup v1 (freezer, memory, cpuset, cpuacct) at /sys/fs/cgroup",
    )
}

fn node(test: &str) -> String {
    format!("t{}_{test}", std::process::id())
}

/// Whatever a test leaves (it panicked half-way), killed and removed when it ends.
struct Cleanup {
    conf: CgroupConf,
    node: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let options = canopy::exec::contain::StartOptions { kill_stale: true };
        let _ = Containment::start_with(&self.conf, &self.node, options).remove_root();
    }
}

/// Start a containment for this test's node, with its cleanup.
fn start(conf: &CgroupConf, test: &str) -> (Containment, Cleanup) {
    let cleanup = Cleanup {
        conf: conf.clone(),
        node: node(test),
    };
    (Containment::start(conf, &cleanup.node), cleanup)
}

fn constrained() -> CgroupConf {
    CgroupConf {
        constrain_cores: true,
        constrain_ram_space: true,
        ..CgroupConf::default()
    }
}

fn spawn_in(attach: Attach, command: &mut Command) -> Child {
    // SAFETY: Attach::apply only makes write(2) calls on descriptors opened before fork.
    unsafe {
        command.pre_exec(move || attach.apply());
    }
    command.spawn().expect("spawn")
}

fn count_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| 1 + count_dirs(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

#[test]
fn memory_hog_is_oom_killed_and_counted() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "oom");
    assert_eq!(c.mode(), Mode::V1);
    let limits = JobLimits {
        mem_bytes: Some(64 * MIB),
        ..JobLimits::default()
    };
    let job = c.job(1, 0, &limits).expect("job");
    let step = job.step(StepName::Numbered(0), &limits).expect("step");
    let memory_dir = step
        .paths()
        .into_iter()
        .find(|p| p.starts_with("/sys/fs/cgroup/memory"))
        .expect("memory dir");
    // The step's limit is the job's, written once at the job's level: the
    // kernel reports what binds the step as its hierarchical limit.
    let stat = std::fs::read_to_string(memory_dir.join("memory.stat")).expect("memory.stat");
    assert!(
        stat.lines()
            .any(|l| l == format!("hierarchical_memory_limit {}", 64 * MIB)),
        "{stat}"
    );

    // Twice the limit, written (b'x' * n touches every page; a zeroed bytearray may not).
    let mut child = spawn_in(
        step.attach().expect("attach"),
        Command::new("python3").args(["-c", "b = b'x' * (128 << 20); import time; time.sleep(30)"]),
    );
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    while step.oom_kills() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(step.oom_kills() >= 1, "no oom_kill counted within 2 s");
    assert!(job.oom_kills() >= 1, "the job counts its steps' kills");
    assert!(step.usage().max_rss_bytes.is_some_and(|b| b > 32 * MIB));

    step.remove().expect("remove step");
    job.remove().expect("remove job");
    c.remove_root().expect("remove root");
}

#[test]
fn cpuset_of_cpu_0_is_what_the_task_sees() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "cpuset");
    let job = c
        .job(
            2,
            0,
            &JobLimits {
                cpus: Some(vec![0]),
                ..JobLimits::default()
            },
        )
        .expect("job");
    let step = job
        .step(StepName::Batch, &JobLimits::default())
        .expect("step");
    let task = step.task(0).expect("task");
    // A task has its own cgroup only where Slurm makes one (memory and cpuacct,
    // for per-task accounting); in the cpuset it stays in its step.
    let under = |ctl: &str, rest: &str| {
        PathBuf::from(format!(
            "/sys/fs/cgroup/{ctl}/canopy_{}/uid_0/job_2/step_batch{rest}",
            node("cpuset")
        ))
    };
    let paths = task.paths();
    assert!(paths.contains(&under("memory", "/task_0")), "{paths:?}");
    assert!(paths.contains(&under("cpuacct", "/task_0")), "{paths:?}");
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with("/sys/fs/cgroup/cpuset")
                || p.starts_with("/sys/fs/cgroup/freezer")),
        "{paths:?}"
    );
    let out = {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup",
        ]);
        let attach = task.attach().try_clone().expect("clone");
        // SAFETY: as in spawn_in.
        unsafe {
            command.pre_exec(move || attach.apply());
        }
        command.output().expect("grep")
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Cpus_allowed_list:\t0\n"), "{text}");
    // Where the task's process landed in each hierarchy.
    let rel = format!("/canopy_{}/uid_0/job_2/step_batch", node("cpuset"));
    let in_hier = |ctl: &str| {
        text.lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(':')?;
                let (names, path) = rest.split_once(':')?;
                names.split(',').any(|n| n == ctl).then(|| path.to_string())
            })
            .unwrap_or_default()
    };
    assert_eq!(in_hier("cpuset"), rel, "{text}");
    assert_eq!(in_hier("freezer"), rel, "{text}");
    assert_eq!(in_hier("memory"), format!("{rel}/task_0"), "{text}");
    assert_eq!(in_hier("cpuacct"), format!("{rel}/task_0"), "{text}");
    drop(task);
    step.remove().expect("remove step");
    job.remove().expect("remove job");
    c.remove_root().expect("remove root");
}

#[test]
fn double_forked_daemon_is_killed_by_kill_all() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "dfork");
    double_fork_and_kill(&c);
    c.remove_root().expect("remove root");
}

/// A daemon that leaves the step's session (setsid, parent gone) is still found and
/// killed, and nothing remains.
fn double_fork_and_kill(c: &Containment) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("daemon.pid");
    let job = c.job(3, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let script = format!(
        "setsid sh -c 'sleep 300 & echo $! > {}' &",
        pid_file.display()
    );
    let mut child = spawn_in(
        step.attach().expect("attach"),
        Command::new("sh").args(["-c", &script]),
    );
    assert!(child.wait().expect("wait").success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let daemon = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the daemon never wrote its pid");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(alive(daemon));
    assert!(step.pids().contains(&daemon), "{:?}", step.pids());

    step.kill_all().expect("kill_all");
    assert!(step.pids().is_empty(), "{:?}", step.pids());
    assert!(!alive(daemon), "the daemon survived");
    step.remove().expect("remove step");
    job.remove().expect("remove job");
    // Only the user's level (v1 has one) stays, for the user's next job.
    let levels = usize::from(c.mode() == Mode::V1);
    assert!(c.roots().iter().all(|r| count_dirs(r) == levels));
}

#[test]
fn thousand_job_cycles_leave_no_directory() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "cycles");
    let limits = JobLimits {
        cpus: Some(vec![0, 1]),
        mem_bytes: Some(256 * MIB),
        ..JobLimits::default()
    };
    let started = Instant::now();
    let mut each = Vec::with_capacity(1000);
    for id in 0..1000 {
        let cycle = Instant::now();
        let job = c.job(id, 1000 + id % 3, &limits).expect("job");
        let step = job
            .step(StepName::Numbered(0), &JobLimits::default())
            .expect("step");
        let task = step.task(0).expect("task");
        drop(task);
        step.remove().expect("remove step");
        job.remove().expect("remove job");
        each.push(cycle.elapsed());
    }
    let took = started.elapsed();
    each.sort_unstable();
    // Reported, not asserted: other work shares this machine's two CPUs.
    eprintln!(
        "1000 job+step+task create/remove cycles (4 hierarchies): {took:?}; p50 {:?}, p99 {:?}",
        each[500], each[990]
    );
    let roots = c.roots();
    assert_eq!(
        roots.len(),
        4,
        "freezer, memory, cpuacct, cpuset: {roots:?}"
    );
    // Only the three users' levels stay, for their next jobs.
    for root in &roots {
        assert_eq!(count_dirs(root), 3, "{} has leftovers", root.display());
    }
    c.remove_root().expect("remove root");
    assert!(roots.iter().all(|r| !r.exists()));
}

#[test]
fn usage_reports_the_cpu_time_of_a_busy_loop() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "usage");
    busy_loop_usage(&c);
    c.remove_root().expect("remove root");
}

fn busy_loop_usage(c: &Containment) {
    let job = c.job(4, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let started = Instant::now();
    let mut child = spawn_in(
        step.attach().expect("attach"),
        // Spins until it has used 0.5 s of CPU, however busy the machine is; mostly
        // arithmetic, since reading the clock is a system call on some virtual machines.
        Command::new("python3").args([
            "-c",
            "import time\ni = 0\nwhile time.process_time() < 0.5:\n    for _ in range(200000): i += 1",
        ]),
    );
    assert!(child.wait().expect("wait").success());
    let wall = started.elapsed();
    let usage = step.usage();
    let total = usage.total_cpu_us.expect("total cpu");
    let user = usage.user_cpu_us.expect("user cpu");
    assert!(total >= 500_000, "{usage:?}");
    assert!(
        total <= 2 * wall.as_micros() as u64 + 100_000,
        "{usage:?} in {wall:?}"
    );
    // USER_HZ ticks on v1; start-up is partly system time.
    assert!(user >= 300_000, "{usage:?}");
    assert!(usage.system_cpu_us.is_some());
    assert!(
        job.usage().total_cpu_us >= Some(total),
        "the job includes its steps"
    );
    step.remove().expect("remove step");
    job.remove().expect("remove job");
}

/// Counts WARN events, to see that the unconfined mode says so exactly once.
struct CountWarnings(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn no_usable_cgroupfs_runs_unconfined_with_one_warning() {
    use tracing_subscriber::layer::SubscriberExt;
    let dir = tempfile::tempdir().expect("tempdir");
    for plugin in [CgroupPlugin::Autodetect, CgroupPlugin::V1, CgroupPlugin::V2] {
        let warnings = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry().with(CountWarnings(warnings.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let conf = CgroupConf {
                plugin,
                mountpoint: dir.path().to_path_buf(),
                ..constrained()
            };
            let c = Containment::start(&conf, &node("noperm"));
            assert_eq!(c.mode(), Mode::Unconfined);
            // The daemon keeps working: a step runs, unconfined, and every call succeeds.
            let limits = JobLimits {
                mem_bytes: Some(MIB),
                cpus: Some(vec![0]),
                ..JobLimits::default()
            };
            let job = c.job(9, 0, &limits).expect("job");
            let step = job.step(StepName::Batch, &limits).expect("step");
            let mut child = spawn_in(step.attach().expect("attach"), &mut Command::new("true"));
            assert!(child.wait().expect("wait").success());
            step.kill_all().expect("kill_all");
            assert_eq!(step.oom_kills(), 0);
            step.remove().expect("remove");
            job.remove().expect("remove");
        });
        assert_eq!(warnings.load(Ordering::SeqCst), 1, "{plugin:?}");
    }
    assert_eq!(count_dirs(dir.path()), 0);
}

#[test]
fn leftovers_of_a_crashed_daemon_are_cleaned_at_start() {
    if !v1_ready() {
        return;
    }
    let name = node("stale");
    let _cleanup = Cleanup {
        conf: constrained(),
        node: name.clone(),
    };
    let c = Containment::start(&constrained(), &name);
    let job = c.job(5, 0, &JobLimits::default()).expect("job");
    let idle = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let busy = job
        .step(StepName::Numbered(1), &JobLimits::default())
        .expect("step");
    let mut child = spawn_in(
        busy.attach().expect("attach"),
        Command::new("sleep").arg("300"),
    );
    let busy_paths: Vec<PathBuf> = busy.paths();
    // A crash: no handle gets to clean up.
    std::mem::forget(idle);
    std::mem::forget(busy);
    std::mem::forget(job);

    // Restart without kill_stale: empty cgroups go, the running step stays (re-adoption).
    let c = Containment::start(&constrained(), &name);
    assert!(busy_paths.iter().all(|p| p.exists()));
    assert!(
        c.roots().iter().all(|r| count_dirs(r) == 3),
        "uid, job, busy step"
    );
    assert!(child.try_wait().expect("try_wait").is_none());

    // With kill_stale: the process is killed and everything goes.
    let options = canopy::exec::contain::StartOptions { kill_stale: true };
    let c = Containment::start_with(&constrained(), &name, options);
    assert_eq!(child.wait().expect("wait").signal(), Some(9));
    assert!(c.roots().iter().all(|r| count_dirs(r) == 0));
    c.remove_root().expect("remove root");
}

/// The v2 code on a real cgroup2 file system: the hybrid layout's unified mount has no
/// controllers, but cgroup.kill, cgroup.freeze and cpu.stat are there.
#[test]
fn v2_on_the_unified_mount_kills_and_accounts() {
    let unified = Path::new("/sys/fs/cgroup/unified");
    let ready = nix::unistd::Uid::effective().is_root()
        && nix::sys::statfs::statfs(unified)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    if !common::require(ready, "root and a cgroup2 mount at /sys/fs/cgroup/unified") {
        return;
    }
    let conf = CgroupConf {
        plugin: CgroupPlugin::V2,
        mountpoint: unified.to_path_buf(),
        ..constrained()
    };
    let (c, _cleanup) = start(&conf, "v2");
    assert_eq!(c.mode(), Mode::V2, "{:?}", c.unconfined_reason());
    double_fork_and_kill(&c);
    busy_loop_usage(&c);
    c.remove_root().expect("remove root");
}

/// ConstrainDevices on v2: the eBPF device program denies the device a job was not
/// given. Runs on the unified mount, where the program applies as on a pure v2 host.
#[test]
fn v2_device_program_denies_what_is_not_allocated() {
    let unified = Path::new("/sys/fs/cgroup/unified");
    let ready = nix::unistd::Uid::effective().is_root()
        && nix::sys::statfs::statfs(unified)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    if !common::require(ready, "root and a cgroup2 mount at /sys/fs/cgroup/unified") {
        return;
    }
    let conf = CgroupConf {
        plugin: CgroupPlugin::V2,
        mountpoint: unified.to_path_buf(),
        constrain_devices: true,
        ..constrained()
    };
    let (c, _cleanup) = start(&conf, "v2dev");
    device_fence(&c, 8);
    c.remove_root().expect("remove root");
}

/// /dev/null allowed, /dev/zero (same major, as /dev/nvidia0 beside /dev/nvidia1) denied.
fn device_fence(c: &Containment, job_id: u32) {
    let limits = JobLimits {
        devices: Some(canopy::exec::contain::DeviceRules {
            allow: vec![PathBuf::from("/dev/null")],
            deny: vec![PathBuf::from("/dev/zero")],
        }),
        ..JobLimits::default()
    };
    let job = c.job(job_id, 0, &limits).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let run = |script: &str| {
        let mut child = spawn_in(
            step.attach().expect("attach"),
            Command::new("sh").args(["-c", script]),
        );
        child.wait().expect("wait").success()
    };
    assert!(run("head -c 1 /dev/null"), "allowed device refused");
    assert!(
        !run("head -c 1 /dev/zero 2>/dev/null"),
        "denied device opened"
    );
    // The fence is the job's: another job on the node is not fenced.
    let other = c.job(job_id + 1, 0, &JobLimits::default()).expect("job");
    let free = other
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let mut child = spawn_in(
        free.attach().expect("attach"),
        Command::new("sh").args(["-c", "head -c 1 /dev/zero >/dev/null"]),
    );
    assert!(
        child.wait().expect("wait").success(),
        "an unfenced job was fenced"
    );
    for (s, j) in [(step, job), (free, other)] {
        s.remove().expect("remove step");
        j.remove().expect("remove job");
    }
}

#[test]
fn a_job_that_cannot_be_set_up_leaves_nothing() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "badjob");
    // The machine has no CPU 4095: the kernel refuses the cpuset.
    let limits = JobLimits {
        cpus: Some(vec![4095]),
        ..JobLimits::default()
    };
    let e = c
        .job(6, 0, &limits)
        .err()
        .expect("an impossible cpuset fails");
    assert!(e.to_string().contains("cpuset.cpus"), "{e}");
    assert!(
        c.roots().iter().all(|r| count_dirs(r) == 0),
        "half-made job left behind"
    );
    c.remove_root().expect("remove root");
}

/// ConstrainDevices on v1: the allocated device opens, the denied one of the same kind
/// does not (as /dev/nvidia1 against /dev/nvidia0).
#[test]
fn v1_devices_deny_what_is_not_allocated() {
    if !v1_ready()
        || !common::require(
            Path::new("/sys/fs/cgroup/devices/devices.allow").exists(),
            "the cgroup v1 devices controller",
        )
    {
        return;
    }
    let conf = CgroupConf {
        constrain_devices: true,
        ..constrained()
    };
    let (c, _cleanup) = start(&conf, "devices");
    device_fence(&c, 7);
    c.remove_root().expect("remove root");
}

/// A read-only mount of a real cgroup hierarchy: detection sees cgroupfs, making the root
/// fails with EROFS, and the containment is unconfined, said once.
#[test]
fn read_only_cgroup_mount_runs_unconfined_with_one_warning() {
    use tracing_subscriber::layer::SubscriberExt;
    if !v1_ready() {
        return;
    }
    /// Unmounts what it mounted, however the test ends.
    struct Mounted(PathBuf);
    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let freezer = dir.path().join("freezer");
    std::fs::create_dir(&freezer).expect("mkdir");
    let status = Command::new("mount")
        .args(["-t", "cgroup", "-o", "ro,freezer", "cgroup"])
        .arg(&freezer)
        .status()
        .expect("mount");
    if !common::require(
        status.success(),
        "mount(8) of a read-only cgroup v1 freezer",
    ) {
        return;
    }
    let _mounted = Mounted(freezer);
    let warnings = Arc::new(AtomicUsize::new(0));
    let subscriber = tracing_subscriber::registry().with(CountWarnings(warnings.clone()));
    tracing::subscriber::with_default(subscriber, || {
        let conf = CgroupConf {
            mountpoint: dir.path().to_path_buf(),
            ..constrained()
        };
        let c = Containment::start(&conf, &node("readonly"));
        assert_eq!(c.mode(), Mode::Unconfined);
        let reason = c.unconfined_reason().unwrap_or_default();
        assert!(reason.contains("Read-only"), "{reason}");
        let job = c.job(1, 0, &JobLimits::default()).expect("job");
        job.kill_all().expect("kill_all");
    });
    assert_eq!(warnings.load(Ordering::SeqCst), 1);
}

/// Jobs of one user made and removed at once from several threads (as the node daemon's
/// blocking threads do): the shared `uid_N` level vanishing under one of them must not
/// fail its job, and nothing is left at the end.
#[test]
fn concurrent_jobs_of_one_user_share_the_uid_level() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "concurrent");
    let limits = JobLimits {
        cpus: Some(vec![0]),
        mem_bytes: Some(64 * MIB),
        ..JobLimits::default()
    };
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let (c, limits) = (&c, &limits);
            scope.spawn(move || {
                for i in 0..150 {
                    let job = c.job(thread * 1000 + i, 4242, limits).expect("job");
                    let step = job
                        .step(StepName::Batch, &JobLimits::default())
                        .expect("step");
                    step.attach().expect("attach");
                    step.remove().expect("remove step");
                    job.remove().expect("remove job");
                }
            });
        }
    });
    // The user's level stays for the next job; nothing else does.
    assert!(c.roots().iter().all(|r| count_dirs(r) == 1));
    c.remove_root().expect("remove root");
}

/// signal_all reaches every process of the step, tasks included, and nothing outside it;
/// kill_all of an empty step returns at once.
#[test]
fn signal_all_reaches_the_step_and_only_the_step() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "signal");
    let job = c.job(12, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let other = job
        .step(StepName::Numbered(1), &JobLimits::default())
        .expect("step");
    let task = step.task(0).expect("task");
    let mut in_step = spawn_in(
        step.attach().expect("attach"),
        Command::new("sleep").arg("300"),
    );
    let mut in_task = spawn_in(
        task.attach().try_clone().expect("clone"),
        Command::new("sleep").arg("300"),
    );
    let mut elsewhere = spawn_in(
        other.attach().expect("attach"),
        Command::new("sleep").arg("300"),
    );

    assert_eq!(
        step.signal_all(nix::sys::signal::Signal::SIGTERM)
            .expect("signal"),
        2
    );
    assert_eq!(in_step.wait().expect("wait").signal(), Some(15));
    assert_eq!(in_task.wait().expect("wait").signal(), Some(15));
    assert!(
        elsewhere.try_wait().expect("try_wait").is_none(),
        "another step was signalled"
    );

    let started = Instant::now();
    step.kill_all().expect("kill_all of an empty step");
    assert!(started.elapsed() < Duration::from_millis(500));
    job.kill_all().expect("kill_all of the job");
    assert_eq!(elsewhere.wait().expect("wait").signal(), Some(9));
    drop(task);
    for s in [step, other] {
        s.remove().expect("remove step");
    }
    job.remove().expect("remove job");
    c.remove_root().expect("remove root");
}

/// Every cpuset canopy makes below the node's root has `sched_load_balance` off (so
/// that writing its CPUs and removing it do not make the kernel rebuild the scheduler's
/// domains), and still gets its CPUs and memory nodes; the root keeps balancing on,
/// which covers everything below it.
#[test]
fn cpusets_below_the_root_are_filled_without_load_balancing() {
    if !v1_ready() {
        return;
    }
    let (c, _cleanup) = start(&constrained(), "lbal");
    let root = c
        .roots()
        .into_iter()
        .find(|p| p.starts_with("/sys/fs/cgroup/cpuset"))
        .expect("cpuset root");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
            .trim()
            .to_string()
    };
    let job = c
        .job(
            8,
            0,
            &JobLimits {
                cpus: Some(vec![0]),
                mem_bytes: Some(64 * MIB),
                ..JobLimits::default()
            },
        )
        .expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let task = step.task(0).expect("task");
    let cpuset = |paths: Vec<PathBuf>| {
        paths
            .into_iter()
            .find(|p| p.starts_with(&root))
            .expect("cpuset dir")
    };
    let (job_dir, step_dir) = (cpuset(job.paths()), cpuset(step.paths()));
    // Tasks have no cpuset of their own: they run in their step's.
    assert!(!task.paths().iter().any(|p| p.starts_with(&root)));
    let uid_dir = job_dir.parent().expect("uid level").to_path_buf();
    assert_eq!(read(&root, "cpuset.sched_load_balance"), "1");
    let mems = read(&root, "cpuset.mems");
    for (dir, cpus) in [
        (&uid_dir, read(&root, "cpuset.cpus")),
        (&job_dir, "0".to_string()),
        (&step_dir, "0".to_string()),
    ] {
        assert_eq!(
            read(dir, "cpuset.sched_load_balance"),
            "0",
            "{}",
            dir.display()
        );
        assert_eq!(read(dir, "cpuset.cpus"), cpus, "{}", dir.display());
        assert_eq!(read(dir, "cpuset.mems"), mems, "{}", dir.display());
    }
    // A task's process joins the step's cpuset, and sees its CPUs.
    let out = {
        let mut command = Command::new("grep");
        command.args(["Cpus_allowed_list", "/proc/self/status"]);
        let attach = task.attach().try_clone().expect("clone");
        // SAFETY: as in spawn_in.
        unsafe {
            command.pre_exec(move || attach.apply());
        }
        command.output().expect("grep")
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.trim_end().ends_with("\t0"), "{text}");
    drop(task);
    step.remove().expect("remove step");
    job.remove().expect("remove job");
    c.remove_root().expect("remove root");
}
