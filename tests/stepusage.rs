//! srun steps' usage from the kernel, on real daemons: a step's cgroup peak
//! memory and CPU times reach sacct when it ends, and `sstat` reads a
//! running step's from its nodes.
//!
//! Needs root and cgroup v1 (as on this machine and in CI); under CI a
//! missing prerequisite fails the test (common::require).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{write_script, Cluster};

fn cgroups_ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let mounted = ["freezer", "memory", "cpuacct"].iter().all(|c| {
        Path::new("/sys/fs/cgroup")
            .join(c)
            .join("cgroup.procs")
            .exists()
    });
    common::require(root && mounted, "root and cgroup v1 at /sys/fs/cgroup")
        && common::require(
            std::process::Command::new("python3")
                .arg("-c")
                .arg("pass")
                .status()
                .is_ok_and(|s| s.success()),
            "python3",
        )
}

fn cluster() -> Cluster {
    Cluster::start_with_files(
        1,
        16,
        30,
        "TaskPlugin=task/cgroup,task/affinity\nProctrackType=proctrack/cgroup\n",
        &[],
        &[],
    )
}

/// `61440K`, `1.50G`, ... in KiB.
fn kib(text: &str) -> u64 {
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len()));
    let n: f64 = num.parse().unwrap_or(0.0);
    let mult = match unit {
        "" => 1.0 / 1024.0,
        "K" => 1.0,
        "M" => 1024.0,
        "G" => 1024.0 * 1024.0,
        _ => 0.0,
    };
    (n * mult) as u64
}

/// `[D-]HH:MM:SS`, `MM:SS.mmm` in seconds.
fn secs(text: &str) -> f64 {
    let t = text.trim();
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (d.parse::<f64>().unwrap_or(0.0), r),
        None => (0.0, t),
    };
    let parts: Vec<f64> = rest.split(':').map(|p| p.parse().unwrap_or(0.0)).collect();
    let hms = parts.iter().fold(0.0, |acc, p| acc * 60.0 + p);
    days * 86_400.0 + hms
}

#[test]
fn a_steps_peak_memory_and_cpu_reach_sacct() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster();
    let w = c.dir.path();
    // ~100 MB touched, then ~1.2 s of CPU.
    let script = write_script(
        w,
        "step.sh",
        "#!/bin/sh\nsrun python3 -c 'import time\nb = b\"x\" * (100 << 20)\nt = time.time()\nwhile time.time() - t < 1.2: pass\n'\n",
    );
    let id = c.sbatch(w, &["-o", "step.out", script.to_str().unwrap()]);
    let j = c.wait_done(id, Duration::from_secs(60));
    assert_eq!(
        j.state.name(),
        "COMPLETED",
        "{}",
        std::fs::read_to_string(w.join("step.out")).unwrap_or_default()
    );
    // The node's report travels separately from srun's end: allow it a moment.
    let want = format!("{id}.0|");
    let deadline = Instant::now() + Duration::from_secs(15);
    let row = loop {
        let o = c.cli(
            w,
            "sacct",
            &[
                "-j",
                &id.to_string(),
                "-n",
                "-P",
                "-o",
                "JobID,MaxRSS,AveRSS,MaxRSSNode,MaxRSSTask,TotalCPU,UserCPU,SystemCPU,State",
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let row = text
            .lines()
            .find(|l| l.starts_with(&want))
            .map(str::to_string);
        match row {
            Some(r) if !r.split('|').nth(1).unwrap_or("").is_empty() => break r,
            _ if Instant::now() > deadline => panic!("no usage for {id}.0 in sacct:\n{text}"),
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    };
    let f: Vec<&str> = row.split('|').collect();
    assert!(kib(f[1]) >= 90 * 1024, "MaxRSS {row}");
    assert!(kib(f[2]) >= 90 * 1024, "AveRSS {row}");
    assert_eq!(f[3], "n1", "{row}");
    assert_eq!(f[4], "0", "{row}");
    assert!(secs(f[5]) >= 0.5, "TotalCPU {row}");
    assert!(secs(f[6]) + secs(f[7]) >= 0.5, "UserCPU+SystemCPU {row}");
    assert_eq!(f[8], "COMPLETED", "{row}");
}

#[test]
fn sstat_reads_a_running_step_and_refuses_a_finished_job() {
    if !cgroups_ready() {
        return;
    }
    let c = cluster();
    let w = c.dir.path();
    let script = write_script(
        w,
        "hold.sh",
        "#!/bin/sh\nsrun sh -c 'python3 -c \"b = b\\\"x\\\" * (60 << 20); import time; time.sleep(6)\"'\n",
    );
    let id = c.sbatch(w, &["-o", "hold.out", script.to_str().unwrap()]);
    let step = format!("{id}.0");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (row, err) = loop {
        let o = c.cli(
            w,
            "sstat",
            &[
                "-j",
                &step,
                "-n",
                "-P",
                "-o",
                "JobID,MaxRSS,NTasks,MaxRSSNode",
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if let Some(r) = text.lines().find(|l| l.starts_with(&format!("{step}|"))) {
            let f: Vec<&str> = r.split('|').collect();
            if kib(f[1]) >= 50 * 1024 {
                break (r.to_string(), err);
            }
        }
        if Instant::now() > deadline {
            panic!("sstat never showed {step} at 50 MB:\n{text}\n{err}");
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let f: Vec<&str> = row.split('|').collect();
    assert_eq!(f[2], "1", "NTasks {row}");
    assert_eq!(f[3], "n1", "{row}");
    assert!(err.is_empty(), "{err}");
    // The default layout: Slurm's header over the row.
    let o = c.cli(w, "sstat", &["-j", &id.to_string()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines();
    let head = lines.next().unwrap_or("");
    let names: Vec<&str> = head.split_whitespace().collect();
    assert_eq!(
        &names[..3],
        &["JobID", "MaxVMSize", "MaxVMSizeNode"],
        "{text}"
    );
    assert!(head.starts_with("JobID         MaxVMSize"), "{text}");
    assert!(lines.nth(1).is_some_and(|l| l.starts_with(&step)), "{text}");

    // `-a`: the batch step (the script's shell) too, first.
    let o = c.cli(
        w,
        "sstat",
        &[
            "-a",
            "-j",
            &id.to_string(),
            "-n",
            "-P",
            "-o",
            "JobID,NTasks,MaxRSSNode",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let ids: Vec<&str> = text.lines().filter_map(|l| l.split('|').next()).collect();
    assert_eq!(ids, vec![format!("{id}.batch"), step.clone()], "{text}");
    assert!(text.starts_with(&format!("{id}.batch|1|n1")), "{text}");

    // `-i`: the step's processes on its node.
    let o = c.cli(w, "sstat", &["-i", "-j", &step, "-n", "-P"]);
    let text = String::from_utf8_lossy(&o.stdout);
    let f: Vec<&str> = text.trim_end().split('|').collect();
    assert_eq!(&f[..2], &[step.as_str(), "n1"], "{text}");
    assert!(
        f.get(2)
            .is_some_and(|p| p.split(',').all(|p| p.parse::<u32>().is_ok())),
        "{text}"
    );

    let j = c.wait_done(id, Duration::from_secs(60));
    assert_eq!(j.state.name(), "COMPLETED");
    let o = c.cli(w, "sstat", &["-j", &id.to_string(), "-n"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("sstat: error: No steps running for job {id}")
    );
    assert!(o.stdout.is_empty());
    let o = c.cli(w, "sstat", &["-j", &step]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("sstat: error: StepId={step} not found running.")
    );
    let o = c.cli(w, "sstat", &["-j", "99999"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "sstat: error: couldn't get steps for job 99999"
    );
}

/// srun's own allocation ends with its step, usually before the nodes'
/// reports arrive: the job's stored accounting record is patched. Over two
/// nodes, MaxRSS is the bigger task's, with its node and step-wide rank.
#[test]
fn an_interactive_steps_usage_over_two_nodes_reaches_sacct() {
    if !cgroups_ready() {
        return;
    }
    let c = Cluster::start_with_files(
        2,
        16,
        30,
        "TaskPlugin=task/cgroup,task/affinity\nProctrackType=proctrack/cgroup\n",
        &[],
        &[],
    );
    let w = c.dir.path();
    // Task 1 (on n2) holds 80 MB, task 0 (on n1) 20 MB.
    let o = c.cli(
        w,
        "srun",
        &[
            "-N",
            "2",
            "-n",
            "2",
            "sh",
            "-c",
            "python3 -c \"import os, time; b = b'x' * ((80 if os.environ['SLURM_PROCID'] == '1' else 20) << 20); time.sleep(0.5)\"",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let deadline = Instant::now() + Duration::from_secs(15);
    let row = loop {
        let o = c.cli(
            w,
            "sacct",
            &[
                "-j",
                "1",
                "-n",
                "-P",
                "-o",
                "JobID,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,NTasks",
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let row = text
            .lines()
            .find(|l| l.starts_with("1.0|"))
            .map(str::to_string);
        match row {
            // Both nodes reported: the average covers both tasks.
            Some(r)
                if kib(r.split('|').nth(1).unwrap_or("")) >= 70 * 1024
                    && kib(r.split('|').nth(4).unwrap_or("")) < 70 * 1024 =>
            {
                break r
            }
            _ if Instant::now() > deadline => panic!("no usage for 1.0 in sacct:\n{text}"),
            _ => std::thread::sleep(Duration::from_millis(300)),
        }
    };
    let f: Vec<&str> = row.split('|').collect();
    assert_eq!((f[2], f[3], f[5]), ("n2", "1", "2"), "{row}");
    assert!(kib(f[4]) >= 40 * 1024, "AveRSS {row}");
}

/// A step its cgroup's OOM killer hit ends OUT_OF_MEMORY, as Slurm's does.
#[test]
fn an_oom_killed_step_ends_out_of_memory() {
    if !cgroups_ready() {
        return;
    }
    let c = Cluster::start_with_files(
        1,
        16,
        30,
        "TaskPlugin=task/cgroup,task/affinity\nProctrackType=proctrack/cgroup\n",
        &[],
        &[(
            "cgroup.conf",
            "ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n",
        )],
    );
    let w = c.dir.path();
    let script = write_script(
        w,
        "hog.sh",
        "#!/bin/sh\nsrun python3 -c 'b = b\"x\" * (100 << 20)'\necho after\n",
    );
    let id = c.sbatch(w, &["--mem=50", "-o", "hog.out", script.to_str().unwrap()]);
    c.wait_done(id, Duration::from_secs(60));
    let want = format!("{id}.0|");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let o = c.cli(
            w,
            "sacct",
            &["-j", &id.to_string(), "-n", "-P", "-o", "JobID,State"],
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if text
            .lines()
            .any(|l| l.starts_with(&want) && l.ends_with("|OUT_OF_MEMORY"))
        {
            break;
        }
        if Instant::now() > deadline {
            panic!(
                "{id}.0 not OUT_OF_MEMORY:\n{text}\n{}",
                std::fs::read_to_string(w.join("hog.out")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}
