//! `GrpTRESMins` and `GrpWall` through the limits gate: the reasons and
//! their precedence (QOS before association, each level up the tree),
//! and a seeded property test that under `safe` the jobs a pass starts
//! never commit more CPU-minutes than any level has left.

use rand::{Rng, SeedableRng};

use super::assoc_gate::AssocGate;
use crate::model::assoc::{Assoc, AssocDb, AssocKey, Qos, TresEdit, ROOT};
use crate::model::job::{Allocation, JobRecord, JobState, JobSubmit};
use crate::sched::gate::StartGate;
use crate::state::usage::{GroupUse, UsageBook};

const C: &str = "c1";
const NOW: i64 = 1_000_000;

fn tres(s: &str) -> crate::model::assoc::Tres {
    let mut t = crate::model::assoc::Tres::default();
    TresEdit::parse(s).unwrap().apply(&mut t);
    t
}

/// root → science → chem (alice, bob).
fn tree() -> AssocDb {
    let mut d = AssocDb::default();
    d.ensure_cluster(C);
    for (name, parent) in [("science", ROOT), ("chem", "science")] {
        let id = d.take_assoc_id();
        d.accounts.insert(name.into(), Default::default());
        d.assocs.insert(
            AssocKey::account(C, name),
            Assoc::new(id, Some(parent.into())),
        );
    }
    for u in ["alice", "bob"] {
        let id = d.take_assoc_id();
        d.assocs
            .insert(AssocKey::user(C, "chem", u), Assoc::new(id, None));
    }
    d
}

fn account<'a>(d: &'a mut AssocDb, name: &str) -> &'a mut Assoc {
    d.assocs.get_mut(&AssocKey::account(C, name)).unwrap()
}

fn job(id: u32, user: &str, cpus: u32, limit: Option<u32>) -> JobRecord {
    JobRecord {
        earlier_runs: Vec::new(),
        suspend: Default::default(),
        preempt_suspended: None,
        job_id: id,
        submit: JobSubmit {
            user: user.into(),
            account: Some("chem".into()),
            qos: Some("normal".into()),
            ntasks: Some(cpus),
            ..Default::default()
        },
        partition: "p".into(),
        time_limit_min: limit,
        state: JobState::Pending,
        reason: Default::default(),
        priority: 1,
        submit_time: 0,
        start_time: None,
        end_time: None,
        alloc: None,
        exit: Default::default(),
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
    }
}

fn alloc(cpus: u32) -> Allocation {
    Allocation {
        ranks: vec![0],
        cpus: vec![cpus],
        tasks: vec![cpus],
        ..Default::default()
    }
}

fn started(mut j: JobRecord, at: i64) -> JobRecord {
    j.alloc = Some(alloc(j.submit.ntasks.unwrap_or(1)));
    j.state = JobState::Running;
    j.start_time = Some(at);
    j
}

/// A book where `key` has used `cpu_mins` CPU-minutes and `wall_mins`.
fn used(book: &mut UsageBook, key: &str, cpu_mins: u64, wall_mins: u64) {
    let g = book.assoc_use.entry(key.into()).or_default();
    g.tres.insert("cpu".into(), cpu_mins as f64 * 60.0);
    g.wall = wall_mins as f64 * 60.0;
}

fn reason(
    d: &AssocDb,
    book: &UsageBook,
    safe: bool,
    run: &[JobRecord],
    j: &JobRecord,
) -> Option<String> {
    let g = AssocGate::with_usage(d, C, &[], true, book, safe, NOW, run.iter());
    g.blocked(j, NOW).map(|r| r.to_string())
}

#[test]
fn every_level_up_the_tree_holds_and_a_qos_limit_comes_first() {
    let mut d = tree();
    account(&mut d, "science").limits.grp_tres_mins = tres("cpu=1000");
    let mut book = UsageBook::default();
    let j = job(1, "alice", 2, Some(60));
    assert_eq!(reason(&d, &book, false, &[], &j), None);
    // The account above chem has used its minutes.
    used(&mut book, "science", 1000, 0);
    assert_eq!(
        reason(&d, &book, false, &[], &j).as_deref(),
        Some("AssocGrpCPUMinutesLimit")
    );
    // A QOS with UsageFactor=0 adds no usage: its jobs pass used minutes.
    let mut free = Qos::new(3, "free");
    free.usage_factor = 0.0;
    d.qos.insert("free".into(), free);
    let mut f = job(9, "alice", 2, Some(60));
    f.submit.qos = Some("free".into());
    assert_eq!(reason(&d, &book, true, &[], &f), None);
    d.qos.remove("free");
    // A QOS limit on cpu minutes replaces the association's.
    let mut q = Qos::new(1, "normal");
    q.grp_tres_mins = tres("cpu=5000");
    d.qos.insert("normal".into(), q);
    assert_eq!(reason(&d, &book, false, &[], &j), None);
    book.qos_use.insert(
        "normal".into(),
        GroupUse {
            tres: [("cpu".to_string(), 5000.0 * 60.0)].into_iter().collect(),
            wall: 0.0,
        },
    );
    assert_eq!(
        reason(&d, &book, false, &[], &j).as_deref(),
        Some("QOSGrpCPUMinutesLimit")
    );
    // GrpWall on the user's own association, with safe: 50 used + 60.
    d.qos.clear();
    account(&mut d, "science").limits.grp_tres_mins = Default::default();
    d.assocs
        .get_mut(&AssocKey::user(C, "chem", "alice"))
        .unwrap()
        .limits
        .grp_wall = Some(100);
    used(&mut book, "chem/alice", 0, 50);
    assert_eq!(reason(&d, &book, false, &[], &j), None);
    assert_eq!(
        reason(&d, &book, true, &[], &j).as_deref(),
        Some("AssocGrpWallLimit")
    );
    // Memory minutes name memory.
    account(&mut d, "chem").limits.grp_tres_mins = tres("mem=10");
    let mut m = job(2, "bob", 1, Some(60));
    m.submit.mem_per_node_mb = Some(100);
    assert_eq!(
        reason(&d, &book, true, &[], &m).as_deref(),
        Some("AssocGrpMemMinutes")
    );
}

#[test]
fn safe_counts_what_running_jobs_have_left() {
    let mut d = tree();
    account(&mut d, "chem").limits.grp_tres_mins = tres("cpu=100");
    let book = UsageBook::default();
    // 1 CPU × 60 minutes started 30 minutes ago: 30 left.
    let a = started(job(1, "alice", 1, Some(60)), NOW - 30 * 60);
    let fits = job(2, "bob", 1, Some(70));
    let too_big = job(3, "bob", 1, Some(71));
    assert_eq!(
        reason(&d, &book, true, std::slice::from_ref(&a), &fits),
        None
    );
    assert_eq!(
        reason(&d, &book, true, std::slice::from_ref(&a), &too_big).as_deref(),
        Some("AssocGrpCPUMinutesLimit")
    );
    // Without safe, only used minutes count.
    assert_eq!(reason(&d, &book, false, &[a], &too_big), None);
    // Jobs started in the same pass count at once.
    let mut g = AssocGate::with_usage(&d, C, &[], true, &book, true, NOW, std::iter::empty());
    let first = job(4, "alice", 1, Some(60));
    assert_eq!(g.blocked(&first, NOW), None);
    g.started(&first, &alloc(1), NOW);
    assert!(g.blocked(&job(5, "bob", 1, Some(60)), NOW).is_some());
}

/// With `safe`, for every association with a CPU-minutes limit: used +
/// what its running jobs are committed to never passes the limit once a
/// job has started under it, whatever the tree, the usage and the jobs.
#[test]
fn safe_passes_never_commit_past_any_level() {
    let seed: u64 = std::env::var("CANOPY_MINUTES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("minutes seed: {seed} (replay with CANOPY_MINUTES_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..200 {
        let mut d = tree();
        let mut book = UsageBook::default();
        let keys: [(AssocKey, &str); 5] = [
            (AssocKey::account(C, ROOT), "root"),
            (AssocKey::account(C, "science"), "science"),
            (AssocKey::account(C, "chem"), "chem"),
            (AssocKey::user(C, "chem", "alice"), "chem/alice"),
            (AssocKey::user(C, "chem", "bob"), "chem/bob"),
        ];
        for (k, name) in &keys {
            if rng.gen_bool(0.6) {
                let limit = rng.gen_range(1..2_000u64);
                d.assocs.get_mut(k).unwrap().limits.grp_tres_mins = tres(&format!("cpu={limit}"));
                used(&mut book, name, rng.gen_range(0..limit + limit / 4), 0);
            }
        }
        let mut run: Vec<JobRecord> = Vec::new();
        let mut next = 1;
        for _ in 0..rng.gen_range(1..6) {
            let mut g = AssocGate::with_usage(&d, C, &[], true, &book, true, NOW, run.iter());
            let mut starts = Vec::new();
            for _ in 0..rng.gen_range(1..15) {
                let user = if rng.gen_bool(0.5) { "alice" } else { "bob" };
                let limit = rng.gen_bool(0.9).then(|| rng.gen_range(1..120));
                let j = job(next, user, rng.gen_range(1..8), limit);
                next += 1;
                if g.blocked(&j, NOW).is_none() {
                    g.started(&j, &alloc(j.submit.ntasks.unwrap_or(1)), NOW);
                    starts.push(started(j, NOW));
                }
            }
            drop(g);
            run.extend(starts);
            if !run.is_empty() && rng.gen_bool(0.3) {
                run.swap_remove(rng.gen_range(0..run.len()));
            }
            for (k, name) in &keys {
                let Some(limit) = d.assocs[k].limits.grp_tres_mins.get("cpu") else {
                    continue;
                };
                let under: u64 = run
                    .iter()
                    .filter(|j| k.user.is_empty() || j.submit.user == k.user)
                    .map(|j| {
                        u64::from(j.submit.ntasks.unwrap_or(1))
                            * u64::from(j.time_limit_min.unwrap_or(u32::MAX))
                    })
                    .sum();
                let have = book.assoc_use[*name].tres_mins("cpu");
                assert!(
                    under == 0 || have + under <= limit,
                    "seed {seed} round {round}: {name} used {have} + committed {under} > {limit}"
                );
            }
        }
    }
}
