//! `peer-sched`: backfill on real Slurm 22.05 and on canopy, side by side, each
//! system's figures read the same way, from its own `sdiag`'s "Backfilling stats".
//!
//! On each system in turn: start N nodes (Slurm: N slurmd; canopy: canopy-ctld with
//! N simulated node daemons), fill every node with long jobs of spread time limits,
//! queue M pending jobs of mixed widths and limits, wait for several backfill
//! cycles that ran over the full queue, and read sdiag often enough to see each
//! cycle. Both configs carry the same `SchedulerType`, `PriorityType` and
//! `SchedulerParameters` ([`scheduler_parameters`]).
//!
//! Slurm runs a backfill cycle only when something changed since the last one; a
//! held no-op job is submitted after each cycle (on both systems) so that cycles
//! keep coming. Held jobs are in neither system's backfill queue.
//!
//! Does not: print (the caller gets rows and progress lines).

use super::*;

mod sdiag;
mod simulated;
mod workload;

use sdiag::*;
use simulated::*;
use workload::*;

/// What to compare.
#[derive(Debug, Clone)]
pub struct SchedOpts {
    /// Directory holding `canopy`, `canopy-authd`, `canopy-ctld` and `canopy-noded`.
    pub canopy_bin: PathBuf,
    /// Scratch space; the run works in its own subdirectory.
    pub work_dir: PathBuf,
    pub nodes: u32,
    pub pending: u32,
    /// Backfill cycles measured over the full queue.
    pub cycles: u32,
    /// `bf_interval`, seconds.
    pub bf_interval: u32,
    pub tree_width: u32,
    /// Seed of the job list.
    pub seed: u64,
    /// CI smoke mode: a few nodes and jobs, and no attempt to install Slurm.
    pub quick: bool,
    /// Canopy alone (no Slurm cluster).
    pub canopy_only: bool,
}

/// The rows and how the run was set up.
#[derive(Debug, Clone)]
pub struct SchedRun {
    pub rows: Vec<PeerRow>,
    pub nodes: u32,
    pub pending: u32,
    /// `SchedulerParameters` on both systems.
    pub scheduler_parameters: String,
    /// What ran the nodes of each system.
    pub canopy_nodes: String,
    pub slurm_nodes: String,
}

/// The sizes one run uses: the options, or small fixed ones in quick mode.
#[derive(Debug, Clone, PartialEq)]
struct SchedPlan {
    nodes: u32,
    pending: u32,
    cycles: u32,
    bf_interval: u32,
    /// `bf_max_time`, seconds: Slurm's maximum (3600), or two minutes in quick mode.
    bf_max_time: u32,
    tree_width: u32,
    seed: u64,
    canopy_only: bool,
}

impl SchedPlan {
    fn from_opts(o: &SchedOpts) -> Result<SchedPlan, PeerError> {
        let bad = |m: String| Err(PeerError::BadOption(m));
        if o.tree_width < 2 {
            return bad(format!(
                "tree_width must be at least 2, got {}",
                o.tree_width
            ));
        }
        if o.nodes == 0 || o.pending == 0 || o.cycles == 0 {
            return bad(format!(
                "nodes, pending and cycles must be at least 1, got {}, {} and {}",
                o.nodes, o.pending, o.cycles
            ));
        }
        // Slurm's ports for N slurmd come from one block below the ephemeral range.
        if o.nodes > u32::from(PORT_HI - PORT_LO) {
            return bad(format!(
                "nodes must be at most {} (one port each for Slurm), got {}",
                PORT_HI - PORT_LO,
                o.nodes
            ));
        }
        // Slurm's bf_max_job_test, and canopy's, stop at a million.
        if o.pending > 999_000 {
            return bad(format!("pending must be at most 999000, got {}", o.pending));
        }
        if !(1..=10_800).contains(&o.bf_interval) {
            return bad(format!(
                "bf_interval must be between 1 and 10800 seconds (Slurm's range), got {}",
                o.bf_interval
            ));
        }
        let (nodes, pending, cycles, bf_interval) = if o.quick {
            (8, 200, 2, 2)
        } else {
            (o.nodes, o.pending, o.cycles, o.bf_interval)
        };
        Ok(SchedPlan {
            nodes,
            pending,
            cycles,
            bf_interval,
            bf_max_time: if o.quick { 120 } else { 3600 },
            tree_width: o.tree_width,
            seed: o.seed,
            canopy_only: o.canopy_only,
        })
    }
}

/// The one `SchedulerParameters` value both systems get. `bf_max_job_test` above the
/// queue and `bf_window` over the longest fill plus the longest pending limit make
/// every pending job examined and planned; `bf_continue` and `bf_max_time` keep a long
/// Slurm cycle from being cut short (canopy's pass never stops part way, and warns
/// that it ignores `bf_max_time`).
///
/// Slurm's lock yields keep their defaults (`bf_yield_interval` 2 s,
/// `bf_yield_sleep` 0.5 s): Slurm 22.05 takes the sleeps out of the cycle time it
/// prints (backfill.c, `_do_diag_stats`: real_time = delta_t - bf_sleep_usec), and
/// without them a cycle of minutes would hold the locks past sbatch's 10 s
/// MessageTimeout while the queue fills. While cycles are measured nothing else
/// reaches either controller but sdiag (no locks in Slurm) and one held submission
/// just after each cycle, so a yield costs Slurm only its unlock and relock.
fn scheduler_parameters(plan: &SchedPlan) -> String {
    let window = FILL_MINUTES.1 + PENDING_MINUTES.1;
    format!(
        "bf_interval={},bf_window={window},bf_resolution=60,bf_max_job_test={},\
         bf_continue,bf_max_time={}",
        plan.bf_interval,
        (plan.pending + 1000).min(1_000_000),
        plan.bf_max_time
    )
}

fn extra_conf(plan: &SchedPlan) -> String {
    format!(
        "PriorityType=priority/basic\nSchedulerParameters={}\n",
        scheduler_parameters(plan)
    )
}

/// Run the comparison: Slurm first, then canopy, never both at once.
///
/// Canopy failures are errors; Slurm failures once Slurm was found usable become
/// rows with `slurm: None` and the reason in `note`.
pub fn run_sched(opts: &SchedOpts, progress: &mut dyn FnMut(&str)) -> Result<SchedRun, PeerError> {
    let plan = SchedPlan::from_opts(opts)?;
    let canopy_exe = canopy_binaries(&opts.canopy_bin)?;
    let authd = opts.canopy_bin.join("canopy-authd");
    if !authd.is_file() {
        return Err(PeerError::MissingBinary { path: authd });
    }
    if !plan.canopy_only {
        let mut files = SLURM_FILES.to_vec();
        files.extend(["/usr/bin/sdiag", "/usr/bin/scancel", "/usr/bin/scontrol"]);
        ensure_slurm_installed(&files, opts.quick, progress)?;
        if !nix::unistd::geteuid().is_root() {
            return Err(PeerError::SlurmUnavailable(
                "slurmd must run as root and this process is not root".into(),
            ));
        }
        ensure_munged(progress)?;
    }
    raise_fd_limit(progress);
    let root = opts
        .work_dir
        .join(format!("peer-sched-{}", std::process::id()));
    create_dir(&root)?;
    let ctx = Ctx {
        root: root.clone(),
        canopy_exe,
        hostname: hostname(),
        tree_width: plan.tree_width,
        leaves: Leaves::Plain,
        extra_conf: extra_conf(&plan),
    };
    let (fill, queue) = workload(plan.nodes, plan.pending, plan.seed);
    progress(&format!(
        "workload (seed {}): {} fill jobs over {} nodes, {} pending jobs; SchedulerParameters={}",
        plan.seed,
        fill.len(),
        plan.nodes,
        queue.len(),
        scheduler_parameters(&plan)
    ));
    let work = Work {
        plan: &plan,
        fill: &fill,
        queue: &queue,
    };
    let slurm = if plan.canopy_only {
        Err("--canopy-only: Slurm not run".to_string())
    } else {
        slurm_figures(&ctx, &work, progress).map_err(|e| {
            progress(&format!("slurm: not measured: {e}"));
            e.to_string()
        })
    };
    let (canopy, processes) = canopy_figures(&ctx, &work, progress)?;
    let _ = fs::remove_dir(&root);
    let canopy_nodes = format!(
        "{} simulated (canopy-noded --simulate, {processes} process{})",
        plan.nodes,
        if processes == 1 { "" } else { "es" }
    );
    let slurm_nodes = if plan.canopy_only {
        "not run".to_string()
    } else {
        format!("{} slurmd", plan.nodes)
    };
    Ok(SchedRun {
        rows: rows(&plan, &canopy, &slurm),
        nodes: plan.nodes,
        pending: plan.pending,
        scheduler_parameters: scheduler_parameters(&plan),
        canopy_nodes,
        slurm_nodes,
    })
}

/// The jobs and sizes of one run.
struct Work<'a> {
    plan: &'a SchedPlan,
    fill: &'a [Shape],
    queue: &'a [Shape],
}

/// What one system showed.
#[derive(Debug, Clone)]
struct Figures {
    window: Summary,
    /// The last reading: sdiag's own since-start figures.
    end: Backfill,
    /// Jobs backfill started during the window.
    backfilled: u64,
    rss_mib: f64,
    peak_rss_mib: f64,
    submit_per_s: f64,
}

fn slurm_figures(
    ctx: &Ctx,
    work: &Work,
    progress: &mut dyn FnMut(&str),
) -> Result<Figures, PeerError> {
    let n = work.plan.nodes;
    progress(&format!("slurm: starting slurmctld and {n} slurmd"));
    let started = Instant::now();
    let dir = ctx.root.join(format!("slurm-sched-n{n}"));
    let mut cluster = SlurmCluster::start(ctx, dir, n)?;
    progress(&format!(
        "slurm: {n} node(s) idle after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let pid = cluster
        .daemons
        .iter()
        .find(|(name, _)| name == "slurmctld")
        .map(|(_, c)| c.id() as i32);
    let client = cluster.client();
    let result = drive(&client, pid, work, "slurm", progress);
    // Running jobs end with their scripts; pending ones go with the state.
    if let Err(e) = cancel_running(&client) {
        progress(&format!("slurm: running jobs not cancelled: {e}"));
    }
    let stopped = cluster.stop(result.is_ok());
    let figures = result?;
    stopped?;
    Ok(figures)
}

fn canopy_figures(
    ctx: &Ctx,
    work: &Work,
    progress: &mut dyn FnMut(&str),
) -> Result<(Figures, u32), PeerError> {
    let n = work.plan.nodes;
    progress(&format!(
        "canopy: starting canopy-ctld and {n} simulated node daemons"
    ));
    let started = Instant::now();
    let dir = ctx.root.join(format!("canopy-sched-n{n}"));
    let mut cluster = SimCanopy::start(ctx, dir, n)?;
    progress(&format!(
        "canopy: {n} node(s) idle after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let result = drive(
        &cluster.client(),
        cluster.ctld_pid(),
        work,
        "canopy",
        progress,
    );
    let stopped = cluster.stop(result.is_ok());
    let figures = result?;
    stopped?;
    Ok((figures, cluster.processes))
}

/// Bound on one sdiag call: canopy's controller answers between passes, so a reading
/// may wait for a whole cycle.
const SDIAG_LIMIT: Duration = Duration::from_secs(600);
/// Between sdiag readings: well under any cycle plus bf_interval.
const POLL: Duration = Duration::from_millis(250);

/// Fill, queue, and watch `work.plan.cycles` backfill cycles over the full queue.
fn drive(
    c: &Client,
    ctld_pid: Option<i32>,
    work: &Work,
    name: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Figures, PeerError> {
    let plan = work.plan;
    let budget = submit_budget(plan.pending);
    let took = submit_all(c, work.fill, "fill", budget)?;
    let fill_limit = Duration::from_secs(120 + u64::from(plan.nodes) / 2);
    wait_allocated(c, plan.nodes, fill_limit)?;
    progress(&format!(
        "{name}: {} fill jobs submitted in {:.1} s; every node allocated",
        work.fill.len(),
        took.as_secs_f64()
    ));
    let took = submit_all(c, work.queue, "bf", budget)?;
    let submit_per_s = per_second(plan.pending, took);
    let mut squeue = c.command("squeue");
    squeue.args(["-h", "-t", "PD", "-o", "%i"]);
    let out = run_ok(&mut squeue, SDIAG_LIMIT)?;
    let listed = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64;
    check_listed(&describe(&squeue), u64::from(plan.pending), listed)?;
    progress(&format!(
        "{name}: {} pending jobs submitted in {:.1} s ({submit_per_s:.0} jobs/s); waiting for {} backfill cycles",
        plan.pending,
        took.as_secs_f64(),
        plan.cycles
    ));
    let stall = stall_limit(plan);
    let mut since = Instant::now();
    let first = read_sdiag(c)?;
    // The next cycle to end may have begun before the queue was full; the window
    // starts after it.
    let mut base = first.clone();
    poke(c)?;
    while base.cycles <= first.cycles {
        wait_poll(since, stall, "the first backfill cycle over the full queue")?;
        base = read_sdiag(c)?;
    }
    poke(c)?;
    let mut window = Window::new(base);
    while window.len() < u64::from(plan.cycles) {
        wait_poll(since, stall, "the next backfill cycle")?;
        let before = window.last.cycles;
        window
            .observe(read_sdiag(c)?)
            .map_err(|e| PeerError::Parse {
                command: format!("{name} sdiag"),
                output: e,
            })?;
        if window.last.cycles > before {
            let last = &window.last;
            progress(&format!(
                "{name}: backfill cycle {}: {} us, depth {} (try {}), queue {}",
                last.cycles,
                last.last_us,
                last.last_depth,
                last.last_depth_try,
                last.last_queue_len
            ));
            since = Instant::now();
            poke(c)?;
        }
    }
    let summary = window.summary().ok_or_else(|| PeerError::Parse {
        command: format!("{name} sdiag"),
        output: "no cycle in the window".into(),
    })?;
    let (rss_mib, peak_rss_mib) = ctld_pid.map(memory_mib).unwrap_or((0.0, 0.0));
    Ok(Figures {
        window: summary,
        backfilled: window
            .last
            .backfilled
            .saturating_sub(window.base.backfilled),
        end: window.last,
        rss_mib,
        peak_rss_mib,
        submit_per_s,
    })
}

fn submit_budget(pending: u32) -> Duration {
    Duration::from_secs(600 + u64::from(pending) / 20)
}

/// How long to wait for the next cycle: the interval, then a cycle as long as
/// `bf_max_time` lets Slurm's run, and some slack.
fn stall_limit(plan: &SchedPlan) -> Duration {
    Duration::from_secs(u64::from(plan.bf_interval) + u64::from(plan.bf_max_time) + 120)
}

fn wait_poll(since: Instant, limit: Duration, what: &str) -> Result<(), PeerError> {
    if since.elapsed() > limit {
        return Err(PeerError::Timeout {
            what: format!("waiting for {what}"),
            limit_s: limit.as_secs(),
            last: "sdiag's Total cycles did not move".into(),
        });
    }
    thread::sleep(POLL);
    Ok(())
}

fn read_sdiag(c: &Client) -> Result<Backfill, PeerError> {
    let mut cmd = c.command("sdiag");
    let out = run_ok(&mut cmd, SDIAG_LIMIT)?;
    parse_backfill(&String::from_utf8_lossy(&out.stdout)).map_err(|e| PeerError::Parse {
        command: describe(&cmd),
        output: e,
    })
}

/// A held no-op job: a change, so that Slurm's next backfill cycle runs.
fn poke(c: &Client) -> Result<(), PeerError> {
    let mut cmd = c.command("sbatch");
    cmd.args(["--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"]);
    run_ok(&mut cmd, CLIENT_LIMIT).map(|_| ())
}

/// Submit every shape from [`CLIENT_THREADS`] client threads, one sbatch process
/// at a time each; returns the wall time.
fn submit_all(
    c: &Client,
    shapes: &[Shape],
    prefix: &str,
    budget: Duration,
) -> Result<Duration, PeerError> {
    let next = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<PeerError>> = Mutex::new(None);
    let started = Instant::now();
    let deadline = started + budget;
    let submit = |i: usize, shape: &Shape| -> Result<(), PeerError> {
        if Instant::now() > deadline {
            return Err(PeerError::Timeout {
                what: format!("submitting {} {prefix} jobs", shapes.len()),
                limit_s: budget.as_secs(),
                last: format!("{i} submitted"),
            });
        }
        let mut cmd = c.command("sbatch");
        cmd.args(shape.sbatch_args(&format!("{prefix}{i}")));
        let out = run_ok(&mut cmd, CLIENT_LIMIT)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        parse_job_id(&stdout)
            .map(|_| ())
            .ok_or_else(|| PeerError::Parse {
                command: describe(&cmd),
                output: stdout.into_owned(),
            })
    };
    thread::scope(|s| {
        for _ in 0..CLIENT_THREADS {
            s.spawn(|| {
                while !failed.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some(shape) = shapes.get(i) else {
                        break;
                    };
                    if let Err(e) = submit(i, shape) {
                        failed.store(true, Ordering::SeqCst);
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    match first_error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(started.elapsed()),
    }
}

/// `scancel` every running job and wait until none runs, so that their scripts end
/// with them rather than outlive their steps. The partition goes DOWN first: nodes
/// freed by the cancel would otherwise start pending jobs at once.
fn cancel_running(c: &Client) -> Result<(), PeerError> {
    let mut down = c.command("scontrol");
    down.args(["update", "PartitionName=debug", "State=DOWN"]);
    run_ok(&mut down, CLIENT_LIMIT)?;
    let mut cancel = c.command("scancel");
    cancel.args(["--state=RUNNING", "--partition=debug"]);
    run_ok(&mut cancel, CLIENT_LIMIT)?;
    let limit = Duration::from_secs(60);
    let deadline = Instant::now() + limit;
    loop {
        let mut squeue = c.command("squeue");
        squeue.args(["-h", "-t", "R,CG", "-o", "%i"]);
        let out = run_ok(&mut squeue, CLIENT_LIMIT)?;
        let left = String::from_utf8_lossy(&out.stdout).lines().count();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(PeerError::Timeout {
                what: "cancelling the running jobs".into(),
                limit_s: limit.as_secs(),
                last: format!("{left} still running or completing"),
            });
        }
        thread::sleep(Duration::from_millis(250));
    }
}

/// Nodes in state `state` in `sinfo -h -o '%D %t'` output.
fn nodes_in_state(stdout: &str, state: &str) -> u32 {
    stdout
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let count = f.next()?.parse::<u32>().ok()?;
            (f.next()? == state).then_some(count)
        })
        .sum()
}

fn wait_allocated(c: &Client, nodes: u32, limit: Duration) -> Result<(), PeerError> {
    let deadline = Instant::now() + limit;
    loop {
        let mut cmd = c.command("sinfo");
        cmd.args(["-h", "-o", "%D %t"]);
        let out = run_ok(&mut cmd, CLIENT_LIMIT)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let alloc = nodes_in_state(&text, "alloc");
        if alloc == nodes {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(PeerError::Timeout {
                what: "filling every node".into(),
                limit_s: limit.as_secs(),
                last: format!("{alloc} of {nodes} nodes allocated: {}", tail_text(&text)),
            });
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// VmRSS and VmHWM of `pid`, MiB (zeros when it cannot be read).
fn memory_mib(pid: i32) -> (f64, f64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (
        status_kib(&status, "VmRSS:") / 1024.0,
        status_kib(&status, "VmHWM:") / 1024.0,
    )
}

/// A `Key:   123 kB` line of /proc/PID/status, in KiB.
fn status_kib(status: &str, key: &str) -> f64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The side-by-side rows.
fn rows(plan: &SchedPlan, canopy: &Figures, slurm: &Result<Figures, String>) -> Vec<PeerRow> {
    let (n, m, k) = (plan.nodes, plan.pending, plan.cycles);
    let window = format!("{k} cycles over {m} pending jobs on {n} full nodes");
    let pick = |f: fn(&Figures) -> f64| -> (f64, Result<f64, String>) {
        (f(canopy), slurm.as_ref().map(f).map_err(Clone::clone))
    };
    let mut rows = Vec::new();
    let mut row = |metric: &str, unit: Unit, f: fn(&Figures) -> f64, note: String| {
        let (c, s) = pick(f);
        rows.push(make_row(metric.to_string(), unit, Some(n), c, &s, note));
    };
    row(
        "bf_cycle_mean_us",
        Unit::Us,
        |f| f.window.mean_us,
        format!("sdiag Last cycle, mean of {window}; canopy's includes its quick pass"),
    );
    row(
        "bf_cycle_max_us",
        Unit::Us,
        |f| f.window.max_us.unwrap_or(f.end.max_us) as f64,
        format!("sdiag Last cycle, longest of {window}"),
    );
    row(
        "bf_depth_mean",
        Unit::Jobs,
        |f| f.window.depth_mean,
        format!("sdiag Last depth cycle, mean of {window}"),
    );
    row(
        "bf_depth_try_mean",
        Unit::Jobs,
        |f| f.window.depth_try_mean,
        format!("sdiag Last depth cycle (try sched), mean of {window}"),
    );
    row(
        "bf_queue_len_mean",
        Unit::Jobs,
        |f| f.window.queue_len_mean,
        format!("sdiag Last queue length, mean of {window}"),
    );
    row(
        "bf_examined_per_s",
        Unit::JobsPerS,
        |f| f.window.examined_per_s,
        format!("depth over cycle time, summed over {window}"),
    );
    row(
        "sdiag_mean_cycle_us",
        Unit::Us,
        |f| f.end.mean_us.unwrap_or(0) as f64,
        "sdiag Mean cycle at the end: every cycle since start, the filling ones too".into(),
    );
    row(
        "sdiag_max_cycle_us",
        Unit::Us,
        |f| f.end.max_us as f64,
        "sdiag Max cycle at the end: every cycle since start".into(),
    );
    row(
        "bf_backfilled_jobs",
        Unit::Jobs,
        |f| f.backfilled as f64,
        format!("jobs started by backfill in {window} (change of sdiag Total backfilled jobs)"),
    );
    row(
        "bf_table_size",
        Unit::Records,
        |f| f.end.last_table_size as f64,
        "sdiag Last table size at the end: the time table's records".into(),
    );
    row(
        "ctld_rss_mib",
        Unit::MiB,
        |f| f.rss_mib,
        "controller VmRSS at the end (slurmctld / canopy-ctld)".into(),
    );
    row(
        "ctld_peak_rss_mib",
        Unit::MiB,
        |f| f.peak_rss_mib,
        "controller VmHWM at the end".into(),
    );
    row(
        "submit_per_s",
        Unit::JobsPerS,
        |f| f.submit_per_s,
        format!("{m} pending jobs by sbatch from {CLIENT_THREADS} client threads"),
    );
    for r in &mut rows {
        let missed = [canopy.window.from_sums]
            .into_iter()
            .chain(slurm.as_ref().ok().map(|s| s.window.from_sums))
            .any(|x| x);
        if missed && r.metric.starts_with("bf_") {
            r.note
                .push_str("; a poll missed a cycle, so means come from sdiag's sums");
        }
    }
    rows
}

#[cfg(test)]
mod tests;
