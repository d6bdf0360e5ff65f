//! Choosing whom to preempt: given a waiting job that does not fit and the
//! running jobs it may displace, the smallest set whose resources let it
//! start. Pure: the controller core builds the candidates from its policy
//! (`preempt/partition_prio`: jobs of lower `PriorityTier` partitions on
//! shared nodes; `preempt/qos`: jobs whose QOS the waiting job's QOS
//! lists in `Preempt=`) and carries the preemptions out. A candidate to be
//! suspended gives up only its CPUs: its memory and GRES stay held.
//!
//! The search follows slurmctld's (`_run_now` in select/cons_tres): take
//! candidates away one at a time, the least important first, until the job
//! fits; keep only those whose nodes the job would use; then try to give
//! each back, the most important first, and keep it running if the job
//! still fits without its resources.

use super::{place, release, release_cpus, NodeSlot, Request};
use crate::model::job::Allocation;
use crate::model::time::UnixTime;

/// A running job that may be preempted.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub job_id: u32,
    pub alloc: &'a Allocation,
    /// How much it matters: its partition's `PriorityTier`
    /// (partition_prio) or its QOS's `Priority` (qos).
    pub prio: u32,
    pub start: UnixTime,
    /// It would be suspended: only its CPUs come free.
    pub suspend: bool,
}

impl Candidate<'_> {
    /// slurmctld's order key (both plugins' `_gen_job_prio`): importance
    /// in the high 16 bits, then size (smaller jobs go first).
    fn key(&self) -> u32 {
        (self.prio.min(0xffff) << 16).saturating_add((self.alloc.ranks.len() as u32).min(0xffff))
    }

    fn free(&self, slots: &mut [NodeSlot]) {
        if self.suspend {
            release_cpus(self.alloc, slots);
        } else {
            release(self.alloc, slots);
        }
    }
}

/// Resources that come free without preempting anyone: the allocation
/// of a job already ending (all of it) or one suspended for this very
/// job (its CPUs only).
#[derive(Debug, Clone, Copy)]
pub struct Freeing<'a> {
    pub alloc: &'a Allocation,
    pub cpus_only: bool,
}

/// How candidates are ordered and how hard the search shrinks its set.
#[derive(Debug, Clone, Copy, Default)]
pub struct Order {
    /// `PreemptParameters=youngest_first`: the most recently started go
    /// first.
    pub youngest_first: bool,
    /// `reorder_count`: rounds of giving victims back (0: none).
    pub reorder_count: u32,
}

/// What a waiting job needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// It fits once the jobs already on their way out are gone: preempt
    /// nothing more, wait.
    Wait,
    /// Preempt these (job ids, in the order chosen).
    Preempt(Vec<u32>),
}

/// Whom to preempt so that `req` can start on `ranks`. `freeing`: what
/// jobs already ending, preempted or suspended for it will give back.
/// `None`: it would not fit even with every candidate gone, so nothing is
/// preempted for it.
pub fn plan(
    req: &Request,
    ranks: &[u32],
    slots: &[NodeSlot],
    freeing: &[Freeing<'_>],
    candidates: &mut [Candidate<'_>],
    order: Order,
) -> Option<Plan> {
    let mut base = slots.to_vec();
    for f in freeing {
        if f.cpus_only {
            release_cpus(f.alloc, &mut base);
        } else {
            release(f.alloc, &mut base);
        }
    }
    if place(req, ranks, &base).is_some() {
        return Some(Plan::Wait);
    }
    if order.youngest_first {
        candidates.sort_by_key(|c| (std::cmp::Reverse(c.start), c.job_id));
    } else {
        // Ties in job order, as slurmctld's stable sort of its job list.
        candidates.sort_by_key(|c| (c.key(), c.job_id));
    }
    // Take candidates away until the job fits.
    let mut trial = base.clone();
    let mut taken = 0;
    let mut fit = None;
    for c in candidates.iter() {
        c.free(&mut trial);
        taken += 1;
        if let Some(a) = place(req, ranks, &trial) {
            fit = Some(a);
            break;
        }
    }
    let fit = fit?;
    let mut victims: Vec<&Candidate<'_>> = candidates[..taken]
        .iter()
        .filter(|c| overlaps(c.alloc, &fit))
        .collect();
    // Give back what is not needed, the most important first.
    for _ in 0..order.reorder_count {
        let before = victims.len();
        let mut i = victims.len();
        while i > 0 {
            i -= 1;
            let without: Vec<&Candidate<'_>> = victims
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != i)
                .map(|(_, c)| *c)
                .collect();
            if fits_without(req, ranks, &base, &without).is_some() {
                victims = without;
            }
        }
        if victims.len() == before {
            break;
        }
    }
    // Where the job lands with only these gone, and who is really in the way.
    let landing = fits_without(req, ranks, &base, &victims)?;
    Some(Plan::Preempt(
        victims
            .iter()
            .filter(|c| overlaps(c.alloc, &landing))
            .map(|c| c.job_id)
            .collect(),
    ))
}

fn fits_without(
    req: &Request,
    ranks: &[u32],
    base: &[NodeSlot],
    gone: &[&Candidate<'_>],
) -> Option<Allocation> {
    let mut s = base.to_vec();
    for c in gone {
        c.free(&mut s);
    }
    place(req, ranks, &s)
}

fn overlaps(a: &Allocation, b: &Allocation) -> bool {
    a.ranks.iter().any(|r| b.ranks.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::JobSubmit;
    use crate::sched::apply;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn req(nodes: u32, tasks: u32) -> Request {
        req_mem(nodes, tasks, None)
    }

    fn req_mem(nodes: u32, tasks: u32, mem_mb: Option<u64>) -> Request {
        Request::from_submit(&JobSubmit {
            min_nodes: Some(nodes),
            ntasks: Some(tasks),
            mem_per_node_mb: mem_mb,
            ..Default::default()
        })
    }

    /// A cluster of `n` four-CPU nodes with the given jobs (nodes, tasks)
    /// placed in order (those that no longer fit are left out).
    fn cluster(n: usize, jobs: &[(u32, u32)]) -> (Vec<NodeSlot>, Vec<Allocation>) {
        let jobs: Vec<(u32, u32, Option<u64>)> = jobs.iter().map(|&(n, t)| (n, t, None)).collect();
        cluster_mem(n, &jobs)
    }

    /// As [`cluster`], the jobs holding memory too (nodes have 1000 MiB).
    fn cluster_mem(n: usize, jobs: &[(u32, u32, Option<u64>)]) -> (Vec<NodeSlot>, Vec<Allocation>) {
        let mut slots: Vec<NodeSlot> = (0..n).map(|_| NodeSlot::plain(4, 1000)).collect();
        for s in &mut slots {
            s.available = true;
        }
        let ranks: Vec<u32> = (0..n as u32).collect();
        let allocs = jobs
            .iter()
            .filter_map(|&(nodes, tasks, mem)| {
                let a = place(&req_mem(nodes, tasks, mem), &ranks, &slots)?;
                apply(&a, &mut slots);
                Some(a)
            })
            .collect();
        (slots, allocs)
    }

    fn candidates<'a>(allocs: &'a [Allocation], tiers: &[u32]) -> Vec<Candidate<'a>> {
        allocs
            .iter()
            .enumerate()
            .map(|(i, a)| Candidate {
                job_id: i as u32 + 1,
                alloc: a,
                prio: tiers[i],
                start: i as i64,
                suspend: false,
            })
            .collect()
    }

    #[test]
    fn the_least_important_go_first_and_only_those_in_the_way() {
        // Four nodes, each full with one job; a two-node job arrives.
        let (slots, allocs) = cluster(4, &[(1, 4), (1, 4), (1, 4), (1, 4)]);
        let ranks = [0, 1, 2, 3];
        let mut c = candidates(&allocs, &[1, 0, 1, 0]);
        let p = plan(&req(2, 8), &ranks, &slots, &[], &mut c, Order::default());
        // Tier 0 jobs (2 and 4) go; the tier 1 jobs keep running.
        assert_eq!(p, Some(Plan::Preempt(vec![2, 4])));
    }

    #[test]
    fn nothing_is_preempted_when_it_would_not_be_enough_or_is_not_needed() {
        let (slots, allocs) = cluster(2, &[(1, 4), (1, 4)]);
        let mut c = candidates(&allocs[..1], &[0]);
        // Needs both nodes, only one job may go.
        assert_eq!(
            plan(&req(2, 8), &[0, 1], &slots, &[], &mut c, Order::default()),
            None
        );
        // The other one is already ending: the job waits for it.
        let leaving = Freeing {
            alloc: &allocs[1],
            cpus_only: false,
        };
        let p = plan(
            &req(1, 4),
            &[0, 1],
            &slots,
            &[leaving],
            &mut c,
            Order::default(),
        );
        assert_eq!(p, Some(Plan::Wait));
    }

    #[test]
    fn a_suspended_candidate_frees_its_cpus_but_not_its_memory() {
        // One node: a job holding 2 CPUs and 800 of 1000 MiB.
        let (slots, allocs) = cluster_mem(1, &[(1, 2, Some(800))]);
        let mut c = candidates(&allocs, &[0]);
        c[0].suspend = true;
        // CPUs only: a job without memory fits once it is suspended.
        let p = plan(&req(1, 4), &[0], &slots, &[], &mut c, Order::default());
        assert_eq!(p, Some(Plan::Preempt(vec![1])));
        // One that needs 500 MiB does not: suspending it is no help.
        let p = plan(
            &req_mem(1, 4, Some(500)),
            &[0],
            &slots,
            &[],
            &mut c,
            Order::default(),
        );
        assert_eq!(p, None);
        // Cancelled, it gives its memory back too.
        c[0].suspend = false;
        let p = plan(
            &req_mem(1, 4, Some(500)),
            &[0],
            &slots,
            &[],
            &mut c,
            Order::default(),
        );
        assert_eq!(p, Some(Plan::Preempt(vec![1])));
    }

    #[test]
    fn qos_priority_orders_candidates_before_size() {
        // Three one-node jobs; the two-node one has the lowest QOS
        // priority, so it goes before the smaller, more important ones.
        let (slots, allocs) = cluster(3, &[(1, 4), (2, 8)]);
        let mut c = candidates(&allocs, &[50, 10]);
        let p = plan(
            &req(1, 4),
            &[0, 1, 2],
            &slots,
            &[],
            &mut c,
            Order::default(),
        );
        assert_eq!(p, Some(Plan::Preempt(vec![2])));
        // A QOS priority past 16 bits counts as 0xffff, not as a wrap.
        let mut c = candidates(&allocs, &[0x1_0000, 0xfffe]);
        let p = plan(
            &req(1, 4),
            &[0, 1, 2],
            &slots,
            &[],
            &mut c,
            Order::default(),
        );
        assert_eq!(p, Some(Plan::Preempt(vec![2])));
    }

    #[test]
    fn victims_that_do_not_help_are_given_back() {
        // Node 0: two small jobs; node 1: one full job. Taken away in
        // order, the two small ones (smallest first) and the big one go
        // before a four-CPU job fits; giving back keeps the fewest.
        let (slots, allocs) = cluster(2, &[(1, 2), (1, 2), (1, 4)]);
        let mut c = candidates(&allocs, &[0, 0, 0]);
        let p = plan(&req(1, 4), &[0, 1], &slots, &[], &mut c, Order::default());
        match p {
            Some(Plan::Preempt(v)) => assert!(v == [3] || v == [1, 2], "{v:?}"),
            other => panic!("{other:?}"),
        }
        let youngest = Order {
            youngest_first: true,
            reorder_count: 1,
        };
        let mut c = candidates(&allocs, &[0, 0, 0]);
        // The youngest (job 3, started last) goes first and is enough.
        assert_eq!(
            plan(&req(1, 4), &[0, 1], &slots, &[], &mut c, youngest),
            Some(Plan::Preempt(vec![3]))
        );
    }

    /// Random clusters and jobs: whatever the plan, the job fits once the
    /// victims (and the jobs already leaving) are gone, and no victim can
    /// be spared.
    #[test]
    fn seeded_plans_always_make_room_and_spare_what_they_can() {
        let seed: u64 = std::env::var("CANOPY_PREEMPT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::thread_rng().gen());
        eprintln!("preempt plan seed: {seed} (CANOPY_PREEMPT_SEED replays it)");
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..300 {
            let n = rng.gen_range(1..=6);
            // Some jobs hold memory, so a suspended one (which keeps it)
            // may not make room where a cancelled one would.
            let jobs: Vec<(u32, u32, Option<u64>)> = (0..rng.gen_range(0..10))
                .map(|_| {
                    let mem = rng.gen_bool(0.3).then(|| rng.gen_range(100..=600));
                    (1, rng.gen_range(1..=4), mem)
                })
                .collect();
            let (slots, allocs) = cluster_mem(n, &jobs);
            let tiers: Vec<u32> = allocs.iter().map(|_| rng.gen_range(0..3)).collect();
            let suspend: Vec<bool> = allocs.iter().map(|_| rng.gen_bool(0.5)).collect();
            let leaving = rng.gen_range(0..=allocs.len().min(1));
            // The one leaving is either ending or suspended for this job.
            let leaving_cpus_only = rng.gen_bool(0.5);
            let freeing: Vec<Freeing<'_>> = allocs[..leaving]
                .iter()
                .map(|alloc| Freeing {
                    alloc,
                    cpus_only: leaving_cpus_only,
                })
                .collect();
            let mut c = candidates(&allocs[leaving..], &tiers[leaving..]);
            for (i, cand) in c.iter_mut().enumerate() {
                cand.job_id = (leaving + i) as u32 + 1;
                cand.suspend = suspend[leaving + i];
            }
            let ranks: Vec<u32> = (0..n as u32).collect();
            let mem = rng.gen_bool(0.3).then(|| rng.gen_range(100..=800));
            let r = req_mem(rng.gen_range(1..=n as u32), rng.gen_range(1..=8), mem);
            let order = Order {
                youngest_first: rng.gen(),
                reorder_count: 1,
            };
            let ctx = format!("seed {seed} round {round}");
            let gone = |ids: &[u32]| {
                let mut s = slots.clone();
                for f in &freeing {
                    if f.cpus_only {
                        release_cpus(f.alloc, &mut s);
                    } else {
                        release(f.alloc, &mut s);
                    }
                }
                for &id in ids {
                    let i = id as usize - 1;
                    if suspend[i] {
                        release_cpus(&allocs[i], &mut s);
                    } else {
                        release(&allocs[i], &mut s);
                    }
                }
                s
            };
            match plan(&r, &ranks, &slots, &freeing, &mut c, order) {
                None => {
                    let all: Vec<u32> = c.iter().map(|c| c.job_id).collect();
                    assert!(place(&r, &ranks, &gone(&all)).is_none(), "{ctx}");
                }
                Some(Plan::Wait) => assert!(place(&r, &ranks, &gone(&[])).is_some(), "{ctx}"),
                Some(Plan::Preempt(v)) => {
                    assert!(!v.is_empty(), "{ctx}");
                    assert!(place(&r, &ranks, &gone(&v)).is_some(), "{ctx}: {v:?}");
                    for skip in 0..v.len() {
                        let fewer: Vec<u32> = v
                            .iter()
                            .enumerate()
                            .filter(|&(k, _)| k != skip)
                            .map(|(_, id)| *id)
                            .collect();
                        assert!(
                            place(&r, &ranks, &gone(&fewer)).is_none(),
                            "{ctx}: {v:?} could spare {}",
                            v[skip]
                        );
                    }
                }
            }
        }
    }
}
