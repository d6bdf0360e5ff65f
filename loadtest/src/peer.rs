//! The `peer` scenario: the same user-visible operations against canopy and against a
//! real Slurm 22.05 on this machine, in the same run, side by side as ratios.
//!
//! This module owns everything the comparison needs: finding (or, outside quick mode,
//! installing) Slurm, starting munged when it is not running, writing a private
//! slurm.conf and starting slurmctld plus K slurmd processes in its own directory,
//! driving `canopy cluster up|down` for the canopy side, timing the client commands,
//! and stopping every process it started, even on error. It drives binaries only; it
//! does not link canopy, does not touch /etc/slurm, and does not print: callers get
//! rows and progress lines and decide how to show them.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{chown, OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, User};

/// What to measure and where.
#[derive(Debug, Clone)]
pub struct PeerOpts {
    /// Directory holding `canopy`, `canopy-ctld` and `canopy-noded`.
    pub canopy_bin: PathBuf,
    /// Scratch space; each run works in its own subdirectory and removes what succeeded.
    pub work_dir: PathBuf,
    /// Node counts for the K-node launch test.
    pub ks: Vec<u32>,
    /// TreeWidth for both systems.
    pub tree_width: u32,
    /// sbatch submissions per measurement (the 8-client test uses ten times as many).
    pub submits: u32,
    /// Held jobs in the queue while `squeue` is timed.
    pub queued: u32,
    /// CI smoke mode: small fixed counts, and no attempt to install Slurm.
    pub quick: bool,
}

/// One side-by-side figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeerRow {
    pub metric: String,
    /// "jobs_per_s" or "ms".
    pub unit: String,
    /// K for launch rows.
    pub nodes: Option<u32>,
    pub canopy: f64,
    /// None when Slurm could not be measured; `note` says why.
    pub slurm: Option<f64>,
    /// Canopy's advantage: canopy/slurm for rates, slurm/canopy for times.
    pub ratio: Option<f64>,
    pub note: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("real Slurm is not available: {0}")]
    SlurmUnavailable(String),
    #[error("bad peer option: {0}")]
    BadOption(String),
    #[error("{} not found (the canopy bin directory must hold canopy, canopy-ctld and canopy-noded)", path.display())]
    MissingBinary { path: PathBuf },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{what}: gave up after {limit_s} s ({last})")]
    Timeout {
        what: String,
        limit_s: u64,
        last: String,
    },
    #[error("{what} exited early ({status}); log tail: {log}")]
    Died {
        what: String,
        status: String,
        log: String,
    },
    #[error("cannot read the output of `{command}`: {output:?}")]
    Parse { command: String, output: String },
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch {
        what: String,
        expected: u64,
        found: u64,
    },
    #[error("no free block of {count} TCP ports between {lo} and {hi}")]
    NoPorts { count: u32, lo: u16, hi: u16 },
}

/// Parallel client threads in the multi-client submission test (like `xargs -P 8`).
const CLIENT_THREADS: u32 = 8;
/// The multi-client test submits this many times `submits`.
const PARALLEL_FACTOR: u32 = 10;
/// Timed `squeue` calls; the median is reported.
const SQUEUE_CALLS: u32 = 10;
/// Bound on one sbatch or squeue call.
const CLIENT_LIMIT: Duration = Duration::from_secs(60);
/// Bound on one whole submission or query loop.
const LOOP_BUDGET: Duration = Duration::from_secs(900);
/// How long stopped daemons (and finishing job steps) get before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Slurm ports are taken below the kernel's usual ephemeral range so that client
/// connections cannot occupy them between the check and the daemons' bind.
const PORT_LO: u16 = 24000;
const PORT_HI: u16 = 32700;
/// Lines of a daemon log quoted in errors.
const LOG_TAIL_LINES: usize = 6;

const SLURMCTLD: &str = "/usr/sbin/slurmctld";
const SLURMD: &str = "/usr/sbin/slurmd";
const MUNGED: &str = "/usr/sbin/munged";
const MUNGE_KEY: &str = "/etc/munge/munge.key";
const MUNGE_RUN_DIR: &str = "/run/munge";
const MUNGE_SOCKET: &str = "/run/munge/munge.socket.2";
/// Everything the peer needs from the Debian packages.
const SLURM_FILES: &[&str] = &[
    SLURMCTLD,
    SLURMD,
    "/usr/sbin/slurmstepd",
    "/usr/bin/sbatch",
    "/usr/bin/srun",
    "/usr/bin/squeue",
    "/usr/bin/sinfo",
    MUNGED,
];
const SLURM_PACKAGES: &[&str] = &["slurmctld", "slurmd", "slurm-client", "munge"];

/// Run the whole comparison: submissions, squeue latency, then one launch test per K.
///
/// Canopy failures are errors; Slurm failures after Slurm was found usable become rows
/// with `slurm: None` and the reason in `note`, so canopy's figures survive them.
pub fn run(opts: &PeerOpts, progress: &mut dyn FnMut(&str)) -> Result<Vec<PeerRow>, PeerError> {
    let plan = Plan::from_opts(opts)?;
    let canopy_exe = canopy_binaries(&opts.canopy_bin)?;
    ensure_slurm_installed(SLURM_FILES, opts.quick, progress)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(PeerError::SlurmUnavailable(
            "slurmd must run as root and this process is not root".into(),
        ));
    }
    ensure_munged(progress)?;
    raise_fd_limit(progress);
    let root = opts.work_dir.join(format!("peer-{}", std::process::id()));
    create_dir(&root)?;
    let ctx = Ctx {
        root: root.clone(),
        canopy_exe,
        hostname: hostname(),
        tree_width: plan.tree_width,
    };
    let rows = measure_all(&ctx, &plan, progress)?;
    // Only empty when every cluster finished cleanly; otherwise logs stay for a look.
    let _ = fs::remove_dir(&root);
    Ok(rows)
}

/// The counts one run uses: the options, or small fixed ones in quick mode.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    ks: Vec<u32>,
    tree_width: u32,
    submits: u32,
    parallel_submits: u32,
    queued: u32,
}

impl Plan {
    fn from_opts(o: &PeerOpts) -> Result<Plan, PeerError> {
        if o.tree_width < 2 {
            return Err(PeerError::BadOption(format!(
                "tree_width must be at least 2, got {}",
                o.tree_width
            )));
        }
        if o.submits == 0 || o.queued == 0 {
            return Err(PeerError::BadOption(
                "submits and queued must be at least 1".into(),
            ));
        }
        if o.ks.is_empty() || o.ks.contains(&0) {
            return Err(PeerError::BadOption(format!(
                "ks must list node counts of at least 1, got {:?}",
                o.ks
            )));
        }
        if o.quick {
            return Ok(Plan {
                ks: vec![4],
                tree_width: o.tree_width,
                submits: 20,
                parallel_submits: 20 * PARALLEL_FACTOR,
                queued: 100,
            });
        }
        Ok(Plan {
            ks: o.ks.clone(),
            tree_width: o.tree_width,
            submits: o.submits,
            parallel_submits: o.submits.saturating_mul(PARALLEL_FACTOR),
            queued: o.queued,
        })
    }
}

/// Timed launches per K: three, or two where one launch takes seconds.
fn launch_reps(k: u32) -> u32 {
    if k >= 512 {
        2
    } else {
        3
    }
}

/// What every cluster start needs.
struct Ctx {
    root: PathBuf,
    canopy_exe: PathBuf,
    hostname: String,
    tree_width: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum System {
    Slurm,
    Canopy,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Slurm => "slurm",
            System::Canopy => "canopy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    JobsPerS,
    Ms,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::JobsPerS => "jobs_per_s",
            Unit::Ms => "ms",
        }
    }
}

/// Canopy's advantage over Slurm: above 1 means canopy is ahead.
fn advantage(unit: Unit, canopy: f64, slurm: f64) -> Option<f64> {
    let r = match unit {
        Unit::JobsPerS => canopy / slurm,
        Unit::Ms => slurm / canopy,
    };
    (r.is_finite() && r > 0.0).then_some(r)
}

fn make_row(
    metric: String,
    unit: Unit,
    nodes: Option<u32>,
    canopy: f64,
    slurm: &Result<f64, String>,
    note: String,
) -> PeerRow {
    let (slurm, note) = match slurm {
        Ok(v) => (Some(*v), note),
        Err(why) => (None, format!("{note}; slurm not measured: {why}")),
    };
    PeerRow {
        metric,
        unit: unit.as_str().to_string(),
        nodes,
        canopy,
        slurm,
        ratio: slurm.and_then(|s| advantage(unit, canopy, s)),
        note,
    }
}

fn measure_all(
    ctx: &Ctx,
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PeerRow>, PeerError> {
    let mut rows = Vec::new();
    let mut slurm_failed = None;

    let slurm = slurm_phase(&mut slurm_failed, progress, |p| {
        with_cluster(ctx, System::Slurm, 1, "submit", p, |c, p| {
            measure_submits(c, plan, p)
        })
    });
    let canopy = with_cluster(ctx, System::Canopy, 1, "submit", progress, |c, p| {
        measure_submits(c, plan, p)
    })?;
    rows.push(make_row(
        "sbatch_1_client".into(),
        Unit::JobsPerS,
        None,
        canopy.one_client,
        &slurm.as_ref().map(|s| s.one_client).map_err(Clone::clone),
        format!(
            "{} x `sbatch --parsable --hold --wrap true`, one process at a time",
            plan.submits
        ),
    ));
    rows.push(make_row(
        "sbatch_8_clients".into(),
        Unit::JobsPerS,
        None,
        canopy.parallel,
        &slurm.as_ref().map(|s| s.parallel).map_err(Clone::clone),
        format!(
            "{} x `sbatch --parsable --hold --wrap true` from {CLIENT_THREADS} client threads",
            plan.parallel_submits
        ),
    ));

    let slurm = slurm_phase(&mut slurm_failed, progress, |p| {
        with_cluster(ctx, System::Slurm, 1, "squeue", p, |c, p| {
            measure_squeue(c, plan.queued, p)
        })
    });
    let canopy = with_cluster(ctx, System::Canopy, 1, "squeue", progress, |c, p| {
        measure_squeue(c, plan.queued, p)
    })?;
    rows.push(make_row(
        format!("squeue_{}_queued", plan.queued),
        Unit::Ms,
        None,
        canopy,
        &slurm,
        format!(
            "`squeue` default format, median of {SQUEUE_CALLS} calls, {} held jobs",
            plan.queued
        ),
    ));

    for &k in &plan.ks {
        let reps = launch_reps(k);
        let slurm = slurm_phase(&mut slurm_failed, progress, |p| {
            with_cluster(ctx, System::Slurm, k, "launch", p, |c, p| {
                measure_launch(c, k, reps, p)
            })
        });
        let canopy = with_cluster(ctx, System::Canopy, k, "launch", progress, |c, p| {
            measure_launch(c, k, reps, p)
        })?;
        rows.push(make_row(
            format!("launch_{k}_nodes"),
            Unit::Ms,
            Some(k),
            canopy,
            &slurm,
            format!(
                "`srun -N {k} true` on both: allocation, a task on every node, release; \
                 TreeWidth {}, median of {reps}",
                ctx.tree_width
            ),
        ));
    }
    Ok(rows)
}

/// Slurm's figures are the reference, not the subject: a failure becomes a note. After
/// one failure the remaining Slurm phases are skipped, since a Slurm that would not
/// start once would cost every later phase its full timeout.
fn slurm_phase<T>(
    failed: &mut Option<String>,
    progress: &mut dyn FnMut(&str),
    phase: impl FnOnce(&mut dyn FnMut(&str)) -> Result<T, PeerError>,
) -> Result<T, String> {
    if let Some(why) = failed {
        return Err(format!("skipped after an earlier failure ({why})"));
    }
    phase(progress).map_err(|e| {
        progress(&format!("slurm: not measured: {e}"));
        let why = e.to_string();
        *failed = Some(why.clone());
        why
    })
}

/// A started cluster of either kind.
trait Running {
    fn client(&self) -> Client;
    /// Stop every process and wait until they are gone; remove the directory if asked.
    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError>;
}

/// Start a cluster, run `measure` against it, and stop it whatever happened, so that
/// the two systems never compete for the machine's cores.
fn with_cluster<T>(
    ctx: &Ctx,
    system: System,
    nodes: u32,
    label: &str,
    progress: &mut dyn FnMut(&str),
    measure: impl FnOnce(&Client, &mut dyn FnMut(&str)) -> Result<T, PeerError>,
) -> Result<T, PeerError> {
    let name = system.name();
    progress(&format!(
        "{name}: starting {nodes} node daemon(s) for {label}"
    ));
    let started = Instant::now();
    let dir = ctx.root.join(format!("{name}-{label}-k{nodes}"));
    let mut cluster: Box<dyn Running> = match system {
        System::Slurm => Box::new(SlurmCluster::start(ctx, dir, nodes)?),
        System::Canopy => Box::new(CanopyCluster::start(ctx, dir, nodes)?),
    };
    progress(&format!(
        "{name}: {nodes} node(s) idle after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let result = measure(&cluster.client(), progress);
    let stopping = Instant::now();
    let stopped = cluster.stop(result.is_ok());
    progress(&format!(
        "{name}: stopped in {:.1} s",
        stopping.elapsed().as_secs_f64()
    ));
    let value = result?;
    stopped?;
    Ok(value)
}

/// How to run client commands against one cluster. They run in the cluster's own
/// directory, where batch jobs leave their slurm-JOBID.out files.
#[derive(Debug, Clone, PartialEq)]
enum Client {
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
    fn command(&self, tool: &str) -> Command {
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
    fn launch_command(&self, k: u32) -> Command {
        let n = k.to_string();
        let mut c = self.command("srun");
        c.args(["-N", &n, "true"]);
        c
    }
}

/// A Slurm or canopy variable inherited from the caller (say, a surrounding job) must
/// not steer the commands to another cluster.
fn strip_cluster_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("SLURM_") || k.starts_with("CANOPY_") {
            cmd.env_remove(&key);
        }
    }
}

struct Submits {
    one_client: f64,
    parallel: f64,
}

fn measure_submits(
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

fn per_second(count: u32, elapsed: Duration) -> f64 {
    f64::from(count) / elapsed.as_secs_f64()
}

fn check_deadline(deadline: Instant, what: &str) -> Result<(), PeerError> {
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
fn submit_held(c: &Client) -> Result<u64, PeerError> {
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
fn parse_job_id(stdout: &str) -> Option<u64> {
    let line = stdout.lines().next()?.trim();
    line.split(';').next()?.parse().ok()
}

/// `total` submissions from CLIENT_THREADS threads, each running one sbatch process at
/// a time; returns the wall time for all of them.
fn submit_parallel(c: &Client, total: u32) -> Result<Duration, PeerError> {
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
fn measure_squeue(
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
fn count_job_lines(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count() as u64
}

fn check_listed(what: &str, expected: u64, found: u64) -> Result<(), PeerError> {
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
fn measure_launch(
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

fn launch_limit(k: u32) -> Duration {
    Duration::from_secs(60 + u64::from(k) / 4)
}

fn median_of(samples: &mut [f64], what: &str) -> Result<f64, PeerError> {
    median(samples).ok_or_else(|| PeerError::BadOption(format!("no {what} samples were taken")))
}

fn median(samples: &mut [f64]) -> Option<f64> {
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

/// Run `cmd` to completion with its output captured, killing it at `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, PeerError> {
    let what = describe(cmd);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PeerError::Spawn {
            command: what.clone(),
            source,
        })?;
    let pid = Pid::from_raw(child.id() as i32);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let timed_out = AtomicBool::new(false);
    let flag = &timed_out;
    let output = thread::scope(|s| {
        s.spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = done_rx.recv_timeout(limit) {
                flag.store(true, Ordering::SeqCst);
                // The child is only reaped inside wait_with_output, just before the
                // watchdog hears back; a kill landing in that window would need the
                // pid to be reused within microseconds.
                let _ = kill(pid, Signal::SIGKILL);
            }
        });
        let out = child.wait_with_output();
        let _ = done_tx.send(());
        out
    })
    .map_err(|source| PeerError::Spawn {
        command: what.clone(),
        source,
    })?;
    if timed_out.load(Ordering::SeqCst) {
        return Err(PeerError::Timeout {
            what: format!("`{what}`"),
            limit_s: limit.as_secs(),
            last: tail_text(&String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(output)
}

/// run_bounded, and a non-zero exit is an error.
fn run_ok(cmd: &mut Command, limit: Duration) -> Result<Output, PeerError> {
    let out = run_bounded(cmd, limit)?;
    if !out.status.success() {
        return Err(PeerError::Command {
            command: describe(cmd),
            status: out.status.to_string(),
            stderr: tail_text(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(out)
}

/// Wall time of one successful run, in ms.
fn timed_ok(cmd: &mut Command, limit: Duration) -> Result<f64, PeerError> {
    let started = Instant::now();
    run_ok(cmd, limit)?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The last few lines of some output, on one line, for error messages.
fn tail_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines.get(from..).unwrap_or_default().join(" | ")
}

fn log_tail(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(text) => format!("{}: {}", path.display(), tail_text(&text)),
        Err(e) => format!("{}: unreadable ({e})", path.display()),
    }
}

fn create_dir(path: &Path) -> Result<(), PeerError> {
    fs::create_dir_all(path).map_err(|source| PeerError::Io {
        action: "create directory",
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, text: &str) -> Result<(), PeerError> {
    fs::write(path, text).map_err(|source| PeerError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

fn canopy_binaries(dir: &Path) -> Result<PathBuf, PeerError> {
    for name in ["canopy", "canopy-ctld", "canopy-noded"] {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(PeerError::MissingBinary { path });
        }
    }
    Ok(dir.join("canopy"))
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Hundreds of daemons and their connections need more descriptors than a login
/// shell's soft limit; children inherit the raised limit.
fn raise_fd_limit(progress: &mut dyn FnMut(&str)) {
    let raised = getrlimit(Resource::RLIMIT_NOFILE)
        .and_then(|(_, hard)| setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map(|()| hard));
    match raised {
        Ok(n) => progress(&format!("open-file limit set to its hard limit, {n}")),
        Err(e) => progress(&format!("open-file limit left as is: {e}")),
    }
}

// ---------------------------------------------------------------- Slurm setup

fn missing_files<'a>(files: &[&'a str]) -> Vec<&'a str> {
    files
        .iter()
        .copied()
        .filter(|f| !Path::new(f).exists())
        .collect()
}

/// Slurm is there, or installed now with apt-get; quick mode never installs, so a CI
/// run without Slurm ends at once.
fn ensure_slurm_installed(
    files: &[&str],
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(), PeerError> {
    let missing = missing_files(files);
    if missing.is_empty() {
        return Ok(());
    }
    if quick {
        return Err(PeerError::SlurmUnavailable(format!(
            "missing {} (quick mode does not install packages)",
            missing.join(", ")
        )));
    }
    progress(&format!(
        "slurm: missing {}; trying apt-get install",
        missing.join(", ")
    ));
    let apt = |args: &[&str], limit_s: u64| {
        let mut cmd = Command::new("apt-get");
        cmd.args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        run_ok(&mut cmd, Duration::from_secs(limit_s))
    };
    let mut install = vec!["install", "-y", "-q"];
    install.extend_from_slice(SLURM_PACKAGES);
    apt(&["update", "-q"], 180)
        .and_then(|_| apt(&install, 300))
        .map_err(|e| PeerError::SlurmUnavailable(format!("apt-get failed: {e}")))?;
    let missing = missing_files(files);
    if !missing.is_empty() {
        return Err(PeerError::SlurmUnavailable(format!(
            "still missing after apt-get install: {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// munged is system-wide: start it (as the munge user, with a key) only if it is not
/// already running, and leave it running afterwards for whoever else uses it.
fn ensure_munged(progress: &mut dyn FnMut(&str)) -> Result<(), PeerError> {
    if !pids_named("munged").is_empty() && Path::new(MUNGE_SOCKET).exists() {
        return Ok(());
    }
    let unavailable = |why: String| PeerError::SlurmUnavailable(why);
    let user = User::from_name("munge")
        .map_err(|e| unavailable(format!("cannot look up the munge user: {e}")))?
        .ok_or_else(|| unavailable("there is no munge user".into()))?;
    let owned_dir = |path: &str, mode: u32| -> Result<(), PeerError> {
        let p = Path::new(path);
        create_dir(p)?;
        chown(p, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| unavailable(format!("cannot chown {path}: {e}")))?;
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(|source| PeerError::Io {
            action: "set permissions on",
            path: p.to_path_buf(),
            source,
        })
    };
    if !Path::new(MUNGE_KEY).exists() {
        progress("munge: creating /etc/munge/munge.key");
        owned_dir("/etc/munge", 0o700)?;
        create_munge_key(Path::new(MUNGE_KEY))?;
        chown(MUNGE_KEY, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| unavailable(format!("cannot chown {MUNGE_KEY}: {e}")))?;
    }
    owned_dir(MUNGE_RUN_DIR, 0o755)?;
    progress("munge: starting munged");
    let mut cmd = Command::new(MUNGED);
    cmd.uid(user.uid.as_raw())
        .gid(user.gid.as_raw())
        .stdin(Stdio::null());
    run_ok(&mut cmd, Duration::from_secs(15))
        .map_err(|e| unavailable(format!("munged did not start: {e}")))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(MUNGE_SOCKET).exists() {
        if Instant::now() > deadline {
            return Err(unavailable(format!(
                "munged started but {MUNGE_SOCKET} did not appear within 10 s"
            )));
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// 1 KiB of kernel randomness, readable by its owner only (munged refuses anything
/// looser).
fn create_munge_key(path: &Path) -> Result<(), PeerError> {
    let mut key = vec![0u8; 1024];
    let urandom = Path::new("/dev/urandom");
    fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|source| PeerError::Io {
            action: "read",
            path: urandom.to_path_buf(),
            source,
        })?;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &key))
        .map_err(|source| PeerError::Io {
            action: "create",
            path: path.to_path_buf(),
            source,
        })
}

/// The state letter of a /proc/PID/stat line (the field after the command name,
/// which may itself hold spaces and parentheses).
fn proc_state(stat: &str) -> Option<char> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.trim_start().chars().next()
}

/// Whether `pid` is a live (not zombie) process; `needle`, when given, must appear in
/// its command line, so that a reused pid is never mistaken for ours.
fn alive(pid: i32, needle: Option<&str>) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    if matches!(proc_state(&stat), Some('Z') | Some('X') | None) {
        return false;
    }
    match needle {
        None => true,
        Some(n) => fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(n))
            .unwrap_or(false),
    }
}

fn pids_named(comm: &str) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
                && alive(*pid, None)
        })
        .collect()
}

/// What one private Slurm's slurm.conf says.
struct SlurmSpec<'a> {
    dir: &'a Path,
    hostname: &'a str,
    ctld_port: u16,
    node_base_port: u16,
    nodes: u32,
    tree_width: u32,
}

/// `n1`, or `n[1-K]` for several nodes.
fn node_list(k: u32) -> String {
    if k == 1 {
        "n1".to_string()
    } else {
        format!("n[1-{k}]")
    }
}

/// `P`, or `[P-Q]` for several consecutive ports.
fn port_list(base: u16, k: u32) -> String {
    if k == 1 {
        base.to_string()
    } else {
        format!("[{base}-{}]", u32::from(base) + k - 1)
    }
}

/// A self-contained slurm.conf: every path lives under the spec's directory, the
/// controller listens on its own port, and the K nodes are K slurmd processes on this
/// host (one port each), as in Debian's packages with no accounting.
fn slurm_conf(spec: &SlurmSpec) -> String {
    let d = spec.dir.display();
    let nodes = node_list(spec.nodes);
    let mut s = String::new();
    let _ = writeln!(s, "# Written by canopy-loadtest (peer scenario).");
    let _ = writeln!(s, "ClusterName=peer");
    let _ = writeln!(s, "SlurmctldHost={}(127.0.0.1)", spec.hostname);
    let _ = writeln!(s, "SlurmctldPort={}", spec.ctld_port);
    // Root owns everything in the private directory, so no chown dance is needed.
    let _ = writeln!(s, "SlurmUser=root");
    let _ = writeln!(s, "AuthType=auth/munge");
    let _ = writeln!(s, "StateSaveLocation={d}/state");
    let _ = writeln!(s, "SlurmdSpoolDir={d}/spool/%n");
    let _ = writeln!(s, "SlurmctldLogFile={d}/log/slurmctld.log");
    let _ = writeln!(s, "SlurmdLogFile={d}/log/slurmd-%n.log");
    let _ = writeln!(s, "SlurmctldPidFile={d}/run/slurmctld.pid");
    let _ = writeln!(s, "SlurmdPidFile={d}/run/slurmd-%n.pid");
    let _ = writeln!(s, "SchedulerType=sched/backfill");
    let _ = writeln!(s, "SelectType=select/cons_tres");
    let _ = writeln!(s, "SelectTypeParameters=CR_Core_Memory");
    let _ = writeln!(s, "ProctrackType=proctrack/linuxproc");
    let _ = writeln!(s, "TaskPlugin=task/none");
    let _ = writeln!(s, "JobAcctGatherType=jobacct_gather/none");
    let _ = writeln!(s, "AccountingStorageType=accounting_storage/none");
    let _ = writeln!(s, "MpiDefault=none");
    let _ = writeln!(s, "MaxJobCount=200000");
    let _ = writeln!(s, "SlurmdTimeout=300");
    let _ = writeln!(s, "ReturnToService=2");
    let _ = writeln!(s, "TreeWidth={}", spec.tree_width);
    let _ = writeln!(
        s,
        "NodeName={nodes} NodeHostname={} NodeAddr=127.0.0.1 Port={} CPUs=2 RealMemory=1000 State=UNKNOWN",
        spec.hostname,
        port_list(spec.node_base_port, spec.nodes)
    );
    let _ = writeln!(
        s,
        "PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
    );
    s
}

/// The first run of `count` consecutive ports in [lo, hi] that `is_free` accepts.
fn find_port_block(count: u32, lo: u16, hi: u16, is_free: &dyn Fn(u16) -> bool) -> Option<u16> {
    let mut base = u32::from(lo);
    while base + count - 1 <= u32::from(hi) {
        match (base..base + count).find(|&p| !is_free(p as u16)) {
            None => return Some(base as u16),
            Some(busy) => base = busy + 1,
        }
    }
    None
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// Seconds to wait for K slurmd (or canopy-noded) to register: hundreds of daemons
/// starting at once on two cores take a while.
fn idle_wait(k: u32) -> Duration {
    Duration::from_secs(120 + u64::from(k) / 2)
}

/// A private slurmctld and K slurmd, all children of this process.
struct SlurmCluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<(String, Child)>,
}

impl SlurmCluster {
    fn start(ctx: &Ctx, dir: PathBuf, nodes: u32) -> Result<SlurmCluster, PeerError> {
        let base = find_port_block(nodes + 1, PORT_LO, PORT_HI, &port_is_free).ok_or(
            PeerError::NoPorts {
                count: nodes + 1,
                lo: PORT_LO,
                hi: PORT_HI,
            },
        )?;
        for sub in ["state", "log", "run", "spool"] {
            create_dir(&dir.join(sub))?;
        }
        for i in 1..=nodes {
            create_dir(&dir.join("spool").join(format!("n{i}")))?;
        }
        let conf = dir.join("slurm.conf");
        write_file(
            &conf,
            &slurm_conf(&SlurmSpec {
                dir: &dir,
                hostname: &ctx.hostname,
                ctld_port: base,
                node_base_port: base + 1,
                nodes,
                tree_width: ctx.tree_width,
            }),
        )?;
        let mut cluster = SlurmCluster {
            dir,
            conf,
            daemons: Vec::new(),
        };
        let conf_s = cluster.conf.display().to_string();
        cluster.spawn("slurmctld", SLURMCTLD, &["-D", "-f", &conf_s])?;
        // slurmd backs off between registration attempts; starting them only once the
        // controller answers keeps start-up times comparable across K.
        cluster.wait_nodes(None, Duration::from_secs(60))?;
        for i in 1..=nodes {
            let name = format!("n{i}");
            cluster.spawn(&name, SLURMD, &["-D", "-f", &conf_s, "-N", &name])?;
        }
        cluster.wait_nodes(Some(nodes), idle_wait(nodes))?;
        Ok(cluster)
    }

    fn spawn(&mut self, name: &str, exe: &str, args: &[&str]) -> Result<(), PeerError> {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().map_err(|source| PeerError::Spawn {
            command: describe(&cmd),
            source,
        })?;
        self.daemons.push((name.to_string(), child));
        Ok(())
    }

    fn log_of(&self, name: &str) -> PathBuf {
        let file = if name == "slurmctld" {
            "slurmctld.log".to_string()
        } else {
            format!("slurmd-{name}.log")
        };
        self.dir.join("log").join(file)
    }

    /// Wait until the controller answers (`want` None) or `want` nodes are idle.
    fn wait_nodes(&mut self, want: Option<u32>, limit: Duration) -> Result<(), PeerError> {
        let deadline = Instant::now() + limit;
        let client = self.client();
        loop {
            self.check_daemons()?;
            let mut cmd = client.command("sinfo");
            cmd.args(["-h", "-o", "%D %t"]);
            let last = match run_ok(&mut cmd, Duration::from_secs(30)) {
                Ok(out) => {
                    let idle = idle_nodes(&String::from_utf8_lossy(&out.stdout));
                    match want {
                        None => return Ok(()),
                        Some(n) if idle == n => return Ok(()),
                        Some(n) => format!("{idle} of {n} nodes idle"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(PeerError::Timeout {
                    what: format!("slurm in {}", self.dir.display()),
                    limit_s: limit.as_secs(),
                    last: format!("{last}; {}", log_tail(&self.log_of("slurmctld"))),
                });
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// A daemon that exited during start-up (a port taken, a bad config) fails fast.
    fn check_daemons(&mut self) -> Result<(), PeerError> {
        for i in 0..self.daemons.len() {
            let Some((name, child)) = self.daemons.get_mut(i) else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                let name = name.clone();
                self.daemons.remove(i);
                return Err(PeerError::Died {
                    log: log_tail(&self.log_of(&name)),
                    what: name,
                    status: status.to_string(),
                });
            }
        }
        Ok(())
    }
}

impl Running for SlurmCluster {
    fn client(&self) -> Client {
        Client::Slurm {
            conf: self.conf.clone(),
            dir: self.dir.clone(),
        }
    }

    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError> {
        if !self.daemons.is_empty() {
            // Steps that have just ended still report to their slurmd over the tree;
            // give them a moment before the daemons go.
            wait_until(STOP_GRACE, || our_stepds(&self.conf).is_empty());
        }
        let mut left: Vec<Child> = self.daemons.drain(..).map(|(_, c)| c).collect();
        for child in &left {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while !left.is_empty() && Instant::now() < deadline {
            left.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
            thread::sleep(Duration::from_millis(50));
        }
        for child in &mut left {
            // SIGKILL cannot be ignored, so the wait below ends.
            let _ = child.kill();
            let _ = child.wait();
        }
        // A step whose slurmd is gone retries for minutes; it was started for this
        // run's jobs, so it goes too.
        for pid in our_stepds(&self.conf) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        if !wait_until(STOP_GRACE, || our_stepds(&self.conf).is_empty()) {
            return Err(PeerError::Timeout {
                what: format!("stopping the slurmstepd of {}", self.conf.display()),
                limit_s: STOP_GRACE.as_secs(),
                last: format!("{} still running", our_stepds(&self.conf).len()),
            });
        }
        if remove_dir {
            fs::remove_dir_all(&self.dir).map_err(|source| PeerError::Io {
                action: "remove",
                path: self.dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}

/// Live slurmstepd processes of the cluster configured by `conf` (slurmd puts
/// SLURM_CONF into their environment).
fn our_stepds(conf: &Path) -> Vec<i32> {
    let mut entry = b"SLURM_CONF=".to_vec();
    entry.extend_from_slice(conf.as_os_str().as_bytes());
    pids_named("slurmstepd")
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| environ_has(&env, &entry))
        })
        .collect()
}

/// Whether a NUL-separated environment block holds exactly `entry` (NAME=value).
fn environ_has(environ: &[u8], entry: &[u8]) -> bool {
    environ.split(|&b| b == 0).any(|v| v == entry)
}

/// Poll `done` until it holds or `limit` passes; whether it held.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Idle nodes in `sinfo -h -o '%D %t'` output; `idle*` (not responding) does not count.
fn idle_nodes(stdout: &str) -> u32 {
    stdout
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let count = f.next()?.parse::<u32>().ok()?;
            (f.next()? == "idle").then_some(count)
        })
        .sum()
}

// --------------------------------------------------------------- canopy setup

/// A canopy cluster started by `canopy cluster up` in its own directory.
struct CanopyCluster {
    exe: PathBuf,
    dir: PathBuf,
    conf: PathBuf,
    pids: Vec<i32>,
    stopped: bool,
}

impl CanopyCluster {
    fn start(ctx: &Ctx, dir: PathBuf, nodes: u32) -> Result<CanopyCluster, PeerError> {
        create_dir(&dir)?;
        // The guard exists before `up` runs: if `up` fails half way, Drop still stops
        // whatever it had started.
        let mut cluster = CanopyCluster {
            exe: ctx.canopy_exe.clone(),
            dir,
            conf: PathBuf::new(),
            pids: Vec::new(),
            stopped: false,
        };
        let wait = idle_wait(nodes);
        let mut cmd = Command::new(&cluster.exe);
        strip_cluster_env(&mut cmd);
        cmd.arg("cluster")
            .arg("up")
            .args(["--nodes", &nodes.to_string()])
            .args(["--tree-width", &ctx.tree_width.to_string()])
            .arg("--dir")
            .arg(&cluster.dir)
            .args(["--slurmd-timeout", "300", "--cpus", "2", "--mem", "1000"])
            .args(["--wait", &wait.as_secs().to_string()])
            .stdin(Stdio::null());
        let out = run_ok(&mut cmd, wait + Duration::from_secs(60));
        cluster.pids = recorded_pids(&cluster.dir);
        let out = out?;
        cluster.conf = canopy_conf_from(&describe(&cmd), &String::from_utf8_lossy(&out.stdout))?;
        Ok(cluster)
    }
}

impl Running for CanopyCluster {
    fn client(&self) -> Client {
        Client::Canopy {
            exe: self.exe.clone(),
            conf: self.conf.clone(),
            dir: self.dir.clone(),
        }
    }

    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError> {
        if self.stopped {
            return Ok(());
        }
        // `down` deletes the pid files, so collect them first.
        let mut pids = recorded_pids(&self.dir);
        pids.extend(self.pids.iter().copied());
        pids.sort_unstable();
        pids.dedup();
        let mut cmd = Command::new(&self.exe);
        cmd.arg("cluster")
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null());
        let down = run_ok(&mut cmd, Duration::from_secs(60));
        if !wait_gone(&pids, STOP_GRACE) {
            for &pid in pids.iter().filter(|&&p| alive(p, Some("canopy"))) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            if !wait_gone(&pids, Duration::from_secs(10)) {
                return Err(PeerError::Timeout {
                    what: format!("stopping canopy in {}", self.dir.display()),
                    limit_s: STOP_GRACE.as_secs() + 10,
                    last: match down {
                        Ok(_) => "processes survived SIGKILL".into(),
                        Err(e) => e.to_string(),
                    },
                });
            }
        }
        self.stopped = true;
        if remove_dir {
            fs::remove_dir_all(&self.dir).map_err(|source| PeerError::Io {
                action: "remove",
                path: self.dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl Drop for CanopyCluster {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}

/// Pids in DIR/pids/*.pid, as `canopy cluster up` records them.
fn recorded_pids(dir: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(dir.join("pids")) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| fs::read_to_string(e.ok()?.path()).ok()?.trim().parse().ok())
        .collect()
}

/// Whether every canopy process in `pids` is gone within `limit`.
fn wait_gone(pids: &[i32], limit: Duration) -> bool {
    wait_until(limit, || !pids.iter().any(|&p| alive(p, Some("canopy"))))
}

/// The CANOPY_CONF path from `canopy cluster up`'s `export CANOPY_CONF=... PATH=...` line.
fn parse_canopy_conf(stdout: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .flat_map(str::split_whitespace)
        .find_map(|word| word.strip_prefix("CANOPY_CONF="))
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

fn canopy_conf_from(command: &str, stdout: &str) -> Result<PathBuf, PeerError> {
    parse_canopy_conf(stdout).ok_or_else(|| PeerError::Parse {
        command: command.to_string(),
        output: stdout.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> PeerOpts {
        PeerOpts {
            canopy_bin: PathBuf::from("/nonexistent/bin"),
            work_dir: std::env::temp_dir(),
            ks: vec![8, 128, 512],
            tree_width: 50,
            submits: 200,
            queued: 2000,
            quick: false,
        }
    }

    fn no_progress() -> impl FnMut(&str) {
        |_: &str| {}
    }

    #[test]
    fn advantage_is_canopy_over_slurm_for_rates_and_inverse_for_times() {
        assert_eq!(advantage(Unit::JobsPerS, 1000.0, 250.0), Some(4.0));
        assert_eq!(advantage(Unit::Ms, 5.0, 50.0), Some(10.0));
        assert_eq!(advantage(Unit::Ms, 0.0, 50.0), None);
        assert_eq!(advantage(Unit::JobsPerS, 10.0, 0.0), None);
        assert_eq!(advantage(Unit::JobsPerS, f64::NAN, 1.0), None);
    }

    #[test]
    fn rows_carry_ratio_or_the_reason_slurm_is_missing() {
        let ok = make_row(
            "squeue_2000_queued".into(),
            Unit::Ms,
            None,
            2.0,
            &Ok(16.0),
            "n".into(),
        );
        assert_eq!(ok.unit, "ms");
        assert_eq!(ok.slurm, Some(16.0));
        assert_eq!(ok.ratio, Some(8.0));
        assert_eq!(ok.note, "n");
        let missing = make_row(
            "launch_8_nodes".into(),
            Unit::JobsPerS,
            Some(8),
            2.0,
            &Err("boom".into()),
            "n".into(),
        );
        assert_eq!(missing.unit, "jobs_per_s");
        assert_eq!(missing.nodes, Some(8));
        assert_eq!(missing.slurm, None);
        assert_eq!(missing.ratio, None);
        assert_eq!(missing.note, "n; slurm not measured: boom");
    }

    #[test]
    fn median_handles_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        assert!(matches!(
            median_of(&mut [], "launch"),
            Err(PeerError::BadOption(m)) if m.contains("launch")
        ));
    }

    #[test]
    fn rate_is_count_over_seconds() {
        assert_eq!(per_second(200, Duration::from_millis(500)), 400.0);
    }

    #[test]
    fn plan_uses_options_or_small_counts_in_quick_mode() {
        let full = Plan::from_opts(&opts()).unwrap();
        assert_eq!(full.ks, vec![8, 128, 512]);
        assert_eq!(full.parallel_submits, 2000);
        assert_eq!(full.queued, 2000);
        let quick = Plan::from_opts(&PeerOpts {
            quick: true,
            ..opts()
        })
        .unwrap();
        assert_eq!(quick.ks, vec![4]);
        assert_eq!(
            (quick.submits, quick.parallel_submits, quick.queued),
            (20, 200, 100)
        );
        assert_eq!(quick.tree_width, 50);
        assert_eq!(launch_reps(128), 3);
        assert_eq!(launch_reps(512), 2);
    }

    #[test]
    fn plan_rejects_unusable_options() {
        for bad in [
            PeerOpts {
                tree_width: 1,
                ..opts()
            },
            PeerOpts {
                submits: 0,
                ..opts()
            },
            PeerOpts {
                queued: 0,
                ..opts()
            },
            PeerOpts {
                ks: vec![],
                ..opts()
            },
            PeerOpts {
                ks: vec![8, 0],
                ..opts()
            },
        ] {
            assert!(matches!(
                Plan::from_opts(&bad),
                Err(PeerError::BadOption(_))
            ));
        }
    }

    #[test]
    fn run_rejects_bad_options_and_missing_binaries_before_touching_slurm() {
        let mut p = no_progress();
        let bad = PeerOpts {
            ks: vec![],
            ..opts()
        };
        assert!(matches!(run(&bad, &mut p), Err(PeerError::BadOption(_))));
        match run(&opts(), &mut p) {
            Err(PeerError::MissingBinary { path }) => {
                assert_eq!(path, PathBuf::from("/nonexistent/bin/canopy"))
            }
            other => panic!("expected MissingBinary, got {other:?}"),
        }
    }

    #[test]
    fn quick_mode_reports_missing_slurm_without_installing() {
        let mut lines = Vec::new();
        let r = ensure_slurm_installed(&["/nonexistent/slurmd", "/"], true, &mut |l: &str| {
            lines.push(l.to_string())
        });
        match r {
            Err(PeerError::SlurmUnavailable(why)) => {
                assert!(why.contains("/nonexistent/slurmd"), "{why}");
                assert!(!why.contains("/,"), "{why}");
            }
            other => panic!("expected SlurmUnavailable, got {other:?}"),
        }
        assert!(lines.is_empty());
        assert!(ensure_slurm_installed(&["/"], true, &mut no_progress()).is_ok());
    }

    #[test]
    fn parses_cluster_up_output() {
        let out = "export CANOPY_CONF=/tmp/c/slurm.conf PATH=/tmp/c/bin:$PATH\n";
        assert_eq!(
            parse_canopy_conf(out),
            Some(PathBuf::from("/tmp/c/slurm.conf"))
        );
        let noisy = "starting\n  export PATH=/x:$PATH CANOPY_CONF=/d/slurm.conf\n";
        assert_eq!(
            parse_canopy_conf(noisy),
            Some(PathBuf::from("/d/slurm.conf"))
        );
        assert_eq!(parse_canopy_conf("CANOPY_CONF=/a\n"), None);
        assert_eq!(parse_canopy_conf("export CANOPY_CONF= PATH=/x\n"), None);
        match canopy_conf_from("canopy cluster up", "nothing useful") {
            Err(PeerError::Parse { command, output }) => {
                assert_eq!(command, "canopy cluster up");
                assert_eq!(output, "nothing useful");
            }
            other => panic!("expected Parse, got {other:?}"),
        }
    }

    #[test]
    fn parses_job_ids_and_listings() {
        assert_eq!(parse_job_id("42\n"), Some(42));
        assert_eq!(parse_job_id("42;peer\n"), Some(42));
        assert_eq!(parse_job_id("Submitted batch job 42\n"), None);
        assert_eq!(parse_job_id(""), None);
        let listing = "JOBID PARTITION NAME\n 1 debug wrap\n 2 debug wrap\n\n";
        assert_eq!(count_job_lines(listing), 2);
        assert_eq!(count_job_lines("JOBID PARTITION NAME\n"), 0);
        assert!(check_listed("squeue", 2, 2).is_ok());
        assert!(matches!(
            check_listed("squeue", 2000, 1999),
            Err(PeerError::Mismatch {
                expected: 2000,
                found: 1999,
                ..
            })
        ));
    }

    #[test]
    fn counts_only_responding_idle_nodes() {
        assert_eq!(idle_nodes("4 idle\n"), 4);
        assert_eq!(idle_nodes("300 idle\n12 idle*\n200 unk*\n"), 300);
        assert_eq!(idle_nodes("2 idle\n3 idle\n"), 5);
        assert_eq!(idle_nodes("garbage\n\n"), 0);
    }

    #[test]
    fn slurm_conf_keeps_everything_in_its_dir_and_lists_k_nodes() {
        let dir = Path::new("/w/slurm-launch-k128");
        let conf = slurm_conf(&SlurmSpec {
            dir,
            hostname: "vm",
            ctld_port: 24000,
            node_base_port: 24001,
            nodes: 128,
            tree_width: 50,
        });
        for line in [
            "SlurmctldHost=vm(127.0.0.1)",
            "SlurmctldPort=24000",
            "TreeWidth=50",
            "StateSaveLocation=/w/slurm-launch-k128/state",
            "SlurmdSpoolDir=/w/slurm-launch-k128/spool/%n",
            "SlurmdPidFile=/w/slurm-launch-k128/run/slurmd-%n.pid",
            "SlurmctldLogFile=/w/slurm-launch-k128/log/slurmctld.log",
            "NodeName=n[1-128] NodeHostname=vm NodeAddr=127.0.0.1 Port=[24001-24128] CPUs=2 RealMemory=1000 State=UNKNOWN",
            "PartitionName=debug Nodes=n[1-128] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ] {
            assert!(conf.lines().any(|l| l == line), "missing {line:?} in\n{conf}");
        }
        // Every absolute path is private to the run.
        for l in conf.lines().filter(|l| l.contains("=/")) {
            assert!(l.contains("=/w/slurm-launch-k128/"), "{l}");
        }
        let one = slurm_conf(&SlurmSpec {
            dir,
            hostname: "vm",
            ctld_port: 24000,
            node_base_port: 24001,
            nodes: 1,
            tree_width: 16,
        });
        assert!(one.contains("NodeName=n1 NodeHostname=vm NodeAddr=127.0.0.1 Port=24001 "));
        assert!(one.contains("PartitionName=debug Nodes=n1 "));
        assert!(one.contains("TreeWidth=16\n"));
    }

    #[test]
    fn port_block_skips_past_busy_ports() {
        let busy = [100u16, 105];
        let free = |p: u16| !busy.contains(&p);
        assert_eq!(find_port_block(3, 100, 120, &free), Some(101));
        assert_eq!(find_port_block(5, 100, 120, &free), Some(106));
        assert_eq!(find_port_block(1, 100, 100, &free), None);
        assert_eq!(find_port_block(16, 100, 120, &free), None);
        assert_eq!(find_port_block(15, 100, 120, &free), Some(106));
    }

    #[test]
    fn proc_state_reads_past_odd_command_names() {
        assert_eq!(proc_state("123 (slurmd) S 1 2"), Some('S'));
        assert_eq!(proc_state("9 (a) b) (c) Z 1"), Some('Z'));
        assert_eq!(proc_state("no parens"), None);
        assert!(alive(std::process::id() as i32, None));
        assert!(!alive(
            std::process::id() as i32,
            Some("no-such-needle-xyz")
        ));
        assert!(!alive(-5, None));
    }

    #[test]
    fn clients_aim_at_their_own_cluster() {
        let slurm = Client::Slurm {
            conf: PathBuf::from("/w/s.conf"),
            dir: PathBuf::from("/w/s"),
        };
        let cmd = slurm.launch_command(128);
        assert_eq!(describe(&cmd), "/usr/bin/srun -N 128 true");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/w/s")));
        assert!(cmd
            .get_envs()
            .any(|(k, v)| k == "SLURM_CONF" && v == Some("/w/s.conf".as_ref())));
        let canopy = Client::Canopy {
            exe: PathBuf::from("/b/canopy"),
            conf: PathBuf::from("/w/c.conf"),
            dir: PathBuf::from("/w/c"),
        };
        let cmd = canopy.launch_command(4);
        assert_eq!(describe(&cmd), "/b/canopy srun -N 4 true");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/w/c")));
        assert!(cmd
            .get_envs()
            .any(|(k, v)| k == "CANOPY_CONF" && v == Some("/w/c.conf".as_ref())));
        assert_eq!(describe(&canopy.command("squeue")), "/b/canopy squeue");
    }

    #[test]
    fn bounded_runs_report_failure_timeout_and_spawn_errors() {
        let out = run_ok(Command::new("echo").arg("hi"), Duration::from_secs(10)).unwrap();
        assert_eq!(out.stdout, b"hi\n");
        match run_ok(
            Command::new("sh").args(["-c", "echo oops >&2; exit 3"]),
            Duration::from_secs(10),
        ) {
            Err(PeerError::Command { status, stderr, .. }) => {
                assert!(status.contains('3'), "{status}");
                assert_eq!(stderr, "oops");
            }
            other => panic!("expected Command, got {other:?}"),
        }
        let started = Instant::now();
        match run_bounded(Command::new("sleep").arg("20"), Duration::from_millis(200)) {
            Err(PeerError::Timeout { what, .. }) => assert_eq!(what, "`sleep 20`"),
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(matches!(
            run_bounded(
                &mut Command::new("/nonexistent/tool"),
                Duration::from_secs(1)
            ),
            Err(PeerError::Spawn { .. })
        ));
        let ms = timed_ok(&mut Command::new("true"), Duration::from_secs(10)).unwrap();
        assert!(ms > 0.0 && ms < 10_000.0);
    }

    #[test]
    fn io_errors_name_the_path() {
        let p = Path::new("/nonexistent/dir/slurm.conf");
        match write_file(p, "x") {
            Err(e @ PeerError::Io { .. }) => {
                assert!(e.to_string().contains("/nonexistent/dir/slurm.conf"))
            }
            other => panic!("expected Io, got {other:?}"),
        }
    }

    #[test]
    fn deadlines_and_tails() {
        assert!(check_deadline(Instant::now() + Duration::from_secs(5), "x").is_ok());
        let past = Instant::now() - Duration::from_millis(1);
        assert!(matches!(
            check_deadline(past, "loop"),
            Err(PeerError::Timeout { what, .. }) if what == "loop"
        ));
        let text = (1..=10).map(|i| format!("l{i}\n")).collect::<String>();
        assert_eq!(tail_text(&text), "l5 | l6 | l7 | l8 | l9 | l10");
        assert!(log_tail(Path::new("/nonexistent/log")).contains("unreadable"));
    }

    #[test]
    fn recorded_pids_reads_pid_files() {
        let dir = std::env::temp_dir().join(format!("peer-test-pids-{}", std::process::id()));
        fs::create_dir_all(dir.join("pids")).unwrap();
        fs::write(dir.join("pids/ctld.pid"), "123\n").unwrap();
        fs::write(dir.join("pids/n1.pid"), "junk").unwrap();
        assert_eq!(recorded_pids(&dir), vec![123]);
        assert!(recorded_pids(&dir.join("none")).is_empty());
        assert!(wait_gone(&[-7], Duration::from_millis(10)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn environ_matching_is_exact() {
        let env = b"PATH=/bin\0SLURM_CONF=/w/a/slurm.conf\0HOME=/root\0";
        assert!(environ_has(env, b"SLURM_CONF=/w/a/slurm.conf"));
        assert!(!environ_has(env, b"SLURM_CONF=/w/a"));
        assert!(!environ_has(env, b"SLURM_CONF=/w/a/slurm.conf.old"));
        assert!(our_stepds(Path::new("/nonexistent/slurm.conf")).is_empty());
    }

    #[test]
    fn wait_until_reports_whether_the_condition_held() {
        let mut calls = 0;
        assert!(wait_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        assert!(!wait_until(Duration::from_millis(60), || false));
    }

    #[test]
    fn slurm_failures_become_notes_and_skip_later_phases() {
        let mut failed = None;
        let mut lines = Vec::new();
        let mut progress = |l: &str| lines.push(l.to_string());
        let ok: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| Ok(7));
        assert_eq!(ok, Ok(7));
        let bad: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| {
            Err(PeerError::SlurmUnavailable("no munged".into()))
        });
        assert_eq!(
            bad,
            Err("real Slurm is not available: no munged".to_string())
        );
        let mut ran = false;
        let skipped: Result<u32, String> = slurm_phase(&mut failed, &mut progress, |_| {
            ran = true;
            Ok(1)
        });
        assert!(!ran);
        assert!(skipped
            .unwrap_err()
            .starts_with("skipped after an earlier failure"));
        assert_eq!(
            lines,
            ["slurm: not measured: real Slurm is not available: no munged"]
        );
    }

    #[test]
    fn a_daemon_that_exits_during_start_up_is_reported() {
        let dir = std::env::temp_dir().join(format!("peer-test-died-{}", std::process::id()));
        let child = Command::new("sh").args(["-c", "exit 2"]).spawn().unwrap();
        let mut cluster = SlurmCluster {
            conf: dir.join("slurm.conf"),
            dir,
            daemons: vec![("n3".to_string(), child)],
        };
        assert!(wait_until(Duration::from_secs(10), || cluster
            .check_daemons()
            .is_err_and(|e| matches!(
                &e,
                PeerError::Died { what, status, log }
                    if what == "n3" && status.contains('2') && log.contains("slurmd-n3.log")
            ))));
        assert!(cluster.daemons.is_empty());
        assert!(cluster.stop(false).is_ok());
    }

    #[test]
    fn error_messages_name_what_went_wrong() {
        let e = PeerError::NoPorts {
            count: 513,
            lo: PORT_LO,
            hi: PORT_HI,
        };
        assert_eq!(
            e.to_string(),
            "no free block of 513 TCP ports between 24000 and 32700"
        );
        let e = PeerError::Timeout {
            what: "slurm in /w".into(),
            limit_s: 90,
            last: "3 of 8 nodes idle".into(),
        };
        assert_eq!(
            e.to_string(),
            "slurm in /w: gave up after 90 s (3 of 8 nodes idle)"
        );
    }

    #[test]
    #[ignore = "needs root, Slurm 22.05 and canopy binaries (CANOPY_BIN)"]
    fn quick_run_produces_every_row_kind() {
        let bin = std::env::var_os("CANOPY_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
        let o = PeerOpts {
            canopy_bin: bin,
            quick: true,
            ..opts()
        };
        let started = Instant::now();
        let rows = match run(&o, &mut no_progress()) {
            Err(PeerError::SlurmUnavailable(_)) => return,
            other => other.unwrap(),
        };
        assert!(started.elapsed() < Duration::from_secs(60));
        let metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(
            metrics,
            [
                "sbatch_1_client",
                "sbatch_8_clients",
                "squeue_100_queued",
                "launch_4_nodes"
            ]
        );
        for r in &rows {
            assert!(r.canopy > 0.0, "{r:?}");
            assert_eq!(r.ratio.is_some(), r.slurm.is_some(), "{r:?}");
        }
    }

    #[test]
    fn node_and_port_lists() {
        assert_eq!(node_list(1), "n1");
        assert_eq!(node_list(512), "n[1-512]");
        assert_eq!(port_list(24001, 1), "24001");
        assert_eq!(port_list(24001, 512), "[24001-24512]");
    }
}
