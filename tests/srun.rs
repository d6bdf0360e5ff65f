//! srun against a live cluster: steps inside a batch job and on their own
//! allocation, per-task environment and output, exit codes, accounting, and
//! cancellation reaching every task process.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::{alive, write_script, Cluster};

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn srun_runs_steps_inside_and_outside_allocations() {
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    // Outside an allocation: srun creates one, streams output, releases it.
    let o = c.cli(
        w,
        "srun",
        &[
            "-N",
            "3",
            "-n",
            "5",
            "-l",
            "bash",
            "-c",
            "echo $SLURM_PROCID/$SLURM_NTASKS $SLURM_LOCALID $SLURMD_NODENAME",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut lines: Vec<String> = text(&o).lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "0: 0/5 0 n1",
            "1: 1/5 1 n1",
            "2: 2/5 0 n2",
            "3: 3/5 1 n2",
            "4: 4/5 0 n3"
        ]
    );
    // The highest task exit code is srun's, with Slurm's error lines.
    let o = c.cli(
        w,
        "srun",
        &["-n", "2", "bash", "-c", "exit $((3 + SLURM_PROCID))"],
    );
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("task 1: Exited with exit code 4"), "{err}");

    // Inside a batch job: steps share the allocation; -o writes per-task files.
    write_script(
        w,
        "steps.sh",
        "#!/bin/bash\n#SBATCH -N 2\n\
         srun -n 4 -o task-%t.out bash -c 'echo task $SLURM_PROCID node $SLURM_NODEID step $SLURM_STEP_ID'\n\
         srun hostname > /dev/null\n",
    );
    let id = c.sbatch(w, &["steps.sh"]);
    let j = c.wait_done(id, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed);
    for t in 0..4 {
        let out = std::fs::read_to_string(w.join(format!("task-{t}.out"))).unwrap();
        assert_eq!(out, format!("task {t} node {} step 0\n", t / 2));
    }
    // Accounting shows the batch step and both srun steps.
    let o = c.cli(
        w,
        "sacct",
        &[
            "-j",
            &id.to_string(),
            "-P",
            "-n",
            "-o",
            "JobID,JobName,State,NTasks",
        ],
    );
    assert_eq!(
        text(&o),
        format!("{id}|steps.sh|COMPLETED|\n{id}.batch|batch|COMPLETED|1\n{id}.0|bash|COMPLETED|4\n{id}.1|hostname|COMPLETED|2\n")
    );
}

#[test]
fn scancel_kills_srun_tasks_on_every_node() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let pids = w.path().join("pids");
    write_script(
        w.path(),
        "long.sh",
        &format!(
            "#!/bin/bash\n#SBATCH -N 2\nsrun -n 2 bash -c 'echo $$ >> {}; sleep 300'\n",
            pids.display()
        ),
    );
    let id = c.sbatch(w.path(), &["long.sh"]);
    c.wait_for(Duration::from_secs(15), "two tasks running", |_| {
        std::fs::read_to_string(&pids).is_ok_and(|s| s.lines().count() == 2)
    });
    let tasks: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(tasks.iter().all(|&p| alive(p)));
    assert!(c
        .cli(w.path(), "scancel", &[&id.to_string()])
        .status
        .success());
    assert_eq!(
        c.wait_done(id, Duration::from_secs(15)).state,
        JobState::Cancelled
    );
    for p in tasks {
        assert!(!alive(p), "task {p} survived scancel");
    }
}

/// Read a file of pids, one per line, once it has `n` of them.
fn wait_pids(c: &Cluster, path: &std::path::Path, n: usize) -> Vec<i32> {
    c.wait_for(Duration::from_secs(20), "tasks started", |_| {
        std::fs::read_to_string(path).is_ok_and(|s| s.lines().count() == n)
    });
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn one_step_is_cancelled_or_signalled_and_srun_ends_its_own_steps() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // Two steps at once in one job: `scancel J.0` ends step 0 only, with
    // slurmstepd's note through its srun; `scancel -s USR1 J.1` signals step 1.
    write_script(
        w,
        "two.sh",
        "#!/bin/bash\n#SBATCH -N 2 -o two.out\n\
         srun -N2 -n2 bash -c 'echo $$ >> p0; exec sleep 300' &\n\
         until [ -s p0 ]; do sleep 0.1; done\n\
         srun -N1 -n1 -J second bash -c 'echo $$ >> p1; exec sleep 300' &\n\
         wait\necho after\n",
    );
    let id = c.sbatch(w, &["two.sh"]);
    let step0 = wait_pids(&c, &w.join("p0"), 2);
    let step1 = wait_pids(&c, &w.join("p1"), 1);
    // squeue -s lists the job's running steps, srun's -J naming its step.
    let o = c.cli(w, "squeue", &["-s", "-h", "-o", "%i %j %A %N"]);
    assert_eq!(
        text(&o),
        format!("{id}.0 bash 2 n[1-2]\n{id}.1 second 1 n1\n{id}.batch batch 1 n1\n")
    );
    let o = c.cli(w, "squeue", &["-s", &format!("{id}.1"), "-o", "%.8i %u"]);
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    assert_eq!(
        text(&o),
        format!("  STEPID USER\n{:>8} {user}\n", format!("{id}.1"))
    );
    let o = c.cli(w, "scancel", &[&format!("{id}.0")]);
    assert!(o.status.success(), "{o:?}");
    c.wait_for(Duration::from_secs(15), "step 0 killed", |_| {
        step0.iter().all(|&p| !alive(p))
    });
    assert!(alive(step1[0]), "step 1 must survive the cancel of step 0");
    assert_eq!(c.job(id).unwrap().state, JobState::Running);
    // A step the job does not have: Slurm's line naming the job, exit 225;
    // a step of a job that is not there: exit 1.
    let o = c.cli(w, "scancel", &[&format!("{id}.7")]);
    assert_eq!(o.status.code(), Some(225), "{o:?}");
    assert_eq!(
        err(&o),
        format!("scancel: error: Kill job error on job step id {id}: Invalid job id specified\n")
    );
    let o = c.cli(w, "scancel", &["424242.1"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(err(&o).contains("job step id 424242.1: Invalid job id specified"));
    let o = c.cli(w, "scancel", &["-s", "USR1", &format!("{id}.1")]);
    assert!(o.status.success(), "{o:?}");
    let j = c.wait_done(id, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed);
    let out = std::fs::read_to_string(w.join("two.out")).unwrap();
    assert!(
        out.contains(&format!(
            "slurmstepd-n1: error: *** STEP {id}.0 ON n1 CANCELLED AT "
        )) && out.contains("srun: Job step aborted: Waiting up to"),
        "{out}"
    );
    assert!(!out.contains(&format!("STEP {id}.1")), "{out}");
    assert!(
        out.contains("User defined signal 1") && out.ends_with("after\n"),
        "{out}"
    );
    let o = c.cli(
        w,
        "sacct",
        &[
            "-j",
            &id.to_string(),
            "-P",
            "-n",
            "-o",
            "JobID,State,ExitCode",
        ],
    );
    let acct = text(&o);
    assert!(acct.contains(&format!("{id}.0|CANCELLED|0:9\n")), "{acct}");
    assert!(acct.contains(&format!("{id}.1|CANCELLED|0:10\n")), "{acct}");

    // -K: the bad exit is reported, then srun ends the step: SIGTERM first
    // (SIGKILL only after KillWait), so the others end "Terminated".
    let o = c.cli(
        w,
        "srun",
        &[
            "-N2",
            "-n2",
            "-K",
            "bash",
            "-c",
            "[ $SLURM_PROCID = 1 ] && exit 3; exec sleep 300",
        ],
    );
    assert_eq!(o.status.code(), Some(143), "{o:?}");
    let e = err(&o);
    let at = |s: &str| e.find(s).unwrap_or_else(|| panic!("no {s:?} in {e}"));
    assert!(at("n2: task 1: Exited with exit code 3") < at("_step_signal: Terminating StepId="));
    assert!(at("_step_signal: Terminating StepId=") < at("Force Terminated StepId="));
    assert!(
        e.contains("error: *** STEP ") && e.contains("task 0: Terminated"),
        "{e}"
    );

    // -W: the others get that long after the first exit.
    let o = c.cli(
        w,
        "srun",
        &[
            "-n2",
            "-W",
            "1",
            "bash",
            "-c",
            "[ $SLURM_PROCID = 1 ] && exit 0; exec sleep 300",
        ],
    );
    assert_eq!(o.status.code(), Some(143), "{o:?}");
    let e = err(&o);
    assert!(e.contains("srun: First task exited 1s ago\n"), "{e}");
    assert!(
        e.contains(".0 task 0: running\n") && e.contains(".0 task 1: exited\n"),
        "{e}"
    );

    // -I: a busy cluster means no allocation, and the request is withdrawn.
    let busy = c.sbatch(w, &["--exclusive", "-N2", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(15), "busy job running", |c| {
        c.job(busy).is_some_and(|j| j.state == JobState::Running)
    });
    let o = c.cli(w, "srun", &["-I", "true"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(
        err(&o),
        "srun: error: Unable to allocate resources: Requested nodes are busy\n"
    );
    let o = c.cli(w, "squeue", &["-h", "-t", "PD"]);
    assert_eq!(text(&o), "", "the -I request must not stay queued");
    let o = c.cli(w, "scancel", &[&busy.to_string()]);
    assert!(o.status.success(), "{o:?}");

    // `-o /dev/null` is used as it is (it cannot be truncated).
    let quiet = c.sbatch(w, &["-o", "/dev/null", "--wrap", "echo gone"]);
    assert_eq!(
        c.wait_done(quiet, Duration::from_secs(20)).state,
        JobState::Completed
    );
    // srun's output files are truncated first unless --open-mode=append (or
    // SLURM_OPEN_MODE=a, which a batch job with --open-mode=append passes on),
    // as in Slurm; tasks sharing a file all keep their lines.
    let f = w.join("o.txt");
    let read = || std::fs::read_to_string(&f).unwrap();
    for word in ["a", "b"] {
        assert!(c
            .cli(w, "srun", &["-o", "o.txt", "echo", word])
            .status
            .success());
    }
    assert_eq!(read(), "b\n");
    assert!(c
        .cli(w, "srun", &["-N1", "-n2", "-o", "o.txt", "echo", "c"])
        .status
        .success());
    assert_eq!(read(), "c\nc\n");
    let o = c.cli(
        w,
        "srun",
        &["--open-mode=append", "-o", "o.txt", "echo", "d"],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(read(), "c\nc\nd\n");
    let job = c.sbatch(
        w,
        &[
            "--open-mode=append",
            "-o",
            "o.txt",
            "--wrap",
            "echo mode=$SLURM_OPEN_MODE; srun -o o.txt echo e",
        ],
    );
    c.wait_done(job, Duration::from_secs(20));
    assert_eq!(read(), "c\nc\nd\nmode=a\ne\n");
}
