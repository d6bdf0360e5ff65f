//! Job dependencies (`sbatch -d/--dependency`): the Slurm syntax, the rules
//! that decide when a dependent job may start, and the text squeue `%E` and
//! scontrol `Dependency=` print.
//!
//! Owns parsing a spec into [`Dependency`], evaluating its terms against what
//! the caller reports about the jobs they name, and displaying what is left.
//! Does not: look jobs up, keep a reverse index, compute whether a
//! `singleton` is clear, set pending reasons or cancel jobs whose dependency
//! can never be satisfied — the controller does those and passes the facts in.
//! No I/O and no clock: `now` is an argument.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::state::JobState;
use super::time::UnixTime;

/// Slurm's dependency types that canopy implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepKind {
    After,
    AfterAny,
    AfterOk,
    AfterNotOk,
    AfterCorr,
    Singleton,
}

impl DepKind {
    const ALL: [DepKind; 6] = [
        DepKind::After,
        DepKind::AfterAny,
        DepKind::AfterOk,
        DepKind::AfterNotOk,
        DepKind::AfterCorr,
        DepKind::Singleton,
    ];

    /// The type name as written in a spec and in squeue `%E`.
    pub fn name(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterOk => "afterok",
            DepKind::AfterNotOk => "afternotok",
            DepKind::AfterCorr => "aftercorr",
            DepKind::Singleton => "singleton",
        }
    }
}

/// Types Slurm knows but canopy does not implement: named in the error so the
/// user learns it is a canopy limitation, not a typo.
const UNSUPPORTED_KINDS: [&str; 2] = ["afterburstbuffer", "expand"];

/// Which job(s) a term names: `123` (a plain job, or every task of array
/// 123), `123_4` (one array task), `123_*` (every task, same as `123`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub job_id: u32,
    pub task: Option<u32>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.task {
            Some(task) => write!(f, "{}_{}", self.job_id, task),
            None => write!(f, "{}", self.job_id),
        }
    }
}

/// Where one term stands. `Fulfilled` and `Failed` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TermStatus {
    Unfulfilled,
    Fulfilled,
    Failed,
}

impl TermStatus {
    fn label(self) -> &'static str {
        match self {
            TermStatus::Unfulfilled => "unfulfilled",
            TermStatus::Fulfilled => "fulfilled",
            TermStatus::Failed => "failed",
        }
    }
}

/// One condition on one job (or on the singleton rule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub kind: DepKind,
    /// `None` only for [`DepKind::Singleton`].
    pub target: Option<Target>,
    /// `after:id+min`; 0 for every other form.
    pub delay_min: u32,
    pub status: TermStatus,
}

/// A parsed `--dependency` value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub terms: Vec<Term>,
    /// `?`-separated: any one term suffices. N.B. it applies to every term,
    /// including the several ids of one `type:id:id` group, as in Slurm.
    pub any: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DependError {
    #[error("empty dependency specification")]
    Empty,
    #[error("dependency \"{spec}\" mixes ',' (all of) and '?' (any of); use one separator")]
    MixedSeparators { spec: String },
    #[error("dependency \"{spec}\" has an empty term (leading, trailing or doubled separator)")]
    EmptyTerm { spec: String },
    #[error("unknown dependency type \"{kind}\"")]
    UnknownType { kind: String },
    #[error("dependency type \"{kind}\" is not supported by canopy")]
    UnsupportedType { kind: String },
    #[error("dependency \"{term}\" names no job id: expected {term}:<job_id>")]
    MissingIds { term: String },
    #[error("dependency \"{term}\" has an empty job id")]
    EmptyId { term: String },
    #[error("invalid job id \"{text}\" in dependency: expected N, N_T or N_*")]
    InvalidId { text: String },
    #[error("job id 0 in \"{text}\" cannot be a dependency target")]
    ZeroId { text: String },
    #[error("dependency \"{term}\": a +minutes delay is only allowed with \"after\"")]
    DelayNotAllowed { term: String },
    #[error("invalid delay in \"{text}\": expected <job_id>+<minutes>")]
    InvalidDelay { text: String },
    #[error("\"singleton\" takes no job ids, got \"{term}\"")]
    SingletonWithIds { term: String },
    #[error("dependency on job {target}, which does not exist")]
    UnknownTarget { target: Target },
}

impl DependError {
    /// What Slurm's controller answers for every dependency it rejects.
    pub fn slurm_message(&self) -> &'static str {
        "Job dependency problem"
    }
}

/// What the evaluator needs to know about one job a term names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetJob {
    pub state: JobState,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    pub array_task: Option<u32>,
}

impl TargetJob {
    /// `after` counts a job cancelled before it ever ran as started, as Slurm does.
    fn started(&self) -> bool {
        self.start_time.is_some() || self.state != JobState::Pending
    }

    fn succeeded(&self) -> bool {
        self.state == JobState::Completed
    }

    fn ended_badly(&self) -> bool {
        self.state.is_finished() && !self.succeeded()
    }
}

/// The combined verdict over all terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Satisfied,
    Waiting,
    /// Some term failed in a way no future event can repair
    /// (Slurm's `DependencyNeverSatisfied`).
    Never,
}

impl Dependency {
    /// Parse Slurm's syntax: `type:id[:id...]` terms joined by `,` (all) or
    /// `?` (any), never both; a bare `id[:id...]` term is `afterany`;
    /// `after:id+min`; `singleton`; ids are `N`, `N_T` or `N_*`.
    ///
    /// Type names are matched case-insensitively, as Slurm's controller does
    /// (it compares with `strncasecmp`). Unlike Slurm, which only compares a
    /// prefix (so `afterokay:5` means `afterok:5` there), the whole name must
    /// match. Surrounding whitespace of the whole spec is ignored, so a
    /// `#SBATCH` line with a trailing blank still works.
    pub fn parse(spec: &str) -> Result<Dependency, DependError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(DependError::Empty);
        }
        let any = match (spec.contains(','), spec.contains('?')) {
            (true, true) => {
                return Err(DependError::MixedSeparators { spec: spec.into() });
            }
            (_, any) => any,
        };
        let separator = if any { '?' } else { ',' };
        let mut terms = Vec::new();
        for term in spec.split(separator) {
            if term.is_empty() {
                return Err(DependError::EmptyTerm { spec: spec.into() });
            }
            parse_term(term, &mut terms)?;
        }
        Ok(Dependency { terms, any })
    }

    /// Re-evaluate every still-unfulfilled term and return the overall outcome.
    ///
    /// `lookup` returns the jobs a target names (every task for an array id;
    /// empty when the job is unknown or already purged); `self_task` is the
    /// dependent job's own array index (for `aftercorr`); `singleton_clear`
    /// says no earlier job of the same name and user is pending or running.
    /// A term that has become fulfilled or failed is never looked at again:
    /// a failed dependency stays failed even if its predecessor is requeued.
    pub fn evaluate(
        &mut self,
        lookup: impl Fn(&Target) -> Vec<TargetJob>,
        self_task: Option<u32>,
        singleton_clear: bool,
        now: UnixTime,
    ) -> Outcome {
        for term in &mut self.terms {
            if term.status != TermStatus::Unfulfilled {
                continue;
            }
            term.status = match (term.kind, term.target) {
                (DepKind::Singleton, _) => singleton_status(singleton_clear),
                // Only a hand-made or corrupted record gets here (parse always
                // sets a target); refusing it is safer than starting the job.
                (_, None) => TermStatus::Failed,
                (DepKind::After, Some(t)) => after_status(&lookup(&t), term.delay_min, now),
                (DepKind::AfterAny, Some(t)) => after_any_status(&lookup(&t)),
                (DepKind::AfterOk, Some(t)) => after_ok_status(&lookup(&t)),
                (DepKind::AfterNotOk, Some(t)) => after_not_ok_status(&lookup(&t)),
                (DepKind::AfterCorr, Some(t)) => after_corr_status(&lookup(&t), self_task),
            };
        }
        self.outcome()
    }

    /// The verdict from the terms' current statuses, without re-evaluating.
    pub fn outcome(&self) -> Outcome {
        let total = self.terms.len();
        let count = |status| self.terms.iter().filter(|t| t.status == status).count();
        let fulfilled = count(TermStatus::Fulfilled);
        let failed = count(TermStatus::Failed);
        // An empty list (nothing to wait for) is satisfied under either separator.
        if self.any {
            if fulfilled > 0 || total == 0 {
                Outcome::Satisfied
            } else if failed == total {
                Outcome::Never
            } else {
                Outcome::Waiting
            }
        } else if failed > 0 {
            Outcome::Never
        } else if fulfilled == total {
            Outcome::Satisfied
        } else {
            Outcome::Waiting
        }
    }

    /// Check at submit that every typed term names a job the controller
    /// knows; Slurm refuses a dependency on a job it has never seen.
    pub fn validate_targets(&self, exists: impl Fn(&Target) -> bool) -> Result<(), DependError> {
        match self
            .terms
            .iter()
            .filter_map(|t| t.target)
            .find(|t| !exists(t))
        {
            Some(target) => Err(DependError::UnknownTarget { target }),
            None => Ok(()),
        }
    }

    /// The targets' base job ids, deduplicated, in first-seen order (for the
    /// controller's reverse index from a job to its dependents).
    pub fn target_ids(&self) -> Vec<u32> {
        let mut ids = Vec::new();
        for id in self.terms.iter().filter_map(|t| t.target).map(|t| t.job_id) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }

    pub fn has_singleton(&self) -> bool {
        self.terms.iter().any(|t| t.kind == DepKind::Singleton)
    }
}

/// Slurm's display (squeue `%E`, scontrol `Dependency=`): fulfilled terms are
/// dropped, the rest carry their status; `(null)` when nothing is left.
impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let separator = if self.any { "?" } else { "," };
        let mut shown = self
            .terms
            .iter()
            .filter(|t| t.status != TermStatus::Fulfilled)
            .peekable();
        if shown.peek().is_none() {
            return f.write_str("(null)");
        }
        for (i, term) in shown.enumerate() {
            if i > 0 {
                f.write_str(separator)?;
            }
            write_term(term, f)?;
        }
        Ok(())
    }
}

fn write_term(term: &Term, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(term.kind.name())?;
    if let Some(target) = term.target {
        write!(f, ":{target}")?;
    }
    if term.delay_min > 0 {
        write!(f, "+{}", term.delay_min)?;
    }
    write!(f, "({})", term.status.label())
}

/// Parse one separator-free term, appending one [`Term`] per id it names.
fn parse_term(term: &str, out: &mut Vec<Term>) -> Result<(), DependError> {
    let (head, ids) = match term.split_once(':') {
        Some((head, ids)) => (head, Some(ids)),
        None => (term, None),
    };
    // Slurm's oldest form: a list of ids without a type means afterany.
    if head.starts_with(|c: char| c.is_ascii_digit()) {
        return parse_ids(DepKind::AfterAny, term, term, out);
    }
    match (parse_kind(head)?, ids) {
        (DepKind::Singleton, None) => {
            out.push(Term {
                kind: DepKind::Singleton,
                target: None,
                delay_min: 0,
                status: TermStatus::Unfulfilled,
            });
            Ok(())
        }
        (DepKind::Singleton, Some(_)) => Err(DependError::SingletonWithIds { term: term.into() }),
        (_, None) => Err(DependError::MissingIds { term: term.into() }),
        (kind, Some(ids)) => parse_ids(kind, ids, term, out),
    }
}

fn parse_kind(name: &str) -> Result<DepKind, DependError> {
    if let Some(kind) = DepKind::ALL
        .into_iter()
        .find(|k| k.name().eq_ignore_ascii_case(name))
    {
        return Ok(kind);
    }
    if UNSUPPORTED_KINDS
        .iter()
        .any(|k| k.eq_ignore_ascii_case(name))
    {
        Err(DependError::UnsupportedType { kind: name.into() })
    } else {
        Err(DependError::UnknownType { kind: name.into() })
    }
}

/// Parse `id[+min][:id[+min]...]` (`list`) belonging to `term`.
fn parse_ids(
    kind: DepKind,
    list: &str,
    term: &str,
    out: &mut Vec<Term>,
) -> Result<(), DependError> {
    for id in list.split(':') {
        if id.is_empty() {
            return Err(DependError::EmptyId { term: term.into() });
        }
        let (target_text, delay_min) = match id.split_once('+') {
            None => (id, 0),
            Some(_) if kind != DepKind::After => {
                return Err(DependError::DelayNotAllowed { term: term.into() });
            }
            Some((target_text, minutes)) => {
                let delay = parse_number(minutes)
                    .ok_or_else(|| DependError::InvalidDelay { text: id.into() })?;
                (target_text, delay)
            }
        };
        if target_text.is_empty() {
            return Err(DependError::EmptyId { term: term.into() });
        }
        out.push(Term {
            kind,
            target: Some(parse_target(target_text)?),
            delay_min,
            status: TermStatus::Unfulfilled,
        });
    }
    Ok(())
}

/// Parse `N`, `N_T` or `N_*`.
fn parse_target(text: &str) -> Result<Target, DependError> {
    let invalid = || DependError::InvalidId { text: text.into() };
    let (job, task) = match text.split_once('_') {
        Some((job, task)) => (job, Some(task)),
        None => (text, None),
    };
    let job_id = parse_number(job).ok_or_else(invalid)?;
    if job_id == 0 {
        return Err(DependError::ZeroId { text: text.into() });
    }
    let task = match task {
        None | Some("*") => None,
        Some(task) => Some(parse_number(task).ok_or_else(invalid)?),
    };
    Ok(Target { job_id, task })
}

/// Digits only: `str::parse` alone would also take a leading `+`.
fn parse_number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn singleton_status(clear: bool) -> TermStatus {
    if clear {
        TermStatus::Fulfilled
    } else {
        TermStatus::Unfulfilled
    }
}

/// Every job started (or ended without starting), plus the delay counted
/// from the latest start. A purged job started long ago.
fn after_status(jobs: &[TargetJob], delay_min: u32, now: UnixTime) -> TermStatus {
    if !jobs.iter().all(TargetJob::started) {
        return TermStatus::Unfulfilled;
    }
    if delay_min == 0 {
        return TermStatus::Fulfilled;
    }
    let latest_start = jobs
        .iter()
        .filter_map(|j| j.start_time.or(j.end_time))
        .max();
    let delay_s = i64::from(delay_min) * 60;
    match latest_start {
        Some(start) if now < start.saturating_add(delay_s) => TermStatus::Unfulfilled,
        // No time recorded: nothing to count the delay from, so it has passed.
        _ => TermStatus::Fulfilled,
    }
}

/// Every job ended, however. A purged job ended long ago.
fn after_any_status(jobs: &[TargetJob]) -> TermStatus {
    if jobs.iter().all(|j| j.state.is_finished()) {
        TermStatus::Fulfilled
    } else {
        TermStatus::Unfulfilled
    }
}

/// Every job completed successfully. One bad end already makes it impossible,
/// so fail at once rather than wait for the rest of an array. An unknown job's
/// result cannot be known, so that fails too.
fn after_ok_status(jobs: &[TargetJob]) -> TermStatus {
    if jobs.is_empty() || jobs.iter().any(TargetJob::ended_badly) {
        TermStatus::Failed
    } else if jobs.iter().all(TargetJob::succeeded) {
        TermStatus::Fulfilled
    } else {
        TermStatus::Unfulfilled
    }
}

/// Every job ended and at least one of them did not complete.
fn after_not_ok_status(jobs: &[TargetJob]) -> TermStatus {
    if jobs.is_empty() {
        TermStatus::Failed
    } else if !jobs.iter().all(|j| j.state.is_finished()) {
        TermStatus::Unfulfilled
    } else if jobs.iter().any(TargetJob::ended_badly) {
        TermStatus::Fulfilled
    } else {
        TermStatus::Failed
    }
}

/// The target task with the dependent's own index completed. Without a
/// matching task (target not an array, dependent not an array task, or the
/// index absent) Slurm falls back to afterok over all targets; so do we.
fn after_corr_status(jobs: &[TargetJob], self_task: Option<u32>) -> TermStatus {
    let corresponding: Vec<TargetJob> = match self_task {
        Some(task) => jobs
            .iter()
            .filter(|j| j.array_task == Some(task))
            .copied()
            .collect(),
        None => Vec::new(),
    };
    if corresponding.is_empty() {
        after_ok_status(jobs)
    } else {
        after_ok_status(&corresponding)
    }
}

#[cfg(test)]
mod tests;
