//! priority/multifactor through the core: priorities at submission, usage
//! from a job's run, fair share reordering the queue, the calculation on
//! the timer, and usage surviving a restart.

use std::collections::HashMap;
use std::sync::Arc;

use super::command::{Command, Output, Reply};
use super::core::Core;
use crate::config::Config;
use crate::model::acct::Usage;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::state::usage::UsageBook;
use crate::wire::priority::{PriorityQuery, ShareQuery};

const T0: i64 = 1_000_000;

fn core(extra: &str, nodes: &str, now: i64) -> Core {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{nodes}\nPriorityType=priority/multifactor\n{extra}"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let (mut c, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), now);
    c.restore_usage(None, now);
    for rank in 0..c.conf().nodes.len() as u32 {
        crate::ctld::fixtures::register(&mut c, rank, now);
        crate::ctld::fixtures::reach(&mut c, rank, true, now);
    }
    c
}

fn submit(
    c: &mut Core,
    now: i64,
    user: &str,
    account: &str,
    f: impl FnOnce(&mut JobSubmit),
) -> u32 {
    let mut s = JobSubmit {
        name: "j".into(),
        user: user.into(),
        uid: 1000,
        account: Some(account.into()),
        script: "#!/bin/sh\ntrue\n".into(),
        ..Default::default()
    };
    f(&mut s);
    let caller = Caller {
        uid: 1000,
        operator: false,
    };
    match c
        .apply(
            now,
            Command::Submit {
                submit: Box::new(s),
                caller,
            },
        )
        .reply
    {
        Some(Reply::Submit(Ok(r))) => r.job_id,
        other => panic!("{other:?}"),
    }
}

fn end(c: &mut Core, id: u32, now: i64) -> Output {
    c.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state: JobState::Completed,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Usage::default(),
        },
    )
}

fn prio(c: &Core, id: u32) -> u32 {
    c.jobs().get(id).map(|j| j.priority).unwrap_or_default()
}

/// The golden capture's job 9 (tests/golden/INDEX.md): `-N3` on four
/// 2-CPU nodes, weights age 1000, job size 100, partition 1000 → 1056, as
/// Slurm computed it.
#[test]
fn a_submission_gets_slurms_priority_for_the_golden_job() {
    let mut c = core(
        "PriorityWeightAge=1000\nPriorityWeightJobSize=100\nPriorityWeightPartition=1000\n\
         PartitionName=debug Nodes=ALL Default=YES",
        "NodeName=n[1-4] CPUs=2 RealMemory=1000",
        T0,
    );
    let id = submit(&mut c, T0, "root", "root", |s| s.min_nodes = Some(3));
    assert_eq!(prio(&c, id), 1056);
    let r = c.priority_report(&PriorityQuery::default(), Caller::ROOT, T0);
    assert_eq!(r.jobs.len(), 1);
    assert_eq!(
        (r.jobs[0].job_size, r.jobs[0].partition_factor),
        (0.5625, 1.0)
    );
    // A held job and a job waiting for its --begin time are not listed.
    submit(&mut c, T0, "root", "root", |s| s.hold = true);
    submit(&mut c, T0, "root", "root", |s| {
        s.begin_time = Some(T0 + 3600)
    });
    let r = c.priority_report(&PriorityQuery::default(), Caller::ROOT, T0);
    assert_eq!(r.jobs.len(), 1);
}

/// After alice's account has used the cluster, bob's job submitted later
/// outranks alice's; the calculation on the timer ages jobs and decays
/// usage; and usage survives a restart of the core from what it stored.
#[test]
fn fair_share_puts_the_unused_account_first_and_usage_survives_a_restart() {
    let mut c = core(
        "PriorityWeightFairshare=10000\nPriorityWeightAge=100\nPriorityMaxAge=1:00:00\n\
         PriorityDecayHalfLife=1:00:00\nPriorityCalcPeriod=5\n\
         PartitionName=p Nodes=ALL Default=YES",
        "NodeName=n1 CPUs=2",
        T0,
    );
    let first = submit(&mut c, T0, "alice", "chem", |s| s.ntasks = Some(2));
    c.apply(T0, Command::Schedule);
    assert_eq!(c.jobs().get(first).unwrap().state, JobState::Running);
    // Two CPUs for 600 s: billing 2 (no weights: CPUs) × 600 s, decayed
    // as Slurm adds a stretch (0.5^(600/3600)).
    end(&mut c, first, T0 + 600);
    let used = c.usage().get("chem/alice");
    let expected = 1200.0 * 0.5f64.powf(600.0 / 3600.0);
    assert!((used - expected).abs() < 1e-6, "{used} vs {expected}");
    assert_eq!(c.usage().get("chem"), used);
    assert_eq!(c.usage().get("root"), used);
    // A blocker holds the node; then alice, then bob, submit.
    let blocker = submit(&mut c, T0 + 600, "carol", "bio", |s| s.ntasks = Some(2));
    c.apply(T0 + 600, Command::Schedule);
    let a = submit(&mut c, T0 + 610, "alice", "chem", |s| s.ntasks = Some(2));
    let b = submit(&mut c, T0 + 620, "bob", "phys", |s| s.ntasks = Some(2));
    assert!(
        prio(&c, b) > prio(&c, a),
        "{} vs {}",
        prio(&c, b),
        prio(&c, a)
    );
    end(&mut c, blocker, T0 + 700);
    c.apply(T0 + 700, Command::Schedule);
    assert_eq!(c.jobs().get(b).unwrap().state, JobState::Running);
    assert_eq!(c.jobs().get(a).unwrap().state, JobState::Pending);

    // sshare's rows: root, then accounts with their users, users first.
    let rows = c
        .share_report(
            &ShareQuery {
                all_users: true,
                ..Default::default()
            },
            None,
        )
        .rows;
    let names: Vec<(u32, &str, &str)> = rows
        .iter()
        .map(|r| (r.depth, r.account.as_str(), r.user.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (0, "root", ""),
            (1, "bio", ""),
            (2, "bio", "carol"),
            (1, "chem", ""),
            (2, "chem", "alice"),
            (1, "phys", ""),
            (2, "phys", "bob"),
        ]
    );
    let alice = &rows[4];
    assert!(alice.fairshare.unwrap() < rows[6].fairshare.unwrap());
    assert_eq!(
        rows[3].fairshare, None,
        "accounts have none under Fair Tree"
    );

    // The timer's tick: nothing before the period, then the calculation.
    let out = c.apply(T0 + 700, Command::Tick);
    assert!(out.persist.iter().any(|o| matches!(o, Op::PutUsage(_))));
    let out = c.apply(T0 + 800, Command::Tick);
    assert!(!out.persist.iter().any(|o| matches!(o, Op::PutUsage(_))));
    let before = c.usage().get("chem/alice");
    let out = c.apply(T0 + 700 + 3600, Command::Tick);
    let stored = out
        .persist
        .iter()
        .find_map(|o| match o {
            Op::PutUsage(b) => Some(b.as_ref().clone()),
            _ => None,
        })
        .expect("the calculation stores the usage");
    // An hour later alice's usage has halved (since the last accrual).
    let after = c.usage().get("chem/alice");
    assert!(
        after < before * 0.6 && after > before * 0.4,
        "{before} → {after}"
    );
    // alice's pending job has aged to the maximum (1 h): + 100.
    assert!(prio(&c, a) >= 100);

    let ages = out
        .persist
        .iter()
        .find_map(|o| match o {
            Op::PutAges(a) => Some(a.as_ref().clone()),
            _ => None,
        })
        .expect("the calculation stores the ages");
    assert_eq!(
        ages.get(&a),
        Some(&(T0 + 610)),
        "alice's job eligible since its submission"
    );
    let mut stored = stored;
    stored.accrue = ages;
    // A restart: the core is rebuilt and given the stored book.
    let jobs: Vec<_> = c.jobs().values().cloned().collect();
    let conf = c.conf().clone();
    let (mut again, _) = Core::recover(conf, jobs, None, &HashMap::new(), T0 + 5000);
    again.restore_usage(Some(stored.clone()), T0 + 5000);
    assert_eq!(again.usage(), &stored);
    let rows = again
        .share_report(
            &ShareQuery {
                users: vec!["alice".into()],
                ..Default::default()
            },
            None,
        )
        .rows;
    let alice = rows.iter().find(|r| r.user == "alice").unwrap();
    assert_eq!(alice.raw_usage, stored.get("chem/alice"));
}

#[test]
fn under_basic_nothing_changes() {
    let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\n\
                PartitionName=p Nodes=n1 Default=YES\nPriorityWeightFairshare=1000\n";
    let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let (mut c, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), T0);
    c.restore_usage(None, T0);
    let a = submit(&mut c, T0, "alice", "chem", |_| {});
    let b = submit(&mut c, T0, "bob", "chem", |_| {});
    assert_eq!(prio(&c, a), crate::sched::priority::TOP_PRIORITY - 1);
    assert_eq!(prio(&c, b), prio(&c, a) - 1);
    let out = c.apply(T0 + 10_000, Command::Tick);
    assert!(!out.persist.iter().any(|o| matches!(o, Op::PutUsage(_))));
    assert!(
        !c.priority_report(&PriorityQuery::default(), Caller::ROOT, T0)
            .multifactor
    );
    assert_eq!(
        c.usage(),
        &UsageBook {
            last_calc: Some(T0),
            ..Default::default()
        }
    );
}

/// Without `-A`, usage goes to the user's group, else `root`.
#[test]
fn the_account_defaults_to_the_group_then_root() {
    let mut c = core(
        "PartitionName=p Nodes=ALL Default=YES",
        "NodeName=n1 CPUs=2",
        T0,
    );
    let grouped = submit(&mut c, T0, "alice", "", |s| s.group = "lab".into());
    let bare = submit(&mut c, T0, "bob", "", |s| s.account = None);
    let acct = |id| super::priority::account_of(c.jobs().get(id).unwrap());
    assert_eq!(
        (acct(grouped), acct(bare)),
        ("lab".to_string(), "root".to_string())
    );
}

/// `PriorityFlags=NO_FAIR_TREE`: classic fair share; sshare shows every
/// association's factor and no LevelFS. `CALCULATE_RUNNING`: a running
/// job's priority is recalculated too.
#[test]
fn classic_fair_share_and_calculate_running() {
    let mut c = core(
        "PriorityWeightFairshare=1000\nPriorityFlags=NO_FAIR_TREE,CALCULATE_RUNNING\n\
         PartitionName=p Nodes=ALL Default=YES",
        "NodeName=n1 CPUs=2",
        T0,
    );
    let run = submit(&mut c, T0, "alice", "chem", |s| s.ntasks = Some(2));
    c.apply(T0, Command::Schedule);
    assert_eq!(c.jobs().get(run).unwrap().state, JobState::Running);
    let waiting = submit(&mut c, T0, "bob", "phys", |s| s.ntasks = Some(2));
    let before = prio(&c, run);
    let mut out = Output::default();
    c.priority_calc(T0 + 600, &mut out);
    // alice has used it all: 2^(-U_E/S) with U_E = 1, S = 0.5 → 0.25.
    let rows = c
        .share_report(
            &ShareQuery {
                all_users: true,
                ..Default::default()
            },
            None,
        )
        .rows;
    let alice = rows.iter().find(|r| r.user == "alice").unwrap();
    assert!((alice.fairshare.unwrap() - 0.25).abs() < 1e-9, "{alice:?}");
    assert_eq!(alice.level_fs, None);
    let chem = rows
        .iter()
        .find(|r| r.account == "chem" && r.user.is_empty())
        .unwrap();
    assert!(chem.fairshare.is_some());
    // The running job's priority followed its user's usage down.
    assert!(prio(&c, run) < before, "{} → {}", before, prio(&c, run));
    assert_eq!(prio(&c, run), 250);
    assert_eq!(prio(&c, waiting), 1000);
}

/// With an association database, fair share runs over its account tree
/// (nested accounts, their Fairshare=) and usage climbs it; QOS priority
/// and UsageFactor come from the job's QOS.
#[test]
fn fair_share_and_usage_follow_the_association_tree_and_the_qos() {
    use crate::model::assoc::{Assoc, AssocKey, Qos, Shares};
    let mut c = core(
        "PriorityWeightQOS=1000\nPriorityCalcPeriod=1\n",
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 Default=YES",
        T0,
    );
    let db = &mut c.accounts;
    db.ensure_cluster("t");
    for (name, parent, shares) in [
        ("science", "root", 3),
        ("chem", "science", 1),
        ("bio", "root", 1),
    ] {
        let id = db.take_assoc_id();
        db.accounts.insert(name.into(), Default::default());
        let mut a = Assoc::new(id, Some(parent.into()));
        a.shares = Shares::Raw(shares);
        db.assocs.insert(AssocKey::account("t", name), a);
    }
    for (u, a) in [("alice", "chem"), ("carol", "bio")] {
        let id = db.take_assoc_id();
        db.assocs
            .insert(AssocKey::user("t", a, u), Assoc::new(id, None));
    }
    let mut cheap = Qos::new(2, "cheap");
    cheap.priority = 10;
    cheap.usage_factor = 0.5;
    db.qos.insert("cheap".into(), cheap);

    let tree = c.share_tree();
    let path = |name: &str| {
        let mut i = tree.nodes.iter().position(|n| n.name == name).unwrap();
        let mut v = vec![tree.nodes[i].name.clone()];
        while let Some(p) = tree.nodes[i].parent {
            i = p;
            v.push(tree.nodes[i].name.clone());
        }
        v
    };
    assert_eq!(path("alice"), ["alice", "chem", "science", "root"]);
    assert_eq!(path("carol"), ["carol", "bio", "root"]);
    let science = tree.nodes.iter().find(|n| n.name == "science").unwrap();
    assert_eq!(science.shares, 3);

    // alice runs a job under the cheap QOS for 100 s: her usage counts at
    // half, on her association and every account up to root.
    let id = submit(&mut c, T0, "alice", "chem", |s| {
        s.qos = Some("cheap".into())
    });
    c.apply(T0, Command::Schedule);
    assert_eq!(c.jobs().get(id).unwrap().state, JobState::Running);
    let out = c.apply(
        T0 + 100,
        Command::JobEnded {
            job_id: id,
            state: JobState::Completed,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Usage::default(),
        },
    );
    let book: &UsageBook = out
        .persist
        .iter()
        .find_map(|op| match op {
            Op::PutUsage(b) => Some(b.as_ref()),
            _ => None,
        })
        .expect("usage stored at the job's end");
    let raw = |k: &str| book.raw.get(k).copied().unwrap_or(0.0);
    assert!((raw("chem/alice") - 50.0).abs() < 1.0, "{:?}", book.raw);
    for k in ["chem", "science", "root"] {
        assert!(
            (raw(k) - raw("chem/alice")).abs() < 1e-6,
            "{k}: {:?}",
            book.raw
        );
    }
    assert_eq!(raw("bio"), 0.0);
    // The QOS's priority shows in a pending job's factors.
    let pending = submit(&mut c, T0 + 101, "carol", "bio", |s| {
        s.qos = Some("cheap".into());
        s.hold = true;
    });
    let inputs = c.policy_inputs();
    let j = c.jobs().get(pending).unwrap();
    let f = c.job_factors(
        j,
        &c.cluster_shape(&j.partition, &inputs),
        &inputs,
        T0 + 101,
    );
    assert!(f.qos > 0.99, "{f:?}");
}
