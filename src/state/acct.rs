//! Which accounting records a `sacct` query selects. Pure: `now` is passed in.

use crate::model::acct::AcctJob;
use crate::model::time::UnixTime;
use crate::wire::messages::AcctQuery;

/// True if `job` passes every filter of `q` (empty filters match all);
/// with `-D` (`q.duplicates`), if its last run or any earlier one does.
///
/// The time window follows sacct: a job is selected if it was active —
/// eligible, running or ending — at some point inside `[start, end]`.
pub fn matches(job: &AcctJob, q: &AcctQuery, now: UnixTime) -> bool {
    run_matches(job, q, now)
        || (q.duplicates && job.earlier_runs.iter().any(|r| run_matches(r, q, now)))
}

/// The records a selected job is listed as: its last run alone, or with
/// `-D` every run that passes the filters, oldest first (as Slurm keeps a
/// record per run of a requeued job).
pub fn runs(mut job: AcctJob, q: &AcctQuery, now: UnixTime) -> Vec<AcctJob> {
    let earlier = std::mem::take(&mut job.earlier_runs);
    let mut out = Vec::new();
    if q.duplicates {
        out.extend(earlier.into_iter().filter(|r| run_matches(r, q, now)));
    }
    if !q.duplicates || run_matches(&job, q, now) {
        out.push(job);
    }
    out
}

/// One run against the filters.
fn run_matches(job: &AcctJob, q: &AcctQuery, now: UnixTime) -> bool {
    let any = |v: bool, empty: bool| empty || v;
    let active_from = job.eligible_time.unwrap_or(job.submit_time);
    let active_to = job.end_time.unwrap_or(now);
    let named = q.job_ids.contains(&job.job_id)
        || job
            .array
            .is_some_and(|a| q.job_ids.contains(&a.array_job_id));
    any(named, q.job_ids.is_empty())
        && any(q.uids.contains(&job.uid), q.uids.is_empty())
        && any(q.names.contains(&job.name), q.names.is_empty())
        && any(
            q.partitions.contains(&job.partition),
            q.partitions.is_empty(),
        )
        && any(q.states.contains(&job.state), q.states.is_empty())
        && q.end.is_none_or(|e| active_from <= e)
        && q.start.is_none_or(|s| active_to >= s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::JobState;

    fn job(id: u32, uid: u32, submit: i64, end: Option<i64>, state: JobState) -> AcctJob {
        AcctJob {
            earlier_runs: Vec::new(),
            job_id: id,
            name: format!("j{id}"),
            user: "u".into(),
            uid,
            gid: uid,
            partition: "p".into(),
            account: String::new(),
            qos: "normal".into(),
            cluster: "c".into(),
            state,
            reason: "None".into(),
            exit_code: (0, 0),
            derived_exit_code: (0, 0),
            submit_time: submit,
            eligible_time: Some(submit),
            start_time: Some(submit),
            end_time: end,
            time_limit_min: None,
            nodes: String::new(),
            num_nodes: 1,
            req_nodes: 1,
            alloc_cpus: 1,
            req_cpus: 1,
            num_tasks: 1,
            req_mem_mb: 0,
            mem_per_cpu: false,
            workdir: "/".into(),
            submit_line: String::new(),
            priority: 1,
            restarts: 0,
            comment: String::new(),
            constraints: String::new(),
            steps: vec![],
            array: None,
            req_gres: Vec::new(),
            alloc_gres: Vec::new(),
            suspended_secs: 0,
        }
    }

    #[test]
    fn filters_combine_with_and() {
        let j = job(5, 1000, 100, Some(200), JobState::Completed);
        let q = |f: fn(&mut AcctQuery)| {
            let mut q = AcctQuery::default();
            f(&mut q);
            matches(&j, &q, 300)
        };
        assert!(q(|_| {}));
        assert!(q(|q| q.job_ids = vec![4, 5]));
        assert!(!q(|q| q.job_ids = vec![4]));
        assert!(!q(|q| q.uids = vec![0]));
        assert!(q(|q| q.states = vec![JobState::Completed]));
        assert!(!q(|q| q.states = vec![JobState::Failed]));
        assert!(!q(|q| q.names = vec!["other".into()]));
    }

    #[test]
    fn window_selects_jobs_active_inside_it() {
        let done = job(1, 0, 100, Some(200), JobState::Completed);
        let running = job(2, 0, 100, None, JobState::Running);
        let w = |s, e| AcctQuery {
            start: s,
            end: e,
            ..Default::default()
        };
        assert!(matches(&done, &w(Some(150), Some(160)), 1000));
        assert!(!matches(&done, &w(Some(201), None), 1000));
        assert!(!matches(&done, &w(None, Some(99)), 1000));
        // Still running: active up to now.
        assert!(matches(&running, &w(Some(900), None), 1000));
    }
}
