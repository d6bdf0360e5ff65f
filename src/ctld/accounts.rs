//! The association and QOS database in the core: sacctmgr's changes
//! (allowed to operators and to users with AdminLevel Operator or
//! Administrator), a submission's account and QOS, and the run-limit gate
//! each scheduling pass consults.

use std::collections::HashMap;

use super::admission::refused;
use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::model::assoc::edit::{self, Refused};
use crate::model::assoc::request::{AcctRequest, Verb};
use crate::model::assoc::{AssocDb, AssocKey};
use crate::model::job::JobSubmit;
use crate::policy::admission::Admitted;
use crate::policy::assoc::{self, Refusal, SubmitCounts};
use crate::policy::authz::{self, Caller};
use crate::state::store::Op;
use crate::wire::messages::{ErrorCode, ErrorReply};

impl Core {
    /// Take the database read back from the store (a fresh one when none
    /// was written); this controller's cluster is always in it, as
    /// slurmctld registers its cluster with the accounting database.
    pub fn recover_accounts(&mut self, db: Option<AssocDb>) {
        let mut db = db.unwrap_or_default();
        db.ensure_cluster(&self.conf.cluster_name);
        self.accounts = db;
    }

    /// The association database (read-only), for views and tests.
    pub fn accounts(&self) -> &AssocDb {
        &self.accounts
    }

    /// May the user `user` (the caller) change the database?
    fn acct_admin(&self, caller: Caller, user: &str) -> bool {
        let level = self.accounts.users.get(user).map(|u| u.admin_level);
        authz::check_acct_admin(caller, level).is_ok()
    }

    /// sacctmgr add/modify/delete. Without `commit` nothing is kept: the
    /// reply says what would change (sacctmgr asks before it commits).
    pub(super) fn accounts_change(
        &mut self,
        req: &AcctRequest,
        commit: bool,
        user: &str,
        caller: Caller,
        out: &mut Output,
    ) {
        if !self.acct_admin(caller, user) {
            let line = match req.verb {
                Verb::Add => format!(
                    " Problem adding {}: Access/permission denied",
                    req.entity.plural()
                ),
                Verb::Modify | Verb::Delete => {
                    " Error with request: Access/permission denied".to_string()
                }
            };
            tracing::warn!(
                user,
                uid = caller.uid,
                "sacctmgr change refused: not an administrator"
            );
            out.reply = Some(Reply::Accounts(Err(Refused { lines: vec![line] })));
            return;
        }
        let cluster = self.conf.cluster_name.clone();
        let mut active: HashMap<(String, String), Vec<u32>> = HashMap::new();
        if req.verb == Verb::Delete {
            for j in self.jobs.values().filter(|j| !j.state.is_finished()) {
                if let Some(a) = &j.submit.account {
                    active
                        .entry((a.clone(), j.submit.user.clone()))
                        .or_default()
                        .push(j.job_id);
                }
            }
        }
        let jobs_of = |k: &AssocKey| -> Vec<u32> {
            if k.cluster != cluster || !k.is_user() {
                return Vec::new();
            }
            active
                .get(&(k.account.clone(), k.user.clone()))
                .cloned()
                .unwrap_or_default()
        };
        let result = edit::apply(&self.accounts, req, &jobs_of);
        let reply = match result {
            Ok((db, outcome)) => {
                if commit && outcome.changed {
                    tracing::info!(user, verb = ?req.verb, entity = ?req.entity, "accounting database changed");
                    self.accounts = db;
                    // Cached cluster shapes hold the largest QOS and
                    // association priorities: they may have changed.
                    self.forget_priority_shapes();
                    out.persist
                        .push(Op::PutAccounts(Box::new(self.accounts.clone())));
                    // Changed limits may let jobs start (or hold them).
                    out.effect(Effect::Reschedule);
                }
                Ok(outcome)
            }
            Err(r) => Err(r),
        };
        out.reply = Some(Reply::Accounts(reply));
    }

    /// A submission's account and QOS (`submit` is updated with them),
    /// refused as Slurm refuses: no association, a QOS not allowed, a
    /// partition's AllowAccounts/AllowQos, a submit limit reached, a
    /// `DenyOnLimit` QOS's per-job limit passed. Accounting is in effect
    /// when `AccountingStorageEnforce` names associations (or `limits` or
    /// `qos`, which imply it).
    pub(super) fn check_accounts(
        &self,
        submit: &mut JobSubmit,
        admitted: &Admitted,
        adding: usize,
    ) -> Result<(), ErrorReply> {
        let enforce = self.conf.accounting_enforce;
        let cluster = self.conf.cluster_name.as_str();
        let part = self
            .conf
            .partitions
            .iter()
            .find(|p| p.name == admitted.partition);
        // Without `AccountingStorageEnforce` jobs run as asked, as in Slurm
        // without accounting: no default account, no QOS (`(null)`).
        if !enforce.associations {
            submit.qos = submit.qos.take().map(|q| q.to_lowercase());
            if let Some(p) = part {
                assoc::check_partition(&p.access, submit.account.as_deref(), submit.qos.as_deref())
                    .map_err(|e| refusal(e, submit))?;
            }
            return Ok(());
        }
        let r = assoc::resolve(
            &self.accounts,
            cluster,
            enforce,
            &submit.user,
            submit.account.as_deref(),
            submit.qos.as_deref().map(str::to_lowercase).as_deref(),
        )
        .map_err(|e| refusal(e, submit))?;
        if let Some(p) = part {
            assoc::check_partition(&p.access, r.account.as_deref(), r.qos.as_deref())
                .map_err(|e| refusal(e, submit))?;
        }
        if enforce.limits {
            if assoc::has_submit_limits(&self.accounts, &r) {
                let counts = SubmitCounts::of(
                    &self.accounts,
                    cluster,
                    self.jobs.values().filter(|j| !j.state.is_finished()),
                );
                let n = u32::try_from(adding).unwrap_or(u32::MAX);
                assoc::check_submit(&self.accounts, &r, &submit.user, &counts, n)
                    .map_err(|e| refusal(e, submit))?;
            }
            assoc::check_deny_on_limit(&self.accounts, &r, submit, admitted.time_limit_min)
                .map_err(|e| refusal(e, submit))?;
        }
        submit.account = r.account;
        submit.qos = r.qos;
        Ok(())
    }
}

fn refusal(e: Refusal, s: &JobSubmit) -> ErrorReply {
    tracing::info!(user = %s.user, account = ?s.account, qos = ?s.qos, reason = %e, "submission refused by accounting policy");
    let code = match e {
        Refusal::InvalidAccount | Refusal::InvalidQos => ErrorCode::InvalidRequest,
        Refusal::Policy => ErrorCode::PermissionDenied,
    };
    refused(code, e.to_string())
}
