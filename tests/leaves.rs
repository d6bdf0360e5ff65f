//! Jobs at the leaves, on real daemons: memory limits end a job
//! OUT_OF_MEMORY, a task sees only its cpuset, a process that double-forked
//! away dies with its job, GRES device files are fenced and named in the
//! environment, and tasks are bound as task/affinity binds them.
//!
//! Needs root and cgroup v1 (as on this machine and in CI); under CI a
//! missing prerequisite fails the test (common::require).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{write_script, Cluster};

fn cgroups_ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let mounted = ["freezer", "memory", "cpuset", "devices"].iter().all(|c| {
        Path::new("/sys/fs/cgroup")
            .join(c)
            .join("cgroup.procs")
            .exists()
    });
    common::require(root && mounted, "root and cgroup v1 at /sys/fs/cgroup")
}

const CONFINED: &str = "TaskPlugin=task/cgroup,task/affinity\nProctrackType=proctrack/cgroup\n";

fn cluster(nodes: u32, extra: &str, node_extra: &[&str], files: &[(&str, &str)]) -> Cluster {
    Cluster::start_with_files(nodes, 16, 30, extra, node_extra, files)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_job_over_its_memory_ends_out_of_memory() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster(
        1,
        CONFINED,
        &[],
        &[(
            "cgroup.conf",
            "ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n",
        )],
    );
    let w = c.dir.path();
    // Twice its --mem, touched page by page.
    let script = write_script(
        w,
        "hog.sh",
        "#!/bin/sh\npython3 -c 'b = bytearray(100 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096]); print(\"survived\")'\necho after\n",
    );
    let id = c.sbatch(w, &["--mem=50", "-o", "hog.out", script.to_str().unwrap()]);
    let j = c.wait_done(id, Duration::from_secs(60));
    let out = read(&w.join("hog.out"));
    assert_eq!(j.state.name(), "OUT_OF_MEMORY", "{out}");
    assert_eq!(j.exit_code, (0, 125));
    assert!(!out.contains("survived"), "{out}");
    assert!(
        out.contains(&format!(
            "slurmstepd: error: Detected 1 oom_kill event in StepId={id}.batch. Some of the step tasks have been OOM Killed."
        )),
        "{out}"
    );
    // sacct's words for it.
    let o = c.cli(
        w,
        "sacct",
        &["-j", &id.to_string(), "-X", "-n", "-o", "state,exitcode"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("OUT_OF_ME+") && text.contains("0:125"),
        "{text}"
    );
}

#[test]
fn each_job_sees_only_its_own_cpus() {
    if !cgroups_ready() {
        return;
    }
    // Two one-core sockets: the first job holds CPU 0, the second CPU 1.
    let c = cluster(1, CONFINED, &[], &[("cgroup.conf", "ConstrainCores=yes\n")]);
    let w = c.dir.path();
    let script = write_script(
        w,
        "cpus.sh",
        "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status\nsleep 3\n",
    );
    let a = c.sbatch(w, &["-n1", "-o", "a.out", script.to_str().unwrap()]);
    let b = c.sbatch(w, &["-n1", "-o", "b.out", script.to_str().unwrap()]);
    c.wait_done(a, Duration::from_secs(60));
    c.wait_done(b, Duration::from_secs(60));
    let (oa, ob) = (read(&w.join("a.out")), read(&w.join("b.out")));
    assert!(oa.contains("Cpus_allowed_list:\t0\n"), "{oa}");
    assert!(ob.contains("Cpus_allowed_list:\t1\n"), "{ob}");
    // scontrol -d names them the same way.
    let o = c.cli(w, "scontrol", &["-d", "show", "job", &b.to_string()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Nodes=n1 CPU_IDs=1 Mem=0 GRES="), "{text}");
}

#[test]
fn a_double_forked_process_dies_with_its_job() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster(1, "ProctrackType=proctrack/cgroup\n", &[], &[]);
    let w = c.dir.path();
    let pidfile = w.join("escaped.pid");
    // The daemon leaves the script's session and process group.
    let script = write_script(
        w,
        "escape.sh",
        &format!(
            "#!/bin/sh\nsetsid sh -c 'sleep 300 & echo $! > {}' &\nsleep 1\necho done\n",
            pidfile.display()
        ),
    );
    let id = c.sbatch(w, &["-o", "escape.out", script.to_str().unwrap()]);
    let j = c.wait_done(id, Duration::from_secs(60));
    assert_eq!(j.state.name(), "COMPLETED");
    let pid: i32 = read(&pidfile)
        .trim()
        .parse()
        .expect("the daemon wrote its pid");
    c.wait_for(Duration::from_secs(15), "the escaped daemon killed", |_| {
        !common::alive(pid)
    });
    // The job's cgroups are gone too, in every hierarchy.
    let root = format!(
        "canopy_{}",
        canopy::exec::leaf::root_id("n1", &w.join("spool").join("n1"))
    );
    assert!(
        Path::new("/sys/fs/cgroup/freezer").join(&root).exists(),
        "the node's root {root} is where the test looks"
    );
    c.wait_for(Duration::from_secs(15), "no job cgroup left", |_| {
        job_cgroups(&root).is_empty()
    });
}

/// Job cgroups under the node daemon's root `root`, in any hierarchy.
fn job_cgroups(root: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for h in ["freezer", "memory", "cpuset", "devices", "cpuacct"] {
        {
            let Ok(uids) = std::fs::read_dir(Path::new("/sys/fs/cgroup").join(h).join(root)) else {
                continue;
            };
            for uid in uids.flatten().filter(|e| e.path().is_dir()) {
                let Ok(jobs) = std::fs::read_dir(uid.path()) else {
                    continue;
                };
                out.extend(
                    jobs.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("job_"))
                        .map(|e| e.path()),
                );
            }
        }
    }
    out
}

#[test]
fn gres_devices_are_fenced_and_named() {
    if !cgroups_ready() {
        return;
    }
    // Device nodes of a major the kernel leaves to local use: opening one
    // the job may use fails "No such device", one it may not "Operation
    // not permitted" (the devices cgroup decides before any driver).
    let devdir = tempfile::tempdir().unwrap();
    for (i, minor) in [(0, 0), (1, 1)] {
        let path = devdir.path().join(format!("gpu{i}"));
        nix::sys::stat::mknod(
            &path,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(240, minor),
        )
        .unwrap();
    }
    let gres = format!(
        "Name=gpu Type=tst File={}/gpu[0-1]\n",
        devdir.path().display()
    );
    let c = cluster(
        1,
        &format!("{CONFINED}GresTypes=gpu\n"),
        &["Gres=gpu:tst:2"],
        &[
            ("gres.conf", &gres),
            ("cgroup.conf", "ConstrainDevices=yes\n"),
        ],
    );
    let w = c.dir.path();
    let script = write_script(
        w,
        "gpu.sh",
        &format!(
            "#!/bin/sh\necho JOB_GPUS=$SLURM_JOB_GPUS CUDA=$CUDA_VISIBLE_DEVICES\n\
             for d in 0 1; do cat {dir}/gpu$d 2>&1 | sed \"s/^/gpu$d: /\"; done\nsleep 2\n",
            dir = devdir.path().display()
        ),
    );
    let a = c.sbatch(
        w,
        &["--gres=gpu:1", "-o", "a.out", script.to_str().unwrap()],
    );
    let b = c.sbatch(w, &["--gpus=1", "-o", "b.out", script.to_str().unwrap()]);
    c.wait_done(a, Duration::from_secs(60));
    c.wait_done(b, Duration::from_secs(60));
    let (oa, ob) = (read(&w.join("a.out")), read(&w.join("b.out")));
    // Fenced devices are renumbered: each job sees its GPU as 0.
    assert!(oa.contains("JOB_GPUS=0 CUDA=0"), "{oa}");
    assert!(ob.contains("JOB_GPUS=1 CUDA=0"), "{ob}");
    assert!(
        oa.contains("gpu0: cat:") && oa.contains("No such device"),
        "{oa}"
    );
    assert!(
        oa.contains("gpu1: cat:") && oa.contains("Operation not permitted"),
        "{oa}"
    );
    assert!(
        ob.contains("gpu0: cat:")
            && ob
                .lines()
                .any(|l| l.starts_with("gpu0") && l.contains("Operation not permitted")),
        "{ob}"
    );
    // What the controller shows.
    let o = c.cli(w, "scontrol", &["-d", "show", "job", &b.to_string()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("GRES=gpu:tst:1(IDX:1)"), "{text}");
    assert!(
        text.contains("AllocTRES=cpu=1,node=1,billing=1,gres/gpu=1"),
        "{text}"
    );
    let o = c.cli(
        w,
        "sacct",
        &[
            "-j",
            &a.to_string(),
            "-X",
            "-n",
            "-P",
            "-o",
            "alloctres,reqtres",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("billing=1,cpu=1,gres/gpu=1,node=1"), "{text}");
    let o = c.cli(w, "sinfo", &["-h", "-o", "%G"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "gpu:tst:2");
}

#[test]
fn srun_tasks_are_bound_as_task_affinity_binds_them() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster(1, CONFINED, &[], &[]);
    let w = c.dir.path();
    let o = c.cli(
        w,
        "srun",
        &[
            "-n2",
            "--cpu-bind=verbose,cores",
            "-l",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status; echo BIND=$SLURM_CPU_BIND_TYPE",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("0: Cpus_allowed_list:\t0\n"), "{out}");
    assert!(out.contains("1: Cpus_allowed_list:\t1\n"), "{out}");
    assert!(out.contains("BIND=mask_cpu:"), "{out}");
    // slurmstepd's verbose lines, one per task.
    assert!(err.contains("cpu-bind=MASK - n1, task  0  0 ["), "{err}");
    assert!(err.contains("]: mask 0x1 set"), "{err}");
    assert!(err.contains("cpu-bind=MASK - n1, task  1  1 ["), "{err}");
}

/// A step narrows only itself: a one-CPU step first, then a two-task step
/// of the same allocation still has both of the job's CPUs.
#[test]
fn a_step_does_not_narrow_its_jobs_cpus() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster(1, CONFINED, &[], &[("cgroup.conf", "ConstrainCores=yes\n")]);
    let w = c.dir.path();
    let o = c.cli(
        w,
        "salloc",
        &[
            "-n2",
            "sh",
            "-c",
            "srun -n1 grep Cpus_allowed_list /proc/self/status; \
             srun -n2 -l --cpu-bind=none grep Cpus_allowed_list /proc/self/status",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    // The first step: one CPU. The second: both, for each of its tasks.
    assert!(out.contains("Cpus_allowed_list:\t0\n"), "{out}");
    assert!(out.contains("0: Cpus_allowed_list:\t0-1\n"), "{out}");
    assert!(out.contains("1: Cpus_allowed_list:\t0-1\n"), "{out}");
}
