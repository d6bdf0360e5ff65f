//! The measurements: how client commands reach each cluster ([`Client`]), timed
//! submissions (one client and many in parallel), squeue latency with a full queue, step
//! launch across K nodes, and the medians reported.
//!
//! Does not: start or stop clusters (`slurm` and `canopy` do) or turn figures into rows
//! (the parent module does).

use super::*;

/// How to run client commands against one cluster. They run in the cluster's own
/// directory, where batch jobs leave their slurm-JOBID.out files.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Client {
    Slurm {
        conf: PathBuf,
        dir: PathBuf,
    },
    Canopy {
        exe: PathBuf,
        conf: PathBuf,
        dir: PathBuf,
    },
}

impl Client {
    /// `tool` (sbatch, squeue, sinfo, srun) aimed at this cluster and no other.
    pub(super) fn command(&self, tool: &str) -> Command {
        let mut cmd = match self {
            Client::Slurm { conf, dir } => {
                let mut c = Command::new(format!("/usr/bin/{tool}"));
                strip_cluster_env(&mut c);
                c.env("SLURM_CONF", conf).current_dir(dir);
                c
            }
            Client::Canopy { exe, conf, dir } => {
                let mut c = Command::new(exe);
                strip_cluster_env(&mut c);
                c.arg(tool).env("CANOPY_CONF", conf).current_dir(dir);
                c
            }
        };
        cmd.stdin(Stdio::null());
        cmd
    }

    /// The K-node launch, the same command on both: `srun -N K true` creates an
    /// allocation, runs `true` as a task on every node, and releases it.
    pub(super) fn launch_command(&self, k: u32) -> Command {
        let n = k.to_string();
        let mut c = self.command("srun");
        c.args(["-N", &n, "true"]);
        c
    }
}

/// A Slurm or canopy variable inherited from the caller (say, a surrounding job) must
/// not steer the commands to another cluster.
pub(super) fn strip_cluster_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("SLURM_") || k.starts_with("CANOPY_") {
            cmd.env_remove(&key);
        }
    }
}

pub(super) struct Submits {
    pub(super) one_client: f64,
    pub(super) parallel: f64,
}

pub(super) fn measure_submits(
    c: &Client,
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
) -> Result<Submits, PeerError> {
    submit_held(c)?; // warm-up: page in the binaries before timing
    let started = Instant::now();
    let deadline = started + LOOP_BUDGET;
    for _ in 0..plan.submits {
        check_deadline(deadline, "sbatch loop (1 client)")?;
        submit_held(c)?;
    }
    let one_client = per_second(plan.submits, started.elapsed());
    progress(&format!(
        "  sbatch, 1 client: {one_client:.0} jobs/s ({} jobs)",
        plan.submits
    ));
    let parallel = per_second(
        plan.parallel_submits,
        submit_parallel(c, plan.parallel_submits)?,
    );
    progress(&format!(
        "  sbatch, {CLIENT_THREADS} clients: {parallel:.0} jobs/s ({} jobs)",
        plan.parallel_submits
    ));
    Ok(Submits {
        one_client,
        parallel,
    })
}

pub(super) fn per_second(count: u32, elapsed: Duration) -> f64 {
    f64::from(count) / elapsed.as_secs_f64()
}

pub(super) fn check_deadline(deadline: Instant, what: &str) -> Result<(), PeerError> {
    if Instant::now() > deadline {
        return Err(PeerError::Timeout {
            what: what.to_string(),
            limit_s: LOOP_BUDGET.as_secs(),
            last: "loop still running".into(),
        });
    }
    Ok(())
}

/// One held no-op batch job; returns once sbatch has printed its job id.
pub(super) fn submit_held(c: &Client) -> Result<u64, PeerError> {
    let mut cmd = c.command("sbatch");
    cmd.args(["--parsable", "--hold", "--wrap", "true"]);
    let out = run_ok(&mut cmd, CLIENT_LIMIT)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    parse_job_id(&stdout).ok_or_else(|| PeerError::Parse {
        command: describe(&cmd),
        output: stdout.into_owned(),
    })
}

/// `sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`.
pub(super) fn parse_job_id(stdout: &str) -> Option<u64> {
    let line = stdout.lines().next()?.trim();
    line.split(';').next()?.parse().ok()
}

/// `total` submissions from CLIENT_THREADS threads, each running one sbatch process at
/// a time; returns the wall time for all of them.
pub(super) fn submit_parallel(c: &Client, total: u32) -> Result<Duration, PeerError> {
    let next = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<PeerError>> = Mutex::new(None);
    let started = Instant::now();
    let deadline = started + LOOP_BUDGET;
    let record = |e: PeerError| {
        failed.store(true, Ordering::SeqCst);
        if let Ok(mut slot) = first_error.lock() {
            slot.get_or_insert(e);
        }
    };
    thread::scope(|s| {
        for _ in 0..CLIENT_THREADS {
            s.spawn(|| {
                while !failed.load(Ordering::SeqCst) && next.fetch_add(1, Ordering::SeqCst) < total
                {
                    let step = check_deadline(deadline, "sbatch loop (parallel clients)")
                        .and_then(|()| submit_held(c));
                    if let Err(e) = step {
                        record(e);
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed();
    match first_error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(elapsed),
    }
}

/// Median latency of `squeue` (default format) with `queued` held jobs in the queue.
pub(super) fn measure_squeue(
    c: &Client,
    queued: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<f64, PeerError> {
    let fill = submit_parallel(c, queued)?;
    progress(&format!(
        "  queued {queued} held jobs in {:.1} s",
        fill.as_secs_f64()
    ));
    // The untimed first call checks that the queue holds what we think it holds.
    let mut cmd = c.command("squeue");
    let out = run_ok(&mut cmd, CLIENT_LIMIT)?;
    check_listed(
        &describe(&cmd),
        u64::from(queued),
        count_job_lines(&String::from_utf8_lossy(&out.stdout)),
    )?;
    let mut samples = Vec::new();
    let deadline = Instant::now() + LOOP_BUDGET;
    for _ in 0..SQUEUE_CALLS {
        check_deadline(deadline, "squeue loop")?;
        samples.push(timed_ok(&mut c.command("squeue"), CLIENT_LIMIT)?);
    }
    let ms = median_of(&mut samples, "squeue")?;
    progress(&format!("  squeue with {queued} jobs: {ms:.1} ms"));
    Ok(ms)
}

/// Job lines in a default-format squeue listing: every non-empty line after the header.
pub(super) fn count_job_lines(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count() as u64
}

pub(super) fn check_listed(what: &str, expected: u64, found: u64) -> Result<(), PeerError> {
    if expected != found {
        return Err(PeerError::Mismatch {
            what: format!("jobs listed by `{what}`"),
            expected,
            found,
        });
    }
    Ok(())
}

/// Median time of `reps` K-node launches, in ms.
pub(super) fn measure_launch(
    c: &Client,
    k: u32,
    reps: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<f64, PeerError> {
    let limit = launch_limit(k);
    let mut samples = Vec::new();
    for i in 1..=reps {
        let ms = timed_ok(&mut c.launch_command(k), limit)?;
        progress(&format!(
            "  launch on {k} nodes, run {i}/{reps}: {ms:.0} ms"
        ));
        samples.push(ms);
    }
    median_of(&mut samples, "launch")
}

pub(super) fn launch_limit(k: u32) -> Duration {
    Duration::from_secs(60 + u64::from(k) / 4)
}

pub(super) fn median_of(samples: &mut [f64], what: &str) -> Result<f64, PeerError> {
    median(samples).ok_or_else(|| PeerError::BadOption(format!("no {what} samples were taken")))
}

pub(super) fn median(samples: &mut [f64]) -> Option<f64> {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n == 0 {
        return None;
    }
    let hi = samples.get(n / 2).copied()?;
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = samples.get(n / 2 - 1).copied()?;
    Some((lo + hi) / 2.0)
}
