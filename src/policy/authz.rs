//! Authorization: who may send which request at all (the role table,
//! [`RPC_ROLES`], checked at the controller's door), and who may act on
//! which job or node ([`check`], in the core).
//!
//! The caller's identity is the verified uid of the request's credential,
//! never a field of the request body. Operators are root, Slurm's
//! SlurmUser (the configured one when the controller runs as root, else the
//! user it runs as) and the users and groups `canopy_operators` names; a
//! user's AdminLevel in the association database lets them change it
//! ([`check_acct_admin`]).

use serde::{Deserialize, Serialize};

/// Who is asking: the credential's uid, and whether that uid is an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub uid: u32,
    pub operator: bool,
}

impl Caller {
    /// An operator acting as root (the controller's own decisions in tests).
    pub const ROOT: Caller = Caller {
        uid: 0,
        operator: true,
    };
}

/// Something a caller wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Submit a job that runs as `uid`.
    SubmitAs { uid: u32 },
    /// Cancel or signal a job, or one of its steps.
    Cancel,
    /// Hold, release, rename, resize, move or re-limit a pending job.
    Update,
    /// Set a job's priority (`scontrol update Priority=`, `--priority`).
    SetPriority,
    /// Release a hold an operator placed.
    ReleaseAdminHold,
    /// `scontrol requeue` / `requeuehold`.
    Requeue,
    /// `scontrol suspend` / `resume`.
    Suspend,
    /// `scontrol top`; users only with `SchedulerParameters=enable_user_top`.
    Top { enable_user_top: bool },
    /// Launch or finish an srun step inside a job.
    Step,
    /// `scontrol update NodeName=...`.
    UpdateNode,
}

/// Who may send a request at all: checked at the controller's door, before
/// anything is decoded further. Ownership of the job a request names is
/// the core's check ([`check`]), since only it knows the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Any authenticated user (queries; a submission as oneself).
    Anyone,
    /// A job's owner, or an operator (cancel, update, steps).
    Owner,
    /// Operators only: root, SlurmUser, the controller's own uid.
    Operator,
    /// The daemons' identity only (node daemons' links and reports).
    Daemon,
}

/// Every request the controller serves, with its one role. A kind not in
/// this table is refused as an unexpected request.
pub const RPC_ROLES: &[(&str, Role)] = &[
    ("Ping", Role::Anyone),
    ("SubmitJob", Role::Anyone),
    ("QueryJobs", Role::Anyone),
    ("QueryNodes", Role::Anyone),
    ("QueryPartitions", Role::Anyone),
    ("QueryStatus", Role::Anyone),
    ("QueryStats", Role::Anyone),
    ("QueryPriority", Role::Anyone),
    ("QueryShares", Role::Anyone),
    ("QueryAcct", Role::Anyone),
    // Anyone may ask; the core lets only operators and users with
    // AdminLevel Operator or Administrator change anything.
    ("AcctMgr", Role::Anyone),
    ("QueryAccounts", Role::Anyone),
    ("QueryStepStats", Role::Owner),
    ("CancelJobs", Role::Owner),
    ("CancelStep", Role::Owner),
    ("UpdateJobs", Role::Owner),
    ("LaunchStep", Role::Owner),
    ("StepComplete", Role::Owner),
    ("UpdateNodes", Role::Operator),
    ("Reconfigure", Role::Operator),
    ("CreateResv", Role::Operator),
    ("UpdateResv", Role::Operator),
    ("DeleteResv", Role::Operator),
    ("CreateNode", Role::Operator),
    ("DeleteNode", Role::Operator),
    // The handler also insists on the daemons' identity.
    ("JoinNode", Role::Operator),
    ("QueryResv", Role::Anyone),
    ("QueryLicenses", Role::Anyone),
    ("Broadcast", Role::Operator),
    ("Hello", Role::Daemon),
    ("Register", Role::Daemon),
    ("Health", Role::Daemon),
    ("BatchFinished", Role::Daemon),
    ("ScriptFailed", Role::Daemon),
    ("StepUsage", Role::Daemon),
    ("ForwardReply", Role::Daemon),
    ("Keepalive", Role::Daemon),
    // A top fans out to every daemon: operators only, so that no user's
    // loop costs the whole cluster.
    ("QueryTop", Role::Operator),
    // Reading is anyone's, as sdiag is; the handler lets only operators reset.
    ("QueryLatency", Role::Anyone),
    // Anyone may ask; operators run anywhere, others only where a job of
    // theirs runs (checked in `daemon::rpc_exec` before anything is sent).
    ("Exec", Role::Anyone),
    // The nodes stop only the asker's own run (or any, for an operator).
    ("ExecInterrupt", Role::Anyone),
    // `canopy tree`: what sinfo shows, folded (PrivateData=nodes is checked by the handler).
    ("QueryTree", Role::Anyone),
    // `canopy events`: other users' job changes and peers' addresses: operators only.
    ("QueryEvents", Role::Operator),
    // The console's probes and traces travel the whole tree, and debug
    // changes what daemons log: operators only.
    ("Probe", Role::Operator),
    ("TraceFanout", Role::Operator),
    ("Debug", Role::Operator),
];

/// The role a request kind needs, if the controller serves it.
pub fn rpc_role(kind: &str) -> Option<Role> {
    RPC_ROLES.iter().find(|(k, _)| *k == kind).map(|&(_, r)| r)
}

/// May `caller` (`daemon`: it holds the daemons' identity) send a request
/// of this `kind`? The refusal is in Slurm's words.
pub fn admit_rpc(caller: Caller, daemon: bool, kind: &str) -> Result<(), Denied> {
    match rpc_role(kind) {
        None => Err(Denied("Unexpected message received")),
        Some(Role::Anyone | Role::Owner) => Ok(()),
        Some(Role::Operator) if caller.operator => Ok(()),
        // Slurm answers a user's reconfigure with this.
        Some(Role::Operator) if kind == "Reconfigure" => Err(Denied("Invalid user id")),
        Some(Role::Operator) => Err(Denied::ACCESS),
        Some(Role::Daemon) if daemon => Ok(()),
        Some(Role::Daemon) => Err(Denied::ACCESS),
    }
}

/// The refusal, in Slurm's words for that action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub &'static str);

impl Denied {
    pub const ACCESS: Denied = Denied("Access/permission denied");
}

/// May `caller` do `action` to something owned by `owner` (the job's uid;
/// `None` for what no user owns: nodes, the configuration)?
pub fn check(caller: Caller, action: Action, owner: Option<u32>) -> Result<(), Denied> {
    if caller.operator {
        return Ok(());
    }
    let own = owner == Some(caller.uid);
    let allowed = match action {
        Action::SubmitAs { uid } => uid == caller.uid,
        Action::Cancel | Action::Update | Action::Requeue | Action::Step => own,
        Action::Top { enable_user_top } => enable_user_top && own,
        Action::SetPriority | Action::ReleaseAdminHold | Action::Suspend | Action::UpdateNode => {
            false
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(Denied::ACCESS)
    }
}

/// May `caller` change the association database (sacctmgr add, modify,
/// delete)? Operators may, and so may users whose `AdminLevel` there
/// (`level`, `None` for a user it does not know) is Operator or
/// Administrator, as slurmdbd decides.
pub fn check_acct_admin(
    caller: Caller,
    level: Option<crate::model::assoc::AdminLevel>,
) -> Result<(), Denied> {
    if caller.operator || level >= Some(crate::model::assoc::AdminLevel::Operator) {
        Ok(())
    } else {
        Err(Denied::ACCESS)
    }
}

/// The identity a submission's body claims (`uid`, `gid`) against its
/// credential's (`caller.uid`, `cred_gid`). A user's job runs as exactly
/// the uid and gid that signed it; an operator (root, SlurmUser) may name
/// anyone (`sbatch --uid/--gid`), whose job then runs as that user.
pub fn check_submit_identity(
    caller: Caller,
    cred_gid: u32,
    uid: u32,
    gid: u32,
) -> Result<(), Denied> {
    if caller.operator || (uid == caller.uid && gid == cred_gid) {
        Ok(())
    } else {
        Err(Denied::ACCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each request kind has exactly one role, and the door keeps users
    /// out of operator and daemon requests with Slurm's words.
    #[test]
    fn every_request_has_one_role_and_the_door_checks_it() {
        let mut kinds: Vec<&str> = RPC_ROLES.iter().map(|(k, _)| *k).collect();
        kinds.sort_unstable();
        let n = kinds.len();
        kinds.dedup();
        assert_eq!(kinds.len(), n, "a kind listed twice");
        let user = ALICE;
        for (kind, role) in RPC_ROLES {
            let r = admit_rpc(user, false, kind);
            match role {
                Role::Anyone | Role::Owner => assert_eq!(r, Ok(()), "{kind}"),
                Role::Operator | Role::Daemon => assert!(r.is_err(), "{kind}"),
            }
            let as_root = admit_rpc(Caller::ROOT, *role == Role::Daemon, kind);
            assert_eq!(as_root, Ok(()), "{kind}");
        }
        assert_eq!(
            admit_rpc(user, false, "Reconfigure"),
            Err(Denied("Invalid user id"))
        );
        assert_eq!(admit_rpc(user, false, "UpdateNodes"), Err(Denied::ACCESS));
        assert!(admit_rpc(Caller::ROOT, true, "NoSuchThing").is_err());
    }

    const ALICE: Caller = Caller {
        uid: 1000,
        operator: false,
    };

    #[test]
    fn owners_act_on_their_own_jobs_only() {
        for a in [
            Action::Cancel,
            Action::Update,
            Action::Requeue,
            Action::Step,
        ] {
            assert_eq!(check(ALICE, a, Some(1000)), Ok(()), "{a:?}");
            assert_eq!(check(ALICE, a, Some(1001)), Err(Denied::ACCESS), "{a:?}");
            assert_eq!(check(Caller::ROOT, a, Some(1001)), Ok(()), "{a:?}");
        }
    }

    #[test]
    fn operator_only_actions_are_refused_to_users_even_on_their_jobs() {
        for a in [
            Action::SetPriority,
            Action::ReleaseAdminHold,
            Action::Suspend,
            Action::UpdateNode,
        ] {
            assert_eq!(check(ALICE, a, Some(1000)), Err(Denied::ACCESS), "{a:?}");
            assert_eq!(check(Caller::ROOT, a, Some(1000)), Ok(()), "{a:?}");
        }
    }

    #[test]
    fn top_needs_enable_user_top_for_users() {
        let top = |enable_user_top| Action::Top { enable_user_top };
        assert!(check(ALICE, top(false), Some(1000)).is_err());
        assert!(check(ALICE, top(true), Some(1000)).is_ok());
        assert!(check(ALICE, top(true), Some(1001)).is_err());
    }

    #[test]
    fn the_account_database_is_for_operators_and_admin_levels() {
        use crate::model::assoc::AdminLevel;
        assert!(check_acct_admin(Caller::ROOT, None).is_ok());
        assert_eq!(check_acct_admin(ALICE, None), Err(Denied::ACCESS));
        assert_eq!(
            check_acct_admin(ALICE, Some(AdminLevel::None)),
            Err(Denied::ACCESS)
        );
        assert!(check_acct_admin(ALICE, Some(AdminLevel::Operator)).is_ok());
        assert!(check_acct_admin(ALICE, Some(AdminLevel::Administrator)).is_ok());
    }

    #[test]
    fn users_submit_only_as_themselves() {
        assert!(check(ALICE, Action::SubmitAs { uid: 1000 }, None).is_ok());
        assert!(check(ALICE, Action::SubmitAs { uid: 0 }, None).is_err());
        assert!(check(Caller::ROOT, Action::SubmitAs { uid: 1000 }, None).is_ok());
    }

    #[test]
    fn a_users_job_carries_the_credentials_uid_and_gid() {
        assert!(check_submit_identity(ALICE, 100, 1000, 100).is_ok());
        // A body naming another group (or user) than the credential's.
        assert_eq!(
            check_submit_identity(ALICE, 100, 1000, 0),
            Err(Denied::ACCESS)
        );
        assert_eq!(
            check_submit_identity(ALICE, 100, 0, 100),
            Err(Denied::ACCESS)
        );
        // Root submits for alice with her group (`sbatch --uid --gid`).
        assert!(check_submit_identity(Caller::ROOT, 0, 1000, 100).is_ok());
    }
}
