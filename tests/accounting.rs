//! Accounting: every job is recorded for good (past MinJobAge and controller
//! restarts), with its batch step's usage measured on the node.

mod common;

use std::time::Duration;

use canopy::wire::messages::{AcctQuery, Body};
use canopy::wire::types::{AcctJob, JobState, StepKind};
use common::Cluster;

fn acct(c: &Cluster, q: AcctQuery) -> Vec<AcctJob> {
    match c.call(Body::QueryAcct(q)) {
        Body::Acct(v) => v,
        other => panic!("unexpected {other:?}"),
    }
}

fn by_id(c: &Cluster, id: u32) -> AcctJob {
    let mut v = acct(
        c,
        AcctQuery {
            job_ids: vec![id],
            ..Default::default()
        },
    );
    assert_eq!(v.len(), 1, "job {id}: {v:?}");
    v.remove(0)
}

#[test]
fn jobs_are_accounted_for_good_with_step_usage() {
    // MinJobAge=1: finished jobs leave squeue's table within seconds.
    let mut c = Cluster::start_with(2, 2, 30, "MinJobAge=1\n");
    let w = tempfile::tempdir().unwrap();
    let hog = "python3 -c 'x = bytearray(60 * 1024 * 1024); import time; time.sleep(0.2)'";
    let big = c.sbatch(w.path(), &["-J", "hog", "--wrap", hog]);
    let bad = c.sbatch(w.path(), &["-N", "2", "--wrap", "exit 3"]);
    let held = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    c.wait_done(big, Duration::from_secs(20));
    c.wait_done(bad, Duration::from_secs(20));

    let j = by_id(&c, big);
    assert_eq!(
        (j.state, j.exit_code, j.name.as_str()),
        (JobState::Completed, (0, 0), "hog")
    );
    assert_eq!(j.steps.len(), 1);
    let s = &j.steps[0];
    assert_eq!(
        (s.kind, s.name.as_str(), s.state),
        (StepKind::Batch, "batch", JobState::Completed)
    );
    assert!(s.max_rss_kb >= 60 * 1024, "MaxRSS {} KiB", s.max_rss_kb);
    assert!(s.start_time.is_some() && s.end_time >= s.start_time);

    let j = by_id(&c, bad);
    assert_eq!(
        (j.state, j.exit_code, j.num_nodes),
        (JobState::Failed, (3, 0), 2)
    );
    assert_eq!(j.nodes, "n[1-2]");
    assert_eq!(j.steps[0].nodes, "n1");

    let j = by_id(&c, held);
    assert_eq!((j.state, j.nodes.as_str()), (JobState::Pending, ""));
    assert!(j.steps.is_empty());

    // Gone from the live table after MinJobAge, still in accounting.
    c.wait_for(Duration::from_secs(15), "finished jobs purged", |c| {
        c.job(big).is_none()
    });
    assert_eq!(by_id(&c, big).state, JobState::Completed);

    // ... and after a controller crash.
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(15), "controller back", |c| {
        c.try_call(Body::Ping).is_some()
    });
    assert_eq!(by_id(&c, bad).exit_code, (3, 0));

    // Window and state filters over everything recorded.
    let all = acct(&c, AcctQuery::default());
    let ids: Vec<u32> = all.iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![big, bad, held]);
    let failed = acct(
        &c,
        AcctQuery {
            states: vec![JobState::Failed],
            ..Default::default()
        },
    );
    assert_eq!(
        failed.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![bad]
    );
    // In the last second only the pending job was active (the others ended
    // before the purge wait); before any submission, nothing was.
    let now = chrono::Utc::now().timestamp();
    let recent = acct(
        &c,
        AcctQuery {
            start: Some(now - 1),
            ..Default::default()
        },
    );
    assert_eq!(
        recent.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![held]
    );
    let before = acct(
        &c,
        AcctQuery {
            end: Some(all[0].submit_time - 10),
            ..Default::default()
        },
    );
    assert!(before.is_empty(), "{before:?}");
}

#[test]
fn sacct_prints_what_client_libraries_parse() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let ok = c.sbatch(w.path(), &["-J", "ok", "--wrap", "true"]);
    let bad = c.sbatch(w.path(), &["-N", "2", "--wrap", "exit 3"]);
    let held = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    c.wait_done(ok, Duration::from_secs(20));
    c.wait_done(bad, Duration::from_secs(20));
    let (o, b, h) = (ok.to_string(), bad.to_string(), held.to_string());
    // submitit's exact call: repeated -j accumulate; steps follow their job.
    let out = c.cli(
        w.path(),
        "sacct",
        &[
            "-o",
            "JobID,State,NodeList",
            "--parsable2",
            "-j",
            &o,
            "-j",
            &b,
            "-j",
            &h,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "JobID|State|NodeList\n{ok}|COMPLETED|n1\n{ok}.batch|COMPLETED|n1\n\
             {bad}|FAILED|n[1-2]\n{bad}.batch|FAILED|n1\n{held}|PENDING|None assigned\n"
        )
    );
    // Fixed-width default view, allocations only.
    let out = c.cli(w.path(), "sacct", &["-X", "-j", &b]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode "
    );
    assert_eq!(
        lines[1],
        "------------ ---------- ---------- ---------- ---------- ---------- -------- "
    );
    assert_eq!(
        lines[2],
        format!("{bad:<12}       wrap      debug                     2     FAILED      3:0 ")
    );
    assert_eq!(lines.len(), 3);
    // Unknown options fail like Slurm's.
    let out = c.cli(w.path(), "sacct", &["--bogus"]);
    assert!(!out.status.success());
}
