//! Reservations and licenses through the core: creating, refusing,
//! scheduling around and into them, their end, and a seeded property test
//! of the rules a pass must never break.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ctld::fixtures::{reach, register};
use crate::ctld::{Command, Core, Effect, Output, Reply};
use crate::model::job::{JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::model::reservation::ResvFlag;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::wire::resv::{ListOp, ResvSpec};

const T0: i64 = 1_000_000;

fn cluster(nodes: u32, extra: &str) -> Config {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{extra}\
         NodeName=n[1-{nodes}] CPUs=2 RealMemory=1000\nPartitionName=p Nodes=n[1-{nodes}] Default=YES\n"
    );
    Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap()
}

fn start(conf: Config) -> Core {
    let n = conf.nodes.len() as u32;
    let (mut core, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), T0);
    for rank in 0..n {
        register(&mut core, rank, T0);
        reach(&mut core, rank, true, T0);
    }
    core
}

const USER: Caller = Caller {
    uid: 1000,
    operator: false,
};

fn spec(f: impl FnOnce(&mut ResvSpec)) -> ResvSpec {
    let mut s = ResvSpec {
        start: Some(T0),
        duration_min: Some(Some(60)),
        users: Some("alice".into()),
        ..Default::default()
    };
    f(&mut s);
    s
}

fn create(core: &mut Core, now: i64, s: ResvSpec) -> Result<String, String> {
    match core
        .apply(
            now,
            Command::CreateResv {
                spec: s,
                caller: Caller::ROOT,
            },
        )
        .reply
    {
        Some(Reply::Resv(r)) => r.map_err(|e| e.message),
        other => panic!("{other:?}"),
    }
}

fn done(out: Output) -> Result<(), String> {
    match out.reply {
        Some(Reply::Done(r)) => r.map_err(|e| e.message),
        other => panic!("{other:?}"),
    }
}

fn submit(core: &mut Core, now: i64, f: impl FnOnce(&mut JobSubmit)) -> Result<u32, String> {
    let mut s = JobSubmit {
        name: "j".into(),
        uid: 1000,
        user: "alice".into(),
        time_limit_min: Some(10),
        script: "#!/bin/sh\ntrue\n".into(),
        ..Default::default()
    };
    f(&mut s);
    match core
        .apply(
            now,
            Command::Submit {
                submit: Box::new(s),
                caller: USER,
            },
        )
        .reply
    {
        Some(Reply::Submit(r)) => r.map(|r| r.job_id).map_err(|e| e.message),
        other => panic!("{other:?}"),
    }
}

/// A pass at `now`; jobs the core tears down (time limits) end at once,
/// as their nodes would report.
fn pass(core: &mut Core, now: i64) {
    let out = core.apply(now, Command::Schedule);
    end_torn_down(core, now, &out);
}

fn end_torn_down(core: &mut Core, now: i64, out: &Output) {
    for e in &out.effects {
        if let Effect::EndJob {
            job_id,
            state,
            reason,
            ..
        } = e
        {
            finish(core, now, *job_id, *state, *reason);
        }
    }
}

fn finish(core: &mut Core, now: i64, id: u32, state: JobState, reason: JobReason) {
    let out = core.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state,
            exit: Default::default(),
            reason,
            usage: Default::default(),
        },
    );
    end_torn_down(core, now, &out);
}

fn nodes_of(core: &Core, id: u32) -> Option<Vec<u32>> {
    core.jobs()
        .get(id)
        .and_then(|j| j.alloc.as_ref())
        .map(|a| a.ranks.clone())
}

fn reason(core: &Core, id: u32, now: i64) -> String {
    let j = core.jobs().get(id).unwrap();
    core.job_info(j, true, now).reason
}

#[test]
fn a_maint_reservation_keeps_other_jobs_off_its_node_and_admits_its_own() {
    let mut core = start(cluster(2, ""));
    let name = create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("maint".into());
            s.nodes = Some("n1".into());
            s.flags = Some("MAINT".into());
        }),
    )
    .unwrap();
    assert_eq!(name, "maint");
    let r = &core.reservations()[0];
    assert_eq!(r.flags_shown(), "MAINT,SPEC_NODES");
    assert_eq!((r.node_list.as_str(), r.cpus), ("n1", 2));
    let outside = submit(&mut core, T0, |_| {}).unwrap();
    let inside = submit(&mut core, T0, |s| s.reservation = Some("maint".into())).unwrap();
    pass(&mut core, T0);
    assert_eq!(nodes_of(&core, outside), Some(vec![1]));
    assert_eq!(nodes_of(&core, inside), Some(vec![0]));
    // Only n1's reservation is left for a third job outside: it waits.
    let third = submit(&mut core, T0, |s| {
        s.exclusive = Some(crate::model::job::Exclusive::Node)
    })
    .unwrap();
    pass(&mut core, T0);
    assert_eq!(nodes_of(&core, third), None);
    // Bob is not in it.
    let bob = submit(&mut core, T0, |s| {
        s.user = "bob".into();
        s.reservation = Some("maint".into());
    });
    assert_eq!(bob.unwrap_err(), "Access denied to requested reservation");
    let unknown = submit(&mut core, T0, |s| s.reservation = Some("nope".into()));
    assert_eq!(unknown.unwrap_err(), "Requested reservation is invalid");
}

#[test]
fn the_only_nodes_left_in_maintenance_give_slurms_reason() {
    let mut core = start(cluster(1, ""));
    create(
        &mut core,
        T0,
        spec(|s| {
            s.nodes = Some("n1".into());
            s.flags = Some("MAINT".into());
        }),
    )
    .unwrap();
    let id = submit(&mut core, T0, |_| {}).unwrap();
    pass(&mut core, T0);
    assert_eq!(
        reason(&core, id, T0),
        "ReqNodeNotAvail, Reserved for maintenance"
    );
}

#[test]
fn names_are_generated_and_creating_is_for_operators() {
    let mut core = start(cluster(4, ""));
    let a = create(&mut core, T0, spec(|s| s.node_cnt = Some(1))).unwrap();
    let b = create(
        &mut core,
        T0,
        spec(|s| {
            s.node_cnt = Some(1);
            s.accounts = Some("Phys".into());
        }),
    )
    .unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("alice_1", "phys_2"));
    // NodeCnt picks nodes no other reservation holds.
    let all = core.reservations();
    assert_eq!(all[0].ranks, vec![0]);
    assert_eq!(all[1].ranks, vec![1]);
    let out = core.apply(
        T0,
        Command::CreateResv {
            spec: spec(|s| s.node_cnt = Some(1)),
            caller: USER,
        },
    );
    assert!(
        matches!(out.reply, Some(Reply::Resv(Err(e))) if e.message == "Access/permission denied")
    );
    assert_eq!(
        create(&mut core, T0, spec(|s| s.name = Some("alice_1".into()))).unwrap_err(),
        "Duplicate reservation name"
    );
    assert_eq!(
        create(&mut core, T0, spec(|s| s.node_cnt = Some(3))).unwrap_err(),
        "Requested nodes are busy"
    );
    assert_eq!(
        create(&mut core, T0, spec(|s| s.nodes = Some("n1".into()))).unwrap_err(),
        "Requested reservation overlaps with another reservation"
    );
    assert!(create(
        &mut core,
        T0,
        spec(|s| {
            s.nodes = Some("n1".into());
            s.flags = Some("OVERLAP".into());
        })
    )
    .is_ok());
    assert_eq!(
        create(&mut core, T0, spec(|s| s.nodes = Some("zz9".into()))).unwrap_err(),
        "Invalid node name specified"
    );
    assert_eq!(
        create(&mut core, T0, spec(|s| s.flags = Some("REPLACE".into()))).unwrap_err(),
        "Reservation flag REPLACE is not supported by canopy"
    );
    assert_eq!(
        create(&mut core, T0 - 3600, spec(|s| s.node_cnt = Some(1))).map(|_| ()),
        Ok(())
    );
}

#[test]
fn busy_nodes_are_refused_unless_jobs_are_ignored() {
    let mut core = start(cluster(1, ""));
    let id = submit(&mut core, T0, |s| s.time_limit_min = Some(30)).unwrap();
    pass(&mut core, T0);
    assert!(nodes_of(&core, id).is_some());
    let at = |start: i64| {
        spec(move |s| {
            s.start = Some(start);
            s.nodes = Some("n1".into());
        })
    };
    assert_eq!(
        create(&mut core, T0, at(T0 + 600)).unwrap_err(),
        "Requested nodes are busy"
    );
    // After the job's time limit, the node is free.
    assert!(create(&mut core, T0, at(T0 + 1800)).is_ok());
    let mut ignore = at(T0);
    ignore.flags = Some("IGNORE_JOBS".into());
    ignore.flags_op = ListOp::Set;
    // It overlaps the one made above: OVERLAP too.
    assert_eq!(
        create(&mut core, T0, ignore.clone()).unwrap_err(),
        "Requested reservation overlaps with another reservation"
    );
    ignore.flags = Some("IGNORE_JOBS,OVERLAP".into());
    assert!(create(&mut core, T0, ignore).is_ok());
}

#[test]
fn a_future_reservation_holds_its_jobs_and_keeps_long_jobs_off_its_nodes() {
    let mut core = start(cluster(2, ""));
    create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("later".into());
            s.start = Some(T0 + 3600);
            s.nodes = Some("n[1-2]".into());
        }),
    )
    .unwrap();
    // Waiting for its reservation holds no place in line: the short job
    // behind it fits before the reservation starts.
    let early = submit(&mut core, T0, |s| s.reservation = Some("later".into())).unwrap();
    let short = submit(&mut core, T0, |s| s.time_limit_min = Some(30)).unwrap();
    let long = submit(&mut core, T0, |s| s.time_limit_min = Some(120)).unwrap();
    pass(&mut core, T0);
    assert_eq!(reason(&core, early, T0), "Reservation");
    assert!(nodes_of(&core, short).is_some());
    assert_eq!(nodes_of(&core, long), None);
    assert_eq!(reason(&core, long, T0), "Resources");
    finish(
        &mut core,
        T0 + 60,
        short,
        JobState::Completed,
        JobReason::None,
    );
    pass(&mut core, T0 + 3600);
    assert!(nodes_of(&core, early).is_some());
}

#[test]
fn an_ended_reservation_is_deleted_and_its_pending_jobs_held() {
    let mut core = start(cluster(1, ""));
    let mk = |name: &str, flags: Option<&str>| {
        let (n, f) = (name.to_string(), flags.map(str::to_string));
        spec(move |s| {
            s.name = Some(n);
            s.start = Some(T0 + 60);
            s.duration_min = Some(Some(1));
            s.nodes = Some("n1".into());
            s.flags = f;
        })
    };
    create(&mut core, T0, mk("held", Some("OVERLAP"))).unwrap();
    create(
        &mut core,
        T0,
        mk("free", Some("OVERLAP,NO_HOLD_JOBS_AFTER_END")),
    )
    .unwrap();
    create(&mut core, T0, mk("daily", Some("OVERLAP,DAILY"))).unwrap();
    // Jobs too big to run in them.
    let big = |core: &mut Core, r: &str| {
        let r = r.to_string();
        submit(core, T0, move |s| {
            s.reservation = Some(r);
            s.min_nodes = Some(2);
        })
    };
    assert_eq!(
        big(&mut core, "held").unwrap_err(),
        "Requested node configuration is not available"
    );
    let held = submit(&mut core, T0, |s| {
        s.reservation = Some("held".into());
        s.begin_time = Some(T0 + 10_000);
    })
    .unwrap();
    let free = submit(&mut core, T0, |s| {
        s.reservation = Some("free".into());
        s.begin_time = Some(T0 + 10_000);
    })
    .unwrap();
    let out = core.apply(T0 + 120, Command::Tick);
    assert!(out
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteResv(n) if n == "held")));
    let names: Vec<String> = core.reservations().into_iter().map(|r| r.name).collect();
    assert_eq!(names, vec!["daily"]);
    let daily = &core.reservations()[0];
    assert_eq!(daily.start, T0 + 60 + 86_400);
    let h = core.jobs().get(held).unwrap();
    assert_eq!(
        (h.priority, h.reason, h.submit.reservation.clone()),
        (0, JobReason::ReservationDeleted, None)
    );
    let f = core.jobs().get(free).unwrap();
    assert!(f.priority > 0 && f.submit.reservation.is_none());
}

#[test]
fn deleting_a_reservation_in_use_is_refused() {
    let mut core = start(cluster(1, ""));
    create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("r".into());
            s.nodes = Some("n1".into());
        }),
    )
    .unwrap();
    let id = submit(&mut core, T0, |s| s.reservation = Some("r".into())).unwrap();
    pass(&mut core, T0);
    let del = |core: &mut Core, caller| {
        done(core.apply(
            T0,
            Command::DeleteResv {
                name: "r".into(),
                caller,
            },
        ))
    };
    assert_eq!(
        del(&mut core, USER).unwrap_err(),
        "Access/permission denied"
    );
    assert_eq!(
        del(&mut core, Caller::ROOT).unwrap_err(),
        "Requested reservation is in use"
    );
    finish(&mut core, T0 + 5, id, JobState::Completed, JobReason::None);
    assert_eq!(del(&mut core, Caller::ROOT), Ok(()));
    assert_eq!(
        del(&mut core, Caller::ROOT).unwrap_err(),
        "Requested reservation is invalid"
    );
}

#[test]
fn updates_change_times_users_and_flags() {
    let mut core = start(cluster(2, ""));
    create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("r".into());
            s.nodes = Some("n1".into());
        }),
    )
    .unwrap();
    let upd = |core: &mut Core, f: &dyn Fn(&mut ResvSpec)| {
        let mut s = ResvSpec {
            name: Some("r".into()),
            ..Default::default()
        };
        f(&mut s);
        done(core.apply(
            T0,
            Command::UpdateResv {
                spec: s,
                caller: Caller::ROOT,
            },
        ))
    };
    upd(&mut core, &|s| {
        s.users = Some("bob".into());
        s.users_op = ListOp::Add;
        s.flags = Some("MAINT,DAILY".into());
        s.duration_min = Some(Some(30));
    })
    .unwrap();
    let r = &core.reservations()[0];
    assert_eq!(r.users.shown(), "alice,bob");
    assert_eq!(r.flags_shown(), "MAINT,DAILY,SPEC_NODES");
    assert_eq!(r.end - r.start, 1800);
    upd(&mut core, &|s| {
        s.flags = Some("DAILY".into());
        s.flags_op = ListOp::Remove;
        s.nodes = Some("n2".into());
    })
    .unwrap();
    let r = &core.reservations()[0];
    assert_eq!(
        (r.flags_shown().as_str(), r.node_list.as_str()),
        ("MAINT,SPEC_NODES", "n2")
    );
    assert_eq!(
        upd(&mut core, &|s| s.name = Some("zz".into())).unwrap_err(),
        "Requested reservation is invalid"
    );
}

#[test]
fn licenses_are_counted_and_a_short_job_waits_with_reason_licenses() {
    let mut core = start(cluster(2, "Licenses=fluent:1,matlab:4\n"));
    let first = submit(&mut core, T0, |s| s.licenses = Some("fluent".into())).unwrap();
    let second = submit(&mut core, T0, |s| s.licenses = Some("fluent:1".into())).unwrap();
    pass(&mut core, T0);
    assert!(nodes_of(&core, first).is_some());
    assert_eq!(nodes_of(&core, second), None);
    assert_eq!(reason(&core, second, T0), "Licenses");
    let lic = core.license_infos(T0);
    assert_eq!(
        (lic[0].name.as_str(), lic[0].used, lic[0].total),
        ("fluent", 1, 1)
    );
    finish(
        &mut core,
        T0 + 5,
        first,
        JobState::Completed,
        JobReason::None,
    );
    pass(&mut core, T0 + 5);
    assert!(nodes_of(&core, second).is_some());
    for bad in ["fluent:2", "abaqus", "matlab:x"] {
        let r = submit(&mut core, T0, |s| s.licenses = Some(bad.into()));
        assert_eq!(r.unwrap_err(), "Invalid license specification", "{bad}");
    }
    // A reservation holds licenses for its own jobs.
    create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("lic".into());
            s.licenses = Some("matlab:3".into());
        }),
    )
    .unwrap();
    assert!(core.reservations()[0].has(ResvFlag::AnyNodes));
    // Not reserved twice over at the same time.
    assert_eq!(
        create(
            &mut core,
            T0,
            spec(|s| s.licenses = Some("matlab:2".into()))
        )
        .unwrap_err(),
        "Invalid license specification"
    );
    let outside = submit(&mut core, T0, |s| s.licenses = Some("matlab:2".into())).unwrap();
    let inside = submit(&mut core, T0, |s| {
        s.licenses = Some("matlab:3".into());
        s.reservation = Some("lic".into());
    })
    .unwrap();
    pass(&mut core, T0 + 6);
    assert_eq!(nodes_of(&core, outside), None);
    assert_eq!(core.license_infos(T0 + 6)[1].reserved, 3);
    let _ = inside;
}

/// A small deterministic generator (xorshift64*), so a failure replays
/// from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn seed() -> u64 {
    if let Some(s) = std::env::var("CANOPY_RESV_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return s;
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() | 1
}

/// Random reservations (flags, windows, node lists and counts, updates and
/// deletes) and jobs (in and out of them, with licenses) over simulated
/// time: after every step no job holds a node of an active reservation it
/// is not in (unless the reservation was made over running jobs with
/// IGNORE_JOBS or MAINT), a job in a reservation runs on its nodes, and no
/// license is handed out beyond its total.
#[test]
fn seeded_reservations_and_licenses_never_break_the_rules() {
    let seed = seed();
    eprintln!("reservation property test: seed {seed} (replay: CANOPY_RESV_SEED={seed})");
    let mut rng = Rng(seed);
    let mut core = start(cluster(6, "Licenses=lic:3,tool:1\n"));
    let mut now = T0;
    let flag_words = [
        "MAINT",
        "IGNORE_JOBS",
        "OVERLAP",
        "FLEX",
        "DAILY",
        "PURGE_COMP=60",
    ];
    let users = ["alice", "bob"];
    // Reservations made over running jobs: those jobs may keep their nodes.
    let mut tolerated: Vec<(String, u32)> = Vec::new();
    let (mut created, mut started_in_resv, mut short_of_licenses) = (0, 0, 0);
    let mut started_as: HashMap<u32, (bool, bool)> = HashMap::new();
    for step in 0..400 {
        match rng.below(11) {
            0 | 1 => {
                let mut s = spec(|_| {});
                s.start = Some(now + rng.below(1200) as i64 - 60);
                s.duration_min = Some(Some(1 + rng.below(30) as u32));
                s.users = Some(users[rng.below(2) as usize].into());
                if rng.chance(50) {
                    let a = 1 + rng.below(6);
                    let b = (a + rng.below(3)).min(6);
                    s.nodes = Some(format!("n[{a}-{b}]"));
                } else if rng.chance(80) {
                    s.node_cnt = Some(1 + rng.below(3) as u32);
                } else {
                    s.licenses = Some(format!("lic:{}", 1 + rng.below(3)));
                }
                let flags: Vec<&str> = flag_words
                    .iter()
                    .filter(|_| rng.chance(15))
                    .copied()
                    .collect();
                if !flags.is_empty() {
                    s.flags = Some(flags.join(","));
                }
                let running: Vec<(u32, Vec<u32>)> = core
                    .jobs()
                    .running()
                    .map(|j| {
                        (
                            j.job_id,
                            j.alloc
                                .as_ref()
                                .map(|a| a.ranks.clone())
                                .unwrap_or_default(),
                        )
                    })
                    .collect();
                if let Ok(name) = create(&mut core, now, s) {
                    created += 1;
                    let r = core
                        .reservations()
                        .into_iter()
                        .find(|r| r.name == name)
                        .unwrap();
                    if r.has(ResvFlag::IgnoreJobs) || r.has(ResvFlag::Maint) {
                        for (id, ranks) in running {
                            if ranks.iter().any(|x| r.ranks.contains(x)) {
                                tolerated.push((name.clone(), id));
                            }
                        }
                    }
                }
            }
            2 => {
                let all = core.reservations();
                if !all.is_empty() {
                    let name = all[rng.below(all.len() as u64) as usize].name.clone();
                    let _ = core.apply(
                        now,
                        Command::DeleteResv {
                            name,
                            caller: Caller::ROOT,
                        },
                    );
                }
            }
            3..=6 => {
                let all = core.reservations();
                let mut user = users[rng.below(2) as usize];
                let picked = (rng.chance(40) && !all.is_empty())
                    .then(|| &all[rng.below(all.len() as u64) as usize]);
                // Mostly a user it admits; now and then one it refuses.
                if let Some(r) = picked.filter(|_| rng.chance(80)) {
                    user = users
                        .iter()
                        .find(|u| r.users.admits(u))
                        .copied()
                        .unwrap_or(user);
                }
                let resv = picked.map(|r| r.name.clone());
                let lic = rng.chance(40).then(|| {
                    ["lic:1", "lic:2", "tool", "lic,tool"][rng.below(4) as usize].to_string()
                });
                let limit = 1 + rng.below(20) as u32;
                // Reservations' jobs fit in them (one node); others may span two.
                let nodes = if picked.is_some() {
                    1
                } else {
                    1 + rng.below(2) as u32
                };
                let _ = submit(&mut core, now, |s| {
                    s.user = user.into();
                    s.reservation = resv;
                    s.licenses = lic;
                    s.time_limit_min = Some(limit);
                    s.min_nodes = Some(nodes);
                });
            }
            7 | 8 => {
                let running: Vec<u32> = core.jobs().running().map(|j| j.job_id).collect();
                if !running.is_empty() {
                    let id = running[rng.below(running.len() as u64) as usize];
                    finish(&mut core, now, id, JobState::Completed, JobReason::None);
                }
            }
            _ => {
                now += rng.below(240) as i64;
                let out = core.apply(now, Command::Tick);
                end_torn_down(&mut core, now, &out);
            }
        }
        pass(&mut core, now);
        // A job started in a MAINT or OVERLAP reservation may pass others
        // (Slurm's rule) and keeps doing so after its own one is gone.
        let resvs = core.reservations();
        for j in core.jobs().running() {
            let own = j.submit.reservation.as_deref();
            if let Some(r) = own.and_then(|o| resvs.iter().find(|r| r.name == o)) {
                started_as
                    .entry(j.job_id)
                    .or_insert((r.has(ResvFlag::Maint), r.has(ResvFlag::Overlap)));
            }
        }
        check(&core, now, &tolerated, &started_as, seed, step);
        started_in_resv += core
            .jobs()
            .running()
            .filter(|j| j.start_time == Some(now) && j.submit.reservation.is_some())
            .count();
        short_of_licenses += core
            .jobs()
            .values()
            .filter(|j| j.state == JobState::Pending && j.reason == JobReason::Licenses)
            .count();
    }
    eprintln!(
        "{created} reservations made, {started_in_resv} jobs started in one, \
         {short_of_licenses} job-passes short of licenses"
    );
    // The run exercised what it checks.
    assert!(created > 5, "seed {seed}");
}

fn check(
    core: &Core,
    now: i64,
    tolerated: &[(String, u32)],
    started_as: &HashMap<u32, (bool, bool)>,
    seed: u64,
    step: u32,
) {
    let ctx = || format!("seed {seed} (CANOPY_RESV_SEED={seed}), step {step}, t={now}");
    let resvs = core.reservations();
    let mut used: HashMap<String, u32> = HashMap::new();
    for j in core.jobs().running().filter(|j| j.ending_as.is_none()) {
        let ranks = j
            .alloc
            .as_ref()
            .map(|a| a.ranks.clone())
            .unwrap_or_default();
        let own = j.submit.reservation.as_deref();
        for r in resvs.iter().filter(|r| r.active(now) && r.holds_nodes()) {
            if Some(r.name.as_str()) == own {
                if !r.has(ResvFlag::Flex) {
                    assert!(
                        ranks.iter().all(|x| r.ranks.contains(x)),
                        "job {} of {} runs outside it: {:?} vs {:?}; {}",
                        j.job_id,
                        r.name,
                        ranks,
                        r.ranks,
                        ctx()
                    );
                }
                continue;
            }
            if tolerated
                .iter()
                .any(|(n, id)| *n == r.name && *id == j.job_id)
            {
                continue;
            }
            // Slurm's job_test_resv: a MAINT reservation's jobs pass every
            // other reservation, an OVERLAP one's every other but MAINT.
            let (maint, overlap) = started_as.get(&j.job_id).copied().unwrap_or_default();
            if maint || (overlap && !r.has(ResvFlag::Maint)) {
                continue;
            }
            assert!(
                !ranks.iter().any(|x| r.ranks.contains(x)),
                "job {} ({:?}, of {:?}) holds a node of active reservation {} ({:?}); \
                 reservations {:?}; {}",
                j.job_id,
                ranks,
                own,
                r.name,
                r.ranks,
                resvs
                    .iter()
                    .map(|r| (&r.name, r.start, r.end, &r.ranks, r.flags_shown()))
                    .collect::<Vec<_>>(),
                ctx()
            );
        }
        for (name, n) in j
            .submit
            .licenses
            .as_deref()
            .and_then(|l| crate::model::reservation::parse_licenses(l).ok())
            .unwrap_or_default()
        {
            *used.entry(name).or_default() += n;
        }
    }
    for (name, total) in &core.conf().license_counts {
        let u = used.get(name).copied().unwrap_or(0);
        assert!(
            u <= *total,
            "license {name}: {u} used of {total}; {}",
            ctx()
        );
    }
}

#[test]
fn purge_comp_deletes_a_reservation_idle_for_its_time() {
    let mut core = start(cluster(1, ""));
    create(
        &mut core,
        T0,
        spec(|s| {
            s.name = Some("p".into());
            s.nodes = Some("n1".into());
            s.flags = Some("PURGE_COMP=1:00".into());
        }),
    )
    .unwrap();
    assert_eq!(
        core.reservations()[0].flags_shown(),
        "SPEC_NODES,PURGE_COMP=00:01:00"
    );
    let id = submit(&mut core, T0, |s| s.reservation = Some("p".into())).unwrap();
    pass(&mut core, T0);
    core.apply(T0 + 100, Command::Tick);
    assert_eq!(core.reservations().len(), 1, "busy: kept");
    finish(
        &mut core,
        T0 + 110,
        id,
        JobState::Completed,
        JobReason::None,
    );
    core.apply(T0 + 120, Command::Tick);
    core.apply(T0 + 170, Command::Tick);
    assert_eq!(core.reservations().len(), 1, "idle 50 s of 60: kept");
    let out = core.apply(T0 + 180, Command::Tick);
    assert!(core.reservations().is_empty());
    assert!(out
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteResv(n) if n == "p")));
}

#[test]
fn reservations_are_stored_and_recovered_and_ones_ended_meanwhile_end() {
    use crate::state::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let mut core = start(cluster(3, ""));
    let mut ops = Vec::new();
    for (name, minutes) in [(Some("short"), 1), (Some("long"), 60), (None, 60)] {
        let out = core.apply(
            T0,
            Command::CreateResv {
                spec: spec(|s| {
                    s.name = name.map(str::to_string);
                    s.node_cnt = Some(1);
                    s.duration_min = Some(Some(minutes));
                }),
                caller: Caller::ROOT,
            },
        );
        assert!(matches!(out.reply, Some(Reply::Resv(Ok(_)))));
        ops.extend(out.persist);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    {
        let (store, _) = Store::open(dir.path()).unwrap();
        rt.block_on(store.commit(ops)).unwrap();
    }
    // The old writer thread lets go of the files as it sees its queue close.
    let recovered = (0..100)
        .find_map(|_| match Store::open(dir.path()) {
            Ok((_, r)) => Some(r),
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                None
            }
        })
        .expect("the store reopens");
    assert_eq!(recovered.reservations.len(), 3);
    assert_eq!(recovered.resv_suffix, Some(1));
    // Back after the short one's end: it ends at once; the others stay,
    // with wake-ups for their ends.
    let mut again = start(cluster(3, ""));
    let out = again.restore_reservations(recovered.reservations, recovered.resv_suffix, T0 + 120);
    let names: Vec<String> = again.reservations().into_iter().map(|r| r.name).collect();
    assert_eq!(names, vec!["alice_1", "long"]);
    assert!(out
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteResv(n) if n == "short")));
    assert!(out
        .effects
        .iter()
        .any(|e| matches!(e, Effect::WakeAt(t) if *t == T0 + 3600)));
    // Generated names go on from the stored counter.
    let n = create(&mut again, T0 + 120, spec(|s| s.node_cnt = Some(1))).unwrap();
    assert_eq!(n, "alice_2");
}
