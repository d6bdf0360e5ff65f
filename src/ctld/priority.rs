//! priority/multifactor in the controller core: usage accrual and decay,
//! fair share, and re-prioritising jobs, every `PriorityCalcPeriod` (on the
//! timer's `Tick`, when the period is due) and at the events that change
//! them (a submission gets its priority at once; a job's end adds its last
//! usage at once). Also the answers to sprio and sshare.
//!
//! The association tree fair share walks comes from one adapter,
//! [`Core::share_tree`]: today root → each job's account → its user, every
//! share 1 (there is no association database yet); later the same tree is
//! built from the real associations. QOS `Priority`/`UsageFactor` and
//! association `Priority` come from [`PolicyInputs`], empty today.
//!
//! Under priority/basic nothing here runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::command::Output;
use super::core::Core;
use crate::model::assoc::Tres;
use crate::model::job::{JobRecord, JobState};
use crate::model::time::UnixTime;
use crate::policy::authz::Caller;
use crate::sched::priority::fairshare::{self, NodeKind, ShareFactors, ShareTree};
use crate::sched::priority::multifactor::{self, ClusterShape, Factors, JobShape};
use crate::sched::Request;
use crate::state::store::Op;
use crate::state::usage::UsageBook;
use crate::wire::priority::{
    JobFactors, PriorityQuery, PriorityReport, PriorityWeights, ShareQuery, ShareReport, ShareRow,
};

/// The multifactor state the core keeps: usage (persisted) and the fair
/// share computed from it at the last calculation.
#[derive(Debug, Default)]
pub struct PrioState {
    pub usage: UsageBook,
    tree: ShareTree,
    shares: Vec<ShareFactors>,
    /// User association key → its fair-share factor.
    fairshare: HashMap<String, f64>,
    /// Partition → the cluster as its jobs' factors see it (O(nodes) to
    /// build), for the configuration it was built from (its address).
    shapes: HashMap<String, ClusterShape>,
    shapes_conf: usize,
}

/// What the association and QOS databases will supply: QOS `Priority` and
/// `UsageFactor` by QOS name, association `Priority` by association key.
/// Empty until those land (every job then has QOS and association
/// priority 0 and usage factor 1).
#[derive(Debug, Default)]
pub struct PolicyInputs {
    pub qos_priority: HashMap<String, u32>,
    pub qos_usage_factor: HashMap<String, f64>,
    pub assoc_priority: HashMap<String, u32>,
}

/// The account a job's usage goes to: `-A` if given, else the user's
/// primary group, else `root`. The group stands in for the default account
/// an association database would give: it is what usually groups a lab's
/// users, so fair share is then between groups first and users second.
pub fn account_of(j: &JobRecord) -> String {
    [j.submit.account.as_deref(), Some(j.submit.group.as_str())]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or("root")
        .to_string()
}

/// The job's association key (`account/user`) and its ancestors' keys,
/// without an association database: the account sits under root.
fn flat_path(j: &JobRecord) -> Vec<String> {
    let account = account_of(j);
    let mut v = vec![format!("{account}/{}", j.submit.user)];
    if account != "root" {
        v.push(account);
    }
    v.push("root".into());
    v
}

/// A job's TRES (allocated once started, requested before), by Slurm name.
fn job_tres(j: &JobRecord) -> (Vec<(String, f64)>, u32, u32) {
    let mut t = Vec::new();
    let (cpus, nodes) = match &j.alloc {
        Some(a) => {
            let nodes = a.ranks.len() as u32;
            t.push(("Mem".to_string(), (a.mem_mb * u64::from(nodes)) as f64));
            for (name, n) in crate::model::tres::gres_totals(&a.gres) {
                t.push((format!("GRES/{name}"), n as f64));
            }
            (a.total_cpus(), nodes)
        }
        None => {
            let req = Request::from_submit(&j.submit);
            let nodes = req.min_nodes();
            let cpus = req.ntasks * req.cpus_per_task;
            let mem = match (j.submit.mem_per_node_mb, j.submit.mem_per_cpu_mb) {
                (Some(m), _) => m * u64::from(nodes),
                (None, Some(m)) => m * u64::from(cpus),
                _ => 0,
            };
            t.push(("Mem".to_string(), mem as f64));
            for (name, n) in
                crate::model::tres::gres_requested(&j.submit.resources, nodes, req.ntasks)
            {
                t.push((format!("GRES/{name}"), n as f64));
            }
            (cpus, nodes)
        }
    };
    t.push(("CPU".to_string(), f64::from(cpus)));
    t.push(("Node".to_string(), f64::from(nodes)));
    (t, cpus, nodes)
}

/// A pending job that is eligible to run (age accrues): not held, its
/// dependency satisfied, its `--begin` time passed.
fn eligible(j: &JobRecord, now: UnixTime) -> bool {
    j.state == JobState::Pending
        && !j.submit.hold
        && j.priority > 0
        && j.dependency_outcome() == crate::model::dependency::Outcome::Satisfied
        && j.submit.begin_time.is_none_or(|b| b <= now)
}

impl Core {
    pub(super) fn multifactor(&self) -> bool {
        self.conf.priority_type == "priority/multifactor"
    }

    /// Take the usage the store held (the actor calls this after
    /// `recover`). `PriorityUsageResetPeriod=NOW` clears it here, at the
    /// controller's start, as in Slurm.
    pub fn restore_usage(&mut self, book: Option<UsageBook>, now: UnixTime) {
        let mut book = book.unwrap_or_default();
        if self.conf.priority.usage_reset == crate::config::priority::ResetPeriod::Now {
            book.clear();
            book.last_reset = Some(now);
        }
        // Running jobs count from here if nothing was ever calculated.
        book.last_calc.get_or_insert(now);
        self.prio.usage = book;
        self.refresh_fairshare();
        // Priorities the last calculation set were not stored: derive them
        // again from what was.
        if self.multifactor() {
            let inputs = self.policy_inputs();
            self.reprioritise(now, &inputs);
        }
    }

    /// The usage book as it stands (tests, views).
    pub fn usage(&self) -> &UsageBook {
        &self.prio.usage
    }

    /// The adapter: the association tree fair share is computed over.
    /// Today root → account (see [`account_of`]) → user, every share 1,
    /// from the jobs the core knows and the associations with usage.
    pub(super) fn share_tree(&self) -> ShareTree {
        let mut t = ShareTree::new();
        // The association database's accounts, nested as sacctmgr made
        // them, with their Fairshare= (a user's `parent` counts as 1).
        let cluster = &self.conf.cluster_name;
        let shares_of = |a: &crate::model::assoc::Assoc| match a.shares {
            crate::model::assoc::Shares::Raw(n) => n,
            crate::model::assoc::Shares::Parent => 1,
        };
        let mut index: HashMap<String, usize> = HashMap::from([("root".to_string(), 0)]);
        let mut pending: Vec<(&crate::model::assoc::AssocKey, &crate::model::assoc::Assoc)> = self
            .accounts
            .assocs
            .iter()
            .filter(|(k, _)| &k.cluster == cluster && k.user.is_empty() && k.account != "root")
            .collect();
        // Parents before children, whatever the map's order.
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|(k, a)| {
                let parent = a.parent.as_deref().unwrap_or("root");
                match index.get(parent).copied() {
                    Some(p) => {
                        let i = t.add(p, &k.account, NodeKind::Account, shares_of(a));
                        index.insert(k.account.clone(), i);
                        false
                    }
                    None => true,
                }
            });
            if pending.len() == before {
                break;
            }
        }
        for (k, a) in &self.accounts.assocs {
            // Users directly under root (the cluster's own `root` user)
            // count only once they run something: below, from the jobs.
            if &k.cluster != cluster || k.user.is_empty() || k.account == "root" {
                continue;
            }
            if let Some(&p) = index.get(&k.account) {
                if t.child(p, &k.user, NodeKind::User).is_none() {
                    t.add(p, &k.user, NodeKind::User, shares_of(a));
                }
            }
        }
        // Jobs and usage outside the database (no AccountingStorageEnforce):
        // their account under root, every share 1.
        let mut pairs: std::collections::BTreeSet<(String, String)> = self
            .jobs
            .values()
            .map(|j| (account_of(j), j.submit.user.clone()))
            .collect();
        for key in self.prio.usage.raw.keys() {
            if let Some((a, u)) = key.split_once('/') {
                pairs.insert((a.to_string(), u.to_string()));
            }
        }
        for (account, user) in pairs {
            match index.get(&account).copied() {
                Some(p) => {
                    if t.child(p, &user, NodeKind::User).is_none() {
                        t.add(p, &user, NodeKind::User, 1);
                    }
                }
                None => insert_assoc(&mut t, &account, &user),
            }
        }
        t
    }

    /// The job's association key (`account/user`) and its ancestors' keys,
    /// up the association database's account tree where the account is
    /// in it (else the account under root).
    fn assoc_path(&self, j: &JobRecord) -> Vec<String> {
        let account = account_of(j);
        let cluster = &self.conf.cluster_name;
        let key = crate::model::assoc::AssocKey::account(cluster, &account);
        if account == "root" || !self.accounts.assocs.contains_key(&key) {
            return flat_path(j);
        }
        let mut v = vec![format!("{account}/{}", j.submit.user)];
        let mut at = Some(account);
        // Bounded by the number of accounts: a cycle cannot loop forever.
        for _ in 0..=self.accounts.assocs.len() {
            let Some(a) = at.take() else {
                break;
            };
            if a == "root" {
                break;
            }
            at = self
                .accounts
                .assocs
                .get(&crate::model::assoc::AssocKey::account(cluster, &a))
                .and_then(|x| x.parent.clone())
                .or_else(|| Some("root".into()));
            v.push(a);
        }
        v.push("root".into());
        v
    }

    /// QOS priorities and usage factors, and association priorities
    /// (`account/user` keys), from the association database.
    pub(super) fn policy_inputs(&self) -> PolicyInputs {
        let db = &self.accounts;
        PolicyInputs {
            qos_priority: db
                .qos
                .iter()
                .map(|(n, q)| (n.clone(), q.priority))
                .collect(),
            qos_usage_factor: db
                .qos
                .iter()
                .map(|(n, q)| (n.clone(), q.usage_factor))
                .collect(),
            assoc_priority: db
                .assocs
                .iter()
                .filter(|(k, _)| k.cluster == self.conf.cluster_name && !k.user.is_empty())
                .filter_map(|(k, a)| a.priority.map(|p| (format!("{}/{}", k.account, k.user), p)))
                .collect(),
        }
    }

    /// Rebuild the tree from every job (O(jobs): at start-up and each
    /// calculation, which also drops associations nothing uses any more),
    /// then fair share over it.
    fn refresh_fairshare(&mut self) {
        self.prio.tree = self.share_tree();
        self.recompute_shares();
    }

    /// Fair share over the tree as it is, from the usage as it stands
    /// (O(associations): at a job's end).
    fn recompute_shares(&mut self) {
        let tree = &self.prio.tree;
        let usage: HashMap<String, f64> = self.prio.usage.raw.clone().into_iter().collect();
        let shares = if self.conf.priority.flags.no_fair_tree {
            fairshare::classic(tree, &usage)
        } else {
            fairshare::fair_tree(tree, &usage)
        };
        self.prio.fairshare = (0..tree.nodes.len())
            .filter(|&i| tree.nodes[i].kind == NodeKind::User)
            .map(|i| (tree.key(i), shares[i].fairshare))
            .collect();
        self.prio.shares = shares;
    }

    /// Add `account/user` to the tree if it is not there (shares 1).
    fn ensure_assoc(&mut self, account: &str, user: &str) {
        let t = &mut self.prio.tree;
        if t.nodes.is_empty() {
            *t = ShareTree::new();
        }
        insert_assoc(t, account, user);
    }

    /// `cluster_shape`, kept until the configuration changes.
    fn cached_shape(&mut self, partition: &str, inputs: &PolicyInputs) -> ClusterShape {
        let conf = Arc::as_ptr(&self.conf) as usize;
        if self.prio.shapes_conf != conf {
            self.prio.shapes.clear();
            self.prio.shapes_conf = conf;
        }
        if let Some(s) = self.prio.shapes.get(partition) {
            return s.clone();
        }
        let s = self.cluster_shape(partition, inputs);
        self.prio.shapes.insert(partition.to_string(), s.clone());
        s
    }

    /// The cluster as one job's factors see it (its partition's totals).
    /// Drop the cached cluster shapes (after a change to the QOS or the
    /// associations, whose largest priorities they hold).
    pub(super) fn forget_priority_shapes(&mut self) {
        self.prio.shapes.clear();
    }

    pub(super) fn cluster_shape(&self, partition: &str, inputs: &PolicyInputs) -> ClusterShape {
        let conf = &self.conf;
        let ranks = self.partition_ranks(partition);
        let mut part_tres: BTreeMap<String, f64> = BTreeMap::new();
        for &r in ranks {
            let Some(n) = conf.nodes.get(r as usize) else {
                continue;
            };
            *part_tres.entry("CPU".into()).or_default() += f64::from(n.cpus);
            *part_tres.entry("Mem".into()).or_default() += n.real_memory_mb as f64;
            *part_tres.entry("Node".into()).or_default() += 1.0;
            if let Some(g) = conf.node_gres(r as usize) {
                for (name, _) in &conf.priority.weight_tres {
                    if let Some(gres) = name.strip_prefix("GRES/") {
                        *part_tres.entry(name.clone()).or_default() += g.total(gres, None) as f64;
                    }
                }
            }
        }
        ClusterShape {
            nodes: conf.nodes.len() as u32,
            cpus: conf.nodes.iter().map(|n| n.cpus).sum(),
            max_part_job_factor: conf
                .partitions
                .iter()
                .map(|p| conf.priority.partition(&p.name).job_factor)
                .max()
                .unwrap_or(1),
            max_qos_priority: inputs.qos_priority.values().copied().max().unwrap_or(0),
            max_assoc_priority: inputs.assoc_priority.values().copied().max().unwrap_or(0),
            part_max_time_min: conf
                .partitions
                .iter()
                .find(|p| p.name == partition)
                .and_then(|p| p.max_time_min),
            part_tres: part_tres.into_iter().collect(),
        }
    }

    /// Job `j`'s factors at `now`.
    pub(super) fn job_factors(
        &self,
        j: &JobRecord,
        cluster: &ClusterShape,
        inputs: &PolicyInputs,
        now: UnixTime,
    ) -> Factors {
        let (tres, cpus, nodes) = job_tres(j);
        let key = self.assoc_path(j).swap_remove(0);
        let shape = JobShape {
            submit_time: j.submit_time,
            accrue_time: self.prio.usage.accrue.get(&j.job_id).copied(),
            min_nodes: nodes,
            cpus,
            time_limit_min: j.time_limit_min,
            nice: j.submit.nice,
            tres,
            part_job_factor: self.conf.priority.partition(&j.partition).job_factor,
            qos_priority: j
                .submit
                .qos
                .as_deref()
                .and_then(|q| inputs.qos_priority.get(q))
                .copied()
                .unwrap_or(0),
            assoc_priority: inputs.assoc_priority.get(&key).copied().unwrap_or(0),
        };
        // A user with no computed factor yet (a first job) is unused: 1.
        let fs = self.prio.fairshare.get(&key).copied().unwrap_or(1.0);
        multifactor::factors(&self.conf.priority, &shape, cluster, fs, now)
    }

    /// Whether the calculation sets this job's priority.
    fn recalculated(&self, j: &JobRecord) -> bool {
        !j.priority_set
            && j.priority > 0
            && match j.state {
                JobState::Pending => true,
                JobState::Running => self.conf.priority.flags.calculate_running,
                _ => false,
            }
    }

    /// New jobs `ids` (just admitted or released): their age starts now,
    /// if eligible, and they get their multifactor priority at once.
    pub(super) fn multifactor_admit(&mut self, ids: &[u32], now: UnixTime, out: &mut Output) {
        if !self.multifactor() {
            return;
        }
        // A new association joins the tree: every user's rank moves.
        let unknown: Vec<(String, String)> = ids
            .iter()
            .filter_map(|&id| self.jobs.get(id))
            .map(|j| (account_of(j), j.submit.user.clone()))
            .filter(|(a, u)| !self.prio.fairshare.contains_key(&format!("{a}/{u}")))
            .collect();
        if !unknown.is_empty() {
            for (a, u) in &unknown {
                self.ensure_assoc(a, u);
            }
            self.recompute_shares();
        }
        let inputs = self.policy_inputs();
        let mut changed = Vec::new();
        for &id in ids {
            let Some(j) = self.jobs.get(id) else {
                continue;
            };
            if eligible(j, now) {
                let from = j
                    .submit
                    .begin_time
                    .unwrap_or(j.submit_time)
                    .max(j.submit_time);
                self.prio.usage.accrue.entry(id).or_insert(from.min(now));
            }
            let Some(part) = self
                .jobs
                .get(id)
                .filter(|j| self.recalculated(j))
                .map(|j| j.partition.clone())
            else {
                continue;
            };
            let cluster = self.cached_shape(&part, &inputs);
            let Some(j) = self.jobs.get(id) else {
                continue;
            };
            let p = self
                .job_factors(j, &cluster, &inputs, now)
                .priority(&self.conf.priority);
            if p != j.priority {
                self.jobs.modify(id, |j| j.priority = p);
                changed.push(id);
            }
        }
        self.put_jobs(&changed, out);
    }

    /// A running job's last stretch of usage, at its end (Slurm adds it at
    /// once rather than at the next calculation).
    pub(super) fn multifactor_job_end(&mut self, id: u32, now: UnixTime, out: &mut Output) {
        if !self.multifactor() {
            return;
        }
        self.prio.usage.accrue.remove(&id);
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        if !matches!(j.state, JobState::Running | JobState::Completing) {
            return;
        }
        let inputs = self.policy_inputs();
        self.accrue_job(id, now, &inputs);
        self.recompute_shares();
        // Stored now, so a restart before the next calculation keeps it.
        out.persist
            .push(Op::PutUsage(Box::new(self.prio.usage.clone())));
    }

    /// Add job `id`'s usage from the last calculation (or its start) to `now`.
    fn accrue_job(&mut self, id: u32, now: UnixTime, inputs: &PolicyInputs) {
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        let (Some(start), Some(_)) = (j.start_time, j.alloc.as_ref()) else {
            return;
        };
        let from = self.prio.usage.last_calc.unwrap_or(start).max(start);
        let secs = (now - from).max(0) as f64;
        if secs == 0.0 {
            return;
        }
        let pc = &self.conf.priority;
        let (tres, _, _) = job_tres(j);
        let billing = multifactor::billing(pc.billing_for(&j.partition), &tres, pc.flags.max_tres);
        // The job's QOS's UsageFactor (1 without a QOS).
        let factor = j
            .submit
            .qos
            .as_deref()
            .and_then(|q| inputs.qos_usage_factor.get(q))
            .copied()
            .unwrap_or(1.0);
        // The stretch decays as Slurm's does: as if added at its start.
        let decayed = crate::state::usage::decay_factor(secs, pc.decay_half_life_s);
        let keys = self.assoc_path(j);
        tracing::debug!(job_id = id, billing, secs, "usage accrued");
        self.prio
            .usage
            .add(&keys, billing * secs * factor * decayed);
        // What GrpTRESMins and GrpWall weigh: every TRES the job holds
        // (billing as weighted above) and its wall time, for its
        // association and each above it, its QOS and its partition's.
        // A job suspended for a preemptor is charged for what it holds: the
        // CPUs it lent are the preemptor's, and charged to it.
        let Some(alloc) = j.held_alloc() else {
            return;
        };
        let mut held = crate::policy::assoc::held(&alloc);
        held.insert("billing".into(), billing as u64);
        let qos = self.limit_qos_of(j);
        let book = &mut self.prio.usage;
        let stretch = secs * factor * decayed;
        for k in keys {
            book.assoc_use.entry(k).or_default().add(&held, stretch);
        }
        for q in qos {
            book.qos_use.entry(q).or_default().add(&held, stretch);
        }
    }

    /// The QOS whose usage a job adds to: its own and its partition's
    /// `QOS=` (once when they are the same), as Slurm charges both.
    pub(super) fn limit_qos_of(&self, j: &JobRecord) -> Vec<String> {
        let part = self
            .conf
            .partitions
            .iter()
            .find(|p| p.name == j.partition)
            .and_then(|p| p.access.qos.clone());
        let own = j.submit.qos.clone();
        let mut v: Vec<String> = own.into_iter().collect();
        if let Some(p) = part.filter(|p| !v.contains(p)) {
            v.push(p);
        }
        v
    }

    /// The `PriorityCalcPeriod` work, if it is due at `now`: decay, accrue
    /// running jobs, reset if the period says so, fair share, and every
    /// pending job's (and with `CALCULATE_RUNNING` running job's) priority.
    pub(super) fn priority_tick(&mut self, now: UnixTime, out: &mut Output) {
        if !self.multifactor() {
            return;
        }
        let last = *self.prio.usage.last_calc.get_or_insert(now);
        if now - last < self.conf.priority.calc_period_s as i64 {
            return;
        }
        self.priority_calc(now, out);
    }

    /// The calculation itself (also what tests drive directly).
    pub fn priority_calc(&mut self, now: UnixTime, out: &mut Output) {
        if !self.multifactor() {
            return;
        }
        let inputs = self.policy_inputs();
        let pc = self.conf.priority.clone();
        let running: Vec<u32> = self.jobs.running().map(|j| j.job_id).collect();
        // Old usage decays first, then the new stretch is added with its
        // own decay, as Slurm's decay thread does (the other way round the
        // stretch would decay twice).
        self.prio.usage.decay_to(now, pc.decay_half_life_s);
        for &id in &running {
            self.accrue_job(id, now, &inputs);
        }
        if self.prio.usage.reset_if_due(pc.usage_reset, now) {
            tracing::info!(period = pc.usage_reset.name(), "usage reset");
        }
        // A job that became eligible since the last calculation did so
        // no earlier than it.
        let prev_calc = self.prio.usage.last_calc.unwrap_or(now);
        self.prio.usage.last_calc = Some(now);
        // Age: jobs become eligible (or stop being so) between calculations.
        let prev = self.prio.usage.accrue.clone();
        let mut accrue = BTreeMap::new();
        for j in self.jobs.values().filter(|j| eligible(j, now)) {
            let since = prev.get(&j.job_id).copied().unwrap_or_else(|| {
                let from = j
                    .submit
                    .begin_time
                    .unwrap_or(j.submit_time)
                    .max(j.submit_time);
                from.max(prev_calc).min(now)
            });
            accrue.insert(j.job_id, since);
        }
        self.prio.usage.accrue = accrue;
        self.refresh_fairshare();
        // The new priorities are not written to the job records: they are
        // derived from the usage and ages stored below, and recomputed from
        // them at a restart (`restore_usage`). Writing every pending job at
        // every calculation would cost a record per job per period.
        let changed = self.reprioritise(now, &inputs);
        tracing::debug!(changed, "priorities recalculated");
        out.persist
            .push(Op::PutUsage(Box::new(self.prio.usage.clone())));
        out.persist
            .push(Op::PutAges(Box::new(self.prio.usage.accrue.clone())));
        // Usage moved: running jobs may have used up a minutes limit.
        self.usage_limits_time_out(now, out);
    }

    /// Every job the calculation prices gets its priority at `now`; how
    /// many changed.
    fn reprioritise(&mut self, now: UnixTime, inputs: &PolicyInputs) -> usize {
        let pc = self.conf.priority.clone();
        let mut shapes: HashMap<String, ClusterShape> = HashMap::new();
        let ids: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| self.recalculated(j))
            .map(|j| j.job_id)
            .collect();
        let mut changed = 0;
        for id in ids {
            let Some(j) = self.jobs.get(id) else {
                continue;
            };
            let cluster = shapes
                .entry(j.partition.clone())
                .or_insert_with(|| self.cluster_shape(&j.partition, inputs))
                .clone();
            let p = self.job_factors(j, &cluster, inputs, now).priority(&pc);
            let keep = pc.flags.incr_only && p < j.priority;
            if p != j.priority && !keep {
                self.jobs.modify(id, |j| j.priority = p);
                changed += 1;
            }
        }
        changed
    }

    /// sprio: each pending job's factors (those the caller may see).
    pub fn priority_report(
        &self,
        q: &PriorityQuery,
        caller: Caller,
        now: UnixTime,
    ) -> PriorityReport {
        let pc = &self.conf.priority;
        let weights = PriorityWeights {
            age: pc.weight_age,
            assoc: pc.weight_assoc,
            fairshare: pc.weight_fairshare,
            job_size: pc.weight_job_size,
            partition: pc.weight_partition,
            qos: pc.weight_qos,
            tres: pc
                .weight_tres
                .iter()
                .map(|(n, w)| (n.to_ascii_lowercase(), *w))
                .collect(),
        };
        let mut report = PriorityReport {
            multifactor: self.multifactor(),
            priority_type: self.conf.priority_type.clone(),
            weights,
            jobs: Vec::new(),
        };
        if !report.multifactor {
            return report;
        }
        let inputs = self.policy_inputs();
        let wanted = self.resolve_ids(&q.job_ids);
        let mut shapes: HashMap<String, ClusterShape> = HashMap::new();
        for j in self.jobs.values() {
            // Held jobs (priority 0) and jobs waiting for their `--begin`
            // time are not listed, as in Slurm.
            let deferred = j.submit.begin_time.is_some_and(|b| b > now);
            if j.state != JobState::Pending || j.priority == 0 || deferred {
                continue;
            }
            if !self.may_see_job(caller, j) {
                continue;
            }
            if !wanted.is_empty() && !wanted.contains(&j.job_id) {
                continue;
            }
            if !q.users.is_empty() && !q.users.contains(&j.submit.user) {
                continue;
            }
            if !q.partitions.is_empty() && !q.partitions.contains(&j.partition) {
                continue;
            }
            let cluster = shapes
                .entry(j.partition.clone())
                .or_insert_with(|| self.cluster_shape(&j.partition, &inputs));
            let f = self.job_factors(j, cluster, &inputs, now);
            report.jobs.push(JobFactors {
                job_id: j.job_id,
                partition: j.partition.clone(),
                user: j.submit.user.clone(),
                account: account_of(j),
                qos: "normal".into(),
                priority: j.priority,
                age: f.age,
                assoc: f.assoc,
                fairshare: f.fairshare,
                job_size: f.job_size,
                partition_factor: f.partition,
                qos_factor: f.qos,
                nice: f.nice,
                site: f.site,
                tres: f.tres,
            });
        }
        report
    }

    /// sshare: the associations, in listing order, with their shares and
    /// usage (as of the last calculation or job end).
    pub fn share_report(&self, q: &ShareQuery, caller_name: Option<&str>) -> ShareReport {
        // Under priority/basic nothing is calculated on a timer: the tree
        // of the jobs' accounts and users is computed as asked.
        let fresh;
        let (t, shares) = if self.multifactor() {
            (&self.prio.tree, &self.prio.shares)
        } else {
            let tree = self.share_tree();
            let usage: HashMap<String, f64> = self.prio.usage.raw.clone().into_iter().collect();
            let shares = fairshare::fair_tree(&tree, &usage);
            fresh = (tree, shares);
            (&fresh.0, &fresh.1)
        };
        let classic = self.conf.priority.flags.no_fair_tree;
        let mut report = ShareReport {
            multifactor: self.multifactor(),
            rows: Vec::new(),
        };
        if t.nodes.is_empty() {
            return report;
        }
        let running_mins = self.tres_run_mins();
        let gres = self.accounted_gres();
        for i in t.listing_order() {
            let n = &t.nodes[i];
            let f = shares.get(i).copied().unwrap_or_default();
            let (account, user) = match (n.kind, n.parent) {
                (NodeKind::User, Some(p)) => (t.nodes[p].name.clone(), n.name.clone()),
                _ => (n.name.clone(), String::new()),
            };
            if n.kind == NodeKind::User {
                let shown = if !q.users.is_empty() {
                    q.users.contains(&user)
                } else {
                    q.all_users || caller_name.is_none_or(|me| me == user)
                };
                if !shown {
                    continue;
                }
            }
            if !q.accounts.is_empty() && n.parent.is_some() && !q.accounts.contains(&account) {
                continue;
            }
            let root = n.parent.is_none();
            let key = t.key(i);
            let grp_tres_mins = self.grp_tres_mins_of(n.kind, &account, &user);
            report.rows.push(ShareRow {
                depth: t.depth(i) as u32,
                account,
                user,
                raw_shares: (!root).then_some(n.shares),
                norm_shares: if root { 0.0 } else { f.norm_shares },
                raw_usage: f.raw_usage,
                norm_usage: f.norm_usage,
                effective_usage: f.effective_usage,
                fairshare: (!root && (classic || n.kind == NodeKind::User)).then_some(f.fairshare),
                level_fs: (!root && !classic).then_some(f.level_fs),
                tres_run_mins: running_mins
                    .get(&key)
                    .unwrap_or(&Tres::default())
                    .full(&gres),
                grp_tres_mins,
                grp_tres_raw: self.grp_tres_raw(&key, &gres),
            });
        }
        report
    }

    /// Per association key: running jobs' TRES-minutes left to their
    /// time limits (sshare's TRESRunMins), as of the last calculation
    /// (Slurm counts them down at each).
    fn tres_run_mins(&self) -> HashMap<String, Tres> {
        let at = self.prio.usage.last_calc;
        let mut out: HashMap<String, Tres> = HashMap::new();
        for j in self.jobs.running() {
            let (Some(a), Some(limit)) = (&j.alloc, j.time_limit_min) else {
                continue;
            };
            let ran = match (at, j.start_time) {
                (Some(at), Some(s)) => ((at - s).max(0) / 60) as u64,
                _ => 0,
            };
            let left = u64::from(limit).saturating_sub(ran);
            let held = crate::policy::assoc::held(a);
            for k in self.assoc_path(j) {
                let e = out.entry(k).or_default();
                for (name, n) in &held {
                    *e.0.entry(name.clone()).or_default() += n.saturating_mul(left);
                }
            }
        }
        out
    }

    /// The GRES the cluster has, as TRES names (`gres/gpu`), for the
    /// TRES strings sshare prints.
    fn accounted_gres(&self) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        for r in 0..self.conf.nodes.len() {
            if let Some(g) = self.conf.node_gres(r) {
                for item in &g.configured {
                    names.insert(format!("gres/{}", item.name));
                }
            }
        }
        names.into_iter().collect()
    }

    /// An sshare row's GrpTRESMins: its association's own limit.
    fn grp_tres_mins_of(&self, kind: NodeKind, account: &str, user: &str) -> String {
        let cluster = &self.conf.cluster_name;
        let key = match kind {
            NodeKind::User => crate::model::assoc::AssocKey::user(cluster, account, user),
            _ => crate::model::assoc::AssocKey::account(cluster, account),
        };
        self.accounts
            .assocs
            .get(&key)
            .map(|a| a.limits.grp_tres_mins.plain())
            .unwrap_or_default()
    }

    /// An sshare row's GrpTRESRaw: decayed usage in TRES-minutes.
    fn grp_tres_raw(&self, key: &str, gres: &[String]) -> String {
        let g = self.prio.usage.assoc_use.get(key);
        let mins = Tres(
            g.map(|g| g.tres.keys().map(|k| (k.clone(), g.tres_mins(k))).collect())
                .unwrap_or_default(),
        );
        mins.full(gres)
    }
}

/// The adapter's shape: `account` under root (`root` is root itself), the
/// user under it, every share 1; nothing added twice.
fn insert_assoc(t: &mut ShareTree, account: &str, user: &str) {
    let parent = if account == "root" {
        0
    } else {
        t.child(0, account, NodeKind::Account)
            .unwrap_or_else(|| t.add(0, account, NodeKind::Account, 1))
    };
    if t.child(parent, user, NodeKind::User).is_none() {
        t.add(parent, user, NodeKind::User, 1);
    }
}
