//! Prolog, Epilog, PrologSlurmctld and EpilogSlurmctld against real daemons
//! on loopback: when each runs, the environment it gets, and what a failure
//! or a timeout does to the node and the job (Slurm 22.05's behaviour).
//! Scripts write what they see into a directory of the test's own.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use canopy::wire::types::JobState;
use common::{alive, write_script, Cluster};

const LIMIT: Duration = Duration::from_secs(30);

/// `KEY=value` lines of a file written by `env`.
fn env_of(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn get<'a>(env: &'a HashMap<String, String>, key: &str) -> &'a str {
    env.get(key).map(String::as_str).unwrap_or("<unset>")
}

/// A script that records its environment as `DIR/TAG.$SLURMD_NODENAME.$SLURM_JOB_ID`
/// (or `DIR/TAG.ctld.$SLURM_JOB_ID` on the controller), then runs `then`.
fn recorder(dir: &Path, tag: &str, then: &str) -> String {
    let body = format!(
        "#!/bin/sh\nenv > {d}/{tag}.${{SLURMD_NODENAME:-ctld}}.$SLURM_JOB_ID.tmp\n\
         mv {d}/{tag}.${{SLURMD_NODENAME:-ctld}}.$SLURM_JOB_ID.tmp {d}/{tag}.${{SLURMD_NODENAME:-ctld}}.$SLURM_JOB_ID\n{then}\n",
        d = dir.display()
    );
    write_script(dir, &format!("{tag}.sh"), &body)
        .display()
        .to_string()
}

fn squeue_state(c: &Cluster, cwd: &Path, id: u32) -> String {
    let out = c.cli(cwd, "squeue", &["-h", "-o", "%t", "-j", &id.to_string()]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The Prolog runs before the job's first process on a node (the batch
/// script; an srun step's tasks elsewhere), the Epilog on every node once
/// the job is over there, each with slurmd's environment; the job is not
/// reported over until the Epilogs are done.
#[test]
fn prolog_and_epilog_run_where_and_when_slurm_runs_them() {
    let s = tempfile::tempdir().unwrap();
    let prolog = recorder(s.path(), "prolog", "exit 0");
    let epilog = recorder(s.path(), "epilog", "sleep 1");
    let extra = format!("Prolog={prolog}\nEpilog={epilog}\nPrologEpilogTimeout=10\n");
    let c = Cluster::start_with(2, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();

    // -N2 without a step: the Prolog runs on the batch host only.
    let script = write_script(
        w.path(),
        "a.sh",
        &format!("#!/bin/sh\nls {d} > {d}/seen-by-script.$SLURM_JOB_ID\nexit 3\n"),
    );
    let id = c.sbatch(w.path(), &["-N", "2", script.to_str().unwrap()]);
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.exit_code, (3, 0));
    // Over only once every Epilog has ended.
    for n in ["n1", "n2"] {
        assert!(
            s.path().join(format!("epilog.{n}.{id}")).exists(),
            "the Epilog on {n} had not run when the job was reported over"
        );
    }
    let seen = std::fs::read_to_string(s.path().join(format!("seen-by-script.{id}"))).unwrap();
    assert!(seen.contains(&format!("prolog.n1.{id}")), "{seen}");
    assert!(!s.path().join(format!("prolog.n2.{id}")).exists());

    let env = env_of(&s.path().join(format!("prolog.n1.{id}")));
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap();
    for (k, v) in [
        ("SLURM_JOB_ID", id.to_string()),
        ("SLURM_JOBID", id.to_string()),
        ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd".to_string()),
        ("SLURMD_NODENAME", "n1".to_string()),
        ("SLURM_CLUSTER_NAME", "test".to_string()),
        ("SLURM_NODELIST", "n[1-2]".to_string()),
        ("SLURM_JOB_PARTITION", "debug".to_string()),
        ("SLURM_JOB_USER", me.name.clone()),
        ("SLURM_JOB_UID", me.uid.to_string()),
        ("SLURM_JOB_NUM_NODES", "2".to_string()),
        ("SLURM_CONF", c.conf.display().to_string()),
    ] {
        assert_eq!(get(&env, k), v, "{k} in the Prolog: {env:?}");
    }
    // No search path, nothing of the daemon's, and what slurmd does not set.
    for k in ["PATH", "HOME", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST"] {
        assert!(!env.contains_key(k), "{k} set in the Prolog: {env:?}");
    }
    let env = env_of(&s.path().join(format!("epilog.n2.{id}")));
    assert_eq!(get(&env, "SLURM_SCRIPT_CONTEXT"), "epilog_slurmd");
    assert_eq!(get(&env, "SLURMD_NODENAME"), "n2");
    assert_eq!(get(&env, "SLURM_JOB_EXIT_CODE2"), "3:0");
    assert_eq!(get(&env, "SLURM_JOB_EXIT_CODE"), "768");

    // An srun step on n2 runs n2's Prolog first.
    let script = write_script(
        w.path(),
        "b.sh",
        &format!("#!/bin/sh\nsrun -N2 -n2 ls {d} > {d}/seen-by-step.$SLURM_JOB_ID\n"),
    );
    let id = c.sbatch(w.path(), &["-N", "2", script.to_str().unwrap()]);
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    let seen = std::fs::read_to_string(s.path().join(format!("seen-by-step.{id}"))).unwrap();
    assert!(seen.contains(&format!("prolog.n2.{id}")), "{seen}");
    // Once per node, however many steps.
    assert!(s.path().join(format!("prolog.n1.{id}")).exists());

    // `scontrol reconfigure` takes a new Prolog to the node daemons.
    let newer = recorder(s.path(), "newer", "exit 0");
    let text = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, text.replace(&prolog, &newer)).unwrap();
    let out = c.cli(w.path(), "scontrol", &["reconfigure"]);
    assert!(out.status.success(), "{out:?}");
    let script = write_script(
        w.path(),
        "c.sh",
        "#!/bin/sh
true
",
    );
    let id = c.sbatch(w.path(), &[script.to_str().unwrap()]);
    c.wait_done(id, LIMIT);
    assert!(s.path().join(format!("newer.n1.{id}")).exists());
    assert!(!s.path().join(format!("prolog.n1.{id}")).exists());
}

/// A failing Prolog drains its node with Slurm's reason and requeues the
/// job held (`launch failed requeued held`) before its script runs; a
/// `--no-requeue` job is cancelled instead. A failing Epilog drains the
/// node and leaves the job's end as it was.
#[test]
fn a_failing_prolog_drains_and_requeues_held_and_a_failing_epilog_drains() {
    let s = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();
    // Fails while the "fail-prolog" file exists; the Epilog while "fail-epilog" does.
    let prolog = recorder(s.path(), "prolog", &format!("test ! -e {d}/fail-prolog"));
    let epilog = recorder(s.path(), "epilog", &format!("test ! -e {d}/fail-epilog"));
    let extra = format!("Prolog={prolog}\nEpilog={epilog}\n");
    let c = Cluster::start_with(1, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    std::fs::write(s.path().join("fail-prolog"), "").unwrap();
    let script = write_script(
        w.path(),
        "a.sh",
        &format!("#!/bin/sh\ntouch {d}/script-ran.$SLURM_JOB_ID\n"),
    );
    let id = c.sbatch(w.path(), &[script.to_str().unwrap()]);
    c.wait_for(LIMIT, "the job requeued and held", |c| {
        c.job(id)
            .is_some_and(|j| j.state == JobState::Pending && j.restarts == 1)
    });
    let j = c.job(id).unwrap();
    assert_eq!(j.reason, "launch failed requeued held");
    assert_eq!(j.priority, 0);
    let out = c.cli(w.path(), "scontrol", &["show", "job", &id.to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("JobState=PENDING Reason=launch_failed_requeued_held"),
        "{text}"
    );
    let out = c.cli(
        w.path(),
        "squeue",
        &["-h", "-o", "%t %r", "-j", &id.to_string()],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "PD launch failed requeued held"
    );
    assert!(!s.path().join(format!("script-ran.{id}")).exists());
    let n = c.node("n1");
    assert!(n.drain, "{n:?}");
    assert_eq!(n.reason.as_deref(), Some("Prolog error"));
    let out = c.cli(w.path(), "sinfo", &["-R", "-h", "-o", "%E"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Prolog error");
    let out = c.cli(w.path(), "scontrol", &["show", "node", "n1"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Reason=Prolog error"));

    // Not requeueable: cancelled.
    c.cli(
        w.path(),
        "scontrol",
        &["update", "NodeName=n1", "State=RESUME"],
    );
    let id2 = c.sbatch(w.path(), &["--no-requeue", script.to_str().unwrap()]);
    let j = c.wait_done(id2, LIMIT);
    assert_eq!(j.state, JobState::Cancelled, "{j:?}");
    assert!(c.node("n1").drain);

    // The Prolog works again: released, the held job runs; a failing
    // Epilog then drains the node, and the job still completed.
    std::fs::remove_file(s.path().join("fail-prolog")).unwrap();
    std::fs::write(s.path().join("fail-epilog"), "").unwrap();
    c.cli(
        w.path(),
        "scontrol",
        &["update", "NodeName=n1", "State=RESUME"],
    );
    let out = c.cli(w.path(), "scontrol", &["release", &id.to_string()]);
    assert!(out.status.success(), "{out:?}");
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert!(s.path().join(format!("script-ran.{id}")).exists());
    c.wait_for(LIMIT, "n1 drained by the Epilog", |c| {
        c.node("n1").reason.as_deref() == Some("Epilog error")
    });
    assert_eq!(c.job(id).unwrap().state, JobState::Completed);
}

/// PrologFlags=Alloc: every node's Prolog runs at allocation, and the
/// batch script starts only once all are done.
#[test]
fn prolog_flags_alloc_runs_every_nodes_prolog_before_the_script() {
    let s = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();
    // n2's Prolog is the slow one.
    let prolog = recorder(
        s.path(),
        "prolog",
        "[ \"$SLURMD_NODENAME\" = n2 ] && sleep 2; exit 0",
    );
    let extra = format!("Prolog={prolog}\nPrologFlags=Alloc,Serial\n");
    let c = Cluster::start_with(2, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    let script = write_script(
        w.path(),
        "a.sh",
        &format!("#!/bin/sh\nls {d} > {d}/seen-by-script.$SLURM_JOB_ID\n"),
    );
    let id = c.sbatch(w.path(), &["-N", "2", script.to_str().unwrap()]);
    // Slurm's reason while the Prologs run.
    c.wait_for(LIMIT, "Reason=Prolog", |c| {
        c.job(id)
            .is_some_and(|j| j.state == JobState::Running && j.reason == "Prolog")
    });
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert_eq!(j.reason, "None");
    let seen = std::fs::read_to_string(s.path().join(format!("seen-by-script.{id}"))).unwrap();
    for n in ["n1", "n2"] {
        assert!(seen.contains(&format!("prolog.{n}.{id}")), "{n}: {seen}");
    }
}

/// PrologSlurmctld keeps the job CONFIGURING (CF) until it ends; its
/// failure requeues a batch job and cancels a `--no-requeue` one; the
/// EpilogSlurmctld runs after the end with slurmctld's environment.
#[test]
fn prolog_slurmctld_holds_the_job_configuring_and_its_failure_requeues() {
    let s = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();
    // Waits for the test's go-ahead (at most 20 s); fails for jobs named "bad".
    let prolog = recorder(
        s.path(),
        "pctld",
        &format!(
            "echo $$ > {d}/pctld.pid.$SLURM_JOB_ID\n[ \"$SLURM_JOB_NAME\" = bad ] && exit 1\ni=0\nwhile [ ! -e {d}/go ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\nexit 0"
        ),
    );
    let epilog = recorder(s.path(), "ectld", "exit 0");
    let extra = format!("PrologSlurmctld={prolog}\nEpilogSlurmctld={epilog}\n");
    let c = Cluster::start_with(1, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    let script = write_script(
        w.path(),
        "a.sh",
        &format!("#!/bin/sh\ntouch {d}/script-ran.$SLURM_JOB_ID\n"),
    );
    let id = c.sbatch(w.path(), &["-J", "good", script.to_str().unwrap()]);
    c.wait_for(LIMIT, "the job CONFIGURING", |c| {
        squeue_state(c, w.path(), id) == "CF"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(squeue_state(&c, w.path(), id), "CF");
    let out = c.cli(w.path(), "scontrol", &["show", "job", &id.to_string()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("JobState=CONFIGURING"));
    let out = c.cli(w.path(), "squeue", &["-h", "-t", "CF", "-o", "%i"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), id.to_string());
    assert!(!s.path().join(format!("script-ran.{id}")).exists());
    let env = env_of(&s.path().join(format!("pctld.ctld.{id}")));
    assert_eq!(get(&env, "SLURM_SCRIPT_CONTEXT"), "prolog_slurmctld");
    assert_eq!(get(&env, "SLURM_JOB_NAME"), "good");
    assert_eq!(get(&env, "SLURM_JOB_NODELIST"), "n1");
    // Cancelled while CONFIGURING: its PrologSlurmctld is killed, and its
    // script never runs.
    let gone = c.sbatch(w.path(), &["-J", "gone", script.to_str().unwrap()]);
    c.wait_for(LIMIT, "the second job CONFIGURING", |c| {
        squeue_state(c, w.path(), gone) == "CF"
            && s.path().join(format!("pctld.pid.{gone}")).exists()
    });
    assert!(c
        .cli(w.path(), "scancel", &[&gone.to_string()])
        .status
        .success());
    assert_eq!(c.wait_done(gone, LIMIT).state, JobState::Cancelled);
    let pid: i32 = std::fs::read_to_string(s.path().join(format!("pctld.pid.{gone}")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    c.wait_for(
        Duration::from_secs(5),
        "the cancelled job's PrologSlurmctld killed",
        |_| !alive(pid),
    );
    assert!(!s.path().join(format!("script-ran.{gone}")).exists());

    std::fs::write(s.path().join("go"), "").unwrap();
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert!(s.path().join(format!("script-ran.{id}")).exists());
    c.wait_for(LIMIT, "the EpilogSlurmctld", |_| {
        s.path().join(format!("ectld.ctld.{id}")).exists()
    });
    let env = env_of(&s.path().join(format!("ectld.ctld.{id}")));
    assert_eq!(get(&env, "SLURM_SCRIPT_CONTEXT"), "epilog_slurmctld");
    assert_eq!(get(&env, "SLURM_JOB_EXIT_CODE2"), "0:0");

    // A failure requeues (not held: it comes straight back, and fails again).
    let bad = c.sbatch(w.path(), &["-J", "bad", script.to_str().unwrap()]);
    c.wait_for(LIMIT, "the failed job requeued", |c| {
        c.job(bad).is_some_and(|j| j.restarts >= 1)
    });
    let out = c.cli(w.path(), "scancel", &[&bad.to_string()]);
    assert!(out.status.success());
    assert!(!s.path().join(format!("script-ran.{bad}")).exists());
    let nr = c.sbatch(
        w.path(),
        &["-J", "bad", "--no-requeue", script.to_str().unwrap()],
    );
    let j = c.wait_done(nr, LIMIT);
    assert_eq!((j.state, j.restarts), (JobState::Cancelled, 0), "{j:?}");
    assert!(!s.path().join(format!("script-ran.{nr}")).exists());
    assert!(
        !c.node("n1").drain,
        "a PrologSlurmctld failure drains nothing"
    );
}

/// A Prolog that hangs is killed (with what it started) at
/// PrologEpilogTimeout, and counts as a failure.
#[test]
fn a_hanging_prolog_is_killed_at_the_timeout() {
    let s = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();
    let prolog = recorder(
        s.path(),
        "prolog",
        &format!("sleep 60 &\necho $! > {d}/bg.pid\nwait"),
    );
    let extra = format!("Prolog={prolog}\nPrologEpilogTimeout=2\n");
    let c = Cluster::start_with(1, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    let script = write_script(w.path(), "a.sh", "#!/bin/sh\ntrue\n");
    let t0 = std::time::Instant::now();
    let id = c.sbatch(w.path(), &[script.to_str().unwrap()]);
    c.wait_for(LIMIT, "n1 drained", |c| c.node("n1").drain);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(15),
        "{took:?}"
    );
    assert_eq!(c.node("n1").reason.as_deref(), Some("Prolog error"));
    c.wait_for(LIMIT, "the job requeued held", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Pending)
    });
    let pid: i32 = std::fs::read_to_string(s.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    c.wait_for(
        Duration::from_secs(5),
        "the Prolog's background child killed",
        |_| !alive(pid),
    );
}

/// A controller killed while a job is CONFIGURING runs the job's
/// PrologSlurmctld again when it restarts (the launch never left), and the
/// job then runs normally, once its node is back.
#[test]
fn a_restarted_controller_runs_a_configuring_jobs_prolog_slurmctld_again() {
    let s = tempfile::tempdir().unwrap();
    let d = s.path().display().to_string();
    let prolog = recorder(
        s.path(),
        "pctld",
        &format!(
            "echo run >> {d}/runs.$SLURM_JOB_ID\ni=0\nwhile [ ! -e {d}/go ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\nexit 0"
        ),
    );
    let extra = format!("PrologSlurmctld={prolog}\n");
    let mut c = Cluster::start_with(1, 2, 30, &extra);
    let w = tempfile::tempdir().unwrap();
    let script = write_script(
        w.path(),
        "a.sh",
        &format!("#!/bin/sh\ntouch {d}/script-ran.$SLURM_JOB_ID\n"),
    );
    let id = c.sbatch(w.path(), &[script.to_str().unwrap()]);
    let runs = |n: usize| {
        std::fs::read_to_string(s.path().join(format!("runs.{id}")))
            .unwrap_or_default()
            .lines()
            .count()
            >= n
    };
    c.wait_for(LIMIT, "the job CONFIGURING", |c| {
        squeue_state(c, w.path(), id) == "CF" && runs(1)
    });
    // The node daemon goes too, and comes back only later: the launch
    // waits for it rather than fail.
    c.kill_ctld();
    c.kill_node("n1");
    c.start_ctld();
    c.wait_for(LIMIT, "the PrologSlurmctld run again", |c| {
        runs(2) && squeue_state(c, w.path(), id) == "CF"
    });
    std::fs::write(s.path().join("go"), "").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(squeue_state(&c, w.path(), id), "CF");
    c.start_node("n1");
    let j = c.wait_done(id, LIMIT);
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert!(s.path().join(format!("script-ran.{id}")).exists());
}
