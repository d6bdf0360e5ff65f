//! Advance reservations in the core: `scontrol create|update|delete
//! reservation` (operators only), their end (a recurring one rolls
//! forward, a one-off one is deleted and its pending jobs held), their
//! purge when idle (`PURGE_COMP`), the check of `--reservation` at submit,
//! and the gates a scheduling pass consults (reservations and licenses).
//!
//! Every decision takes `now`; names are generated from a counter kept in
//! the store, so a replayed command makes the same reservation.

use std::collections::{BTreeMap, HashMap};

use super::admission::refused;
use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::config::units;
use crate::model::job::{JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::model::reservation::{
    parse_flags, parse_licenses, parse_tres, AccessList, Reservation, ResvError, ResvFlag,
    DEFAULT_PURGE_SECS, UNLIMITED_SECS,
};
use crate::model::time::UnixTime;
use crate::policy::authz::Caller;
use crate::sched::resv_gate::{LicenseGate, ResvGate};
use crate::state::store::Op;
use crate::wire::messages::{ErrorCode, ErrorReply};
use crate::wire::resv::{LicenseInfo, ListOp, ResvSpec};
use crate::wire::types::NodeInfo;

/// How far in the past a start may be given (Slurm's MAX_RESV_DELAY): a
/// start a little behind the controller's clock means now.
const MAX_START_DELAY: i64 = 600;

/// The reservations the core keeps.
#[derive(Debug, Default)]
pub struct Reservations {
    pub(super) all: BTreeMap<String, Reservation>,
    /// The number the last generated name ended in.
    pub(super) suffix: u32,
    /// `PURGE_COMP` reservations with no running job: since when (derived;
    /// a restart starts the count again).
    idle_since: HashMap<String, UnixTime>,
}

fn invalid(message: impl Into<String>) -> ErrorReply {
    refused(ErrorCode::InvalidRequest, message)
}

fn resv_error(e: ResvError) -> ErrorReply {
    invalid(e.to_string())
}

const BUSY: &str = "Requested nodes are busy";

impl Core {
    /// Take the stored reservations back after a restart; the wake-ups for
    /// their starts and ends come with the output.
    pub fn restore_reservations(
        &mut self,
        list: Vec<Reservation>,
        suffix: Option<u32>,
        now: UnixTime,
    ) -> Output {
        let mut out = Output::default();
        self.resv.suffix = suffix.unwrap_or(0);
        for r in list {
            tracing::info!(reservation = %r.name, "reservation recovered");
            self.resv.all.insert(r.name.clone(), r);
        }
        let times: Vec<UnixTime> = self
            .resv
            .all
            .values()
            .flat_map(|r| [r.start, r.end])
            .filter(|&t| t > now)
            .collect();
        out.effects.extend(times.into_iter().map(Effect::WakeAt));
        // Ones that ended while the controller was down end now.
        self.reservations_due(now, &mut out);
        out.effect(Effect::Reschedule);
        out
    }

    /// Every reservation, in name order.
    pub fn reservations(&self) -> Vec<Reservation> {
        self.resv.all.values().cloned().collect()
    }

    pub(super) fn create_reservation(
        &mut self,
        spec: ResvSpec,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = self.build_reservation(spec, caller, now, out);
        out.reply = Some(Reply::Resv(r));
    }

    fn build_reservation(
        &mut self,
        spec: ResvSpec,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<String, ErrorReply> {
        if !caller.operator {
            return Err(refused(
                ErrorCode::PermissionDenied,
                "Access/permission denied",
            ));
        }
        if let Some(name) = &spec.name {
            if self.resv.all.contains_key(name) {
                return Err(invalid("Duplicate reservation name"));
            }
            if name.is_empty() || name.contains([' ', ',', '=']) {
                return Err(invalid("Requested reservation is invalid"));
            }
        }
        let mut r = Reservation {
            name: String::new(),
            start: 0,
            end: 0,
            ranks: vec![],
            node_list: String::new(),
            cpus: 0,
            partition: None,
            features: spec.features.clone().filter(|f| !f.is_empty()),
            users: AccessList::default(),
            accounts: AccessList::default(),
            flags: vec![],
            purge_secs: None,
            licenses: vec![],
        };
        // scontrol always sends one; another client's default is now.
        let start = spec.start.unwrap_or(now);
        if start < now - MAX_START_DELAY {
            return Err(invalid("Invalid time specified"));
        }
        r.start = start.max(now);
        r.end = match (spec.end, spec.duration_min) {
            (None, None) => return Err(invalid("Invalid time specified")),
            (Some(e), _) => e,
            (None, Some(Some(m))) => r.start + i64::from(m) * 60,
            (None, Some(None)) => r.start + UNLIMITED_SECS,
        };
        if r.end <= r.start {
            return Err(invalid("Invalid time specified"));
        }
        self.apply_lists(&mut r, &spec)?;
        if r.users.is_empty() && r.accounts.is_empty() {
            return Err(invalid("Reservation request lacks users or accounts"));
        }
        self.apply_flags(&mut r, &spec)?;
        let (tres_nodes, tres_lic) = match &spec.tres {
            Some(t) => parse_tres(t).map_err(resv_error)?,
            None => (None, vec![]),
        };
        let mut licenses = match &spec.licenses {
            Some(l) => parse_licenses(l).map_err(resv_error)?,
            None => vec![],
        };
        licenses.extend(tres_lic);
        r.licenses = licenses;
        self.check_licenses(&r)?;
        if let Some(p) = &spec.partition {
            if !self.conf.partitions.iter().any(|pc| &pc.name == p) {
                return Err(refused(
                    ErrorCode::InvalidPartition,
                    "Invalid partition name specified",
                ));
            }
            r.partition = Some(p.clone());
        }
        let node_cnt = spec.node_cnt.or(tres_nodes);
        self.place_reservation(&mut r, spec.nodes.as_deref(), node_cnt, now)?;
        r.cpus = self.cpus_of(&r.ranks);
        r.node_list = self.nodelist(&r.ranks);
        r.name = match spec.name {
            Some(n) => n,
            None => self.generate_name(&r, out),
        };
        tracing::info!(
            reservation = %r.name,
            start = r.start,
            end = r.end,
            nodes = %r.node_list,
            flags = %r.flags_shown(),
            "reservation created"
        );
        self.stored(r.clone(), now, out);
        Ok(r.name)
    }

    /// `Users=`/`Accounts=`, set or edited (`+=`, `-=`).
    fn apply_lists(&self, r: &mut Reservation, spec: &ResvSpec) -> Result<(), ErrorReply> {
        let edits = [
            (&spec.users, spec.users_op, ResvError::BadUsers, true),
            (
                &spec.accounts,
                spec.accounts_op,
                ResvError::BadAccounts,
                false,
            ),
        ];
        for (text, op, bad, users) in edits {
            let Some(text) = text else { continue };
            let list = if users { &mut r.users } else { &mut r.accounts };
            match op {
                ListOp::Set => {
                    let mut l = AccessList::parse(text, bad).map_err(resv_error)?;
                    if !users {
                        // Slurm keeps account names lower-cased.
                        l.names.iter_mut().for_each(|n| *n = n.to_lowercase());
                    }
                    *list = l;
                }
                ListOp::Add => list.edit(text, true),
                ListOp::Remove => list.edit(text, false),
            }
        }
        Ok(())
    }

    /// `Flags=`: on create the words given; on update added to (or, with
    /// `-`/`Flags-=`, taken from) the current ones.
    fn apply_flags(&self, r: &mut Reservation, spec: &ResvSpec) -> Result<(), ErrorReply> {
        let Some(text) = &spec.flags else {
            return Ok(());
        };
        let change = parse_flags(text).map_err(resv_error)?;
        let remove_all = spec.flags_op == ListOp::Remove;
        for f in change.add {
            r.set_flag(f, !remove_all);
        }
        for f in change.remove {
            r.set_flag(f, false);
        }
        if let Some(t) = change.purge_time {
            let secs = units::parse_duration_secs(&t)
                .ok()
                .flatten()
                .ok_or_else(|| resv_error(ResvError::BadPurge(t.clone())))?;
            r.purge_secs = Some(secs);
        }
        Ok(())
    }

    /// Every license must be configured, and no more asked than exist.
    /// With what other reservations hold at the same time: a license
    /// cannot be reserved twice over.
    fn check_licenses(&self, r: &Reservation) -> Result<(), ErrorReply> {
        for (name, n) in &r.licenses {
            let total = self
                .conf
                .license_counts
                .iter()
                .find(|(l, _)| l == name)
                .map(|(_, c)| *c);
            let held: u32 = self
                .resv
                .all
                .values()
                .filter(|o| o.name != r.name && o.overlaps(r.start, r.end))
                .flat_map(|o| o.licenses.iter())
                .filter(|(l, _)| l == name)
                .map(|(_, c)| *c)
                .sum();
            if total.is_none_or(|t| n.saturating_add(held) > t) {
                return Err(invalid("Invalid license specification"));
            }
        }
        Ok(())
    }

    /// Pick the reservation's nodes: `Nodes=` (a host list, or `ALL`),
    /// `NodeCnt=` (free nodes of the partition), the whole partition, or
    /// none (licenses only). Refused over nodes that are busy in its window
    /// (running jobs, other reservations) unless its flags allow.
    fn place_reservation(
        &self,
        r: &mut Reservation,
        nodes: Option<&str>,
        node_cnt: Option<u32>,
        now: UnixTime,
    ) -> Result<(), ErrorReply> {
        let pool: Vec<u32> = match &r.partition {
            Some(p) => self.partition_ranks(p).to_vec(),
            None => (0..self.conf.nodes.len() as u32).collect(),
        };
        let ranks = match (nodes.filter(|n| !n.is_empty()), node_cnt) {
            (Some(n), _) if n.eq_ignore_ascii_case("ALL") => {
                if r.partition.is_some() {
                    r.set_flag(ResvFlag::PartNodes, true);
                }
                pool
            }
            (Some(list), _) => {
                let mut ranks = crate::sched::node_ranks(list, &|n| self.conf.node_index(n))
                    .map_err(|_| {
                        refused(ErrorCode::InvalidNodeName, "Invalid node name specified")
                    })?;
                ranks.sort_unstable();
                ranks.dedup();
                r.set_flag(ResvFlag::SpecNodes, true);
                ranks
            }
            (None, Some(0)) => {
                return Err(refused(
                    ErrorCode::InvalidNodeCount,
                    "Node count specification invalid",
                ))
            }
            (None, Some(n)) => self.pick_nodes(r, &pool, n as usize, now)?,
            (None, None) if !r.licenses.is_empty() => {
                r.set_flag(ResvFlag::AnyNodes, true);
                vec![]
            }
            (None, None) if r.partition.is_some() => {
                r.set_flag(ResvFlag::PartNodes, true);
                pool
            }
            (None, None) => {
                return Err(invalid(
                    "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified",
                ))
            }
        };
        let mut ranks = ranks;
        ranks.sort_unstable();
        r.ranks = ranks;
        self.check_free(r)
    }

    /// `NodeCnt=`: the first `n` nodes of `pool` that are up, have the
    /// features asked for, and are free in the window (no running job
    /// unless `IGNORE_JOBS`, no other reservation unless it may overlap).
    fn pick_nodes(
        &self,
        r: &Reservation,
        pool: &[u32],
        n: usize,
        now: UnixTime,
    ) -> Result<Vec<u32>, ErrorReply> {
        let _ = now;
        let wanted: Vec<&str> = r
            .features
            .as_deref()
            .map(|f| f.split(['&', ',']).map(str::trim).collect())
            .unwrap_or_default();
        let busy = self.busy_ranks(r);
        let picked: Vec<u32> =
            pool.iter()
                .copied()
                .filter(|&rank| {
                    let i = rank as usize;
                    let up = self.nodes.get(i).is_some_and(|s| s.schedulable());
                    let has = self.conf.nodes.get(i).is_some_and(|nc| {
                        wanted.iter().all(|w| nc.features.iter().any(|f| f == w))
                    });
                    up && has && !busy.contains(&rank) && !self.reserved_elsewhere(r, rank)
                })
                .take(n)
                .collect();
        if picked.len() < n {
            return Err(refused(ErrorCode::NodeConfigUnavailable, BUSY));
        }
        Ok(picked)
    }

    /// Nodes running jobs that are still running at the reservation's
    /// start (by their time limits); none with `IGNORE_JOBS` or `MAINT`.
    fn busy_ranks(&self, r: &Reservation) -> std::collections::BTreeSet<u32> {
        if r.has(ResvFlag::IgnoreJobs) || r.has(ResvFlag::Maint) {
            return Default::default();
        }
        self.jobs
            .running()
            // Its own jobs are no obstacle (an update picking nodes again).
            .filter(|j| j.submit.reservation.as_deref() != Some(r.name.as_str()))
            .filter(|j| {
                let end = j
                    .start_time
                    .zip(j.time_limit_min)
                    .map(|(s, m)| s + i64::from(m) * 60);
                end.is_none_or(|e| e > r.start)
            })
            .filter_map(|j| j.alloc.as_ref())
            .flat_map(|a| a.ranks.iter().copied())
            .collect()
    }

    /// `rank` is in another reservation whose window meets `r`'s, and
    /// neither may share (`MAINT`, `OVERLAP`).
    fn reserved_elsewhere(&self, r: &Reservation, rank: u32) -> bool {
        if r.has(ResvFlag::Maint) || r.has(ResvFlag::Overlap) {
            return false;
        }
        self.resv.all.values().any(|o| {
            o.name != r.name
                && o.holds_nodes()
                && !o.has(ResvFlag::Maint)
                && !o.has(ResvFlag::Overlap)
                && o.overlaps(r.start, r.end)
                && o.ranks.binary_search(&rank).is_ok()
        })
    }

    fn check_free(&self, r: &Reservation) -> Result<(), ErrorReply> {
        if r.has(ResvFlag::AnyNodes) {
            return Ok(());
        }
        let busy = self.busy_ranks(r);
        if r.ranks.iter().any(|x| busy.contains(x)) {
            return Err(refused(ErrorCode::NodeConfigUnavailable, BUSY));
        }
        if r.ranks.iter().any(|&x| self.reserved_elsewhere(r, x)) {
            return Err(invalid(
                "Requested reservation overlaps with another reservation",
            ));
        }
        Ok(())
    }

    fn cpus_of(&self, ranks: &[u32]) -> u32 {
        ranks
            .iter()
            .filter_map(|&r| self.conf.nodes.get(r as usize))
            .map(|n| n.cpus)
            .sum()
    }

    /// Slurm's generated name: the first account (else the first user),
    /// `_`, and a number that grows with each one made.
    fn generate_name(&mut self, r: &Reservation, out: &mut Output) -> String {
        let key = r
            .accounts
            .names
            .first()
            .or(r.users.names.first())
            .cloned()
            .unwrap_or_else(|| "resv".into());
        loop {
            self.resv.suffix += 1;
            let name = format!("{key}_{}", self.resv.suffix);
            if !self.resv.all.contains_key(&name) {
                out.persist.push(Op::ResvSuffix(self.resv.suffix));
                return name;
            }
        }
    }

    /// Keep `r` (new or changed): on disk, with wake-ups at its start and end.
    fn stored(&mut self, r: Reservation, now: UnixTime, out: &mut Output) {
        for t in [r.start, r.end] {
            if t > now {
                out.effect(Effect::WakeAt(t));
            }
        }
        out.persist.push(Op::PutResv(Box::new(r.clone())));
        self.resv.idle_since.remove(&r.name);
        self.resv.all.insert(r.name.clone(), r);
        out.effect(Effect::Reschedule);
    }

    pub(super) fn update_reservation(
        &mut self,
        spec: ResvSpec,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = self.change_reservation(spec, caller, now, out);
        out.reply = Some(Reply::Done(r));
    }

    fn change_reservation(
        &mut self,
        spec: ResvSpec,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) -> Result<(), ErrorReply> {
        if !caller.operator {
            return Err(refused(
                ErrorCode::PermissionDenied,
                "Access/permission denied",
            ));
        }
        let name = spec
            .name
            .clone()
            .ok_or_else(|| invalid("Reservation must be given"))?;
        let Some(old) = self.resv.all.get(&name).cloned() else {
            return Err(invalid("Requested reservation is invalid"));
        };
        let mut r = old.clone();
        if let Some(s) = spec.start {
            if s < now - MAX_START_DELAY {
                return Err(invalid("Invalid time specified"));
            }
            let length = r.end - r.start;
            r.start = s.max(now);
            if spec.end.is_none() && spec.duration_min.is_none() {
                r.end = r.start + length;
            }
        }
        if let Some(e) = spec.end {
            r.end = e;
        }
        match spec.duration_min {
            Some(Some(m)) => r.end = r.start + i64::from(m) * 60,
            Some(None) => r.end = r.start + UNLIMITED_SECS,
            None => {}
        }
        if r.end <= r.start {
            return Err(invalid("Invalid time specified"));
        }
        self.apply_lists(&mut r, &spec)?;
        if r.users.is_empty() && r.accounts.is_empty() {
            return Err(invalid("Reservation request lacks users or accounts"));
        }
        self.apply_flags(&mut r, &spec)?;
        if let Some(l) = &spec.licenses {
            r.licenses = parse_licenses(l).map_err(resv_error)?;
        }
        if let Some(p) = &spec.partition {
            if !self.conf.partitions.iter().any(|pc| &pc.name == p) {
                return Err(refused(
                    ErrorCode::InvalidPartition,
                    "Invalid partition name specified",
                ));
            }
            r.partition = Some(p.clone());
        }
        if spec.features.is_some() {
            r.features = spec.features.clone().filter(|f| !f.is_empty());
        }
        let (tres_nodes, _) = match &spec.tres {
            Some(t) => parse_tres(t).map_err(resv_error)?,
            None => (None, vec![]),
        };
        let node_cnt = spec.node_cnt.or(tres_nodes);
        if spec.nodes.is_some() || node_cnt.is_some() {
            if r.has(ResvFlag::StaticNodes) {
                return Err(invalid(
                    "Reservation has the STATIC flag: its nodes cannot change",
                ));
            }
            r.set_flag(ResvFlag::SpecNodes, false);
            r.set_flag(ResvFlag::PartNodes, false);
            r.set_flag(ResvFlag::AnyNodes, false);
            // Its own nodes are free to it when picked again.
            let mut probe = r.clone();
            probe.ranks.clear();
            self.resv.all.remove(&name);
            let placed = self.place_reservation(&mut probe, spec.nodes.as_deref(), node_cnt, now);
            self.resv.all.insert(name.clone(), old.clone());
            placed?;
            r = probe;
        } else if (r.start, r.end, &r.flags) != (old.start, old.end, &old.flags) {
            self.check_free(&r)?;
        }
        self.check_licenses(&r)?;
        r.cpus = self.cpus_of(&r.ranks);
        r.node_list = self.nodelist(&r.ranks);
        tracing::info!(reservation = %name, "reservation updated");
        self.stored(r, now, out);
        Ok(())
    }

    pub(super) fn delete_reservation(
        &mut self,
        name: &str,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let r = if !caller.operator {
            Err(refused(
                ErrorCode::PermissionDenied,
                "Access/permission denied",
            ))
        } else if !self.resv.all.contains_key(name) {
            Err(invalid("Requested reservation is invalid"))
        } else if self.resv_in_use(name) {
            Err(invalid("Requested reservation is in use"))
        } else {
            tracing::info!(reservation = %name, "reservation deleted");
            self.drop_reservation(name, now, out);
            Ok(())
        };
        out.reply = Some(Reply::Done(r));
    }

    /// A running job of the reservation.
    fn resv_in_use(&self, name: &str) -> bool {
        self.jobs
            .running()
            .any(|j| j.submit.reservation.as_deref() == Some(name))
    }

    /// Remove reservation `name`; its pending jobs are held (reason
    /// `ReservationDeleted`) unless it has `NO_HOLD_JOBS_AFTER_END`, when
    /// they stay eligible outside it. Either way they no longer ask for it.
    fn drop_reservation(&mut self, name: &str, _now: UnixTime, out: &mut Output) {
        let Some(r) = self.resv.all.remove(name) else {
            return;
        };
        self.resv.idle_since.remove(name);
        out.persist.push(Op::DeleteResv(name.to_string()));
        let hold = !r.has(ResvFlag::NoHoldJobsAfterEnd);
        let pending: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Pending && j.submit.reservation.as_deref() == Some(name)
            })
            .map(|j| j.job_id)
            .collect();
        for &id in &pending {
            self.jobs.modify(id, |j| {
                j.submit.reservation = None;
                if hold {
                    j.priority = 0;
                    j.reason = JobReason::ReservationDeleted;
                }
            });
        }
        self.put_jobs(&pending, out);
        out.effect(Effect::Reschedule);
    }

    /// Reservations whose time has come: an ended recurring one moves to
    /// its next window, an ended one-off one is deleted, and an idle
    /// `PURGE_COMP` one is deleted once idle long enough.
    pub(super) fn reservations_due(&mut self, now: UnixTime, out: &mut Output) {
        if self.resv.all.is_empty() {
            return;
        }
        let mut ended = Vec::new();
        let mut rolled = Vec::new();
        for r in self.resv.all.values() {
            if r.end > now {
                continue;
            }
            if r.recurring() {
                let mut next = r.clone();
                next.roll_forward(now);
                rolled.push(next);
            } else {
                ended.push(r.name.clone());
            }
        }
        for r in rolled {
            tracing::info!(reservation = %r.name, start = r.start, "recurring reservation rolled forward");
            self.stored(r, now, out);
        }
        for name in ended {
            tracing::info!(reservation = %name, "reservation ended");
            self.drop_reservation(&name, now, out);
        }
        self.purge_idle(now, out);
    }

    /// `PURGE_COMP`: an active reservation with no job (running or
    /// pending) for its purge time is deleted.
    fn purge_idle(&mut self, now: UnixTime, out: &mut Output) {
        let purging: Vec<(String, u64)> = self
            .resv
            .all
            .values()
            .filter(|r| r.has(ResvFlag::PurgeComp) && r.active(now))
            .map(|r| (r.name.clone(), r.purge_secs.unwrap_or(DEFAULT_PURGE_SECS)))
            .collect();
        for (name, secs) in purging {
            let busy = self.jobs.values().any(|j| {
                matches!(j.state, JobState::Pending | JobState::Running)
                    && j.submit.reservation.as_deref() == Some(name.as_str())
            });
            if busy {
                self.resv.idle_since.remove(&name);
                continue;
            }
            let since = *self.resv.idle_since.entry(name.clone()).or_insert(now);
            if now - since >= secs as i64 {
                tracing::info!(reservation = %name, "idle reservation purged");
                self.drop_reservation(&name, now, out);
            } else {
                out.effect(Effect::WakeAt(since + secs as i64));
            }
        }
    }

    /// `--reservation` at submit: it must exist and admit the job's user
    /// or account.
    pub(super) fn check_job_reservation(&self, s: &JobSubmit) -> Result<(), ErrorReply> {
        let Some(name) = s.reservation.as_deref().filter(|n| !n.is_empty()) else {
            return Ok(());
        };
        let Some(r) = self.resv.all.get(name) else {
            return Err(invalid("Requested reservation is invalid"));
        };
        if !r.allows(&s.user, s.account.as_deref()) {
            return Err(refused(
                ErrorCode::PermissionDenied,
                "Access denied to requested reservation",
            ));
        }
        Ok(())
    }

    /// The gates for a scheduling pass at `now`.
    pub(super) fn start_gates(&self, now: UnixTime) -> (ResvGate, LicenseGate) {
        let resv = ResvGate::new(self.resv.all.values(), self.conf.nodes.len(), now);
        let lic = LicenseGate::new(
            &self.conf.license_counts,
            self.jobs.running().filter(|j| j.submit.licenses.is_some()),
            self.resv.all.values(),
            now,
        );
        (resv, lic)
    }

    /// `scontrol show licenses`.
    pub fn license_infos(&self, now: UnixTime) -> Vec<LicenseInfo> {
        let none: [&Reservation; 0] = [];
        let empty = LicenseGate::new(&self.conf.license_counts, std::iter::empty(), none, now);
        let gate = LicenseGate::new(
            &self.conf.license_counts,
            self.jobs.running().filter(|j| j.submit.licenses.is_some()),
            none,
            now,
        );
        self.conf
            .license_counts
            .iter()
            .map(|(name, total)| {
                let reserved = self
                    .resv
                    .all
                    .values()
                    .filter(|r| r.active(now))
                    .flat_map(|r| r.licenses.iter())
                    .filter(|(n, _)| n == name)
                    .map(|(_, c)| *c)
                    .sum();
                LicenseInfo {
                    name: name.clone(),
                    total: *total,
                    used: empty.free(name, None) - gate.free(name, None),
                    reserved,
                }
            })
            .collect()
    }

    /// Nodes in an active reservation show `RESERVED` (and `MAINT` for a
    /// maintenance one).
    pub fn mark_reserved(&self, infos: &mut [NodeInfo], now: UnixTime) {
        for r in self
            .resv
            .all
            .values()
            .filter(|r| r.active(now) && r.holds_nodes())
        {
            let maint = r.has(ResvFlag::Maint);
            for n in infos.iter_mut() {
                if r.ranks.binary_search(&n.rank).is_ok() {
                    n.reserved = true;
                    n.maint |= maint;
                }
            }
        }
    }
}
