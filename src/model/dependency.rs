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

use super::job::JobState;
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
mod tests {
    use super::*;

    fn target(job_id: u32, task: Option<u32>) -> Target {
        Target { job_id, task }
    }

    fn term(kind: DepKind, job_id: u32, task: Option<u32>, delay_min: u32) -> Term {
        Term {
            kind,
            target: Some(target(job_id, task)),
            delay_min,
            status: TermStatus::Unfulfilled,
        }
    }

    fn singleton() -> Term {
        Term {
            kind: DepKind::Singleton,
            target: None,
            delay_min: 0,
            status: TermStatus::Unfulfilled,
        }
    }

    fn job(state: JobState) -> TargetJob {
        let started = !matches!(state, JobState::Pending | JobState::Cancelled);
        TargetJob {
            state,
            start_time: started.then_some(1_000),
            end_time: state.is_finished().then_some(2_000),
            array_task: None,
        }
    }

    fn task(state: JobState, index: u32) -> TargetJob {
        TargetJob {
            array_task: Some(index),
            ..job(state)
        }
    }

    /// Evaluate with a fixed table: job id → jobs (missing = unknown).
    fn eval(dep: &mut Dependency, table: &[(u32, Vec<TargetJob>)]) -> Outcome {
        eval_full(dep, table, None, false, 10_000)
    }

    fn eval_full(
        dep: &mut Dependency,
        table: &[(u32, Vec<TargetJob>)],
        self_task: Option<u32>,
        singleton_clear: bool,
        now: UnixTime,
    ) -> Outcome {
        dep.evaluate(|t| lookup_in(table, t), self_task, singleton_clear, now)
    }

    fn lookup_in(table: &[(u32, Vec<TargetJob>)], t: &Target) -> Vec<TargetJob> {
        let jobs = table
            .iter()
            .find(|(id, _)| *id == t.job_id)
            .map(|(_, jobs)| jobs.clone())
            .unwrap_or_default();
        match t.task {
            Some(index) => jobs
                .into_iter()
                .filter(|j| j.array_task == Some(index))
                .collect(),
            None => jobs,
        }
    }

    fn parse(spec: &str) -> Dependency {
        Dependency::parse(spec).unwrap()
    }

    fn statuses(dep: &Dependency) -> Vec<TermStatus> {
        dep.terms.iter().map(|t| t.status).collect()
    }

    // ---- parsing: accepted forms ----

    #[test]
    fn parses_every_type() {
        let cases = [
            ("after:5", DepKind::After),
            ("afterany:5", DepKind::AfterAny),
            ("afterok:5", DepKind::AfterOk),
            ("afternotok:5", DepKind::AfterNotOk),
            ("aftercorr:5", DepKind::AfterCorr),
        ];
        for (spec, kind) in cases {
            let dep = parse(spec);
            assert_eq!(dep.terms, vec![term(kind, 5, None, 0)], "{spec}");
            assert!(!dep.any);
        }
    }

    #[test]
    fn type_names_are_case_insensitive() {
        assert_eq!(
            parse("AfterOK:7").terms,
            vec![term(DepKind::AfterOk, 7, None, 0)]
        );
        assert_eq!(parse("SINGLETON").terms, vec![singleton()]);
    }

    #[test]
    fn id_list_expands_to_one_term_per_id() {
        let dep = parse("afterok:1:2:3");
        assert_eq!(
            dep.terms,
            vec![
                term(DepKind::AfterOk, 1, None, 0),
                term(DepKind::AfterOk, 2, None, 0),
                term(DepKind::AfterOk, 3, None, 0),
            ]
        );
        assert!(!dep.any);
    }

    #[test]
    fn comma_joins_terms_with_all_semantics() {
        let dep = parse("after:1,afterok:2:3,singleton");
        assert!(!dep.any);
        assert_eq!(
            dep.terms,
            vec![
                term(DepKind::After, 1, None, 0),
                term(DepKind::AfterOk, 2, None, 0),
                term(DepKind::AfterOk, 3, None, 0),
                singleton(),
            ]
        );
    }

    #[test]
    fn question_mark_joins_terms_with_any_semantics() {
        let dep = parse("afterok:1?afternotok:2");
        assert!(dep.any);
        assert_eq!(
            dep.terms,
            vec![
                term(DepKind::AfterOk, 1, None, 0),
                term(DepKind::AfterNotOk, 2, None, 0),
            ]
        );
    }

    #[test]
    fn bare_ids_mean_afterany() {
        assert_eq!(
            parse("123").terms,
            vec![term(DepKind::AfterAny, 123, None, 0)]
        );
        assert_eq!(
            parse("123:124").terms,
            vec![
                term(DepKind::AfterAny, 123, None, 0),
                term(DepKind::AfterAny, 124, None, 0),
            ]
        );
        assert_eq!(
            parse("afterok:1,2").terms,
            vec![
                term(DepKind::AfterOk, 1, None, 0),
                term(DepKind::AfterAny, 2, None, 0),
            ]
        );
    }

    #[test]
    fn array_task_forms() {
        assert_eq!(
            parse("afterok:9_4").terms,
            vec![term(DepKind::AfterOk, 9, Some(4), 0)]
        );
        assert_eq!(
            parse("afterok:9_0").terms,
            vec![term(DepKind::AfterOk, 9, Some(0), 0)]
        );
        assert_eq!(parse("afterok:9_*"), parse("afterok:9"));
        assert_eq!(
            parse("9_2").terms,
            vec![term(DepKind::AfterAny, 9, Some(2), 0)]
        );
    }

    #[test]
    fn after_takes_a_delay_per_id() {
        assert_eq!(
            parse("after:5+10:6:7_1+0").terms,
            vec![
                term(DepKind::After, 5, None, 10),
                term(DepKind::After, 6, None, 0),
                term(DepKind::After, 7, Some(1), 0),
            ]
        );
    }

    #[test]
    fn surrounding_whitespace_is_ignored() {
        assert_eq!(parse("  afterok:3 \n"), parse("afterok:3"));
    }

    // ---- parsing: errors ----

    fn err(spec: &str) -> DependError {
        Dependency::parse(spec).unwrap_err()
    }

    #[test]
    fn empty_spec_is_refused() {
        assert_eq!(err(""), DependError::Empty);
        assert_eq!(err("   "), DependError::Empty);
    }

    #[test]
    fn mixing_separators_is_refused() {
        assert_eq!(
            err("afterok:1,afterok:2?afterok:3"),
            DependError::MixedSeparators {
                spec: "afterok:1,afterok:2?afterok:3".into()
            }
        );
    }

    #[test]
    fn empty_terms_are_refused() {
        for spec in [
            "afterok:1,",
            ",afterok:1",
            "afterok:1,,afterok:2",
            "afterok:1?",
            "?",
        ] {
            assert_eq!(
                err(spec),
                DependError::EmptyTerm { spec: spec.into() },
                "{spec}"
            );
        }
    }

    #[test]
    fn unknown_types_are_refused_by_name() {
        assert_eq!(
            err("afterfoo:1"),
            DependError::UnknownType {
                kind: "afterfoo".into()
            }
        );
        // Slurm matches a prefix; canopy wants the whole name.
        assert_eq!(
            err("afterokay:1"),
            DependError::UnknownType {
                kind: "afterokay".into()
            }
        );
        assert_eq!(
            err("bogus"),
            DependError::UnknownType {
                kind: "bogus".into()
            }
        );
        assert_eq!(err(":5"), DependError::UnknownType { kind: "".into() });
    }

    #[test]
    fn slurm_types_canopy_lacks_are_named_unsupported() {
        assert_eq!(
            err("afterburstbuffer:1"),
            DependError::UnsupportedType {
                kind: "afterburstbuffer".into()
            }
        );
        assert_eq!(
            err("Expand:1"),
            DependError::UnsupportedType {
                kind: "Expand".into()
            }
        );
        assert_eq!(
            err("expand").to_string(),
            "dependency type \"expand\" is not supported by canopy"
        );
    }

    #[test]
    fn typed_term_without_ids_is_refused() {
        assert_eq!(
            err("afterok"),
            DependError::MissingIds {
                term: "afterok".into()
            }
        );
    }

    #[test]
    fn empty_ids_are_refused() {
        for (spec, term) in [
            ("afterok:", "afterok:"),
            ("afterok:1::2", "afterok:1::2"),
            ("after:1:", "after:1:"),
            ("1:", "1:"),
            ("afterany:2,afterok:", "afterok:"),
            ("after:+3", "after:+3"),
        ] {
            assert_eq!(
                err(spec),
                DependError::EmptyId { term: term.into() },
                "{spec}"
            );
        }
    }

    #[test]
    fn malformed_ids_are_refused_by_text() {
        for (spec, text) in [
            ("afterok:abc", "abc"),
            ("afterok:12a", "12a"),
            ("12a", "12a"),
            ("afterok:-3", "-3"),
            ("afterok:3_", "3_"),
            ("afterok:3_x", "3_x"),
            ("afterok:3_1_2", "3_1_2"),
            ("afterok:_3", "_3"),
            ("afterok:*", "*"),
            ("afterok:99999999999", "99999999999"),
            ("afterok: 3", " 3"),
        ] {
            assert_eq!(
                err(spec),
                DependError::InvalidId { text: text.into() },
                "{spec}"
            );
        }
    }

    #[test]
    fn job_id_zero_is_refused() {
        assert_eq!(err("afterok:0"), DependError::ZeroId { text: "0".into() });
        assert_eq!(err("after:0_3"), DependError::ZeroId { text: "0_3".into() });
        assert_eq!(err("0"), DependError::ZeroId { text: "0".into() });
    }

    #[test]
    fn delay_only_with_after() {
        for spec in [
            "afterok:5+10",
            "afterany:5+1",
            "5+10",
            "aftercorr:1:5+2",
            "afterok:+3",
        ] {
            assert_eq!(
                err(spec),
                DependError::DelayNotAllowed { term: spec.into() },
                "{spec}"
            );
        }
    }

    #[test]
    fn malformed_delays_are_refused() {
        for (spec, text) in [
            ("after:5+", "5+"),
            ("after:5+x", "5+x"),
            ("after:5+-1", "5+-1"),
            ("after:5+1+2", "5+1+2"),
        ] {
            assert_eq!(
                err(spec),
                DependError::InvalidDelay { text: text.into() },
                "{spec}"
            );
        }
        // The id part of a delayed id is still checked.
        assert_eq!(
            err("after:x+5"),
            DependError::InvalidId { text: "x".into() }
        );
    }

    #[test]
    fn singleton_takes_no_ids() {
        assert_eq!(
            err("singleton:5"),
            DependError::SingletonWithIds {
                term: "singleton:5".into()
            }
        );
    }

    #[test]
    fn every_error_maps_to_slurms_message_and_names_its_text() {
        let cases = [
            (err(""), "empty dependency specification"),
            (err("1,2?3"), "\"1,2?3\""),
            (err("1,"), "\"1,\""),
            (err("nope:1"), "\"nope\""),
            (err("expand:1"), "\"expand\""),
            (err("afterok"), "\"afterok\""),
            (err("afterok:"), "\"afterok:\""),
            (err("afterok:x"), "\"x\""),
            (err("afterok:0"), "\"0\""),
            (err("afterok:1+2"), "\"afterok:1+2\""),
            (err("after:1+x"), "\"1+x\""),
            (err("singleton:1"), "\"singleton:1\""),
            (
                DependError::UnknownTarget {
                    target: target(44, Some(2)),
                },
                "job 44_2",
            ),
        ];
        for (e, needle) in cases {
            assert_eq!(e.slurm_message(), "Job dependency problem");
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
    }

    // ---- evaluation: one kind at a time ----

    #[test]
    fn after_waits_for_start_then_delay() {
        let mut dep = parse("after:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Pending)])]),
            Outcome::Waiting
        );
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
            Outcome::Satisfied
        );

        let mut delayed = parse("after:5+10");
        let running = vec![(5, vec![job(JobState::Running)])];
        // Started at 1000; ten minutes later is 1600.
        assert_eq!(
            eval_full(&mut delayed, &running, None, false, 1_599),
            Outcome::Waiting
        );
        assert_eq!(
            eval_full(&mut delayed, &running, None, false, 1_600),
            Outcome::Satisfied
        );
    }

    #[test]
    fn after_counts_a_cancelled_pending_job_as_started() {
        let cancelled = TargetJob {
            state: JobState::Cancelled,
            start_time: None,
            end_time: Some(3_000),
            array_task: None,
        };
        let mut dep = parse("after:5");
        assert_eq!(eval(&mut dep, &[(5, vec![cancelled])]), Outcome::Satisfied);
        // The delay counts from the cancellation.
        let mut delayed = parse("after:5+1");
        let table = [(5, vec![cancelled])];
        assert_eq!(
            eval_full(&mut delayed, &table, None, false, 3_059),
            Outcome::Waiting
        );
        assert_eq!(
            eval_full(&mut delayed, &table, None, false, 3_060),
            Outcome::Satisfied
        );
    }

    #[test]
    fn after_without_any_recorded_time_does_not_wait_for_a_delay() {
        let odd = TargetJob {
            state: JobState::Running,
            start_time: None,
            end_time: None,
            array_task: None,
        };
        let mut dep = parse("after:5+60");
        assert_eq!(
            eval_full(&mut dep, &[(5, vec![odd])], None, false, 0),
            Outcome::Satisfied
        );
    }

    #[test]
    fn after_on_array_needs_every_task_started_and_delays_from_the_latest() {
        let mut late = task(JobState::Running, 1);
        late.start_time = Some(5_000);
        let mut dep = parse("after:9+1");
        let some_pending = [(
            9,
            vec![task(JobState::Running, 0), task(JobState::Pending, 1)],
        )];
        assert_eq!(eval(&mut dep, &some_pending), Outcome::Waiting);
        let all_started = [(9, vec![task(JobState::Running, 0), late])];
        assert_eq!(
            eval_full(&mut dep, &all_started, None, false, 5_059),
            Outcome::Waiting
        );
        assert_eq!(
            eval_full(&mut dep, &all_started, None, false, 5_060),
            Outcome::Satisfied
        );
    }

    #[test]
    fn afterany_waits_for_every_end_of_any_kind() {
        let mut dep = parse("afterany:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Completing)])]),
            Outcome::Waiting
        );
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Failed)])]),
            Outcome::Satisfied
        );

        let mut array = parse("afterany:9");
        let table = [(
            9,
            vec![task(JobState::Timeout, 0), task(JobState::Running, 1)],
        )];
        assert_eq!(eval(&mut array, &table), Outcome::Waiting);
        let table = [(
            9,
            vec![task(JobState::Timeout, 0), task(JobState::Completed, 1)],
        )];
        assert_eq!(eval(&mut array, &table), Outcome::Satisfied);
    }

    #[test]
    fn afterok_needs_completed() {
        let mut dep = parse("afterok:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
            Outcome::Waiting
        );
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Completed)])]),
            Outcome::Satisfied
        );
    }

    #[test]
    fn afterok_fails_on_every_bad_end() {
        for state in [
            JobState::Failed,
            JobState::Cancelled,
            JobState::Timeout,
            JobState::NodeFail,
            JobState::OutOfMemory,
            JobState::BootFail,
            JobState::Deadline,
            JobState::Preempted,
        ] {
            let mut dep = parse("afterok:5");
            assert_eq!(
                eval(&mut dep, &[(5, vec![job(state)])]),
                Outcome::Never,
                "{state:?}"
            );
            assert_eq!(statuses(&dep), vec![TermStatus::Failed]);
        }
    }

    #[test]
    fn afterok_on_array_fails_as_soon_as_one_task_fails() {
        let mut dep = parse("afterok:9");
        let table = [(
            9,
            vec![task(JobState::Completed, 0), task(JobState::Running, 1)],
        )];
        assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
        let table = [(
            9,
            vec![task(JobState::Failed, 0), task(JobState::Running, 1)],
        )];
        assert_eq!(eval(&mut dep, &table), Outcome::Never);

        let mut ok = parse("afterok:9");
        let table = [(
            9,
            vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
        )];
        assert_eq!(eval(&mut ok, &table), Outcome::Satisfied);
    }

    #[test]
    fn afterok_on_one_array_task_ignores_the_others() {
        let table = [(
            9,
            vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
        )];
        let mut dep = parse("afterok:9_1");
        assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);
        let mut dep = parse("afterok:9_0");
        assert_eq!(eval(&mut dep, &table), Outcome::Never);
    }

    #[test]
    fn afternotok_needs_all_ended_and_one_bad() {
        let mut dep = parse("afternotok:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
            Outcome::Waiting
        );
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Timeout)])]),
            Outcome::Satisfied
        );

        let mut good_end = parse("afternotok:5");
        assert_eq!(
            eval(&mut good_end, &[(5, vec![job(JobState::Completed)])]),
            Outcome::Never
        );
        assert_eq!(statuses(&good_end), vec![TermStatus::Failed]);
    }

    #[test]
    fn afternotok_on_array_waits_for_every_task() {
        let mut dep = parse("afternotok:9");
        let table = [(
            9,
            vec![task(JobState::Failed, 0), task(JobState::Running, 1)],
        )];
        assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
        let table = [(
            9,
            vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
        )];
        assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

        let mut all_ok = parse("afternotok:9");
        let table = [(
            9,
            vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
        )];
        assert_eq!(eval(&mut all_ok, &table), Outcome::Never);
    }

    #[test]
    fn aftercorr_follows_the_task_with_the_same_index() {
        let table = [(
            9,
            vec![
                task(JobState::Failed, 0),
                task(JobState::Completed, 1),
                task(JobState::Running, 2),
            ],
        )];
        let mut one = parse("aftercorr:9");
        assert_eq!(
            eval_full(&mut one, &table, Some(1), false, 0),
            Outcome::Satisfied
        );
        let mut zero = parse("aftercorr:9");
        assert_eq!(
            eval_full(&mut zero, &table, Some(0), false, 0),
            Outcome::Never
        );
        let mut two = parse("aftercorr:9");
        assert_eq!(
            eval_full(&mut two, &table, Some(2), false, 0),
            Outcome::Waiting
        );
    }

    #[test]
    fn aftercorr_falls_back_to_afterok_over_all() {
        let mixed = [(
            9,
            vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
        )];
        // The dependent is no array task.
        let mut dep = parse("aftercorr:9");
        assert_eq!(eval_full(&mut dep, &mixed, None, false, 0), Outcome::Never);
        // No task with the dependent's index.
        let mut dep = parse("aftercorr:9");
        assert_eq!(
            eval_full(&mut dep, &mixed, Some(7), false, 0),
            Outcome::Never
        );
        let good = [(
            9,
            vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
        )];
        let mut dep = parse("aftercorr:9");
        assert_eq!(
            eval_full(&mut dep, &good, Some(7), false, 0),
            Outcome::Satisfied
        );
        // The target is a plain job.
        let plain = [(5, vec![job(JobState::Completed)])];
        let mut dep = parse("aftercorr:5");
        assert_eq!(
            eval_full(&mut dep, &plain, Some(3), false, 0),
            Outcome::Satisfied
        );
    }

    #[test]
    fn singleton_follows_the_callers_verdict() {
        let mut dep = parse("singleton");
        assert_eq!(eval_full(&mut dep, &[], None, false, 0), Outcome::Waiting);
        assert_eq!(statuses(&dep), vec![TermStatus::Unfulfilled]);
        assert_eq!(eval_full(&mut dep, &[], None, true, 0), Outcome::Satisfied);
        assert_eq!(statuses(&dep), vec![TermStatus::Fulfilled]);
    }

    #[test]
    fn unknown_targets_pass_for_after_and_afterany_but_fail_otherwise() {
        for (spec, outcome) in [
            ("after:77", Outcome::Satisfied),
            ("after:77+30", Outcome::Satisfied),
            ("afterany:77", Outcome::Satisfied),
            ("afterok:77", Outcome::Never),
            ("afternotok:77", Outcome::Never),
            ("aftercorr:77", Outcome::Never),
        ] {
            let mut dep = parse(spec);
            assert_eq!(
                eval_full(&mut dep, &[], Some(1), false, 0),
                outcome,
                "{spec}"
            );
        }
    }

    // ---- evaluation: combination and finality ----

    #[test]
    fn comma_needs_every_term_and_fails_on_any_failure() {
        let mut dep = parse("afterok:1,afterany:2");
        let table = [
            (1, vec![job(JobState::Completed)]),
            (2, vec![job(JobState::Running)]),
        ];
        assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
        assert_eq!(
            statuses(&dep),
            vec![TermStatus::Fulfilled, TermStatus::Unfulfilled]
        );
        let table = [(1, vec![]), (2, vec![job(JobState::Completed)])];
        assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

        let mut failing = parse("afterok:1,afterany:2");
        let table = [
            (1, vec![job(JobState::Failed)]),
            (2, vec![job(JobState::Running)]),
        ];
        assert_eq!(eval(&mut failing, &table), Outcome::Never);
    }

    #[test]
    fn question_mark_needs_one_term_and_fails_only_when_all_fail() {
        let mut dep = parse("afterok:1?afterok:2");
        let table = [
            (1, vec![job(JobState::Failed)]),
            (2, vec![job(JobState::Running)]),
        ];
        assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
        let table = [
            (1, vec![job(JobState::Failed)]),
            (2, vec![job(JobState::Completed)]),
        ];
        assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

        let mut all_fail = parse("afterok:1?afterok:2");
        let table = [
            (1, vec![job(JobState::Failed)]),
            (2, vec![job(JobState::Cancelled)]),
        ];
        assert_eq!(eval(&mut all_fail, &table), Outcome::Never);
    }

    #[test]
    fn question_mark_applies_to_ids_within_one_group() {
        let mut dep = parse("afterok:1:2?singleton");
        let table = [
            (1, vec![job(JobState::Running)]),
            (2, vec![job(JobState::Completed)]),
        ];
        assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);
    }

    #[test]
    fn failed_term_stays_failed_after_requeue() {
        let mut dep = parse("afterok:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Failed)])]),
            Outcome::Never
        );
        // Requeued and then completed: the term is not looked at again.
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Pending)])]),
            Outcome::Never
        );
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(JobState::Completed)])]),
            Outcome::Never
        );
        assert_eq!(statuses(&dep), vec![TermStatus::Failed]);
    }

    #[test]
    fn fulfilled_term_stays_fulfilled() {
        let mut dep = parse("after:5,singleton");
        let table = [(5, vec![job(JobState::Running)])];
        assert_eq!(
            eval_full(&mut dep, &table, None, false, 0),
            Outcome::Waiting
        );
        // The target was requeued and pends again; `after` already held.
        let table = [(5, vec![job(JobState::Pending)])];
        assert_eq!(
            eval_full(&mut dep, &table, None, true, 0),
            Outcome::Satisfied
        );
    }

    #[test]
    fn finished_terms_are_not_looked_up_again() {
        let mut dep = parse("afterok:5,afterany:6");
        let table = [
            (5, vec![job(JobState::Completed)]),
            (6, vec![job(JobState::Running)]),
        ];
        eval(&mut dep, &table);
        let asked = std::cell::RefCell::new(Vec::new());
        dep.evaluate(
            |t| {
                asked.borrow_mut().push(t.job_id);
                lookup_in(&table, t)
            },
            None,
            false,
            0,
        );
        assert_eq!(asked.into_inner(), vec![6]);
    }

    #[test]
    fn typed_term_without_target_is_refused_not_run() {
        let mut dep = Dependency {
            terms: vec![Term {
                kind: DepKind::AfterOk,
                target: None,
                delay_min: 0,
                status: TermStatus::Unfulfilled,
            }],
            any: false,
        };
        assert_eq!(eval(&mut dep, &[]), Outcome::Never);
    }

    #[test]
    fn empty_term_list_is_satisfied() {
        for any in [false, true] {
            let dep = Dependency {
                terms: Vec::new(),
                any,
            };
            assert_eq!(dep.outcome(), Outcome::Satisfied);
        }
    }

    // ---- helpers for the controller ----

    #[test]
    fn validate_targets_names_the_first_unknown_job() {
        let dep = parse("afterok:1,after:2_3,singleton,afterany:4");
        assert_eq!(dep.validate_targets(|_| true), Ok(()));
        assert_eq!(
            dep.validate_targets(|t| t.job_id != 2),
            Err(DependError::UnknownTarget {
                target: target(2, Some(3))
            })
        );
        assert_eq!(
            dep.validate_targets(|t| t.job_id != 4)
                .unwrap_err()
                .to_string(),
            "dependency on job 4, which does not exist"
        );
        // Singleton names no job, so nothing to check.
        assert_eq!(parse("singleton").validate_targets(|_| false), Ok(()));
    }

    #[test]
    fn target_ids_are_deduplicated_in_order() {
        let dep = parse("afterok:7:3_1,singleton,afterany:7_2,after:3,9");
        assert_eq!(dep.target_ids(), vec![7, 3, 9]);
        assert!(parse("singleton").target_ids().is_empty());
    }

    #[test]
    fn has_singleton() {
        assert!(parse("afterok:1,singleton").has_singleton());
        assert!(!parse("afterok:1").has_singleton());
    }

    // ---- display ----

    #[test]
    fn display_shows_unfulfilled_terms_as_slurm_does() {
        assert_eq!(
            parse("afterok:123,afterany:124_2").to_string(),
            "afterok:123(unfulfilled),afterany:124_2(unfulfilled)"
        );
        assert_eq!(parse("after:5+10").to_string(), "after:5+10(unfulfilled)");
        assert_eq!(parse("singleton").to_string(), "singleton(unfulfilled)");
        assert_eq!(
            parse("12:13").to_string(),
            "afterany:12(unfulfilled),afterany:13(unfulfilled)"
        );
        assert_eq!(
            parse("AFTEROK:1?aftercorr:2").to_string(),
            "afterok:1(unfulfilled)?aftercorr:2(unfulfilled)"
        );
    }

    #[test]
    fn display_drops_fulfilled_terms_and_marks_failed_ones() {
        let mut dep = parse("afterok:1,afterany:124_2,afterok:3");
        let table = [
            (1, vec![job(JobState::Completed)]),
            (124, vec![task(JobState::Running, 2)]),
            (3, vec![job(JobState::Failed)]),
        ];
        eval(&mut dep, &table);
        assert_eq!(
            dep.to_string(),
            "afterany:124_2(unfulfilled),afterok:3(failed)"
        );
    }

    #[test]
    fn display_is_null_when_nothing_is_left() {
        let mut dep = parse("afterany:1,singleton");
        assert_eq!(eval_full(&mut dep, &[], None, true, 0), Outcome::Satisfied);
        assert_eq!(dep.to_string(), "(null)");
    }
}
