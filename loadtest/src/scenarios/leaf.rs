//! `leaf`: what tracking, confining and binding add to a launch on one node,
//! in process, with the library the node daemon uses (`exec::leaf`).
//!
//! Per iteration, as `exec::tasks::fork_tasks` does for an srun step: the
//! tasks' bindings (`Leaf::tasks`), the job's cgroup (`Leaf::job`, with the
//! share's cpuset and memory limit), the step's and its tasks' cgroups
//! (`StepGuard::new`); then the teardown as the daemon does it: the guard
//! dropped (its thread kills what is left and removes the step), timed until
//! the step's directories are gone, then `end_job`. The same set-up on a
//! plain node (read from `proctrack/linuxproc`, `task/none`: no cgroups, no
//! binding) is the baseline, so the
//! difference is what the leaf work adds. A second pair times fork+exec of
//! `true` moved into a task cgroup and bound, against a plain fork+exec.
//!
//! Needs root and cgroup v1 or v2; without them the containment runs
//! unconfined (the library says why) and the rows say so.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use canopy::exec::bind::AffinityMask;
use canopy::exec::contain::{Attach, JobCgroup, Mode, StepName};
use canopy::exec::leaf::{self, Leaf, StepGuard};
use canopy::wire::messages::{NodeShare, StdinTarget, StepLaunch};

use crate::report::Row;

pub struct Opts {
    /// Launch set-ups and teardowns timed (and plain ones, and forks).
    pub iterations: u32,
    /// Tasks of the step on this node (each gets a cgroup and a mask).
    pub tasks: u32,
}

/// The node as slurm.conf and cgroup.conf describe it. Two CPUs and the
/// machine's memory: the shape is only used for binding, which falls back to
/// the configured shape when the machine's differs.
fn write_config(dir: &Path, confined: bool) -> Result<PathBuf> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    let leaf_lines = if confined {
        "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"
    } else {
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
    };
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=leafbench\nSlurmctldHost=localhost(127.0.0.1)\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n{leaf_lines}\
             NodeName=n1 NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000\n\
             PartitionName=debug Nodes=ALL Default=YES\n",
            d = dir.display()
        ),
    )?;
    // Devices are constrained too, as the cgroup.conf says; with no
    // GRES device files on this node there is nothing to fence.
    std::fs::write(
        dir.join("cgroup.conf"),
        "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n",
    )?;
    Ok(conf)
}

/// The node's part of an `srun -n TASKS --cpu-bind=cores` step holding
/// every CPU and 100 MiB.
fn launch(job_id: u32, tasks: u32, cpus: u32) -> StepLaunch {
    let resources = canopy::model::tres::ResourceRequest {
        cpu_bind: Some("cores".into()),
        ..Default::default()
    };
    StepLaunch {
        job_id,
        step_id: 0,
        name: "true".into(),
        user: "root".into(),
        uid: 0,
        gid: 0,
        argv: vec!["true".into()],
        env: Vec::new(),
        cwd: "/".into(),
        nodelist: "n1".into(),
        tasks_per_node: vec![tasks],
        cpus_per_task: None,
        job_nodelist: "n1".into(),
        partition: "debug".into(),
        cluster: "leafbench".into(),
        io_addr: String::new(),
        io_token: 0,
        stdout: None,
        stderr: None,
        array: None,
        stdin: StdinTarget::None,
        stdin_pattern: None,
        pty: None,
        multi_prog: None,
        open_append: false,
        held: vec![NodeShare {
            cpu_ids: (0..cpus).collect(),
            mem_mb: 100,
            gres: Vec::new(),
        }]
        .into(),
        resources,
    }
}

/// What one set-up leaves for the teardown.
struct Made {
    job: Option<std::sync::Arc<JobCgroup>>,
    guard: Option<StepGuard>,
    _attaches: Vec<Attach>,
    masks: usize,
}

/// The node-side set-up of one step, in `fork_tasks`' order.
fn set_up(leaf: &Leaf, l: &StepLaunch) -> Result<Made> {
    let setups = leaf
        .tasks(l, 0, 0..l.tasks_per_node[0])
        .map_err(anyhow::Error::msg)?;
    let masks = setups.iter().filter(|s| s.affinity.is_some()).count();
    let job = leaf
        .job(l.job_id, l.uid, l.held.first())
        .map_err(anyhow::Error::msg)?;
    let (guard, attaches) = match &job {
        Some(j) => {
            let limits = leaf.limits(l.held.first());
            let (g, a) = StepGuard::new(
                j,
                l.job_id,
                l.step_id,
                "n1",
                0..l.tasks_per_node[0],
                &limits,
            )
            .map_err(anyhow::Error::msg)?;
            (Some(g), a)
        }
        None => (None, Vec::new()),
    };
    Ok(Made {
        job,
        guard,
        _attaches: attaches,
        masks,
    })
}

/// Drop the guard, wait until its thread has removed the step in every
/// hierarchy, then end the job: the node's teardown, timed whole.
fn tear_down(m: Made, step_id: u32) -> Result<()> {
    let Some(job) = m.job else {
        return Ok(());
    };
    let step_dirs: Vec<PathBuf> = job
        .paths()
        .iter()
        .map(|p| p.join(format!("step_{step_id}")))
        .collect();
    drop(m._attaches);
    drop(m.guard);
    let deadline = Instant::now() + Duration::from_secs(10);
    // Yield rather than sleep: on two cores the teardown thread needs the
    // CPU, and a sleep would round every sample up to the timer's tick.
    while step_dirs.iter().any(|d| d.exists()) {
        if Instant::now() > deadline {
            bail!("step cgroup {} not removed", step_dirs[0].display());
        }
        std::thread::yield_now();
    }
    leaf::end_job(job);
    Ok(())
}

/// CPU time of this whole process so far (every thread, the teardown's included):
/// on a shared machine what a launch costs the node shows here, not in wall time.
fn cpu_now() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |u| {
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().max(0) as u64)
                + Duration::from_micros(t.tv_usec().max(0) as u64)
        };
        tv(u.user_time()) + tv(u.system_time())
    })
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

fn row(metric: &str, h: &Histogram<u64>, note: &str) -> Row {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Row::new("leaf")
        .set("metric", metric)
        .set("n", h.len())
        .num("p50_ms", ms(0.5))
        .num("p99_ms", ms(0.99))
        .num("max_ms", h.max() as f64 / 1000.0)
        .set("note", note)
}

/// fork+exec of `true`, waited for; `attach` and `mask` applied in the child
/// before exec, as `fork_tasks` applies them.
fn spawn_true(attach: Option<&Attach>, mask: Option<&AffinityMask>) -> Result<Duration> {
    let attach = attach.map(Attach::try_clone).transpose()?;
    let mask = mask.cloned();
    let mut cmd = Command::new("/bin/true");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: apply() only makes write(2) and sched_setaffinity(2) calls on
    // memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(a) = &attach {
                a.apply()?;
            }
            if let Some(m) = &mask {
                m.apply()?;
            }
            Ok(())
        });
    }
    let t = Instant::now();
    let status = cmd.spawn()?.wait()?;
    let d = t.elapsed();
    if !status.success() {
        bail!("/bin/true exited {status}");
    }
    Ok(d)
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let dir = tempfile::Builder::new().prefix("canopy-leaf").tempdir()?;
    let (cdir, pdir) = (dir.path().join("confined"), dir.path().join("plain"));
    std::fs::create_dir_all(&cdir)?;
    std::fs::create_dir_all(&pdir)?;
    let conf = canopy::config::Config::load(&write_config(&cdir, true)?)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("confined slurm.conf")?;
    let plain_conf = canopy::config::Config::load(&write_config(&pdir, false)?)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("plain slurm.conf")?;
    let cpus = conf.nodes[0].cpus;
    let confined = Leaf::for_node(&conf, "n1", 0, &cdir, None, &[]);
    // The same reader with linuxproc and task/none makes a plain leaf: no
    // cgroups, no masks.
    let plain = Leaf::for_node(&plain_conf, "n1", 0, &pdir, None, &[]);
    if plain.containment().is_some() {
        bail!("proctrack/linuxproc with task/none still made a containment");
    }
    let mode = confined.containment().map(|c| (c.mode(), c.state()));
    let mode_note = match &mode {
        Some((Mode::V1, _)) => "cgroup v1".to_string(),
        Some((Mode::V2, _)) => "cgroup v2".to_string(),
        Some((_, s)) => format!(
            "UNCONFINED: {}",
            s.unconfined_reason.as_deref().unwrap_or("?")
        ),
        None => "no containment".to_string(),
    };
    progress(&format!(
        "leaf: {} iterations, {} task(s), {cpus} CPU(s), {mode_note}",
        o.iterations, o.tasks
    ));

    let (mut setup, mut teardown, mut plain_setup, mut plain_teardown) =
        (hist(), hist(), hist(), hist());
    let mut setup_cpu = hist();
    let mut masks = 0;
    // A few untimed rounds first: the first mkdir in each hierarchy and the
    // first hwloc-backed binding warm caches that a running daemon has warm.
    let warm = 20.min(o.iterations);
    for i in 0..o.iterations + warm {
        let job_id = 1000 + i;
        let l = launch(job_id, o.tasks, cpus);
        let (t, c) = (Instant::now(), cpu_now());
        let m = set_up(&confined, &l)?;
        let (s, sc) = (t.elapsed(), cpu_now().saturating_sub(c));
        masks = m.masks;
        let t = Instant::now();
        tear_down(m, l.step_id)?;
        let d = t.elapsed();
        let t = Instant::now();
        let m = set_up(&plain, &l)?;
        let ps = t.elapsed();
        let t = Instant::now();
        tear_down(m, l.step_id)?;
        let pd = t.elapsed();
        if i >= warm {
            setup.record(us(s))?;
            teardown.record(us(d))?;
            plain_setup.record(us(ps))?;
            plain_teardown.record(us(pd))?;
            setup_cpu.record(us(sc))?;
        }
    }

    // fork+exec: one job, step and task cgroup for all of them (a `true`
    // leaves its cgroup empty again), the mask of task 0.
    let l = launch(999, 1, cpus);
    let setups = confined.tasks(&l, 0, 0..1).map_err(anyhow::Error::msg)?;
    let mask = setups.into_iter().next().and_then(|s| s.affinity);
    let job = confined
        .job(l.job_id, 0, l.held.first())
        .map_err(anyhow::Error::msg)?;
    let step = match &job {
        Some(j) => Some(j.step(StepName::Numbered(0), &Default::default())?),
        None => None,
    };
    let task = step.as_ref().map(|s| s.task(0)).transpose()?;
    let (mut fork_confined, mut fork_plain) = (hist(), hist());
    let forks = (o.iterations / 2).max(10);
    for i in 0..forks + warm {
        // Alternate, so drift on a shared machine hits both alike.
        let c = spawn_true(task.as_ref().map(|t| t.attach()), mask.as_ref())?;
        let p = spawn_true(None, None)?;
        if i >= warm {
            fork_confined.record(us(c))?;
            fork_plain.record(us(p))?;
        }
    }
    drop(task);
    if let Some(s) = step {
        leaf::end_step(s, l.job_id);
    }
    if let Some(j) = job {
        leaf::end_job(j);
    }
    drop(confined);
    drop(plain);

    let added = |a: &Histogram<u64>, b: &Histogram<u64>, q: f64| {
        (a.value_at_quantile(q) as f64 - b.value_at_quantile(q) as f64) / 1000.0
    };
    let t = o.tasks;
    let rows = vec![
        row(
            "setup_confined",
            &setup,
            &format!(
                "Leaf::tasks ({masks} of {t} tasks bound) + Leaf::job + StepGuard::new ({t} task cgroups); {mode_note}"
            ),
        ),
        row(
            "setup_plain",
            &plain_setup,
            "the same calls on a node with proctrack/linuxproc, task/none",
        ),
        row(
            "teardown_confined",
            &teardown,
            "drop StepGuard until its thread has removed the step, then end_job",
        ),
        row("teardown_plain", &plain_teardown, "nothing to tear down"),
        row(
            "setup_confined_cpu",
            &setup_cpu,
            "CPU time (user+system) of the confined set-up; the kernel's share is most of it",
        ),

        row(
            "fork_exec_confined",
            &fork_confined,
            "fork + attach to a task cgroup + sched_setaffinity + exec /bin/true + wait",
        ),
        row("fork_exec_plain", &fork_plain, "fork + exec /bin/true + wait"),
        // The launch's critical path: set-up, then each task's fork. The
        // teardown runs after the tasks have ended and is shown apart.
        Row::new("leaf")
            .set("metric", "added_launch")
            .num(
                "p50_ms",
                added(&setup, &plain_setup, 0.5)
                    + f64::from(t) * added(&fork_confined, &fork_plain, 0.5),
            )
            .num(
                "p99_ms",
                added(&setup, &plain_setup, 0.99)
                    + f64::from(t) * added(&fork_confined, &fork_plain, 0.99),
            )
            .set(
                "note",
                format!(
                    "set-up + {t} x fork+exec, confined minus plain at each quantile; goal p99 <= 5 ms"
                ),
            ),
        Row::new("leaf")
            .set("metric", "added_teardown")
            .num("p50_ms", added(&teardown, &plain_teardown, 0.5))
            .num("p99_ms", added(&teardown, &plain_teardown, 0.99))
            .set("note", "after the tasks, off the launch path"),
    ];
    for r in &rows {
        progress(&r.json());
    }
    Ok(rows)
}
