//! A job's life after admission: scheduling passes, dependencies resolved,
//! starts, teardowns, ends and requeues; what a node's registration says
//! of its jobs; the periodic tick (time-limit mail, purging jobs past MinJobAge).

use super::command::{Effect, Output};
use super::core::{Core, Deadline};
use super::job_control::run_secs;
use crate::mail;
use crate::model::acct::Usage;
use crate::model::job::{ExitStatus, JobState};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched;
use crate::sched::gate::Gates;
use crate::sched::table::PartitionView;
use crate::state::store::Op;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{Hello, JobOnNode, KillCause, NodeCommand};

/// Most rounds of dependency resolution in one pass: each round follows
/// the kills of the round before down a `--kill-on-invalid-dep` chain.
const MAX_RESOLVE_ROUNDS: usize = 100_000;

impl Core {
    /// One scheduling pass: resolve dependencies (following kills down
    /// their chains), then start what fits, in priority order.
    pub(super) fn schedule(&mut self, now: UnixTime, out: &mut Output) {
        self.node_deadlines_due(now, out);
        self.power_jobs_ready(now, out);
        self.release_ready_launches(out);
        self.deadlines_due(now, out);
        // Jobs suspended for a preemptor take their CPUs back first.
        self.resume_ready(now, out);
        self.resolve_dependencies(now, out);
        self.reservations_due(now, out);
        self.jobs
            .set_queue_depth(self.conf.sched.default_queue_depth);
        let mut started = self.quick_pass(now);
        let over_suspended = self.preempt_for_waiting(now, &started, out);
        started.extend(over_suspended);
        self.jobs_started(&started, out);
        // Nodes those starts need powered up, and power timeouts due.
        self.power_pass(now, false, out);
    }

    /// The quick pass: each partition's queue in order until a job does
    /// not fit, higher PriorityTier partitions first, through policy's
    /// gates (association limits, reservations, licenses).
    fn quick_pass(&mut self, now: UnixTime) -> Vec<u32> {
        let conf = self.conf.clone();
        let mut policy = self.pass_policy(now);
        let mut parts: Vec<PartitionView<'_>> = conf
            .partitions
            .iter()
            .zip(&self.part_ranks)
            .map(|(p, (_, ranks))| PartitionView {
                name: &p.name,
                state: p.state,
                ranks,
            })
            .collect();
        // PriorityTier: a higher tier's jobs go first where partitions
        // share nodes (stable: the file's order within a tier).
        parts.sort_by_key(|p| std::cmp::Reverse(conf.priority.partition(p.name).tier));
        let mut limits = super::pass_policy::limits(
            &policy.db,
            &conf,
            &self.prio.usage,
            now,
            self.jobs.running(),
        );
        let started = self.jobs.schedule(
            &parts,
            &mut self.slots,
            now,
            conf.as_ref(),
            &mut Gates(vec![&mut limits, &mut policy.resv, &mut policy.license]),
        );
        drop(limits);
        self.end_pass_policy(policy);
        started
    }

    /// What follows a pass's starts: mail, counters, CONFIGURING, records
    /// and the job actors.
    pub(super) fn jobs_started(&mut self, started: &[u32], out: &mut Output) {
        if started.is_empty() {
            return;
        }
        let started = started.to_vec();
        self.mail_started(&started, out);
        self.counters.started += started.len() as u64;
        // With a PrologSlurmctld they are CONFIGURING, their launch held.
        self.begin_configuring(&started, out);
        // On powered-down nodes they are CONFIGURING until the nodes are up.
        self.power_jobs_started(&started);
        self.put_jobs(&started, out);
        // The job actors exist at once, so a cancel or an srun step that
        // comes next finds them; each launches once the start is on disk.
        for &id in &started {
            self.start_job_effect(id, true, out);
        }
        // Starting jobs may satisfy `after` dependencies: look again.
        out.effect(Effect::Reschedule);
    }

    /// Time limits and `--signal` warnings that have come: the warning goes
    /// to the steps' tasks (or, with `B:`, the batch shell only), and a job
    /// at its limit is torn down and ends TIMEOUT (reason TimeLimit).
    fn deadlines_due(&mut self, now: UnixTime, out: &mut Output) {
        while let Some(&d) = self.deadlines.first() {
            let (at, id, start, what) = d;
            if at > now {
                break;
            }
            self.deadlines.remove(&d);
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            let live = matches!(job.state, JobState::Running | JobState::Suspended)
                && job.ending_as.is_none()
                && job.start_time == Some(start);
            // A limit changed since this entry was made (`scontrol update
            // TimeLimit=`) left it stale: the current one has its own.
            if !live || !self.due_times(id).contains(&(at, what)) {
                continue;
            }
            match what {
                Deadline::Warn => {
                    if let Some(w) = job.submit.signal {
                        tracing::info!(
                            job_id = id,
                            signal = w.signal,
                            "signalling before the time limit"
                        );
                        out.effect(Effect::SignalJob {
                            job_id: id,
                            signal: w.signal,
                            batch_only: w.batch_only,
                            steps_only: !w.batch_only,
                        });
                    }
                }
                Deadline::Preempt => self.preemption_over(id, out),
                Deadline::TimeLimit => {
                    tracing::info!(job_id = id, "time limit reached");
                    let exit = Some(ExitStatus::default());
                    self.end_job(id, JobState::Timeout, JobReason::TimeLimit, exit, None, out);
                }
            }
        }
    }

    /// Re-evaluate dependencies until nothing more is killed: cancelling
    /// a job for an impossible dependency makes its own dependents'
    /// impossible, so a whole chain goes in one pass.
    fn resolve_dependencies(&mut self, now: UnixTime, out: &mut Output) {
        for _ in 0..MAX_RESOLVE_ROUNDS {
            let r = self.jobs.resolve_dependencies(now);
            for &id in &r.never {
                self.mail_event(
                    id,
                    mail::INVALID_DEPEND,
                    "Invalid dependency",
                    None,
                    None,
                    out,
                );
            }
            for &id in &r.killed {
                tracing::info!(job_id = id, "cancelled: dependency can never be satisfied");
                self.count_end(JobState::Cancelled);
            }
            self.put_jobs(&r.changed, out);
            self.persist_final(&r.killed, Usage::default(), out);
            if r.killed.is_empty() {
                return;
            }
        }
    }

    /// Persist finished jobs with their accounting records, and mail their
    /// end. Every path that ends a job comes through here, once per job.
    pub(super) fn persist_final(&self, ids: &[u32], usage: Usage, out: &mut Output) {
        for j in ids.iter().filter_map(|&id| self.jobs.get(id)) {
            out.persist.push(Op::PutJob(Box::new(j.clone())));
            out.persist
                .push(Op::PutAcct(Box::new(self.acct_of(j, usage))));
        }
        self.mail_finished(ids, out);
    }

    /// Keep job `id`'s run that just ended as its own accounting record,
    /// ended `state`, before the job starts over (sacct `-D` lists it).
    pub(super) fn keep_earlier_run(&mut self, id: u32, state: JobState, usage: Usage) {
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        let mut run = self.acct_of(j, usage);
        run.state = state;
        run.earlier_runs.clear();
        self.jobs.modify(id, |j| j.earlier_runs.push(run));
    }

    /// Mark a running job as tearing down (shown CG) and tell its step.
    pub(super) fn end_job(
        &mut self,
        id: u32,
        state: JobState,
        reason: JobReason,
        exit: Option<ExitStatus>,
        cause: Option<KillCause>,
        out: &mut Output,
    ) {
        self.jobs.mark_ending(id, state);
        // Shown CG from now on, a restart included.
        self.put_jobs(&[id], out);
        out.effect(Effect::EndJob {
            job_id: id,
            state,
            reason,
            exit,
            cause,
        });
    }

    /// A job is over on every node.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn job_ended(
        &mut self,
        id: u32,
        state: JobState,
        exit: ExitStatus,
        reason: JobReason,
        usage: Usage,
        now: UnixTime,
        out: &mut Output,
    ) {
        self.multifactor_job_end(id, now, out);
        // A job suspended for a preemptor holds only what it did not lend;
        // one that ends stopped stops counting its suspension now.
        let held = self.held_by(id);
        let preemptor = self.jobs.get(id).and_then(|j| j.preempted).map(|p| p.by);
        if self
            .jobs
            .get(id)
            .is_some_and(|j| j.state == JobState::Suspended)
        {
            self.jobs.modify(id, |j| j.suspend.resume(now));
        }
        if self.jobs.finish(id, state, exit, reason, now).is_none() {
            return;
        }
        if let Some(alloc) = held {
            sched::release(&alloc, &mut self.slots);
        }
        if self
            .jobs
            .get(id)
            .is_some_and(|j| j.preempt_suspended.is_some())
        {
            self.jobs.modify(id, |j| j.preempt_suspended = None);
        }
        self.count_end(state);
        tracing::info!(
            job_id = id,
            state = state.name(),
            code = exit.code,
            signal = exit.signal,
            "job ended"
        );
        self.prolog_job_ended(id, out);
        self.persist_final(&[id], usage, out);
        if let Some(j) = self.jobs.get(id).filter(|_| state == JobState::Timeout) {
            if j.mail_sent & mail::TIME_LIMIT == 0 {
                let run = run_secs(j, now);
                let what = mail::TIME_LIMIT_MAILS[3].2;
                let running = Some(JobState::Running);
                self.mail_event(id, mail::TIME_LIMIT, what, Some(run), running, out);
            }
        }
        if let Some(hold) = self.jobs.get(id).and_then(|j| j.requeue) {
            // `scontrol requeue` of a running job: the run is accounted for
            // above; the job itself starts over.
            let run = self.jobs.get(id).map(|j| run_secs(j, now));
            // The run keeps its own record, ended as Slurm records it.
            let ended = match state {
                JobState::Preempted | JobState::NodeFail => state,
                _ => JobState::Requeued,
            };
            self.keep_earlier_run(id, ended, usage);
            self.jobs.requeue(id, hold);
            self.mail_event(id, mail::REQUEUE, "Requeued", run, None, out);
            self.put_jobs(&[id], out);
        }
        // What it gave back may be what a suspended job lent, or what its
        // preemptor waits for. N.B. last: their records must reach the
        // store after this job's end, or a write cut short could leave both
        // holding the same CPUs after a restart.
        self.resume_ready(now, out);
        if let Some(by) = preemptor {
            self.start_preemptor(by, now, out);
        }
        out.effect(Effect::Reschedule);
    }

    /// A node (re-)registered with the jobs it holds: a finished batch
    /// script we missed is reported, a job we think runs there that a
    /// freshly started daemon cannot have fails, and a job we never
    /// launched is killed.
    pub(super) fn reconcile(&mut self, rank: u32, hello: &Hello, out: &mut Output) {
        let mut stray = Vec::new();
        for rep in &hello.jobs {
            let ours = self.jobs.get(rep.job_id).filter(|j| {
                // A suspended job is still there, stopped.
                matches!(
                    j.state,
                    JobState::Running | JobState::Completing | JobState::Suspended
                ) && j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank))
            });
            match (ours, &rep.state) {
                (Some(j), JobOnNode::BatchFinished(status)) => {
                    let batch = j.alloc.as_ref().and_then(|a| a.ranks.first()) == Some(&rank);
                    if batch {
                        out.effect(Effect::ScriptExited {
                            job_id: rep.job_id,
                            status: *status,
                            usage: Usage::default(),
                        });
                    }
                }
                (Some(_), JobOnNode::Running) => {}
                (None, _) => stray.push(rep.job_id),
            }
        }
        // Adopted at recovery but unknown to its batch host's first
        // registration since: its launch never left before the crash.
        let reported = |id: u32| hello.jobs.iter().any(|r| r.job_id == id);
        let never_launched: Vec<u32> = self
            .unconfirmed
            .remove(&rank)
            .unwrap_or_default()
            .into_iter()
            .filter(|&id| {
                self.jobs.get(id).is_some_and(|j| {
                    matches!(j.state, JobState::Running | JobState::Suspended)
                        && j.ending_as.is_none()
                })
            })
            .filter(|&id| !reported(id))
            .collect();
        for &id in &never_launched {
            tracing::warn!(job_id = id, node = %hello.node, "job adopted after a controller restart is not on its batch host (its launch never left); NODE_FAIL");
            self.end_job(id, JobState::NodeFail, JobReason::NodeDown, None, None, out);
        }
        let lost: Vec<u32> = self
            .jobs
            .running()
            .filter(|j| j.state == JobState::Running && j.ending_as.is_none())
            // A CONFIGURING job's launch has not left: no node has it yet.
            .filter(|j| !j.configuring)
            .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
            .filter(|j| j.start_time.unwrap_or(0) < hello.started)
            .filter(|j| !reported(j.job_id))
            .map(|j| j.job_id)
            .collect();
        for id in lost {
            tracing::warn!(job_id = id, node = %hello.node, "node restarted without the job; NODE_FAIL");
            self.end_job(id, JobState::NodeFail, JobReason::NodeDown, None, None, out);
        }
        for id in stray {
            tracing::warn!(job_id = id, node = %hello.node, "node runs a job the controller did not launch; killing it");
            out.effect(Effect::Fanout {
                targets: RankSet::from_ranks([rank]),
                cmd: NodeCommand::Terminate {
                    job_id: id,
                    kill_wait_s: self.conf.kill_wait_s,
                    cause: None,
                    exit: None,
                },
                budget: std::time::Duration::from_secs(u64::from(self.conf.kill_wait_s) + 5),
            });
        }
    }

    /// The periodic timer: time-limit mail for running jobs, and jobs
    /// finished longer than MinJobAge ago forgotten (their accounting
    /// records stay).
    pub(super) fn tick(&mut self, now: UnixTime, out: &mut Output) {
        self.mail_time_limits(now, out);
        self.priority_tick(now, out);
        self.reservations_due(now, out);
        if self.conf.min_job_age_s > 0 {
            let cutoff = now - self.conf.min_job_age_s as i64;
            let old = self.jobs.purge_finished_before(cutoff);
            out.persist.extend(old.into_iter().map(Op::DeleteJob));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::fixtures::{hello, node_failed, running};
    use crate::ctld::{Command, Core, Effect};

    fn register(core: &mut Core, rank: u32, jobs: &[u32]) -> Vec<u32> {
        let out = core.apply(
            1000,
            Command::NodeRegistered {
                hello: Box::new(hello(rank, jobs)),
                via: None,
            },
        );
        node_failed(&out)
    }

    /// A start can be on disk while its launch never left (the controller
    /// died in between): the batch host's first registration after the
    /// restart tells, and only that one.
    #[test]
    fn an_adopted_job_its_batch_host_does_not_have_fails_once() {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2]\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let jobs = vec![running(7, 0), running(8, 1)];
        let (mut core, _) = Core::recover(Arc::new(conf), jobs, None, &HashMap::new(), 1000);
        // n1 runs job 7: kept. n2 does not know job 8: it never launched.
        assert_eq!(register(&mut core, 0, &[7]), Vec::<u32>::new());
        assert_eq!(register(&mut core, 1, &[]), vec![8]);
        // A later registration of n1 without the job is the ordinary rule's
        // business (its daemon did not restart): nothing more here.
        assert_eq!(register(&mut core, 0, &[]), Vec::<u32>::new());
    }

    /// The time limit and `--signal` are the core's deadlines: each comes
    /// at its time, once, and not for a later run.
    #[test]
    fn time_limits_and_warnings_fall_due_in_the_core() {
        use crate::model::job::SignalSpec;
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let mut job = running(5, 0);
        job.time_limit_min = Some(1);
        job.submit.signal = Some(SignalSpec {
            signal: 10,
            secs: 30,
            batch_only: false,
        });
        let (mut core, out) = Core::recover(Arc::new(conf), vec![job], None, &HashMap::new(), 20);
        let wakes: Vec<i64> = out
            .effects
            .iter()
            .filter_map(|e| match e {
                Effect::WakeAt(t) => Some(*t),
                _ => None,
            })
            .collect();
        assert!(wakes.contains(&40) && wakes.contains(&70), "{wakes:?}");
        let due = |core: &mut Core, now| {
            core.apply(now, Command::Schedule)
                .effects
                .into_iter()
                .filter(|e| matches!(e, Effect::SignalJob { .. } | Effect::EndJob { .. }))
                .map(|e| format!("{e:?}"))
                .collect::<Vec<_>>()
        };
        assert!(due(&mut core, 39).is_empty());
        let warned = due(&mut core, 40);
        assert_eq!(warned.len(), 1);
        assert!(warned[0].contains("signal: 10") && warned[0].contains("steps_only: true"));
        assert!(due(&mut core, 41).is_empty(), "a warning goes once");
        let ended = due(&mut core, 70);
        assert_eq!(ended.len(), 1);
        assert!(ended[0].contains("Timeout") && ended[0].contains("TimeLimit"));
        assert!(due(&mut core, 100).is_empty());
    }
}
