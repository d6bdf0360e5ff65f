//! Power saving through the core (`power.rs`): cloud nodes powered down at
//! start, jobs that power nodes up, ResumeTimeout, idle nodes powered down,
//! rates, operators' power requests, a restart, and a seeded simulation of
//! the whole cycle checked against its invariants.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::command::{Command, Effect, Output, PowerAction, PowerProgram, Reply};
use super::core::Core;
use crate::config::Config;
use crate::ctld::fixtures::{hello, reach};
use crate::model::job::{JobState, JobSubmit};
use crate::model::node::{AdminState, PowerState};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::wire::messages::{NodeUpdate, NodeUpdateState};

const T0: i64 = 10_000;

/// `n[1-2]` ordinary nodes, `cl[1-4]` cloud nodes, all in partition `p`.
fn conf(extra: &str) -> Arc<Config> {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=60\nReturnToService=1\n\
         SuspendProgram=/s\nResumeProgram=/r\nResumeFailProgram=/f\nResumeTimeout=100\n\
         SuspendTimeout=20\n{extra}NodeName=n[1-2] CPUs=2\nNodeName=cl[1-4] CPUs=2 State=CLOUD\n\
         PartitionName=p Nodes=ALL Default=YES\n"
    );
    Arc::new(Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap())
}

fn core(extra: &str) -> Core {
    Core::recover(conf(extra), vec![], None, &HashMap::new(), T0).0
}

/// Node `rank` registers (as its daemon does when it starts) and the tree
/// reaches it.
fn up(c: &mut Core, rank: u32, now: i64) -> Output {
    let conf = c.conf().clone();
    let mut h = hello(rank, &[]);
    h.node = conf.nodes[rank as usize].name.clone();
    h.jobs = c
        .jobs()
        .running()
        .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
        .map(|j| crate::wire::messages::JobReport {
            job_id: j.job_id,
            state: crate::wire::messages::JobOnNode::Running,
        })
        .collect();
    let mut out = c.apply(
        now,
        Command::NodeRegistered {
            hello: Box::new(h),
            via: None,
        },
    );
    let more = reach(c, rank, true, now);
    out.effects.extend(more.effects);
    out.persist.extend(more.persist);
    out
}

fn submit(c: &mut Core, now: i64, nodes: u32, nodelist: Option<&str>) -> u32 {
    let s = JobSubmit {
        name: "j".into(),
        user: "alice".into(),
        uid: 1000,
        script: "#!/bin/sh\ntrue\n".into(),
        min_nodes: Some(nodes),
        req_nodes: nodelist.map(str::to_string),
        ..Default::default()
    };
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

fn programs(out: &Output, action: PowerAction) -> Vec<PowerProgram> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunPowerProgram(p) if p.action == action => Some((**p).clone()),
            _ => None,
        })
        .collect()
}

fn update(c: &mut Core, nodes: &str, state: NodeUpdateState, now: i64) -> Output {
    c.apply(
        now,
        Command::UpdateNodes {
            update: NodeUpdate {
                nodes: nodes.into(),
                state: Some(state),
                reason: None,
            },
            user: "root".into(),
            caller: Caller::ROOT,
        },
    )
}

fn power(c: &Core, rank: usize) -> PowerState {
    c.nodes()[rank].power_state()
}

fn end(c: &mut Core, id: u32, now: i64) -> Output {
    c.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state: JobState::Completed,
            exit: Default::default(),
            reason: JobReason::None,
            usage: Default::default(),
        },
    )
}

/// CLOUD nodes start powered down: `idle~` (IDLE+CLOUD+POWERED_DOWN), not
/// NOT_RESPONDING, and they never time out as not responding.
#[test]
fn cloud_nodes_start_powered_down_and_never_time_out() {
    let mut c = core("");
    for r in 2..6 {
        assert_eq!(power(&c, r), PowerState::PoweredDown);
        assert!(c.slots()[r].available, "placement may use them");
    }
    assert_eq!(power(&c, 0), PowerState::On);
    let info = c.node_info(2).unwrap();
    assert_eq!(info.scontrol_state(), "IDLE+CLOUD+POWERED_DOWN");
    assert_eq!(crate::cli::format::sinfo::state_compact(&info), "idle~");
    // Hidden from sinfo and scontrol without PrivateData=cloud, as in Slurm.
    let shown: Vec<String> = c
        .node_infos(&[], Caller::ROOT)
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(shown, vec!["n1", "n2"]);
    assert!(c.node_infos(&["cl1".into()], Caller::ROOT).is_empty());
    // sdiag's counts agree: idle, not "not responding".
    let (counts, _, _) = c.node_counts();
    assert_eq!(
        (counts.idle, counts.not_responding, counts.unknown),
        (4, 2, 2)
    );
    let c2 = core("PrivateData=cloud\n");
    assert_eq!(c2.node_infos(&[], Caller::ROOT).len(), 6);
    c.apply(T0 + 10_000, Command::Schedule);
    assert!(c.nodes()[2].admin.down.is_none(), "no not-responding clock");
    // An ordinary node that never registers still goes DOWN.
    assert!(c.nodes()[0].admin.down.is_some());
}

/// A job placed on powered-down nodes: ResumeProgram runs with their host
/// list and the JSON file's data, the job is CONFIGURING with its launch
/// held, and it launches when the nodes have registered.
#[test]
fn a_job_powers_its_nodes_up_and_launches_when_they_register() {
    let mut c = core("");
    let id = submit(&mut c, T0, 2, Some("cl[2-3]"));
    let out = c.apply(T0, Command::Schedule);
    assert!(c.is_configuring(id), "CF while the nodes boot");
    let held = out
        .effects
        .iter()
        .any(|e| matches!(e, Effect::StartJob(s) if s.job_id == id && s.held));
    assert!(held, "the launch waits for the nodes: {:?}", out.effects);
    let r = programs(&out, PowerAction::Resume);
    assert_eq!(r.len(), 1, "{:?}", out.effects);
    assert_eq!(r[0].nodes, "cl[2-3]");
    assert_eq!(r[0].program, "/r");
    let json: serde_json::Value =
        serde_json::from_str(r[0].resume_file.as_deref().unwrap()).unwrap();
    assert_eq!(json["all_nodes_resume"], "cl[2-3]");
    assert_eq!(json["jobs"][0]["job_id"], id);
    assert_eq!(json["jobs"][0]["nodes_alloc"], "cl[2-3]");
    assert_eq!(json["jobs"][0]["partition"], "p");
    // The power-up is persisted before the program leaves.
    assert!(out
        .persist
        .iter()
        .any(|op| matches!(op, Op::NodeAdmin { name, state: Some(_) } if name == "cl2")));
    assert_eq!(power(&c, 3), PowerState::PoweringUp);
    let info = c.node_info(3).unwrap();
    assert_eq!(
        info.scontrol_state(),
        "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP"
    );
    assert_eq!(crate::cli::format::sinfo::state_compact(&info), "mix#");
    // One node up: still waiting.
    let out = up(&mut c, 3, T0 + 30);
    let released = |o: &Output| {
        o.effects
            .iter()
            .any(|e| matches!(e, Effect::ReleaseLaunch { job_id } if *job_id == id))
    };
    assert!(!released(&out));
    assert_eq!(power(&c, 3), PowerState::On);
    up(&mut c, 4, T0 + 31);
    let out = c.apply(T0 + 31, Command::Schedule);
    assert!(released(&out), "{:?}", out.effects);
    assert!(!c.is_configuring(id));
    // Its clock starts now, not while the nodes booted.
    assert_eq!(c.jobs().get(id).unwrap().start_time, Some(T0 + 31));
    // No second ResumeProgram for nodes that are up.
    assert!(programs(&out, PowerAction::Resume).is_empty());
}

/// A node that does not register within ResumeTimeout: DOWN ("ResumeTimeout
/// reached"), powered down (`down~`), ResumeFailProgram run with it, and
/// its job requeued.
#[test]
fn resume_timeout_marks_down_and_requeues() {
    let mut c = core("");
    let id = submit(&mut c, T0, 1, Some("cl1"));
    c.apply(T0, Command::Schedule);
    assert_eq!(power(&c, 2), PowerState::PoweringUp);
    let out = c.apply(T0 + 99, Command::PowerSave);
    assert!(programs(&out, PowerAction::ResumeFail).is_empty());
    let out = c.apply(T0 + 100, Command::PowerSave);
    let f = programs(&out, PowerAction::ResumeFail);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].program.as_str(), f[0].nodes.as_str()), ("/f", "cl1"));
    let st = &c.nodes()[2];
    assert_eq!(
        st.admin.down.as_ref().unwrap().text,
        super::power::RESUME_TIMEOUT_REASON
    );
    assert_eq!(st.power_state(), PowerState::PoweredDown);
    let info = c.node_info(2).unwrap();
    assert_eq!(crate::cli::format::sinfo::state_compact(&info), "down~");
    let j = c.jobs().get(id).unwrap();
    assert!(j.requeue.is_some(), "requeued, as slurmctld does");
    assert!(out
        .effects
        .iter()
        .any(|e| matches!(e, Effect::EndJob { job_id, .. } if *job_id == id)));
}

/// Nodes idle for SuspendTime are powered down through SuspendProgram
/// (excluded nodes and partitions are not), POWERING_DOWN for
/// SuspendTimeout, then POWERED_DOWN; their daemon going away is not
/// "not responding".
#[test]
fn idle_nodes_are_powered_down_after_suspend_time() {
    let mut c = core("SuspendTime=300\nSuspendExcNodes=n1\n");
    up(&mut c, 0, T0);
    up(&mut c, 1, T0);
    let out = c.apply(T0 + 290, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty());
    let out = c.apply(T0 + 300, Command::PowerSave);
    let s = programs(&out, PowerAction::Suspend);
    assert_eq!(s.len(), 1, "{:?}", out.effects);
    assert_eq!((s[0].program.as_str(), s[0].nodes.as_str()), ("/s", "n2"));
    assert_eq!(power(&c, 1), PowerState::PoweringDown);
    assert!(!c.slots()[1].available, "no work for a node going down");
    assert_eq!(
        crate::cli::format::sinfo::state_compact(&c.node_info(1).unwrap()),
        "idle%"
    );
    // Its daemon stops: the tree loses it, but nothing times it out.
    reach(&mut c, 1, false, T0 + 301);
    let out = c.apply(T0 + 320, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty(), "once");
    assert_eq!(power(&c, 1), PowerState::PoweredDown);
    c.apply(T0 + 1000, Command::Schedule);
    assert!(c.nodes()[1].admin.down.is_none());
    assert_eq!(
        crate::cli::format::sinfo::state_compact(&c.node_info(1).unwrap()),
        "idle~"
    );
    assert_eq!(power(&c, 0), PowerState::On, "SuspendExcNodes");
}

/// A busy node is not powered down; its idle time starts when it is idle.
#[test]
fn busy_nodes_stay_up() {
    let mut c = core("SuspendTime=100\nSuspendExcParts=nothere\n");
    up(&mut c, 0, T0);
    let id = submit(&mut c, T0, 1, Some("n1"));
    c.apply(T0, Command::Schedule);
    c.apply(T0 + 50, Command::PowerSave);
    c.apply(T0 + 150, Command::PowerSave);
    assert_eq!(power(&c, 0), PowerState::On);
    end(&mut c, id, T0 + 160);
    c.apply(T0 + 200, Command::PowerSave);
    assert_eq!(power(&c, 0), PowerState::On, "idle since 150 only");
    let out = c.apply(T0 + 250, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::Suspend)[0].nodes, "n1");
}

/// ResumeRate bounds the nodes powered up per minute; the rest follow as
/// the count decays.
#[test]
fn resume_rate_limits_power_ups() {
    let mut c = core("ResumeRate=2\n");
    submit(&mut c, T0, 4, Some("cl[1-4]"));
    let out = c.apply(T0, Command::Schedule);
    assert_eq!(programs(&out, PowerAction::Resume)[0].nodes, "cl[1-2]");
    let out = c.apply(T0 + 10, Command::PowerSave);
    assert!(
        programs(&out, PowerAction::Resume).is_empty(),
        "2 this minute"
    );
    let out = c.apply(T0 + 60, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::Resume)[0].nodes, "cl[3-4]");
}

/// `scontrol power down`: no new work, powered down once idle; `asap`
/// drains too; `force` requeues the jobs at once; `power up` resumes.
#[test]
fn operators_power_requests() {
    let mut c = core("");
    up(&mut c, 0, T0);
    up(&mut c, 1, T0);
    let id = submit(&mut c, T0, 1, Some("n1"));
    c.apply(T0, Command::Schedule);
    let out = update(&mut c, "n1", NodeUpdateState::PowerDown, T0 + 1);
    assert!(matches!(out.reply, Some(Reply::Done(Ok(())))));
    assert!(!c.slots()[0].available);
    let info = c.node_info(0).unwrap();
    assert_eq!(info.scontrol_state(), "MIXED+POWER_DOWN");
    assert_eq!(crate::cli::format::sinfo::state_compact(&info), "mix!");
    let out = c.apply(T0 + 2, Command::PowerSave);
    assert!(
        programs(&out, PowerAction::Suspend).is_empty(),
        "its job runs"
    );
    end(&mut c, id, T0 + 3);
    let out = c.apply(T0 + 4, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::Suspend)[0].nodes, "n1");
    // asap: drained with Slurm's reason.
    update(&mut c, "n2", NodeUpdateState::PowerDownAsap, T0 + 5);
    assert_eq!(
        c.nodes()[1].admin.drain.as_ref().unwrap().text,
        "POWER_DOWN_ASAP"
    );
    assert_eq!(
        c.node_info(1).unwrap().scontrol_state(),
        "IDLE+DRAIN+POWER_DOWN"
    );
    // force: the job is requeued and the node goes down at once.
    let mut c = core("");
    up(&mut c, 0, T0);
    let id = submit(&mut c, T0, 1, Some("n1"));
    c.apply(T0, Command::Schedule);
    let out = update(&mut c, "n1", NodeUpdateState::PowerDownForce, T0 + 1);
    assert!(c.jobs().get(id).unwrap().requeue.is_some());
    assert!(out
        .effects
        .iter()
        .any(|e| matches!(e, Effect::EndJob { job_id, .. } if *job_id == id)));
    // power up
    let out = update(&mut c, "cl4", NodeUpdateState::PowerUp, T0 + 2);
    let out2 = c.apply(T0 + 2, Command::Schedule);
    let r: Vec<_> = programs(&out, PowerAction::Resume)
        .into_iter()
        .chain(programs(&out2, PowerAction::Resume))
        .collect();
    assert_eq!(r[0].nodes, "cl4");
    assert_eq!(power(&c, 5), PowerState::PoweringUp);
    // RESUME withdraws a pending power-down.
    let mut c = core("");
    up(&mut c, 0, T0);
    let id = submit(&mut c, T0, 1, Some("n1"));
    c.apply(T0, Command::Schedule);
    update(&mut c, "n1", NodeUpdateState::PowerDown, T0 + 1);
    update(&mut c, "n1", NodeUpdateState::Resume, T0 + 2);
    end(&mut c, id, T0 + 3);
    let out = c.apply(T0 + 4, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty());
    assert!(c.slots()[0].available);
}

/// The power states survive a restart: a cloud node that was running stays
/// on; one powering up keeps its ResumeTimeout and its CONFIGURING job.
#[test]
fn power_state_survives_a_restart() {
    let mut c = core("");
    let id = submit(&mut c, T0, 1, Some("cl1"));
    let out = c.apply(T0, Command::Schedule);
    let mut admin: HashMap<String, AdminState> = HashMap::new();
    let mut store = |out: &Output| {
        for op in &out.persist {
            if let Op::NodeAdmin { name, state } = op {
                match state {
                    Some(b) => {
                        admin.insert(name.clone(), rmp_serde::from_slice(b).unwrap());
                    }
                    None => {
                        admin.remove(name);
                    }
                }
            }
        }
    };
    store(&out);
    let out = up(&mut c, 3, T0 + 1);
    store(&out);
    let _ = update(&mut c, "cl2", NodeUpdateState::PowerUp, T0 + 1);
    let out = c.apply(T0 + 1, Command::Schedule);
    store(&out);
    let jobs: Vec<_> = c.jobs().values().cloned().collect();
    let (mut c2, _) = Core::recover(conf(""), jobs, None, &admin, T0 + 5);
    assert_eq!(power(&c2, 2), PowerState::PoweringUp);
    assert!(c2.is_configuring(id));
    // The timeout counts from the power-up before the restart.
    let out = c2.apply(T0 + 100, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::ResumeFail)[0].nodes, "cl1");
    let _ = id;
}

/// A crash after a job's powered-up node registered, before the pass that resets the job's
/// start time: the restarted controller still resets it, and releases the launch, once the node
/// answers again. A record from before `power_up` was stored (`legacy`) is read the same way
/// when no PrologSlurmctld could be what holds the job.
#[test]
fn a_power_up_finished_just_before_a_crash_still_resets_the_start_time() {
    for legacy in [false, true] {
        let mut c = core("");
        let id = submit(&mut c, T0, 1, Some("cl1"));
        let _ = c.apply(T0, Command::Schedule);
        assert!(
            c.jobs().get(id).unwrap().power_up,
            "marked when its node powers up"
        );
        let _ = up(&mut c, 2, T0 + 40);
        // The crash: the node is on and answered, the pass never ran.
        let admin: HashMap<String, AdminState> = c
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, st)| (c.conf().nodes[i].name.clone(), st.admin.clone()))
            .collect();
        let mut jobs: Vec<_> = c.jobs().values().cloned().collect();
        if legacy {
            jobs.iter_mut().for_each(|j| j.power_up = false);
        }
        let (mut c2, _) = Core::recover(conf(""), jobs, None, &admin, T0 + 50);
        assert_eq!(power(&c2, 2), PowerState::On);
        assert!(c2.is_configuring(id));
        let _ = up(&mut c2, 2, T0 + 60);
        let out = c2.apply(T0 + 60, Command::Schedule);
        let released = out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::ReleaseLaunch { job_id } if *job_id == id));
        assert!(released, "legacy={legacy}: {:?}", out.effects);
        let j = c2.jobs().get(id).unwrap();
        assert_eq!(j.start_time, Some(T0 + 60), "legacy={legacy}");
        assert!(!j.power_up && !j.configuring);
    }
}

fn not_responding(st: &crate::model::node::NodeStatus) -> bool {
    st.admin
        .down
        .as_ref()
        .is_some_and(|d| d.text == super::nodes::NOT_RESPONDING)
}

/// A seeded random life of a small cloud cluster: jobs come and go, nodes
/// register late or never, operators power nodes down and up, timers fire.
/// Invariants: a launch is released only when all its nodes are on; a node
/// is resumed only from POWERED_DOWN and suspended only when idle; nothing
/// powered down is DOWN for "Not responding".
#[test]
fn seeded_power_simulation_keeps_its_invariants() {
    let seed: u64 = std::env::var("POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("power simulation seed {seed} (rerun with POWER_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut c = core("SuspendTime=50\nResumeRate=3\nSuspendRate=2\n");
    let n = c.conf().nodes.len() as u32;
    let mut now = T0;
    let mut jobs: Vec<u32> = Vec::new();
    let (mut resumes, mut suspends, mut releases) = (0, 0, 0);
    for step in 0..400 {
        now += rng.gen_range(0..8);
        let before: Vec<PowerState> = (0..n as usize).map(|r| power(&c, r)).collect();
        let nr_before: Vec<bool> = c.nodes().iter().map(not_responding).collect();
        let idle_before: Vec<bool> = c.slots().iter().map(|s| s.alloc_cpus == 0).collect();
        // An operator's power-down of a powered-down node runs
        // SuspendProgram again, as slurmctld does.
        let asked: Vec<bool> = c
            .nodes()
            .iter()
            .map(|st| st.admin.power.is_some_and(|p| p.down_requested.is_some()))
            .collect();
        let action = rng.gen_range(0..10);
        let out = match action {
            0 | 1 => {
                jobs.push(submit(&mut c, now, rng.gen_range(1..3), None));
                c.apply(now, Command::Schedule)
            }
            2 | 3 => {
                // A powering-up node's daemon comes (or an old one returns).
                let r = rng.gen_range(0..n);
                if power(&c, r as usize) == PowerState::PoweringUp || rng.gen_bool(0.1) {
                    up(&mut c, r, now)
                } else {
                    Output::default()
                }
            }
            4 => {
                let running: Vec<u32> = c.jobs().running().map(|j| j.job_id).collect();
                match running.get(rng.gen_range(0..running.len().max(1))) {
                    Some(&id) => end(&mut c, id, now),
                    None => Output::default(),
                }
            }
            5 => {
                let r = rng.gen_range(0..n) as usize;
                let name = c.conf().nodes[r].name.clone();
                let st = [
                    NodeUpdateState::PowerDown,
                    NodeUpdateState::PowerUp,
                    NodeUpdateState::Resume,
                    NodeUpdateState::PowerDownForce,
                ][rng.gen_range(0..4)];
                update(&mut c, &name, st, now)
            }
            _ => c.apply(now, Command::PowerSave),
        };
        for e in &out.effects {
            match e {
                Effect::RunPowerProgram(p) if p.action == PowerAction::Resume => {
                    resumes += 1;
                    for name in crate::config::hostlist::expand(&p.nodes).unwrap() {
                        let r = c.conf().node_index(&name).unwrap();
                        assert_eq!(
                            before[r],
                            PowerState::PoweredDown,
                            "seed {seed} step {step}: resumed {name}"
                        );
                    }
                }
                Effect::RunPowerProgram(p) if p.action == PowerAction::Suspend => {
                    suspends += 1;
                    for name in crate::config::hostlist::expand(&p.nodes).unwrap() {
                        let r = c.conf().node_index(&name).unwrap();
                        if !asked[r] && action != 5 {
                            assert_ne!(
                                before[r],
                                PowerState::PoweredDown,
                                "seed {seed} step {step}: suspended {name} twice"
                            );
                        }
                        let forced = c.jobs().values().any(|j| j.requeue.is_some());
                        assert!(
                            idle_before[r] || forced || c.slots()[r].alloc_cpus == 0,
                            "seed {seed} step {step}: suspended busy {name}"
                        );
                    }
                }
                Effect::ReleaseLaunch { job_id } => {
                    releases += 1;
                    let a = c.jobs().get(*job_id).unwrap().alloc.clone().unwrap();
                    for r in a.ranks {
                        assert_eq!(
                            power(&c, r as usize),
                            PowerState::On,
                            "seed {seed} step {step}: job {job_id} launched on a node not on"
                        );
                    }
                }
                _ => {}
            }
        }
        // A node DOWN for not responding before it was powered down may
        // stay so; none becomes so while it is not on.
        for (r, st) in c.nodes().iter().enumerate() {
            assert!(
                !not_responding(st) || nr_before[r] || before[r] == PowerState::On,
                "seed {seed} step {step}: powered-down node {r} timed out"
            );
        }
    }
    println!(
        "{} jobs, {resumes} resumes, {suspends} suspends, {releases} launches",
        jobs.len()
    );
    assert!(
        resumes > 0 && suspends > 0 && releases > 0,
        "seed {seed}: the simulation exercised too little"
    );
}

/// With `cloud_reg_addrs` a cloud node's NodeAddr is where it registered
/// from; not an ordinary node's, nor with `cloud_dns`.
#[test]
fn cloud_reg_addrs_takes_a_cloud_nodes_address_from_its_link() {
    let addr = |c: &mut Core, node: &str, rank: usize| {
        c.apply(
            T0,
            Command::NodeAddress {
                node: node.into(),
                addr: "10.1.2.3".into(),
            },
        );
        c.node_info(rank).unwrap().addr
    };
    let mut c = core("SlurmctldParameters=cloud_reg_addrs\n");
    assert_eq!(addr(&mut c, "cl1", 2), "10.1.2.3");
    assert_eq!(addr(&mut c, "n1", 0), "n1", "not a cloud node");
    let mut c = core("");
    assert_eq!(addr(&mut c, "cl1", 2), "cl1", "without cloud_reg_addrs");
    let mut c = core("SlurmctldParameters=cloud_reg_addrs,cloud_dns\n");
    assert_eq!(addr(&mut c, "cl1", 2), "cl1", "cloud_dns: names resolve");
}

/// `scontrol reconfigure` applies new SuspendExcNodes (a node no longer
/// excluded counts its idle time from the reconfigure).
#[test]
fn reconfigure_follows_new_exclusions() {
    let mut c = core("SuspendTime=100\nSuspendExcNodes=n[1-2]\n");
    up(&mut c, 0, T0);
    up(&mut c, 1, T0);
    let out = c.apply(T0 + 200, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty());
    let out = c.apply(
        T0 + 201,
        Command::Reconfigure {
            conf: conf("SuspendTime=100\nSuspendExcNodes=n1\n"),
        },
    );
    assert!(
        matches!(out.reply, Some(Reply::Reconfigure(Ok(())))),
        "{:?}",
        out.reply
    );
    // Its idle time counts from the reconfigure.
    let out = c.apply(T0 + 250, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty());
    let out = c.apply(T0 + 300, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::Suspend)[0].nodes, "n2");
}

/// Power saving turned on by `scontrol reconfigure` works without a
/// restart: the timer asks every second, the core decides what is due. A
/// node idle since it registered is powered down at the first look.
#[test]
fn reconfigure_can_turn_power_saving_on() {
    let mut c = core("");
    up(&mut c, 0, T0);
    let out = c.apply(T0 + 500, Command::PowerSave);
    assert!(programs(&out, PowerAction::Suspend).is_empty());
    c.apply(
        T0 + 501,
        Command::Reconfigure {
            conf: conf("SuspendTime=100\n"),
        },
    );
    let out = c.apply(T0 + 502, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::Suspend)[0].nodes, "n1");
}

/// A ResumeTimeout changed by `scontrol reconfigure` while a node powers
/// up times that node by the new value: the old due time never fires, and
/// the node must not stay POWERING_UP (its job CONFIGURING) for good.
#[test]
fn reconfigure_retimes_a_power_up_under_way() {
    let mut c = core("");
    let id = submit(&mut c, T0, 1, Some("cl1"));
    c.apply(T0, Command::Schedule);
    assert_eq!(power(&c, 2), PowerState::PoweringUp);
    let out = c.apply(
        T0 + 10,
        Command::Reconfigure {
            conf: conf("ResumeTimeout=50\n"),
        },
    );
    assert!(
        matches!(out.reply, Some(Reply::Reconfigure(Ok(())))),
        "{:?}",
        out.reply
    );
    let out = c.apply(T0 + 49, Command::PowerSave);
    assert!(programs(&out, PowerAction::ResumeFail).is_empty());
    let out = c.apply(T0 + 50, Command::PowerSave);
    assert_eq!(programs(&out, PowerAction::ResumeFail).len(), 1);
    assert_eq!(power(&c, 2), PowerState::PoweredDown);
    assert!(c.jobs().get(id).unwrap().requeue.is_some());
}
