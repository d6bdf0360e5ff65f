//! `GrpTRESMins`, `GrpWall` and `sacct -D` on real daemons: usage from a
//! running job stops it and holds the next job with Slurm's reason until
//! the usage decays; under `safe` a job that could not finish inside the
//! limit waits until `sacctmgr` raises it, and `sshare -l` shows the limit
//! and the usage; a requeued job's runs are listed one by one by `sacct
//! -D`.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

/// Usage is calculated at each 5 s tick and decays with a 20 s half-life.
const CONF: &str = "PriorityType=priority/multifactor\nPriorityCalcPeriod=0:02\n\
                    PriorityDecayHalfLife=0:20\n";

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(c: &Cluster, dir: &Path, cmd: &str, args: &[&str]) -> String {
    let o = c.cli(dir, cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}{}",
        out(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    out(&o)
}

fn state(c: &Cluster, id: u32) -> Option<JobState> {
    c.job(id).map(|j| j.state)
}

#[test]
fn used_minutes_stop_the_running_job_and_hold_the_next_until_they_decay() {
    let conf = format!("{CONF}AccountingStorageEnforce=associations,limits\n");
    let c = Cluster::start_with(1, 2, 30, &conf);
    let d = c.dir.path().to_path_buf();
    // 100 MiB-minutes of memory: a 1000 MiB job uses them in 6 s.
    ok(
        &c,
        &d,
        "sacctmgr",
        &["-i", "add", "account", "m", "GrpTRESMins=mem=100"],
    );
    ok(
        &c,
        &d,
        "sacctmgr",
        &["-i", "add", "user", "root", "account=m"],
    );
    let shown = ok(
        &c,
        &d,
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "where",
            "account=m",
            "user=",
            "format=account,grptresmins",
        ],
    );
    assert!(shown.starts_with("m|mem=100M\n"), "{shown}");
    let a = c.sbatch(
        &d,
        &[
            "-A",
            "m",
            "--mem=1000",
            "-t",
            "5",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 60",
        ],
    );
    // Without `safe` it starts (nothing used yet), and is stopped once
    // the minutes are used up: TIMEOUT, as Slurm ends it.
    let done = c.wait_done(a, Duration::from_secs(60));
    assert_eq!(done.state, JobState::Timeout);
    let b = c.sbatch(
        &d,
        &[
            "-A",
            "m",
            "--mem=100",
            "-t",
            "1",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ],
    );
    c.wait_for(Duration::from_secs(10), "the next job held", |c| {
        c.job(b).is_some_and(|j| j.reason == "AssocGrpMemMinutes")
    });
    let r = ok(
        &c,
        &d,
        "squeue",
        &["-h", "-j", &b.to_string(), "-o", "%T %r"],
    );
    assert!(
        r == "PENDING AssocGrpMemMinutes\n" || state(&c, b) != Some(JobState::Pending),
        "{r}"
    );
    // The usage decays below the limit: it runs.
    let done = c.wait_done(b, Duration::from_secs(90));
    assert_eq!(done.state, JobState::Completed);
}

#[test]
fn safe_holds_a_job_that_cannot_finish_inside_the_limit_until_it_is_raised() {
    let conf = format!("{CONF}AccountingStorageEnforce=associations,limits,safe\n");
    let c = Cluster::start_with(1, 2, 30, &conf);
    let d = c.dir.path().to_path_buf();
    ok(
        &c,
        &d,
        "sacctmgr",
        &["-i", "add", "account", "s", "GrpTRESMins=cpu=1"],
    );
    ok(
        &c,
        &d,
        "sacctmgr",
        &["-i", "add", "user", "root", "account=s"],
    );
    // 2 CPUs × 1 minute: more than the 1 CPU-minute the account has.
    let j = c.sbatch(
        &d,
        &[
            "-A",
            "s",
            "-n",
            "2",
            "-t",
            "1",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ],
    );
    c.wait_for(Duration::from_secs(10), "the job held", |c| {
        c.job(j)
            .is_some_and(|j| j.reason == "AssocGrpCPUMinutesLimit")
    });
    assert_eq!(state(&c, j), Some(JobState::Pending));
    ok(
        &c,
        &d,
        "sacctmgr",
        &["-i", "modify", "account", "s", "set", "GrpTRESMins=cpu=10"],
    );
    let done = c.wait_done(j, Duration::from_secs(30));
    assert_eq!(done.state, JobState::Completed);
    // sshare -l: the account's limit; its usage in TRES-minutes.
    let rows = ok(
        &c,
        &d,
        "sshare",
        &["-a", "-P", "-o", "Account,User,GrpTRESMins,GrpTRESRaw"],
    );
    assert!(
        rows.lines().any(|l| l.starts_with(" s||cpu=10|cpu=")),
        "{rows}"
    );
}

#[test]
fn sacct_duplicates_lists_each_run_of_a_requeued_job() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let d = w.path().to_path_buf();
    let j = c.sbatch(&d, &["--wrap", "echo run >> runs.txt; sleep 3"]);
    c.wait_for(Duration::from_secs(20), "the first run started", |_| {
        std::fs::read_to_string(d.join("runs.txt")).is_ok_and(|t| t == "run\n")
    });
    ok(&c, &d, "scontrol", &["requeue", &j.to_string()]);
    c.wait_for(Duration::from_secs(30), "the job requeued", |c| {
        c.job(j).is_some_and(|j| j.restarts == 1)
    });
    let done = c.wait_done(j, Duration::from_secs(60));
    assert_eq!(
        done.state,
        JobState::Completed,
        "{} {}",
        done.reason,
        std::fs::read_to_string(d.join(format!("slurm-{j}.out"))).unwrap_or_default()
    );
    let id = j.to_string();
    let all = ok(
        &c,
        &d,
        "sacct",
        &[
            "-D",
            "-X",
            "-n",
            "-P",
            "-j",
            &id,
            "-o",
            "JobID,State,Restarts",
        ],
    );
    assert_eq!(all, format!("{id}|REQUEUED|0\n{id}|COMPLETED|1\n"));
    let last = ok(
        &c,
        &d,
        "sacct",
        &["-X", "-n", "-P", "-j", &id, "-o", "JobID,State"],
    );
    assert_eq!(last, format!("{id}|COMPLETED\n"));
    // -s REQUEUED with -D: the earlier run alone, with its own times.
    let rq = ok(
        &c,
        &d,
        "sacct",
        &[
            "-D",
            "-X",
            "-n",
            "-P",
            "-s",
            "RQ",
            "-j",
            &id,
            "-o",
            "JobID,State,Start,End,NodeList",
        ],
    );
    let cells: Vec<&str> = rq.trim_end().split('|').collect();
    assert_eq!(
        (cells[0], cells[1], cells[4]),
        (id.as_str(), "REQUEUED", "n1"),
        "{rq}"
    );
    assert_ne!(cells[2], "Unknown");
    assert_ne!(cells[3], "Unknown");
}
