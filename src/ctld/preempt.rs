//! Preemption (`PreemptType=preempt/partition_prio`): after a scheduling
//! pass, the first waiting job of a partition that found no room may take
//! it from running jobs of partitions with a lower `PriorityTier` on the
//! same nodes. The victims are chosen by `sched::preempt::plan`; each gets
//! its partition's `GraceTime` (SIGCONT and SIGTERM at once, torn down
//! when it ends) and is then cancelled (ending PREEMPTED) or requeued
//! (its run accounted PREEMPTED, the job pending again), as its
//! partition's (or the global) `PreemptMode` says. The waiting job keeps
//! its reason (`Resources`) and starts in the pass after they are gone.

use super::command::{Effect, Output};
use super::core::{Core, Deadline};
use crate::config::preempt::{PreemptAction, PreemptKind};
use crate::model::job::{Allocation, JobState, Preemption};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched::gate::StartGate;
use crate::sched::preempt::{plan, Candidate, Order, Plan};
use crate::sched::resv_gate::ResvGate;
use crate::sched::Request;
use crate::wire::messages::KillCause;

const SIGCONT: i32 = 18;
const SIGTERM: i32 = 15;

impl Core {
    /// Preempt for each partition's first waiting job that found no room.
    /// `started`: the jobs the pass just started (not victims in the same
    /// pass: slurmctld preempts before lower tiers get those nodes).
    pub(super) fn preempt_for_waiting(&mut self, now: UnixTime, started: &[u32], out: &mut Output) {
        let conf = self.conf.clone();
        if !conf.preempt.enabled() || conf.preempt.kind != PreemptKind::PartitionPrio {
            return;
        }
        // The reservation rules, built once for every partition below.
        let (resv, _) = self.start_gates(now);
        // Higher tiers first: what they take is gone for the lower ones.
        let mut parts: Vec<usize> = (0..conf.partitions.len()).collect();
        parts.sort_by_key(|&i| {
            std::cmp::Reverse(conf.priority.partition(&conf.partitions[i].name).tier)
        });
        for i in parts {
            let part = &conf.partitions[i];
            let Some((waiting, JobReason::Resources)) = self.jobs.blocked_head(&part.name) else {
                continue;
            };
            let victims = self.victims_for(waiting, i, started, &resv, now);
            for victim in victims {
                self.preempt(victim, waiting, now, out);
            }
        }
    }

    /// Whom to preempt so that job `waiting` (first in partition index
    /// `part`) can start; empty when nothing may or need be.
    fn victims_for(
        &self,
        waiting: u32,
        part: usize,
        started: &[u32],
        resv: &ResvGate,
        now: UnixTime,
    ) -> Vec<u32> {
        let conf = &self.conf;
        let Some(job) = self.jobs.get(waiting) else {
            return Vec::new();
        };
        let tier = conf.priority.partition(&conf.partitions[part].name).tier;
        let Ok(req) = Request::for_job(&job.submit, conf.as_ref()) else {
            return Vec::new();
        };
        // Only the nodes the job may use (its reservation's, or none of an
        // active one it is not in), as the pass saw them.
        let part_ranks = self.partition_ranks(&conf.partitions[part].name);
        let allowed = match resv.restrict(job, part_ranks, now) {
            None => std::borrow::Cow::Borrowed(part_ranks),
            Some(Ok(v)) => std::borrow::Cow::Owned(v),
            Some(Err(_)) => return Vec::new(),
        };
        let ranks: &[u32] = &allowed;
        // The partition's nodes as a map by rank: each running job is
        // checked against it once (no scan of the partition per job).
        let mut in_part = vec![false; self.slots.len()];
        for &r in ranks {
            if let Some(x) = in_part.get_mut(r as usize) {
                *x = true;
            }
        }
        let mut freeing: Vec<&Allocation> = Vec::new();
        let mut candidates: Vec<Candidate<'_>> = Vec::new();
        for j in self.jobs.running() {
            let Some(alloc) = &j.alloc else {
                continue;
            };
            let shares_nodes = alloc
                .ranks
                .iter()
                .any(|&r| in_part.get(r as usize).copied().unwrap_or(false));
            if !shares_nodes {
                continue;
            }
            if j.ending_as.is_some() || j.preempted.is_some() {
                freeing.push(alloc);
                continue;
            }
            if j.state != JobState::Running || started.contains(&j.job_id) {
                continue;
            }
            let Some(pc) = conf.partitions.iter().find(|p| p.name == j.partition) else {
                continue;
            };
            let mode = pc.preempt.mode.unwrap_or(conf.preempt.mode).action;
            let their_tier = conf.priority.partition(&pc.name).tier;
            if their_tier >= tier || mode == PreemptAction::Off {
                continue;
            }
            let start = j.start_time.unwrap_or(now);
            // PreemptExemptTime: too young to be preempted.
            let exempt = conf
                .preempt
                .exempt_time_s
                .is_some_and(|e| ((now - start).max(0) as u64) < e);
            if exempt {
                continue;
            }
            candidates.push(Candidate {
                job_id: j.job_id,
                alloc,
                tier: u32::from(their_tier),
                start,
            });
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let order = Order {
            youngest_first: conf.preempt.youngest_first,
            reorder_count: conf.preempt.reorder_count,
        };
        match plan(&req, ranks, &self.slots, &freeing, &mut candidates, order) {
            Some(Plan::Preempt(v)) => v,
            Some(Plan::Wait) | None => Vec::new(),
        }
    }

    /// Preempt running job `id` for job `by`: with a grace time, warn it
    /// and come back when the time is up; else tear it down now.
    fn preempt(&mut self, id: u32, by: u32, now: UnixTime, out: &mut Output) {
        let conf = self.conf.clone();
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        let Some(pc) = conf.partitions.iter().find(|p| p.name == job.partition) else {
            return;
        };
        let action = pc.preempt.mode.unwrap_or(conf.preempt.mode).action;
        // Only batch jobs that allow it are requeued; others are killed,
        // as slurmctld falls back when its requeue is refused.
        let requeue =
            action == PreemptAction::Requeue && !job.submit.no_requeue && !job.submit.interactive;
        let grace = pc.preempt.grace_s;
        let p = Preemption {
            at: now,
            until: now + i64::from(grace),
            requeue,
            by,
        };
        self.jobs.modify(id, |j| j.preempted = Some(p));
        tracing::info!(
            job_id = id,
            preemptor = by,
            grace_s = grace,
            requeue,
            "job preempted to reclaim resources"
        );
        if grace == 0 {
            self.preemption_over(id, out);
            return;
        }
        // The grace time: SIGCONT (a suspended job must see the SIGTERM),
        // SIGTERM, and the teardown when it is up.
        for signal in [SIGCONT, SIGTERM] {
            out.effect(Effect::SignalJob {
                job_id: id,
                signal,
                batch_only: false,
                steps_only: false,
            });
        }
        self.put_jobs(&[id], out);
        self.arm_deadlines(id, out);
    }

    /// Job `id`'s grace time is over (or it had none): cancel or requeue.
    pub(super) fn preemption_over(&mut self, id: u32, out: &mut Output) {
        let Some(p) = self.jobs.get(id).and_then(|j| j.preempted) else {
            return;
        };
        if p.requeue {
            self.jobs.modify(id, |j| j.requeue = Some(None));
            tracing::info!(job_id = id, preemptor = p.by, "preempted job requeued");
        } else {
            tracing::info!(job_id = id, preemptor = p.by, "preempted job cancelled");
        }
        self.end_job(
            id,
            JobState::Preempted,
            JobReason::None,
            None,
            Some(KillCause::Preempted),
            out,
        );
    }

    /// The end of job `id`'s grace time, if it is being preempted.
    pub(super) fn preempt_due(&self, id: u32) -> Option<(UnixTime, Deadline)> {
        let p = self.jobs.get(id)?.preempted?;
        Some((p.until, Deadline::Preempt))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::fixtures::{reach, register};
    use crate::ctld::{Command, Core, Effect, Output, Reply};
    use crate::model::acct::Usage;
    use crate::model::job::{ExitStatus, JobState, JobSubmit};
    use crate::model::reason::JobReason;
    use crate::policy::authz::Caller;
    use crate::wire::messages::KillCause;

    const ALICE: Caller = Caller {
        uid: 1000,
        operator: false,
    };

    /// One two-CPU node shared by a low and a high partition.
    fn core(low: &str, global: &str) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{global}\nNodeName=n1 CPUs=2\n\
             PartitionName=low Nodes=n1 Default=YES PriorityTier=1 {low}\n\
             PartitionName=high Nodes=n1 PriorityTier=2\n"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let mut c = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0;
        register(&mut c, 0, 1000);
        reach(&mut c, 0, true, 1000);
        c
    }

    const PARTITION_PRIO: &str = "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE";

    fn submit(core: &mut Core, part: &str, now: i64, f: impl FnOnce(&mut JobSubmit)) -> u32 {
        let mut s = JobSubmit {
            name: part.into(),
            uid: 1000,
            user: "alice".into(),
            partition: Some(part.into()),
            ntasks: Some(2),
            script: "#!/bin/sh\n".into(),
            ..Default::default()
        };
        f(&mut s);
        let out = core.apply(
            now,
            Command::Submit {
                submit: Box::new(s),
                caller: ALICE,
            },
        );
        match out.reply {
            Some(Reply::Submit(Ok(r))) => r.job_id,
            other => panic!("{other:?}"),
        }
    }

    fn ended(out: &Output) -> Vec<(u32, JobState, Option<KillCause>)> {
        out.effects
            .iter()
            .filter_map(|e| match e {
                Effect::EndJob {
                    job_id,
                    state,
                    cause,
                    ..
                } => Some((*job_id, *state, *cause)),
                _ => None,
            })
            .collect()
    }

    fn signals(out: &Output, id: u32) -> Vec<i32> {
        out.effects
            .iter()
            .filter_map(|e| match e {
                Effect::SignalJob { job_id, signal, .. } if *job_id == id => Some(*signal),
                _ => None,
            })
            .collect()
    }

    fn wakes(out: &Output) -> Vec<i64> {
        out.effects
            .iter()
            .filter_map(|e| match e {
                Effect::WakeAt(t) => Some(*t),
                _ => None,
            })
            .collect()
    }

    fn job_ended(core: &mut Core, id: u32, state: JobState, now: i64) -> Output {
        core.apply(
            now,
            Command::JobEnded {
                job_id: id,
                state,
                exit: ExitStatus::default(),
                reason: JobReason::None,
                usage: Usage::default(),
            },
        )
    }

    fn state(core: &Core, id: u32) -> JobState {
        core.jobs().get(id).unwrap().state
    }

    #[test]
    fn a_higher_tier_job_requeues_a_lower_one_and_starts_when_it_is_gone() {
        let mut c = core("", PARTITION_PRIO);
        let low = submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        assert_eq!(state(&c, low), JobState::Running);
        let high = submit(&mut c, "high", 1100, |_| {});
        let out = c.apply(1100, Command::Schedule);
        assert_eq!(
            ended(&out),
            [(low, JobState::Preempted, Some(KillCause::Preempted))]
        );
        // The preemptor waits for the resources to come back.
        assert_eq!(state(&c, high), JobState::Pending);
        assert_eq!(
            c.jobs().reason(c.jobs().get(high).unwrap(), 1100),
            JobReason::Resources
        );
        // A second pass while it goes does not preempt again.
        assert!(ended(&c.apply(1101, Command::Schedule)).is_empty());
        job_ended(&mut c, low, JobState::Preempted, 1102);
        // Requeued: pending again, its run accounted PREEMPTED.
        let j = c.jobs().get(low).unwrap();
        assert_eq!(
            (j.state, j.restarts, j.preempted),
            (JobState::Pending, 1, None)
        );
        // The run is its own record for sacct -D, ended PREEMPTED.
        let runs: Vec<_> = j
            .earlier_runs
            .iter()
            .map(|r| (r.state, r.start_time, r.end_time))
            .collect();
        assert_eq!(runs, [(JobState::Preempted, Some(1000), Some(1102))]);
        c.apply(1102, Command::Schedule);
        assert_eq!(state(&c, high), JobState::Running);
        assert_eq!(state(&c, low), JobState::Pending);
    }

    #[test]
    fn grace_time_warns_first_and_cancel_mode_ends_the_job_preempted() {
        let mut c = core("PreemptMode=CANCEL GraceTime=30", PARTITION_PRIO);
        let low = submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        let out = c.apply(1100, Command::Schedule);
        assert!(ended(&out).is_empty(), "not before its grace time");
        assert_eq!(signals(&out, low), [18, 15]);
        assert!(wakes(&out).contains(&1130));
        assert!(
            out.persist.iter().any(|op| matches!(op,
                crate::state::store::Op::PutJob(j) if j.job_id == low && j.preempted.is_some())),
            "the grace deadline is on disk"
        );
        assert!(ended(&c.apply(1129, Command::Schedule)).is_empty());
        let out = c.apply(1130, Command::Schedule);
        assert_eq!(
            ended(&out),
            [(low, JobState::Preempted, Some(KillCause::Preempted))]
        );
        job_ended(&mut c, low, JobState::Preempted, 1131);
        assert_eq!(
            state(&c, low),
            JobState::Preempted,
            "cancelled, not requeued"
        );
    }

    #[test]
    fn a_restart_keeps_the_grace_deadline() {
        let mut c = core("GraceTime=60", PARTITION_PRIO);
        let low = submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        c.apply(1100, Command::Schedule);
        let records: Vec<_> = c.jobs().values().cloned().collect();
        let conf = c.conf().clone();
        let (mut again, out) = Core::recover(conf, records, None, &HashMap::new(), 1120);
        assert!(wakes(&out).contains(&1160), "{:?}", out.effects);
        register(&mut again, 0, 1120);
        reach(&mut again, 0, true, 1120);
        let out = again.apply(1160, Command::Schedule);
        assert_eq!(
            ended(&out),
            [(low, JobState::Preempted, Some(KillCause::Preempted))]
        );
    }

    #[test]
    fn who_is_spared_same_tier_off_mode_exempt_time_and_no_requeue() {
        // Same tier: no preemption.
        let mut c = core("PriorityTier=2", PARTITION_PRIO);
        submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
        // The low partition's own PreemptMode=OFF.
        let mut c = core("PreemptMode=OFF", PARTITION_PRIO);
        submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
        // PreemptExemptTime: not before it has run 5 minutes.
        let mut c = core("", &format!("{PARTITION_PRIO}\nPreemptExemptTime=5"));
        let low = submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
        assert_eq!(ended(&c.apply(1300, Command::Schedule)).len(), 1);
        assert_eq!(state(&c, low), JobState::Running, "still tearing down");
        // --no-requeue under REQUEUE: killed instead.
        let mut c = core("", PARTITION_PRIO);
        let low = submit(&mut c, "low", 1000, |s| s.no_requeue = true);
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        c.apply(1100, Command::Schedule);
        job_ended(&mut c, low, JobState::Preempted, 1101);
        assert_eq!(state(&c, low), JobState::Preempted);
        // No PreemptType: nothing.
        let mut c = core("", "");
        submit(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        let high = submit(&mut c, "high", 1100, |_| {});
        assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
        assert_eq!(state(&c, high), JobState::Pending);
    }

    #[test]
    fn a_job_started_in_the_same_pass_is_not_its_victim() {
        let mut c = core("", PARTITION_PRIO);
        let a = submit(&mut c, "low", 1000, |s| s.ntasks = Some(1));
        c.apply(1000, Command::Schedule);
        // The high job needs the whole node; a one-CPU low job starts on
        // the free CPU in the same pass, after the high one was tried.
        submit(&mut c, "high", 1100, |_| {});
        let b = submit(&mut c, "low", 1100, |s| s.ntasks = Some(1));
        let out = c.apply(1100, Command::Schedule);
        assert_eq!(state(&c, b), JobState::Running);
        assert!(
            ended(&out).iter().all(|(id, _, _)| *id != b),
            "{:?}",
            ended(&out)
        );
        // A later pass may take both.
        let out = c.apply(1101, Command::Schedule);
        let mut victims: Vec<u32> = ended(&out).iter().map(|(id, _, _)| *id).collect();
        victims.sort_unstable();
        assert_eq!(victims, [a, b]);
    }

    #[test]
    fn higher_tiers_are_scheduled_first() {
        let mut c = core("", "");
        let low = submit(&mut c, "low", 1000, |s| s.hold = false);
        let high = submit(&mut c, "high", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        assert_eq!(state(&c, high), JobState::Running);
        assert_eq!(state(&c, low), JobState::Pending);
    }
}
