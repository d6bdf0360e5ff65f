//! Preemption: after a scheduling pass, the first waiting job of a
//! partition that found no room may take it from running jobs on the same
//! nodes that it outranks: by partition `PriorityTier`
//! (`PreemptType=preempt/partition_prio`) or by its QOS's `Preempt=` list
//! (`preempt/qos`). The victims are chosen by `sched::preempt::plan`.
//! Under preempt/qos a job queued behind that head whose QOS lists the
//! head's preempts instead when the head cannot (slurmctld sorts such a
//! job first); a preemptor starts as soon as its last victim is gone, so
//! what they give back goes to it and not to a job ahead of it.
//!
//! What happens to a victim is its `PreemptMode` (its partition's under
//! partition_prio, its QOS's under qos, else the cluster's): CANCEL and
//! REQUEUE give it the `GraceTime` (its partition's or its QOS's: SIGCONT
//! and SIGTERM at once, torn down when it ends), then cancel it (it ends
//! PREEMPTED) or requeue it (its run accounted PREEMPTED, the job pending
//! again); the waiting job keeps its reason (`Resources`) and starts in
//! the pass after they are gone. SUSPEND (with the cluster's `GANG`) is
//! `gang.rs`: the victim stops at once and the waiting job starts on its
//! CPUs in the same pass.

use super::command::{Effect, Output};
use super::core::{Core, Deadline};
use crate::config::preempt::{PreemptAction, PreemptKind};
use crate::model::assoc::{PreemptMode as QosMode, Qos};
use crate::model::job::{JobRecord, JobState, Preemption};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched::gate::StartGate;
use crate::sched::preempt::{plan, Candidate, Freeing, Order, Plan};
use crate::sched::resv_gate::ResvGate;
use crate::sched::Request;
use crate::wire::messages::KillCause;

const SIGCONT: i32 = 18;
const SIGTERM: i32 = 15;

/// How a running job is preempted, by the policy in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct VictimTerms {
    pub action: PreemptAction,
    pub grace_s: u32,
}

/// Whom a waiting job may preempt, and the victims chosen for it.
pub(super) struct Chosen {
    pub victims: Vec<u32>,
    /// The nodes it may use (its partition's, narrowed by a reservation).
    pub ranks: Vec<u32>,
}

impl Core {
    /// Preempt for each partition's first waiting job that found no room.
    /// `started`: the jobs the pass just started (not victims in the same
    /// pass: slurmctld preempts before lower tiers get those nodes).
    /// Returns the jobs started here, on CPUs of jobs suspended for them.
    pub(super) fn preempt_for_waiting(
        &mut self,
        now: UnixTime,
        started: &[u32],
        out: &mut Output,
    ) -> Vec<u32> {
        let conf = self.conf.clone();
        if !conf.preempt.enabled() {
            return Vec::new();
        }
        // The reservation rules, built once for every partition below.
        let (resv, _) = self.start_gates(now);
        // Higher tiers first: what they take is gone for the lower ones.
        let mut parts: Vec<usize> = (0..conf.partitions.len()).collect();
        parts.sort_by_key(|&i| {
            std::cmp::Reverse(conf.priority.partition(&conf.partitions[i].name).tier)
        });
        let mut also_started = Vec::new();
        for i in parts {
            let part = &conf.partitions[i];
            let Some((head, JobReason::Resources)) = self.jobs.blocked_head(&part.name) else {
                continue;
            };
            let Some(mut chosen) = self.victims_for(head, i, started, &resv, now) else {
                continue;
            };
            let mut waiting = head;
            if chosen.victims.is_empty() && !self.has_lenders(head) {
                // slurmctld puts a job that may preempt the head before it
                // in the queue: such a job behind the head preempts instead.
                if let Some((j, c)) = self.preemptor_behind(head, i, started, &resv, now) {
                    (waiting, chosen) = (j, c);
                }
            }
            for &victim in &chosen.victims {
                self.preempt(victim, waiting, now, out);
            }
            if self.start_over_suspended(waiting, &chosen.ranks, now, out) {
                also_started.push(waiting);
            }
        }
        also_started
    }

    /// How far behind a blocked head the search for a job that may preempt
    /// it goes (a bound on the work of one pass).
    const BEHIND: usize = 100;

    /// The first job queued behind `head` (in partition index `part`) that
    /// slurmctld would order before it, because it may preempt it
    /// (preempt/qos: its QOS lists the head's), and that has victims now.
    fn preemptor_behind(
        &self,
        head: u32,
        part: usize,
        started: &[u32],
        resv: &ResvGate,
        now: UnixTime,
    ) -> Option<(u32, Chosen)> {
        if self.conf.preempt.kind != PreemptKind::Qos {
            // Under partition_prio a partition's jobs share one tier.
            return None;
        }
        let head_job = self.jobs.get(head)?;
        let tier = self.conf.priority.partition(&head_job.partition).tier;
        let behind = self.jobs.queued_in(&head_job.partition, Self::BEHIND);
        // The pass did not reach these jobs: they pass policy's gates here
        // (association and QOS limits, reservations, licenses).
        let limits = super::pass_policy::limits(
            &self.accounts,
            &self.conf,
            &self.prio.usage,
            now,
            self.jobs.running(),
        );
        let (_, licenses) = self.start_gates(now);
        let gated = |j: &JobRecord| {
            limits.blocked(j, now).is_some()
                || resv.blocked(j, now).is_some()
                || licenses.blocked(j, now).is_some()
        };
        for id in behind.into_iter().filter(|&id| id != head) {
            let Some(j) = self.jobs.get(id) else {
                continue;
            };
            let later = j.submit.begin_time.is_some_and(|t| t > now);
            if later || self.jobs.is_throttled(id) || gated(j) {
                continue;
            }
            if self.outranks(j, tier, head_job).is_none() {
                continue;
            }
            match self.victims_for(id, part, started, resv, now) {
                Some(c) if !c.victims.is_empty() || self.has_lenders(id) => return Some((id, c)),
                _ => {}
            }
        }
        None
    }

    /// Whether jobs are suspended for job `id` and wait for it to start.
    fn has_lenders(&self, id: u32) -> bool {
        self.jobs.running().any(|j| {
            j.state == JobState::Suspended
                && j.preempt_suspended
                    .as_ref()
                    .is_some_and(|s| s.by == id && s.lent.is_empty())
        })
    }

    /// The QOS record of a job (`None`: it has none, or it is unknown).
    pub(super) fn job_qos(&self, j: &JobRecord) -> Option<&Qos> {
        j.submit
            .qos
            .as_deref()
            .and_then(|q| self.accounts.qos.get(q))
    }

    /// How job `j` is preempted: its partition's mode and grace time under
    /// partition_prio, its QOS's under qos (the cluster's mode where those
    /// say nothing). SUSPEND without the cluster's GANG kills it, as
    /// slurmctld does (`_preempt_jobs`: the victim "had to be killed").
    pub(super) fn victim_terms(&self, j: &JobRecord) -> Option<VictimTerms> {
        let conf = &self.conf.preempt;
        let (action, grace_s) = match conf.kind {
            PreemptKind::None => return None,
            PreemptKind::PartitionPrio => {
                let pc = self
                    .conf
                    .partitions
                    .iter()
                    .find(|p| p.name == j.partition)?;
                let mode = pc.preempt.mode.unwrap_or(conf.mode).action;
                (mode, pc.preempt.grace_s)
            }
            PreemptKind::Qos => {
                let q = self.job_qos(j);
                let action = match q.map(|q| q.preempt_mode) {
                    None | Some(QosMode::Cluster) => conf.mode.action,
                    Some(QosMode::Off) => PreemptAction::Off,
                    Some(QosMode::Cancel) => PreemptAction::Cancel,
                    Some(QosMode::Requeue) => PreemptAction::Requeue,
                    Some(QosMode::Suspend) => PreemptAction::Suspend,
                };
                (action, q.map_or(0, |q| q.grace_time))
            }
        };
        let action = if action == PreemptAction::Suspend && !conf.mode.gang {
            PreemptAction::Cancel
        } else {
            action
        };
        Some(VictimTerms { action, grace_s })
    }

    /// Whether job `by` (waiting in a partition of tier `tier`) outranks
    /// running job `j`, and how much `j` matters in the victims' order
    /// (its tier, or its QOS's priority). `None`: it may not be preempted
    /// by `by`.
    fn outranks(&self, by: &JobRecord, tier: u16, j: &JobRecord) -> Option<u32> {
        match self.conf.preempt.kind {
            PreemptKind::None => None,
            PreemptKind::PartitionPrio => {
                let theirs = self.conf.priority.partition(&j.partition).tier;
                (theirs < tier).then_some(u32::from(theirs))
            }
            PreemptKind::Qos => {
                // As preempt/qos: both need a QOS; the same QOS only with
                // WITHIN and a higher job priority; else the preemptor's
                // QOS must list the victim's.
                let (mine, theirs) = (self.job_qos(by)?, self.job_qos(j)?);
                let may = if mine.id == theirs.id {
                    self.conf.preempt.mode.within && by.priority > j.priority
                } else {
                    mine.preempt.contains(&theirs.name)
                };
                may.then_some(theirs.priority)
            }
        }
    }

    /// `PreemptExemptTime`: the victim's QOS's if it has one, else the
    /// cluster's (as `acct_policy_get_preemptable_time`).
    fn exempt(&self, j: &JobRecord, now: UnixTime) -> bool {
        let limit = self
            .job_qos(j)
            .and_then(|q| q.preempt_exempt_time)
            .map(u64::from)
            .or(self.conf.preempt.exempt_time_s);
        let ran = u64::try_from(now - j.start_time.unwrap_or(now)).unwrap_or(0);
        limit.is_some_and(|e| ran < e)
    }

    /// Whom to preempt so that job `waiting` (first in partition index
    /// `part`) can start; `None` when it may use no node.
    fn victims_for(
        &self,
        waiting: u32,
        part: usize,
        started: &[u32],
        resv: &ResvGate,
        now: UnixTime,
    ) -> Option<Chosen> {
        let conf = &self.conf;
        let job = self.jobs.get(waiting)?;
        let tier = conf.priority.partition(&conf.partitions[part].name).tier;
        let req = Request::for_job(&job.submit, conf.as_ref()).ok()?;
        // Only the nodes the job may use (its reservation's, or none of an
        // active one it is not in), as the pass saw them.
        let part_ranks = self.partition_ranks(&conf.partitions[part].name);
        let ranks: Vec<u32> = match resv.restrict(job, part_ranks, now) {
            None => part_ranks.to_vec(),
            Some(Ok(v)) => v,
            Some(Err(_)) => return None,
        };
        // The partition's nodes as a map by rank: each running job is
        // checked against it once (no scan of the partition per job).
        let mut in_part = vec![false; self.slots.len()];
        for &r in &ranks {
            if let Some(x) = in_part.get_mut(r as usize) {
                *x = true;
            }
        }
        // A job ending while suspended for a preemptor frees only what it
        // holds: the CPUs it lent are the running preemptor's.
        let held: std::collections::HashMap<u32, crate::model::job::Allocation> = self
            .jobs
            .running()
            .filter(|j| j.ending_as.is_some() || j.preempted.is_some())
            .filter(|j| {
                j.preempt_suspended
                    .as_ref()
                    .is_some_and(|s| !s.lent.is_empty())
            })
            .filter_map(|j| Some((j.job_id, j.held_alloc()?)))
            .collect();
        let mut freeing: Vec<Freeing<'_>> = Vec::new();
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
                freeing.push(Freeing {
                    alloc: held.get(&j.job_id).unwrap_or(alloc),
                    cpus_only: false,
                });
                continue;
            }
            // Suspended for this very job: its CPUs are this job's to take.
            if j.preempt_suspended
                .as_ref()
                .is_some_and(|s| s.by == waiting)
            {
                freeing.push(Freeing {
                    alloc,
                    cpus_only: true,
                });
                continue;
            }
            if j.state != JobState::Running || started.contains(&j.job_id) {
                continue;
            }
            let Some(prio) = self.outranks(job, tier, j) else {
                continue;
            };
            let Some(terms) = self.victim_terms(j) else {
                continue;
            };
            if terms.action == PreemptAction::Off || self.exempt(j, now) {
                continue;
            }
            // Its CPUs may be other sharers' too: not lent by suspending
            // (see `gang`), so the preemptor waits for it instead.
            if terms.action == PreemptAction::Suspend
                && alloc.share.as_ref().is_some_and(|t| t.shares())
            {
                continue;
            }
            candidates.push(Candidate {
                job_id: j.job_id,
                alloc,
                prio,
                start: j.start_time.unwrap_or(now),
                suspend: terms.action == PreemptAction::Suspend,
            });
        }
        let order = Order {
            youngest_first: conf.preempt.youngest_first,
            reorder_count: conf.preempt.reorder_count,
        };
        let victims = if candidates.is_empty() {
            Vec::new()
        } else {
            match plan(&req, &ranks, &self.slots, &freeing, &mut candidates, order) {
                Some(Plan::Preempt(v)) => v,
                Some(Plan::Wait) | None => Vec::new(),
            }
        };
        Some(Chosen { victims, ranks })
    }

    /// Preempt running job `id` for job `by`: suspend it, or, with a grace
    /// time, warn it and come back when the time is up; else tear it down
    /// now.
    fn preempt(&mut self, id: u32, by: u32, now: UnixTime, out: &mut Output) {
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        let Some(terms) = self.victim_terms(job) else {
            return;
        };
        if terms.action == PreemptAction::Suspend {
            self.suspend_for(id, by, now, out);
            return;
        }
        // Only batch jobs that allow it are requeued; others are killed,
        // as slurmctld falls back when its requeue is refused.
        let requeue = terms.action == PreemptAction::Requeue
            && !job.submit.no_requeue
            && !job.submit.interactive;
        let grace = terms.grace_s;
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

    /// A victim of job `by` is gone: start `by` now if it fits, before the
    /// next pass could give what came free to a job ahead of it in the
    /// queue (the victim itself, requeued, among them). slurmctld gets the
    /// same by putting jobs that can preempt first in its queue.
    pub(super) fn start_preemptor(&mut self, by: u32, now: UnixTime, out: &mut Output) {
        if !self.jobs.is_queued(by) {
            return;
        }
        let Some(job) = self.jobs.get(by) else {
            return;
        };
        let Ok(req) = Request::for_job(&job.submit, self.conf.as_ref()) else {
            return;
        };
        let (resv, _) = self.start_gates(now);
        let part_ranks = self.partition_ranks(&job.partition);
        let ranks: Vec<u32> = match resv.restrict(job, part_ranks, now) {
            None => part_ranks.to_vec(),
            Some(Ok(v)) => v,
            Some(Err(_)) => return,
        };
        // Jobs suspended for it lend it their CPUs as it starts.
        if self.has_lenders(by) {
            if self.start_over_suspended(by, &ranks, now, out) {
                self.jobs_started(&[by], out);
            }
            return;
        }
        let Some(alloc) = crate::sched::place(&req, &ranks, &self.slots) else {
            return;
        };
        crate::sched::apply(&alloc, &mut self.slots);
        if self.jobs.start_job(by, alloc, now) {
            tracing::info!(
                job_id = by,
                "preemptor started on what its victims gave back"
            );
            self.jobs_started(&[by], out);
        }
    }

    /// The end of job `id`'s grace time, if it is being preempted.
    pub(super) fn preempt_due(&self, id: u32) -> Option<(UnixTime, Deadline)> {
        let p = self.jobs.get(id)?.preempted?;
        Some((p.until, Deadline::Preempt))
    }
}
