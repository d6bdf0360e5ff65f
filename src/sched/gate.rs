//! What a scheduling pass asks policy before it starts a job: the seam
//! between the passes (`table::schedule`, backfill) and the rules that can
//! hold a job back although resources are free (association and QOS
//! limits, reservations, licenses). The passes stay ignorant of the rules;
//! each rule keeps its own running counts and is told of every start.

use crate::model::job::{Allocation, JobRecord};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;

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

    /// `job` starts now with `alloc`: count it against the rule's limits,
    /// so the next job in the same pass sees it.
    fn started(&mut self, job: &JobRecord, alloc: &Allocation, now: UnixTime) {
        let _ = (job, alloc, now);
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

    fn started(&mut self, job: &JobRecord, alloc: &Allocation, now: UnixTime) {
        for g in &mut self.0 {
            g.started(job, alloc, now);
        }
    }
}
