//! Submissions: the policy check, then what only the live state can tell
//! (MaxJobCount, whether the partition's nodes could ever hold the job,
//! dependencies, array indices), then ids, priority and the new records.
//! `--test-only` uses up an id and says when the job would start.

use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::model::dependency::Dependency;
use crate::model::job::{ArraySpec, ArrayTask, ExitStatus, JobRecord, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::admission::{self, Admitted};
use crate::policy::authz::Caller;
use crate::sched::{self, Infeasible, Request, RequestError};
use crate::state::store::Op;
use crate::wire::messages::{ErrorCode, ErrorReply, SubmitReply, WillRun};

pub(super) fn refused(code: ErrorCode, message: impl Into<String>) -> ErrorReply {
    ErrorReply {
        code,
        message: message.into(),
    }
}

fn queue_full() -> ErrorReply {
    refused(
        ErrorCode::QueueFull,
        "Slurm temporarily unable to accept job, sleeping and retrying",
    )
}

/// Slurm's refusal when a user is at their submit limit
/// (`ESLURM_ACCOUNTING_POLICY`, as for an association's MaxSubmitJobs).
pub const SUBMIT_LIMIT: &str =
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)";

/// Slurm's refusal for a request that names nodes or features it lacks.
fn request_refusal(e: RequestError) -> ErrorReply {
    match e {
        RequestError::UnknownNode(_) => {
            refused(ErrorCode::InvalidNodeName, "Invalid node name specified")
        }
        RequestError::Constraint(c) => refused(ErrorCode::InvalidRequest, c.to_string()),
    }
}

/// priority/basic's value after `--nice`: lower for a positive nice, never
/// 0 (which means held) and never past the top.
pub(super) fn with_nice(priority: u32, nice: i32) -> u32 {
    let adjusted = i64::from(priority) - i64::from(nice);
    adjusted.clamp(1, i64::from(u32::MAX - 1)) as u32
}

/// The next job id after a restart: the persisted one, but past every
/// recovered job at or above it, as slurmctld advances its sequence over
/// each job it loads. The store writes a submission's records before its
/// next id, so a crash in between leaves jobs the persisted id does not
/// cover; handing out their ids again once they are purged (MinJobAge)
/// would give a new job a finished one's id.
pub(super) fn recovered_next_id(
    persisted: Option<u32>,
    ids: impl Iterator<Item = u32>,
    first: u32,
    max: u32,
) -> u32 {
    let max = max.max(first);
    let start = persisted.unwrap_or(first).clamp(first, max);
    let used: std::collections::HashSet<u32> = ids.filter(|&id| id >= first && id <= max).collect();
    // Ids handed out but not yet persisted lie just past the persisted one
    // (each id between them was handed out too, or skipped as in use by a
    // recovered job); a job far beyond is from before the sequence wrapped
    // at MaxJobId and must not move it.
    let near = used.iter().filter(|&&id| id >= start).count() as u32;
    let horizon = start.saturating_add(near.saturating_mul(2).saturating_add(64));
    let past = used
        .iter()
        .filter(|&&id| id >= start && id < horizon)
        .fold(start, |n, &id| n.max(id.saturating_add(1)));
    if past <= max {
        return past;
    }
    // The run reaches MaxJobId: wrap as a live allocation does, stepping
    // over the recovered jobs that follow the persisted id without a gap
    // (never straight back to FirstJobId, whose ids may have been given
    // moments ago).
    let mut next = start;
    for _ in 0..used.len() {
        if !used.contains(&next) {
            break;
        }
        next = if next >= max { first } else { next + 1 };
    }
    next
}

impl Core {
    pub(super) fn submit(
        &mut self,
        mut submit: JobSubmit,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let reply = self.admit(&mut submit, caller, now, out);
        out.reply = Some(Reply::Submit(reply));
    }

    fn admit(
        &mut self,
        submit: &mut JobSubmit,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<SubmitReply, ErrorReply> {
        let admitted = admission::admit(submit, caller, &self.conf)?;
        let adding = submit.array.as_ref().map_or(1, |a| a.indices.len());
        self.check_accounts(submit, &admitted, adding)?;
        self.check_job_reservation(submit)?;
        if self.jobs.active() >= self.conf.max_job_count as usize {
            return Err(queue_full());
        }
        if submit.test_only {
            return self.will_run(submit, &admitted, now, out);
        }
        let req = Request::for_job(submit, self.conf.as_ref()).map_err(request_refusal)?;
        let ranks = self.partition_ranks(&admitted.partition);
        if let Err(why) = sched::feasible(&req, ranks, &self.slots) {
            let message = match why {
                Infeasible::TooManyNodes | Infeasible::NodeConfig => {
                    "Requested node configuration is not available"
                }
            };
            return Err(refused(ErrorCode::NodeConfigUnavailable, message));
        }
        let dependency = self.check_dependency(submit.dependency.as_deref())?;
        let tasks = match &submit.array {
            Some(spec) => self.array_tasks(spec)?,
            None => vec![None],
        };
        if self.jobs.active() + tasks.len() > self.conf.max_job_count as usize {
            return Err(queue_full());
        }
        self.check_user_cap(submit.uid, tasks.len())?;
        let (id, ids) = self.alloc_ids(tasks.len());
        // One priority for the whole submission: an array's tasks queue
        // together. An operator's `--priority` is fixed; `--nice` lowers
        // (or, negative, raises) the count-down's value, as in priority/basic.
        let fixed = submit.priority;
        let priority = match (submit.hold, fixed) {
            (true, _) => 0,
            (false, Some(p)) => p,
            (false, None) => with_nice(self.priority.assign(), submit.nice),
        };
        let n = tasks.len();
        let admitted_ids = ids.clone();
        for (job_id, array) in ids.into_iter().zip(tasks) {
            let array = array.map(|a| ArrayTask {
                array_job_id: id,
                ..a
            });
            let mut rec = new_record(job_id, submit.clone(), &admitted, now, array);
            rec.dependency = dependency.clone();
            rec.priority = priority;
            rec.priority_set = fixed.is_some_and(|p| p > 0);
            out.persist.push(Op::PutJob(Box::new(rec.clone())));
            self.jobs.admit(rec);
            self.counters.submitted += 1;
        }
        tracing::info!(job_id = id, partition = %admitted.partition, user = %submit.user, tasks = n, "job submitted");
        self.multifactor_admit(&admitted_ids, now, out);
        out.persist.push(Op::NextJobId(self.next_job_id));
        out.effect(Effect::Reschedule);
        if let Some(begin) = submit.begin_time.filter(|&t| t > now) {
            out.effect(Effect::WakeAt(begin));
        }
        Ok(SubmitReply {
            job_id: id,
            will_run: None,
        })
    }

    /// `SchedulerParameters=max_submit_jobs_per_user`: the job's user may
    /// not hold more than that many unfinished jobs (array tasks counted
    /// one by one), so one user cannot fill MaxJobCount for everyone.
    /// Root's own jobs are not capped (nor are they by Slurm's limits
    /// without accounting).
    fn check_user_cap(&self, uid: u32, adding: usize) -> Result<(), ErrorReply> {
        let Some(cap) = self.conf.max_submit_jobs_per_user else {
            return Ok(());
        };
        let held = self.jobs.active_of(uid);
        if uid != 0 && held + adding > cap as usize {
            tracing::info!(
                uid,
                held,
                adding,
                cap,
                "submission refused: user's submit limit"
            );
            return Err(refused(ErrorCode::InvalidRequest, SUBMIT_LIMIT));
        }
        Ok(())
    }

    /// `--test-only`: use up a job id (as Slurm does, whatever the answer)
    /// and estimate the start from the running jobs' time limits.
    fn will_run(
        &mut self,
        submit: &JobSubmit,
        admitted: &Admitted,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<SubmitReply, ErrorReply> {
        let id = self.alloc_next_id();
        out.persist.push(Op::NextJobId(self.next_job_id));
        let partition = admitted.partition.as_str();
        let ranks = self.partition_ranks(partition);
        let req = Request::for_job(submit, self.conf.as_ref()).map_err(request_refusal)?;
        sched::feasible(&req, ranks, &self.slots).map_err(|_| {
            refused(
                ErrorCode::NodeConfigUnavailable,
                "Requested node configuration is not available",
            )
        })?;
        let mut running: Vec<(UnixTime, &crate::model::job::Allocation)> = self
            .jobs
            .running()
            .filter_map(|j| {
                let end = j.start_time? + i64::from(j.time_limit_min?) * 60;
                Some((end, j.alloc.as_ref()?))
            })
            .collect();
        let when = sched::earliest_start(&req, ranks, &self.slots, &mut running, now);
        let reply = when.map(|(start, alloc)| WillRun {
            start_time: submit.begin_time.map_or(start, |b| b.max(start)),
            cpus: alloc.cpus.iter().sum(),
            nodes: self.nodelist(&alloc.ranks),
            partition: partition.to_string(),
        });
        tracing::info!(job_id = id, partition, start = ?reply.as_ref().map(|w| w.start_time), "will-run test");
        match reply {
            Some(w) => Ok(SubmitReply {
                job_id: id,
                will_run: Some(w),
            }),
            None => Err(refused(
                ErrorCode::NodeConfigUnavailable,
                "Requested nodes are busy",
            )),
        }
    }

    /// Ids for a submission of `n` jobs, in index order, and the id the
    /// submission is known by. For an array that first id goes to the
    /// highest index and the others follow in index order: what Slurm ends
    /// up with when the tasks start in order.
    fn alloc_ids(&mut self, n: usize) -> (u32, Vec<u32>) {
        let mut ids: Vec<u32> = (0..n).map(|_| self.alloc_next_id()).collect();
        let first = ids.first().copied().unwrap_or_default();
        ids.rotate_left(1);
        (first, ids)
    }

    fn alloc_next_id(&mut self) -> u32 {
        let (first, max) = (
            self.conf.first_job_id,
            self.conf.max_job_id.max(self.conf.first_job_id),
        );
        loop {
            let id = self.next_job_id;
            self.next_job_id = if id >= max { first } else { id + 1 };
            if !self.jobs.contains(id) {
                return id;
            }
        }
    }

    /// One (not yet numbered) array task per index of `spec`, checked
    /// against MaxArraySize.
    fn array_tasks(&self, spec: &ArraySpec) -> Result<Vec<Option<ArrayTask>>, ErrorReply> {
        let invalid = || {
            refused(
                ErrorCode::InvalidArraySpec,
                "Invalid job array specification",
            )
        };
        let (Some(&min), Some(&max)) = (spec.indices.first(), spec.indices.last()) else {
            return Err(invalid());
        };
        if max >= self.conf.max_array_size {
            return Err(invalid());
        }
        let count = spec.indices.len() as u32;
        Ok(spec
            .indices
            .iter()
            .map(|&task_id| {
                Some(ArrayTask {
                    array_job_id: 0,
                    task_id,
                    min,
                    max,
                    count,
                    step: spec.step.max(1),
                    throttle: spec.throttle,
                })
            })
            .collect())
    }

    /// Parse `--dependency` and check that every job it names is known (an
    /// unknown id is refused, as Slurm does).
    fn check_dependency(&self, spec: Option<&str>) -> Result<Option<Dependency>, ErrorReply> {
        let Some(spec) = spec else {
            return Ok(None);
        };
        Dependency::parse(spec)
            .and_then(|d| {
                d.validate_targets(|t| self.jobs.target_exists(t))
                    .map(|()| d)
            })
            .map(Some)
            .map_err(|e| {
                tracing::info!(dependency = spec, error = %e, "submission refused");
                refused(ErrorCode::DependencyProblem, e.slurm_message())
            })
    }
}

/// A new pending job.
fn new_record(
    job_id: u32,
    submit: JobSubmit,
    admitted: &Admitted,
    now: UnixTime,
    array: Option<ArrayTask>,
) -> JobRecord {
    let held = submit.hold;
    JobRecord {
        earlier_runs: Vec::new(),
        job_id,
        submit,
        partition: admitted.partition.clone(),
        time_limit_min: admitted.time_limit_min,
        state: JobState::Pending,
        reason: if held {
            JobReason::JobHeldUser
        } else {
            JobReason::None
        },
        priority: if held { 0 } else { 1 },
        submit_time: now,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: ExitStatus::default(),
        restarts: 0,
        ending_as: None,
        next_step: 0,
        steps: Vec::new(),
        array,
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::SUBMIT_LIMIT;
    use crate::config::Config;
    use crate::ctld::{Command, Core, Reply};
    use crate::model::job::{ArraySpec, JobSubmit};
    use crate::policy::authz::Caller;
    use crate::wire::messages::{CancelRequest, ErrorReply};

    fn core(extra: &str) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\n\
             PartitionName=p Nodes=n1 Default=YES\n{extra}"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0
    }

    fn user(uid: u32) -> Caller {
        Caller {
            uid,
            operator: false,
        }
    }

    fn submit(
        c: &mut Core,
        uid: u32,
        tasks: u32,
        f: impl FnOnce(&mut JobSubmit),
    ) -> Result<u32, ErrorReply> {
        let mut s = JobSubmit {
            name: "j".into(),
            uid,
            hold: true,
            script: "#!/bin/sh\ntrue\n".into(),
            array: (tasks > 1).then(|| ArraySpec {
                indices: (0..tasks).collect(),
                step: 1,
                throttle: None,
            }),
            ..Default::default()
        };
        f(&mut s);
        match c
            .apply(
                1000,
                Command::Submit {
                    submit: Box::new(s),
                    caller: user(uid),
                },
            )
            .reply
        {
            Some(Reply::Submit(r)) => r.map(|r| r.job_id),
            other => panic!("{other:?}"),
        }
    }

    /// A crash between a submission's record and its next id: the job is
    /// recovered but the persisted id still names it. Once the job is
    /// cancelled and purged, a new submission must not get its id again.
    #[test]
    fn a_job_recovered_past_the_persisted_next_id_keeps_its_id_after_purge() {
        use crate::state::store::Op;
        let mut c = core("MinJobAge=10\n");
        let id = submit(&mut c, 1000, 1, |_| {}).unwrap();
        assert_eq!(id, 1);
        let req = CancelRequest {
            job_ids: vec![id],
            signal: None,
            batch_only: false,
            exact: false,
        };
        c.apply(
            1000,
            Command::Cancel {
                req,
                caller: user(1000),
            },
        );
        let rec = c.jobs().get(id).cloned().unwrap();
        assert_eq!(rec.state, crate::model::job::JobState::Cancelled);
        // The store kept the record but not NextJobId(2).
        let conf = c.conf.clone();
        let (mut c, out) = Core::recover(conf, vec![rec], Some(1), &HashMap::new(), 1001);
        assert_eq!(c.next_job_id(), 2);
        assert!(
            out.persist.iter().any(|op| matches!(op, Op::NextJobId(2))),
            "the advanced id is persisted before a purge can forget job 1"
        );
        let purged = c.apply(2000, Command::Tick).persist;
        assert!(purged.iter().any(|op| matches!(op, Op::DeleteJob(1))));
        assert_eq!(submit(&mut c, 1000, 1, |_| {}).unwrap(), 2);
    }

    #[test]
    fn the_recovered_next_id_skips_recovered_jobs_and_wraps_at_max_job_id() {
        use super::recovered_next_id as next;
        // Nothing persisted, nothing recovered: FirstJobId.
        assert_eq!(next(None, [].into_iter(), 10, 100), 10);
        // Persisted id kept when no recovered job is at or above it.
        assert_eq!(next(Some(40), [12, 39].into_iter(), 10, 100), 40);
        // Past every job at or above it (array tasks included).
        assert_eq!(next(Some(40), [12, 40, 41, 44].into_iter(), 10, 100), 45);
        // A persisted id below FirstJobId starts there.
        assert_eq!(next(Some(3), [].into_iter(), 10, 100), 10);
        // Past MaxJobId: back to FirstJobId.
        assert_eq!(next(Some(99), [99, 100].into_iter(), 10, 100), 10);
        // After a wrap, a job left near MaxJobId does not send the sequence
        // back: the persisted id stands, past the run of jobs after it.
        assert_eq!(next(Some(5), [5, 6, 99].into_iter(), 1, 100), 7);
        assert_eq!(next(Some(5), [99].into_iter(), 1, 100), 5);
        // No persisted id (a crash before the first one was written).
        assert_eq!(next(None, [10, 11].into_iter(), 10, 100), 12);
    }

    #[test]
    fn a_user_may_hold_at_most_max_submit_jobs_per_user_jobs() {
        let mut c = core("SchedulerParameters=max_submit_jobs_per_user=5\n");
        let first = submit(&mut c, 1000, 1, |_| {}).unwrap();
        // An array's tasks count one by one: 1 + 5 is over 5.
        let e = submit(&mut c, 1000, 5, |_| {}).unwrap_err();
        assert_eq!(e.message, SUBMIT_LIMIT);
        submit(&mut c, 1000, 4, |_| {}).unwrap();
        assert!(submit(&mut c, 1000, 1, |_| {}).is_err());
        // Another user is not held back by alice's jobs.
        submit(&mut c, 1001, 5, |_| {}).unwrap();
        // A finished job frees its place.
        let cancel = CancelRequest {
            job_ids: vec![first],
            signal: None,
            batch_only: false,
            exact: false,
        };
        c.apply(
            1001,
            Command::Cancel {
                req: cancel,
                caller: user(1000),
            },
        );
        submit(&mut c, 1000, 1, |_| {}).unwrap();
        assert!(submit(&mut c, 1000, 1, |_| {}).is_err());
        // Unset, there is no cap (as in Slurm without accounting).
        let mut open = core("");
        submit(&mut open, 1000, 50, |_| {}).unwrap();
    }

    #[test]
    fn oversized_fields_and_scripts_are_refused_by_the_core() {
        let mut c = core("SchedulerParameters=max_script_size=64\n");
        let e = submit(&mut c, 1000, 1, |s| s.name = "n".repeat(1 << 20)).unwrap_err();
        assert!(
            e.message.contains("--job-name is 1048576 bytes"),
            "{}",
            e.message
        );
        let e = submit(&mut c, 1000, 1, |s| {
            s.script = format!("#!/bin/sh\n{}", "#".repeat(64))
        })
        .unwrap_err();
        assert!(e.message.contains("batch script"), "{}", e.message);
        let e = submit(&mut c, 1000, 1, |s| s.mail_user = Some("-oX".into())).unwrap_err();
        assert!(e.message.starts_with(crate::policy::limits::BAD_MAIL_USER));
        assert!(c.jobs().is_empty());
    }
}
