//! The backfill pass around advance reservations, on small clusters: the
//! reservation gate's windows as fences, its scope for a reservation's own
//! jobs.

use super::backfill::Report;
use super::tests::{params, pass_with, pending, place_now, running};
use crate::model::job::{JobRecord, JobState};
use crate::model::reservation::{AccessList, Reservation, ResvFlag};
use crate::sched::resv_gate::ResvGate;
use crate::sched::table::JobTable;
use crate::sched::NodeSlot;

fn resv(name: &str, start: i64, end: i64, ranks: &[u32], flags: &[ResvFlag]) -> Reservation {
    Reservation {
        name: name.into(),
        start,
        end,
        ranks: ranks.to_vec(),
        node_list: String::new(),
        cpus: 0,
        partition: None,
        features: None,
        users: AccessList::default(),
        accounts: AccessList::default(),
        flags: flags.to_vec(),
        purge_secs: None,
        licenses: vec![],
    }
}

fn in_resv(mut j: JobRecord, name: &str) -> JobRecord {
    j.submit.reservation = Some(name.into());
    j
}

/// One pass at `now` over `jobs` on `n` idle nodes of 2 CPUs, with `resvs`.
fn run(n: usize, jobs: Vec<JobRecord>, resvs: &[Reservation], now: i64) -> (Report, JobTable) {
    let mut slots = vec![NodeSlot::plain(2, 1000); n];
    run_on(&mut slots, jobs, resvs, now)
}

fn run_on(
    slots: &mut [NodeSlot],
    jobs: Vec<JobRecord>,
    resvs: &[Reservation],
    now: i64,
) -> (Report, JobTable) {
    let mut t = JobTable::from_records(jobs);
    let mut gate = ResvGate::new(resvs, slots.len(), now);
    let r = pass_with(&mut t, slots, now, &params(1440, 60), &mut gate);
    (r, t)
}

fn plans(r: &Report) -> Vec<(u32, i64, Vec<u32>)> {
    r.planned
        .iter()
        .map(|p| (p.job_id, p.start, p.ranks.clone()))
        .collect()
}

#[test]
fn a_job_outside_starts_before_a_future_reservation_only_if_it_ends_first() {
    // Node 0 reserved from 3600 to 7200. A 2-hour job goes to node 1; a
    // 30-minute one fits on node 0 before the reservation.
    let rs = [resv("r", 3600, 7200, &[0], &[])];
    let (r, t) = run(
        2,
        vec![
            pending(1, Some(1), 2, Some(120)),
            pending(2, Some(1), 2, Some(30)),
        ],
        &rs,
        0,
    );
    assert_eq!(r.started, vec![1, 2]);
    assert_eq!(t.get(1).unwrap().alloc.as_ref().unwrap().ranks, [1]);
    assert_eq!(t.get(2).unwrap().alloc.as_ref().unwrap().ranks, [0]);
}

#[test]
fn a_wide_job_is_planned_after_the_reservation_in_its_way() {
    // Two nodes; node 1 reserved from 600 to 4200. A job wanting both
    // nodes for an hour cannot start now (it would run into the
    // reservation), and its plan starts at the reservation's end.
    let rs = [resv("r", 600, 4200, &[1], &[])];
    let (r, _) = run(2, vec![pending(1, Some(2), 4, Some(60))], &rs, 0);
    assert!(r.started.is_empty());
    assert_eq!(plans(&r), [(1, 4200, vec![0, 1])]);
    // A reservation's end off the resolution is rounded up, as Slurm's.
    let rs = [resv("r", 600, 4210, &[1], &[])];
    let (r, _) = run(2, vec![pending(1, Some(2), 4, Some(60))], &rs, 0);
    assert_eq!(plans(&r)[0].1, 4260);
}

#[test]
fn a_reservations_job_is_planned_on_its_nodes_from_its_start() {
    // Three nodes; r holds node 2 from 1800 to 5400. Its job waits (it may
    // not start before r), and is planned at r's start on r's node, while
    // a job outside takes node 0 now.
    let rs = [resv("r", 1800, 5400, &[2], &[])];
    let (r, t) = run(
        3,
        vec![
            in_resv(pending(1, Some(1), 2, Some(60)), "r"),
            pending(2, Some(1), 2, Some(600)),
        ],
        &rs,
        0,
    );
    assert_eq!(r.started, vec![2]);
    assert_eq!(t.get(1).unwrap().state, JobState::Pending);
    assert_eq!(plans(&r), [(1, 1800, vec![2])]);
}

#[test]
fn a_reservations_job_is_planned_only_inside_its_window() {
    // r: node 0 from 0 to 3600, busy with a running job until 3000. A
    // second job of r may start at 3000 (it runs on past r's end, as the
    // controller lets it); with the node busy past r's end it gets no plan.
    let rs = [resv("r", 0, 3600, &[0], &[])];
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let first = pending(1, Some(1), 2, Some(50));
    let a = place_now(&first, &mut slots);
    let jobs = vec![
        running(in_resv(first, "r"), 0, a),
        in_resv(pending(2, Some(1), 2, Some(120)), "r"),
    ];
    let (r, _) = run_on(&mut slots.clone(), jobs.clone(), &rs, 60);
    assert_eq!(plans(&r), [(2, 3000, vec![0])]);
    let mut late = jobs;
    late[0].time_limit_min = Some(70);
    let (r, _) = run_on(&mut slots, late, &rs, 60);
    assert!(r.planned.is_empty(), "{r:?}");
}

#[test]
fn a_daily_reservations_next_window_fences_a_plan_too() {
    // r: node 0, daily from 7200 to 10800. A 2-day job on the one node
    // meets one window or another whenever it starts within bf_window, so
    // it gets no plan; a 2-hour job may start now, before the first one.
    let rs = [resv("r", 7200, 10_800, &[0], &[ResvFlag::Daily])];
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(2 * 24 * 60))], &rs, 0);
    assert!(r.started.is_empty() && r.planned.is_empty(), "{r:?}");
    // Without DAILY it is planned after the one window.
    let once = [resv("r", 7200, 10_800, &[0], &[])];
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(2 * 24 * 60))], &once, 0);
    assert_eq!(plans(&r), [(1, 10_800, vec![0])]);
    // A 20-hour job fits between two windows: after the first one ends.
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(20 * 60))], &rs, 0);
    assert_eq!(plans(&r), [(1, 10_800, vec![0])]);
    // 23.5 hours from 10,800 runs into the next window (7,200 + a day),
    // and after that one the start is past bf_window: no plan.
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(23 * 60 + 30))], &rs, 0);
    assert!(r.planned.is_empty(), "{r:?}");
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(23 * 60))], &rs, 0);
    assert_eq!(plans(&r), [(1, 10_800, vec![0])]);
}

#[test]
fn maint_and_overlap_reservations_jobs_pass_other_windows_as_slurm_lets_them() {
    // Node 0 is in m (MAINT) from 0 and in o (OVERLAP) and p (plain), all
    // over the same hour.
    let rs = [
        resv("m", 0, 3600, &[0], &[ResvFlag::Maint]),
        resv("o", 0, 3600, &[0], &[ResvFlag::Overlap]),
        resv("p", 0, 3600, &[0], &[]),
    ];
    // MAINT's job ignores every other reservation and starts.
    let (r, _) = run(
        1,
        vec![in_resv(pending(1, Some(1), 1, Some(30)), "m")],
        &rs,
        0,
    );
    assert_eq!(r.started, vec![1]);
    // OVERLAP's job is kept off by MAINT, for all of its own window: it
    // neither starts nor plans; without MAINT it starts.
    let (r, _) = run(
        1,
        vec![in_resv(pending(1, Some(1), 1, Some(10)), "o")],
        &rs,
        0,
    );
    assert!(r.started.is_empty() && r.planned.is_empty(), "{r:?}");
    let (r, _) = run(
        1,
        vec![in_resv(pending(1, Some(1), 1, Some(10)), "o")],
        &rs[1..],
        0,
    );
    assert_eq!(r.started, vec![1]);
    // A plain one's job is kept off by the others.
    let (r, _) = run(
        1,
        vec![in_resv(pending(1, Some(1), 1, Some(10)), "p")],
        &rs[1..],
        0,
    );
    assert!(r.started.is_empty() && r.planned.is_empty(), "{r:?}");
}

#[test]
fn a_flex_reservations_job_starts_early_anywhere_free() {
    // f: node 1, from 3600. Its job may start now, on its own node first.
    let rs = [resv("f", 3600, 7200, &[1], &[ResvFlag::Flex])];
    let (r, t) = run(
        2,
        vec![in_resv(pending(1, Some(1), 2, Some(10)), "f")],
        &rs,
        0,
    );
    assert_eq!(r.started, vec![1]);
    assert_eq!(t.get(1).unwrap().alloc.as_ref().unwrap().ranks, [1]);
    // With its node busy now it takes the other.
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let busy = pending(9, Some(1), 2, Some(30));
    let req = crate::sched::Request::for_job(&busy.submit, &|_: &str| None).unwrap();
    let b = crate::sched::place(&req, &[1], &slots).unwrap();
    crate::sched::apply(&b, &mut slots);
    let (r, t) = run_on(
        &mut slots,
        vec![
            running(busy, 0, b),
            in_resv(pending(1, Some(1), 2, Some(10)), "f"),
        ],
        &rs,
        0,
    );
    assert_eq!(r.started, vec![1]);
    assert_eq!(t.get(1).unwrap().alloc.as_ref().unwrap().ranks, [0]);
}

#[test]
fn a_licenses_only_reservation_fences_no_node() {
    let rs = [resv("l", 0, 3600, &[], &[ResvFlag::AnyNodes])];
    let (r, _) = run(1, vec![pending(1, Some(1), 2, Some(600))], &rs, 0);
    assert_eq!(r.started, vec![1]);
}

#[test]
fn a_reservation_made_over_a_running_job_plans_its_jobs_after_it() {
    // IGNORE_JOBS: r takes node 0 from 600 although a job runs there until
    // 3000: r's job is planned at that job's end; a long job outside
    // starts on node 1.
    let rs = [resv("r", 600, 7200, &[0], &[ResvFlag::IgnoreJobs])];
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let old = pending(1, Some(1), 2, Some(50));
    let a = place_now(&old, &mut slots);
    assert_eq!(a.ranks, [0]);
    let (r, _) = run_on(
        &mut slots,
        vec![
            running(old, 0, a),
            in_resv(pending(2, Some(1), 2, Some(30)), "r"),
            pending(3, Some(1), 2, Some(600)),
        ],
        &rs,
        60,
    );
    assert_eq!(plans(&r), [(2, 3000, vec![0])]);
    assert_eq!(r.started, vec![3]);
}
