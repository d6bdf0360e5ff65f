//! Backfill on real daemons: a wide job waiting for a long-running job
//! does not block a short narrow job that ends before the wide job's
//! planned start, while a long narrow job that would delay it waits; the
//! wide job's planned start and nodes show in `squeue --start` and
//! `scontrol show job`, and `sdiag` counts the backfilled job.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_short_job_backfills_while_a_long_one_waits_for_the_wide_jobs_reservation() {
    // Two nodes of 2 CPUs; backfill every second.
    let c = Cluster::start_with(2, 16, 300, "SchedulerParameters=bf_interval=1\n");
    let w = tempfile::tempdir().unwrap();
    let sbatch = |args: &[&str]| c.sbatch(w.path(), args);
    // The long job fills n1 for up to 50 minutes.
    let long = sbatch(&["-N1", "-n2", "-t", "50", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "the long job to run", |c| {
        c.job(long).is_some_and(|j| j.state == JobState::Running)
    });
    // Both nodes for 10 minutes: only once the long job ends.
    let wide = sbatch(&["-N2", "-n4", "-t", "10", "--wrap", "true"]);
    // n2 is free now, but 55 minutes there would delay the wide job.
    let late = sbatch(&["-N1", "-n2", "-t", "55", "--wrap", "sleep 300"]);
    // 5 minutes on n2 ends long before the wide job can start.
    let short = sbatch(&["-N1", "-n2", "-t", "5", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "the short job to backfill", |c| {
        c.job(short).is_some_and(|j| j.state == JobState::Running)
    });
    let j = c.job(short).unwrap();
    assert_eq!(j.nodes, "n2");
    let late_job = c.job(late).unwrap();
    assert_eq!(late_job.state, JobState::Pending);
    let wide_job = c.job(wide).unwrap();
    assert_eq!(wide_job.state, JobState::Pending);
    assert_eq!(wide_job.reason, "Resources");
    assert_eq!(wide_job.sched_nodes, "n[1-2]");
    let start = wide_job
        .sched_start
        .expect("the wide job has a planned start");
    let long_start = c.job(long).unwrap().start_time.unwrap();
    // The long job's limit, rounded up to bf_resolution (60 s).
    assert!(
        start >= long_start + 50 * 60 && start <= long_start + 50 * 60 + 60,
        "planned {start}, long job started {long_start}"
    );

    // squeue --start: the wide job with its start time and nodes.
    let out = c.cli(w.path(), "squeue", &["--start"]);
    assert!(out.status.success());
    let out = text(&out);
    assert!(
        out.starts_with(
            "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)\n"
        ),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{wide} ")))
        .unwrap_or_else(|| panic!("no row for {wide} in\n{out}"));
    assert!(row.contains(" PD "), "{row}");
    assert!(row.contains(" n[1-2] "), "{row}");
    assert!(row.ends_with("(Resources)"), "{row}");
    assert!(!row.contains(" N/A "), "{row}");
    // Only pending jobs are listed.
    assert!(!out.contains(&format!(" {short} ")), "{out}");
    // squeue -o %S for the pending job is its planned start, too.
    let s = text(&c.cli(
        w.path(),
        "squeue",
        &["-h", "-j", &wide.to_string(), "-o", "%S"],
    ));
    assert_ne!(s.trim(), "N/A");

    let show = text(&c.cli(w.path(), "scontrol", &["show", "job", &wide.to_string()]));
    assert!(show.contains(" SchedNodeList=n[1-2]\n"), "{show}");
    assert!(!show.contains("StartTime=Unknown"), "{show}");

    let diag = text(&c.cli(w.path(), "sdiag", &[]));
    let backfilled = diag
        .lines()
        .find_map(|l| l.strip_prefix("\tTotal backfilled jobs (since last slurm start): "))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .unwrap_or_else(|| panic!("{diag}"));
    assert!(backfilled >= 1, "{diag}");
    assert!(!diag.contains("\tLast cycle when: N/A\n"), "{diag}");

    for id in [long, wide, late, short] {
        c.cli(w.path(), "scancel", &[&id.to_string()]);
    }
}
