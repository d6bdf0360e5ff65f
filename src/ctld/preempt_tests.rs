//! Preemption through the controller core: who is preempted for whom
//! (by partition tier or by QOS), grace times, requeue and cancel, and
//! suspending (`SUSPEND,GANG`) with the victim's CPUs lent and taken back.
use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ctld::fixtures::{reach, register};
use crate::ctld::{Command, Core, Effect, Output, Reply};
use crate::model::acct::Usage;
use crate::model::job::{ExitStatus, JobState, JobSubmit};
use crate::model::reason::JobReason;
use crate::policy::authz::Caller;
use crate::wire::messages::KillCause;

const ALICE: Caller = Caller {
    uid: 1000,
    operator: false,
};

/// One two-CPU node shared by a low and a high partition.
fn core(low: &str, global: &str) -> Core {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{global}\nNodeName=n1 CPUs=2\n\
         PartitionName=low Nodes=n1 Default=YES PriorityTier=1 {low}\n\
         PartitionName=high Nodes=n1 PriorityTier=2\n"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let mut c = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0;
    register(&mut c, 0, 1000);
    reach(&mut c, 0, true, 1000);
    c
}

const PARTITION_PRIO: &str = "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE";

fn submit(core: &mut Core, part: &str, now: i64, f: impl FnOnce(&mut JobSubmit)) -> u32 {
    let mut s = JobSubmit {
        name: part.into(),
        uid: 1000,
        user: "alice".into(),
        partition: Some(part.into()),
        ntasks: Some(2),
        script: "#!/bin/sh\n".into(),
        ..Default::default()
    };
    f(&mut s);
    let out = core.apply(
        now,
        Command::Submit {
            submit: Box::new(s),
            caller: ALICE,
        },
    );
    match out.reply {
        Some(Reply::Submit(Ok(r))) => r.job_id,
        other => panic!("{other:?}"),
    }
}

fn ended(out: &Output) -> Vec<(u32, JobState, Option<KillCause>)> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::EndJob {
                job_id,
                state,
                cause,
                ..
            } => Some((*job_id, *state, *cause)),
            _ => None,
        })
        .collect()
}

fn signals(out: &Output, id: u32) -> Vec<i32> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::SignalJob { job_id, signal, .. } if *job_id == id => Some(*signal),
            _ => None,
        })
        .collect()
}

fn wakes(out: &Output) -> Vec<i64> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::WakeAt(t) => Some(*t),
            _ => None,
        })
        .collect()
}

fn job_ended(core: &mut Core, id: u32, state: JobState, now: i64) -> Output {
    core.apply(
        now,
        Command::JobEnded {
            job_id: id,
            state,
            exit: ExitStatus::default(),
            reason: JobReason::None,
            usage: Usage::default(),
        },
    )
}

fn state(core: &Core, id: u32) -> JobState {
    core.jobs().get(id).unwrap().state
}

#[test]
fn a_higher_tier_job_requeues_a_lower_one_and_starts_when_it_is_gone() {
    let mut c = core("", PARTITION_PRIO);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    assert_eq!(state(&c, low), JobState::Running);
    let high = submit(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
    // The preemptor waits for the resources to come back.
    assert_eq!(state(&c, high), JobState::Pending);
    assert_eq!(
        c.jobs().reason(c.jobs().get(high).unwrap(), 1100),
        JobReason::Resources
    );
    // A second pass while it goes does not preempt again.
    assert!(ended(&c.apply(1101, Command::Schedule)).is_empty());
    job_ended(&mut c, low, JobState::Preempted, 1102);
    // Requeued: pending again, its run accounted PREEMPTED.
    let j = c.jobs().get(low).unwrap();
    assert_eq!(
        (j.state, j.restarts, j.preempted),
        (JobState::Pending, 1, None)
    );
    // The run is its own record for sacct -D, ended PREEMPTED.
    let runs: Vec<_> = j
        .earlier_runs
        .iter()
        .map(|r| (r.state, r.start_time, r.end_time))
        .collect();
    assert_eq!(runs, [(JobState::Preempted, Some(1000), Some(1102))]);
    c.apply(1102, Command::Schedule);
    assert_eq!(state(&c, high), JobState::Running);
    assert_eq!(state(&c, low), JobState::Pending);
}

#[test]
fn grace_time_warns_first_and_cancel_mode_ends_the_job_preempted() {
    let mut c = core("PreemptMode=CANCEL GraceTime=30", PARTITION_PRIO);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert!(ended(&out).is_empty(), "not before its grace time");
    assert_eq!(signals(&out, low), [18, 15]);
    assert!(wakes(&out).contains(&1130));
    assert!(
        out.persist.iter().any(|op| matches!(op,
            crate::state::store::Op::PutJob(j) if j.job_id == low && j.preempted.is_some())),
        "the grace deadline is on disk"
    );
    assert!(ended(&c.apply(1129, Command::Schedule)).is_empty());
    let out = c.apply(1130, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
    job_ended(&mut c, low, JobState::Preempted, 1131);
    assert_eq!(
        state(&c, low),
        JobState::Preempted,
        "cancelled, not requeued"
    );
}

#[test]
fn a_restart_keeps_the_grace_deadline() {
    let mut c = core("GraceTime=60", PARTITION_PRIO);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    c.apply(1100, Command::Schedule);
    let records: Vec<_> = c.jobs().values().cloned().collect();
    let conf = c.conf().clone();
    let (mut again, out) = Core::recover(conf, records, None, &HashMap::new(), 1120);
    assert!(wakes(&out).contains(&1160), "{:?}", out.effects);
    register(&mut again, 0, 1120);
    reach(&mut again, 0, true, 1120);
    let out = again.apply(1160, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
}

#[test]
fn who_is_spared_same_tier_off_mode_exempt_time_and_no_requeue() {
    // Same tier: no preemption.
    let mut c = core("PriorityTier=2", PARTITION_PRIO);
    submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
    // The low partition's own PreemptMode=OFF.
    let mut c = core("PreemptMode=OFF", PARTITION_PRIO);
    submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
    // PreemptExemptTime: not before it has run 5 minutes.
    let mut c = core("", &format!("{PARTITION_PRIO}\nPreemptExemptTime=5"));
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
    assert_eq!(ended(&c.apply(1300, Command::Schedule)).len(), 1);
    assert_eq!(state(&c, low), JobState::Running, "still tearing down");
    // --no-requeue under REQUEUE: killed instead.
    let mut c = core("", PARTITION_PRIO);
    let low = submit(&mut c, "low", 1000, |s| s.no_requeue = true);
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    c.apply(1100, Command::Schedule);
    job_ended(&mut c, low, JobState::Preempted, 1101);
    assert_eq!(state(&c, low), JobState::Preempted);
    // No PreemptType: nothing.
    let mut c = core("", "");
    submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
    assert_eq!(state(&c, high), JobState::Pending);
}

#[test]
fn a_job_started_in_the_same_pass_is_not_its_victim() {
    let mut c = core("", PARTITION_PRIO);
    let a = submit(&mut c, "low", 1000, |s| s.ntasks = Some(1));
    c.apply(1000, Command::Schedule);
    // The high job needs the whole node; a one-CPU low job starts on
    // the free CPU in the same pass, after the high one was tried.
    submit(&mut c, "high", 1100, |_| {});
    let b = submit(&mut c, "low", 1100, |s| s.ntasks = Some(1));
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(state(&c, b), JobState::Running);
    assert!(
        ended(&out).iter().all(|(id, _, _)| *id != b),
        "{:?}",
        ended(&out)
    );
    // A later pass may take both.
    let out = c.apply(1101, Command::Schedule);
    let mut victims: Vec<u32> = ended(&out).iter().map(|(id, _, _)| *id).collect();
    victims.sort_unstable();
    assert_eq!(victims, [a, b]);
}

#[test]
fn higher_tiers_are_scheduled_first() {
    let mut c = core("", "");
    let low = submit(&mut c, "low", 1000, |s| s.hold = false);
    let high = submit(&mut c, "high", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    assert_eq!(state(&c, high), JobState::Running);
    assert_eq!(state(&c, low), JobState::Pending);
}

// ---- preempt/qos ----

use crate::model::assoc::{PreemptMode as QosMode, Qos};
use crate::wire::messages::JobUpdate;

/// One two-CPU node, one partition, and QOS `low`, `high` (which lists
/// `low` in `Preempt=`) and `normal` (which lists nothing).
fn qos_core(global: &str, edit_low: impl FnOnce(&mut Qos)) -> Core {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{global}\nNodeName=n1 CPUs=2\n\
         PartitionName=p Nodes=n1 Default=YES\n"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let mut c = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0;
    let mut low = Qos::new(2, "low");
    edit_low(&mut low);
    let mut high = Qos::new(3, "high");
    high.priority = 100;
    high.preempt.insert("low".into());
    c.accounts.qos.insert("low".into(), low);
    c.accounts.qos.insert("high".into(), high);
    c.accounts
        .qos
        .insert("normal".into(), Qos::new(1, "normal"));
    register(&mut c, 0, 1000);
    reach(&mut c, 0, true, 1000);
    c
}

const QOS_REQUEUE: &str = "PreemptType=preempt/qos\nPreemptMode=REQUEUE";

fn submit_qos(core: &mut Core, qos: &str, now: i64, f: impl FnOnce(&mut JobSubmit)) -> u32 {
    submit(core, "p", now, |s| {
        s.qos = Some(qos.into());
        f(s)
    })
}

#[test]
fn only_a_qos_that_lists_the_running_jobs_qos_preempts_it() {
    // `normal` lists nothing, and a job of the same QOS is no preemptor.
    for qos in ["normal", "low"] {
        let mut c = qos_core(QOS_REQUEUE, |_| {});
        let low = submit_qos(&mut c, "low", 1000, |_| {});
        c.apply(1000, Command::Schedule);
        assert_eq!(state(&c, low), JobState::Running);
        let other = submit_qos(&mut c, qos, 1050, |_| {});
        assert!(ended(&c.apply(1060, Command::Schedule)).is_empty(), "{qos}");
        assert_eq!(state(&c, other), JobState::Pending);
    }
    // `high` lists `low`: the low job is requeued for it.
    let mut c = qos_core(QOS_REQUEUE, |_| {});
    let low = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit_qos(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
    job_ended(&mut c, low, JobState::Preempted, 1101);
    assert_eq!(state(&c, low), JobState::Pending, "requeued");
    c.apply(1101, Command::Schedule);
    assert_eq!(state(&c, high), JobState::Running);
    // A job without a QOS neither preempts nor is preempted.
    let mut c = qos_core(QOS_REQUEUE, |_| {});
    submit(&mut c, "p", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
}

#[test]
fn the_victims_qos_sets_its_mode_grace_time_and_exempt_time() {
    // Its QOS's CANCEL and GraceTime win over the cluster's REQUEUE.
    let mut c = qos_core(QOS_REQUEUE, |q| {
        q.preempt_mode = QosMode::Cancel;
        q.grace_time = 30;
    });
    let low = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert!(ended(&out).is_empty(), "not before its grace time");
    assert_eq!(signals(&out, low), [18, 15]);
    assert!(wakes(&out).contains(&1130));
    assert_eq!(ended(&c.apply(1130, Command::Schedule)).len(), 1);
    job_ended(&mut c, low, JobState::Preempted, 1131);
    assert_eq!(state(&c, low), JobState::Preempted, "cancelled");

    // Its QOS's PreemptExemptTime (5 minutes) over the cluster's (none).
    let mut c = qos_core(QOS_REQUEUE, |q| q.preempt_exempt_time = Some(300));
    submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
    assert!(ended(&c.apply(1299, Command::Schedule)).is_empty());
    assert_eq!(ended(&c.apply(1300, Command::Schedule)).len(), 1);

    // Its QOS's PreemptMode=OFF: never.
    let mut c = qos_core(QOS_REQUEUE, |q| q.preempt_mode = QosMode::Off);
    submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());

    // SUSPEND without the cluster's GANG: killed, as slurmctld does.
    let mut c = qos_core(QOS_REQUEUE, |q| q.preempt_mode = QosMode::Suspend);
    let low = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
    job_ended(&mut c, low, JobState::Preempted, 1101);
    assert_eq!(
        state(&c, low),
        JobState::Preempted,
        "cancelled, not requeued"
    );
}

#[test]
fn within_lets_a_higher_priority_job_of_the_same_qos_preempt() {
    let mut c = qos_core("PreemptType=preempt/qos\nPreemptMode=CANCEL,WITHIN", |_| {});
    let first = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    c.jobs.modify(first, |j| j.priority = 10);
    let lower = submit_qos(&mut c, "low", 1100, |_| {});
    c.jobs.modify(lower, |j| j.priority = 5);
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty(), "lower");
    c.apply(
        1150,
        Command::UpdateJobs {
            update: JobUpdate {
                job_ids: vec![lower],
                priority: Some(50),
                ..Default::default()
            },
            caller: Caller {
                uid: 0,
                operator: true,
            },
        },
    );
    let out = c.apply(1200, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(first, JobState::Preempted, Some(KillCause::Preempted))]
    );
    // Without WITHIN, the same QOS never preempts.
    let mut c = qos_core(QOS_REQUEUE, |_| {});
    let first = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    c.jobs.modify(first, |j| j.priority = 1);
    submit_qos(&mut c, "low", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
}

// ---- SUSPEND,GANG ----

const SUSPEND_GANG: &str = "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG";

fn started(out: &Output) -> Vec<u32> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartJob(s) if s.launch.is_some() => Some(s.job_id),
            _ => None,
        })
        .collect()
}

fn update(core: &mut Core, id: u32, now: i64, f: impl FnOnce(&mut JobUpdate)) -> Output {
    let mut u = JobUpdate {
        job_ids: vec![id],
        ..Default::default()
    };
    f(&mut u);
    core.apply(
        now,
        Command::UpdateJobs {
            update: u,
            caller: Caller {
                uid: 0,
                operator: true,
            },
        },
    )
}

#[test]
fn a_suspended_victim_lends_its_cpus_and_resumes_when_the_preemptor_ends() {
    let mut c = core("", SUSPEND_GANG);
    let low = submit(&mut c, "low", 1000, |s| s.time_limit_min = Some(10));
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    // Stopped, not ended; the preemptor starts in the same pass.
    assert!(ended(&out).is_empty());
    assert_eq!(signals(&out, low), [19]);
    assert_eq!(state(&c, low), JobState::Suspended);
    assert_eq!(state(&c, high), JobState::Running);
    assert_eq!(started(&out), [high]);
    assert_eq!(c.slots()[0].alloc_cpus, 2, "held once, by the preemptor");
    let j = c.jobs().get(low).unwrap();
    let s = j.preempt_suspended.as_ref().unwrap();
    assert_eq!((s.by, s.lent.len(), s.lent[0].count), (high, 1, 2));
    assert!(
        out.persist.iter().any(|op| matches!(op,
            crate::state::store::Op::PutJob(j) if j.job_id == low && j.preempt_suspended.is_some())),
        "the suspension is on disk"
    );
    // While it is stopped its limit does not fall due.
    assert!(ended(&c.apply(1600, Command::Schedule)).is_empty());
    // The preemptor ends after 200 s: the victim goes on, its limit
    // pushed back by the 200 s it was stopped.
    let out = job_ended(&mut c, high, JobState::Completed, 1300);
    assert_eq!(signals(&out, low), [18]);
    assert_eq!(state(&c, low), JobState::Running);
    assert_eq!(c.slots()[0].alloc_cpus, 2);
    let j = c.jobs().get(low).unwrap();
    assert_eq!((j.suspend.total_secs, j.suspend.pre_secs), (200, 100));
    assert_eq!(j.suspend.last, Some(1300));
    assert!(wakes(&out).contains(&1800), "{:?}", wakes(&out));
    assert!(ended(&c.apply(1799, Command::Schedule)).is_empty());
    let out = c.apply(1800, Command::Schedule);
    assert_eq!(ended(&out), [(low, JobState::Timeout, None)]);
}

#[test]
fn a_suspended_jobs_cpus_are_free_only_for_its_preemptor() {
    let mut c = core("", SUSPEND_GANG);
    // The low job holds both CPUs; the high one needs one.
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |s| s.ntasks = Some(1));
    c.apply(1100, Command::Schedule);
    assert_eq!(state(&c, low), JobState::Suspended);
    assert_eq!(state(&c, high), JobState::Running);
    let lent = &c
        .jobs()
        .get(low)
        .unwrap()
        .preempt_suspended
        .as_ref()
        .unwrap()
        .lent;
    assert_eq!(lent[0].count, 1, "it lent only what the preemptor took");
    // Its other CPU stays its own: a one-CPU low job waits.
    let other = submit(&mut c, "low", 1150, |s| s.ntasks = Some(1));
    c.apply(1150, Command::Schedule);
    assert_eq!(state(&c, other), JobState::Pending);
    // The preemptor ends: the victim (not the newcomer) gets the CPU.
    job_ended(&mut c, high, JobState::Completed, 1200);
    c.apply(1200, Command::Schedule);
    assert_eq!(state(&c, low), JobState::Running);
    assert_eq!(state(&c, other), JobState::Pending);
    assert_eq!(c.slots()[0].alloc_cpus, 2);
}

#[test]
fn a_restart_keeps_the_suspension_and_what_each_job_holds() {
    let mut c = core("", SUSPEND_GANG);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |s| s.ntasks = Some(1));
    c.apply(1100, Command::Schedule);
    let held = c.slots()[0].clone();
    let records: Vec<_> = c.jobs().values().cloned().collect();
    let conf = c.conf().clone();
    let (mut again, _) = Core::recover(conf, records, None, &HashMap::new(), 1120);
    assert_eq!(again.slots()[0].alloc_cpus, held.alloc_cpus);
    assert_eq!(again.slots()[0].used, held.used);
    assert_eq!(state(&again, low), JobState::Suspended);
    register(&mut again, 0, 1120);
    reach(&mut again, 0, true, 1120);
    assert_eq!(
        state(&again, low),
        JobState::Suspended,
        "still there, stopped"
    );
    let out = job_ended(&mut again, high, JobState::Completed, 1150);
    assert_eq!(signals(&out, low), [18]);
    assert_eq!(state(&again, low), JobState::Running);
    assert_eq!(again.slots()[0].alloc_cpus, 2);
}

#[test]
fn cancelling_a_suspended_victim_leaves_the_preemptors_cpus_held() {
    let mut c = core("", SUSPEND_GANG);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |s| s.ntasks = Some(1));
    c.apply(1100, Command::Schedule);
    c.apply(
        1110,
        Command::Cancel {
            req: crate::wire::messages::CancelRequest {
                job_ids: vec![low],
                signal: None,
                batch_only: false,
                exact: false,
            },
            caller: ALICE,
        },
    );
    job_ended(&mut c, low, JobState::Cancelled, 1111);
    assert_eq!(state(&c, low), JobState::Cancelled);
    assert_eq!(state(&c, high), JobState::Running);
    assert_eq!(c.slots()[0].alloc_cpus, 1, "the preemptor's CPU");
    assert_eq!(c.slots()[0].used.len(), 1);
}

#[test]
fn scontrol_suspend_stops_the_clock_and_resume_pushes_the_limit_back() {
    let mut c = core("", "");
    let low = submit(&mut c, "low", 1000, |s| s.time_limit_min = Some(10));
    c.apply(1000, Command::Schedule);
    update(&mut c, low, 1100, |u| u.suspend = Some(true));
    assert_eq!(state(&c, low), JobState::Suspended);
    assert!(ended(&c.apply(1600, Command::Schedule)).is_empty());
    let out = update(&mut c, low, 1400, |u| u.suspend = Some(false));
    assert!(wakes(&out).contains(&1900), "{:?}", wakes(&out));
    assert!(ended(&c.apply(1899, Command::Schedule)).is_empty());
    assert_eq!(ended(&c.apply(1900, Command::Schedule)).len(), 1);
}

#[test]
fn a_preempt_suspended_job_resumes_by_hand_only_when_its_cpus_are_free() {
    let mut c = core("", SUSPEND_GANG);
    let low = submit(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    c.apply(1100, Command::Schedule);
    let out = update(&mut c, low, 1110, |u| u.suspend = Some(false));
    match out.reply {
        Some(Reply::Results(r)) => assert_eq!(
            r.results,
            [(
                low,
                Some("Requested operation is presently disabled".into())
            )]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(state(&c, low), JobState::Suspended);
}

// ---- mail ----

fn subjects(out: &Output) -> Vec<String> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Mail(m) => Some(m.subject.clone()),
            _ => None,
        })
        .collect()
}

/// Slurm 22.05 has no mail type for preemption: a cancelled victim's end
/// goes under FAIL (END is for COMPLETED and CANCELLED), a requeued one
/// gets only its REQUEUE mail, a suspended one none.
#[test]
fn preempted_jobs_mail_under_fail_or_requeue_only() {
    use crate::mail::{END, FAIL, REQUEUE};
    for (low_mode, mail_type, want) in [
        ("PreemptMode=CANCEL", END, vec![]),
        ("PreemptMode=CANCEL", FAIL, vec!["Failed"]),
        ("", END | FAIL | REQUEUE, vec!["Requeued"]),
    ] {
        let mut c = core(low_mode, PARTITION_PRIO);
        let low = submit(&mut c, "low", 1000, |s| s.mail_type = mail_type);
        c.apply(1000, Command::Schedule);
        submit(&mut c, "high", 1100, |_| {});
        c.apply(1100, Command::Schedule);
        let out = job_ended(&mut c, low, JobState::Preempted, 1101);
        let got = subjects(&out);
        assert_eq!(got.len(), want.len(), "{low_mode} {mail_type}: {got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(g.contains(w), "{g}");
        }
        if mail_type & FAIL != 0 && low_mode.contains("CANCEL") {
            assert!(got[0].contains(", PREEMPTED, "), "{got:?}");
        }
    }
    let mut c = core("", SUSPEND_GANG);
    let low = submit(&mut c, "low", 1000, |s| s.mail_type = END | FAIL | REQUEUE);
    c.apply(1000, Command::Schedule);
    submit(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(state(&c, low), JobState::Suspended);
    assert!(subjects(&out).is_empty(), "{:?}", subjects(&out));
}

/// slurmctld puts a job that may preempt another before it in the queue:
/// a high-QOS job behind a waiting low-QOS one preempts for itself and
/// gets what its victim gives back; behind a job its QOS does not list,
/// it waits its turn.
#[test]
fn a_job_behind_the_head_preempts_when_its_qos_lists_the_heads() {
    let mut c = qos_core(QOS_REQUEUE, |_| {});
    let low = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let head = submit_qos(&mut c, "low", 1050, |_| {});
    let high = submit_qos(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(
        ended(&out),
        [(low, JobState::Preempted, Some(KillCause::Preempted))]
    );
    assert_eq!(c.jobs().get(low).unwrap().preempted.unwrap().by, high);
    // Its victim gone (and requeued, ahead of it by priority), it starts
    // at once.
    let out = job_ended(&mut c, low, JobState::Preempted, 1101);
    assert_eq!(started(&out), [high]);
    assert_eq!(state(&c, high), JobState::Running);
    c.apply(1102, Command::Schedule);
    assert_eq!(state(&c, head), JobState::Pending);
    assert_eq!(state(&c, low), JobState::Pending);

    // Behind a `normal` job, which its QOS does not list: no preemption.
    let mut c = qos_core(QOS_REQUEUE, |_| {});
    submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    submit_qos(&mut c, "normal", 1050, |_| {});
    submit_qos(&mut c, "high", 1100, |_| {});
    assert!(ended(&c.apply(1100, Command::Schedule)).is_empty());
}

/// Victims of both kinds: the suspended one waits, stopped, while the
/// cancelled one has its grace time; when that one is gone the preemptor
/// starts at once, on the CPUs of both.
#[test]
fn a_preemptor_with_suspended_and_cancelled_victims_starts_when_the_last_is_gone() {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{SUSPEND_GANG}\nNodeName=n1 CPUs=2\n\
         PartitionName=low Nodes=n1 Default=YES PriorityTier=1\n\
         PartitionName=lowc Nodes=n1 PriorityTier=1 PreemptMode=CANCEL GraceTime=10\n\
         PartitionName=high Nodes=n1 PriorityTier=2\n"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let mut c = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0;
    register(&mut c, 0, 1000);
    reach(&mut c, 0, true, 1000);
    let a = submit(&mut c, "low", 1000, |s| s.ntasks = Some(1));
    let b = submit(&mut c, "lowc", 1000, |s| s.ntasks = Some(1));
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(state(&c, a), JobState::Suspended);
    assert_eq!(signals(&out, b), [18, 15], "b's grace time");
    assert_eq!(state(&c, high), JobState::Pending);
    // Its CPU stays held meanwhile: a newcomer cannot have it.
    let other = submit(&mut c, "low", 1105, |s| s.ntasks = Some(1));
    c.apply(1105, Command::Schedule);
    assert_eq!(state(&c, other), JobState::Pending);
    c.apply(1110, Command::Schedule);
    let out = job_ended(&mut c, b, JobState::Preempted, 1111);
    assert_eq!(started(&out), [high]);
    assert_eq!(state(&c, a), JobState::Suspended);
    assert_eq!(c.slots()[0].alloc_cpus, 2);
    job_ended(&mut c, high, JobState::Completed, 1200);
    assert_eq!(state(&c, a), JobState::Running);
}

/// A preemptor held before it could start (its other victim still in its
/// grace time) lets the suspended victim go on, and takes nothing.
#[test]
fn a_held_preemptor_releases_the_job_suspended_for_it() {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{SUSPEND_GANG}\nNodeName=n1 CPUs=2\n\
         PartitionName=low Nodes=n1 Default=YES PriorityTier=1\n\
         PartitionName=lowc Nodes=n1 PriorityTier=1 PreemptMode=CANCEL GraceTime=10\n\
         PartitionName=high Nodes=n1 PriorityTier=2\n"
    );
    let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
    let mut c = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000).0;
    register(&mut c, 0, 1000);
    reach(&mut c, 0, true, 1000);
    let a = submit(&mut c, "low", 1000, |s| s.ntasks = Some(1));
    let b = submit(&mut c, "lowc", 1000, |s| s.ntasks = Some(1));
    c.apply(1000, Command::Schedule);
    let high = submit(&mut c, "high", 1100, |_| {});
    c.apply(1100, Command::Schedule);
    assert_eq!(state(&c, a), JobState::Suspended);
    update(&mut c, high, 1105, |u| u.hold = Some(true));
    let out = job_ended(&mut c, b, JobState::Preempted, 1111);
    assert!(started(&out).is_empty());
    assert_eq!(signals(&out, a), [18]);
    assert_eq!(state(&c, a), JobState::Running);
    assert_eq!(state(&c, high), JobState::Pending);
    assert_eq!(c.slots()[0].alloc_cpus, 1, "only a's CPU");
}

/// preempt/qos with SUSPEND,GANG: in one partition, the low-QOS job stops
/// for the high-QOS one and goes on after it (canopy does not time-slice
/// them, as Slurm's gang scheduler would in one partition).
#[test]
fn qos_suspension_in_one_partition_stops_the_victim_until_the_preemptor_ends() {
    let mut c = qos_core("PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG", |_| {});
    let low = submit_qos(&mut c, "low", 1000, |_| {});
    c.apply(1000, Command::Schedule);
    let high = submit_qos(&mut c, "high", 1100, |_| {});
    let out = c.apply(1100, Command::Schedule);
    assert_eq!(signals(&out, low), [19]);
    assert_eq!(started(&out), [high]);
    assert_eq!(state(&c, low), JobState::Suspended);
    // A second low-QOS job waits; it may not take the victim's place.
    let later = submit_qos(&mut c, "low", 1150, |_| {});
    c.apply(1150, Command::Schedule);
    assert_eq!(state(&c, later), JobState::Pending);
    let out = job_ended(&mut c, high, JobState::Completed, 1200);
    assert_eq!(signals(&out, low), [18]);
    assert_eq!(state(&c, low), JobState::Running);
    c.apply(1200, Command::Schedule);
    assert_eq!(state(&c, later), JobState::Pending);
}
