//! srun's standard input, forwarded signals and node choice, and sbatch's
//! `-w`/`-x`/`--test-only`, against a live cluster. The expected wording
//! is what Slurm 22.05's srun and sbatch print (checked side by side).

mod common;

use std::path::Path;
use std::process::{Child, Output};
use std::time::Duration;

use canopy::wire::types::JobState;
use common::{write_script, Cluster};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// A CLI command (`args[0]`) with piped standard input, left running.
fn spawn(c: &Cluster, cwd: &Path, args: &[&str]) -> Child {
    c.spawn_cli(cwd, args[0], &args[1..])
}

fn with_input(c: &Cluster, cwd: &Path, args: &[&str], input: &str) -> Output {
    c.cli_with_input(cwd, args[0], &args[1..], input)
}

#[test]
fn srun_input_goes_to_every_task_or_the_one_asked() {
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    // Slurm's default: every task reads a copy of srun's stdin.
    let o = with_input(&c, w, &["srun", "-n2", "-l", "cat"], "a\nb\n");
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(sorted_lines(&out(&o)), ["0: a", "0: b", "1: a", "1: b"]);

    // `-i 1`: only task 1 reads it; the others see end of file at once.
    let o = with_input(
        &c,
        w,
        &["srun", "-N3", "-n3", "-l", "-i", "1", "cat"],
        "only one\n",
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), "1: only one\n");

    // `-i none`: nobody reads it.
    let o = with_input(&c, w, &["srun", "-n2", "--input=none", "cat"], "x\n");
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), "");

    // A script on stdin, as snakemake passes it (`srun ... sh -s`).
    let o = with_input(&c, w, &["srun", "sh", "-s"], "echo from-script $((6*7))\n");
    assert_eq!(out(&o), "from-script 42\n", "{}", err(&o));

    // `-i FILE`: the file, read by srun, goes to every task.
    std::fs::write(w.join("in.txt"), "from file\n").unwrap();
    let o = c.cli(w, "srun", &["-n2", "-l", "-i", "in.txt", "cat"]);
    assert_eq!(sorted_lines(&out(&o)), ["0: from file", "1: from file"]);
    let o = c.cli(w, "srun", &["-i", "missing.txt", "cat"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("missing.txt"), "{}", err(&o));

    // `-i in.%t`: each task reads its own file, opened on its node.
    std::fs::write(w.join("in.0"), "zero\n").unwrap();
    std::fs::write(w.join("in.1"), "one\n").unwrap();
    let o = c.cli(w, "srun", &["-N2", "-n2", "-l", "-i", "in.%t", "cat"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(sorted_lines(&out(&o)), ["0: zero", "1: one"]);
}

#[test]
fn nodelist_and_exclude_choose_the_nodes() {
    let c = Cluster::start(3, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let nodes = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-l", "printenv", "SLURMD_NODENAME"]);
        let o = c.cli(w, "srun", &all);
        assert!(o.status.success(), "{:?}: {}", args, err(&o));
        sorted_lines(&out(&o))
    };
    // The named node is used, the rest filled in, task 0 on the first node.
    assert_eq!(nodes(&["-N2", "-w", "n3"]), ["0: n1", "1: n3"]);
    assert_eq!(nodes(&["-N2", "-x", "n1"]), ["0: n2", "1: n3"]);
    // Naming nodes asks for at least that many.
    assert_eq!(nodes(&["-w", "n[2-3]"]), ["0: n2", "1: n3"]);

    let o = c.cli(w, "srun", &["-w", "n9", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "srun: error: Unable to allocate resources: Invalid node name specified\n"
    );

    // sbatch: the job runs where it was told, and says so.
    let id = c.sbatch(w, &["-w", "n2", "-x", "n1", "--wrap", "sleep 30"]);
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Running)
    });
    assert_eq!(c.job(id).unwrap().nodes, "n2");
    let o = c.cli(w, "scontrol", &["show", "job", &id.to_string()]);
    assert!(
        out(&o).contains("   ReqNodeList=n2 ExcNodeList=n1\n"),
        "{}",
        out(&o)
    );
    let o = c.cli(
        w,
        "squeue",
        &["-h", "-j", &id.to_string(), "-o", "%n|%x|%N"],
    );
    assert_eq!(out(&o), "n2|n1|n2\n");

    // A step inside the job's allocation: -w picks among its nodes.
    write_script(
        w,
        "steps.sh",
        "#!/bin/bash\n#SBATCH -N 3\n\
         srun -w n2 -l printenv SLURMD_NODENAME > picked.out\n\
         srun -x n2 -l printenv SLURMD_NODENAME > excluded.out\n\
         srun -w n7 true 2> bad.err; echo $? > bad.rc\n",
    );
    let o = c.cli(w, "scancel", &[&id.to_string()]);
    assert!(o.status.success());
    let id = c.sbatch(w, &["steps.sh"]);
    let j = c.wait_done(id, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed);
    let read = |f: &str| std::fs::read_to_string(w.join(f)).unwrap();
    assert_eq!(read("picked.out"), "0: n2\n");
    assert_eq!(sorted_lines(&read("excluded.out")), ["0: n1", "1: n3"]);
    assert_eq!(read("bad.rc"), "1\n");
    assert!(read("bad.err").contains("Invalid node name specified"));

    // Contradictions and unknown names are refused at submission.
    let o = c.cli(w, "sbatch", &["-w", "n1", "-x", "n1", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
    let o = c.cli(w, "sbatch", &["-w", "nz", "--wrap", "true"]);
    assert_eq!(
        err(&o),
        "sbatch: error: Batch job submission failed: Invalid node name specified\n"
    );
}

#[test]
fn sbatch_test_only_estimates_and_uses_up_an_id() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let o = c.cli(w, "sbatch", &["--test-only", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "", "Slurm prints the estimate on stderr only");
    let e = err(&o);
    let rest = e
        .strip_prefix("sbatch: Job ")
        .unwrap_or_else(|| panic!("{e}"));
    let (id, rest) = rest.split_once(" to start at ").unwrap();
    let tested: u32 = id.parse().unwrap();
    let (when, rest) = rest.split_once(' ').unwrap();
    assert_eq!(when.len(), "2026-11-21T08:23:53".len(), "{e}");
    assert_eq!(rest, "using 1 processors on nodes n1 in partition debug\n");
    // Nothing was queued, but the id is used up, as in Slurm.
    assert!(c.job(tested).is_none());
    let next = c.sbatch(w, &["-N2", "-n4", "-t", "10", "--wrap", "sleep 60"]);
    assert_eq!(next, tested + 1);
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(next).is_some_and(|j| j.state == JobState::Running)
    });
    // Every CPU is busy now: the estimate is the running job's time limit.
    let o = c.cli(
        w,
        "sbatch",
        &["--test-only", "-N2", "-n4", "--wrap", "true"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let start = c.job(next).unwrap().start_time.unwrap();
    let expected = canopy::cli::format::time::fmt_timestamp(Some(start + 600));
    assert!(
        err(&o).contains(&format!(
            "to start at {expected} using 4 processors on nodes n[1-2]"
        )),
        "{}",
        err(&o)
    );
    // A request no node set can meet.
    let o = c.cli(w, "sbatch", &["--test-only", "-N", "9", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(out(&o), "");
    assert_eq!(
        err(&o),
        "allocation failure: Requested node configuration is not available\n"
    );
}

/// Start `srun` on a two-task step whose tasks trap signals, and wait until
/// both are ready.
fn trapping_srun(c: &Cluster, w: &Path, tag: &str) -> Child {
    let ready = w.join(format!("{tag}.ready"));
    // The USR1 trap also leaves a mark, so the test can wait for it.
    let script = format!(
        "trap 'echo got USR1 $SLURM_PROCID; echo u >> {}' USR1; \
         trap 'echo got INT $SLURM_PROCID; exit 3' INT; \
         echo x >> {}; for i in $(seq 1 300); do sleep 0.1; done",
        w.join(format!("{tag}.usr1")).display(),
        ready.display()
    );
    let child = spawn(c, w, &["srun", "-n2", "-l", "bash", "-c", &script]);
    c.wait_for(Duration::from_secs(15), "tasks ready", |_| {
        std::fs::read_to_string(&ready).is_ok_and(|s| s.lines().count() == 2)
    });
    child
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

#[test]
fn srun_forwards_signals_and_handles_ctrl_c_as_slurm_does() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    let o = c.cli(w, "scontrol", &["show", "step"]);
    assert_eq!(out(&o), "No job steps in the system\n");

    // Other signals reach every task; one Ctrl-C only reports task states.
    let child = trapping_srun(&c, w, "a");
    // The running step, as scontrol shows it (srun's own allocation has no
    // batch step).
    let o = c.cli(w, "scontrol", &["show", "step"]);
    let shown = out(&o);
    assert_eq!(shown.matches("StepId=").count(), 1, "{shown}");
    assert!(shown.contains(".0 UserId="), "{shown}");
    assert!(
        shown.contains("\n   State=RUNNING Partition=debug NodeList=n1\n"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "\n   Nodes=1 CPUs=2 Tasks=2 Name=bash Network=(null)\n   TRES=cpu=2,node=1\n"
        ),
        "{shown}"
    );
    // Where this srun runs: its host and its pid.
    let host = nix::unistd::gethostname().unwrap();
    assert!(
        shown.ends_with(&format!(
            "   SrunHost:Pid={}:{}\n\n",
            host.to_string_lossy(),
            child.id()
        )),
        "{shown}"
    );
    signal(&child, Signal::SIGUSR1);
    c.wait_for(
        Duration::from_secs(15),
        "USR1 trapped by both tasks",
        |_| std::fs::read_to_string(w.join("a.usr1")).is_ok_and(|s| s.lines().count() == 2),
    );
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(1500));
    // Twice within a second: SIGINT to the tasks, then the step is killed.
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, Signal::SIGINT);
    let o = child.wait_with_output().unwrap();
    let (so, se) = (out(&o), err(&o));
    assert!(
        so.contains("0: got USR1 0") && so.contains("1: got USR1 1"),
        "{so}"
    );
    assert!(
        se.contains("srun: interrupt (one more within 1 sec to abort)\n"),
        "{se}"
    );
    assert!(se.contains(".0 tasks 0-1: running\n"), "{se}");
    assert!(se.contains("srun: sending Ctrl-C to StepId="), "{se}");
    assert!(se.contains("srun: forcing job termination\n"), "{se}");
    assert!(
        se.contains("srun: Job step aborted: Waiting up to 4 seconds for job step to finish.\n"),
        "{se}"
    );
    // The tasks either ran their INT trap or were killed first.
    assert!(matches!(o.status.code(), Some(3) | Some(137)), "{se}");

    // SIGTERM ends the step at once.
    let child = trapping_srun(&c, w, "b");
    signal(&child, Signal::SIGTERM);
    let o = child.wait_with_output().unwrap();
    let se = err(&o);
    assert_eq!(o.status.code(), Some(137), "{se}");
    assert!(se.contains("srun: forcing job termination\n"), "{se}");
    assert!(se.contains(": Killed\n"), "{se}");
    // Both srun allocations ended and accounting saw it.
    let states = || out(&c.cli(w, "sacct", &["-n", "-P", "-X", "-o", "State"]));
    c.wait_for(Duration::from_secs(15), "both allocations ended", |_| {
        let s = states();
        s.lines().count() >= 2 && !s.contains("RUNNING") && !s.contains("PENDING")
    });
}

#[test]
fn jobid_test_only_and_multi_prog() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    // --jobid: a step in a job named on the command line, not the environment.
    let id = c.sbatch(w, &["--wrap", "sleep 60"]);
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Running)
    });
    let o = c.cli(
        w,
        "srun",
        &[
            &format!("--jobid={id}"),
            "bash",
            "-c",
            "echo $SLURM_JOB_ID.$SLURM_STEP_ID",
        ],
    );
    assert_eq!(out(&o), format!("{id}.0\n"), "{}", err(&o));
    c.cli(w, "scancel", &[&id.to_string()]);
    // Ids that name no usable allocation, in Slurm's words.
    let held = c.sbatch(w, &["--hold", "--wrap", "true"]);
    for (job, why) in [
        (9999, "Invalid job id specified"),
        (held, "Job is pending execution"),
    ] {
        let o = c.cli(w, "srun", &["--jobid", &job.to_string(), "true"]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(
            err(&o),
            format!(
                "srun: error: Unable to confirm allocation for job {job}: {why}\n\
                 srun: Check SLURM_JOB_ID environment variable. Expired or invalid job {job}\n"
            )
        );
    }

    // --test-only: an estimate on stderr, nothing queued.
    let o = c.cli(w, "srun", &["--test-only", "-N2", "true"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains(" using 2 processors on nodes n[1-2] in partition debug\n"),
        "{}",
        err(&o)
    );
    let o = c.cli(w, "squeue", &["-h", "-t", "PD,R", "-o", "%i"]);
    assert_eq!(out(&o), format!("{held}\n"));
    let o = c.cli(w, "srun", &["--test-only", "-p", "nope", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "allocation failure: Invalid partition name specified\n"
    );

    // --multi-prog: a program per task, %t and %o filled in.
    std::fs::write(
        w.join("mp.conf"),
        "# per task\n0      echo zero %t %o\n1-2    echo range %t %o\n*      echo rest %t %o\n",
    )
    .unwrap();
    let o = c.cli(w, "srun", &["-N2", "-n4", "-l", "--multi-prog", "mp.conf"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        sorted_lines(&out(&o)),
        ["0: zero 0 0", "1: range 1 0", "2: range 2 1", "3: rest 3 3"]
    );
    // The file is checked against the task count, here or in the controller.
    for args in [["-n2", "--multi-prog"], ["-N2", "--multi-prog"]] {
        let mut all = args.to_vec();
        all.push("mp.conf");
        all.push("ignored");
        let o = c.cli(w, "srun", &all);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(
            err(&o),
            "srun: error: Invalid task id, 2 >= ntasks\n\
             srun: error: Line 3 of configuration file mp.conf invalid\n",
            "{args:?}"
        );
    }
    let o = c.cli(w, "srun", &["--multi-prog", "none.conf"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o),
        "srun: error: Could not open multi_prog config file none.conf\n"
    );
}
