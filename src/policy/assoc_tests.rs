//! The association and QOS rules: submit-time resolution and limits,
//! every run-limit reason and its precedence, and a seeded property test
//! that no running set ever passes a Grp limit anywhere up the tree.

use rand::{Rng, SeedableRng};

use super::assoc::{self, Refusal, Resolved, SubmitCounts};
use super::assoc_gate::AssocGate;
use crate::config::AcctEnforce;
use crate::model::assoc::{Assoc, AssocDb, AssocKey, Qos, QosFlag, Shares, TresEdit, ROOT};
use crate::model::job::{Allocation, ExitStatus, JobRecord, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::sched::gate::StartGate;

const C: &str = "c1";

fn tres(s: &str) -> crate::model::assoc::Tres {
    let mut t = crate::model::assoc::Tres::default();
    TresEdit::parse(s).unwrap().apply(&mut t);
    t
}

/// root → science → chem (alice, bob); root → bio (carol).
fn tree() -> AssocDb {
    let mut d = AssocDb::default();
    d.ensure_cluster(C);
    let acct = |d: &mut AssocDb, name: &str, parent: &str| {
        let id = d.take_assoc_id();
        d.accounts.insert(name.into(), Default::default());
        d.assocs.insert(
            AssocKey::account(C, name),
            Assoc::new(id, Some(parent.into())),
        );
    };
    acct(&mut d, "science", ROOT);
    acct(&mut d, "chem", "science");
    acct(&mut d, "bio", ROOT);
    for (u, a) in [("alice", "chem"), ("bob", "chem"), ("carol", "bio")] {
        let id = d.take_assoc_id();
        d.assocs
            .insert(AssocKey::user(C, a, u), Assoc::new(id, None));
        d.users.insert(
            u.into(),
            crate::model::assoc::User {
                name: u.into(),
                default_account: a.into(),
                admin_level: Default::default(),
            },
        );
    }
    let mut high = Qos::new(2, "high");
    high.priority = 10;
    d.qos.insert("high".into(), high);
    d
}

fn limits<'a>(d: &'a mut AssocDb, account: &str, user: &str) -> &'a mut Assoc {
    d.assocs.get_mut(&AssocKey::user(C, account, user)).unwrap()
}

fn job(id: u32, user: &str, account: &str, cpus: u32) -> JobRecord {
    JobRecord {
        earlier_runs: Vec::new(),
        job_id: id,
        submit: JobSubmit {
            user: user.into(),
            account: Some(account.into()),
            qos: Some("normal".into()),
            ntasks: Some(cpus),
            mem_per_cpu_mb: Some(100),
            ..Default::default()
        },
        partition: "p".into(),
        time_limit_min: Some(60),
        state: JobState::Pending,
        reason: JobReason::None,
        priority: 1,
        submit_time: 0,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: ExitStatus::default(),
        restarts: 0,
        ending_as: None,
        next_step: 0,
        steps: vec![],
        array: None,
        dependency: None,
        requeue: None,
        priority_set: false,
        mail_sent: 0,
        configuring: false,
        power_up: false,
        preempted: None,
        suspend: Default::default(),
        preempt_suspended: None,
    }
}

fn alloc_for(j: &JobRecord) -> Allocation {
    let cpus = j.submit.ntasks.unwrap_or(1);
    Allocation {
        ranks: vec![0],
        cpus: vec![cpus],
        tasks: vec![cpus],
        mem_mb: u64::from(cpus) * 100,
        ..Default::default()
    }
}

fn running(mut j: JobRecord) -> JobRecord {
    j.alloc = Some(alloc_for(&j));
    j.state = JobState::Running;
    j
}

fn reason(d: &AssocDb, run: &[JobRecord], j: &JobRecord) -> Option<String> {
    let g = AssocGate::new(d, C, true, run.iter());
    g.blocked(j, 0).map(|r| r.to_string())
}

const ALL: AcctEnforce = AcctEnforce {
    associations: true,
    limits: true,
    qos: true,
    safe: false,
};

#[test]
fn submit_resolves_the_default_account_and_qos() {
    let mut d = tree();
    let r = assoc::resolve(&d, C, ALL, "alice", None, None).unwrap();
    assert_eq!(r.account.as_deref(), Some("chem"));
    assert_eq!(r.qos.as_deref(), Some("normal"));
    assert_eq!(r.assoc, Some(AssocKey::user(C, "chem", "alice")));
    // No association in the account asked for, or none at all.
    assert_eq!(
        assoc::resolve(&d, C, ALL, "alice", Some("bio"), None),
        Err(Refusal::InvalidAccount)
    );
    assert_eq!(
        assoc::resolve(&d, C, ALL, "dave", None, None),
        Err(Refusal::InvalidAccount)
    );
    assert_eq!(
        Refusal::InvalidAccount.to_string(),
        "Invalid account or account/partition combination specified"
    );
    // Without enforcement the job runs as asked, with the default filled in.
    let none = AcctEnforce::default();
    assert_eq!(
        assoc::resolve(&d, C, none, "dave", Some("x"), None)
            .unwrap()
            .account
            .as_deref(),
        Some("x")
    );
    // A QOS the association may not use; one it may; its default.
    assert_eq!(
        assoc::resolve(&d, C, ALL, "alice", None, Some("high")),
        Err(Refusal::InvalidQos)
    );
    assert_eq!(
        assoc::resolve(&d, C, ALL, "alice", None, Some("nosuch")),
        Err(Refusal::InvalidQos)
    );
    let chem = d.assocs.get_mut(&AssocKey::account(C, "chem")).unwrap();
    chem.qos = Some(
        ["normal".to_string(), "high".to_string()]
            .into_iter()
            .collect(),
    );
    chem.default_qos = Some("high".into());
    let r = assoc::resolve(&d, C, ALL, "alice", None, Some("normal")).unwrap();
    assert_eq!(r.qos.as_deref(), Some("normal"));
    let r = assoc::resolve(&d, C, ALL, "bob", None, None).unwrap();
    assert_eq!(r.qos.as_deref(), Some("high"));
    let _ = &mut d;
}

#[test]
fn submit_limits_count_unfinished_jobs_up_the_tree() {
    let mut d = tree();
    limits(&mut d, "chem", "alice").limits.max_submit_jobs = Some(2);
    let r = assoc::resolve(&d, C, ALL, "alice", None, None).unwrap();
    assert!(assoc::has_submit_limits(&d, &r));
    let jobs = [job(1, "alice", "chem", 1), job(2, "bob", "chem", 1)];
    let counts = SubmitCounts::of(&d, C, jobs.iter());
    assert_eq!(assoc::check_submit(&d, &r, "alice", &counts, 1), Ok(()));
    assert_eq!(
        assoc::check_submit(&d, &r, "alice", &counts, 2),
        Err(Refusal::Policy)
    );
    // GrpSubmitJobs on a parent counts everyone below it.
    limits(&mut d, "chem", "alice").limits.max_submit_jobs = None;
    d.assocs
        .get_mut(&AssocKey::account(C, "science"))
        .unwrap()
        .limits
        .grp_submit_jobs = Some(2);
    assert_eq!(
        assoc::check_submit(&d, &r, "alice", &counts, 1),
        Err(Refusal::Policy)
    );
    // A QOS's MaxSubmitJobsPerUser.
    d.assocs
        .get_mut(&AssocKey::account(C, "science"))
        .unwrap()
        .limits
        .grp_submit_jobs = None;
    d.qos.get_mut("normal").unwrap().max_submit_jobs_per_user = Some(1);
    assert_eq!(
        assoc::check_submit(&d, &r, "alice", &counts, 1),
        Err(Refusal::Policy)
    );
    assert_eq!(
        Refusal::Policy.to_string(),
        "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    );
}

#[test]
fn deny_on_limit_refuses_a_job_over_its_qos_per_job_limits() {
    let mut d = tree();
    let q = d.qos.get_mut("normal").unwrap();
    q.max_wall = Some(30);
    let r = Resolved {
        account: Some("chem".into()),
        qos: Some("normal".into()),
        assoc: Some(AssocKey::user(C, "chem", "alice")),
    };
    let s = job(1, "alice", "chem", 1).submit;
    // Without the flag the job is left pending instead.
    assert_eq!(assoc::check_deny_on_limit(&d, &r, &s, Some(60)), Ok(()));
    d.qos
        .get_mut("normal")
        .unwrap()
        .flags
        .insert(QosFlag::DenyOnLimit);
    assert_eq!(
        assoc::check_deny_on_limit(&d, &r, &s, Some(60)),
        Err(Refusal::Policy)
    );
    assert_eq!(assoc::check_deny_on_limit(&d, &r, &s, Some(30)), Ok(()));
}

#[test]
fn every_run_limit_holds_with_its_reason() {
    let base = tree();
    let a1 = running(job(1, "alice", "chem", 2));
    let next = job(2, "alice", "chem", 2);
    type Setup = fn(&mut AssocDb);
    let cases: &[(Setup, &str)] = &[
        (
            |d| limits(d, "chem", "alice").limits.max_jobs = Some(1),
            "AssocMaxJobsLimit",
        ),
        (
            |d| {
                d.assocs
                    .get_mut(&AssocKey::account(C, "chem"))
                    .unwrap()
                    .limits
                    .grp_jobs = Some(1)
            },
            "AssocGrpJobsLimit",
        ),
        (
            |d| {
                d.assocs
                    .get_mut(&AssocKey::account(C, "science"))
                    .unwrap()
                    .limits
                    .grp_tres = tres("cpu=3")
            },
            "AssocGrpCpuLimit",
        ),
        (
            |d| {
                d.assocs
                    .get_mut(&AssocKey::account(C, ROOT))
                    .unwrap()
                    .limits
                    .grp_tres = tres("mem=300")
            },
            "AssocGrpMemLimit",
        ),
        (
            |d| limits(d, "chem", "alice").limits.grp_tres = tres("node=1"),
            "AssocGrpNodeLimit",
        ),
        (
            |d| limits(d, "chem", "alice").limits.max_tres_per_job = tres("cpu=1"),
            "AssocMaxCpuPerJobLimit",
        ),
        (
            |d| {
                d.assocs
                    .get_mut(&AssocKey::account(C, "science"))
                    .unwrap()
                    .limits
                    .max_wall = Some(30)
            },
            "AssocMaxWallDurationPerJobLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().max_jobs_per_user = Some(1),
            "QOSMaxJobsPerUserLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().max_tres_per_user = tres("cpu=3"),
            "QOSMaxCpuPerUserLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().grp_tres = tres("cpu=3"),
            "QOSGrpCpuLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().grp_jobs = Some(1),
            "QOSGrpJobsLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().max_wall = Some(10),
            "QOSMaxWallDurationPerJobLimit",
        ),
        (
            |d| d.qos.get_mut("normal").unwrap().max_tres_per_job = tres("cpu=1"),
            "QOSMaxCpuPerJobLimit",
        ),
    ];
    for (setup, want) in cases {
        let mut d = base.clone();
        setup(&mut d);
        assert_eq!(
            reason(&d, std::slice::from_ref(&a1), &next).as_deref(),
            Some(*want),
            "{want}"
        );
    }
    // Nothing set: it may start.
    assert_eq!(reason(&base, std::slice::from_ref(&a1), &next), None);
    // GRES: a group limit on GPUs.
    let mut d = base.clone();
    limits(&mut d, "chem", "alice").limits.grp_tres = tres("gres/gpu=1");
    let mut g = job(3, "alice", "chem", 1);
    g.submit.resources.gres = crate::model::tres::parse_gres("gpu:2").unwrap();
    assert_eq!(reason(&d, &[], &g).as_deref(), Some("AssocGrpGRES"));
    // Without `limits` enforced nothing holds.
    let mut d = base.clone();
    limits(&mut d, "chem", "alice").limits.max_jobs = Some(0);
    let off = AssocGate::new(&d, C, false, std::iter::empty());
    assert_eq!(off.blocked(&next, 0), None);
}

#[test]
fn a_qos_limit_takes_the_place_of_the_associations_and_grp_limits_all_apply() {
    let mut d = tree();
    // The association allows 30 minutes, the QOS two hours: the QOS's wins.
    limits(&mut d, "chem", "alice").limits.max_wall = Some(30);
    d.qos.get_mut("normal").unwrap().max_wall = Some(120);
    let j = job(1, "alice", "chem", 1);
    assert_eq!(reason(&d, &[], &j), None);
    // The user's own MaxJobs wins over the account's.
    d.assocs
        .get_mut(&AssocKey::account(C, "chem"))
        .unwrap()
        .limits
        .max_jobs = Some(5);
    limits(&mut d, "chem", "alice").limits.max_jobs = Some(1);
    let run = [running(job(2, "alice", "chem", 1))];
    assert_eq!(reason(&d, &run, &j).as_deref(), Some("AssocMaxJobsLimit"));
    limits(&mut d, "chem", "alice").limits.max_jobs = Some(3);
    assert_eq!(reason(&d, &run, &j), None);
    // A Grp limit two levels up counts bob's job against alice.
    d.assocs
        .get_mut(&AssocKey::account(C, "science"))
        .unwrap()
        .limits
        .grp_jobs = Some(1);
    let run = [running(job(3, "bob", "chem", 1))];
    assert_eq!(reason(&d, &run, &j).as_deref(), Some("AssocGrpJobsLimit"));
    // carol's job elsewhere in the tree does not count.
    let run = [running(job(4, "carol", "bio", 1))];
    assert_eq!(reason(&d, &run, &j), None);
    // A start in the same pass is counted at once.
    let mut g = AssocGate::new(&d, C, true, std::iter::empty());
    assert_eq!(g.blocked(&j, 0), None);
    let b = job(5, "bob", "chem", 1);
    g.started(&b, &alloc_for(&b), 0);
    assert!(matches!(g.blocked(&j, 0), Some(JobReason::Limit(_))));
}

/// Random trees and jobs: starting whatever the gate allows, and ending
/// jobs at random, never puts more running jobs or CPUs under an
/// association than any Grp limit on it or above it allows.
#[test]
fn no_running_set_ever_passes_a_grp_limit_up_the_tree() {
    let seeds: Vec<u64> = match std::env::var("CANOPY_ASSOC_SEED") {
        Ok(s) => vec![s.parse().expect("CANOPY_ASSOC_SEED is a number")],
        Err(_) => (0..300).collect(),
    };
    for seed in seeds {
        scenario(seed);
    }
}

fn scenario(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut d = AssocDb::default();
    d.ensure_cluster(C);
    // A random tree: each new account under root or an earlier one.
    let mut accounts = vec![ROOT.to_string()];
    for i in 0..rng.gen_range(1..7) {
        let name = format!("a{i}");
        let parent = accounts[rng.gen_range(0..accounts.len())].clone();
        let mut a = Assoc::new(d.take_assoc_id(), Some(parent));
        a.shares = Shares::Raw(rng.gen_range(1..10));
        if rng.gen_bool(0.5) {
            a.limits.grp_jobs = Some(rng.gen_range(0..4));
        }
        if rng.gen_bool(0.5) {
            a.limits.grp_tres = tres(&format!("cpu={}", rng.gen_range(1..10)));
        }
        d.assocs.insert(AssocKey::account(C, &name), a);
        accounts.push(name);
    }
    if rng.gen_bool(0.3) {
        d.assocs
            .get_mut(&AssocKey::account(C, ROOT))
            .unwrap()
            .limits
            .grp_jobs = Some(rng.gen_range(1..6));
    }
    let mut users = Vec::new();
    for i in 0..rng.gen_range(1..6) {
        let acct = accounts[rng.gen_range(0..accounts.len())].clone();
        let name = format!("u{i}");
        let mut a = Assoc::new(d.take_assoc_id(), None);
        if rng.gen_bool(0.3) {
            a.limits.grp_jobs = Some(rng.gen_range(0..3));
        }
        if rng.gen_bool(0.3) {
            a.limits.max_jobs = Some(rng.gen_range(0..3));
        }
        d.assocs.insert(AssocKey::user(C, &acct, &name), a);
        users.push((name, acct));
    }
    let mut pending: Vec<JobRecord> = Vec::new();
    let mut run: Vec<JobRecord> = Vec::new();
    let mut next_id = 1;
    for _step in 0..60 {
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..5) {
                    let (u, a) = &users[rng.gen_range(0..users.len())];
                    pending.push(job(next_id, u, a, rng.gen_range(1..5)));
                    next_id += 1;
                }
            }
            1 if !run.is_empty() => {
                let i = rng.gen_range(0..run.len());
                run.swap_remove(i);
            }
            _ => {
                // One pass over the pending jobs, in order.
                let mut g = AssocGate::new(&d, C, true, run.iter());
                let mut still = Vec::new();
                for j in pending.drain(..) {
                    if g.blocked(&j, 0).is_none() {
                        let alloc = alloc_for(&j);
                        g.started(&j, &alloc, 0);
                        run.push(running(j));
                    } else {
                        still.push(j);
                    }
                }
                pending = still;
            }
        }
        check(&d, &run, seed);
    }
}

fn check(d: &AssocDb, run: &[JobRecord], seed: u64) {
    for (k, a) in &d.assocs {
        // The running jobs at or below association `k`.
        let below: Vec<&JobRecord> = run
            .iter()
            .filter(|j| {
                let acct = j.submit.account.as_deref().unwrap_or_default();
                if k.is_user() {
                    k.account == acct && k.user == j.submit.user
                } else {
                    d.ancestors(C, acct).iter().any(|(x, _)| *x == k)
                }
            })
            .collect();
        let jobs = below.len() as u32;
        let cpus: u64 = below
            .iter()
            .map(|j| u64::from(j.submit.ntasks.unwrap_or(1)))
            .sum();
        let replay = format!("seed {seed}: replay with CANOPY_ASSOC_SEED={seed}");
        if let Some(l) = a.limits.grp_jobs {
            assert!(jobs <= l, "{replay}: {k:?} runs {jobs} jobs, GrpJobs={l}");
        }
        if let Some(l) = a.limits.grp_tres.get("cpu") {
            assert!(
                cpus <= l,
                "{replay}: {k:?} runs {cpus} CPUs, GrpTRES=cpu={l}"
            );
        }
        if let (true, Some(l)) = (k.is_user(), a.limits.max_jobs) {
            assert!(jobs <= l, "{replay}: {k:?} runs {jobs} jobs, MaxJobs={l}");
        }
    }
}

#[test]
fn partition_access_lists_refuse_accounts_and_qos() {
    let p = crate::config::PartitionAccess {
        allow_accounts: Some(vec!["chem".into()]),
        deny_qos: vec!["high".into()],
        ..Default::default()
    };
    assert_eq!(
        assoc::check_partition(&p, Some("chem"), Some("normal")),
        Ok(())
    );
    assert_eq!(
        assoc::check_partition(&p, Some("bio"), Some("normal")),
        Err(Refusal::InvalidAccount)
    );
    assert_eq!(
        assoc::check_partition(&p, None, None),
        Err(Refusal::InvalidAccount)
    );
    assert_eq!(
        assoc::check_partition(&p, Some("chem"), Some("high")),
        Err(Refusal::InvalidQos)
    );
    let open = crate::config::PartitionAccess::default();
    assert_eq!(assoc::check_partition(&open, None, None), Ok(()));
}

#[test]
fn a_partitions_qos_limits_every_job_in_it_before_the_jobs_own() {
    let mut d = tree();
    let mut part = Qos::new(3, "part");
    part.max_jobs_per_user = Some(1);
    d.qos.insert("part".into(), part);
    let pc = crate::config::PartitionConf {
        name: "p".into(),
        nodes: vec![],
        default: true,
        max_time_min: None,
        default_time_min: None,
        max_nodes: None,
        min_nodes: 0,
        state: crate::wire::types::PartitionState::Up,
        preempt: Default::default(),
        access: crate::config::PartitionAccess {
            qos: Some("part".into()),
            ..Default::default()
        },
        opts: Default::default(),
        dynamic_join: Default::default(),
    };
    let parts = [pc];
    let run = [running(job(1, "alice", "chem", 1))];
    let j = job(2, "alice", "chem", 1);
    let g = AssocGate::with_partitions(&d, C, &parts, true, run.iter());
    assert_eq!(
        g.blocked(&j, 0).map(|r| r.to_string()).as_deref(),
        Some("QOSMaxJobsPerUserLimit")
    );
    // Another user is not held by alice's count.
    let b = job(3, "bob", "chem", 1);
    assert_eq!(g.blocked(&b, 0), None);
}
