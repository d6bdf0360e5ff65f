//! The backfill timeline plans jobs that share CPUs (`OverSubscribe`) by
//! the placement's rule: CPU counts do not bound a sharer, shares do.

use super::timeline::{Need, Timeline};
use crate::model::job::{Allocation, ShareTag};
use crate::sched::gate::Exempt;
use crate::sched::{apply, place, CrParams, MemRequest, NodeSlot, Request};

/// `tasks` CPUs in partition "p" whose CPUs `limit` jobs may share.
fn req(tasks: u32, limit: u16) -> Request {
    Request {
        nodes: None,
        ntasks: tasks,
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
        share: Some(ShareTag {
            part: "p".into(),
            limit,
        }),
    }
}

fn earliest(tl: &mut Timeline, r: &Request, slots: &[NodeSlot]) -> Option<(i64, Allocation)> {
    tl.earliest(
        r,
        &Need::of(r, 2),
        &[0],
        slots,
        100,
        600,
        10_000,
        false,
        Exempt::Nothing,
    )
}

#[test]
fn sharers_start_on_busy_cpus_and_others_wait_for_them_all() {
    // One 2-CPU node, wholly held by a sharer (YES:2) until 1000.
    let mut slots = vec![NodeSlot::plain(2, 1000)];
    let a = place(&req(2, 2), &[0], &slots).unwrap();
    apply(&a, &mut slots);
    let mut tl = Timeline::new(100, 60, &slots, [(1000, a)], false);
    // A second sharer starts now, on the same CPUs.
    let (t, b) = earliest(&mut tl, &req(2, 2), &slots).unwrap();
    assert_eq!((t, b.cpu_ids.clone()), (100, vec![vec![0, 1]]));
    apply(&b, &mut slots);
    tl.start(b, 3000);
    assert_eq!(slots[0].alloc_cpus, 2);
    // A third is one too many: it waits for the first to end (1000,
    // rounded up to 1020), then shares with the second.
    let (t, _) = earliest(&mut tl, &req(1, 2), &slots).unwrap();
    assert_eq!(t, 1020);
    // A job that does not share waits until no sharer is left (the
    // second ends at 100 + 3000).
    let (t, _) = earliest(&mut tl, &req(1, 1), &slots).unwrap();
    assert_eq!(t, 3100);
}
