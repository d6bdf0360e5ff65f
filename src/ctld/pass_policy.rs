//! Policy for one scheduling pass, the same for the quick pass and the
//! backfill pass: association and QOS limits, reservations and licenses,
//! each a `StartGate` built from the core's state as it is now. The limits
//! gate borrows the association database, which is taken out of the core
//! for the pass (the pass itself borrows the job table mutably) and put
//! back after it.

use super::core::Core;
use crate::config::Config;
use crate::model::assoc::AssocDb;
use crate::model::job::JobRecord;
use crate::model::time::UnixTime;
use crate::policy::assoc_gate::AssocGate;
use crate::sched::resv_gate::{LicenseGate, ResvGate};
use crate::state::usage::UsageBook;

pub(super) struct PassPolicy {
    pub(super) db: AssocDb,
    pub(super) resv: ResvGate,
    pub(super) license: LicenseGate,
}

/// The association and QOS limits gate over `db`, counting `running` jobs,
/// with the usage `GrpTRESMins` and `GrpWall` are held to (`book` at `now`).
pub(super) fn limits<'a, 'r>(
    db: &'a AssocDb,
    conf: &'a Config,
    book: &UsageBook,
    now: UnixTime,
    running: impl Iterator<Item = &'r JobRecord>,
) -> AssocGate<'a> {
    AssocGate::with_usage(
        db,
        &conf.cluster_name,
        &conf.partitions,
        conf.accounting_enforce.limits,
        book,
        conf.accounting_enforce.safe,
        now,
        running,
    )
}

impl Core {
    /// Policy for a pass at `now` (give it back with `end_pass_policy`).
    pub(super) fn pass_policy(&mut self, now: UnixTime) -> PassPolicy {
        let (resv, license) = self.start_gates(now);
        PassPolicy {
            db: std::mem::take(&mut self.accounts),
            resv,
            license,
        }
    }

    pub(super) fn end_pass_policy(&mut self, p: PassPolicy) {
        self.accounts = p.db;
    }
}
