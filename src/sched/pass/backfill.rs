//! The backfill pass (Slurm's `sched/backfill`): pending jobs in priority
//! order across partitions; a job that can start now without delaying any
//! reservation starts; a job that cannot gets a reservation at the
//! earliest time its resources (cores, memory, GRES) come free, computed
//! from running jobs' time limits, and later jobs may not use those
//! resources in that window. Pure: it takes `now` and reads no clock.
//!
//! Policy is asked through the [`StartGate`]: `blocked` holds a job (it
//! neither starts nor reserves), `scope` says where and when it may run
//! (a reservation's nodes and window), `set_aside` lays the advance
//! reservations' windows on the timeline as fences (see `timeline.rs`),
//! `started` hears every start. A start now and a future start are both
//! queries of the timeline with the job's scope, so a job outside a
//! reservation neither starts nor plans across that reservation's window
//! on its nodes (a wide job's plan goes after it, or onto other nodes),
//! and a reservation's job plans on its nodes inside its window. Unlike
//! Slurm 22.05, which plans nothing for a job whose reservation has not
//! begun ("reservation defer"), such a job gets a plan from that start, so
//! `squeue --start` shows when it should run.
//!
//! What it does not do: preemption, several partitions per job (canopy
//! jobs have one), licenses (the gate's business).
//!
//! `bf_max_job_test` bounds the jobs tried for a *future* start (a
//! reservation), which is where a pass's cost lies; unlike Slurm, which
//! stops its walk there, every later job is still tried for an immediate
//! start (cheap: counts of free CPUs answer most of them without looking at
//! a node). Such a job has no reservation to protect, as in Slurm, and may
//! only start where it delays none of the reservations made.
//!
//! One more thing makes a pass over 100,000 jobs cheap: within a pass
//! nothing ever comes free (starts and reservations only take), so once a
//! shape of job (its request and its nodes) has failed to start now, or to
//! find a start inside the window, for some run time, every later job of
//! the same shape with at least that run time fails the same way and is
//! answered from a table instead of the timeline.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use super::timeline::{Need, Timeline, NEVER};
use crate::config::SchedConf;
use crate::model::job::{JobRecord, JobState};
use crate::model::partition::PartitionState;
use crate::model::time::UnixTime;
use crate::sched::gate::{Scope, StartGate};
use crate::sched::table::{JobTable, PartitionView};
use crate::sched::{apply, MemRequest, NodeDirectory, NodeSlot, Request};

/// A job's planned start: when, and on which nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub job_id: u32,
    pub start: UnixTime,
    pub ranks: Vec<u32>,
    /// What it holds there (CPU ids, memory, GRES).
    pub alloc: crate::model::job::Allocation,
}

/// What one pass did, for the controller and `sdiag`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Jobs started now, in the order started.
    pub started: Vec<u32>,
    /// Jobs given a reservation, in priority order.
    pub planned: Vec<Planned>,
    /// Pending jobs in the queue when the pass began.
    pub queue_len: u32,
    /// Jobs the pass looked at (Slurm's "depth").
    pub depth: u32,
    /// Jobs it tried to place (past the gate and the per-user/partition
    /// caps: Slurm's "depth (try sched)").
    pub depth_try: u32,
    /// The timeline's size at the end: usage changes over all nodes.
    pub table_size: u32,
}

/// The cluster as the pass sees it.
pub struct Input<'a> {
    pub parts: &'a [PartitionView<'a>],
    /// Each partition's (`DefaultTime`, `MaxTime`) in minutes, same order:
    /// the run time of a job without its own limit.
    pub part_limits: &'a [(Option<u32>, Option<u32>)],
    pub nodes: &'a dyn NodeDirectory,
    pub params: &'a SchedConf,
    /// Each partition's PriorityTier, same order as `parts` (empty: all
    /// alike): jobs of a higher tier are walked first, whatever their
    /// priority, as slurmctld sorts its job queue.
    pub tiers: &'a [u16],
}

/// How long `j` may run, in seconds ([`NEVER`] without any limit).
fn run_secs(j: &JobRecord, limits: Option<&(Option<u32>, Option<u32>)>) -> i64 {
    let min = j
        .time_limit_min
        .or_else(|| limits.and_then(|(default, max)| default.or(*max)));
    min.map_or(NEVER, |m| i64::from(m) * 60)
}

/// A job's shape for the failure table: its request, where it may go, and
/// which reservations bind it.
fn shape_key(req: &Request, nodes: &[u32], part: usize, restricted: bool, scope: &Scope) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        part,
        req.nodes,
        req.ntasks,
        req.cpus_per_task,
        req.ntasks_per_node,
    )
        .hash(&mut h);
    match req.mem {
        MemRequest::None => 0u64.hash(&mut h),
        MemRequest::PerNode(m) => (1u64, m).hash(&mut h),
        MemRequest::PerCpu(m) => (2u64, m).hash(&mut h),
        MemRequest::PerGpu(m) => (3u64, m).hash(&mut h),
    }
    (&req.required, &req.excluded, req.exclusive, &req.node_sets).hash(&mut h);
    if req.res != Default::default() {
        format!("{:?}", req.res).hash(&mut h);
    }
    if restricted {
        nodes.hash(&mut h);
    }
    (scope.exempt, scope.not_before, scope.not_after).hash(&mut h);
    h.finish()
}

/// The nodes of partition `ranks` (`member`: the same as a map) that
/// `scope` lets a job use, in the scope's order, its preferred ones first;
/// and whether that is not simply the partition's list.
fn scoped<'a>(
    scope: &Scope,
    ranks: &'a [u32],
    member: &[bool],
) -> (std::borrow::Cow<'a, [u32]>, bool) {
    let of_part = |r: &u32| member.get(*r as usize).copied().unwrap_or(false);
    match (&scope.nodes, &scope.prefer) {
        (None, None) => (std::borrow::Cow::Borrowed(ranks), false),
        (Some(nodes), _) => (
            std::borrow::Cow::Owned(nodes.iter().copied().filter(of_part).collect()),
            true,
        ),
        (None, Some(first)) => {
            let firsts: std::collections::HashSet<u32> = first.iter().copied().collect();
            let mut v: Vec<u32> = first.iter().copied().filter(of_part).collect();
            v.extend(ranks.iter().copied().filter(|r| !firsts.contains(r)));
            (std::borrow::Cow::Owned(v), true)
        }
    }
}

/// The shortest run times that failed, per shape, in this pass.
#[derive(Default)]
struct Failures {
    now: HashMap<u64, i64>,
    window: HashMap<u64, i64>,
}

fn failed(table: &HashMap<u64, i64>, key: u64, d: i64) -> bool {
    table.get(&key).is_some_and(|&f| d >= f)
}

fn note(table: &mut HashMap<u64, i64>, key: u64, d: i64) {
    let e = table.entry(key).or_insert(d);
    *e = (*e).min(d);
}

/// One backfill pass at `now` over `table`'s queued jobs: starts what can
/// start without delaying a reservation (applied to `slots` and the
/// records), plans the rest within `bf_max_job_test` and `bf_window`.
pub fn backfill(
    table: &mut JobTable,
    slots: &mut [NodeSlot],
    now: UnixTime,
    input: &Input<'_>,
    gate: &mut dyn StartGate,
) -> Report {
    let p = input.params;
    let part_index: HashMap<&str, usize> = input
        .parts
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name, i))
        .collect();
    let limits_of = |name: &str| part_index.get(name).and_then(|&i| input.part_limits.get(i));
    let running = table.running().filter_map(|j| {
        // A job suspended for a preemptor gives back only what it holds.
        let alloc = j.held_alloc()?;
        let d = run_secs(j, limits_of(&j.partition));
        let start = j.start_time.unwrap_or(now);
        // A suspended job's clock stops: take it as ending no sooner than
        // the rest of its limit from now; one that was suspended before
        // ends that much later.
        let stopped = i64::try_from(j.suspend.total_secs).unwrap_or(i64::MAX);
        let end = if j.state == JobState::Suspended {
            let ran = i64::try_from(j.suspend.pre_secs).unwrap_or(0);
            now.saturating_add((d - ran).max(0))
        } else {
            start.saturating_add(d).saturating_add(stopped)
        };
        Some((end.min(NEVER), alloc))
    });
    let resolution = i64::from(p.bf_resolution_s.max(1));
    let memory = input.nodes.cr().memory;
    let mut tl = Timeline::new(now, resolution, slots, running, memory);
    let largest = slots.iter().map(|s| s.cpus).max().unwrap_or(1);
    let window_end = now.saturating_add(i64::from(p.bf_window_min) * 60);
    tl.set_aside(&gate.set_aside(now, window_end));
    // Membership of each partition, for filtering the nodes with room now.
    let members: Vec<Vec<bool>> = input
        .parts
        .iter()
        .map(|v| {
            let mut m = vec![false; slots.len()];
            for &r in v.ranks {
                if let Some(b) = m.get_mut(r as usize) {
                    *b = true;
                }
            }
            m
        })
        .collect();
    let sorted: Vec<bool> = input
        .parts
        .iter()
        .map(|v| v.ranks.windows(2).all(|w| w[0] < w[1]))
        .collect();
    let mut room_now: std::collections::BTreeSet<u32> = (0..slots.len() as u32)
        .filter(|&r| tl.has_room_now(r as usize))
        .collect();

    let tier_of: HashMap<&str, u16> = input
        .parts
        .iter()
        .zip(input.tiers)
        .map(|(p, &t)| (p.name, t))
        .collect();
    let order = table.queue_order(|part| tier_of.get(part).copied().unwrap_or(1));
    let mut report = Report {
        queue_len: order.len() as u32,
        ..Default::default()
    };
    let mut per_user: HashMap<u32, u32> = HashMap::new();
    let mut per_part: HashMap<usize, u32> = HashMap::new();
    let mut failures = Failures::default();
    // Jobs tried for a future start: what `bf_max_job_test` bounds.
    let mut planned_tries = 0u32;
    for id in order {
        let Some(job) = table.get(id) else {
            continue;
        };
        let Some(&pi) = part_index.get(job.partition.as_str()) else {
            continue;
        };
        let part = &input.parts[pi];
        if part.state != PartitionState::Up {
            continue;
        }
        if table.is_throttled(id) || job.submit.begin_time.is_some_and(|t| t > now) {
            continue;
        }
        report.depth += 1;
        if p.bf_max_job_user > 0 {
            let n = per_user.entry(job.submit.uid).or_default();
            if *n >= p.bf_max_job_user {
                continue;
            }
            *n += 1;
        }
        if p.bf_max_job_part > 0 {
            let n = per_part.entry(pi).or_default();
            if *n >= p.bf_max_job_part {
                continue;
            }
            *n += 1;
        }
        if gate.blocked(job, now).is_some() {
            continue;
        }
        let scope = match gate.scope(job, part.ranks, now) {
            None => Scope::default(),
            Some(Ok(s)) => s,
            Some(Err(_)) => continue,
        };
        let (candidates, restricted) = scoped(&scope, part.ranks, &members[pi]);
        let Ok(req) = Request::for_job(&job.submit, input.nodes) else {
            continue;
        };
        report.depth_try += 1;
        let secs = run_secs(job, limits_of(&job.partition));
        let d = tl.span(secs);
        let need = Need::of(&req, largest);
        let key = shape_key(&req, &candidates, pi, restricted, &scope);

        // Start now, on nodes with something free, if no reservation minds.
        let cpus = u64::from(req.ntasks) * u64::from(req.cpus_per_task.max(1));
        let may_now = scope.not_before.is_none_or(|t| t <= now);
        if may_now && tl.may_start_now(&need, cpus) && !failed(&failures.now, key, d) {
            // A sharing job may start on nodes with no CPU free.
            let now_nodes: Vec<u32> = if need.shares {
                candidates.to_vec()
            } else if !restricted && sorted[pi] {
                room_now
                    .iter()
                    .copied()
                    .filter(|&r| members[pi].get(r as usize).copied().unwrap_or(false))
                    .collect()
            } else {
                candidates
                    .iter()
                    .copied()
                    .filter(|&r| room_now.contains(&r))
                    .collect()
            };
            let fit = tl.earliest(
                &req,
                &need,
                &now_nodes,
                slots,
                now,
                d,
                now,
                false,
                scope.exempt,
            );
            if let Some((_, alloc)) = fit {
                apply(&alloc, slots);
                tl.start(alloc.clone(), secs);
                for &r in &alloc.ranks {
                    if !tl.has_room_now(r as usize) {
                        room_now.remove(&r);
                    }
                }
                let job = table.get(id).cloned();
                if let Some(job) = job {
                    gate.started(&job, &alloc, now);
                }
                tracing::debug!(job_id = id, "backfill: started");
                table.start_job(id, alloc, now);
                report.started.push(id);
                continue;
            }
            note(&mut failures.now, key, d);
        }

        // Reserve the earliest start inside the window.
        let Some(job) = table.get(id) else {
            continue;
        };
        if planned_tries >= p.bf_max_job_test
            || job.priority < p.bf_min_prio_reserve
            || failed(&failures.window, key, d)
        {
            continue;
        }
        // From the next instant (or its reservation's start) to the end
        // of the window (or the last second of its reservation).
        let from = tl
            .round_up(now.saturating_add(1).min(window_end))
            .max(scope.not_before.unwrap_or(now));
        let limit = scope.not_after.map_or(window_end, |t| t.min(window_end));
        if from > limit {
            continue;
        }
        planned_tries += 1;
        let found = tl.earliest(
            &req,
            &need,
            &candidates,
            slots,
            from,
            d,
            limit,
            p.bf_busy_nodes,
            scope.exempt,
        );
        match found {
            Some((start, alloc)) => {
                tracing::trace!(job_id = id, start, "backfill: reserved");
                report.planned.push(Planned {
                    job_id: id,
                    start,
                    ranks: alloc.ranks.clone(),
                    alloc: alloc.clone(),
                });
                tl.reserve(alloc, start, secs);
            }
            None => note(&mut failures.window, key, d),
        }
    }
    report.table_size = u32::try_from(tl.size()).unwrap_or(u32::MAX);
    report
}
