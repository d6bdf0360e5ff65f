//! What a scheduling pass asks policy before it starts a job: the seam
//! between the passes (`table::schedule`, backfill) and the rules that can
//! hold a job back although resources are free (association and QOS
//! limits, reservations, licenses). The passes stay ignorant of the rules;
//! each rule keeps its own running counts and is told of every start.

use std::sync::Arc;

use crate::model::job::{Allocation, JobRecord};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched::table::PartitionView;

/// Where and when a job may run in a plan for a later start (the backfill
/// pass), as policy sees it: unlike [`StartGate::restrict`], which answers
/// for a start now, this holds for every start time, the time-bound parts
/// being the set-aside windows ([`StartGate::set_aside`]) the job must keep
/// off and the bounds on its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The nodes it may ever use, in preference order (`None`: all of its
    /// partition's); the pass keeps those of its partition.
    pub nodes: Option<Arc<[u32]>>,
    /// Nodes it would rather have, tried first (a FLEX reservation's own).
    pub prefer: Option<Arc<[u32]>>,
    /// Its start comes no sooner than this (its reservation's start).
    pub not_before: Option<UnixTime>,
    /// Nor later than this (the last second of its reservation).
    pub not_after: Option<UnixTime>,
    /// Which set-aside windows leave it alone.
    pub exempt: Exempt,
}

impl Scope {
    /// Nodes only, at any time (what a `restrict` answer means).
    pub fn nodes(nodes: Vec<u32>) -> Scope {
        Scope {
            nodes: Some(nodes.into()),
            ..Scope::default()
        }
    }
}

/// Which set-aside windows do not bind a job (Slurm's `job_test_resv`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Exempt {
    /// Every window binds: a job outside every reservation.
    #[default]
    Nothing,
    /// All but its own reservation's windows bind.
    Own(u32),
    /// Only other maintenance windows bind: the job of an `OVERLAP`
    /// reservation.
    AllButMaint(u32),
    /// None binds: the job of a `MAINT` reservation.
    Everything,
}

impl Exempt {
    /// Whether window `id` (a maintenance one if `maint`) binds the job.
    pub fn binds(self, id: u32, maint: bool) -> bool {
        match self {
            Exempt::Nothing => true,
            Exempt::Own(own) => id != own,
            Exempt::AllButMaint(own) => id != own && maint,
            Exempt::Everything => false,
        }
    }
}

/// Nodes set aside over a window of time `[start, end)` (one occurrence of
/// an advance reservation): a plan keeps every job the window binds off
/// them for that time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aside {
    /// The rule's own id for what set them aside (what [`Exempt`] names).
    pub id: u32,
    pub start: UnixTime,
    pub end: UnixTime,
    /// Ranks, ascending.
    pub ranks: Arc<[u32]>,
    /// A maintenance window (binds even an `OVERLAP` reservation's jobs).
    pub maint: bool,
}

/// One rule consulted for each job a pass considers.
pub trait StartGate {
    /// Why `job` may not start at `now` whatever nodes are free (a limit
    /// it would pass, a license short), or `None`.
    fn blocked(&self, job: &JobRecord, now: UnixTime) -> Option<JobReason> {
        let _ = (job, now);
        None
    }

    /// The nodes `job` may use at `now`, out of its partition's
    /// `candidates` (ranks, in order): `None` keeps them all; `Err` holds
    /// the job with a reason (its reservation is not active yet, ...).
    fn restrict(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        now: UnixTime,
    ) -> Option<Result<Vec<u32>, JobReason>> {
        let _ = (job, candidates, now);
        None
    }

    /// `restrict` over partition `part`'s own nodes: the same answer,
    /// shared, so a rule may hand every job of the partition that gets the
    /// same answer one list (the passes ask this way).
    fn restrict_in(
        &self,
        job: &JobRecord,
        part: &PartitionView<'_>,
        now: UnixTime,
    ) -> Option<Result<Arc<[u32]>, JobReason>> {
        self.restrict(job, part.ranks, now)
            .map(|r| r.map(Arc::from))
    }

    /// `job` starts now with `alloc`: count it against the rule's limits,
    /// so the next job in the same pass sees it.
    fn started(&mut self, job: &JobRecord, alloc: &Allocation, now: UnixTime) {
        let _ = (job, alloc, now);
    }

    /// Where and when `job` may run in a plan for a later start, out of
    /// its partition's `candidates`. `None`: anywhere, any time; `Err`:
    /// nowhere (with the reason). By default what `restrict` says now,
    /// taken to hold at every time.
    fn scope(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        now: UnixTime,
    ) -> Option<Result<Scope, JobReason>> {
        self.restrict(job, candidates, now)
            .map(|r| r.map(Scope::nodes))
    }

    /// The windows this rule sets nodes aside for, from `now` through the
    /// first that starts at or after `until` (a plan starts jobs by then).
    fn set_aside(&self, now: UnixTime, until: UnixTime) -> Vec<Aside> {
        let _ = (now, until);
        Vec::new()
    }
}

/// No rules: every job may start where its partition allows.
pub struct NoGate;

impl StartGate for NoGate {}

/// Several rules in turn: the first to block or restrict decides the
/// reason; restrictions narrow one after another.
pub struct Gates<'a>(pub Vec<&'a mut dyn StartGate>);

impl StartGate for Gates<'_> {
    fn blocked(&self, job: &JobRecord, now: UnixTime) -> Option<JobReason> {
        self.0.iter().find_map(|g| g.blocked(job, now))
    }

    fn restrict(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        now: UnixTime,
    ) -> Option<Result<Vec<u32>, JobReason>> {
        let mut narrowed: Option<Vec<u32>> = None;
        for g in &self.0 {
            let current = narrowed.as_deref().unwrap_or(candidates);
            match g.restrict(job, current, now) {
                None => {}
                Some(Err(r)) => return Some(Err(r)),
                Some(Ok(v)) => narrowed = Some(v),
            }
        }
        narrowed.map(Ok)
    }

    fn restrict_in(
        &self,
        job: &JobRecord,
        part: &PartitionView<'_>,
        now: UnixTime,
    ) -> Option<Result<Arc<[u32]>, JobReason>> {
        let mut narrowed: Option<Arc<[u32]>> = None;
        for g in &self.0 {
            let r = match &narrowed {
                None => g.restrict_in(job, part, now),
                Some(current) => g.restrict(job, current, now).map(|r| r.map(Arc::from)),
            };
            match r {
                None => {}
                Some(Err(r)) => return Some(Err(r)),
                Some(Ok(v)) => narrowed = Some(v),
            }
        }
        narrowed.map(Ok)
    }

    fn started(&mut self, job: &JobRecord, alloc: &Allocation, now: UnixTime) {
        for g in &mut self.0 {
            g.started(job, alloc, now);
        }
    }

    fn scope(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        now: UnixTime,
    ) -> Option<Result<Scope, JobReason>> {
        let mut merged: Option<Scope> = None;
        for g in &self.0 {
            let current = merged
                .as_ref()
                .and_then(|m| m.nodes.as_deref())
                .unwrap_or(candidates);
            let s = match g.scope(job, current, now) {
                None => continue,
                Some(Err(r)) => return Some(Err(r)),
                Some(Ok(s)) => s,
            };
            let m = merged.get_or_insert_with(Scope::default);
            m.nodes = match (m.nodes.take(), s.nodes) {
                // Both narrow: what both allow, in the first one's order.
                (Some(a), Some(b)) => {
                    let b: std::collections::HashSet<u32> = b.iter().copied().collect();
                    Some(a.iter().copied().filter(|r| b.contains(r)).collect())
                }
                (a, b) => a.or(b),
            };
            m.prefer = m.prefer.take().or(s.prefer);
            m.not_before = m.not_before.max(s.not_before);
            m.not_after = match (m.not_after, s.not_after) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if s.exempt != Exempt::Nothing {
                m.exempt = s.exempt;
            }
        }
        merged.map(Ok)
    }

    fn set_aside(&self, now: UnixTime, until: UnixTime) -> Vec<Aside> {
        self.0
            .iter()
            .flat_map(|g| g.set_aside(now, until))
            .collect()
    }
}
