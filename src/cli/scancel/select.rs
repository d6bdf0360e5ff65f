//! scancel's job filters, applied on the client: users and nodes looked up once
//! ([`Selector`]), which jobs and steps the named ids and the filters (combined with AND)
//! select from the controller's job list, and the cancel requests that follow.
//!
//! Does not: parse the command line (the parent module does) or talk to the controller
//! (`send` does).

use super::*;

/// The filters with users and nodes looked up: decides which jobs they let through.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub(super) filters: Filters,
    pub(super) uids: Option<Vec<u32>>,
    pub(super) nodes: Option<Vec<String>>,
}

impl Selector {
    /// Looks up `-u` names (`uid_of`; a number is taken as a uid), `--me` (`me`) and the
    /// `-w` hostlist (reading it with `read_file` when it is a path).
    pub fn resolve(
        filters: &Filters,
        me: u32,
        uid_of: impl Fn(&str) -> Option<u32>,
        read_file: impl Fn(&str) -> std::io::Result<String>,
    ) -> Result<Selector, ScancelError> {
        let uids = match &filters.users {
            None => None,
            Some(Users::Me) => Some(vec![me]),
            Some(Users::Listed(list)) => Some(resolve_users(list, uid_of)?),
        };
        let nodes = match &filters.nodelist {
            None => None,
            Some(list) => Some(expand_nodes(list, read_file)?),
        };
        Ok(Selector {
            filters: filters.clone(),
            uids,
            nodes,
        })
    }

    /// Whether every filter accepts `job` (whatever its state; see [`select`]).
    pub fn matches(&self, job: &JobInfo) -> bool {
        let f = &self.filters;
        let is = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.uids.as_ref().is_none_or(|u| u.contains(&job.uid))
            && f.state.is_none_or(|s| s == job.state)
            && is(&f.partition, &job.partition)
            && is(&f.name, &job.name)
            && is(&f.account, &job.account)
            && is(
                &f.qos,
                if job.qos.is_empty() {
                    JOB_QOS
                } else {
                    &job.qos
                },
            )
            && is(&f.reservation, &job.reservation)
            && is(&f.wckey, "")
            && self
                .nodes
                .as_ref()
                .is_none_or(|want| runs_on_any(job, want))
    }
}

pub(super) fn resolve_users(
    list: &str,
    uid_of: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<u32>, ScancelError> {
    let names: Vec<&str> = list.split(',').filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err(ScancelError::InvalidUser {
            name: list.to_string(),
        });
    }
    names
        .into_iter()
        .map(|n| {
            uid_of(n)
                .or_else(|| n.parse().ok())
                .ok_or_else(|| ScancelError::InvalidUser {
                    name: n.to_string(),
                })
        })
        .collect()
}

pub(super) fn expand_nodes(
    list: &str,
    read_file: impl Fn(&str) -> std::io::Result<String>,
) -> Result<Vec<String>, ScancelError> {
    let text = if list.contains('/') {
        read_file(list).map_err(|e| ScancelError::NodeListFile {
            path: list.to_string(),
            reason: e.to_string(),
        })?
    } else {
        list.to_string()
    };
    hostlist::expand(&text).map_err(|e| ScancelError::InvalidNodeList {
        list: list.to_string(),
        reason: e.to_string(),
    })
}

pub(super) fn runs_on_any(job: &JobInfo, nodes: &[String]) -> bool {
    hostlist::expand(&job.nodes).is_ok_and(|have| have.iter().any(|h| nodes.contains(h)))
}

/// Only these states can be cancelled; Slurm treats any other job as gone.
pub(super) fn is_active(state: JobState) -> bool {
    matches!(
        state,
        JobState::Pending | JobState::Running | JobState::Suspended
    )
}

/// Which jobs of the controller's list to act on.
#[derive(Debug, Default, PartialEq)]
pub struct Selection {
    /// Each once, pending jobs first (so none of them starts while the others are handled,
    /// as Slurm orders it).
    pub jobs: Vec<JobInfo>,
    /// Named targets with no active job: error lines.
    pub missing: Vec<Target>,
    /// Steps of started jobs (`N.S`), as (job id, step id), each once.
    pub steps: Vec<(u32, u32)>,
}

/// The active jobs named by `targets` (all active jobs when there are none) that pass
/// `selector`.
pub fn select(targets: &[Target], selector: &Selector, jobs: &[JobInfo]) -> Selection {
    let active = || jobs.iter().filter(|j| is_active(j.state));
    let mut missing = Vec::new();
    let mut steps = Vec::new();
    let mut chosen: Vec<&JobInfo> = if targets.is_empty() {
        active().collect()
    } else {
        let mut named = Vec::new();
        for t in targets {
            let hits: Vec<&JobInfo> = active().filter(|j| t.matches(j)).collect();
            match (hits.is_empty(), t.step) {
                (true, _) => missing.push(t.clone()),
                // Slurm passes over step ids of pending jobs without a word.
                (false, Some(step)) => steps.extend(
                    hits.iter()
                        .filter(|j| j.state != JobState::Pending && selector.matches(j))
                        .map(|j| (j.job_id, step)),
                ),
                (false, None) => named.extend(hits),
            }
        }
        named
    };
    let mut seen = HashSet::new();
    chosen.retain(|j| selector.matches(j) && seen.insert(j.job_id));
    chosen.sort_by_key(|j| j.state != JobState::Pending);
    let mut seen = HashSet::new();
    steps.retain(|s| seen.insert(*s));
    Selection {
        jobs: chosen.into_iter().cloned().collect(),
        missing,
        steps,
    }
}

/// The requests for the chosen jobs: one, except that SIGKILL to a pending job cancels it
/// (as in Slurm; the controller only signals started jobs), so those go first as a cancel.
pub fn requests(jobs: &[JobInfo], signal: Option<i32>, batch_only: bool) -> Vec<CancelRequest> {
    let (cancel, rest): (Vec<&JobInfo>, Vec<&JobInfo>) = jobs
        .iter()
        .partition(|j| signal == Some(SIGKILL) && j.state == JobState::Pending);
    let request = |group: Vec<&JobInfo>, signal| CancelRequest {
        job_ids: group.iter().map(|j| j.job_id).collect(),
        signal,
        batch_only,
        exact: true,
    };
    [request(cancel, None), request(rest, signal)]
        .into_iter()
        .filter(|r| !r.job_ids.is_empty())
        .collect()
}

pub(super) fn uid_of_name(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}
