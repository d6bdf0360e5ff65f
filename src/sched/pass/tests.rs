//! Unit tests of the timeline and the backfill pass on small clusters.

use super::backfill::{backfill, Input, Report};
use super::timeline::{Need, Timeline};
use crate::config::SchedConf;
use crate::model::job::{Allocation, ExitStatus, JobRecord, JobState, JobSubmit};
use crate::model::partition::PartitionState;
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched::gate::{Exempt, NoGate, StartGate};
use crate::sched::table::{JobTable, PartitionView};
use crate::sched::{apply, place, CrParams, MemRequest, NodeSlot, Request};

/// A pending job of `nodes` × `tasks` (1 CPU each), limit `limit_min`.
pub(super) fn pending(
    id: u32,
    nodes: Option<u32>,
    tasks: u32,
    limit_min: Option<u32>,
) -> JobRecord {
    JobRecord {
        earlier_runs: Vec::new(),
        job_id: id,
        submit: JobSubmit {
            min_nodes: nodes,
            ntasks: Some(tasks),
            uid: 1000 + id % 3,
            ..Default::default()
        },
        partition: "p".into(),
        time_limit_min: limit_min,
        state: JobState::Pending,
        reason: JobReason::None,
        // Earlier ids first, as priority/basic counts down.
        priority: 1_000_000 - id,
        submit_time: 0,
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

/// `job` running since `start` on `alloc` (already applied by the caller).
pub(super) fn running(mut job: JobRecord, start: UnixTime, alloc: Allocation) -> JobRecord {
    job.state = JobState::Running;
    job.start_time = Some(start);
    job.alloc = Some(alloc);
    job
}

pub(super) fn params(window_min: u32, resolution_s: u32) -> SchedConf {
    SchedConf {
        bf_window_min: window_min,
        bf_resolution_s: resolution_s,
        bf_max_job_test: 1_000_000,
        ..SchedConf::default()
    }
}

fn no_names(_: &str) -> Option<usize> {
    None
}

/// Place `job` now on `slots` (for setting up running jobs).
pub(super) fn place_now(job: &JobRecord, slots: &mut [NodeSlot]) -> Allocation {
    let ranks: Vec<u32> = (0..slots.len() as u32).collect();
    let req = Request::for_job(&job.submit, &no_names).unwrap();
    let a = place(&req, &ranks, slots).expect("the set-up job fits");
    apply(&a, slots);
    a
}

/// Run one pass over partition "p" of all `slots`.
pub(super) fn pass(
    t: &mut JobTable,
    slots: &mut [NodeSlot],
    now: UnixTime,
    p: &SchedConf,
) -> Report {
    pass_with(t, slots, now, p, &mut NoGate)
}

pub(super) fn pass_with(
    t: &mut JobTable,
    slots: &mut [NodeSlot],
    now: UnixTime,
    p: &SchedConf,
    gate: &mut dyn StartGate,
) -> Report {
    let ranks: Vec<u32> = (0..slots.len() as u32).collect();
    let parts = [PartitionView {
        name: "p",
        state: PartitionState::Up,
        ranks: &ranks,
    }];
    let input = Input {
        parts: &parts,
        part_limits: &[(None, None)],
        nodes: &no_names,
        params: p,
        tiers: &[],
    };
    backfill(t, slots, now, &input, gate)
}

fn req(nodes: Option<u32>, ntasks: u32) -> Request {
    Request {
        nodes,
        ntasks,
        cpus_per_task: 1,
        ntasks_per_node: None,
        mem: MemRequest::None,
        required: vec![],
        excluded: vec![],
        exclusive: false,
        node_sets: None,
        res: Default::default(),
        cr: CrParams::default(),
        max_cpus_per_node: None,
        cap_part: None,
        lln: false,
        share: None,
    }
}

#[test]
fn a_half_used_node_takes_a_job_that_fits_now_and_a_whole_node_job_at_the_end() {
    // One node of 4 CPUs; a running job holds 2 of them until 1000.
    let mut slots = vec![NodeSlot::plain(4, 1000)];
    let held = place(&req(None, 2), &[0], &slots).unwrap();
    apply(&held, &mut slots);
    let mut tl = Timeline::new(100, 60, &slots, [(1000, held)], false);
    let two = req(None, 2);
    let four = req(None, 4);
    let (t, a) = tl
        .earliest(
            &two,
            &Need::of(&two, 4),
            &[0],
            &slots,
            100,
            600,
            100,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!((t, a.cpus), (100, vec![2]));
    // Four CPUs: only once the running job's end (1000, rounded up to 1020).
    let (t, _) = tl
        .earliest(
            &four,
            &Need::of(&four, 4),
            &[0],
            &slots,
            100,
            600,
            5000,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!(t, 1020);
    // Not before the limit given.
    assert!(tl
        .earliest(
            &four,
            &Need::of(&four, 4),
            &[0],
            &slots,
            100,
            600,
            1000,
            false,
            Exempt::Nothing,
        )
        .is_none());
}

#[test]
fn a_job_past_its_limit_still_holds_its_node_now() {
    let mut slots = vec![NodeSlot::plain(2, 1000)];
    let held = place(&req(None, 2), &[0], &slots).unwrap();
    apply(&held, &mut slots);
    // Its limit was at 50; it is 100 and it has not ended yet.
    let mut tl = Timeline::new(100, 60, &slots, [(50, held)], false);
    let one = req(None, 1);
    let need = Need::of(&one, 2);
    assert!(tl
        .earliest(
            &one,
            &need,
            &[0],
            &slots,
            100,
            60,
            100,
            false,
            Exempt::Nothing
        )
        .is_none());
    let (t, _) = tl
        .earliest(
            &one,
            &need,
            &[0],
            &slots,
            100,
            60,
            1000,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!(t, 160);
}

#[test]
fn a_reservation_keeps_later_jobs_off_its_resources_for_its_whole_run() {
    let slots = vec![NodeSlot::plain(2, 1000); 2];
    let mut tl = Timeline::new(0, 60, &slots, std::iter::empty(), false);
    // Node 0 reserved from 600 to 1200 in full.
    let whole = req(Some(1), 2);
    let a = place(&whole, &[0], &slots).unwrap();
    tl.reserve(a, 600, 600);
    let need = Need::of(&whole, 2);
    // A 10-minute job fits before it; a 20-minute one goes to node 1.
    let (t, a) = tl
        .earliest(
            &whole,
            &need,
            &[0, 1],
            &slots,
            0,
            600,
            0,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!((t, a.ranks), (0, vec![0]));
    let (t, a) = tl
        .earliest(
            &whole,
            &need,
            &[0, 1],
            &slots,
            0,
            1200,
            0,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!((t, a.ranks), (0, vec![1]));
    // Only node 0, 20 minutes: after the reservation.
    let (t, _) = tl
        .earliest(
            &whole,
            &need,
            &[0],
            &slots,
            0,
            1200,
            10_000,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!(t, 1200);
    assert_eq!(tl.holds(), 1);
}

/// Two nodes of 2 CPUs. Job 1 runs on node 0 for 100 minutes. Job 2 wants
/// both nodes; job 3 (one node, 30 min) fits before job 2 can start; job
/// 4 (one node, 200 min) would delay job 2 and waits.
fn wide_job_cluster() -> (JobTable, Vec<NodeSlot>) {
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let long = pending(1, Some(1), 2, Some(100));
    let a = place_now(&long, &mut slots);
    let t = JobTable::from_records([
        running(long, 0, a),
        pending(2, Some(2), 4, Some(60)),
        pending(3, Some(1), 2, Some(30)),
        pending(4, Some(1), 2, Some(200)),
    ]);
    (t, slots)
}

#[test]
fn a_short_narrow_job_backfills_and_a_long_one_waits_for_the_wide_reservation() {
    let (mut t, mut slots) = wide_job_cluster();
    let r = pass(&mut t, &mut slots, 60, &params(1440, 60));
    assert_eq!(r.started, vec![3]);
    let plans: Vec<(u32, i64, Vec<u32>)> = r
        .planned
        .iter()
        .map(|p| (p.job_id, p.start, p.ranks.clone()))
        .collect();
    // Job 4 after job 2 (6000 + 60 minutes).
    assert_eq!(plans, [(2, 6000, vec![0, 1]), (4, 9600, vec![0])]);
    assert_eq!((r.queue_len, r.depth, r.depth_try), (3, 3, 3));
    assert_eq!(t.get(3).unwrap().state, JobState::Running);
    assert_eq!(t.get(3).unwrap().start_time, Some(60));
    assert_eq!(t.get(4).unwrap().state, JobState::Pending);
    assert_eq!(slots[1].alloc_cpus, 2);
}

#[test]
fn a_shape_that_failed_long_still_starts_short() {
    // As the wide-job cluster, but the long narrow job comes first: the
    // table of failed shapes must not hold the short one of the same shape.
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let long = pending(1, Some(1), 2, Some(100));
    let a = place_now(&long, &mut slots);
    let mut t = JobTable::from_records([
        running(long, 0, a),
        pending(2, Some(2), 4, Some(60)),
        pending(3, Some(1), 2, Some(200)),
        pending(4, Some(1), 2, Some(30)),
        pending(5, Some(1), 2, Some(300)),
    ]);
    let r = pass(&mut t, &mut slots, 0, &params(1440, 60));
    assert_eq!(r.started, vec![4]);
    assert_eq!(
        r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(),
        [2, 3, 5]
    );
}

#[test]
fn the_window_bounds_reservations_and_min_prio_withholds_them() {
    let (mut t, mut slots) = wide_job_cluster();
    // 120 minutes: job 2's start (6000 s) is inside, job 4's (9600) is not.
    let r = pass(&mut t, &mut slots, 0, &params(120, 60));
    assert_eq!(r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(), [2]);
    // 90 minutes: job 2 gets none; job 4 then reserves node 1 at job 3's end.
    let (mut t, mut slots) = wide_job_cluster();
    let r = pass(&mut t, &mut slots, 0, &params(90, 60));
    assert_eq!(r.planned[0].job_id, 4);
    assert_eq!(r.planned[0].start, 1800);
    let (mut t, mut slots) = wide_job_cluster();
    let r = pass(&mut t, &mut slots, 0, &params(120, 60));
    assert_eq!(r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(), [2]);
    let (mut t, mut slots) = wide_job_cluster();
    let p = SchedConf {
        bf_min_prio_reserve: 1_000_000 - 2,
        ..params(1440, 60)
    };
    // Job 2 may reserve (priority 999998); job 4 may not, and with job 3
    // on node 1 it cannot start either.
    let r = pass(&mut t, &mut slots, 0, &p);
    assert_eq!(r.started, vec![3]);
    assert_eq!(r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(), [2]);
    let (mut t, mut slots) = wide_job_cluster();
    let p = SchedConf {
        bf_min_prio_reserve: u32::MAX,
        ..params(1440, 60)
    };
    // Nobody reserves: node 1 goes to the first job that fits, job 3.
    let r = pass(&mut t, &mut slots, 0, &p);
    assert_eq!(r.started, vec![3]);
    assert!(r.planned.is_empty());
}

#[test]
fn depth_and_per_user_caps_stop_the_walk() {
    let (mut t, mut slots) = wide_job_cluster();
    let p = SchedConf {
        bf_max_job_test: 1,
        ..params(1440, 60)
    };
    // One job may plan (job 2); the others are still tried for now: job 3
    // fits before job 2's start, job 4 gets no reservation.
    let r = pass(&mut t, &mut slots, 0, &p);
    assert_eq!(r.started, vec![3]);
    assert_eq!(r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(), [2]);
    // Users: job 2 → uid 1002, job 3 → 1000, job 4 → 1001. One each: all
    // three are still tried.
    let (mut t, mut slots) = wide_job_cluster();
    let p = SchedConf {
        bf_max_job_user: 1,
        ..params(1440, 60)
    };
    assert_eq!(pass(&mut t, &mut slots, 0, &p).depth_try, 3);
    let (mut t, mut slots) = wide_job_cluster();
    let p = SchedConf {
        bf_max_job_part: 2,
        ..params(1440, 60)
    };
    let r = pass(&mut t, &mut slots, 0, &p);
    assert_eq!((r.depth, r.depth_try, r.started.clone()), (3, 2, vec![3]));
}

#[test]
fn sub_node_jobs_backfill_onto_the_free_half_of_a_node() {
    // One node of 8 CPUs: a long job holds 4. A wide job needs all 8; a
    // 2-CPU short job fits in the free half before it and starts.
    let mut slots = vec![NodeSlot::plain(8, 1000)];
    let long = pending(1, None, 4, Some(100));
    let a = place_now(&long, &mut slots);
    let mut t = JobTable::from_records([
        running(long, 0, a),
        pending(2, None, 8, Some(60)),
        pending(3, None, 2, Some(30)),
        pending(4, None, 2, Some(300)),
    ]);
    let r = pass(&mut t, &mut slots, 0, &params(1440, 60));
    // Job 4 needs the free half for 300 minutes, but job 2 needs the whole
    // node at 6000: it must wait.
    assert_eq!(r.started, vec![3]);
    assert_eq!((r.planned[0].job_id, r.planned[0].start), (2, 6000));
    assert_eq!(r.planned[0].ranks, [0]);
    assert_eq!(slots[0].alloc_cpus, 6);
}

#[test]
fn memory_counts_on_a_partly_used_node() {
    let mut slots = vec![NodeSlot::plain(8, 1000)];
    let mut long = pending(1, None, 1, Some(100));
    long.submit.mem_per_node_mb = Some(800);
    let a = place_now(&long, &mut slots);
    let mut big = pending(2, None, 1, Some(10));
    big.submit.mem_per_node_mb = Some(500);
    let mut small = pending(3, None, 1, Some(10));
    small.submit.mem_per_node_mb = Some(200);
    let mut t = JobTable::from_records([running(long, 0, a), big, small]);
    let r = pass(&mut t, &mut slots, 0, &params(1440, 60));
    // 200 MB free: the small job starts; the big one waits for the end.
    assert_eq!(r.started, vec![3]);
    assert_eq!(r.planned[0].start, 6000);
}

#[test]
fn a_job_without_any_limit_never_frees_its_node_and_never_backfills_before_a_reservation() {
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let forever = pending(1, Some(1), 2, None);
    let a = place_now(&forever, &mut slots);
    let mut t = JobTable::from_records([
        running(forever, 0, a),
        pending(2, Some(2), 4, Some(10)),
        pending(3, Some(1), 2, None),
    ]);
    let r = pass(&mut t, &mut slots, 0, &params(1440, 60));
    // Job 2 can never start: no reservation. Job 3 then starts on node 1.
    assert!(r.planned.is_empty());
    assert_eq!(r.started, vec![3]);
}

/// A rule that blocks one job and hears every start.
struct Hold {
    blocked: u32,
    starts: Vec<u32>,
}

impl StartGate for Hold {
    fn blocked(&self, job: &JobRecord, _: UnixTime) -> Option<JobReason> {
        (job.job_id == self.blocked).then_some(JobReason::Dependency)
    }
    fn started(&mut self, job: &JobRecord, _: &Allocation, _: UnixTime) {
        self.starts.push(job.job_id);
    }
}

#[test]
fn the_gate_holds_a_job_from_starting_and_reserving_and_hears_starts() {
    let (mut t, mut slots) = wide_job_cluster();
    let mut gate = Hold {
        blocked: 2,
        starts: vec![],
    };
    let r = pass_with(&mut t, &mut slots, 0, &params(1440, 60), &mut gate);
    // Without job 2's reservation, job 3 takes node 1 and job 4 reserves.
    assert_eq!(r.started, vec![3]);
    assert_eq!(gate.starts, vec![3]);
    assert_eq!(r.planned.iter().map(|p| p.job_id).collect::<Vec<_>>(), [4]);
}

#[test]
fn gpus_are_counted_by_device() {
    use crate::sched::{GresDev, GresKind, GresSlot};
    let gpu_node = || {
        let mut s = NodeSlot::plain(8, 1000);
        s.gres = vec![GresSlot {
            name: "gpu".into(),
            type_: None,
            kind: GresKind::Devices(
                (0..2)
                    .map(|index| GresDev {
                        index,
                        cores: None,
                        used: false,
                    })
                    .collect(),
            ),
        }];
        s
    };
    let gpus = |id, n, limit| {
        let mut j = pending(id, None, 1, Some(limit));
        j.submit.resources.gpus_per_node = Some(crate::model::tres::GresRequest {
            name: "gpu".into(),
            type_: None,
            count: n,
        });
        j
    };
    let mut slots = vec![gpu_node()];
    let long = gpus(1, 1, 100);
    let a = place_now(&long, &mut slots);
    let mut t = JobTable::from_records([running(long, 0, a), gpus(2, 2, 10), gpus(3, 1, 10)]);
    let r = pass(&mut t, &mut slots, 0, &params(1440, 60));
    // Two GPUs wait for the end; one GPU fits now (10 min, before 6000).
    assert_eq!(r.started, vec![3]);
    assert_eq!(r.planned[0].start, 6000);
}

#[test]
fn busy_nodes_first_puts_a_reservation_on_a_node_in_use_now() {
    // Node 0 is idle now but reserved until 1200; node 1 runs a job until
    // 1200. From 1200 both are free: by default the first node is taken,
    // with bf_busy_nodes the one in use now.
    let mut slots = vec![NodeSlot::plain(2, 1000); 2];
    let whole = req(Some(1), 2);
    let running_alloc = place(&whole, &[1], &slots).unwrap();
    apply(&running_alloc, &mut slots);
    let mut tl = Timeline::new(0, 60, &slots, [(1200, running_alloc)], false);
    let held = place(&whole, &[0], &slots).unwrap();
    tl.reserve(held, 60, 1140);
    let need = Need::of(&whole, 2);
    let (t, a) = tl
        .earliest(
            &whole,
            &need,
            &[0, 1],
            &slots,
            60,
            600,
            10_000,
            false,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!((t, a.ranks), (1200, vec![0]));
    let (t, a) = tl
        .earliest(
            &whole,
            &need,
            &[0, 1],
            &slots,
            60,
            600,
            10_000,
            true,
            Exempt::Nothing,
        )
        .unwrap();
    assert_eq!((t, a.ranks), (1200, vec![1]));
}

/// Lets every job use node 1 only.
struct OnlyNode1;

impl StartGate for OnlyNode1 {
    fn restrict(
        &self,
        _: &JobRecord,
        candidates: &[u32],
        _: UnixTime,
    ) -> Option<Result<Vec<u32>, JobReason>> {
        Some(Ok(candidates.iter().copied().filter(|&r| r == 1).collect()))
    }
}

#[test]
fn the_gates_narrowed_nodes_bound_starts_and_reservations() {
    let (mut t, mut slots) = wide_job_cluster();
    let r = pass_with(&mut t, &mut slots, 0, &params(1440, 60), &mut OnlyNode1);
    // The wide job can never have two nodes out of one: no plan. Job 3
    // starts on node 1; job 4 plans node 1 after job 3.
    assert_eq!(r.started, vec![3]);
    let plans: Vec<(u32, i64, Vec<u32>)> = r
        .planned
        .iter()
        .map(|p| (p.job_id, p.start, p.ranks.clone()))
        .collect();
    assert_eq!(plans, [(4, 1800, vec![1])]);
}
