//! Running jobs and `GrpTRESMins`/`GrpWall`: without
//! `AccountingStorageEnforce=safe`, a job may start while its group has
//! minutes left and then run past them; Slurm 22.05
//! (`acct_policy_job_time_out`) stops it, ending TIMEOUT with reason
//! TimeLimit, once a limit its TRES count against is used up. Usage only
//! moves at each `PriorityCalcPeriod` calculation, so this runs after
//! each. Under `safe` no job is stopped: it was let in only if it fit.

use super::command::Output;
use super::core::Core;
use crate::model::assoc::{AssocKey, Tres};
use crate::model::job::{ExitStatus, JobState};
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
        if !e.limits || e.safe {
            return;
        }
        let db = &self.accounts;
        let any = db
            .assocs
            .values()
            .any(|a| !a.limits.grp_tres_mins.is_empty() || a.limits.grp_wall.is_some())
            || db
                .qos
                .values()
                .any(|q| !q.grp_tres_mins.is_empty() || q.grp_wall.is_some());
        if !any {
            return;
        }
        let cluster = &self.conf.cluster_name;
        let book = &self.prio.usage;
        let mut over: Vec<(u32, String)> = Vec::new();
        for j in self.jobs.running() {
            if j.state != JobState::Running || j.ending_as.is_some() {
                continue;
            }
            let (Some(alloc), Some(acct)) = (&j.alloc, j.submit.account.as_deref()) else {
                continue;
            };
            let tres = held(alloc);
            let part = self
                .conf
                .partitions
                .iter()
                .find(|p| p.name == j.partition)
                .and_then(|p| p.access.qos.as_deref());
            let qoses = qos_order(db, j.submit.qos.as_deref(), part);
            let mut why = None;
            let mut seen: Vec<&Tres> = Vec::new();
            let mut wall_set = false;
            for q in &qoses {
                let u = mins_use(book.qos_use.get(&q.name));
                let wall = q.grp_wall.filter(|_| !wall_set);
                wall_set |= q.grp_wall.is_some();
                if let Some(o) = over_while_running(&q.grp_tres_mins, &seen, wall, &u, &tres) {
                    why = Some(match o {
                        Overrun::Tres(t, l, used) => format!("Job is at or exceeds QOS {}'s group max TRES({t}) minutes of {l} with {used}", q.name),
                        Overrun::Wall(l, used) => format!("Job is at or exceeds QOS {}'s group wall limit of {l} with {used}", q.name),
                    });
                    break;
                }
                seen.push(&q.grp_tres_mins);
            }
            if why.is_none() {
                let key = AssocKey::user(cluster, acct, &j.submit.user);
                let own = db.assocs.get_key_value(&key);
                let chain = own.into_iter().chain(db.ancestors(cluster, acct));
                for (k, a) in chain {
                    if k.account == crate::model::assoc::ROOT && k.user.is_empty() {
                        break; // these limits do not apply to root
                    }
                    let wall = a.limits.grp_wall.filter(|_| !wall_set);
                    if a.limits.grp_tres_mins.is_empty() && wall.is_none() {
                        continue;
                    }
                    let u = mins_use(book.assoc_use.get(&usage_key(k)));
                    let lim = &a.limits.grp_tres_mins;
                    if let Some(o) = over_while_running(lim, &seen, wall, &u, &tres) {
                        let who = format!(
                            "association (acc={}/user={}/part=(null))",
                            k.account,
                            if k.user.is_empty() { "(null)" } else { &k.user }
                        );
                        why = Some(match o {
                            Overrun::Tres(t, l, used) => format!("Job is at or exceeds {who} group max TRES({t}) minutes of {l} with {used}"),
                            Overrun::Wall(l, used) => format!("Job is at or exceeds {who} group wall limit {l} with {used}"),
                        });
                        break;
                    }
                }
            }
            if let Some(w) = why {
                over.push((j.job_id, w));
            }
        }
        for (id, why) in over {
            tracing::info!(job_id = id, why = %why, at = now, "job timed out on a usage limit");
            let exit = Some(ExitStatus::default());
            self.end_job(id, JobState::Timeout, JobReason::TimeLimit, exit, None, out);
        }
    }
}
