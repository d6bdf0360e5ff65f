//! `sched`: the scheduling passes at cluster scale, in process, through the
//! production functions (`canopy::sched::pass::backfill::backfill` and
//! `JobTable::schedule`) on a seeded cluster: 10,000 nodes full of running
//! jobs with time limits, and 100,000 pending jobs of mixed shapes (1–64
//! whole nodes, sub-node jobs, some GPUs) and limits across 1,000 users in
//! 50 accounts. Reports the full backfill pass (median/p99 over several
//! passes, each on a fresh copy of the same state), the quick pass run on
//! each completion or submit (p99), pending jobs examined per CPU-second,
//! and the process's memory. The cluster is filled until nothing more
//! fits, then 3% of the running jobs end, leaving holes of every size.
//! With `--advance-reservations N`, the backfill pass also plans around N
//! advance reservations (through the controller's reservation gate).

use std::time::Instant;

use anyhow::Result;

use super::Lcg;
use crate::report::Row;
use canopy::config::SchedConf;
use canopy::model::job::{Allocation, ExitStatus, JobRecord, JobState, JobSubmit};
use canopy::model::partition::PartitionState;
use canopy::model::reason::JobReason;
use canopy::model::reservation::{AccessList, Reservation, ResvFlag};
use canopy::model::tres::GresRequest;
use canopy::sched::gate::{NoGate, StartGate};
use canopy::sched::pass::backfill::{backfill, Input};
use canopy::sched::resv_gate::ResvGate;
use canopy::sched::table::{JobTable, PartitionView};
use canopy::sched::{apply, place, release, GresDev, GresKind, GresSlot, NodeSlot, Request};

pub struct Opts {
    pub nodes: u32,
    pub pending: u32,
    pub users: u32,
    pub accounts: u32,
    /// `bf_max_job_test`.
    pub reserve_depth: u32,
    /// Advance reservations over the nodes.
    pub advance_reservations: u32,
    /// Full backfill passes timed.
    pub passes: u32,
    /// Quick passes timed (each after a completion or a submit).
    pub quick: u32,
    pub seed: u64,
}

const CPUS: u32 = 64;
const MEM_MB: u64 = 256_000;
/// One node in ten has four GPUs.
const GPU_EVERY: u32 = 10;
const NOW: i64 = 1_800_000_000;

fn node(rank: u32) -> NodeSlot {
    let mut s = NodeSlot::plain(CPUS, MEM_MB);
    s.layout = canopy::sched::Layout::of(CPUS, 2, CPUS / 2, 1);
    if rank % GPU_EVERY == 0 {
        s.gres = vec![GresSlot {
            name: "gpu".into(),
            type_: None,
            kind: GresKind::Devices(
                (0..4)
                    .map(|index| GresDev {
                        index,
                        cores: None,
                        used: false,
                    })
                    .collect(),
            ),
        }];
    }
    s
}

fn record(id: u32, submit: JobSubmit, limit_min: u32, priority: u32) -> JobRecord {
    JobRecord {
        earlier_runs: Vec::new(),
        job_id: id,
        submit,
        partition: "batch".into(),
        time_limit_min: Some(limit_min),
        state: JobState::Pending,
        reason: JobReason::None,
        priority,
        submit_time: NOW - 3600,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: ExitStatus::default(),
        restarts: 0,
        ending_as: None,
        next_step: 0,
        steps: vec![],
        array: None,
        dependency: None,
        requeue: None,
        priority_set: false,
        mail_sent: 0,
        configuring: false,
        power_up: false,
        preempted: None,
        suspend: Default::default(),
        preempt_suspended: None,
    }
}

/// A job shape: 45% whole nodes (1–64, skewed small), 40% sub-node
/// (1–32 cores, some memory), 15% GPU jobs (1–4 GPUs on one node).
fn shape(rng: &mut Lcg, users: u32, accounts: u32) -> (JobSubmit, u32) {
    let uid = 10_000 + rng.below(users);
    let mut s = JobSubmit {
        name: "bench".into(),
        uid,
        account: Some(format!("acct{}", uid % accounts)),
        ..Default::default()
    };
    let kind = rng.below(100);
    if kind < 45 {
        let n = match rng.below(10) {
            0..=4 => 1 + rng.below(4),
            5..=7 => 4 + rng.below(12),
            _ => 16 + rng.below(49),
        };
        s.min_nodes = Some(n);
        s.ntasks = Some(n * CPUS);
    } else if kind < 85 {
        s.ntasks = Some(1 + rng.below(32));
        if rng.below(2) == 0 {
            s.mem_per_cpu_mb = Some(1000 + u64::from(rng.below(3000)));
        }
    } else {
        s.ntasks = Some(1 + rng.below(8));
        s.resources.gpus_per_node = Some(GresRequest {
            name: "gpu".into(),
            type_: None,
            count: 1 + u64::from(rng.below(4)),
        });
    }
    // 10 minutes to 48 hours, skewed short.
    let limit = match rng.below(10) {
        0..=3 => 10 + rng.below(110),
        4..=7 => 120 + rng.below(600),
        _ => 720 + rng.below(2160),
    };
    (s, limit)
}

/// `o.advance_reservations` reservations, each over a run of a quarter of
/// its share of the nodes: even ones active now, odd ones starting within
/// a day, every seventh MAINT, every fifth DAILY; an hour to a day long.
fn reservations(o: &Opts, rng: &mut Lcg) -> Vec<Reservation> {
    let n = o.advance_reservations;
    let per = (o.nodes / n.max(1) / 4).max(1);
    (0..n)
        .map(|i| {
            let first = rng.below(o.nodes.saturating_sub(per).max(1));
            let start = if i % 2 == 0 {
                NOW - 60
            } else {
                NOW + i64::from(rng.below(86_400))
            };
            let mut flags = vec![ResvFlag::SpecNodes];
            if i % 7 == 0 {
                flags.push(ResvFlag::Maint);
            }
            if i % 5 == 0 {
                flags.push(ResvFlag::Daily);
            }
            Reservation {
                name: format!("r{i}"),
                start,
                end: start + 3600 + i64::from(rng.below(23 * 3600)),
                ranks: (first..first + per).collect(),
                node_list: String::new(),
                cpus: 0,
                partition: None,
                features: None,
                users: AccessList::default(),
                accounts: AccessList::default(),
                flags,
                purge_secs: None,
                licenses: vec![],
            }
        })
        .collect()
}

/// The cluster full of running jobs, and the pending queue.
fn build(o: &Opts) -> (Vec<NodeSlot>, Vec<JobRecord>) {
    let mut rng = Lcg::new(o.seed);
    let mut slots: Vec<NodeSlot> = (0..o.nodes).map(node).collect();
    let ranks: Vec<u32> = (0..o.nodes).collect();
    let mut records = Vec::new();
    let mut id = 1;
    let nodir = |_: &str| None;
    // Fill in order: each job placed on the first nodes with room, until a
    // run of misses says the cluster is full.
    let mut misses = 0;
    while misses < 200 {
        let (s, limit) = shape(&mut rng, o.users, o.accounts);
        let Ok(req) = Request::for_job(&s, &nodir) else {
            continue;
        };
        let Some(a) = place(&req, &ranks, &slots) else {
            misses += 1;
            continue;
        };
        misses = 0;
        apply(&a, &mut slots);
        let mut r = record(id, s, limit, 1);
        r.state = JobState::Running;
        // Started up to its whole limit ago: ends spread over the limits.
        r.start_time = Some(NOW - i64::from(rng.below(limit * 60)));
        r.alloc = Some(a);
        records.push(r);
        id += 1;
    }
    // Some have just ended: holes of every size for backfill to fill.
    records.retain(|r| {
        let keep = rng.below(100) >= 3;
        if let (false, Some(a)) = (keep, &r.alloc) {
            release(a, &mut slots);
        }
        keep
    });
    for i in 0..o.pending {
        let (s, limit) = shape(&mut rng, o.users, o.accounts);
        // Distinct priorities, not in id order.
        let prio = 1_000_000 + rng.below(1_000_000) * 8 + (i % 8);
        records.push(record(id, s, limit, prio));
        id += 1;
    }
    (slots, records)
}

fn cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// VmRSS and VmHWM of this process, MiB.
fn rss_mb() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    progress(&format!(
        "sched: building {} nodes full of running jobs and {} pending jobs",
        o.nodes, o.pending
    ));
    let (slots, mut records) = build(o);
    let mut rng = Lcg::new(o.seed ^ 0x7e5e);
    let resvs = reservations(o, &mut rng);
    if !resvs.is_empty() {
        for r in records.iter_mut().filter(|r| r.state == JobState::Pending) {
            if rng.below(50) == 0 {
                r.submit.reservation = Some(format!("r{}", rng.below(o.advance_reservations)));
            }
        }
    }
    let running = records
        .iter()
        .filter(|r| r.state == JobState::Running)
        .count();
    let ranks: Vec<u32> = (0..o.nodes).collect();
    let parts = [PartitionView {
        name: "batch",
        state: PartitionState::Up,
        ranks: &ranks,
    }];
    let params = SchedConf {
        bf_max_job_test: o.reserve_depth,
        bf_window_min: 2880,
        ..SchedConf::default()
    };
    let nodir = |_: &str| None;
    let input = Input {
        parts: &parts,
        part_limits: &[(None, None)],
        nodes: &nodir,
        params: &params,
        tiers: &[],
    };
    let mut pass_s = Vec::new();
    let mut examined = 0u64;
    let mut pass_cpu = 0.0;
    let mut last = None;
    for i in 0..o.passes {
        let mut table = JobTable::from_records(records.iter().cloned());
        let mut s = slots.clone();
        let (c0, t0) = (cpu_s(), Instant::now());
        // Built per pass, as the controller builds it.
        let mut resv_gate;
        let gate: &mut dyn StartGate = if resvs.is_empty() {
            &mut NoGate
        } else {
            resv_gate = ResvGate::new(&resvs, slots.len(), NOW);
            &mut resv_gate
        };
        let r = backfill(&mut table, &mut s, NOW, &input, gate);
        let secs = t0.elapsed().as_secs_f64();
        pass_cpu += cpu_s() - c0;
        pass_s.push(secs);
        examined += u64::from(r.depth);
        progress(&format!(
            "sched: backfill pass {}: {:.3} s, {} examined, {} started, {} reserved, table {}",
            i + 1,
            secs,
            r.depth,
            r.started.len(),
            r.planned.len(),
            r.table_size
        ));
        last = Some(r);
    }
    let last = last.unwrap_or_default();
    let (rss_pass, hwm_pass) = rss_mb();

    // The quick pass: after a completion (a running job's end frees its
    // nodes) or a submit, as the controller runs it on events.
    let mut table = JobTable::from_records(records.iter().cloned());
    let mut s = slots.clone();
    let mut running_ids: Vec<u32> = table.running().map(|j| j.job_id).collect();
    let mut rng = Lcg::new(o.seed ^ 0x5eed);
    let mut quick_us = Vec::new();
    let mut next_id = records.iter().map(|r| r.job_id).max().unwrap_or(0) + 1;
    let mut quick_started = 0usize;
    for i in 0..o.quick {
        if i % 2 == 0 && !running_ids.is_empty() {
            let k = rng.below(running_ids.len() as u32) as usize;
            let id = running_ids.swap_remove(k);
            let alloc: Option<Allocation> = table.finish(
                id,
                JobState::Completed,
                ExitStatus::default(),
                JobReason::None,
                NOW,
            );
            if let Some(a) = alloc {
                release(&a, &mut s);
            }
        } else {
            let (sub, limit) = shape(&mut rng, o.users, o.accounts);
            table.admit(record(
                next_id,
                sub,
                limit,
                1_000_000 + rng.below(8_000_000),
            ));
            next_id += 1;
        }
        let t0 = Instant::now();
        let started = table.schedule(&parts, &mut s, NOW, &nodir, &mut NoGate);
        quick_us.push(t0.elapsed().as_secs_f64() * 1e6);
        quick_started += started.len();
        running_ids.extend(started);
    }
    let (rss, hwm) = rss_mb();
    let median = quantile(&mut pass_s.clone(), 0.5);
    let p99 = quantile(&mut pass_s.clone(), 0.99);
    let row = Row::new("sched")
        .set("nodes", o.nodes)
        .set("running_jobs", running)
        .set("pending_jobs", o.pending)
        .set("users", o.users)
        .set("accounts", o.accounts)
        .set("passes", o.passes)
        .set("reserve_depth", o.reserve_depth)
        .set("advance_reservations", o.advance_reservations)
        .num("backfill_median_s", median)
        .num("backfill_p99_s", p99)
        .set("examined", last.depth)
        .set("backfilled", last.started.len())
        .set("reserved", last.planned.len())
        .set("table_size", last.table_size)
        .num(
            "examined_per_cpu_s",
            if pass_cpu > 0.0 {
                examined as f64 / pass_cpu
            } else {
                0.0
            },
        )
        .set("quick_passes", o.quick)
        .set("quick_started", quick_started)
        .num(
            "quick_p50_ms",
            quantile(&mut quick_us.clone(), 0.5) / 1000.0,
        )
        .num(
            "quick_p99_ms",
            quantile(&mut quick_us.clone(), 0.99) / 1000.0,
        )
        .num("rss_after_passes_mb", rss_pass)
        .num("rss_mb", rss)
        .num("peak_rss_mb", hwm.max(hwm_pass));
    progress(&row.json());
    Ok(vec![row])
}
