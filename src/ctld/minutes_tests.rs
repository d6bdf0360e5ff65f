//! `GrpTRESMins` and `GrpWall` through the core: usage from running jobs
//! holds the next job with Slurm's reason, `safe` counts what running jobs
//! are committed to, a running job is stopped without `safe`, and a held
//! job starts again when usage decays or the limit is raised.

use std::collections::HashMap;
use std::sync::Arc;

use super::command::{Command, Output, Reply};
use super::core::Core;
use crate::config::Config;
use crate::model::assoc::request::{AcctRequest, Entity, Filter, Settings, Verb};
use crate::model::assoc::TresEdit;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;

const T0: i64 = 1_000_000;

fn core(enforce: &str, half_life: &str) -> Core {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=8 RealMemory=1000\n\
         PartitionName=p Nodes=n1 Default=YES\nPriorityType=priority/multifactor\n\
         AccountingStorageEnforce={enforce}\nPriorityDecayHalfLife={half_life}\n"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let (mut c, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), T0);
    c.recover_accounts(None);
    c.restore_usage(None, T0);
    crate::ctld::fixtures::register(&mut c, 0, T0);
    crate::ctld::fixtures::reach(&mut c, 0, true, T0);
    c
}

fn acct(
    c: &mut Core,
    verb: Verb,
    entity: Entity,
    names: &[&str],
    accounts: &[&str],
    set: Settings,
) {
    let req = AcctRequest {
        verb,
        entity,
        filter: Filter {
            names: names.iter().map(|s| s.to_string()).collect(),
            accounts: accounts.iter().map(|s| s.to_string()).collect(),
            ..Filter::default()
        },
        set,
    };
    let out = c.apply(
        T0,
        Command::Accounts {
            req: Box::new(req),
            commit: true,
            user: "root".into(),
            caller: Caller::ROOT,
        },
    );
    match out.reply {
        Some(Reply::Accounts(Ok(_))) => {}
        other => panic!("{other:?}"),
    }
}

fn tres_mins(text: &str) -> Settings {
    let mut s = Settings::default();
    s.assoc.limits.grp_tres_mins = Some(TresEdit::parse(text).unwrap());
    s
}

/// Account `chem` (with `set`) and user alice in it.
fn setup(c: &mut Core, set: Settings) {
    acct(c, Verb::Add, Entity::Account, &["chem"], &[], set);
    acct(
        c,
        Verb::Add,
        Entity::User,
        &["alice"],
        &["chem"],
        Settings::default(),
    );
}

fn submit(c: &mut Core, now: i64, cpus: u32, limit: Option<u32>) -> u32 {
    let s = JobSubmit {
        name: "j".into(),
        user: "alice".into(),
        uid: 1000,
        script: "#!/bin/sh\ntrue\n".into(),
        ntasks: Some(cpus),
        time_limit_min: limit,
        ..Default::default()
    };
    let caller = Caller {
        uid: 1000,
        operator: false,
    };
    let out = c.apply(
        now,
        Command::Submit {
            submit: Box::new(s),
            caller,
        },
    );
    match out.reply {
        Some(Reply::Submit(Ok(r))) => r.job_id,
        other => panic!("{other:?}"),
    }
}

fn end(c: &mut Core, id: u32, state: JobState, now: i64) -> Output {
    c.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Default::default(),
        },
    )
}

fn state(c: &Core, id: u32) -> JobState {
    c.jobs().get(id).unwrap().state
}

fn reason(c: &Core, id: u32, now: i64) -> String {
    c.jobs().reason(c.jobs().get(id).unwrap(), now).to_string()
}

fn calc(c: &mut Core, now: i64) -> Output {
    let mut out = Output::default();
    c.priority_calc(now, &mut out);
    out
}

fn timed_out(out: &Output) -> Vec<u32> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            super::Effect::EndJob {
                job_id,
                state: JobState::Timeout,
                reason: JobReason::TimeLimit,
                ..
            } => Some(*job_id),
            _ => None,
        })
        .collect()
}

#[test]
fn used_minutes_hold_the_next_job_stop_the_running_one_and_decay_away() {
    let mut c = core("associations,limits", "1:00:00");
    setup(&mut c, tres_mins("cpu=100"));
    let a = submit(&mut c, T0, 4, Some(60));
    c.apply(T0, Command::Schedule);
    assert_eq!(state(&c, a), JobState::Running);
    // 4 CPUs × 20 minutes, decayed over a third of the half-life: 63.
    let out = calc(&mut c, T0 + 20 * 60);
    assert!(timed_out(&out).is_empty());
    let mins = c.usage().assoc_use["chem"].tres_mins("cpu");
    assert_eq!(mins, 63);
    assert_eq!(c.usage().assoc_use["root"].tres_mins("cpu"), 63);
    assert_eq!(c.usage().qos_use["normal"].wall_mins(), 15);
    // sshare -l: the limit, the usage in TRES-minutes, what the running
    // job is still committed to (4 CPUs × 40 minutes left).
    let q = crate::wire::priority::ShareQuery {
        all_users: true,
        ..Default::default()
    };
    let report = c.share_report(&q, None);
    let chem = report
        .rows
        .iter()
        .find(|r| r.account == "chem" && r.user.is_empty())
        .unwrap();
    assert_eq!(chem.grp_tres_mins, "cpu=100");
    assert_eq!(
        chem.grp_tres_raw,
        "cpu=63,mem=0,energy=0,node=15,billing=63,fs/disk=0,vmem=0,pages=0"
    );
    assert!(
        chem.tres_run_mins.starts_with("cpu=160,"),
        "{}",
        chem.tres_run_mins
    );
    // Past the limit: the running job is stopped, TIMEOUT / TimeLimit.
    let out = calc(&mut c, T0 + 40 * 60);
    assert_eq!(timed_out(&out), vec![a]);
    end(&mut c, a, JobState::Timeout, T0 + 40 * 60 + 5);
    let b = submit(&mut c, T0 + 41 * 60, 1, Some(10));
    c.apply(T0 + 41 * 60, Command::Schedule);
    assert_eq!(state(&c, b), JobState::Pending);
    assert_eq!(reason(&c, b, T0 + 41 * 60), "AssocGrpCPUMinutesLimit");
    // A restart keeps the usage (stored with the book) and the hold.
    let jobs: Vec<_> = c.jobs().values().cloned().collect();
    let (db, book) = (c.accounts().clone(), c.usage().clone());
    let conf = c.conf().clone();
    let (mut again, _) = Core::recover(conf, jobs, None, &HashMap::new(), T0 + 42 * 60);
    again.recover_accounts(Some(db));
    again.restore_usage(Some(book), T0 + 42 * 60);
    crate::ctld::fixtures::register(&mut again, 0, T0 + 42 * 60);
    crate::ctld::fixtures::reach(&mut again, 0, true, T0 + 42 * 60);
    again.apply(T0 + 42 * 60, Command::Schedule);
    assert_eq!(reason(&again, b, T0 + 42 * 60), "AssocGrpCPUMinutesLimit");
    // An hour later usage has halved: the job starts.
    calc(&mut c, T0 + 100 * 60);
    assert!(c.usage().assoc_use["chem"].tres_mins("cpu") < 100);
    c.apply(T0 + 100 * 60, Command::Schedule);
    assert_eq!(state(&c, b), JobState::Running);
}

#[test]
fn safe_counts_running_jobs_commitments_and_a_raised_limit_releases() {
    let mut c = core("associations,limits,safe", "1:00:00");
    setup(&mut c, tres_mins("cpu=100"));
    let a = submit(&mut c, T0, 1, Some(60));
    let b = submit(&mut c, T0, 1, Some(60));
    let none = submit(&mut c, T0, 1, None);
    c.apply(T0, Command::Schedule);
    assert_eq!(state(&c, a), JobState::Running);
    // 60 committed + 60 asked > 100.
    assert_eq!(state(&c, b), JobState::Pending);
    assert_eq!(reason(&c, b, T0), "AssocGrpCPUMinutesLimit");
    // No time limit never fits under safe.
    assert_eq!(reason(&c, none, T0), "AssocGrpCPUMinutesLimit");
    // Under safe a running job is never stopped.
    let out = calc(&mut c, T0 + 59 * 60);
    assert!(timed_out(&out).is_empty());
    acct(
        &mut c,
        Verb::Modify,
        Entity::Account,
        &["chem"],
        &[],
        tres_mins("cpu=1000"),
    );
    c.apply(T0 + 59 * 60, Command::Schedule);
    assert_eq!(state(&c, b), JobState::Running);
    assert_eq!(reason(&c, none, T0 + 59 * 60), "AssocGrpCPUMinutesLimit");
}

#[test]
fn grp_wall_and_qos_minutes_give_their_own_reasons() {
    // No decay: wall minutes add up as they run.
    let mut c = core("associations,limits", "0");
    let mut set = Settings::default();
    set.assoc.limits.grp_wall = Some(Some(30));
    setup(&mut c, set);
    let a = submit(&mut c, T0, 1, Some(60));
    c.apply(T0, Command::Schedule);
    let out = calc(&mut c, T0 + 40 * 60);
    assert_eq!(timed_out(&out), vec![a]);
    end(&mut c, a, JobState::Timeout, T0 + 40 * 60);
    let b = submit(&mut c, T0 + 40 * 60, 1, Some(5));
    c.apply(T0 + 40 * 60, Command::Schedule);
    assert_eq!(reason(&c, b, T0 + 40 * 60), "AssocGrpWallLimit");

    // A QOS GrpTRESMins takes the association's place.
    let mut q = Settings::default();
    q.qos.grp_tres_mins = Some(TresEdit::parse("cpu=1").unwrap());
    acct(&mut c, Verb::Modify, Entity::Qos, &["normal"], &[], q);
    let mut clear = Settings::default();
    clear.assoc.limits.grp_wall = Some(None);
    acct(&mut c, Verb::Modify, Entity::Account, &["chem"], &[], clear);
    c.apply(T0 + 41 * 60, Command::Schedule);
    assert_eq!(reason(&c, b, T0 + 41 * 60), "QOSGrpCPUMinutesLimit");
}
