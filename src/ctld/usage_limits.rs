//! Running jobs and `GrpTRESMins`/`GrpWall`: without
//! `AccountingStorageEnforce=safe`, a job may start while its group has
//! minutes left and then run past them; Slurm 22.05
//! (`acct_policy_job_time_out`) stops it, ending TIMEOUT with reason
//! TimeLimit, once a limit its TRES count against is used up. Usage only
//! moves at each `PriorityCalcPeriod` calculation, so this runs after
//! each. Under `safe` no job is stopped: it was let in only if it fit.

use super::command::Output;
use super::core::Core;
use crate::model::assoc::{AssocKey, Tres, ROOT};
use crate::model::job::{ExitStatus, JobRecord, JobState};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::assoc::held;
use crate::policy::assoc_gate::{mins_use, qos_order, usage_key};
use crate::policy::tres_mins::{over_while_running, Overrun};

impl Core {
    /// Stop the running jobs whose QOS or association (up to, not
    /// including, root) has used up a minutes limit.
    pub(super) fn usage_limits_time_out(&mut self, now: UnixTime, out: &mut Output) {
        let e = self.conf.accounting_enforce;
        if !e.limits || e.safe || !self.has_minutes_limits() {
            return;
        }
        let over: Vec<(u32, String)> = self
            .jobs
            .running()
            .filter(|j| j.state == JobState::Running && j.ending_as.is_none())
            .filter_map(|j| self.overrun(j).map(|why| (j.job_id, why)))
            .collect();
        for (id, why) in over {
            tracing::info!(job_id = id, why = %why, at = now, "job timed out on a usage limit");
            let exit = Some(ExitStatus::default());
            self.end_job(id, JobState::Timeout, JobReason::TimeLimit, exit, None, out);
        }
    }

    fn has_minutes_limits(&self) -> bool {
        let db = &self.accounts;
        db.assocs
            .values()
            .any(|a| !a.limits.grp_tres_mins.is_empty() || a.limits.grp_wall.is_some())
            || db
                .qos
                .values()
                .any(|q| !q.grp_tres_mins.is_empty() || q.grp_wall.is_some())
    }

    /// Why running job `j` is to stop, in the words Slurm gives it: its
    /// QOS first (a limit a QOS sets replaces the association's of the
    /// same kind), then its association and the accounts above it.
    fn overrun(&self, j: &JobRecord) -> Option<String> {
        let (alloc, acct) = (j.alloc.as_ref()?, j.submit.account.as_deref()?);
        let (db, book, cluster) = (&self.accounts, &self.prio.usage, &self.conf.cluster_name);
        let tres = held(alloc);
        let part = self
            .conf
            .partitions
            .iter()
            .find(|p| p.name == j.partition)
            .and_then(|p| p.access.qos.as_deref());
        let mut seen: Vec<&Tres> = Vec::new();
        let mut wall_set = false;
        for q in qos_order(db, j.submit.qos.as_deref(), part) {
            let u = mins_use(book.qos_use.get(&q.name));
            let wall = q.grp_wall.filter(|_| !wall_set);
            wall_set |= q.grp_wall.is_some();
            let who = format!("QOS {}'s", q.name);
            match over_while_running(&q.grp_tres_mins, &seen, wall, &u, &tres) {
                Some(Overrun::Wall(l, used)) => {
                    return Some(format!(
                        "Job is at or exceeds {who} group wall limit of {l} with {used}"
                    ))
                }
                Some(o) => return Some(say(&who, o)),
                None => seen.push(&q.grp_tres_mins),
            }
        }
        let key = AssocKey::user(cluster, acct, &j.submit.user);
        let own = db.assocs.get_key_value(&key);
        for (k, a) in own.into_iter().chain(db.ancestors(cluster, acct)) {
            if k.account == ROOT && k.user.is_empty() {
                break; // these limits do not apply to root
            }
            let wall = a.limits.grp_wall.filter(|_| !wall_set);
            if a.limits.grp_tres_mins.is_empty() && wall.is_none() {
                continue;
            }
            let u = mins_use(book.assoc_use.get(&usage_key(k)));
            let lim = &a.limits.grp_tres_mins;
            if let Some(o) = over_while_running(lim, &seen, wall, &u, &tres) {
                let user = if k.user.is_empty() { "(null)" } else { &k.user };
                let who = format!("association (acc={}/user={user}/part=(null))", k.account);
                return Some(say(&who, o));
            }
        }
        None
    }
}

/// Slurm's state description for a group's used-up limit.
fn say(who: &str, o: Overrun) -> String {
    match o {
        Overrun::Tres(t, l, used) => {
            format!("Job is at or exceeds {who} group max TRES({t}) minutes of {l} with {used}")
        }
        Overrun::Wall(l, used) => {
            format!("Job is at or exceeds {who} group wall limit {l} with {used}")
        }
    }
}
