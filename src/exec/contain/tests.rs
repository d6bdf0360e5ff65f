//! Unit tests: the v2 code paths against a fake cgroupfs in a temp dir (this machine runs
//! v1, so they would otherwise go untested here), the unconfined mode, device rules.
//! The real-kernel tests are in tests/cgroups.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

const GIB: u64 = 1 << 30;

fn conf_for(mount: &Path) -> CgroupConf {
    CgroupConf {
        mountpoint: mount.to_path_buf(),
        constrain_cores: true,
        constrain_ram_space: true,
        constrain_swap_space: true,
        allowed_swap_space: 50.0,
        ..CgroupConf::default()
    }
}

/// A fake v2 mount offering memory and cpuset, both enabled for the root's children.
fn fake_v2(conf: &CgroupConf) -> (tempfile::TempDir, Containment) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = dir.path();
    std::fs::write(
        mount.join("cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    )
    .expect("w");
    std::fs::write(mount.join("cgroup.subtree_control"), "cpuset memory\n").expect("w");
    let root = mount.join("canopy_n1");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("cgroup.procs"), "").expect("w");
    let conf = CgroupConf {
        mountpoint: mount.to_path_buf(),
        ..conf.clone()
    };
    let v2 = match cgroup_v2::V2::open(&conf, mount, root) {
        Ok(v2) => v2,
        Err(e) => panic!("fake v2: {e}"),
    };
    let containment = Containment::from_backend(Backend::V2(v2), conf, 16 * GIB);
    (dir, containment)
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn one(paths: Vec<PathBuf>) -> PathBuf {
    assert_eq!(paths.len(), 1, "{paths:?}");
    paths.into_iter().next().expect("one path")
}

#[test]
fn v2_job_and_step_get_limits_and_controllers() {
    let (dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    assert_eq!(c.mode(), Mode::V2);
    let root = dir.path().join("canopy_n1");
    assert_eq!(read(root.join("cgroup.subtree_control")), "+memory +cpuset");

    let limits = JobLimits {
        cpus: Some(vec![0, 1, 3]),
        mem_bytes: Some(2 * GIB),
        ..JobLimits::default()
    };
    let job = c.job(42, 1000, &limits).expect("job");
    let job_dir = one(job.paths());
    assert_eq!(job_dir, root.join("job_42"), "v2 has no uid level");
    assert_eq!(
        read(job_dir.join("cgroup.subtree_control")),
        "+memory +cpuset"
    );
    assert_eq!(read(job_dir.join("cpuset.cpus")), "0,1,3");
    assert_eq!(read(job_dir.join("memory.max")), (2 * GIB).to_string());

    // Swap: memory.swap.max holds only the swap part (50% of 2 GiB), when the file exists.
    std::fs::create_dir(job_dir.join("step_0")).expect("mkdir");
    std::fs::write(job_dir.join("step_0/memory.swap.max"), "max").expect("w");
    let step_limits = JobLimits {
        cpus: Some(vec![1]),
        mem_bytes: Some(GIB),
        ..JobLimits::default()
    };
    let step = job.step(StepName::Numbered(0), &step_limits).expect("step");
    let step_dir = one(step.paths());
    assert_eq!(step_dir, job_dir.join("step_0"));
    assert_eq!(read(step_dir.join("cpuset.cpus")), "1");
    assert_eq!(read(step_dir.join("memory.max")), GIB.to_string());
    assert_eq!(
        read(step_dir.join("memory.swap.max")),
        (GIB / 2).to_string()
    );
    assert!(
        !step_dir.join("cgroup.subtree_control").exists(),
        "a step enables no controllers, so it may hold processes"
    );

    let batch = job
        .step(StepName::Batch, &JobLimits::default())
        .expect("batch");
    assert_eq!(one(batch.paths()), job_dir.join("step_batch"));
    let ext = job
        .step(StepName::Extern, &JobLimits::default())
        .expect("extern");
    assert_eq!(one(ext.paths()), job_dir.join("step_extern"));

    // A step holding all of the job's share: its cpuset is written, its
    // memory limit is not (the job's binds its whole subtree).
    let whole = job.step(StepName::Numbered(1), &limits).expect("step 1");
    let whole_dir = one(whole.paths());
    assert_eq!(read(whole_dir.join("cpuset.cpus")), "0,1,3");
    assert!(!whole_dir.join("memory.max").exists());
}

#[test]
fn v2_unconstrained_conf_writes_no_limits() {
    let (_dir, c) = fake_v2(&CgroupConf::default());
    let limits = JobLimits {
        cpus: Some(vec![0]),
        mem_bytes: Some(GIB),
        ..JobLimits::default()
    };
    let job = c.job(1, 0, &limits).expect("job");
    let job_dir = one(job.paths());
    assert!(!job_dir.join("memory.max").exists());
    assert!(!job_dir.join("cpuset.cpus").exists());
    // Memory stays enabled for accounting; cpuset only with ConstrainCores.
    assert_eq!(read(job_dir.join("cgroup.subtree_control")), "+memory");
}

#[test]
fn v2_controller_not_enabled_at_the_mount_is_left_out_unless_enable_controllers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = dir.path();
    std::fs::write(mount.join("cgroup.controllers"), "cpuset memory\n").expect("w");
    std::fs::write(mount.join("cgroup.subtree_control"), "\n").expect("w");
    let root = mount.join("canopy_n1");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("cgroup.procs"), "").expect("w");
    let mut conf = conf_for(mount);
    let v2 = cgroup_v2::V2::open(&conf, mount, root.clone()).expect("open");
    drop(v2);
    assert!(
        !root.join("cgroup.subtree_control").exists(),
        "nothing to enable"
    );

    conf.enable_controllers = true;
    let _v2 = cgroup_v2::V2::open(&conf, mount, root.clone()).expect("open");
    // Both written to the mount (the fake keeps the last write), then to canopy's root.
    assert_eq!(read(mount.join("cgroup.subtree_control")), "+cpuset");
    assert_eq!(read(root.join("cgroup.subtree_control")), "+memory +cpuset");
}

#[test]
fn v2_attach_writes_own_pid_marker_into_cgroup_procs() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(3, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(1), &JobLimits::default())
        .expect("step");
    let step_dir = one(step.paths());
    // The fake has no kernel to make control files: make the one attach opens.
    std::fs::write(step_dir.join("cgroup.procs"), "").expect("w");
    let attach = step.attach().expect("attach");
    attach.apply().expect("apply");
    assert_eq!(read(step_dir.join("cgroup.procs")), "0\n");

    std::fs::create_dir(step_dir.join("task_0")).expect("mkdir");
    std::fs::write(step_dir.join("task_0/cgroup.procs"), "").expect("w");
    let task = step.task(0).expect("task");
    task.attach().apply_to(4321).expect("apply_to");
    assert_eq!(read(step_dir.join("task_0/cgroup.procs")), "4321\n");
}

#[test]
fn v2_kill_all_uses_cgroup_kill_then_freezes_and_kills_what_is_left() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(5, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let step_dir = one(step.paths());
    let mut child = Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("spawn sleep");
    // A fake cgroup.kill kills nothing, so the freeze-signal-thaw path must finish the job.
    std::fs::write(step_dir.join("cgroup.kill"), "").expect("w");
    std::fs::create_dir(step_dir.join("task_0")).expect("mkdir");
    std::fs::write(
        step_dir.join("task_0/cgroup.procs"),
        format!("{}\n", child.id()),
    )
    .expect("w");
    assert_eq!(step.pids(), vec![child.id() as i32]);
    assert_eq!(
        job.pids(),
        vec![child.id() as i32],
        "the job sees its steps' pids"
    );

    step.kill_all().expect("kill_all");
    let status = child.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
    assert_eq!(read(step_dir.join("cgroup.kill")), "1");
    assert_eq!(
        read(step_dir.join("cgroup.freeze")),
        "0",
        "thawed at the end"
    );
    assert!(step.pids().is_empty());
}

#[test]
fn v2_signal_all_freezes_signals_and_thaws() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(6, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Batch, &JobLimits::default())
        .expect("step");
    let step_dir = one(step.paths());
    let mut child = Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("spawn sleep");
    std::fs::write(step_dir.join("cgroup.procs"), format!("{}\n", child.id())).expect("w");
    // cgroup.events saying frozen lets the freeze wait end at once.
    std::fs::write(step_dir.join("cgroup.events"), "populated 1\nfrozen 1\n").expect("w");
    assert_eq!(step.signal_all(Signal::SIGTERM).expect("signal"), 1);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.wait().expect("wait").signal(), Some(15));
    assert_eq!(read(step_dir.join("cgroup.freeze")), "0");
}

#[test]
fn v2_oom_kills_and_usage_are_read_from_the_cgroups_files() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(8, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let step_dir = one(step.paths());
    assert_eq!(step.oom_kills(), 0, "no memory.events yet");
    assert_eq!(step.usage(), CgroupUsage::default());

    std::fs::write(
        step_dir.join("memory.events"),
        "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
    )
    .expect("w");
    std::fs::write(
        step_dir.join("cpu.stat"),
        "usage_usec 1500000\nuser_usec 1200000\nsystem_usec 300000\nnr_periods 0\n",
    )
    .expect("w");
    std::fs::write(step_dir.join("memory.stat"), "anon 4096000\nfile 100\n").expect("w");
    assert_eq!(step.oom_kills(), 2);
    let usage = step.usage();
    assert_eq!(usage.total_cpu_us, Some(1_500_000));
    assert_eq!(usage.user_cpu_us, Some(1_200_000));
    assert_eq!(usage.system_cpu_us, Some(300_000));
    assert_eq!(usage.current_rss_bytes, Some(4_096_000));
    assert_eq!(
        usage.max_rss_bytes, None,
        "no memory.peak before kernel 5.19"
    );
    std::fs::write(step_dir.join("memory.peak"), "8192000\n").expect("w");
    assert_eq!(step.usage().max_rss_bytes, Some(8_192_000));
}

#[test]
fn unconfined_when_the_mount_is_not_a_cgroup_fs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for plugin in [CgroupPlugin::Autodetect, CgroupPlugin::V1, CgroupPlugin::V2] {
        let conf = CgroupConf {
            plugin,
            ..conf_for(dir.path())
        };
        let c = Containment::start(&conf, "n1");
        assert_eq!(c.mode(), Mode::Unconfined, "{plugin:?}");
        assert!(c.unconfined_reason().is_some());
        assert!(c.roots().is_empty());
        // Every operation still works, doing nothing.
        let job = c.job(1, 0, &JobLimits::default()).expect("job");
        let step = job
            .step(StepName::Batch, &JobLimits::default())
            .expect("step");
        step.attach().expect("attach").apply().expect("apply");
        step.kill_all().expect("kill_all");
        assert_eq!(step.signal_all(Signal::SIGTERM).expect("signal"), 0);
        assert_eq!(step.oom_kills(), 0);
        step.remove().expect("remove");
        job.remove().expect("remove");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("ls").count(),
        0,
        "nothing made"
    );

    let disabled = CgroupConf {
        plugin: CgroupPlugin::Disabled,
        ..CgroupConf::default()
    };
    let c = Containment::start(&disabled, "n1");
    assert_eq!(
        c.unconfined_reason(),
        Some("CgroupPlugin=disabled in cgroup.conf")
    );
}

#[test]
fn device_rules_come_from_the_device_files() {
    assert_eq!(device_rule(Path::new("/dev/null")).expect("null"), "c 1:3");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-device");
    std::fs::write(&file, "").expect("w");
    assert!(matches!(
        device_rule(&file),
        Err(ContainError::NotDevice { .. })
    ));
    let e = device_rule(&dir.path().join("absent")).expect_err("absent");
    assert!(e.to_string().contains("stat device"), "{e}");
}

#[test]
fn resolve_applies_only_what_the_conf_constrains() {
    let limits = JobLimits {
        cpus: Some(vec![2, 3]),
        mems: Some(vec![0]),
        mem_bytes: Some(GIB),
        devices: Some(DeviceRules {
            allow: vec![PathBuf::from("/dev/null")],
            deny: vec![PathBuf::from("/dev/zero")],
        }),
    };
    let inner = |conf: CgroupConf| Inner {
        backend: Backend::Unconfined(none::Unconfined::new("test".into(), false)),
        conf,
        node_ram: 16 * GIB,
    };
    let none = inner(CgroupConf::default())
        .resolve(&limits)
        .expect("resolve");
    assert!(none.cpus.is_none() && none.memory.is_none() && none.devices.is_none());

    let all = CgroupConf {
        constrain_devices: true,
        ..conf_for(Path::new("/x"))
    };
    let r = inner(all).resolve(&limits).expect("resolve");
    assert_eq!(r.cpus.as_deref(), Some("2,3"));
    assert_eq!(r.mems.as_deref(), Some("0"));
    assert_eq!(r.memory.map(|m| m.ram), Some(GIB));
    let devices = r.devices.expect("devices");
    assert_eq!(devices.allow, vec!["c 1:3"]);
    assert_eq!(devices.deny, vec!["c 1:5"]);
}

#[test]
fn node_names_become_one_safe_component() {
    assert_eq!(sanitize("node-01.cluster"), "node-01.cluster");
    assert_eq!(sanitize("../evil/x"), ".._evil_x");
    assert_eq!(StepName::Numbered(7).to_string(), "7");
    assert_eq!(format!("step_{}", StepName::Extern), "step_extern");
}

#[test]
fn handles_can_go_to_blocking_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Containment>();
    send_sync::<JobCgroup>();
    send_sync::<StepCgroup>();
    send_sync::<TaskCgroup>();
    send_sync::<Attach>();
}

#[test]
fn signal_all_signals_even_where_freezing_fails() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(9, 0, &JobLimits::default()).expect("job");
    let step = job
        .step(StepName::Numbered(0), &JobLimits::default())
        .expect("step");
    let step_dir = one(step.paths());
    let mut child = Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("spawn sleep");
    std::fs::write(step_dir.join("cgroup.procs"), format!("{}\n", child.id())).expect("w");
    // A directory where cgroup.freeze should be makes every write to it fail.
    std::fs::create_dir(step_dir.join("cgroup.freeze")).expect("mkdir");
    assert_eq!(step.signal_all(Signal::SIGKILL).expect("signal"), 1);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.wait().expect("wait").signal(), Some(9));
}

#[test]
fn a_failed_setup_keeps_a_cgroup_that_existed_before() {
    let (_dir, c) = fake_v2(&conf_for(Path::new("/unused")));
    let job = c.job(10, 0, &JobLimits::default()).expect("job");
    let job_dir = one(job.paths());
    // memory.max as a directory: the write fails, as a limit below usage does.
    std::fs::create_dir_all(job_dir.join("step_0/memory.max")).expect("mkdir");
    let limits = JobLimits {
        mem_bytes: Some(GIB),
        ..JobLimits::default()
    };
    let e = job
        .step(StepName::Numbered(0), &limits)
        .err()
        .expect("fails");
    assert!(e.to_string().contains("memory.max"), "{e}");
    assert!(job_dir.join("step_0").exists(), "it existed before: kept");
}
