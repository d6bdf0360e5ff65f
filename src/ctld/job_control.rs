//! What users and operators do to jobs: cancel and signal, cancel a step,
//! hold and release, update, requeue, suspend and resume, top. Each job in
//! a request gets its own result, in Slurm's words.

use super::admission::with_nice;
use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::config::hostlist;
use crate::mail;
use crate::model::job::{JobRecord, JobState, StepKind};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::admission::{check_partition, Shape, TimeAsk};
use crate::policy::authz::{self, Action, Caller};
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    CancelReply, CancelRequest, JobUpdate, KillCause, NodeCommand, RequeueKind, StepCancel,
};

type Results = Vec<(u32, Option<String>)>;

impl Core {
    /// Job `id`, if `caller` may do `action` to it.
    fn job_for(&self, id: u32, caller: Caller, action: Action) -> Result<&JobRecord, String> {
        let job = self
            .jobs
            .get(id)
            .ok_or_else(|| "Invalid job id specified".to_string())?;
        authz::check(caller, action, Some(job.submit.uid)).map_err(|d| d.0.to_string())?;
        Ok(job)
    }

    pub(super) fn cancel(
        &mut self,
        req: CancelRequest,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let mut results = Vec::new();
        let mut changed = Vec::new();
        let mut finals = Vec::new();
        // Another user's job named directly is refused once, after the
        // caller's own are acted on, as Slurm's scancel reports it; the
        // tasks an array id stands for are checked one by one below.
        let mut denied = Vec::new();
        let mut asked = req.job_ids.clone();
        asked.retain(|&id| match self.job_for(id, caller, Action::Cancel) {
            Err(e) if self.jobs.contains(id) => {
                denied.push((id, Some(e)));
                false
            }
            _ => true,
        });
        let ids = if req.exact {
            asked
        } else {
            self.resolve_ids(&asked)
        };
        for id in ids {
            let job = match self.job_for(id, caller, Action::Cancel) {
                Ok(j) => j,
                Err(e) => {
                    results.push((id, Some(e)));
                    continue;
                }
            };
            match (job.state, req.signal) {
                (s, _) if s.is_finished() || job.ending_as.is_some() => {
                    results.push((id, Some("Job/step already completing or completed".into())))
                }
                (JobState::Pending, None) => {
                    self.jobs.cancel_pending(id, now);
                    self.count_end(JobState::Cancelled);
                    finals.push(id);
                    results.push((id, None));
                }
                (JobState::Pending, Some(_)) => {
                    results.push((id, Some("Job is pending execution".into())))
                }
                (_, Some(signal)) => {
                    out.effect(Effect::SignalJob {
                        job_id: id,
                        signal,
                        batch_only: req.batch_only,
                        steps_only: false,
                    });
                    results.push((id, None));
                }
                (_, None) => {
                    // Running: shown CG while every node tears it down.
                    self.end_job(id, JobState::Cancelled, JobReason::None, None, None, out);
                    changed.push(id);
                    results.push((id, None));
                }
            }
        }
        self.put_jobs(&changed, out);
        // Pending jobs cancelled here are final: recorded for accounting too.
        self.persist_final(&finals, Default::default(), out);
        if !changed.is_empty() || !finals.is_empty() {
            out.effect(Effect::Reschedule);
        }
        results.extend(denied);
        out.reply = Some(Reply::Results(CancelReply { results }));
    }

    /// `scancel J.S`: the step's nodes kill it (and note it to srun, whose
    /// exit report then records it) or signal its tasks. The errors are the
    /// texts Slurm's controller gives; a pending job has no steps to act on,
    /// and a signal for a step that is not running is quietly dropped, as
    /// in Slurm.
    pub(super) fn cancel_step(&mut self, r: &StepCancel, caller: Caller, out: &mut Output) {
        let result = self.cancel_step_inner(r, caller, out).err();
        out.reply = Some(Reply::Results(CancelReply {
            results: vec![(r.job_id, result)],
        }));
    }

    fn cancel_step_inner(
        &self,
        r: &StepCancel,
        caller: Caller,
        out: &mut Output,
    ) -> Result<(), String> {
        let job = self.job_for(r.job_id, caller, Action::Cancel)?;
        if job.state.is_finished() || job.ending_as.is_some() {
            return Err("Job/step already completing or completed".into());
        }
        if job.state == JobState::Pending {
            return Ok(());
        }
        let step = job
            .steps
            .iter()
            .find(|s| s.kind == StepKind::Numbered(r.step_id) && s.state == JobState::Running);
        let Some(step) = step else {
            return match r.signal {
                Some(_) => Ok(()),
                None => Err("Invalid job id specified".into()),
            };
        };
        let mut targets = RankSet::new();
        for name in hostlist::expand(&step.nodes).unwrap_or_default() {
            if let Some(rank) = self.conf.node_index(&name) {
                targets.insert(rank as u32);
            }
        }
        let (job_id, step_id) = (r.job_id, r.step_id);
        let cmd = match r.signal {
            None => NodeCommand::KillStep {
                job_id,
                step_id,
                kill_wait_s: r.terminate.then_some(self.conf.kill_wait_s),
            },
            Some(signal) => NodeCommand::Signal {
                job_id,
                signal,
                batch_only: false,
                steps_only: true,
                step: Some(step_id),
            },
        };
        tracing::info!(job_id, step_id, signal = ?r.signal, "cancelling step");
        out.effect(Effect::Fanout {
            targets,
            cmd,
            budget: root_budget(std::time::Duration::from_secs(10), self.tree_depth),
        });
        Ok(())
    }

    pub(super) fn update_jobs(
        &mut self,
        u: &JobUpdate,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let ids = if u.exact {
            u.job_ids.clone()
        } else {
            self.resolve_ids(&u.job_ids)
        };
        let (results, changed) = if u.top {
            self.top_jobs(&ids, caller)
        } else {
            let mut results = Vec::new();
            let mut changed = Vec::new();
            for id in ids {
                let r = if u.requeue.is_some() || u.suspend.is_some() {
                    self.control_one(id, u, caller, now, out)
                } else {
                    self.update_one(id, u, caller)
                };
                if r.is_ok() {
                    changed.push(id);
                    if u.time_limit_min.is_some() {
                        // A running job's new limit is a new deadline.
                        self.arm_deadlines(id, out);
                    }
                }
                results.push((id, r.err()));
            }
            (results, changed)
        };
        if u.hold == Some(false) || u.partition.is_some() {
            // Released or moved: priority/multifactor prices them now.
            self.multifactor_admit(&changed, now, out);
        }
        self.put_jobs(&changed, out);
        if !changed.is_empty() {
            out.effect(Effect::Reschedule);
        }
        out.reply = Some(Reply::Results(CancelReply { results }));
    }

    /// `scontrol top`: check each job as Slurm does (operators, or owners
    /// where `SchedulerParameters=enable_user_top`; pending and not held),
    /// then reorder the accepted ones. Returns the per-job results and the
    /// jobs whose priority changed.
    fn top_jobs(&mut self, ids: &[u32], caller: Caller) -> (Results, Vec<u32>) {
        let action = Action::Top {
            enable_user_top: self.conf.enable_user_top,
        };
        let mut results = Vec::with_capacity(ids.len());
        let mut accepted = Vec::new();
        for &id in ids {
            let check = self.job_for(id, caller, action).and_then(|j| {
                if j.state != JobState::Pending {
                    Err("Job is no longer pending execution".to_string())
                } else if j.priority == 0 {
                    Err("Job is in held state, pending scheduler release".to_string())
                } else {
                    Ok(())
                }
            });
            if check.is_ok() {
                accepted.push(id);
            }
            results.push((id, check.err()));
        }
        let moved = self.jobs.top(&accepted);
        tracing::info!(jobs = ?accepted, moved = moved.len(), "jobs moved to the top");
        (results, moved)
    }

    /// `requeue`, `requeuehold`, `suspend` and `resume` on job `id`; the
    /// error text is Slurm's.
    fn control_one(
        &mut self,
        id: u32,
        u: &JobUpdate,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<(), String> {
        if let Some(suspend) = u.suspend {
            let job = self.job_for(id, caller, Action::Suspend)?;
            let state = job.state;
            if !suspend && job.preempt_suspended.is_some() && job.ending_as.is_none() {
                // Suspended for a preemptor: it goes on only once the CPUs
                // it lent are free again (slurmctld's gang scheduler
                // likewise keeps it stopped while they are in use).
                return if self.resume_suspended(id, now, out) {
                    Ok(())
                } else {
                    Err("Requested operation is presently disabled".into())
                };
            }
            if !self.jobs.set_suspended(id, suspend) {
                return Err(match (suspend, state) {
                    (true, JobState::Suspended) => "Job already suspended".into(),
                    (false, JobState::Running) => "Job is not suspended".into(),
                    (_, JobState::Pending) => "Job is pending execution".into(),
                    _ => "Job/step already completing or completed".into(),
                });
            }
            // The time limit stops while it is suspended and is pushed
            // back when it resumes, as slurmctld's `job_suspend` does.
            self.jobs.modify(id, |j| {
                if suspend {
                    j.suspend.suspend(j.start_time.unwrap_or(now), now);
                } else {
                    j.suspend.resume(now);
                }
            });
            if !suspend {
                self.arm_deadlines(id, out);
            }
            let signal = if suspend { 19 } else { 18 }; // SIGSTOP / SIGCONT
            out.effect(Effect::SignalJob {
                job_id: id,
                signal,
                batch_only: false,
                steps_only: false,
            });
            tracing::info!(job_id = id, suspend, "job suspend state changed");
            return Ok(());
        }
        let job = self.job_for(id, caller, Action::Requeue)?;
        let (state, ending) = (job.state, job.ending_as.is_some());
        if job.submit.no_requeue {
            // `--no-requeue`: refused whatever the state, as in Slurm.
            return Err("Requested operation is presently disabled".into());
        }
        let hold = u.requeue == Some(RequeueKind::Hold);
        let hold_reason = if caller.operator {
            JobReason::JobHeldAdmin
        } else {
            JobReason::JobHeldUser
        };
        match state {
            JobState::Pending => Err("Job is pending execution".into()),
            _ if ending => Err("Job is currently being completed".into()),
            s if s.is_finished() => {
                let run = self.jobs.get(id).map(|j| run_secs(j, now));
                // Its finished run is recorded REQUEUED, as Slurm rewrites it.
                self.keep_earlier_run(id, JobState::Requeued, Default::default());
                self.jobs.requeue(id, hold.then_some(hold_reason));
                self.mail_event(id, mail::REQUEUE, "Requeued", run, None, out);
                tracing::info!(job_id = id, "finished job requeued");
                Ok(())
            }
            _ => {
                // Running or suspended: tear it down, then requeue (job_ended).
                let held = hold.then_some(hold_reason);
                self.jobs.modify(id, |j| j.requeue = Some(held));
                if state == JobState::Suspended {
                    self.jobs.set_suspended(id, false);
                    // The run's suspended time ends here, so its record
                    // (sacct -D) counts it.
                    self.jobs.modify(id, |j| j.suspend.resume(now));
                }
                self.end_job(
                    id,
                    JobState::Cancelled,
                    JobReason::None,
                    None,
                    Some(KillCause::Requeue),
                    out,
                );
                tracing::info!(job_id = id, "running job requeued");
                Ok(())
            }
        }
    }

    /// Apply `u` to job `id` (most fields only while pending); the error
    /// text is Slurm's. The partition's limits are checked by the same
    /// admission check a submission passes.
    fn update_one(&mut self, id: u32, u: &JobUpdate, caller: Caller) -> Result<(), String> {
        let job = self.job_for(id, caller, Action::Update)?;
        let pending = job.state == JobState::Pending;
        // A running (or suspended) job's name and time limit may change;
        // everything else only while it is pending, as in Slurm.
        let running =
            matches!(job.state, JobState::Running | JobState::Suspended) && job.ending_as.is_none();
        let only_name = u.hold.is_none()
            && u.partition.is_none()
            && u.num_nodes.is_none()
            && u.priority.is_none()
            && (u.time_limit_min.is_none() || running);
        if !pending && !only_name {
            return Err(if job.state.is_finished() || job.ending_as.is_some() {
                "Job/step already completing or completed".into()
            } else {
                "Job is no longer pending execution".into()
            });
        }
        if let Some(name) = &u.name {
            crate::policy::limits::check_len("Name", name, crate::policy::limits::MAX_STR_LEN)
                .map_err(|e| e.message)?;
        }
        if let Some(p) = &u.partition {
            crate::policy::limits::check_len("Partition", p, crate::policy::limits::MAX_STR_LEN)
                .map_err(|e| e.message)?;
        }
        // Only an operator may raise a time limit (UNLIMITED is the
        // highest); a user may lower their own, as in Slurm.
        let asked = u.time_limit_min.map(|m| (m > 0).then_some(m));
        if let Some(new) = asked {
            let raising = match (job.time_limit_min, new) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(cur), Some(new)) => new > cur,
            };
            if raising && !caller.operator {
                tracing::info!(job_id = id, uid = caller.uid, current = ?job.time_limit_min, asked = ?new, "time limit raise refused");
                return Err(authz::Denied::ACCESS.0.to_string());
            }
        }
        let owner = Some(job.submit.uid);
        if u.priority.is_some() {
            authz::check(caller, Action::SetPriority, owner).map_err(|d| d.0.to_string())?;
        }
        if u.hold == Some(false) && job.reason == JobReason::JobHeldAdmin {
            // Only an operator may release an admin hold.
            authz::check(caller, Action::ReleaseAdminHold, owner).map_err(|d| d.0.to_string())?;
        }
        let part_name = u.partition.clone().unwrap_or_else(|| job.partition.clone());
        let Some(part) = self.conf.partitions.iter().find(|p| p.name == part_name) else {
            return Err("Invalid partition name specified".into());
        };
        let mut moved_submit = None;
        let limit = if pending {
            let shape = Shape {
                time: TimeAsk::from_minutes(u.time_limit_min),
                current_limit: Some(job.time_limit_min),
                nodes: u.num_nodes.or(job.submit.min_nodes).unwrap_or(1),
            };
            let moving = part_name != job.partition;
            if moving {
                // The new partition's access rules and memory limits, as
                // at submission (one check for both).
                crate::policy::partition::check_access(part, &job.submit, caller)
                    .map_err(|e| e.message)?;
                let mut sub = job.submit.clone();
                sub.partition = Some(part_name.clone());
                crate::policy::partition::apply_sharing(part, &mut sub);
                crate::policy::partition::apply_memory(part, &self.conf, &mut sub)
                    .map_err(|e| e.message)?;
                moved_submit = Some(sub);
            }
            check_partition(part, shape, moving, caller.operator).map_err(|e| e.message)?
        } else {
            // Running: lowered by its owner or set by an operator, with no
            // partition check (lowering cannot break MaxTime, and an
            // operator may exceed it).
            asked.unwrap_or(job.time_limit_min)
        };
        let held_reason = if caller.operator && !u.user_hold {
            JobReason::JobHeldAdmin
        } else {
            JobReason::JobHeldUser
        };
        // A released job queues behind everything submitted so far, as in
        // Slurm's priority/basic.
        let released = u.hold == Some(false) && job.priority == 0;
        let (fixed, nice) = (job.submit.priority, job.submit.nice);
        let fresh = match (released, fixed) {
            (false, _) => 0,
            // An operator's `--priority` comes back with the release.
            (true, Some(p)) if p > 0 => p,
            (true, _) => with_nice(self.priority.assign(), nice),
        };
        self.jobs.modify(id, |j| {
            // The moved job's request first: the other changes go on top.
            if let Some(sub) = moved_submit {
                j.submit = sub;
            }
            if let Some(n) = &u.name {
                j.submit.name = n.clone();
            }
            j.time_limit_min = limit;
            if !pending {
                return;
            }
            j.partition = part_name;
            if u.num_nodes.is_some() {
                j.submit.min_nodes = u.num_nodes;
            }
            if let Some(p) = u.priority {
                j.priority = p;
                j.priority_set = p > 0;
                j.submit.hold = p == 0;
                j.reason = if p == 0 { held_reason } else { JobReason::None };
            }
            match u.hold {
                Some(true) => {
                    j.submit.hold = true;
                    j.priority = 0;
                    j.reason = held_reason;
                }
                Some(false) => {
                    j.submit.hold = false;
                    if released {
                        j.priority = fresh;
                        j.priority_set = j.submit.priority.is_some_and(|p| p > 0);
                    }
                    j.reason = JobReason::None;
                }
                None => {}
            }
        });
        Ok(())
    }
}

/// How long a job's last run took (to its end, or until `now`).
pub(super) fn run_secs(j: &JobRecord, now: UnixTime) -> u64 {
    let end = j.end_time.unwrap_or(now);
    u64::try_from(end - j.start_time.unwrap_or(end)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::{Command, Core, Reply};
    use crate::model::job::JobSubmit;
    use crate::policy::authz::Caller;
    use crate::wire::messages::JobUpdate;

    const ALICE: Caller = Caller {
        uid: 1000,
        operator: false,
    };

    fn core() -> Core {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-4] CPUs=2\n\
                    PartitionName=p Nodes=n[1-4] Default=YES MaxNodes=2 MaxTime=60\n\
                    PartitionName=closed Nodes=n[1-4] State=DRAIN\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0
    }

    fn submit(core: &mut Core) -> u32 {
        let s = JobSubmit {
            name: "j".into(),
            uid: 1000,
            user: "alice".into(),
            hold: true,
            ..Default::default()
        };
        let out = core.apply(
            1000,
            Command::Submit {
                submit: Box::new(s),
                caller: ALICE,
            },
        );
        match out.reply {
            Some(Reply::Submit(Ok(r))) => r.job_id,
            other => panic!("refused: {other:?}"),
        }
    }

    fn update(core: &mut Core, u: JobUpdate, caller: Caller) -> Option<String> {
        match core
            .apply(1000, Command::UpdateJobs { update: u, caller })
            .reply
        {
            Some(Reply::Results(r)) => r.results[0].1.clone(),
            other => panic!("no results: {other:?}"),
        }
    }

    #[test]
    fn updates_pass_the_same_partition_limits_as_submissions() {
        let mut c = core();
        let id = submit(&mut c);
        let nodes = |n| JobUpdate {
            job_ids: vec![id],
            num_nodes: Some(n),
            ..Default::default()
        };
        assert_eq!(update(&mut c, nodes(2), ALICE), None);
        assert_eq!(
            update(&mut c, nodes(3), ALICE).as_deref(),
            Some("Node count specification invalid")
        );
        let limit = |m| JobUpdate {
            job_ids: vec![id],
            time_limit_min: Some(m),
            ..Default::default()
        };
        // Raising her own limit is an operator's business, as in Slurm.
        assert_eq!(
            update(&mut c, limit(90), ALICE).as_deref(),
            Some("Access/permission denied")
        );
        assert_eq!(update(&mut c, limit(30), ALICE), None);
        assert_eq!(
            update(&mut c, limit(31), ALICE).as_deref(),
            Some("Access/permission denied")
        );
        // An operator may exceed MaxTime, as in Slurm.
        assert_eq!(update(&mut c, limit(90), Caller::ROOT), None);
        let moving = JobUpdate {
            job_ids: vec![id],
            partition: Some("closed".into()),
            ..Default::default()
        };
        assert_eq!(
            update(&mut c, moving, ALICE).as_deref(),
            Some("Partition in DRAIN or INACTIVE state, no new jobs accepted")
        );
        // Another user may not touch it at all.
        let bob = Caller {
            uid: 1001,
            operator: false,
        };
        assert_eq!(
            update(&mut c, nodes(1), bob).as_deref(),
            Some("Access/permission denied")
        );
    }

    #[test]
    fn names_and_partitions_in_updates_are_bounded() {
        let mut c = core();
        let id = submit(&mut c);
        let rename = |n: usize| JobUpdate {
            job_ids: vec![id],
            name: Some("x".repeat(n)),
            ..Default::default()
        };
        assert_eq!(update(&mut c, rename(1024), ALICE), None);
        let e = update(&mut c, rename(1025), ALICE).unwrap();
        assert!(
            e.starts_with(crate::policy::limits::TOO_LONG) && e.contains("Name is 1025 bytes"),
            "{e}"
        );
        assert_eq!(c.jobs().get(id).unwrap().submit.name.len(), 1024);
    }

    /// A running job's limit: its owner may lower it, only an operator may
    /// raise it (or make it UNLIMITED), and the deadline follows the change.
    #[test]
    fn running_time_limits_go_down_for_users_and_anywhere_for_operators() {
        use crate::ctld::Effect;
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=0\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1 MaxTime=60\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let mut job = crate::ctld::fixtures::running(5, 0);
        job.submit.uid = 1000;
        job.time_limit_min = Some(10);
        let (mut c, _) = Core::recover(Arc::new(conf), vec![job], None, &HashMap::new(), 20);
        let limit = |m| JobUpdate {
            job_ids: vec![5],
            time_limit_min: Some(m),
            ..Default::default()
        };
        for raise in [11, 0] {
            assert_eq!(
                update(&mut c, limit(raise), ALICE).as_deref(),
                Some("Access/permission denied")
            );
        }
        assert_eq!(c.jobs().get(5).unwrap().time_limit_min, Some(10));
        // Lowered to 2 minutes: the job (started at t=10) ends at t=130,
        // not at t=610.
        let out = c.apply(
            20,
            Command::UpdateJobs {
                update: limit(2),
                caller: ALICE,
            },
        );
        assert!(out.effects.iter().any(|e| matches!(e, Effect::WakeAt(130))));
        let ended = |c: &mut Core, now| {
            c.apply(now, Command::Schedule)
                .effects
                .iter()
                .any(|e| matches!(e, Effect::EndJob { job_id: 5, .. }))
        };
        assert!(!ended(&mut c, 129));
        // An operator raises it past MaxTime: the old deadline is stale.
        assert_eq!(update(&mut c, limit(120), Caller::ROOT), None);
        assert_eq!(c.jobs().get(5).unwrap().time_limit_min, Some(120));
        assert!(!ended(&mut c, 130));
        assert!(!ended(&mut c, 609));
        assert!(ended(&mut c, 10 + 120 * 60));
    }
}
