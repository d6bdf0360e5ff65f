//! `power`: power saving's costs.
//!
//! - Storm (real daemons): N simulated `State=CLOUD` nodes, all powered down;
//!   one job asks for all of them. The controller runs ResumeProgram once
//!   with the whole list (ResumeRate=0, as cloud sites set it); the
//!   program (a script) hands the list to the harness, which starts the
//!   simulated daemons at once, as a cloud's API would boot the instances.
//!   Measured from the submission: ResumeProgram run, every node registered
//!   (reachable), the job running (its launch is held until the last one
//!   registered), and every node IDLE once the job (5 s) ended.
//! - Interval (the production core in virtual time): the controller's
//!   periodic work per heartbeat interval (the power-saving pass, with its
//!   idle scan, and a scheduling pass) with M nodes of which 0% or 50% are
//!   powered down: the nodes each pass examines and its time. Powered-down
//!   nodes send no heartbeats (they have no daemon) and the pass does not
//!   look at them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use canopy::config::{hostlist, Config};
use canopy::ctld::{Command, Core};
use canopy::model::job::JobState;
use canopy::model::node::NodeResources;
use canopy::wire::messages::{Body, Hello, JobQuery, NodeQuery};
use canopy::wire::types::NodeInfo;

use crate::harness::{job, ClusterSpec, ConfExtra, Harness};
use crate::report::Row;

pub struct Opts {
    /// Cloud nodes in the storm (0: skip it).
    pub storm_nodes: u32,
    pub tree_width: u32,
    /// Nodes for the per-interval measurement (0: skip it).
    pub interval_nodes: u32,
    /// Intervals measured per configuration.
    pub rounds: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    if o.interval_nodes > 0 {
        for pct in [0u32, 50] {
            let row = interval(o.interval_nodes, pct, o.rounds.max(1))?;
            progress(&row.json());
            rows.push(row);
        }
    }
    if o.storm_nodes > 0 {
        let row = storm(o.storm_nodes, o.tree_width, progress)?;
        progress(&row.json());
        rows.push(row);
    }
    Ok(rows)
}

fn nodes(h: &Harness) -> Result<Vec<NodeInfo>> {
    match h.call(Body::QueryNodes(NodeQuery::default()))? {
        Body::Nodes(n) => Ok(n),
        other => bail!("unexpected reply {}", other.kind()),
    }
}

fn job_state(h: &Harness, id: u32) -> Result<Option<JobState>> {
    match h.call(Body::QueryJobs(JobQuery {
        job_ids: vec![id],
        include_finished: true,
        brief: true,
    }))? {
        Body::Jobs(j) => Ok(j.into_rows().into_iter().next().map(|j| j.state)),
        other => bail!("unexpected reply {}", other.kind()),
    }
}

/// How long the storm's job "runs" on the simulated nodes.
const JOB_RUNS: Duration = Duration::from_secs(5);

/// The storm: see the module header.
fn storm(n: u32, width: u32, progress: &mut dyn FnMut(&str)) -> Result<Row> {
    progress(&format!(
        "power: storm of {n} cloud nodes, TreeWidth {width}"
    ));
    let spec = ClusterSpec {
        nodes: n,
        tree_width: width,
        slurmd_timeout: 30,
        cpus: 2,
        job_runtime: JOB_RUNS,
        start_nodes: false,
        dynamic: 0,
    };
    let extra = ConfExtra {
        globals:
            "ResumeProgram={dir}/resume.sh\nResumeRate=0\nResumeTimeout=600\nPrivateData=cloud\n\
                  SlurmctldParameters=power_save_interval=1\n"
                .into(),
        node_attrs: "State=CLOUD".into(),
    };
    let mut h = Harness::start_with(spec, &extra, progress)?;
    let requests = h.path.join("resume.requests");
    let script = h.path.join("resume.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$1\" >> {}\n", requests.display()),
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    h.start_sims(true, progress)?;
    h.wait(Duration::from_secs(60), "every node powered down", |h| {
        nodes(h).is_ok_and(|v| v.len() == n as usize && v.iter().all(|x| x.power.powered_down))
    })?;
    let t0 = Instant::now();
    let id = match h.call(Body::SubmitJob(Box::new(job(
        "storm".into(),
        false,
        Some(n),
    ))))? {
        Body::SubmitReply(r) => r.job_id,
        other => bail!("unexpected reply {}", other.kind()),
    };
    // The ResumeProgram's requests, handed to the simulation processes.
    let mut handed = 0usize;
    let mut t_program = None;
    let limit = Duration::from_secs(120 + u64::from(n) / 10);
    let mut t_running = None;
    let mut t_registered = None;
    while t0.elapsed() < limit {
        let text = std::fs::read_to_string(&requests).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[handed.min(lines.len())..] {
            t_program.get_or_insert(t0.elapsed());
            let names = hostlist::expand(l.trim()).context("ResumeProgram's host list")?;
            let ranks: Vec<u32> = names
                .iter()
                .filter_map(|x| h.conf.node_index(x).map(|r| r as u32))
                .collect();
            h.send("start", &ranks)?;
        }
        handed = lines.len();
        // Powering-up nodes count as not responding until they are reached.
        if t_program.is_some() && t_registered.is_none() && h.try_stats()?.nodes.not_responding == 0
        {
            t_registered = Some(t0.elapsed());
        }
        match job_state(&h, id)? {
            Some(JobState::Running) => {
                t_running = Some(t0.elapsed());
                break;
            }
            Some(JobState::Pending | JobState::Configuring) | None => {}
            Some(other) => bail!(
                "the storm's job ended {} before it was seen running",
                other.name()
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let Some(t_running) = t_running else {
        bail!(
            "the job did not start within {limit:?} (logs in {})",
            h.path.display()
        );
    };
    let t_idle = h.wait(limit, "every node IDLE after the job", |h| {
        h.try_stats().is_ok_and(|s| s.nodes.idle == n)
    })? + t_running;
    let cpu = h.ctld_cpu()?;
    Ok(Row::new("power")
        .set("measure", "storm")
        .set("nodes", n)
        .set("tree_width", width)
        .num(
            "resume_program_s",
            t_program.unwrap_or_default().as_secs_f64(),
        )
        .num(
            "all_registered_s",
            t_registered.unwrap_or(t_running).as_secs_f64(),
        )
        .num("job_running_s", t_running.as_secs_f64())
        .num("all_idle_s", t_idle.as_secs_f64())
        .num("job_runs_s", JOB_RUNS.as_secs_f64())
        .num("ctld_cpu_s", cpu.as_secs_f64())
        .num("ctld_rss_mb", h.ctld_rss_mb()?))
}

/// The controller's periodic work with `pct`% of `n` nodes powered down.
fn interval(n: u32, pct: u32, rounds: u32) -> Result<Row> {
    let down = n * pct / 100;
    let on = n - down;
    let mut text = "ClusterName=lt\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=30\n\
                    SuspendProgram=/bin/true\nResumeProgram=/bin/true\nSuspendTime=3600\n"
        .to_string();
    if on > 0 {
        text.push_str(&format!("NodeName=on[1-{on}] CPUs=4\n"));
    }
    if down > 0 {
        text.push_str(&format!("NodeName=cl[1-{down}] CPUs=4 State=CLOUD\n"));
    }
    text.push_str("PartitionName=p Nodes=ALL Default=YES\n");
    let conf = Config::parse_str(&text, std::path::Path::new("/lt/slurm.conf"))
        .context("the scenario's slurm.conf")?;
    let t0 = 1_800_000_000i64;
    let conf = Arc::new(conf);
    let (mut core, _) = Core::recover(conf.clone(), vec![], None, &HashMap::new(), t0);
    for rank in 0..on {
        let hello = Hello {
            node: conf.nodes[rank as usize].name.clone(),
            rank,
            boot_id: 1,
            started: t0,
            version: "lt".into(),
            resources: NodeResources {
                cpus: 4,
                sockets: 1,
                cores_per_socket: 4,
                threads_per_core: 1,
                real_memory_mb: 1,
                boards: 1,
                gpus: Vec::new(),
            },
            jobs: Vec::new(),
        };
        core.apply(
            t0,
            Command::NodeRegistered {
                hello: Box::new(hello),
                via: None,
            },
        );
    }
    core.apply(
        t0,
        Command::NodeReachability {
            added: (0..on).collect(),
            removed: Vec::new(),
        },
    );
    let hb = conf.heartbeat_interval().as_secs().max(1) as i64;
    let (mut power_us, mut sched_us, mut examined) = (Vec::new(), Vec::new(), 0u64);
    for i in 0..rounds {
        let now = t0 + 1 + i64::from(i) * hb;
        let t = Instant::now();
        let out = core.apply(now, Command::PowerSave);
        power_us.push(t.elapsed().as_secs_f64() * 1e6);
        examined += core.power_state().last.examined;
        if !out.effects.is_empty() && i == 0 {
            // Nothing is due: a pass that acts would measure something else.
            bail!("the power pass acted: {:?}", out.effects.len());
        }
        let t = Instant::now();
        core.apply(now, Command::Schedule);
        sched_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // Medians: a pass takes microseconds, and one preemption would
    // swamp a mean.
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    Ok(Row::new("power")
        .set("measure", "interval")
        .set("nodes", n)
        .set("powered_down_pct", pct)
        .num("heartbeat_interval_s", hb as f64)
        .num(
            "nodes_examined_per_interval",
            examined as f64 / f64::from(rounds),
        )
        .num("power_pass_us", median(&mut power_us))
        .num("sched_pass_us", median(&mut sched_us)))
}
