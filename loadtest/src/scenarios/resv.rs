//! `resv-gate`: what the reservation and license gates cost a scheduling
//! pass, in process, with the library the controller uses
//! (`sched::resv_gate`).
//!
//! Per pass: both gates are built (as `Core::start_gates` does, from every
//! reservation and the running jobs holding licenses), then every pending
//! job is asked about (`blocked`, then `restrict_in` over its partition's
//! nodes), as `JobTable::schedule` asks. Jobs have mixed time limits, a
//! tenth ask for a reservation and a fifth for licenses; reservations are
//! spread over the nodes, some active and some in the future. The baseline
//! is the same pass with no reservations and no licenses, so the
//! difference is what the rules cost.

use std::time::Instant;

use anyhow::Result;
use hdrhistogram::Histogram;

use canopy::model::job::{Allocation, JobRecord, JobState, JobSubmit};
use canopy::model::partition::PartitionState;
use canopy::model::reservation::{AccessList, Reservation, ResvFlag};
use canopy::sched::gate::StartGate;
use canopy::sched::resv_gate::{LicenseGate, ResvGate};
use canopy::sched::table::PartitionView;

use super::Lcg;
use crate::report::Row;

pub struct Opts {
    pub nodes: u32,
    pub jobs: u32,
    pub reservations: u32,
    pub passes: u32,
}

const NOW: i64 = 1_800_000_000;

fn job(id: u32, rng: &mut Lcg, resvs: u32, with_rules: bool) -> JobRecord {
    let reservation =
        (with_rules && resvs > 0 && rng.below(10) == 0).then(|| format!("r{}", rng.below(resvs)));
    let licenses = (with_rules && rng.below(5) == 0).then(|| format!("lic{}:1", rng.below(4)));
    JobRecord {
        earlier_runs: Vec::new(),
        job_id: id,
        submit: JobSubmit {
            user: "u".into(),
            min_nodes: Some(1 + rng.below(4)),
            reservation,
            licenses,
            ..Default::default()
        },
        partition: "p".into(),
        time_limit_min: Some(1 + rng.below(24 * 60)),
        state: JobState::Pending,
        reason: Default::default(),
        priority: 1,
        submit_time: 0,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: Default::default(),
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

fn reservations(o: &Opts, rng: &mut Lcg) -> Vec<Reservation> {
    let per = (o.nodes / o.reservations.max(1) / 4).max(1);
    (0..o.reservations)
        .map(|i| {
            let first = rng.below(o.nodes.saturating_sub(per).max(1));
            // Half active now, half starting within a day.
            let start = if i % 2 == 0 {
                NOW - 60
            } else {
                NOW + i64::from(rng.below(86_400))
            };
            let mut flags = vec![ResvFlag::SpecNodes];
            if i % 7 == 0 {
                flags.push(ResvFlag::Maint);
            }
            Reservation {
                name: format!("r{i}"),
                start,
                end: start + 3600 + i64::from(rng.below(86_400)),
                ranks: (first..first + per).collect(),
                node_list: String::new(),
                cpus: 0,
                partition: None,
                features: None,
                users: AccessList {
                    names: vec!["u".into()],
                    deny: false,
                },
                accounts: AccessList::default(),
                flags,
                purge_secs: None,
                licenses: if i % 5 == 0 {
                    vec![("lic0".into(), 2)]
                } else {
                    vec![]
                },
            }
        })
        .collect()
}

/// One pass's gate work: build, then ask about every job; how many it let through.
fn pass(
    jobs: &[JobRecord],
    running: &[JobRecord],
    resvs: &[Reservation],
    totals: &[(String, u32)],
    ranks: &[u32],
) -> usize {
    let resv = ResvGate::new(resvs, ranks.len(), NOW);
    let part = PartitionView {
        name: "p",
        state: PartitionState::Up,
        ranks,
    };
    let mut lic = LicenseGate::new(totals, running.iter(), resvs, NOW);
    let mut allowed = 0;
    for j in jobs {
        if lic.blocked(j, NOW).is_some() {
            continue;
        }
        match resv.restrict_in(j, &part, NOW) {
            Some(Err(_)) => continue,
            _ => allowed += 1,
        }
        // Every 50th allowed job "starts": the license gate counts it.
        if allowed % 50 == 0 {
            lic.started(j, &Allocation::default(), NOW);
        }
    }
    allowed
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let ranks: Vec<u32> = (0..o.nodes).collect();
    let mut rows = Vec::new();
    for with_rules in [false, true] {
        let mut rng = Lcg::new(16);
        let jobs: Vec<JobRecord> = (0..o.jobs)
            .map(|i| job(i + 1, &mut rng, o.reservations, with_rules))
            .collect();
        let (resvs, totals) = if with_rules {
            (
                reservations(o, &mut rng),
                (0..4).map(|i| (format!("lic{i}"), 500)).collect(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let running: Vec<JobRecord> = jobs
            .iter()
            .filter(|j| j.submit.licenses.is_some())
            .take(400)
            .cloned()
            .collect();
        let mut hist = Histogram::<u64>::new(3)?;
        let mut allowed = 0;
        for _ in 0..o.passes.max(1) {
            let t = Instant::now();
            allowed = pass(&jobs, &running, &resvs, &totals, &ranks);
            hist.record(t.elapsed().as_micros().max(1) as u64)?;
        }
        let median_ms = hist.value_at_quantile(0.5) as f64 / 1000.0;
        let row = Row::new("resv-gate")
            .set(
                "rules",
                if with_rules {
                    "reservations+licenses"
                } else {
                    "none"
                },
            )
            .set("nodes", o.nodes)
            .set("pending_jobs", o.jobs)
            .set("reservations", if with_rules { o.reservations } else { 0 })
            .set("allowed", allowed as u64)
            .num("pass_median_ms", median_ms)
            .num("pass_p99_ms", hist.value_at_quantile(0.99) as f64 / 1000.0)
            .num("ns_per_job", median_ms * 1e6 / f64::from(o.jobs.max(1)));
        progress(&row.json());
        rows.push(row);
    }
    Ok(rows)
}
