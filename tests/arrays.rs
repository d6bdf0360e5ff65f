//! Job arrays and dependencies against a live cluster: ids as Slurm assigns
//! them, `SLURM_ARRAY_*` in each task, `%A_%a` output files, the `%N`
//! throttle, the array forms of squeue, sacct and scancel, and dependencies
//! that hold jobs until their targets end (or cancel them when they cannot).

mod common;

use std::time::Duration;

use canopy::wire::types::JobState;
use common::Cluster;

fn out(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn array_tasks_run_with_their_ids_environment_and_files() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let a = c.sbatch(
        w,
        &[
            "--array=1-3",
            "-o",
            "arr_%A_%a.out",
            "--wrap",
            "echo $SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID \
             $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_COUNT \
             $SLURM_ARRAY_TASK_STEP",
        ],
    );
    // As in Slurm: the array id goes to the highest index, the others follow.
    let raw = [a + 1, a + 2, a];
    for id in raw {
        assert_eq!(
            c.wait_done(id, Duration::from_secs(30)).state,
            JobState::Completed
        );
    }
    for (i, id) in raw.iter().enumerate() {
        let task = i + 1;
        let text = std::fs::read_to_string(w.join(format!("arr_{a}_{task}.out"))).unwrap();
        assert_eq!(text.trim(), format!("{id} {a} {task} 1 3 3 1"));
    }
    // sacct: A_T ids, raw ids, and `-j A` / `-j A_T` selection.
    let rows = out(&c.cli(
        w,
        "sacct",
        &[
            "-j",
            &a.to_string(),
            "-X",
            "-P",
            "-n",
            "-o",
            "JobID,JobIDRaw,State",
        ],
    ));
    assert_eq!(
        rows,
        format!(
            "{a}_1|{}|COMPLETED\n{a}_2|{}|COMPLETED\n{a}_3|{a}|COMPLETED\n",
            a + 1,
            a + 2
        )
    );
    let one = out(&c.cli(
        w,
        "sacct",
        &["-j", &format!("{a}_2"), "-P", "-n", "-o", "JobID,State"],
    ));
    assert_eq!(one, format!("{a}_2|COMPLETED\n{a}_2.batch|COMPLETED\n"));
    // A plain job has no SLURM_ARRAY_* at all.
    let plain = c.sbatch(
        w,
        &[
            "-o",
            "plain.out",
            "--wrap",
            "env | grep -c ^SLURM_ARRAY_ || true",
        ],
    );
    c.wait_done(plain, Duration::from_secs(30));
    let n = std::fs::read_to_string(w.join("plain.out")).unwrap();
    assert_eq!(n.trim(), "0");
}

#[test]
fn pending_arrays_group_in_squeue_and_cancel_by_task() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // One node, one CPU: a throttle of 1 and a sleeper keep the rest pending.
    let a = c.sbatch(w, &["--array=0-4%1", "--wrap", "sleep 300"]);
    c.wait_for(Duration::from_secs(20), "first task running", |c| {
        c.job(a + 1).is_some_and(|j| j.state == JobState::Running)
    });
    let grouped = out(&c.cli(w, "squeue", &["-h", "-o", "%i|%T|%r"]));
    assert_eq!(
        grouped,
        format!("{a}_[1-4%1]|PENDING|JobArrayTaskLimit\n{a}_0|RUNNING|None\n"),
        "{grouped}"
    );
    // sacct groups the pending tasks the same way (submitit reads
    // `A_[1-4%1]`), and lists every task with --array.
    let acct = |extra: &[&str]| {
        let id = a.to_string();
        let mut args = vec!["-X", "-P", "-n", "-o", "JobID,JobIDRaw,State", "-j", &id];
        args.extend_from_slice(extra);
        out(&c.cli(w, "sacct", &args))
    };
    assert_eq!(
        acct(&[]),
        format!("{a}_0|{}|RUNNING\n{a}_[1-4%1]|{a}|PENDING\n", a + 1)
    );
    assert_eq!(acct(&["--array"]).lines().count(), 5);
    let each = out(&c.cli(w, "squeue", &["-r", "-h", "-o", "%i %A %F %K", "-S", "i"]));
    let lines: Vec<&str> = each.lines().collect();
    assert_eq!(lines.len(), 5, "{each}");
    assert_eq!(lines[0], format!("{a}_0 {} {a} 0", a + 1));
    assert_eq!(lines[4], format!("{a}_4 {a} {a} 4"));
    // squeue -j A_T picks one task.
    let picked = out(&c.cli(w, "squeue", &["-h", "-j", &format!("{a}_3"), "-o", "%i"]));
    assert_eq!(picked, format!("{a}_3\n"));
    // scancel A_[3-4] cancels just those; scancel A the rest.
    // Raw ids: index 0..3 → a+1..a+4, index 4 → a.
    out(&c.cli(w, "scancel", &[&format!("{a}_[3-4]")]));
    assert_eq!(c.job(a + 4).unwrap().state, JobState::Cancelled);
    assert_eq!(c.job(a).unwrap().state, JobState::Cancelled);
    assert_eq!(c.job(a + 3).unwrap().state, JobState::Pending);
    out(&c.cli(w, "scancel", &[&a.to_string()]));
    c.wait_done(a + 1, Duration::from_secs(30));
    assert_eq!(c.job(a + 2).unwrap().state, JobState::Cancelled);
}

#[test]
fn bad_arrays_are_refused_with_slurms_words() {
    let c = Cluster::start_with(1, 2, 30, "MaxArraySize=10\n");
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let o = c.cli(w, "sbatch", &["--array=5-10", "--wrap", "true"]);
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "sbatch: error: Batch job submission failed: Invalid job array specification"
    );
    let o = c.cli(w, "sbatch", &["--array=1-x", "--wrap", "true"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("Invalid job array specification"));
    let show = out(&c.cli(w, "scontrol", &["show", "config"]));
    assert!(show.contains("MaxArraySize            = 10\n"), "{show}");
}

#[test]
fn dependencies_hold_jobs_until_their_targets_end() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let first = c.sbatch(w, &["--wrap", "sleep 2"]);
    let ok = c.sbatch(w, &["-d", &format!("afterok:{first}"), "--wrap", "true"]);
    let notok = c.sbatch(
        w,
        &[
            "-d",
            &format!("afternotok:{first}"),
            "--kill-on-invalid-dep=yes",
            "--wrap",
            "true",
        ],
    );
    let kept = c.sbatch(w, &["-d", &format!("afternotok:{first}"), "--wrap", "true"]);
    let row = out(&c.cli(
        w,
        "squeue",
        &["-h", "-j", &ok.to_string(), "-o", "%T|%r|%E"],
    ));
    assert_eq!(
        row,
        format!("PENDING|Dependency|afterok:{first}(unfulfilled)\n")
    );
    assert_eq!(
        c.wait_done(ok, Duration::from_secs(30)).state,
        JobState::Completed
    );
    let first_end = c.job(first).unwrap().end_time.unwrap();
    assert!(c.job(ok).unwrap().start_time.unwrap() >= first_end);
    // A target that ended before the dependent was submitted counts too.
    let late = c.sbatch(w, &["-d", &format!("afterok:{first}"), "--wrap", "true"]);
    assert_eq!(
        c.wait_done(late, Duration::from_secs(30)).state,
        JobState::Completed
    );
    // afternotok on a success: never satisfiable.
    c.wait_for(Duration::from_secs(10), "impossible dependency", |c| {
        c.job(notok).is_some_and(|j| j.state == JobState::Cancelled)
            && c.job(kept)
                .is_some_and(|j| j.reason == "DependencyNeverSatisfied")
    });
    let row = out(&c.cli(w, "squeue", &["-h", "-j", &kept.to_string(), "-o", "%T|%E"]));
    assert_eq!(row, format!("PENDING|afternotok:{first}(failed)\n"));
    // Unknown targets and bad syntax are refused.
    for spec in ["afterok:999999", "afterok:", "sometime:1"] {
        let o = c.cli(w, "sbatch", &["-d", spec, "--wrap", "true"]);
        assert!(!o.status.success(), "{spec} accepted");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("Job dependency problem"),
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // An array dependency waits for every task.
    let arr = c.sbatch(w, &["--array=1-2", "--wrap", "sleep 1"]);
    let after = c.sbatch(w, &["-d", &format!("afterany:{arr}"), "--wrap", "true"]);
    c.wait_done(after, Duration::from_secs(30));
    let last_task_end = [arr, arr + 1]
        .iter()
        .map(|&id| c.job(id).unwrap().end_time.unwrap())
        .max()
        .unwrap();
    assert!(c.job(after).unwrap().start_time.unwrap() >= last_task_end);
    // singleton: one same-named job at a time.
    let s1 = c.sbatch(w, &["-J", "solo", "-d", "singleton", "--wrap", "sleep 2"]);
    let s2 = c.sbatch(w, &["-J", "solo", "-d", "singleton", "--wrap", "true"]);
    c.wait_done(s2, Duration::from_secs(30));
    assert!(c.job(s2).unwrap().start_time.unwrap() >= c.job(s1).unwrap().end_time.unwrap());
}

#[test]
fn scontrol_acts_on_single_array_tasks() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    // Tasks 1-3: the array id is task 3's own id; tasks 1 and 2 follow it.
    let a = c.sbatch(w, &["--array=1-3", "--hold", "--wrap", "sleep 30"]);
    let held = |c: &Cluster| {
        let o = c.cli(w, "squeue", &["-r", "-h", "-o", "%i %r"]);
        out(&o)
    };
    // `A_3` names only the task whose raw id equals the array id.
    let o = c.cli(w, "scontrol", &["release", &format!("{a}_3")]);
    assert!(o.status.success(), "{o:?}");
    c.wait_for(Duration::from_secs(10), "task 3 running", |c| {
        held(c).contains(&format!("{a}_3 None"))
    });
    let listing = held(&c);
    assert!(listing.contains(&format!("{a}_1 JobHeldUser")), "{listing}");
    assert!(listing.contains(&format!("{a}_2 JobHeldUser")), "{listing}");
    // Holding task 2 of an unknown array, or a task the array lacks, fails.
    let o = c.cli(w, "scontrol", &["hold", &format!("{a}_9")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("Invalid job id specified: {a}_9\n")
    );
    // A plain array id still means every task: the held ones are released,
    // and the running one is reported as no longer pending.
    let o = c.cli(w, "scontrol", &["release", &a.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "Job is no longer pending execution for job {a}\n\
             slurm_suspend error: Job is no longer pending execution\n"
        )
    );
    c.wait_for(Duration::from_secs(10), "no task held", |c| {
        !held(c).contains("JobHeldUser")
    });
}
