//! Association and QOS run limits as a [`StartGate`]: what running jobs
//! hold, per user association (and every account above it), per QOS and
//! per QOS and user, and the limit a pending job would pass, with Slurm's
//! reason and precedence: the job's QOS first (a limit it sets replaces
//! the association's of the same kind), then the user association and
//! the accounts above it; `Max*` limits come from the nearest level that
//! sets them, `Grp*` limits apply at every level up to `root`.
//!
//! Built from the running jobs for each pass, so the counts are right
//! after a restart; each start in the pass is added as it happens.
//! `GrpTRESMins` and `GrpWall` ([`super::tres_mins`]) read the decayed
//! usage book as it stood at the pass: the used minutes of the
//! associations and QOS that set such a limit are taken out once per
//! pass, so each job costs a map lookup per level.

use std::collections::HashMap;

use super::assoc::{held, requested, JobTres};
use super::tres_mins::{self, MinsUse, NO_LIMIT_MINS};
use crate::model::assoc::reason::{LimitReason, Scope, TresKind, TresLimit};
use crate::model::assoc::{Assoc, AssocDb, AssocKey, Qos, Tres};
use crate::model::job::{Allocation, JobRecord};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::sched::gate::StartGate;
use crate::state::usage::{GroupUse, UsageBook};

/// Running jobs and what they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub jobs: u32,
    pub tres: JobTres,
    /// TRES-minutes the running jobs are still committed to (TRES × the
    /// minutes left to their time limits × their QOS's UsageFactor):
    /// what `safe` adds to the used minutes.
    pub committed: JobTres,
}

impl Usage {
    fn add(&mut self, t: &JobTres, committed: &JobTres) {
        self.jobs += 1;
        for (k, v) in t {
            *self.tres.entry(k.clone()).or_default() += v;
        }
        for (k, v) in committed {
            let c = self.committed.entry(k.clone()).or_default();
            *c = c.saturating_add(*v);
        }
    }
}

/// What the minutes limits read for one pass.
struct Minutes {
    now: UnixTime,
    safe: bool,
    /// Used minutes of the associations (and QOS) that set a minutes
    /// limit, as the usage book had them.
    assoc: HashMap<AssocKey, MinsUse>,
    qos: HashMap<String, MinsUse>,
}

/// The QOS whose limits bind a job of QOS `own` in a partition with
/// `QOS=part`, in the order they are checked: the partition's, then the
/// job's (the other way round when the job's has `OverPartQOS`).
pub fn qos_order<'d>(db: &'d AssocDb, own: Option<&str>, part: Option<&str>) -> Vec<&'d Qos> {
    let own = own.and_then(|q| db.qos.get(q));
    let part = part
        .and_then(|q| db.qos.get(q))
        .filter(|p| own.is_none_or(|o| o.name != p.name));
    match (own, part) {
        (Some(o), Some(p)) if o.has(crate::model::assoc::QosFlag::OverPartQOS) => vec![o, p],
        (o, p) => p.into_iter().chain(o).collect(),
    }
}

/// The usage book's key for an association (see `ShareTree::key`).
pub fn usage_key(k: &AssocKey) -> String {
    if k.user.is_empty() {
        k.account.clone()
    } else {
        format!("{}/{}", k.account, k.user)
    }
}

/// The used minutes the usage book holds for a group (`None`: none).
pub fn mins_use(g: Option<&GroupUse>) -> MinsUse {
    let Some(g) = g else {
        return MinsUse::default();
    };
    MinsUse {
        used: g.tres.keys().map(|k| (k.clone(), g.tres_mins(k))).collect(),
        wall_used: g.wall_mins(),
    }
}

/// The gate for one pass.
pub struct AssocGate<'a> {
    db: &'a AssocDb,
    cluster: &'a str,
    /// Partition name → its `QOS=`.
    part_qos: HashMap<&'a str, &'a str>,
    /// `AccountingStorageEnforce` includes `limits`.
    on: bool,
    pub assoc: HashMap<AssocKey, Usage>,
    pub qos: HashMap<String, Usage>,
    pub qos_user: HashMap<(String, String), Usage>,
    minutes: Option<Minutes>,
}

impl<'a> AssocGate<'a> {
    /// Count `running` jobs (those with an account) against the limits.
    pub fn new<'r>(
        db: &'a AssocDb,
        cluster: &'a str,
        on: bool,
        running: impl Iterator<Item = &'r JobRecord>,
    ) -> AssocGate<'a> {
        Self::with_partitions(db, cluster, &[], on, running)
    }

    /// As [`new`](Self::new), with the partitions' `QOS=` (whose limits
    /// apply to every job in the partition, before the job's own QOS's).
    pub fn with_partitions<'r>(
        db: &'a AssocDb,
        cluster: &'a str,
        partitions: &'a [crate::config::PartitionConf],
        on: bool,
        running: impl Iterator<Item = &'r JobRecord>,
    ) -> AssocGate<'a> {
        let part_qos = partitions
            .iter()
            .filter_map(|p| p.access.qos.as_deref().map(|q| (p.name.as_str(), q)))
            .collect();
        // Nothing to count when no limit could hold a job.
        let on = on && db.has_run_limits();
        let mut g = AssocGate {
            db,
            cluster,
            part_qos,
            on,
            assoc: HashMap::new(),
            qos: HashMap::new(),
            qos_user: HashMap::new(),
            minutes: None,
        };
        if on {
            for j in running {
                if let Some(a) = &j.alloc {
                    g.count(j, &held(a));
                }
            }
        }
        g
    }

    /// As [`with_partitions`](Self::with_partitions), with the usage
    /// `GrpTRESMins` and `GrpWall` are compared with (`safe`:
    /// `AccountingStorageEnforce=safe`).
    #[allow(clippy::too_many_arguments)]
    pub fn with_usage<'r>(
        db: &'a AssocDb,
        cluster: &'a str,
        partitions: &'a [crate::config::PartitionConf],
        on: bool,
        book: &UsageBook,
        safe: bool,
        now: UnixTime,
        running: impl Iterator<Item = &'r JobRecord>,
    ) -> AssocGate<'a> {
        let mut g = Self::with_partitions(db, cluster, partitions, on, std::iter::empty());
        if !g.on {
            return g;
        }
        let mut m = Minutes {
            now,
            safe,
            assoc: HashMap::new(),
            qos: HashMap::new(),
        };
        for (k, a) in &db.assocs {
            if k.cluster == cluster
                && (!a.limits.grp_tres_mins.is_empty() || a.limits.grp_wall.is_some())
            {
                m.assoc
                    .insert(k.clone(), mins_use(book.assoc_use.get(&usage_key(k))));
            }
        }
        for (name, q) in &db.qos {
            if !q.grp_tres_mins.is_empty() || q.grp_wall.is_some() {
                m.qos.insert(name.clone(), mins_use(book.qos_use.get(name)));
            }
        }
        if !m.assoc.is_empty() || !m.qos.is_empty() {
            g.minutes = Some(m);
        }
        for j in running {
            if let Some(a) = &j.alloc {
                g.count(j, &held(a));
            }
        }
        g
    }

    /// TRES-minutes job `j` holding `t` is still committed to: to its
    /// time limit from its start (or from now, starting now).
    fn committed(&self, j: &JobRecord, t: &JobTres) -> JobTres {
        let Some(m) = &self.minutes else {
            return JobTres::new();
        };
        let left = match j.time_limit_min {
            Some(l) => {
                // Time suspended does not count: the limit is pushed back by it.
                let stopped = j
                    .suspend
                    .suspended_secs(j.state == crate::model::job::JobState::Suspended, m.now);
                let ran = j.start_time.map_or(0, |s| {
                    ((m.now - s).max(0) as u64).saturating_sub(stopped) / 60
                });
                u64::from(l).saturating_sub(ran)
            }
            None => NO_LIMIT_MINS,
        };
        let factor = j
            .submit
            .qos
            .as_deref()
            .and_then(|q| self.db.qos.get(q))
            .map_or(1.0, |q| q.usage_factor.max(0.0));
        let mins = (left as f64 * factor) as u64;
        tres_mins::times(t, mins)
    }

    fn count(&mut self, j: &JobRecord, t: &JobTres) {
        let Some(acct) = &j.submit.account else {
            return;
        };
        let c = self.committed(j, t);
        self.assoc
            .entry(AssocKey::user(self.cluster, acct, &j.submit.user))
            .or_default()
            .add(t, &c);
        for (k, _) in self.db.ancestors(self.cluster, acct) {
            self.assoc.entry(k.clone()).or_default().add(t, &c);
        }
        let part = self.part_qos.get(j.partition.as_str()).copied();
        let job_qos = j.submit.qos.as_deref();
        let both = [job_qos, part.filter(|p| Some(*p) != job_qos)];
        for q in both.into_iter().flatten() {
            self.qos.entry(q.to_string()).or_default().add(t, &c);
            self.qos_user
                .entry((q.to_string(), j.submit.user.clone()))
                .or_default()
                .add(t, &c);
        }
    }

    /// The QOS whose limits bind `job`, in the order they are checked.
    fn qos_of(&self, job: &JobRecord) -> Vec<&'a Qos> {
        let part = self.part_qos.get(job.partition.as_str()).copied();
        qos_order(self.db, job.submit.qos.as_deref(), part)
    }

    /// Why `job` may not start now under its QOS and association limits.
    pub fn why(&self, job: &JobRecord) -> Option<LimitReason> {
        let acct = job.submit.account.as_deref()?;
        let key = AssocKey::user(self.cluster, acct, &job.submit.user);
        let own = self.db.assocs.get(&key)?;
        let chain: Vec<(&AssocKey, &Assoc)> = std::iter::once((&key, own))
            .chain(self.db.ancestors(self.cluster, acct))
            .collect();
        let req = requested(&job.submit);
        let qoses = self.qos_of(job);
        let empty = Usage::default();
        for q in &qoses {
            let qu = self.qos.get(&q.name).unwrap_or(&empty);
            let quu = self
                .qos_user
                .get(&(q.name.clone(), job.submit.user.clone()))
                .unwrap_or(&empty);
            if let Some(r) = qos_reason(q, job, &req, qu, quu) {
                return Some(r);
            }
        }
        if let Some(r) = self.qos_minutes(job, &qoses, &req) {
            return Some(r);
        }
        let qos_sets = |f: &dyn Fn(&Qos) -> bool| qoses.iter().any(|q| f(q));
        // Per-job limits: the nearest level that sets each, unless the
        // QOS sets it.
        let nearest = |f: &dyn Fn(&Assoc) -> Option<u32>| chain.iter().find_map(|(_, a)| f(a));
        let qos_has_wall = qos_sets(&|q| q.max_wall.is_some());
        if let (false, Some(m), Some(t)) = (
            qos_has_wall,
            nearest(&|a| a.limits.max_wall),
            job.time_limit_min,
        ) {
            if t > m {
                return Some(LimitReason::MaxWall(Scope::Assoc));
            }
        }
        let per_job = merged(&chain, |a| &a.limits.max_tres_per_job);
        let qos_pj: Vec<&Tres> = qoses.iter().map(|q| &q.max_tres_per_job).collect();
        if let Some(k) = over_each(&per_job, &req, 1, &qos_pj) {
            return Some(LimitReason::Tres(Scope::Assoc, TresLimit::MaxPerJob, k));
        }
        let per_node = merged(&chain, |a| &a.limits.max_tres_per_node);
        let nodes = req.get("node").copied().unwrap_or(1).max(1);
        let qos_pn: Vec<&Tres> = qoses.iter().map(|q| &q.max_tres_per_node).collect();
        if let Some(k) = over_each(&per_node, &req, nodes, &qos_pn) {
            return Some(LimitReason::Tres(Scope::Assoc, TresLimit::MaxPerNode, k));
        }
        let qos_max_jobs = qos_sets(&|q| q.max_jobs_per_user.is_some());
        if let (false, Some(l)) = (qos_max_jobs, nearest(&|a| a.limits.max_jobs)) {
            if self.assoc.get(&key).map_or(0, |u| u.jobs) >= l {
                return Some(LimitReason::AssocMaxJobs);
            }
        }
        // Group limits at every level, the user's association up to root.
        let qos_grp_jobs = qos_sets(&|q| q.grp_jobs.is_some());
        let qos_grp: Vec<&Tres> = qoses.iter().map(|q| &q.grp_tres).collect();
        for (k, a) in &chain {
            let used = self.assoc.get(*k).unwrap_or(&empty);
            if let (false, Some(l)) = (qos_grp_jobs, a.limits.grp_jobs) {
                if used.jobs >= l {
                    return Some(LimitReason::GrpJobs(Scope::Assoc));
                }
            }
            if let Some(r) = self.assoc_minutes(k, a, used, job, &req, &qoses) {
                return Some(r);
            }
            if let Some(kind) = over_grp(&a.limits.grp_tres, used, &req, &qos_grp) {
                return Some(LimitReason::Tres(Scope::Assoc, TresLimit::Grp, kind));
            }
        }
        None
    }
}

impl AssocGate<'_> {
    /// The job's time limit in minutes (Slurm's INFINITE without one).
    fn limit_mins(job: &JobRecord) -> u64 {
        job.time_limit_min.map_or(NO_LIMIT_MINS, u64::from)
    }

    /// A job of a QOS with `UsageFactor=0` adds no usage, so Slurm lets
    /// it past used and committed TRES-minutes (only its own size counts).
    fn free(&self, job: &JobRecord) -> bool {
        job.submit
            .qos
            .as_deref()
            .and_then(|q| self.db.qos.get(q))
            .is_some_and(|q| q.usage_factor == 0.0)
    }

    /// `GrpWall` and `GrpTRESMins` of the job's QOS, the first QOS to set
    /// each taking it.
    fn qos_minutes(&self, job: &JobRecord, qoses: &[&Qos], req: &JobTres) -> Option<LimitReason> {
        let m = self.minutes.as_ref()?;
        let limit = Self::limit_mins(job);
        let free = self.free(job);
        let mut wall_set = false;
        let mut seen: Vec<&Tres> = Vec::new();
        for q in qoses {
            let Some(u) = m.qos.get(&q.name) else {
                continue;
            };
            if let (false, Some(w)) = (wall_set, q.grp_wall) {
                wall_set = true;
                if tres_mins::wall_blocks(w, u.wall_used, limit, m.safe) {
                    return Some(LimitReason::GrpWall(Scope::Qos));
                }
            }
            let empty = JobTres::new();
            let (used, committed) = if free {
                (&empty, &empty)
            } else {
                let c = self.qos.get(&q.name).map_or(&empty, |x| &x.committed);
                (&u.used, c)
            };
            let lim = &q.grp_tres_mins;
            if let Some((kind, _)) =
                tres_mins::check_tres_mins(lim, &seen, used, committed, req, limit, m.safe)
            {
                return Some(LimitReason::GrpTresMins(Scope::Qos, kind));
            }
            seen.push(&q.grp_tres_mins);
        }
        None
    }

    /// One association level's `GrpWall` and `GrpTRESMins` (a QOS that
    /// sets the same limit replaces it).
    fn assoc_minutes(
        &self,
        k: &AssocKey,
        a: &Assoc,
        used: &Usage,
        job: &JobRecord,
        req: &JobTres,
        qoses: &[&Qos],
    ) -> Option<LimitReason> {
        let m = self.minutes.as_ref()?;
        let u = m.assoc.get(k)?;
        let limit = Self::limit_mins(job);
        let qos_wall = qoses.iter().any(|q| q.grp_wall.is_some());
        if let (false, Some(w)) = (qos_wall, a.limits.grp_wall) {
            if tres_mins::wall_blocks(w, u.wall_used, limit, m.safe) {
                return Some(LimitReason::GrpWall(Scope::Assoc));
            }
        }
        if a.limits.grp_tres_mins.is_empty() {
            return None;
        }
        let skip: Vec<&Tres> = qoses.iter().map(|q| &q.grp_tres_mins).collect();
        let lim = &a.limits.grp_tres_mins;
        let empty = JobTres::new();
        let (have, c) = if self.free(job) {
            (&empty, &empty)
        } else {
            (&u.used, &used.committed)
        };
        tres_mins::check_tres_mins(lim, &skip, have, c, req, limit, m.safe)
            .map(|(kind, _)| LimitReason::GrpTresMins(Scope::Assoc, kind))
    }
}

/// A QOS's own limits on `job`.
fn qos_reason(
    q: &Qos,
    job: &JobRecord,
    req: &JobTres,
    qu: &Usage,
    quu: &Usage,
) -> Option<LimitReason> {
    if let (Some(m), Some(t)) = (q.max_wall, job.time_limit_min) {
        if t > m {
            return Some(LimitReason::MaxWall(Scope::Qos));
        }
    }
    if let Some(k) = over_each(&q.max_tres_per_job, req, 1, &[]) {
        return Some(LimitReason::Tres(Scope::Qos, TresLimit::MaxPerJob, k));
    }
    let nodes = req.get("node").copied().unwrap_or(1).max(1);
    if let Some(k) = over_each(&q.max_tres_per_node, req, nodes, &[]) {
        return Some(LimitReason::Tres(Scope::Qos, TresLimit::MaxPerNode, k));
    }
    if q.grp_jobs.is_some_and(|l| qu.jobs >= l) {
        return Some(LimitReason::GrpJobs(Scope::Qos));
    }
    if q.max_jobs_per_user.is_some_and(|l| quu.jobs >= l) {
        return Some(LimitReason::QosMaxJobsPerUser);
    }
    if let Some(k) = over_grp(&q.grp_tres, qu, req, &[]) {
        return Some(LimitReason::Tres(Scope::Qos, TresLimit::Grp, k));
    }
    if let Some(k) = over_grp(&q.max_tres_per_user, quu, req, &[]) {
        return Some(LimitReason::Tres(Scope::Qos, TresLimit::MaxPerUser, k));
    }
    None
}

/// Each TRES's limit from the nearest level of `chain` that sets it.
fn merged<'c>(chain: &'c [(&AssocKey, &Assoc)], f: impl Fn(&'c Assoc) -> &'c Tres) -> Tres {
    let mut out = Tres::default();
    for (_, a) in chain.iter().rev() {
        for (k, v) in &f(a).0 {
            out.0.insert(k.clone(), *v);
        }
    }
    out
}

/// The first TRES whose per-job (or, with `per > 1`, per-node) request
/// passes its limit, skipping TRES the QOS limits instead.
fn over_each(limits: &Tres, req: &JobTres, per: u64, skip: &[&Tres]) -> Option<TresKind> {
    limits
        .0
        .iter()
        .filter(|(k, _)| skip.iter().all(|s| s.get(k).is_none()))
        .find(|(k, lim)| req.get(*k).is_some_and(|v| v.div_ceil(per) > **lim))
        .map(|(k, _)| TresKind::of(k))
}

/// The first TRES whose group use plus the request passes its limit.
fn over_grp(limits: &Tres, used: &Usage, req: &JobTres, skip: &[&Tres]) -> Option<TresKind> {
    limits
        .0
        .iter()
        .filter(|(k, _)| skip.iter().all(|s| s.get(k).is_none()))
        .find(|(k, lim)| {
            let have = used.tres.get(*k).copied().unwrap_or(0);
            have.saturating_add(req.get(*k).copied().unwrap_or(0)) > **lim
        })
        .map(|(k, _)| TresKind::of(k))
}

impl StartGate for AssocGate<'_> {
    fn blocked(&self, job: &JobRecord, _now: UnixTime) -> Option<JobReason> {
        if !self.on {
            return None;
        }
        self.why(job).map(JobReason::Limit)
    }

    fn started(&mut self, job: &JobRecord, alloc: &Allocation, _now: UnixTime) {
        if self.on {
            self.count(job, &held(alloc));
        }
    }
}
