//! Which job mail goes when (`--mail-type`): BEGIN when a job (or an
//! array's first task) starts, END/FAIL when it (or an array's last task)
//! ends, REQUEUE, INVALID_DEPEND and TIME_LIMIT_50/80/90/TIME_LIMIT. The
//! mail itself is built by `crate::mail`; the shell sends it.

use std::collections::HashSet;

use super::command::{Effect, Output};
use super::core::Core;
use crate::mail;
use crate::model::acct::{AcctJob, Usage};
use crate::model::job::{JobRecord, JobState};
use crate::model::time::UnixTime;

impl Core {
    fn mail_to(&self, j: &JobRecord) -> String {
        mail::recipient(
            j.submit.mail_user.as_deref(),
            &j.submit.user,
            self.conf.mail_domain.as_deref(),
        )
    }

    /// BEGIN mail for jobs that just started. An array (without
    /// ARRAY_TASKS) is mailed once, with the first of its tasks to start.
    pub(super) fn mail_started(&self, started: &[u32], out: &mut Output) {
        let batch: HashSet<u32> = started.iter().copied().collect();
        let mut arrays = HashSet::new();
        for j in started.iter().filter_map(|&id| self.jobs.get(id)) {
            let flags = j.submit.mail_type;
            if flags & mail::BEGIN == 0 {
                continue;
            }
            let summary = match j.array {
                Some(a) if flags & mail::ARRAY_TASKS == 0 => {
                    // Each array is looked at once per pass, however many
                    // of its tasks start in it.
                    if !arrays.insert(a.array_job_id) {
                        continue;
                    }
                    let earlier = self
                        .jobs
                        .array_members(a.array_job_id)
                        .any(|t| t.start_time.is_some() && !batch.contains(&t.job_id));
                    if earlier {
                        continue;
                    }
                    true
                }
                _ => false,
            };
            let acct = self.acct_of(j, Usage::default());
            let m = mail::began(&acct, self.mail_to(j), &group_of(j), summary);
            out.effect(Effect::Mail(Box::new(m)));
        }
    }

    /// END or FAIL mail for jobs that just finished; an array (without
    /// ARRAY_TASKS) gets its summary when its last task finishes.
    pub(super) fn mail_finished(&self, ids: &[u32], out: &mut Output) {
        let mut arrays = HashSet::new();
        for j in ids.iter().filter_map(|&id| self.jobs.get(id)) {
            let flags = end_mail_flags(j);
            if flags & (mail::END | mail::FAIL) == 0 {
                continue;
            }
            let (to, group) = (self.mail_to(j), group_of(j));
            let sent = match j.array {
                Some(a) if flags & mail::ARRAY_TASKS == 0 => {
                    if !arrays.insert(a.array_job_id) {
                        continue;
                    }
                    let tasks: Vec<&JobRecord> = self.jobs.array_members(a.array_job_id).collect();
                    if tasks.iter().any(|t| !t.state.is_finished()) {
                        continue;
                    }
                    let accts: Vec<AcctJob> = tasks
                        .iter()
                        .map(|t| self.acct_of(t, Usage::default()))
                        .collect();
                    let refs: Vec<&AcctJob> = accts.iter().collect();
                    mail::array_ended(&refs, flags, to, &group)
                }
                _ => mail::ended(&self.acct_of(j, Usage::default()), flags, to, &group),
            };
            if let Some(m) = sent {
                out.effect(Effect::Mail(Box::new(m)));
            }
        }
    }

    /// A mail for an event in job `id`'s life, if its `--mail-type` has
    /// `flag` (see `mail::event`).
    pub(super) fn mail_event(
        &self,
        id: u32,
        flag: u32,
        what: &str,
        run_secs: Option<u64>,
        state: Option<JobState>,
        out: &mut Output,
    ) {
        let Some(j) = self.jobs.get(id).filter(|j| j.submit.mail_type & flag != 0) else {
            return;
        };
        let acct = self.acct_of(j, Usage::default());
        let m = mail::event(&acct, self.mail_to(j), &group_of(j), what, run_secs, state);
        out.effect(Effect::Mail(Box::new(m)));
    }

    /// TIME_LIMIT_50/80/90 (and TIME_LIMIT, if the check comes before the
    /// kill) for running jobs that have reached that share of their limit;
    /// each is sent once per run.
    pub(super) fn mail_time_limits(&mut self, now: UnixTime, out: &mut Output) {
        let mut due: Vec<(u32, u32, &'static str, u64)> = Vec::new();
        for j in self.jobs.running() {
            let (Some(limit), Some(start)) = (j.time_limit_min, j.start_time) else {
                continue;
            };
            // Not for a job already being torn down (cancelled, requeued).
            if j.submit.mail_type == 0 || j.state != JobState::Running || j.ending_as.is_some() {
                continue;
            }
            let run = u64::try_from(now - start).unwrap_or(0);
            let limit_s = u64::from(limit) * 60;
            for (bit, what) in mail::time_limit_due(j.submit.mail_type, j.mail_sent, run, limit_s) {
                due.push((j.job_id, bit, what, run));
            }
        }
        let mut ids = Vec::new();
        for (id, bit, what, run) in due {
            let state = Some(JobState::Running);
            self.mail_event(id, bit, what, Some(run), state, out);
            self.jobs.modify(id, |j| j.mail_sent |= bit);
            ids.push(id);
        }
        ids.dedup();
        self.put_jobs(&ids, out);
    }
}

/// The job's group name, resolved when it was submitted (the gid itself
/// for records from before the name was kept).
/// The `--mail-type` bits that apply to job `j`'s end. Slurm 22.05 has no
/// mail type for preemption: a preempted job's end is mailed under FAIL
/// only (END covers COMPLETED and CANCELLED), and not at all when it is
/// requeued, whose REQUEUE mail follows (`job_completion_logger`).
fn end_mail_flags(j: &JobRecord) -> u32 {
    let flags = j.submit.mail_type;
    match j.state {
        JobState::Preempted if j.requeue.is_some() => flags & !(mail::END | mail::FAIL),
        JobState::Preempted => flags & !mail::END,
        _ => flags,
    }
}

fn group_of(j: &JobRecord) -> String {
    if j.submit.group.is_empty() {
        j.submit.gid.to_string()
    } else {
        j.submit.group.clone()
    }
}
