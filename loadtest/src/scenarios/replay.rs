//! `replay`: a job trace in the Standard Workload Format (SWF, the Parallel
//! Workloads Archive's format) driven through the production controller
//! core in virtual time. The core reads no clock, so the harness is the
//! world around it: it submits each job at its trace time, ends it when its
//! run time is up (or lets the core's time limit end it), and calls the
//! scheduling pass as the controller actor would. A week of jobs replays in
//! seconds, and two scheduler settings compare on the same trace.
//!
//! Reported per policy: utilization (core-seconds used over core-seconds
//! available from the first submit to the last end), mean and p95 wait,
//! mean bounded slowdown (τ = 10 s: `max(1, (wait + run) / max(run, τ))`),
//! and how much faster than real time the replay ran.
//!
//! Without a trace file, a small seeded generator makes one (Poisson
//! arrivals at a target load, power-of-two widths, log-uniform run times
//! and user over-estimates of them, as real traces show).

use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use canopy::config::Config;
use canopy::ctld::{Command, Core, Effect, Output, Reply};
use canopy::model::acct::Usage;
use canopy::model::job::{ExitStatus, JobState, JobSubmit};
use canopy::model::reason::JobReason;
use canopy::policy::authz::Caller;
use canopy::wire::messages::Hello;

use super::Lcg;
use crate::report::Row;

/// The bound of the bounded slowdown, seconds (the usual τ = 10 s).
const TAU: f64 = 10.0;
/// How often the controller's periodic timer runs (purging old records).
const TICK_S: i64 = 300;

pub struct Opts {
    /// An SWF file; `None` generates `jobs` jobs from `seed`.
    pub trace: Option<PathBuf>,
    pub jobs: u32,
    pub seed: u64,
    pub nodes: u32,
    pub cores: u32,
    /// Offered load of the generated trace (core-seconds asked per
    /// core-second of the machine).
    pub load: f64,
    /// `SchedulerType` values to compare.
    pub schedulers: Vec<String>,
}

/// One job of a trace, in the units the replay needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceJob {
    pub submit: i64,
    /// Seconds it really ran.
    pub run: i64,
    /// Cores (tasks of one CPU each) it asked for.
    pub procs: u32,
    /// Its requested time, seconds (what the scheduler plans with).
    pub limit: i64,
    pub user: u32,
}

/// Read an SWF trace: `;` lines are the header; each other line has 18
/// whitespace-separated fields (-1 where unknown). Jobs that never ran or
/// asked for nothing are dropped; the count dropped is returned with them.
pub fn parse_swf(text: &str) -> Result<(Vec<TraceJob>, usize)> {
    let mut jobs = Vec::new();
    let mut dropped = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 18 {
            bail!("line {}: {} fields, an SWF job line has 18", i + 1, f.len());
        }
        let num = |k: usize| -> Result<i64> {
            f[k].parse::<f64>().map(|v| v as i64).with_context(|| {
                format!(
                    "line {}: field {} ({:?}) is not a number",
                    i + 1,
                    k + 1,
                    f[k]
                )
            })
        };
        let (submit, run, alloc, req_procs, req_time, user) =
            (num(1)?, num(3)?, num(4)?, num(7)?, num(8)?, num(11)?);
        let procs = if req_procs > 0 { req_procs } else { alloc };
        if run <= 0 || procs <= 0 || submit < 0 {
            dropped += 1;
            continue;
        }
        // A job without a requested time plans with its run time (the
        // scheduler then knows it exactly); one that ran past its request
        // is held to it, as the system that recorded it should have.
        let limit = if req_time > 0 { req_time } else { run };
        jobs.push(TraceJob {
            submit,
            run: run.min(limit),
            procs: u32::try_from(procs).unwrap_or(u32::MAX),
            limit,
            user: u32::try_from(user.max(0)).unwrap_or(0),
        });
    }
    jobs.sort_by_key(|j| j.submit);
    Ok((jobs, dropped))
}

/// A seeded trace: `n` jobs offered at `load` to `cores_total` cores.
pub fn generate(n: u32, seed: u64, cores_total: u32, load: f64) -> Vec<TraceJob> {
    let mut r = Lcg::new(seed);
    let mut unit = || f64::from(r.below(1_000_000)) / 1_000_000.0 + 0.5e-6;
    let max_log = (f64::from(cores_total) / 4.0).log2().max(0.0);
    let mut shapes: Vec<(u32, i64, i64, u32)> = (0..n)
        .map(|_| {
            // A third serial jobs, the rest powers of two up to a quarter
            // of the machine.
            let procs = if unit() < 0.33 {
                1
            } else {
                2f64.powf((unit() * max_log).round()) as u32
            };
            // Run times log-uniform from a minute to a day; users ask for
            // 1–5× what they use, in whole minutes, and 10% run to it.
            let run = (60.0 * 1440f64.powf(unit())) as i64;
            let asked = ((run as f64 * (1.0 + 4.0 * unit())) / 60.0).ceil() as i64 * 60;
            let run = if unit() < 0.1 { asked } else { run };
            let user = (unit() * 100.0) as u32;
            (procs.max(1), run.max(1), asked.max(60), user)
        })
        .collect();
    let work: f64 = shapes
        .iter()
        .map(|&(p, run, _, _)| f64::from(p) * run as f64)
        .sum();
    let span = work / (f64::from(cores_total) * load.max(0.01));
    let mean_gap = span / f64::from(n.max(1));
    let mut t = 0.0;
    shapes
        .drain(..)
        .map(|(procs, run, limit, user)| {
            t += -mean_gap * unit().ln();
            TraceJob {
                submit: t as i64,
                run,
                procs,
                limit,
                user,
            }
        })
        .collect()
}

/// What the replay measured for one scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub jobs: usize,
    pub utilization: f64,
    pub mean_wait: f64,
    pub p95_wait: f64,
    pub mean_bsld: f64,
    /// Virtual seconds from the first submit to the last end.
    pub span: i64,
    pub wall_s: f64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Ordered first at one instant: ends free resources before the pass.
    End(u32),
    Wake,
    /// The controller's backfill timer (every `bf_interval`).
    Backfill,
    Submit(usize),
}

fn config(nodes: u32, cores: u32, scheduler: &str) -> Result<Arc<Config>> {
    // Cores are the consumable (no memory), the queue may hold the whole
    // trace, and finished records go after five minutes, as in a busy site.
    let text = format!(
        "ClusterName=replay\nSlurmctldHost=ctl(127.0.0.1)\nSchedulerType={scheduler}\n\
         SelectTypeParameters=CR_Core\nMaxJobCount=5000000\nMinJobAge=300\n\
         NodeName=n[1-{nodes}] CPUs={cores} RealMemory=100000\n\
         PartitionName=batch Nodes=ALL Default=YES MaxTime=UNLIMITED\n"
    );
    Ok(Arc::new(
        Config::parse_str(&text, Path::new("/replay/slurm.conf"))
            .map_err(|e| anyhow::anyhow!("replay config: {e}"))?,
    ))
}

/// Replay `jobs` on `nodes` × `cores` under `SchedulerType=scheduler`.
pub fn replay(jobs: &[TraceJob], nodes: u32, cores: u32, scheduler: &str) -> Result<Outcome> {
    let conf = config(nodes, cores, scheduler)?;
    let cores_total = u64::from(nodes) * u64::from(cores);
    let wall = Instant::now();
    let start = jobs.first().map_or(0, |j| j.submit);
    let (mut core, out) = Core::recover(conf.clone(), Vec::new(), None, &HashMap::new(), start);
    let mut w = World::default();
    w.take(out, start);
    for (rank, nc) in conf.nodes.iter().enumerate() {
        let hello = Hello {
            node: nc.name.clone(),
            rank: rank as u32,
            boot_id: 1,
            started: start,
            version: "replay".into(),
            resources: canopy::daemon::hardware::configured(nc),
            jobs: Vec::new(),
        };
        let out = core.apply(
            start,
            Command::NodeRegistered {
                hello: Box::new(hello),
                via: None,
            },
        );
        w.take(out, start);
    }
    let out = core.apply(
        start,
        Command::NodeReachability {
            added: (0..nodes).collect(),
            removed: Vec::new(),
        },
    );
    w.take(out, start);
    for (i, j) in jobs.iter().enumerate() {
        if u64::from(j.procs) > cores_total {
            continue;
        }
        w.events
            .push(std::cmp::Reverse((j.submit, Event::Submit(i))));
        w.work += 1;
    }
    w.events
        .push(std::cmp::Reverse((start + TICK_S, Event::Wake)));
    let mut next_tick = start + TICK_S;
    // Under sched/backfill, the backfill pass every bf_interval, as the
    // controller's timer sends it; skipped while nothing changed since the
    // last one (the pass would find what it found then).
    let bf_interval = conf
        .sched
        .backfill
        .then_some(conf.sched.bf_interval_s)
        .flatten()
        .map(i64::from);
    if let Some(i) = bf_interval {
        w.events
            .push(std::cmp::Reverse((start + i, Event::Backfill)));
    }
    let mut changed = false;
    let root = Caller {
        uid: 0,
        operator: true,
    };
    while let Some(std::cmp::Reverse((now, _))) = w.events.peek() {
        let now = *now;
        // Everything due at this instant, then one pass (the shell
        // coalesces scheduling requests the same way).
        while let Some(std::cmp::Reverse((t, _))) = w.events.peek() {
            if *t != now {
                break;
            }
            let Some(std::cmp::Reverse((_, ev))) = w.events.pop() else {
                break;
            };
            match ev {
                Event::Submit(i) => {
                    w.work -= 1;
                    let j = &jobs[i];
                    let submit = JobSubmit {
                        name: format!("t{i}"),
                        user: format!("u{}", j.user),
                        uid: 10_000 + j.user,
                        gid: 10_000 + j.user,
                        ntasks: Some(j.procs),
                        time_limit_min: Some(((j.limit + 59) / 60).max(1) as u32),
                        script: "#!/bin/sh\n".into(),
                        workdir: "/".into(),
                        ..Default::default()
                    };
                    let out = core.apply(
                        now,
                        Command::Submit {
                            submit: Box::new(submit),
                            caller: root,
                        },
                    );
                    if let Some(Reply::Submit(Ok(r))) = &out.reply {
                        w.trace_of.insert(r.job_id, i);
                    }
                    changed = true;
                    w.take(out, now);
                }
                Event::End(id) => {
                    w.work -= 1;
                    if w.ended.contains_key(&id) || !w.started.contains_key(&id) {
                        continue;
                    }
                    w.ended.insert(id, now);
                    changed = true;
                    let (state, reason, exit) = match w.ending.remove(&id) {
                        Some(e) => e,
                        None => (JobState::Completed, JobReason::None, ExitStatus::default()),
                    };
                    let out = core.apply(
                        now,
                        Command::JobEnded {
                            job_id: id,
                            state,
                            exit,
                            reason,
                            usage: Usage::default(),
                        },
                    );
                    w.take(out, now);
                }
                Event::Backfill => {
                    if std::mem::take(&mut changed) {
                        let out = core.apply(now, Command::Backfill);
                        w.take(out, now);
                    }
                    if let Some(i) = bf_interval.filter(|_| w.live()) {
                        w.events.push(std::cmp::Reverse((now + i, Event::Backfill)));
                    }
                }
                Event::Wake => {
                    if now >= next_tick {
                        next_tick = now + TICK_S;
                        let out = core.apply(now, Command::Tick);
                        w.take(out, now);
                        // Only while something else is still to come, or
                        // the replay never ends.
                        if w.live() {
                            w.events.push(std::cmp::Reverse((next_tick, Event::Wake)));
                        }
                    }
                }
            }
            w.pass = true;
        }
        // Starting jobs may let more start (the core asks again): bounded,
        // each round starts something or stops.
        for _ in 0..64 {
            if !std::mem::take(&mut w.pass) {
                break;
            }
            let out = core.apply(now, Command::Schedule);
            w.take(out, now);
            // Run times of what just started.
            for (id, at) in std::mem::take(&mut w.just_started) {
                if let Some(&i) = w.trace_of.get(&id) {
                    let j = &jobs[i];
                    // A job that runs to its limit is ended by the core's
                    // own deadline (TIMEOUT), not by the world.
                    if j.run < j.limit {
                        w.events
                            .push(std::cmp::Reverse((at + j.run, Event::End(id))));
                        w.work += 1;
                    }
                }
            }
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let mut waits = Vec::new();
    let (mut used, mut bsld, mut last_end) = (0f64, 0f64, start);
    for (&id, &s) in &w.started {
        let Some(&i) = w.trace_of.get(&id) else {
            continue;
        };
        let j = &jobs[i];
        let end = w.ended.get(&id).copied().unwrap_or(s + j.run);
        let run = (end - s).max(0) as f64;
        let wait = (s - j.submit).max(0) as f64;
        used += run * f64::from(j.procs);
        bsld += ((wait + run) / run.max(TAU)).max(1.0);
        waits.push(wait);
        last_end = last_end.max(end);
    }
    let n = waits.len();
    if n == 0 {
        bail!("no job of the trace ran");
    }
    if n < w.trace_of.len() {
        bail!(
            "{} of {} submitted jobs never started",
            w.trace_of.len() - n,
            w.trace_of.len()
        );
    }
    waits.sort_by(f64::total_cmp);
    let span = (last_end - start).max(1);
    Ok(Outcome {
        jobs: n,
        utilization: used / (cores_total as f64 * span as f64),
        mean_wait: waits.iter().sum::<f64>() / n as f64,
        p95_wait: waits[((n as f64 * 0.95).ceil() as usize).clamp(1, n) - 1],
        mean_bsld: bsld / n as f64,
        span,
        wall_s,
    })
}

/// The world around the core: what it started, what is due when.
#[derive(Default)]
struct World {
    events: BinaryHeap<std::cmp::Reverse<(i64, Event)>>,
    /// Core job id → index in the trace.
    trace_of: HashMap<u32, usize>,
    started: HashMap<u32, i64>,
    just_started: Vec<(u32, i64)>,
    ended: HashMap<u32, i64>,
    /// How the core asked a job to end (its time limit), reported back.
    ending: HashMap<u32, (JobState, JobReason, ExitStatus)>,
    pass: bool,
    /// Submissions and ends still queued.
    work: usize,
}

impl World {
    /// Something is still to happen: a submission or an end queued, or a
    /// job running (one that runs to its limit is ended by the core's own
    /// wake-up). The periodic timers stop once nothing is.
    fn live(&self) -> bool {
        self.work > 0 || self.started.len() > self.ended.len()
    }

    /// Carry out a command's effects: nothing is written (the store is not
    /// what is measured), starts are noted, wake-ups queued.
    fn take(&mut self, out: Output, now: i64) {
        for e in out.effects {
            match e {
                Effect::StartJob(s) if s.launch.is_some() => {
                    self.started.insert(s.job_id, now);
                    self.just_started.push((s.job_id, now));
                }
                Effect::EndJob {
                    job_id,
                    state,
                    reason,
                    exit,
                    ..
                } => {
                    let exit = exit.unwrap_or(ExitStatus {
                        code: 0,
                        signal: 15,
                    });
                    self.ending.entry(job_id).or_insert((state, reason, exit));
                    self.events
                        .push(std::cmp::Reverse((now, Event::End(job_id))));
                    self.work += 1;
                }
                Effect::WakeAt(t) => {
                    self.events
                        .push(std::cmp::Reverse((t.max(now), Event::Wake)));
                }
                Effect::Reschedule => self.pass = true,
                _ => {}
            }
        }
    }
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let (jobs, dropped, source) = match &o.trace {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading trace {}", p.display()))?;
            let (jobs, dropped) = parse_swf(&text)?;
            (jobs, dropped, p.display().to_string())
        }
        None => (
            generate(o.jobs, o.seed, o.nodes * o.cores, o.load),
            0,
            format!("generated (seed {}, load {})", o.seed, o.load),
        ),
    };
    if jobs.is_empty() {
        bail!("the trace has no job that ran");
    }
    progress(&format!(
        "replay: {} jobs ({dropped} dropped) from {source} on {} nodes x {} cores",
        jobs.len(),
        o.nodes,
        o.cores
    ));
    let mut rows = Vec::new();
    for s in &o.schedulers {
        let r = replay(&jobs, o.nodes, o.cores, s)?;
        progress(&format!(
            "replay: {s}: utilization {:.3}, mean wait {:.0} s, mean bsld {:.2}, {:.1} s wall",
            r.utilization, r.mean_wait, r.mean_bsld, r.wall_s
        ));
        rows.push(
            Row::new("replay")
                .set("trace", source.clone())
                .set("scheduler", s.clone())
                .set("jobs", r.jobs)
                .set("nodes", o.nodes)
                .set("cores", o.cores)
                .num("utilization", r.utilization)
                .num("mean_wait_s", r.mean_wait)
                .num("p95_wait_s", r.p95_wait)
                .num("mean_bsld", r.mean_bsld)
                .set("virtual_s", r.span)
                .num("wall_s", r.wall_s)
                .num("x_real_time", r.span as f64 / r.wall_s.max(1e-9)),
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swf_lines_parse_and_bad_ones_are_named() {
        let text = "; Version: 2.2\n; MaxProcs: 64\n\
                    1 0 5 100 4 -1 -1 4 600 -1 1 7 1 -1 1 -1 -1 -1\n\
                    2 10 0 -1 4 -1 -1 4 600 -1 0 7 1 -1 1 -1 -1 -1\n\
                    3 20 0 900 8 -1 -1 -1 -1 -1 1 9 1 -1 1 -1 -1 -1\n";
        let (jobs, dropped) = parse_swf(text).unwrap();
        assert_eq!(dropped, 1, "the job that never ran");
        assert_eq!(
            jobs[0],
            TraceJob {
                submit: 0,
                run: 100,
                procs: 4,
                limit: 600,
                user: 7
            }
        );
        // No requested procs or time: allocated procs, and the run time.
        assert_eq!((jobs[1].procs, jobs[1].limit), (8, 900));
        let err = parse_swf("1 0 5\n").unwrap_err().to_string();
        assert!(err.contains("line 1: 3 fields"), "{err}");
        let err = parse_swf("1 x 5 100 4 -1 -1 4 600 -1 1 7 1 -1 1 -1 -1 -1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("field 2"), "{err}");
    }

    #[test]
    fn a_generated_trace_replays_to_completion_with_sane_figures() {
        let jobs = generate(300, 7, 64, 0.8);
        assert_eq!(jobs, generate(300, 7, 64, 0.8), "the seed replays");
        let r = replay(&jobs, 8, 8, "sched/builtin").unwrap();
        assert_eq!(r.jobs, 300);
        assert!(r.utilization > 0.0 && r.utilization <= 1.0, "{r:?}");
        assert!(r.mean_bsld >= 1.0 && r.p95_wait >= 0.0, "{r:?}");
        // The same trace replays to the same figures.
        let again = replay(&jobs, 8, 8, "sched/builtin").unwrap();
        assert_eq!((r.mean_wait, r.span), (again.mean_wait, again.span));
        // Backfill, through the controller's Command::Backfill, fills the
        // holes FIFO leaves in front of wide jobs on this trace.
        let bf = replay(&jobs, 8, 8, "sched/backfill").unwrap();
        assert_eq!(bf.jobs, 300);
        assert!(bf.mean_wait < r.mean_wait, "{bf:?} against {r:?}");
        assert!(bf.mean_bsld < r.mean_bsld, "{bf:?} against {r:?}");
    }
}
