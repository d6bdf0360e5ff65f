//! Preemption on real daemons (`PreemptType=preempt/partition_prio`): a
//! job of a higher-tier partition takes a node from a running job of a
//! lower tier, which gets its partition's GraceTime (SIGTERM first), then
//! is requeued or cancelled as its PreemptMode says; the preemptor starts
//! once it is gone, and the requeued job runs again after it.

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
