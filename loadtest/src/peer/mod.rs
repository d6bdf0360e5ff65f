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
//!
//! This file holds the options, the rows and the order of phases; the clusters
//! are started in `slurm` and `canopy`, the figures taken in `measure`, and
//! the process and file plumbing they share is in `process`. The backfill comparison
//! (`peer-sched`: both systems' own sdiag figures) lives in `sched`.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{chown, OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, User};

mod canopy;
mod measure;
mod process;
mod sched;
mod slurm;

use canopy::*;
use measure::*;
use process::*;
use slurm::*;

pub use sched::{run_sched, SchedOpts};

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
    /// How both systems' nodes track, confine and bind tasks.
    pub leaves: Leaves,
    /// Measure canopy alone (no Slurm cluster is started): before/after figures of a
    /// canopy change without loading the machine with Slurm's daemons too.
    pub canopy_only: bool,
    /// Only the `srun -N K` launch rows (no sbatch or squeue clusters).
    pub launch_only: bool,
    /// Timed launches per K instead of [`launch_reps`]'s.
    pub reps: Option<u32>,
}

/// What the nodes of BOTH systems do around a task, stated explicitly on each side so
/// that a comparison is like for like whatever either system's default is (canopy's
/// default is proctrack/cgroup, as Slurm's; the Debian slurm.conf example's is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaves {
    /// `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`: no cgroups, no masks.
    Plain,
    /// `ProctrackType=proctrack/cgroup`, `TaskPlugin=task/cgroup,task/affinity`, and
    /// cgroup.conf's `ConstrainCores=yes ConstrainRAMSpace=yes`.
    Confined,
}

impl Leaves {
    pub fn name(self) -> &'static str {
        match self {
            Leaves::Plain => "linuxproc,task/none",
            Leaves::Confined => "cgroup,task/cgroup+affinity",
        }
    }

    /// The slurm.conf lines, the same text for Slurm and canopy (canopy's reader takes
    /// both values).
    pub(crate) fn slurm_conf_lines(self) -> &'static str {
        match self {
            Leaves::Plain => "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n",
            Leaves::Confined => {
                "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"
            }
        }
    }

    /// cgroup.conf beside slurm.conf (both systems read it from there), or none. Slurm
    /// 22.05 is told the hierarchy outright (its autodetection is newer than some of the
    /// hosts it runs on); canopy reads the same file.
    pub(crate) fn cgroup_conf(self) -> Option<&'static str> {
        match self {
            Leaves::Plain => None,
            Leaves::Confined => {
                Some("CgroupPlugin=cgroup/v1\nConstrainCores=yes\nConstrainRAMSpace=yes\n")
            }
        }
    }
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
    if !plan.canopy_only {
        ensure_slurm_installed(SLURM_FILES, opts.quick, progress)?;
        if !nix::unistd::geteuid().is_root() {
            return Err(PeerError::SlurmUnavailable(
                "slurmd must run as root and this process is not root".into(),
            ));
        }
        ensure_munged(progress)?;
    }
    raise_fd_limit(progress);
    let root = opts.work_dir.join(format!("peer-{}", std::process::id()));
    create_dir(&root)?;
    let ctx = Ctx {
        root: root.clone(),
        canopy_exe,
        hostname: hostname(),
        tree_width: plan.tree_width,
        leaves: opts.leaves,
        extra_conf: String::new(),
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
    canopy_only: bool,
    launch_only: bool,
    reps: Option<u32>,
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
        if o.reps == Some(0) {
            return Err(PeerError::BadOption("reps must be at least 1".into()));
        }
        if o.quick {
            return Ok(Plan {
                ks: vec![4],
                tree_width: o.tree_width,
                submits: 20,
                parallel_submits: 20 * PARALLEL_FACTOR,
                queued: 100,
                canopy_only: o.canopy_only,
                launch_only: o.launch_only,
                reps: None,
            });
        }
        Ok(Plan {
            ks: o.ks.clone(),
            tree_width: o.tree_width,
            submits: o.submits,
            parallel_submits: o.submits.saturating_mul(PARALLEL_FACTOR),
            queued: o.queued,
            canopy_only: o.canopy_only,
            launch_only: o.launch_only,
            reps: o.reps,
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
    leaves: Leaves,
    /// slurm.conf lines a scenario adds to Slurm's config (the backfill comparison's
    /// `SchedulerParameters`); empty for the launch and queue rows.
    extra_conf: String,
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
    /// Microseconds, as sdiag prints cycle times.
    Us,
    /// Jobs counted (a depth, a queue length): the ratio is canopy/slurm, 1 when both
    /// saw as many.
    Jobs,
    /// Records of a table (backfill's time table): canopy/slurm, as counts.
    Records,
    /// Resident memory.
    MiB,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::JobsPerS => "jobs_per_s",
            Unit::Ms => "ms",
            Unit::Us => "us",
            Unit::Jobs => "jobs",
            Unit::Records => "records",
            Unit::MiB => "MiB",
        }
    }
}

/// Canopy's advantage over Slurm: above 1 means canopy is ahead (for counts, that
/// canopy counted more).
fn advantage(unit: Unit, canopy: f64, slurm: f64) -> Option<f64> {
    let r = match unit {
        Unit::JobsPerS | Unit::Jobs | Unit::Records => canopy / slurm,
        Unit::Ms | Unit::Us | Unit::MiB => slurm / canopy,
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
    let mut slurm_failed = plan
        .canopy_only
        .then(|| "--canopy-only: Slurm not run".to_string());
    let mut rows = if plan.launch_only {
        Vec::new()
    } else {
        measure_queue_rows(ctx, plan, &mut slurm_failed, progress)?
    };
    for &k in &plan.ks {
        let reps = plan.reps.unwrap_or_else(|| launch_reps(k));
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
                 TreeWidth {}, {}, median of {reps}",
                ctx.tree_width,
                ctx.leaves.name()
            ),
        ));
    }
    Ok(rows)
}

/// The sbatch and squeue rows, each system on a one-node cluster.
fn measure_queue_rows(
    ctx: &Ctx,
    plan: &Plan,
    slurm_failed: &mut Option<String>,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PeerRow>, PeerError> {
    let mut rows = Vec::new();
    let slurm = slurm_phase(slurm_failed, progress, |p| {
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

    let slurm = slurm_phase(slurm_failed, progress, |p| {
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

#[cfg(test)]
mod tests;
