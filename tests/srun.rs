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
