//! The association database through the core: who may change it, that a
//! change is persisted only when committed, what a submission is charged
//! to, and a GrpJobs limit holding a job before and after a restart.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ctld::fixtures::{reach, register};
use crate::ctld::{Command, Core, Effect, Reply};
use crate::model::assoc::request::{AcctRequest, Entity, Filter, Settings, Verb};
use crate::model::assoc::AdminLevel;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;
use crate::state::store::Op;

const ALICE: Caller = Caller {
    uid: 1000,
    operator: false,
};

fn conf() -> Config {
    let dir = std::env::temp_dir().join(format!("canopy-acct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let slurm = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n\
                 AccountingStorageEnforce=associations,limits\n\
                 NodeName=n1 CPUs=4 RealMemory=1000\n\
                 PartitionName=p Nodes=n1 Default=YES\n";
    Config::parse_str_with_gres(slurm, &dir.join("slurm.conf"), None).unwrap()
}

fn start(
    jobs: Vec<crate::model::job::JobRecord>,
    db: Option<crate::model::assoc::AssocDb>,
) -> Core {
    let (mut core, _) = Core::recover(Arc::new(conf()), jobs, None, &HashMap::new(), 1000);
    core.recover_accounts(db);
    register(&mut core, 0, 1000);
    reach(&mut core, 0, true, 1000);
    core
}

fn change(
    core: &mut Core,
    who: (&str, Caller),
    commit: bool,
    req: AcctRequest,
) -> (Result<Vec<String>, Vec<String>>, Vec<Op>) {
    let out = core.apply(
        1001,
        Command::Accounts {
            req: Box::new(req),
            commit,
            user: who.0.into(),
            caller: who.1,
        },
    );
    let r = match out.reply {
        Some(Reply::Accounts(Ok(o))) => Ok(o.lines),
        Some(Reply::Accounts(Err(e))) => Err(e.lines),
        other => panic!("{other:?}"),
    };
    (r, out.persist)
}

fn add(entity: Entity, names: &[&str], accounts: &[&str], set: Settings) -> AcctRequest {
    AcctRequest {
        verb: Verb::Add,
        entity,
        filter: Filter {
            names: names.iter().map(|s| s.to_string()).collect(),
            accounts: accounts.iter().map(|s| s.to_string()).collect(),
            ..Filter::default()
        },
        set,
    }
}

fn submit(core: &mut Core, account: Option<&str>) -> Result<u32, String> {
    let s = JobSubmit {
        name: "j".into(),
        uid: 1000,
        user: "alice".into(),
        script: "#!/bin/sh\ntrue\n".into(),
        account: account.map(str::to_string),
        ..Default::default()
    };
    let out = core.apply(
        1001,
        Command::Submit {
            submit: Box::new(s),
            caller: ALICE,
        },
    );
    match out.reply {
        Some(Reply::Submit(r)) => r.map(|r| r.job_id).map_err(|e| e.message),
        other => panic!("{other:?}"),
    }
}

const ROOT: (&str, Caller) = ("root", Caller::ROOT);

#[test]
fn only_administrators_change_the_database_and_only_commits_are_stored() {
    let mut core = start(vec![], None);
    let req = add(Entity::Account, &["chem"], &[], Settings::default());
    let (r, persist) = change(&mut core, ("alice", ALICE), true, req.clone());
    assert_eq!(
        r,
        Err(vec![
            " Problem adding accounts: Access/permission denied".to_string()
        ])
    );
    assert!(persist.is_empty());
    // A preview changes nothing.
    let (r, persist) = change(&mut core, ROOT, false, req.clone());
    assert!(r.unwrap().contains(&"  chem".to_string()));
    assert!(persist.is_empty());
    assert!(!core.accounts().accounts.contains_key("chem"));
    // A commit is stored before anything else leaves.
    let out = core.apply(
        1001,
        Command::Accounts {
            req: Box::new(req),
            commit: true,
            user: "root".into(),
            caller: Caller::ROOT,
        },
    );
    assert!(matches!(&out.persist[..], [Op::PutAccounts(db)] if db.accounts.contains_key("chem")));
    assert!(out.effects.iter().any(|e| matches!(e, Effect::Reschedule)));
    // An Operator-level user may change it too.
    let set = Settings {
        admin_level: Some(AdminLevel::Operator),
        ..Settings::default()
    };
    change(
        &mut core,
        ROOT,
        true,
        add(Entity::User, &["alice"], &["chem"], set),
    )
    .0
    .unwrap();
    let req = add(Entity::Account, &["bio"], &[], Settings::default());
    assert!(change(&mut core, ("alice", ALICE), true, req).0.is_ok());
}

#[test]
fn submissions_are_charged_to_the_default_account_and_limits_hold_them() {
    let mut core = start(vec![], None);
    assert_eq!(
        submit(&mut core, None),
        Err("Invalid account or account/partition combination specified".into())
    );
    let mut set = Settings::default();
    set.assoc.limits.grp_jobs = Some(Some(1));
    change(
        &mut core,
        ROOT,
        true,
        add(Entity::Account, &["chem"], &[], set),
    )
    .0
    .unwrap();
    change(
        &mut core,
        ROOT,
        true,
        add(Entity::User, &["alice"], &["chem"], Settings::default()),
    )
    .0
    .unwrap();
    let first = submit(&mut core, None).unwrap();
    let j = core.jobs().get(first).unwrap();
    assert_eq!(
        (j.submit.account.as_deref(), j.submit.qos.as_deref()),
        (Some("chem"), Some("normal"))
    );
    let second = submit(&mut core, Some("chem")).unwrap();
    core.apply(1002, Command::Schedule);
    let state = |core: &Core, id| core.jobs().get(id).unwrap().state;
    assert_eq!(state(&core, first), JobState::Running);
    assert_eq!(state(&core, second), JobState::Pending);
    let reason = |core: &Core, id| {
        core.jobs()
            .reason(core.jobs().get(id).unwrap(), 1002)
            .to_string()
    };
    assert_eq!(reason(&core, second), "AssocGrpJobsLimit");

    // After a restart the running job is counted again.
    let jobs: Vec<_> = core.jobs().values().cloned().collect();
    let db = core.accounts().clone();
    let mut again = start(jobs, Some(db));
    again.apply(1003, Command::Schedule);
    assert_eq!(state(&again, second), JobState::Pending);
    assert_eq!(reason(&again, second), "AssocGrpJobsLimit");
    // The first ends: the second starts.
    again.apply(
        1004,
        Command::JobEnded {
            job_id: first,
            state: JobState::Completed,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Default::default(),
        },
    );
    again.apply(1005, Command::Schedule);
    assert_eq!(state(&again, second), JobState::Running);
}
