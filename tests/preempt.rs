//! Preemption on real daemons. `preempt/partition_prio`: a job of a
//! higher-tier partition takes a node from a running job of a lower tier,
//! which gets its partition's GraceTime (SIGTERM first), then is requeued
//! or cancelled as its PreemptMode says; the preemptor starts once it is
//! gone, and the requeued job runs again after it. `preempt/qos`: the same
//! by the QOS `Preempt=` lists set with sacctmgr. `SUSPEND,GANG`: the
//! victim's processes stop while the preemptor runs on its CPUs, and go on
//! when it ends.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

/// One two-CPU node in a low and a high partition.
fn cluster(low: &str) -> Cluster {
    Cluster::start_with(
        1,
        2,
        30,
        &format!(
            "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n\
             PartitionName=low Nodes=n1 PriorityTier=1 {low}\n\
             PartitionName=high Nodes=n1 PriorityTier=2\n"
        ),
    )
}

fn ok(c: &Cluster, dir: &std::path::Path, cmd: &str, args: &[&str]) -> String {
    let o = c.cli(dir, cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A low job that notes each run and each SIGTERM, and keeps running.
const STUBBORN: &str = "echo run $SLURM_RESTART_COUNT >> runs.txt; \
                        trap 'echo term >> runs.txt' TERM; \
                        while :; do sleep 1; done";

#[test]
fn a_high_tier_job_requeues_a_low_one_after_its_grace_time() {
    let c = cluster("GraceTime=2");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let runs = || std::fs::read_to_string(w.join("runs.txt")).unwrap_or_default();
    let low = c.sbatch(w, &["-p", "low", "-n", "2", "--wrap", STUBBORN]);
    c.wait_for(Duration::from_secs(20), "the low job's first run", |_| {
        runs() == "run 0\n"
    });
    let high = c.sbatch(
        w,
        &[
            "-p",
            "high",
            "-n",
            "2",
            "--wrap",
            "echo high > high.txt; sleep 3",
        ],
    );
    // The grace time's SIGTERM first, while the high job waits.
    c.wait_for(Duration::from_secs(20), "SIGTERM to the low job", |_| {
        runs() == "run 0\nterm\n"
    });
    assert_eq!(c.job(high).unwrap().state, JobState::Pending);
    c.wait_for(Duration::from_secs(20), "the high job running", |c| {
        c.job(high).is_some_and(|j| j.state != JobState::Pending)
    });
    let j = c.job(low).unwrap();
    assert_eq!((j.state, j.restarts), (JobState::Pending, 1), "requeued");
    // The node's note on the first run's output says why it ended.
    let out = std::fs::read_to_string(w.join(format!("slurm-{low}.out"))).unwrap();
    assert!(
        out.contains(&format!("*** JOB {low} ON n1 CANCELLED AT "))
            && out.contains(" DUE TO PREEMPTION ***"),
        "{out}"
    );
    // After the high job, the low one runs again.
    c.wait_done(high, Duration::from_secs(30));
    c.wait_for(Duration::from_secs(30), "the low job's second run", |_| {
        runs().ends_with("run 1\n")
    });
    ok(&c, w, "scancel", &[&low.to_string()]);
}

#[test]
fn cancel_mode_ends_the_low_job_preempted_and_the_partition_shows_its_settings() {
    let c = cluster("PreemptMode=CANCEL");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let low = c.sbatch(w, &["-p", "low", "-n", "2", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "the low job running", |c| {
        c.job(low).is_some_and(|j| j.state == JobState::Running)
    });
    let high = c.sbatch(w, &["-p", "high", "-n", "2", "--wrap", "true"]);
    let j = c.wait_done(low, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Preempted);
    let acct = ok(
        &c,
        w,
        "sacct",
        &["-j", &low.to_string(), "-X", "-n", "-P", "-o", "State"],
    );
    assert_eq!(acct.trim(), "PREEMPTED");
    let j = c.wait_done(high, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Completed);
    let show = ok(&c, w, "scontrol", &["show", "partition", "low"]);
    assert!(show.contains("PriorityTier=1 "), "{show}");
    assert!(show.contains("PreemptMode=CANCEL"), "{show}");
    let show = ok(&c, w, "scontrol", &["show", "partition", "high"]);
    assert!(show.contains("PriorityTier=2 "), "{show}");
    assert!(
        show.contains("PreemptMode=REQUEUE"),
        "the cluster's mode: {show}"
    );
    let config = ok(&c, w, "scontrol", &["show", "config"]);
    assert!(
        config.contains("PreemptType             = preempt/partition_prio"),
        "{config}"
    );
}

/// One two-CPU node (the default partition), preemption by QOS, and QOS
/// `low` and `high` (which may preempt `low`).
fn qos_cluster(mode: &str) -> Cluster {
    let c = Cluster::start_with(
        1,
        2,
        30,
        &format!("PreemptType=preempt/qos\nPreemptMode={mode}\n"),
    );
    let w = tempfile::tempdir().unwrap();
    ok(&c, w.path(), "sacctmgr", &["-i", "add", "qos", "low"]);
    ok(
        &c,
        w.path(),
        "sacctmgr",
        &["-i", "add", "qos", "high", "Priority=100", "Preempt=low"],
    );
    c
}

/// The low job's ticks: a line every 0.1 s while it runs.
const TICKING: &str = "while :; do echo x >> ticks.txt; sleep 0.1; done";

fn ticks(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("ticks.txt"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_high_qos_job_requeues_a_low_qos_job_and_sacctmgr_shows_the_lists() {
    let c = qos_cluster("REQUEUE");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let shown = ok(
        &c,
        w,
        "sacctmgr",
        &[
            "show",
            "qos",
            "format=Name,Preempt,PreemptMode,PreemptExemptTime",
            "-P",
            "-n",
        ],
    );
    assert!(shown.contains("high|low|cluster|\n"), "{shown}");
    let low = c.sbatch(w, &["--qos=low", "-n", "2", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "the low job running", |c| {
        c.job(low).is_some_and(|j| j.state == JobState::Running)
    });
    // A job of the same QOS waits.
    let same = c.sbatch(w, &["--qos=low", "-n", "2", "--wrap", "true"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.job(low).unwrap().state, JobState::Running);
    ok(&c, w, "scancel", &[&same.to_string()]);
    let high = c.sbatch(
        w,
        &["--qos=high", "-n", "2", "--wrap", "echo high > high.txt"],
    );
    let j = c.wait_done(high, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(
        std::fs::read_to_string(w.join("high.txt")).unwrap_or_default(),
        "high\n"
    );
    let j = c.job(low).unwrap();
    assert!(j.restarts == 1, "requeued once: {j:?}");
    // Its first run is accounted PREEMPTED.
    let out = std::fs::read_to_string(w.join(format!("slurm-{low}.out"))).unwrap();
    assert!(out.contains(" DUE TO PREEMPTION ***"), "{out}");
    ok(&c, w, "scancel", &[&low.to_string()]);
}

#[test]
fn a_qos_grace_time_and_cancel_mode_end_the_low_job_preempted() {
    let c = qos_cluster("REQUEUE");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    ok(
        &c,
        w,
        "sacctmgr",
        &[
            "-i",
            "modify",
            "qos",
            "low",
            "set",
            "PreemptMode=cancel",
            "GraceTime=2",
        ],
    );
    let shown = ok(
        &c,
        w,
        "sacctmgr",
        &[
            "show",
            "qos",
            "low",
            "format=Name,GraceTime,PreemptMode",
            "-P",
            "-n",
        ],
    );
    assert_eq!(shown, "low|00:00:02|cancel\n");
    // The preemptor's own exempt time does not protect anyone else.
    ok(
        &c,
        w,
        "sacctmgr",
        &[
            "-i",
            "modify",
            "qos",
            "high",
            "set",
            "PreemptExemptTime=5:00",
        ],
    );
    let shown = ok(
        &c,
        w,
        "sacctmgr",
        &[
            "show",
            "qos",
            "high",
            "format=Name,PreemptExemptTime",
            "-P",
            "-n",
        ],
    );
    assert_eq!(shown, "high|00:05:00\n");
    let low = c.sbatch(
        w,
        &[
            "--qos=low",
            "-n",
            "2",
            "--wrap",
            "trap 'echo term > term.txt' TERM; while :; do sleep 0.2; done",
        ],
    );
    c.wait_for(Duration::from_secs(20), "the low job running", |c| {
        c.job(low).is_some_and(|j| j.state == JobState::Running)
    });
    let high = c.sbatch(w, &["--qos=high", "-n", "2", "--wrap", "true"]);
    c.wait_for(Duration::from_secs(20), "SIGTERM in the grace time", |_| {
        w.join("term.txt").exists()
    });
    let j = c.wait_done(low, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Preempted);
    let acct = ok(
        &c,
        w,
        "sacct",
        &["-j", &low.to_string(), "-X", "-n", "-P", "-o", "State"],
    );
    assert_eq!(acct.trim(), "PREEMPTED");
    assert_eq!(
        c.wait_done(high, Duration::from_secs(30)).state,
        JobState::Completed
    );
}

#[test]
fn suspend_gang_stops_the_low_job_while_the_high_one_runs_then_resumes_it() {
    let c = Cluster::start_with(
        1,
        2,
        30,
        "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n\
         PartitionName=low Nodes=n1 PriorityTier=1\n\
         PartitionName=high Nodes=n1 PriorityTier=2\n",
    );
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let low = c.sbatch(w, &["-p", "low", "-n", "2", "-t", "10", "--wrap", TICKING]);
    c.wait_for(Duration::from_secs(20), "the low job ticking", |_| {
        ticks(w) > 3
    });
    // Long enough that its run before the suspension shows.
    std::thread::sleep(Duration::from_millis(1500));
    let high = c.sbatch(
        w,
        &["-p", "high", "-n", "2", "--wrap", "touch high.txt; sleep 4"],
    );
    c.wait_for(Duration::from_secs(20), "the high job running", |c| {
        c.job(high).is_some_and(|j| j.state == JobState::Running)
    });
    assert_eq!(c.job(low).unwrap().state, JobState::Suspended);
    let st = ok(&c, w, "squeue", &["-h", "-j", &low.to_string(), "-o", "%t"]);
    assert_eq!(st, "S\n");
    let show = ok(&c, w, "scontrol", &["show", "job", &low.to_string()]);
    assert!(show.contains("JobState=SUSPENDED "), "{show}");
    assert!(!show.contains("SuspendTime=None"), "{show}");
    assert!(!show.contains("SecsPreSuspend=0 "), "{show}");
    // Its processes are stopped.
    std::thread::sleep(Duration::from_millis(500));
    let frozen = ticks(w);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(ticks(w), frozen, "a suspended job kept running");
    // The high job ends; the low one goes on.
    assert_eq!(
        c.wait_done(high, Duration::from_secs(30)).state,
        JobState::Completed
    );
    c.wait_for(Duration::from_secs(20), "the low job ticking again", |_| {
        ticks(w) > frozen + 3
    });
    assert_eq!(c.job(low).unwrap().state, JobState::Running);
    ok(&c, w, "scancel", &[&low.to_string()]);
    assert_eq!(
        c.wait_done(low, Duration::from_secs(20)).state,
        JobState::Cancelled
    );
    // sacct counts the time it was stopped.
    let acct = ok(
        &c,
        w,
        "sacct",
        &["-j", &low.to_string(), "-X", "-n", "-P", "-o", "Suspended"],
    );
    assert_ne!(acct.trim(), "00:00:00", "{acct}");
}

#[test]
fn a_suspension_survives_a_controller_crash() {
    let mut c = Cluster::start_with(
        1,
        2,
        30,
        "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n\
         PartitionName=low Nodes=n1 PriorityTier=1\n\
         PartitionName=high Nodes=n1 PriorityTier=2\n",
    );
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let low = c.sbatch(w, &["-p", "low", "-n", "2", "--wrap", TICKING]);
    c.wait_for(Duration::from_secs(20), "the low job ticking", |_| {
        ticks(w) > 3
    });
    let high = c.sbatch(
        w,
        &["-p", "high", "-n", "2", "--wrap", "touch high.txt; sleep 6"],
    );
    c.wait_for(Duration::from_secs(20), "the low job suspended", |c| {
        c.job(low).is_some_and(|j| j.state == JobState::Suspended)
    });
    // The crash comes once the high job's launch has reached its node (a
    // launch lost in a crash fails the job, NODE_FAIL, and the low job
    // would rightly go on at once).
    c.wait_for(Duration::from_secs(20), "the high job started", |_| {
        w.join("high.txt").exists()
    });
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(20), "the controller back", |c| {
        c.job(low).is_some()
    });
    // Still stopped, its node's daemon keeping it; the high job runs on.
    let frozen = ticks(w);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(ticks(w), frozen, "a suspended job kept running");
    assert_eq!(c.job(low).unwrap().state, JobState::Suspended);
    assert_eq!(c.job(high).unwrap().state, JobState::Running);
    assert_eq!(
        c.wait_done(high, Duration::from_secs(30)).state,
        JobState::Completed
    );
    c.wait_for(Duration::from_secs(20), "the low job ticking again", |_| {
        ticks(w) > frozen + 3
    });
    assert_eq!(c.job(low).unwrap().state, JobState::Running);
    ok(&c, w, "scancel", &[&low.to_string()]);
}
