//! `scontrol requeue` of a batch job the moment it shows RUNNING, before
//! its script has started on the node: the node must be done with the
//! first run (its launch given up, its spool directory and processes gone)
//! before it answers the teardown, so the second run under the same job id
//! starts cleanly instead of failing with `JobLaunchFailure`.

mod common;

use std::time::Duration;

use canopy::wire::messages::{Body, JobUpdate, RequeueKind};
use canopy::wire::types::JobState;
use common::Cluster;

#[test]
fn a_job_requeued_as_soon_as_it_runs_runs_again_cleanly() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // Several rounds: the race is between the first run's launch on the
    // node and the teardown that follows it at once.
    for round in 0..8 {
        let id = c.sbatch(
            w,
            &[
                "--wrap",
                "echo run $SLURM_RESTART_COUNT >> runs-$SLURM_JOB_ID.txt; sleep 120",
            ],
        );
        // As soon as the controller shows it RUNNING (its launch may not
        // have reached the node yet): no client process in between.
        c.wait_for(Duration::from_secs(20), "the job to start", |c| {
            c.job(id).is_some_and(|j| j.state == JobState::Running)
        });
        let reply = c.call(Body::UpdateJobs(JobUpdate {
            job_ids: vec![id],
            requeue: Some(RequeueKind::Requeue),
            ..Default::default()
        }));
        assert!(
            matches!(reply, Body::UpdateJobsReply(_)),
            "round {round}: {reply:?}"
        );
        let runs = w.join(format!("runs-{id}.txt"));
        c.wait_for(Duration::from_secs(30), "the second run", |c| {
            let j = c.job(id).unwrap();
            assert!(
                !j.state.is_finished(),
                "round {round}: job {id} ended {:?} ({}) instead of running again",
                j.state,
                j.reason
            );
            j.state == JobState::Running
                && j.restarts == 1
                && std::fs::read_to_string(&runs).is_ok_and(|t| t.ends_with("run 1\n"))
        });
        // The first run may never have started its script; if it did, it
        // ran once, before the second.
        let text = std::fs::read_to_string(&runs).unwrap();
        assert!(
            text == "run 1\n" || text == "run 0\nrun 1\n",
            "round {round}: {text:?}"
        );
        let o = c.cli(w, "scancel", &[&id.to_string()]);
        assert!(o.status.success());
        let j = c.wait_done(id, Duration::from_secs(20));
        assert_eq!(j.state, JobState::Cancelled, "round {round}");
    }
}
