//! `scancel` as users and client libraries run it, against a live cluster: the filters
//! select exactly the right jobs, `--signal` after the id reaches the job, and unknown ids
//! exit 0 (with the error line unless `-Q`).

mod common;

use std::path::Path;
use std::time::Duration;

use canopy::wire::messages::Body;
use canopy::wire::types::{JobState, JobSubmit};
use common::{require, Cluster};

fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A held job owned by `uid`, submitted over the wire (root may submit for anyone).
fn submit_held_as(c: &Cluster, dir: &Path, uid: u32, name: &str) -> u32 {
    let dir = dir.to_string_lossy().into_owned();
    let job = JobSubmit {
        name: name.into(),
        workdir: dir.clone(),
        submit_dir: dir,
        submit_host: "localhost".into(),
        script: "#!/bin/sh\ntrue\n".into(),
        hold: true,
        uid,
        gid: uid,
        command: "(null)".into(),
        ..JobSubmit::default()
    };
    match c.call(Body::SubmitJob(Box::new(job))) {
        Body::SubmitReply(r) => r.job_id,
        other => panic!("submit refused: {other:?}"),
    }
}

/// Runs scancel, expecting exit 0.
fn scancel(c: &Cluster, dir: &Path, args: &[&str]) -> String {
    let o = c.cli(dir, "scancel", args);
    assert!(o.status.success(), "scancel {args:?}: {}", err(&o));
    err(&o)
}

fn states(c: &Cluster, ids: &[u32]) -> Vec<JobState> {
    ids.iter().map(|&id| c.job(id).unwrap().state).collect()
}

#[test]
fn filters_select_exactly_the_right_jobs() {
    use JobState::{Cancelled as CA, Pending as PD, Running as R};
    // Submitting as another uid needs root.
    if !require(nix::unistd::getuid().is_root(), "root") {
        return;
    }
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let alpha = c.sbatch(w, &["--hold", "-J", "alpha", "--wrap", "true"]);
    let beta = c.sbatch(
        w,
        &["--hold", "-J", "beta", "-p", "short", "--wrap", "true"],
    );
    let gamma = c.sbatch(w, &["--hold", "-J", "gamma", "--wrap", "true"]);
    let other = submit_held_as(&c, w, 4242, "alpha");
    let run = c.sbatch(w, &["-J", "alpha", "-p", "short", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "job running", |c| {
        c.job(run).is_some_and(|j| j.state == R)
    });
    let all = [alpha, beta, gamma, other, run];
    assert_eq!(states(&c, &all), [PD, PD, PD, PD, R]);

    // Nothing matches: silent, exit 0; -v says why.
    assert_eq!(scancel(&c, w, &["-n", "nosuch"]), "");
    assert_eq!(scancel(&c, w, &["-A", "acct", "-R", "resv"]), "");
    let running_on = c.job(run).unwrap().nodes;
    let idle = if running_on == "n1" { "n2" } else { "n1" };
    assert_eq!(scancel(&c, w, &["-w", idle]), "");
    assert!(scancel(&c, w, &["-v", "-n", "nosuch", "-t", "pd"])
        .contains("No active jobs match ALL job filters, including: job_name=nosuch"));
    // -i with no answer (stdin is empty) cancels nothing.
    scancel(&c, w, &["-i", &alpha.to_string()]);
    assert_eq!(states(&c, &all), [PD, PD, PD, PD, R]);

    // -p and -t: the pending job in `short`, not the running one.
    scancel(&c, w, &["-p", "short", "-t", "PENDING"]);
    assert_eq!(states(&c, &all), [PD, CA, PD, PD, R]);
    // --me with -n and -t: my pending alpha, not another user's, not the running one.
    scancel(&c, w, &["--me", "-n", "alpha", "-t", "pd"]);
    assert_eq!(states(&c, &all), [CA, CA, PD, PD, R]);
    // -u by name, and by uid.
    scancel(&c, w, &["--user=root", "--name=gamma"]);
    assert_eq!(states(&c, &all), [CA, CA, CA, PD, R]);
    let out = scancel(&c, w, &["-u", "4242", "-v"]);
    assert!(
        out.contains(&format!("scancel: Terminating job {other}")),
        "{out}"
    );
    assert_eq!(states(&c, &all), [CA, CA, CA, CA, R]);
    // -w with the node it runs on, and the cluster named as snakemake does.
    scancel(&c, w, &["--clusters=all", "-w", &running_on]);
    let done = c.wait_done(run, Duration::from_secs(20));
    assert_eq!(done.state, CA);
}

#[test]
fn signal_after_the_id_reaches_the_job_and_unknown_ids_exit_zero() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // RUNNING is shown from the moment the job is placed; the trap is only
    // there once the script says so.
    let script = "trap 'echo got TERM; exit 7' TERM; touch trapped; sleep 300 & wait";
    let run = c.sbatch(w, &["-o", "run.out", "--wrap", script]);
    c.wait_for(
        Duration::from_secs(20),
        "job running with its trap set",
        |c| c.job(run).is_some_and(|j| j.state == JobState::Running) && w.join("trapped").exists(),
    );
    // submitit's form: the option after the id. The job handles it and exits on its own.
    scancel(&c, w, &[&run.to_string(), "--signal", "SIGTERM"]);
    let done = c.wait_done(run, Duration::from_secs(20));
    assert_eq!((done.state, done.exit_code), (JobState::Failed, (7, 0)));
    let out = std::fs::read_to_string(w.join("run.out")).unwrap();
    assert!(out.contains("got TERM"), "{out}");

    // A plain cancel: the node notes it in the job's stderr, as slurmstepd does.
    let killed = c.sbatch(
        w,
        &["-o", "killed.out", "--wrap", "echo started; sleep 300"],
    );
    c.wait_for(Duration::from_secs(20), "job started", |_| {
        std::fs::read_to_string(w.join("killed.out")).is_ok_and(|t| t == "started\n")
    });
    scancel(&c, w, &[&killed.to_string()]);
    c.wait_done(killed, Duration::from_secs(20));
    let out = std::fs::read_to_string(w.join("killed.out")).unwrap();
    let head = format!("started\nslurmstepd-n1: error: *** JOB {killed} ON n1 CANCELLED AT ");
    assert!(out.starts_with(&head), "{out}");
    // The local time, as Slurm prints it: 2026-11-21T10:00:00.
    let stamp = &out[head.len()..out.len() - " ***\n".len()];
    assert!(
        chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H:%M:%S").is_ok(),
        "{out}"
    );
    assert!(out.ends_with(" ***\n"), "{out}");

    // A running srun step gets its own line, through srun, to the same stderr.
    let with_step = c.sbatch(
        w,
        &[
            "-o",
            "step.out",
            "--wrap",
            "srun sh -c 'echo step started; sleep 300'",
        ],
    );
    c.wait_for(Duration::from_secs(20), "step started", |_| {
        std::fs::read_to_string(w.join("step.out")).is_ok_and(|t| t.contains("step started"))
    });
    scancel(&c, w, &[&with_step.to_string()]);
    c.wait_done(with_step, Duration::from_secs(20));
    let out = std::fs::read_to_string(w.join("step.out")).unwrap();
    for what in [format!("JOB {with_step}"), format!("STEP {with_step}.0")] {
        let line = format!("slurmstepd-n1: error: *** {what} ON n1 CANCELLED AT ");
        assert!(out.contains(&line), "{line} in {out}");
    }

    // Unknown and finished ids: exit 0, and the error line only with -v (as Slurm
    // 22.05 does). Both paths: plain ids go straight to the controller, a signal
    // makes scancel look the jobs up first.
    let unknown = "Kill job error on job id 424242: Invalid job id specified";
    assert_eq!(scancel(&c, w, &["424242"]), "");
    assert!(scancel(&c, w, &["-v", "424242"]).contains(unknown));
    assert!(scancel(&c, w, &["424242", "-v", "-s", "USR1"]).contains(unknown));
    let finished = format!("Kill job error on job id {run}: Invalid job id specified");
    assert!(scancel(&c, w, &["-v", "-s", "KILL", &run.to_string()]).contains(&finished));
    assert!(scancel(&c, w, &["-v", &run.to_string()]).contains("already completing or completed"));
    assert_eq!(scancel(&c, w, &[&run.to_string()]), "");
    assert_eq!(scancel(&c, w, &["-Q", "424242", &run.to_string()]), "");
    assert_eq!(scancel(&c, w, &["424242", "--quiet", "--signal=USR1"]), "");
    // A step: the cancel protocol names whole jobs only, so it is reported as missing
    // (nothing for a pending job, as in Slurm) and the job is left alone.
    let held = c.sbatch(w, &["--hold", "--wrap", "true"]);
    assert_eq!(scancel(&c, w, &[&format!("{held}.0")]), "");
    assert_eq!(c.job(held).unwrap().state, JobState::Pending);
    // SIGKILL to a pending job cancels it, as in Slurm.
    assert_eq!(scancel(&c, w, &["--signal=KILL", &held.to_string()]), "");
    assert_eq!(c.job(held).unwrap().state, JobState::Cancelled);

    // Usage errors exit 1.
    for (args, text) in [
        (&["abc"][..], "scancel: error: Invalid job id abc"),
        (&["1_x"], "scancel: error: Invalid job id 1_x"),
        (&[], "scancel: error: No job identification provided"),
        (&["--bogus", "1"], "scancel: unrecognized option '--bogus'"),
        (&["-s", "NOPE", "1"], "Unknown job signal: NOPE"),
        (
            &["-M", "elsewhere", "1"],
            "'elsewhere' can't be reached now",
        ),
    ] {
        let o = c.cli(w, "scancel", args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(err(&o).contains(text), "{args:?}: {}", err(&o));
    }
    let o = c.cli(w, "scancel", &["--hurry", "424242", "-Q"]);
    assert!(o.status.success());
    assert_eq!(
        err(&o),
        "scancel: warning: option --hurry is not supported by canopy yet; ignored\n"
    );
}
