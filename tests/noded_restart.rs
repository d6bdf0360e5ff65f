//! A node daemon killed with `kill -9` and restarted finds its jobs again:
//! they stay RUNNING (not NODE_FAIL), the node is not IDLE while they run,
//! a batch script's end is still reported, and a cancel still kills them.

mod common;

use std::path::Path;
use std::time::Duration;

use canopy::exec::record::{read_records, records_dir, JobRecord};
use canopy::wire::types::{JobState, NodeBaseState};
use common::{alive, write_script, Cluster};

/// Pids a script wrote, one a line, once there are `n`.
fn pids(c: &Cluster, file: &Path, n: usize) -> Vec<i32> {
    c.wait_for(Duration::from_secs(30), "the job's pids", |_| {
        std::fs::read_to_string(file).is_ok_and(|s| s.lines().count() == n)
    });
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Wait until `node`'s spool record of job `id` lists `tasks` srun tasks
/// (and its batch script, if `batch`): what a restarted daemon will know.
fn recorded(c: &Cluster, node: &str, id: u32, batch: bool, tasks: usize) {
    let dir = records_dir(&c.dir.path().join(format!("spool/{node}")));
    c.wait_for(Duration::from_secs(30), "the job's spool record", |_| {
        read_records(&dir).is_ok_and(|recs| {
            recs.iter().any(|r: &JobRecord| {
                r.job_id == id && r.batch.is_some() == batch && r.tasks.len() == tasks
            })
        })
    });
}

/// `kill -9` node daemon `node` and start it again; returns once the new
/// daemon has registered.
fn restart(c: &mut Cluster, node: &str) {
    let before = c.node(node).slurmd_start_time.unwrap_or(0);
    c.kill_node(node);
    // Registration is told apart by its start time, in whole seconds.
    c.wait_for(Duration::from_secs(5), "the next second", |_| {
        chrono::Utc::now().timestamp() > before
    });
    c.start_node(node);
    c.wait_for(
        Duration::from_secs(30),
        "the restarted daemon registered",
        |c| {
            let n = c.node(node);
            n.slurmd_start_time.unwrap_or(0) > before && !n.not_responding
        },
    );
}

#[test]
fn a_restarted_node_daemon_keeps_its_jobs() {
    let mut c = Cluster::start(2, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // The script and a background child; it ends once `release` exists.
    write_script(
        w,
        "wait.sh",
        "#!/bin/bash\nsleep 300 &\necho $! >> pids.$SLURM_JOB_ID\necho $$ >> pids.$SLURM_JOB_ID\n\
         while [ ! -e release.$SLURM_JOB_ID ]; do sleep 0.1; done\nkill %1\necho done\n",
    );

    // 1. A job that ends by itself after the restart.
    let ends = c.sbatch(w, &["-w", "n2", "wait.sh"]);
    let ends_pids = pids(&c, &w.join(format!("pids.{ends}")), 2);
    // 2. A job cancelled after the restart.
    let cancelled = c.sbatch(w, &["-w", "n2", "wait.sh"]);
    let cancelled_pids = pids(&c, &w.join(format!("pids.{cancelled}")), 2);
    recorded(&c, "n2", ends, true, 0);
    recorded(&c, "n2", cancelled, true, 0);

    restart(&mut c, "n2");
    for &p in ends_pids.iter().chain(&cancelled_pids) {
        assert!(alive(p), "process {p} died with its daemon");
    }
    for id in [ends, cancelled] {
        assert_eq!(c.job(id).unwrap().state, JobState::Running, "job {id}");
    }
    let n2 = c.node("n2");
    assert_ne!(n2.base, NodeBaseState::Idle, "{}", n2.scontrol_state());
    assert_eq!(n2.alloc_cpus, 2);

    // The script's end is reported although the daemon is not its parent.
    std::fs::write(w.join(format!("release.{ends}")), "").unwrap();
    let j = c.wait_done(ends, Duration::from_secs(30));
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.exit_code, (0, 0));
    let out = std::fs::read_to_string(w.join(format!("slurm-{ends}.out"))).unwrap();
    assert_eq!(out, "done\n");

    // Cancelling the other kills the script and its child.
    let o = c.cli(w, "scancel", &[&cancelled.to_string()]);
    assert!(o.status.success());
    assert_eq!(
        c.wait_done(cancelled, Duration::from_secs(30)).state,
        JobState::Cancelled
    );
    for &p in &cancelled_pids {
        assert!(!alive(p), "process {p} survived scancel after the restart");
    }
    // Nothing is left recorded, and the node is idle again.
    c.wait_for(Duration::from_secs(30), "n2 idle", |c| {
        c.node("n2").base == NodeBaseState::Idle
    });
    let records = records_dir(&c.dir.path().join("spool/n2"));
    c.wait_for(Duration::from_secs(10), "the job records removed", |_| {
        read_records(&records).is_ok_and(|r| r.is_empty())
    });
    for id in [ends, cancelled] {
        let spool = c.dir.path().join(format!("spool/n2/job{id:05}"));
        assert!(!spool.exists(), "{}", spool.display());
    }
}

#[test]
fn srun_tasks_survive_a_node_daemon_restart_and_are_killed_on_cancel() {
    let mut c = Cluster::start(2, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // An allocation on both nodes; a step's task runs on n2 (not the batch host).
    write_script(
        w,
        "steps.sh",
        "#!/bin/bash\nsrun -N 2 bash -c 'echo $$ >> tasks.$SLURM_JOB_ID; exec sleep 300'\n",
    );
    let id = c.sbatch(w, &["-N", "2", "steps.sh"]);
    let tasks = pids(&c, &w.join(format!("tasks.{id}")), 2);
    recorded(&c, "n2", id, false, 1);
    restart(&mut c, "n2");
    assert_eq!(c.job(id).unwrap().state, JobState::Running);
    assert_ne!(c.node("n2").base, NodeBaseState::Idle);
    for &p in &tasks {
        assert!(alive(p), "task {p} died with its daemon");
    }
    let o = c.cli(w, "scancel", &[&id.to_string()]);
    assert!(o.status.success());
    assert_eq!(
        c.wait_done(id, Duration::from_secs(30)).state,
        JobState::Cancelled
    );
    for &p in &tasks {
        assert!(!alive(p), "task {p} survived scancel after the restart");
    }
}
