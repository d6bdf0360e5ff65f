//! A launch that blocks must not wedge its node's relay: a batch job whose
//! stdin is a FIFO nobody writes blocks its launch in `open` for ever. The
//! node daemon keeps forwarding (steps in its subtree start), the job can
//! be cancelled, and nothing of it is left behind.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use canopy::wire::types::JobState;
use common::Cluster;

/// The threads of node daemon `name` whose name starts with `prefix`.
fn daemon_threads(c: &Cluster, name: &str, prefix: &str) -> Vec<String> {
    let Some(child) = c.noded.get(name) else {
        return Vec::new();
    };
    let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", child.id())) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| s.starts_with(prefix))
        .collect()
}

fn srun_ok(c: &Cluster, w: &Path, args: &[&str]) -> String {
    let o = c.cli(w, "srun", args);
    assert!(
        o.status.success(),
        "srun {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_launch_blocked_on_a_fifo_does_not_wedge_the_relay() {
    // TreeWidth 2 over 8 nodes: n1 relays for n2..n4.
    let c = Cluster::start(8, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let fifo = w.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let blocked = c.sbatch(
        w,
        &["-w", "n1", "-i", &fifo.to_string_lossy(), "--wrap", "cat"],
    );
    // The launch blocks on its supervisor thread; the job runs, as far as
    // the controller goes.
    c.wait_for(Duration::from_secs(30), "the launch on its thread", |c| {
        !daemon_threads(c, "n1", &format!("job{blocked}-")).is_empty()
    });
    c.wait_for(Duration::from_secs(30), "the blocked job RUNNING", |c| {
        c.job(blocked).is_some_and(|j| j.state == JobState::Running)
    });

    // Steps across n1's whole subtree start while that launch blocks, and
    // again and again (the old wedge failed every later one after 10.7 s).
    for _ in 0..2 {
        let t = Instant::now();
        let out = srun_ok(&c, w, &["-N", "4", "-w", "n[1-4]", "hostname"]);
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines.len(), 4, "{out}");
        eprintln!("srun across n[1-4] took {:?}", t.elapsed());
    }
    // The blocked job itself is running: once its launch has been answered
    // (after a grace for slow starts, not as a failure), steps start in it.
    let out = srun_ok(&c, w, &["--jobid", &blocked.to_string(), "hostname"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    // A batch job in the subtree runs to its end too.
    let other = c.sbatch(w, &["-w", "n3", "--wrap", "echo fine"]);
    assert_eq!(
        c.wait_done(other, Duration::from_secs(30)).state,
        JobState::Completed
    );
    assert_eq!(c.job(blocked).unwrap().state, JobState::Running);

    // Cancel the blocked job: it ends CANCELLED, its blocked launch gives
    // up (the supervisor thread ends), and its spool directory goes.
    let o = c.cli(w, "scancel", &[&blocked.to_string()]);
    assert!(o.status.success());
    assert_eq!(
        c.wait_done(blocked, Duration::from_secs(30)).state,
        JobState::Cancelled
    );
    c.wait_for(Duration::from_secs(30), "the launch thread to end", |c| {
        daemon_threads(c, "n1", &format!("job{blocked}-")).is_empty()
    });
    let spool = c
        .dir
        .path()
        .join("spool/n1")
        .join(format!("job{blocked:05}"));
    c.wait_for(Duration::from_secs(10), "the spool directory gone", |_| {
        !spool.exists()
    });
    // Nothing was started for it: the FIFO never got a reader.
    let writer = nix::fcntl::open(
        &fifo,
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_NONBLOCK,
        nix::sys::stat::Mode::empty(),
    );
    assert_eq!(writer.err(), Some(nix::errno::Errno::ENXIO));

    // The node is fully usable again.
    assert_eq!(srun_ok(&c, w, &["-w", "n1", "hostname"]).lines().count(), 1);
    let after = c.sbatch(w, &["-w", "n1", "--wrap", "echo again"]);
    assert_eq!(
        c.wait_done(after, Duration::from_secs(30)).state,
        JobState::Completed
    );
    let out = std::fs::read_to_string(w.join(format!("slurm-{after}.out"))).unwrap();
    assert_eq!(out, "again\n");
}

#[test]
fn a_step_blocked_on_a_fifo_can_be_cancelled() {
    let c = Cluster::start(2, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let job = c.sbatch(w, &["-w", "n1", "--wrap", "sleep 300"]);
    // A pattern (`%j`) is opened by the node, not by srun.
    let fifo = w.join(format!("fifo-{job}"));
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    c.wait_for(Duration::from_secs(30), "the job RUNNING", |c| {
        c.job(job).is_some_and(|j| j.state == JobState::Running)
    });
    // A step of the job whose tasks' input is the FIFO: its start blocks.
    let mut srun = c.spawn_cli(
        w,
        "srun",
        &["--jobid", &job.to_string(), "-i", "fifo-%j", "cat"],
    );
    c.wait_for(Duration::from_secs(30), "the step's launch thread", |c| {
        !daemon_threads(c, "n1", &format!("step{job}.")).is_empty()
    });
    // Meanwhile the node answers other steps.
    assert_eq!(srun_ok(&c, w, &["-w", "n1", "hostname"]).lines().count(), 1);
    let o = c.cli(w, "scancel", &[&job.to_string()]);
    assert!(o.status.success());
    assert_eq!(
        c.wait_done(job, Duration::from_secs(30)).state,
        JobState::Cancelled
    );
    c.wait_for(Duration::from_secs(30), "the step's thread to end", |c| {
        daemon_threads(c, "n1", &format!("step{job}.")).is_empty()
    });
    let t = Instant::now();
    while srun.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "srun never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Open `fifo`'s other end without blocking (`read`: as its reader).
fn open_other_end(fifo: &Path, read: bool) -> std::fs::File {
    use nix::fcntl::OFlag;
    use std::os::fd::FromRawFd;
    let flags = if read {
        OFlag::O_RDONLY | OFlag::O_NONBLOCK
    } else {
        OFlag::O_WRONLY | OFlag::O_NONBLOCK
    };
    let fd = nix::fcntl::open(fifo, flags, nix::sys::stat::Mode::empty()).unwrap();
    // SAFETY: a descriptor `open` just returned, owned by nobody else.
    unsafe { std::fs::File::from_raw_fd(fd) }
}

#[test]
fn a_launch_that_unblocks_late_runs_or_fails_as_its_job() {
    let c = Cluster::start(2, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let input = w.join("input");
    let output = w.join("output");
    for f in [&input, &output] {
        nix::unistd::mkfifo(f, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    // One job waits for a writer of its stdin, the other for a reader of its
    // stdout (and then names an input that does not exist).
    let runs = c.sbatch(
        w,
        &["-w", "n1", "-i", &input.to_string_lossy(), "--wrap", "cat"],
    );
    let fails = c.sbatch(
        w,
        &[
            "-w",
            "n2",
            "-o",
            &output.to_string_lossy(),
            "-i",
            "missing",
            "--wrap",
            "true",
        ],
    );
    // Both launches have been answered (steps start in their jobs) while
    // they still block.
    for id in [runs, fails] {
        let out = srun_ok(&c, w, &["--jobid", &id.to_string(), "hostname"]);
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(c.job(id).unwrap().state, JobState::Running);
    }
    // Unblocked, the first runs its script to the end with what it was fed…
    {
        use std::io::Write;
        let mut writer = open_other_end(&input, false);
        writer.write_all(b"fed late\n").unwrap();
    }
    let j = c.wait_done(runs, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Completed);
    let out = std::fs::read_to_string(w.join(format!("slurm-{runs}.out"))).unwrap();
    assert_eq!(out, "fed late\n");
    // …and the second's launch fails after it was answered: the job ends
    // FAILED with 1:0, as a launch failure slurmstepd reports.
    let _reader = open_other_end(&output, true);
    let j = c.wait_done(fails, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.exit_code, (1, 0));
    let spool = c.dir.path().join("spool/n2").join(format!("job{fails:05}"));
    assert!(!spool.exists(), "{}", spool.display());
}

#[test]
fn a_step_too_slow_to_start_fails_and_leaves_nothing_behind() {
    let c = Cluster::start(2, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let job = c.sbatch(w, &["-w", "n1", "--wrap", "sleep 300"]);
    let fifo = w.join(format!("fifo-{job}"));
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    c.wait_for(Duration::from_secs(30), "the job RUNNING", |c| {
        c.job(job).is_some_and(|j| j.state == JobState::Running)
    });
    // Nobody ever writes the FIFO: the node gives the start up before the
    // launch deadline, and srun says the launch failed.
    let o = c.cli(
        w,
        "srun",
        &["--jobid", &job.to_string(), "-i", "fifo-%j", "cat"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("did not start within"), "{err}");
    // The start was interrupted: its thread is gone, nothing reads the FIFO,
    // and the job's later steps run.
    c.wait_for(Duration::from_secs(30), "the step's thread to end", |c| {
        daemon_threads(c, "n1", &format!("step{job}.")).is_empty()
    });
    let writer = nix::fcntl::open(
        &fifo,
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_NONBLOCK,
        nix::sys::stat::Mode::empty(),
    );
    assert_eq!(writer.err(), Some(nix::errno::Errno::ENXIO));
    let out = srun_ok(&c, w, &["--jobid", &job.to_string(), "hostname"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(c.job(job).unwrap().state, JobState::Running);
}
