//! Preemption by suspending (`PreemptMode=SUSPEND,GANG`): the victim is
//! stopped (SIGSTOP to all its processes, as `scontrol suspend`) and keeps
//! its memory and GRES; its CPUs are lent to the job it was suspended for,
//! which starts on them in the same pass. Nobody else may use them: until
//! the preemptor starts they stay held by the suspended job, and once it
//! starts they are held by the preemptor. When they are free again (the
//! preemptor ended, or was itself preempted or requeued), the suspended
//! job takes them back and resumes (SIGCONT), its time limit pushed back
//! by the time it was stopped, as slurmctld's `job_suspend` does.
//!
//! Which CPUs were lent is kept in the job's record, so a restarted
//! controller holds exactly what each job holds. N.B. Slurm's gang
//! scheduler also time-slices jobs of one tier that share nodes in
//! `OverSubscribe=FORCE` partitions (`SchedulerTimeSlice`), and under
//! preempt/qos a victim in the preemptor's own partition takes turns with
//! it. canopy shares CPUs under OverSubscribe (`sched::share`) but does
//! not time-slice the sharers (the reader names GANG with FORCE
//! partitions at start-up): they run at once, up to FORCE's count per
//! CPU. `GANG` does only the suspending here, and a victim waits until
//! its CPUs are free, in any partition. A job whose CPUs are shared is
//! not suspended for a preemptor (`ctld::preempt`): lending CPUs other
//! sharers also hold would need the lent record to carry shares.

use super::command::{Effect, Output};
use super::core::Core;
use crate::model::job::{JobState, LentCpus, PreemptSuspend};
use crate::model::time::UnixTime;
use crate::sched::{self, Request};

const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

impl Core {
    /// Suspend running job `id` to make room for job `by`. Its CPUs stay
    /// held until `by` starts on them ([`Core::start_over_suspended`]).
    pub(super) fn suspend_for(&mut self, id: u32, by: u32, now: UnixTime, out: &mut Output) {
        if !self.jobs.set_suspended(id, true) {
            return;
        }
        self.jobs.modify(id, |j| {
            let start = j.start_time.unwrap_or(now);
            j.suspend.suspend(start, now);
            j.preempt_suspended = Some(PreemptSuspend {
                at: now,
                by,
                lent: Vec::new(),
            });
        });
        out.effect(Effect::SignalJob {
            job_id: id,
            signal: SIGSTOP,
            batch_only: false,
            steps_only: false,
        });
        self.put_jobs(&[id], out);
        tracing::info!(
            job_id = id,
            preemptor = by,
            "preempted job suspended to reclaim resources"
        );
    }

    /// Start pending job `id` on `ranks` with the CPUs of the jobs
    /// suspended for it, if it fits there now: they lend it what it takes.
    /// True if it started (the caller carries the start out).
    pub(super) fn start_over_suspended(
        &mut self,
        id: u32,
        ranks: &[u32],
        now: UnixTime,
        out: &mut Output,
    ) -> bool {
        let lenders: Vec<u32> = self
            .jobs
            .running()
            .filter(|j| j.state == JobState::Suspended && j.ending_as.is_none())
            .filter(|j| {
                j.preempt_suspended
                    .as_ref()
                    .is_some_and(|s| s.by == id && s.lent.is_empty())
            })
            .map(|j| j.job_id)
            .collect();
        if lenders.is_empty() {
            return false;
        }
        // Only a job that may start (not held, no open dependency): the
        // lending below is undone by nothing.
        if !self.jobs.is_queued(id) {
            return false;
        }
        let Some(job) = self.jobs.get(id) else {
            return false;
        };
        let Ok(req) = Request::for_job(&job.submit, self.conf.as_ref()) else {
            return false;
        };
        let mut trial = self.slots.clone();
        for &l in &lenders {
            if let Some(a) = self.jobs.get(l).and_then(|j| j.alloc.as_ref()) {
                sched::release_cpus(a, &mut trial);
            }
        }
        let Some(alloc) = sched::place(&req, ranks, &trial) else {
            return false;
        };
        let mut idle = Vec::new();
        for &l in &lenders {
            let lender = self.jobs.get(l).and_then(|j| j.alloc.as_ref());
            let lent = lender.map(|a| lent_to(a, &alloc)).unwrap_or_default();
            let part = lender.and_then(|a| a.cap_part.clone());
            for c in &lent {
                let p = part.as_deref();
                sched::hold_cpus(c.rank, &c.ids, c.count, &mut self.slots, false, p);
            }
            if lent.is_empty() {
                idle.push(l);
            }
            self.jobs.modify(l, |j| {
                if let Some(s) = &mut j.preempt_suspended {
                    s.lent = lent;
                }
            });
        }
        sched::apply(&alloc, &mut self.slots);
        if !self.jobs.start_job(id, alloc, now) {
            return false;
        }
        tracing::info!(job_id = id, lenders = ?lenders, "started on the CPUs of the jobs suspended for it");
        self.put_jobs(&lenders, out);
        // One it did not need after all goes on at once.
        for l in idle {
            self.resume_suspended(l, now, out);
        }
        true
    }

    /// Resume every job suspended for a preemptor whose lent CPUs are free
    /// again, most important first. A job whose preemptor has not started
    /// and may still start stays suspended for it; one whose preemptor was
    /// held, cancelled or ended goes on.
    pub(super) fn resume_ready(&mut self, now: UnixTime, out: &mut Output) {
        let mut ready: Vec<(u32, u32)> = self
            .jobs
            .running()
            .filter(|j| j.state == JobState::Suspended && j.ending_as.is_none())
            .filter(|j| {
                j.preempt_suspended
                    .as_ref()
                    .is_some_and(|s| !s.lent.is_empty() || !self.jobs.is_queued(s.by))
            })
            .map(|j| (j.priority, j.job_id))
            .collect();
        if ready.is_empty() {
            return;
        }
        ready.sort_by_key(|&(prio, id)| (std::cmp::Reverse(prio), id));
        for (_, id) in ready {
            self.resume_suspended(id, now, out);
        }
    }

    /// Take back the CPUs job `id` lent, if they are free, and resume it.
    /// False if they are not free (or it is not suspended for a preemptor).
    pub(super) fn resume_suspended(&mut self, id: u32, now: UnixTime, out: &mut Output) -> bool {
        let Some(lent) = self
            .jobs
            .get(id)
            .filter(|j| j.state == JobState::Suspended)
            .and_then(|j| j.preempt_suspended.as_ref())
            .map(|s| s.lent.clone())
        else {
            return false;
        };
        let free = lent.iter().all(|c| {
            self.slots.get(c.rank as usize).is_some_and(|s| {
                s.cpus.saturating_sub(s.alloc_cpus) >= c.count
                    && c.ids.iter().all(|&x| !s.used.contains(x))
            })
        });
        if !free {
            return false;
        }
        let part = self
            .jobs
            .get(id)
            .and_then(|j| j.alloc.as_ref())
            .and_then(|a| a.cap_part.clone());
        for c in &lent {
            let p = part.as_deref();
            sched::hold_cpus(c.rank, &c.ids, c.count, &mut self.slots, true, p);
        }
        self.jobs.set_suspended(id, false);
        self.jobs.modify(id, |j| {
            j.suspend.resume(now);
            j.preempt_suspended = None;
        });
        out.effect(Effect::SignalJob {
            job_id: id,
            signal: SIGCONT,
            batch_only: false,
            steps_only: false,
        });
        self.put_jobs(&[id], out);
        // Its time limit, pushed back by the time it was stopped.
        self.arm_deadlines(id, out);
        tracing::info!(job_id = id, "suspended job resumed");
        true
    }

    /// What job `j` holds now, for the slots at recovery and at its end.
    pub(super) fn held_by(&self, id: u32) -> Option<crate::model::job::Allocation> {
        self.jobs.get(id).and_then(|j| j.held_alloc())
    }
}

/// The CPUs of `victim` that `taker` uses, node by node.
fn lent_to(
    victim: &crate::model::job::Allocation,
    taker: &crate::model::job::Allocation,
) -> Vec<LentCpus> {
    let mut out = Vec::new();
    for (i, &rank) in victim.ranks.iter().enumerate() {
        let Some(k) = taker.ranks.iter().position(|&r| r == rank) else {
            continue;
        };
        let mine = victim.cpu_ids.get(i).map_or(&[][..], Vec::as_slice);
        let theirs = taker.cpu_ids.get(k).map_or(&[][..], Vec::as_slice);
        let (ids, count) = if mine.is_empty() {
            // A record from before CPUs were held by identity: by count.
            let n = victim.cpus.get(i).copied().unwrap_or(0);
            let t = taker.cpus.get(k).copied().unwrap_or(0);
            (Vec::new(), n.min(t))
        } else {
            let ids: Vec<u32> = mine
                .iter()
                .copied()
                .filter(|x| theirs.contains(x))
                .collect();
            let n = ids.len() as u32;
            (ids, n)
        };
        if count > 0 {
            out.push(LentCpus { rank, ids, count });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{Allocation, JobRecord};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn alloc(nodes: &[(u32, Vec<u32>)]) -> Allocation {
        Allocation {
            ranks: nodes.iter().map(|(r, _)| *r).collect(),
            cpus: nodes.iter().map(|(_, ids)| ids.len() as u32).collect(),
            tasks: nodes.iter().map(|(_, ids)| ids.len() as u32).collect(),
            mem_mb: 100,
            cpu_ids: nodes.iter().map(|(_, ids)| ids.clone()).collect(),
            gres: Vec::new(),
            share: None,
            cap_part: None,
        }
    }

    /// Random victims and takers on shared nodes: what the victim lends is
    /// exactly the CPUs both hold, what it keeps is the rest of its own,
    /// and nothing is held by both once it has lent.
    #[test]
    fn seeded_lending_splits_a_victims_cpus_exactly() {
        let seed: u64 = std::env::var("CANOPY_GANG_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::thread_rng().gen());
        eprintln!("gang lending seed: {seed} (CANOPY_GANG_SEED replays it)");
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..500 {
            let ctx = format!("seed {seed} round {round}");
            let mut victim = Vec::new();
            let mut taker = Vec::new();
            for rank in 0..rng.gen_range(1..4u32) {
                // Eight CPUs: each the victim's, the taker's, or idle; the
                // taker may also take the victim's.
                let (mut v, mut t) = (Vec::new(), Vec::new());
                for id in 0..8u32 {
                    match rng.gen_range(0..4) {
                        0 => v.push(id),
                        1 => t.push(id),
                        2 => {
                            v.push(id);
                            t.push(id)
                        }
                        _ => {}
                    }
                }
                if !v.is_empty() && rng.gen_bool(0.8) {
                    victim.push((rank, v));
                }
                if !t.is_empty() && rng.gen_bool(0.8) {
                    taker.push((rank, t));
                }
            }
            if victim.is_empty() {
                continue;
            }
            let (va, ta) = (alloc(&victim), alloc(&taker));
            let lent = lent_to(&va, &ta);
            let mut rec = crate::ctld::fixtures::running(1, 0);
            rec.alloc = Some(va.clone());
            rec.preempt_suspended = Some(PreemptSuspend {
                at: 0,
                by: 2,
                lent: lent.clone(),
            });
            let held = JobRecord::held_alloc(&rec).unwrap();
            assert_eq!(held.mem_mb, va.mem_mb, "{ctx}: memory stays held");
            for (i, (rank, ids)) in victim.iter().enumerate() {
                let theirs: Vec<u32> = taker
                    .iter()
                    .find(|(r, _)| r == rank)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default();
                let both: Vec<u32> = ids.iter().copied().filter(|x| theirs.contains(x)).collect();
                let l = lent.iter().find(|c| c.rank == *rank);
                assert_eq!(l.map_or(&[][..], |c| &c.ids[..]), &both[..], "{ctx}");
                assert_eq!(l.map_or(0, |c| c.count), both.len() as u32, "{ctx}");
                let kept = &held.cpu_ids[i];
                assert!(kept.iter().all(|x| !theirs.contains(x)), "{ctx}");
                assert_eq!(kept.len() + both.len(), ids.len(), "{ctx}");
                assert_eq!(held.cpus[i] as usize, kept.len(), "{ctx}");
            }
        }
    }
}
