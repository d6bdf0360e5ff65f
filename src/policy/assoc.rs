//! Associations and QOS at submit: which account and QOS a job runs
//! under (the user's default account, the association's DefaultQOS, else
//! `normal`), whether it may (`AccountingStorageEnforce=associations,qos`),
//! and the limits that refuse at submit (`MaxSubmitJobs`,
//! `GrpSubmitJobs`, QOS `MaxSubmitJobsPerUser`, and per-job limits of a
//! QOS with `DenyOnLimit`). Pure: the core passes the database and counts.

use std::collections::BTreeMap;

use crate::config::AcctEnforce;
use crate::model::assoc::{AssocDb, AssocKey, Qos, QosFlag, NORMAL_QOS};
use crate::model::job::{Allocation, JobRecord, JobSubmit};

/// Slurm's `ESLURM_INVALID_ACCOUNT`.
pub const INVALID_ACCOUNT: &str = "Invalid account or account/partition combination specified";
/// Slurm's `ESLURM_INVALID_QOS`.
pub const INVALID_QOS: &str = "Invalid qos specification";
/// Slurm's `ESLURM_ACCOUNTING_POLICY`.
pub const POLICY: &str =
    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)";

/// Why a submission is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{INVALID_ACCOUNT}")]
    InvalidAccount,
    #[error("{INVALID_QOS}")]
    InvalidQos,
    #[error("{POLICY}")]
    Policy,
}

/// The account and QOS a submission runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub account: Option<String>,
    pub qos: Option<String>,
    /// The user association the job is charged to, when there is one.
    pub assoc: Option<AssocKey>,
}

/// Resolve `-A`/`-q` of `user`'s job against the database.
pub fn resolve(
    db: &AssocDb,
    cluster: &str,
    enforce: AcctEnforce,
    user: &str,
    account: Option<&str>,
    qos: Option<&str>,
) -> Result<Resolved, Refusal> {
    let account = account
        .map(str::to_string)
        .or_else(|| db.users.get(user).map(|u| u.default_account.clone()));
    let key = account
        .as_deref()
        .map(|a| AssocKey::user(cluster, a, user))
        .filter(|k| db.assocs.contains_key(k));
    if enforce.associations && key.is_none() {
        return Err(Refusal::InvalidAccount);
    }
    let allowed = key.as_ref().map(|k| db.allowed_qos(k));
    let qos = match qos {
        Some(q) => {
            if !db.qos.contains_key(q) {
                return Err(Refusal::InvalidQos);
            }
            if enforce.qos && allowed.as_ref().is_some_and(|a| !a.contains(q)) {
                return Err(Refusal::InvalidQos);
            }
            q.to_string()
        }
        None => {
            let own = key.as_ref().and_then(|k| db.default_qos(k));
            let single = allowed
                .as_ref()
                .filter(|a| a.len() == 1)
                .and_then(|a| a.iter().next().cloned());
            let q = own.or(single).unwrap_or_else(|| NORMAL_QOS.to_string());
            if enforce.qos && allowed.as_ref().is_some_and(|a| !a.contains(&q)) {
                return Err(Refusal::InvalidQos);
            }
            q
        }
    };
    Ok(Resolved {
        account,
        qos: Some(qos),
        assoc: key,
    })
}

/// A job's TRES: what it asks for while pending, what it holds once
/// running. Memory in MiB; `billing` is the CPU count (no
/// TRESBillingWeights yet).
pub type JobTres = BTreeMap<String, u64>;

/// What a pending job asks for, as Slurm counts it for limits.
pub fn requested(s: &JobSubmit) -> JobTres {
    let nodes = s.min_nodes.unwrap_or(1).max(1);
    let tasks = s
        .ntasks
        .or(s.ntasks_per_node.map(|t| t.saturating_mul(nodes)))
        .unwrap_or(nodes)
        .max(1);
    let cpus = u64::from(tasks) * u64::from(s.cpus_per_task.unwrap_or(1).max(1));
    let cpus = cpus.max(u64::from(nodes));
    let mem = match (s.mem_per_node_mb, s.mem_per_cpu_mb) {
        (Some(m), _) => m.saturating_mul(u64::from(nodes)),
        (None, Some(m)) => m.saturating_mul(cpus),
        _ => 0,
    };
    let mut t = JobTres::new();
    t.insert("cpu".into(), cpus);
    t.insert("node".into(), u64::from(nodes));
    t.insert("billing".into(), cpus);
    if mem > 0 {
        t.insert("mem".into(), mem);
    }
    for (name, n) in crate::model::tres::gres_requested(&s.resources, nodes, tasks) {
        t.insert(format!("gres/{name}"), n);
    }
    t
}

/// What a running job holds.
pub fn held(a: &Allocation) -> JobTres {
    let mut t = JobTres::new();
    let cpus = u64::from(a.total_cpus());
    t.insert("cpu".into(), cpus);
    t.insert("node".into(), a.ranks.len() as u64);
    t.insert("billing".into(), cpus);
    t.insert("mem".into(), a.mem_mb.saturating_mul(a.ranks.len() as u64));
    for (name, n) in crate::model::tres::gres_totals(&a.gres) {
        t.insert(format!("gres/{name}"), n);
    }
    t
}

/// The TRES a job counts for: held if running, else asked for.
pub fn job_tres(j: &JobRecord) -> JobTres {
    match &j.alloc {
        Some(a) => held(a),
        None => requested(&j.submit),
    }
}

/// A QOS's per-job limits (`MaxWall`, `MaxTRESPerJob`, `MaxTRESPerNode`)
/// that `tres` and `time_limit_min` exceed, if any.
pub fn over_qos_job_limits(q: &Qos, tres: &JobTres, time_limit_min: Option<u32>) -> bool {
    let nodes = tres.get("node").copied().unwrap_or(1).max(1);
    let wall = matches!((q.max_wall, time_limit_min), (Some(m), Some(t)) if t > m);
    wall || q
        .max_tres_per_job
        .0
        .iter()
        .any(|(k, lim)| tres.get(k).is_some_and(|v| v > lim))
        || q.max_tres_per_node
            .0
            .iter()
            .any(|(k, lim)| tres.get(k).is_some_and(|v| v.div_ceil(nodes) > *lim))
}

/// Unfinished (pending or running) jobs counted for the submit limits.
#[derive(Debug, Default)]
pub struct SubmitCounts {
    /// Per association (user associations and every account above them).
    pub assoc: BTreeMap<AssocKey, u32>,
    pub qos: BTreeMap<String, u32>,
    pub qos_user: BTreeMap<(String, String), u32>,
}

impl SubmitCounts {
    /// Count `jobs` (each unfinished job once).
    pub fn of<'a>(
        db: &AssocDb,
        cluster: &str,
        jobs: impl Iterator<Item = &'a JobRecord>,
    ) -> SubmitCounts {
        let mut c = SubmitCounts::default();
        for j in jobs {
            let Some(acct) = &j.submit.account else {
                continue;
            };
            *c.assoc
                .entry(AssocKey::user(cluster, acct, &j.submit.user))
                .or_default() += 1;
            for (k, _) in db.ancestors(cluster, acct) {
                *c.assoc.entry(k.clone()).or_default() += 1;
            }
            if let Some(q) = &j.submit.qos {
                *c.qos.entry(q.clone()).or_default() += 1;
                *c.qos_user
                    .entry((q.clone(), j.submit.user.clone()))
                    .or_default() += 1;
            }
        }
        c
    }
}

/// Whether any submit limit is set where `r` would be charged (so the
/// caller only counts jobs when it must).
pub fn has_submit_limits(db: &AssocDb, r: &Resolved) -> bool {
    let Some(key) = &r.assoc else {
        return false;
    };
    let q = r.qos.as_deref().and_then(|q| db.qos.get(q));
    q.is_some_and(|q| q.max_submit_jobs_per_user.is_some() || q.grp_submit_jobs.is_some())
        || db.assocs.get(key).is_some_and(|a| {
            a.limits.max_submit_jobs.is_some() || a.limits.grp_submit_jobs.is_some()
        })
        || db
            .ancestors(&key.cluster, &key.account)
            .iter()
            .any(|(_, a)| a.limits.max_submit_jobs.is_some() || a.limits.grp_submit_jobs.is_some())
}

/// The submit limits `adding` more jobs of `r` would pass, given the
/// jobs already counted. `MaxSubmitJobs` is the user association's own,
/// else the nearest account's; `GrpSubmitJobs` applies at every level; a
/// QOS's limit takes the place of the association's of the same kind.
pub fn check_submit(
    db: &AssocDb,
    r: &Resolved,
    user: &str,
    counts: &SubmitCounts,
    adding: u32,
) -> Result<(), Refusal> {
    let Some(key) = &r.assoc else {
        return Ok(());
    };
    let q = r.qos.as_deref().and_then(|q| db.qos.get(q));
    let over = |have: u32, limit: u32| have.saturating_add(adding) > limit;
    if let Some(q) = q {
        let name = q.name.clone();
        if let Some(l) = q.max_submit_jobs_per_user {
            let have = counts
                .qos_user
                .get(&(name.clone(), user.to_string()))
                .copied()
                .unwrap_or(0);
            if over(have, l) {
                return Err(Refusal::Policy);
            }
        }
        if let Some(l) = q.grp_submit_jobs {
            if over(counts.qos.get(&name).copied().unwrap_or(0), l) {
                return Err(Refusal::Policy);
            }
        }
    }
    let chain: Vec<(&AssocKey, &crate::model::assoc::Assoc)> = db
        .assocs
        .get_key_value(key)
        .into_iter()
        .chain(db.ancestors(&key.cluster, &key.account))
        .collect();
    let qos_max = q.is_some_and(|q| q.max_submit_jobs_per_user.is_some());
    if !qos_max {
        if let Some(l) = chain.iter().find_map(|(_, a)| a.limits.max_submit_jobs) {
            if over(counts.assoc.get(key).copied().unwrap_or(0), l) {
                return Err(Refusal::Policy);
            }
        }
    }
    let qos_grp = q.is_some_and(|q| q.grp_submit_jobs.is_some());
    if !qos_grp {
        for (k, a) in &chain {
            if let Some(l) = a.limits.grp_submit_jobs {
                if over(counts.assoc.get(*k).copied().unwrap_or(0), l) {
                    return Err(Refusal::Policy);
                }
            }
        }
    }
    Ok(())
}

/// `DenyOnLimit`: a job over its QOS's per-job limits is refused now
/// rather than left pending forever.
pub fn check_deny_on_limit(
    db: &AssocDb,
    r: &Resolved,
    s: &JobSubmit,
    time_limit_min: Option<u32>,
) -> Result<(), Refusal> {
    let Some(q) = r.qos.as_deref().and_then(|q| db.qos.get(q)) else {
        return Ok(());
    };
    if q.has(QosFlag::DenyOnLimit) && over_qos_job_limits(q, &requested(s), time_limit_min) {
        return Err(Refusal::Policy);
    }
    Ok(())
}

/// A partition's `AllowAccounts`/`DenyAccounts`/`AllowQos`/`DenyQos`.
pub fn check_partition(
    p: &crate::config::PartitionAccess,
    account: Option<&str>,
    qos: Option<&str>,
) -> Result<(), Refusal> {
    let listed = |list: &[String], v: Option<&str>| v.is_some_and(|v| list.iter().any(|x| x == v));
    if p.allow_accounts
        .as_deref()
        .is_some_and(|a| !listed(a, account))
        || listed(&p.deny_accounts, account)
    {
        return Err(Refusal::InvalidAccount);
    }
    if p.allow_qos.as_deref().is_some_and(|a| !listed(a, qos)) || listed(&p.deny_qos, qos) {
        return Err(Refusal::InvalidQos);
    }
    Ok(())
}
