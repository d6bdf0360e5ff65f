//! Time limits, `--signal`, requeue and suspend/resume against a live
//! cluster: a job at its limit ends TIMEOUT, the warning signal reaches the
//! batch shell (`B:`) or only the step's tasks, `scontrol requeue` runs a
//! job again under the same id, and suspend stops its processes.

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

fn ok(c: &Cluster, dir: &std::path::Path, cmd: &str, args: &[&str]) -> String {
    let o = c.cli(dir, cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn time_limit_ends_jobs_after_the_warning_signal() {
    // KillWait=1: the TERM at the limit is followed by KILL one second later.
    let c = Cluster::start_with(2, 2, 30, "KillWait=1\n");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // B: the batch shell itself gets USR1 50 s before the one-minute limit.
    let batch = c.sbatch(
        w,
        &[
            "-t",
            "1",
            "--signal=B:USR1@50",
            "--wrap",
            "trap 'echo warned >> batch.txt' USR1; while true; do sleep 0.2; done",
        ],
    );
    // Without B: only the step's tasks get it; the shell (for which USR2
    // would be fatal) does not.
    let steps = c.sbatch(
        w,
        &[
            "-t",
            "1",
            "--signal=USR2@50",
            "--wrap",
            "srun sh -c \"trap 'echo warned >> steps.txt' USR2; while true; do sleep 0.2; done\"",
        ],
    );
    c.wait_for(Duration::from_secs(40), "the warning signals", |_| {
        w.join("batch.txt").exists() && w.join("steps.txt").exists()
    });
    for id in [batch, steps] {
        let j = c.wait_done(id, Duration::from_secs(90));
        assert_eq!(
            (j.state, j.reason.as_str()),
            (JobState::Timeout, "TimeLimit")
        );
        let ran = j.end_time.unwrap() - j.start_time.unwrap();
        assert!((59..=70).contains(&ran), "job {id} ran {ran} s");
        // The node's note of why, in the job's stderr (srun's own messages
        // about the killed step may follow it).
        let out = std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap();
        let note = out
            .lines()
            .find(|l| {
                l.starts_with("slurmstepd-n") && l.contains(&format!(": error: *** JOB {id} ON n"))
            })
            .unwrap_or_else(|| panic!("no cancel note in {out}"));
        assert!(note.ends_with(" DUE TO TIME LIMIT ***"), "{out}");
    }
    let acct = ok(
        &c,
        w,
        "sacct",
        &[
            "-j",
            &batch.to_string(),
            "-X",
            "-P",
            "-n",
            "-o",
            "State,Timelimit",
        ],
    );
    assert_eq!(acct, "TIMEOUT|00:01:00\n");
}

#[test]
fn requeue_runs_the_job_again_under_the_same_id() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let id = c.sbatch(
        w,
        &[
            "--wrap",
            "echo out $SLURM_RESTART_COUNT; echo run $SLURM_RESTART_COUNT >> runs.txt; sleep 300",
        ],
    );
    c.wait_for(Duration::from_secs(20), "first run", |_| {
        std::fs::read_to_string(w.join("runs.txt")).is_ok_and(|t| t == "run 0\n")
    });
    ok(&c, w, "scontrol", &["requeue", &id.to_string()]);
    c.wait_for(Duration::from_secs(30), "second run", |_| {
        std::fs::read_to_string(w.join("runs.txt")).is_ok_and(|t| t == "run 0\nrun 1\n")
    });
    let j = c.job(id).unwrap();
    assert_eq!((j.state, j.restarts), (JobState::Running, 1));
    // The second run appends to the output file instead of truncating it;
    // between the two runs, the node's note of the requeue.
    let output = || std::fs::read_to_string(w.join(format!("slurm-{id}.out"))).unwrap_or_default();
    c.wait_for(Duration::from_secs(10), "second run's output", |_| {
        output().ends_with("out 1\n")
    });
    let lines: Vec<String> = output().lines().map(String::from).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!((lines[0].as_str(), lines[2].as_str()), ("out 0", "out 1"));
    assert!(
        lines[1].starts_with(&format!(
            "slurmstepd-n1: error: *** JOB {id} ON n1 CANCELLED AT "
        )) && lines[1].ends_with(" DUE TO JOB REQUEUE ***"),
        "{lines:?}"
    );
    let show = ok(&c, w, "scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("Restarts=1"), "{show}");
    // A pending job cannot be requeued.
    let held = c.sbatch(w, &["--hold", "--wrap", "true"]);
    let o = c.cli(w, "scontrol", &["requeue", &held.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("Job is pending execution for job {held}\n")
    );
    // requeuehold of a finished job: pending again, held until released.
    ok(&c, w, "scancel", &[&id.to_string()]);
    c.wait_done(id, Duration::from_secs(20));
    ok(&c, w, "scontrol", &["requeuehold", &id.to_string()]);
    let j = c.job(id).unwrap();
    assert_eq!(
        (j.state, j.reason.as_str(), j.restarts),
        (JobState::Pending, "JobHeldAdmin", 2)
    );
    ok(&c, w, "scontrol", &["release", &id.to_string()]);
    c.wait_for(Duration::from_secs(20), "third run", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Running)
    });
    ok(&c, w, "scancel", &[&id.to_string()]);
}

#[test]
fn suspend_stops_a_job_and_resume_continues_it() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let id = c.sbatch(
        w,
        &[
            "--wrap",
            "while true; do echo x >> ticks.txt; sleep 0.1; done",
        ],
    );
    let ticks = || {
        std::fs::read_to_string(w.join("ticks.txt"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    c.wait_for(Duration::from_secs(20), "ticking", |_| ticks() > 3);
    ok(&c, w, "scontrol", &["suspend", &id.to_string()]);
    assert_eq!(c.job(id).unwrap().state, JobState::Suspended);
    let st = ok(&c, w, "squeue", &["-h", "-j", &id.to_string(), "-o", "%t"]);
    assert_eq!(st, "S\n");
    std::thread::sleep(Duration::from_millis(500));
    let frozen = ticks();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(ticks(), frozen, "a suspended job kept running");
    // Suspending twice is an error; resuming continues it.
    let o = c.cli(w, "scontrol", &["suspend", &id.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    ok(&c, w, "scontrol", &["resume", &id.to_string()]);
    c.wait_for(Duration::from_secs(10), "ticking again", |_| {
        ticks() > frozen + 3
    });
    assert_eq!(c.job(id).unwrap().state, JobState::Running);
    ok(&c, w, "scancel", &[&id.to_string()]);
    assert_eq!(
        c.wait_done(id, Duration::from_secs(20)).state,
        JobState::Cancelled
    );
}

#[test]
fn priorities_count_down_and_top_and_release_reorder_the_queue() {
    // One node with two CPUs: every job below needs both, so they run one
    // at a time and order.txt records the order the scheduler chose.
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let blocker = c.sbatch(w, &["-n", "2", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "the blocker to start", |c| {
        c.job(blocker).is_some_and(|j| j.state == JobState::Running)
    });
    let job = |name: &str, extra: &[&str]| {
        let wrap = format!("echo {name} >> order.txt");
        let mut args = vec!["-n", "2", "-J", name];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--wrap", &wrap]);
        c.sbatch(w, &args)
    };
    let a = job("a", &["--hold"]);
    let b = job("b", &[]);
    let cc = job("c", &[]);
    let d = job("d", &[]);
    // priority/basic: one less per eligible submission; a held job has 0.
    let prio = |id: u32| c.job(id).unwrap().priority;
    assert_eq!(prio(a), 0);
    assert_eq!(prio(blocker), 0xFFFF_0000 - 1);
    assert_eq!(
        (prio(b), prio(cc), prio(d)),
        (prio(blocker) - 1, prio(b) - 1, prio(b) - 2)
    );
    // d goes ahead of b and c, taking b's priority; nothing is printed.
    let o = c.cli(w, "scontrol", &["top", &d.to_string()]);
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "{o:?}"
    );
    let queue = ok(&c, w, "squeue", &["-h", "-t", "PD", "-o", "%j %r"]);
    assert_eq!(
        queue,
        "d Resources\nb Priority\nc Priority\na JobHeldUser\n"
    );
    // Released, a queues behind every job submitted so far.
    ok(&c, w, "scontrol", &["release", &a.to_string()]);
    assert!(prio(a) < prio(cc), "{} {}", prio(a), prio(cc));
    // Refusals name the job, as Slurm's do.
    let o = c.cli(w, "scontrol", &["top", &blocker.to_string(), "99999"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "Job is no longer pending execution for job {blocker}\n\
             Invalid job id specified for job 99999\n"
        )
    );
    ok(&c, w, "scancel", &[&blocker.to_string()]);
    c.wait_done(a, Duration::from_secs(60));
    assert_eq!(
        std::fs::read_to_string(w.join("order.txt")).unwrap(),
        "d\nb\nc\na\n"
    );
}

#[test]
fn account_comment_constraint_exclusive_requeue_and_nice_act_and_show() {
    let c = Cluster::start_with_nodes(
        3,
        2,
        30,
        "",
        &["Features=fast,big", "Features=fast", "Features=big"],
    );
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // One CPU of n1's two is busy.
    let small = c.sbatch(w, &["-w", "n1", "--wrap", "sleep 30"]);
    c.wait_for(Duration::from_secs(20), "the small job to run", |c| {
        c.job(small).is_some_and(|j| j.state == JobState::Running)
    });
    // Features pick the nodes: only n1 is both fast and big.
    let both = c.sbatch(
        w,
        &[
            "-A",
            "Physics",
            "--comment=rule_a",
            "-C",
            "fast,big",
            "--exclusive",
            "--no-requeue",
            "--wrap",
            "sleep 30",
        ],
    );
    // It would fit beside the small job, but --exclusive wants n1 to itself.
    std::thread::sleep(Duration::from_millis(500));
    let waiting = c.job(both).unwrap();
    assert_eq!(
        (waiting.state, waiting.reason.as_str()),
        (JobState::Pending, "Resources")
    );
    ok(&c, w, "scancel", &[&small.to_string()]);
    c.wait_for(Duration::from_secs(20), "the exclusive job to run", |c| {
        c.job(both).is_some_and(|j| j.state == JobState::Running)
    });
    let show = ok(&c, w, "scontrol", &["show", "job", &both.to_string()]);
    for want in [
        " Nice=0 Account=physics QOS=(null)\n",
        "\n   Requeue=0 Restarts=0 ",
        "\n   NodeList=n1\n",
        " NumCPUs=2 ",
        "\n   Features=fast&big DelayBoot=00:00:00\n",
        "\n   OverSubscribe=NO Exclusive=NODE ",
        "\n   Comment=rule_a \n",
        &format!("\n   StdOut={}/slurm-{both}.out\n", w.display()),
    ] {
        assert!(show.contains(want), "{want:?} in\n{show}");
    }
    let big = c.sbatch(w, &["-C", "big", "--wrap", "sleep 30"]);
    c.wait_for(Duration::from_secs(20), "the big job to run", |c| {
        c.job(big).is_some_and(|j| j.state == JobState::Running)
    });
    assert_eq!(c.job(big).unwrap().nodes, "n3");
    // A matching OR needs all its nodes from one alternative: two `fast`
    // nodes are n1 and n2, two `big` ones n1 and n3; n1 is taken either way.
    let pair = c.sbatch(w, &["-N2", "-C", "[fast|big]", "--wrap", "true"]);
    let line = ok(
        &c,
        w,
        "squeue",
        &["-h", "-A", "PHYSICS", "-o", "%i|%a|%k|%f|%h|%y"],
    );
    assert_eq!(line, format!("{both}|physics|rule_a|fast&big|NO|0\n"));
    // --no-requeue: Slurm's refusal, whatever the state.
    let o = c.cli(w, "scontrol", &["requeue", &both.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("Requested operation is presently disabled for job {both}\n")
    );
    // Unknown features and malformed expressions are refused at submission.
    for bad in ["fast&nope", "fast&&big"] {
        let o = c.cli(w, "sbatch", &["-C", bad, "--wrap", "true"]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "sbatch: error: Batch job submission failed: Invalid feature specification\n"
        );
    }
    ok(&c, w, "scancel", &[&both.to_string()]);
    let pair = c.wait_done(pair, Duration::from_secs(30));
    assert_eq!(pair.state, JobState::Completed);
    assert!(
        pair.nodes == "n[1-2]" || pair.nodes == "n[1,3]",
        "{}",
        pair.nodes
    );
    // sacct keeps the account, comment and constraint.
    let acct = ok(
        &c,
        w,
        "sacct",
        &[
            "-X",
            "-n",
            "-P",
            "-j",
            &both.to_string(),
            "-o",
            "Account,Comment,Constraints",
        ],
    );
    assert_eq!(acct, "physics|rule_a|fast&big\n");

    // --nice lowers the count-down's priority; only operators may raise it
    // (the tests run as the cluster's own user, an operator here).
    let plain = c.sbatch(w, &["-p", "short", "--begin=now+600", "--wrap", "true"]);
    let nice = c.sbatch(
        w,
        &[
            "-p",
            "short",
            "--begin=now+600",
            "--nice=10",
            "--wrap",
            "true",
        ],
    );
    let (p1, p2) = (
        c.job(plain).unwrap().priority,
        c.job(nice).unwrap().priority,
    );
    assert_eq!(
        p1 - p2,
        11,
        "one step of the count-down plus the nice of 10"
    );
    let o = ok(
        &c,
        w,
        "squeue",
        &["-h", "-j", &nice.to_string(), "-o", "%y"],
    );
    assert_eq!(o, "10\n");
}

#[test]
fn job_mail_runs_mailprog_as_slurm_does() {
    let m = tempfile::tempdir().unwrap();
    let log = m.path().join("mail.log");
    let prog = common::write_script(
        m.path(),
        "mailprog.sh",
        &format!(
            "#!/bin/sh\necho \"$1|$2|$3|$SLURM_JOB_MAIL_TYPE|$SLURM_JOB_STATE\" >> {}\n",
            log.display()
        ),
    );
    let c = Cluster::start_with(
        2,
        2,
        30,
        &format!("MailProg={}\nMailDomain=example.org\n", prog.display()),
    );
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let ok = c.sbatch(w, &["--mail-type=ALL", "-J", "mj", "--wrap", "sleep 1"]);
    let bad = c.sbatch(
        w,
        &[
            "--mail-type=END,FAIL",
            "--mail-user=bob",
            "-J",
            "bad",
            "--wrap",
            "exit 3",
        ],
    );
    let arr = c.sbatch(
        w,
        &[
            "--mail-type=BEGIN,END",
            "--array=1-3",
            "-J",
            "arr",
            "--wrap",
            "exit $SLURM_ARRAY_TASK_ID",
        ],
    );
    let quiet = c.sbatch(w, &["-J", "quiet", "--wrap", "true"]);
    for id in [ok, bad, arr, arr + 1, arr + 2, quiet] {
        c.wait_done(id, Duration::from_secs(30));
    }
    // MailProg runs on a thread of its own: wait for its lines.
    let lines = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    c.wait_for(Duration::from_secs(10), "five mails", |_| {
        lines().len() >= 5
    });
    std::thread::sleep(Duration::from_millis(500));
    let lines = lines();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let find = |start: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no mail starting {start:?} in {lines:#?}"))
    };
    let began = find(&format!(
        "-s|Slurm Job_id={ok} Name=mj Began, Queued time 00:00:0"
    ));
    assert!(
        began.ends_with(&format!("|{user}@example.org|Began|RUNNING")),
        "{began}"
    );
    let ended = find(&format!(
        "-s|Slurm Job_id={ok} Name=mj Ended, Run time 00:00:0"
    ));
    assert!(
        ended.ends_with(&format!(
            ", COMPLETED, ExitCode 0|{user}@example.org|Ended|COMPLETED"
        )),
        "{ended}"
    );
    let failed = find(&format!(
        "-s|Slurm Job_id={bad} Name=bad Failed, Run time 00:00:0"
    ));
    assert!(
        failed.ends_with(", FAILED, ExitCode 3|bob@example.org|Failed|FAILED"),
        "{failed}"
    );
    // The array: one summary when its first task starts, one when its last ends.
    find(&format!(
        "-s|Slurm Array Summary Job_id={arr}_* ({arr}) Name=arr Began|"
    ));
    find(&format!(
        "-s|Slurm Array Summary Job_id={arr}_* ({arr}) Name=arr Ended, FAILED, ExitCode [1-3]|"
    ));
    // REQUEUE: the run that was cut short, the job pending again.
    let rq = c.sbatch(
        w,
        &["--mail-type=REQUEUE", "-J", "rq", "--wrap", "sleep 30"],
    );
    c.wait_for(Duration::from_secs(15), "requeue target running", |c| {
        c.job(rq).is_some_and(|j| j.state == JobState::Running)
    });
    assert!(c
        .cli(w, "scontrol", &["requeue", &rq.to_string()])
        .status
        .success());
    // INVALID_DEPEND: afterok on a job that failed can never be satisfied.
    let dep = c.sbatch(
        w,
        &[
            "--mail-type=INVALID_DEPEND",
            "-J",
            "dep",
            "-d",
            &format!("afterok:{bad}"),
            "--wrap",
            "true",
        ],
    );
    let log_ref = &log;
    let more = |what: &str| {
        let what = what.to_string();
        move |_: &Cluster| std::fs::read_to_string(log_ref).is_ok_and(|l| l.contains(&what))
    };
    let requeued = format!("-s|Slurm Job_id={rq} Name=rq Requeued, Run time 00:00:0");
    c.wait_for(Duration::from_secs(15), "Requeued mail", more(&requeued));
    let invalid = format!(
        "-s|Slurm Job_id={dep} Name=dep Invalid dependency|{user}@example.org|Invalid dependency|PENDING\n"
    );
    c.wait_for(
        Duration::from_secs(15),
        "Invalid dependency mail",
        more(&invalid),
    );
    let all = std::fs::read_to_string(&log).unwrap();
    let line = all.lines().find(|l| l.starts_with(&requeued)).unwrap();
    assert!(
        line.ends_with(&format!("|{user}@example.org|Requeued|PENDING")),
        "{line}"
    );
    c.cli(w, "scancel", &[&rq.to_string(), &dep.to_string()]);
    // srun's own allocation mails too.
    let o = c.cli(w, "srun", &["--mail-type=END", "-J", "sm", "true"]);
    assert!(o.status.success(), "{o:?}");
    let srun_end = "Name=sm Ended, Run time 00:00:0";
    c.wait_for(Duration::from_secs(15), "srun's END mail", more(srun_end));

    let o = c.cli(w, "sbatch", &["--mail-type=bogus", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sbatch: error: Invalid --mail-type specification\n"
    );
}
