//! End-to-end tests against real daemons on loopback: batch jobs through the
//! relay tree, cancel, relay and leaf failures, and a controller kill -9.

mod common;

use std::time::{Duration, Instant};

use canopy::wire::messages::{Body, NodeUpdate, NodeUpdateState};
use canopy::wire::types::{JobState, NodeBaseState};
use common::{alive, write_script, Cluster};

#[test]
fn batch_jobs_run_through_the_relay_tree() {
    let c = Cluster::start(8, 3, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    write_script(
        w,
        "env.sh",
        "#!/bin/bash\n#SBATCH -J envjob\n#SBATCH -N 3\n#SBATCH -o out/%x-%j.txt\n\
         echo \"id=$SLURM_JOB_ID name=$SLURM_JOB_NAME nodes=$SLURM_JOB_NODELIST nn=$SLURM_NNODES\"\n\
         echo \"part=$SLURM_JOB_PARTITION submit=$SLURM_SUBMIT_DIR cpus=$SLURM_CPUS_ON_NODE\"\n\
         echo \"args=$*\"\necho oops >&2\n",
    );
    write_script(w, "fail.sh", "#!/bin/sh\necho failing\nexit 3\n");
    write_script(w, "killed.sh", "#!/bin/sh\nkill -9 $$\n");
    let ok = c.sbatch(w, &["-e", "err-%j.txt", "env.sh", "a1", "b2"]);
    let bad = c.sbatch(w, &["fail.sh"]);
    let sig = c.sbatch(w, &["killed.sh"]);

    let j = c.wait_done(ok, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.exit_code, (0, 0));
    assert_eq!(j.num_nodes, 3);
    assert_eq!(j.nodes, "n[1-3]");
    let out = std::fs::read_to_string(w.join(format!("out/envjob-{ok}.txt"))).unwrap();
    assert!(
        out.contains(&format!("id={ok} name=envjob nodes=n[1-3] nn=3")),
        "{out}"
    );
    assert!(
        out.contains(&format!("part=debug submit={} cpus=1", w.display())),
        "{out}"
    );
    assert!(out.contains("args=a1 b2"), "{out}");
    let err = std::fs::read_to_string(w.join(format!("err-{ok}.txt"))).unwrap();
    assert_eq!(err, "oops\n");

    let j = c.wait_done(bad, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.exit_code, (3, 0));
    assert_eq!(j.reason, "NonZeroExitCode");
    let out = std::fs::read_to_string(w.join(format!("slurm-{bad}.out"))).unwrap();
    assert_eq!(out, "failing\n");

    let j = c.wait_done(sig, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.exit_code, (0, 9));
    assert_eq!(j.reason, "RaisedSignal:9(Killed)");

    // Alone on the cluster, three one-CPU tasks pack onto two-CPU nodes.
    let wrap = c.sbatch(
        w,
        &[
            "-n",
            "3",
            "--wrap",
            "echo ntasks=$SLURM_NTASKS tpn=$SLURM_TASKS_PER_NODE",
        ],
    );
    let j = c.wait_done(wrap, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed);
    let out = std::fs::read_to_string(w.join(format!("slurm-{wrap}.out"))).unwrap();
    assert_eq!(out, "ntasks=3 tpn=2,1\n");

    // Every node is idle again once the jobs are done.
    c.wait_for(Duration::from_secs(10), "nodes idle", |c| {
        c.nodes_info().iter().all(|n| n.base == NodeBaseState::Idle)
    });
}

#[test]
fn submissions_are_validated_like_slurm() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["-p", "nope", "--wrap", "true"],
            "Invalid partition name specified",
        ),
        (
            &["-N", "5", "--wrap", "true"],
            "Requested node configuration is not available",
        ),
        (
            &["-p", "short", "-t", "10", "--wrap", "true"],
            "Requested time limit is invalid",
        ),
        (
            &["-c", "3", "--wrap", "true"],
            "Requested node configuration is not available",
        ),
    ];
    for (args, msg) in cases {
        let out = c.cli(w.path(), "sbatch", args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "sbatch: error: Batch job submission failed: {msg}"
            )),
            "{args:?}: {err}"
        );
    }
    // A held job stays pending with the Slurm reason.
    let id = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    let j = c.job(id).unwrap();
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.reason, "JobHeldUser");
    // Jobs beyond the free resources wait with reason Resources, then run.
    let big = c.sbatch(w.path(), &["-N", "2", "-c", "2", "--wrap", "sleep 1"]);
    let next = c.sbatch(w.path(), &["-c", "1", "--wrap", "true"]);
    c.wait_for(Duration::from_secs(10), "second job to wait", |c| {
        c.job(next)
            .is_some_and(|j| j.state == JobState::Pending && j.reason == "Resources")
            || c.job(next).is_some_and(|j| j.state.is_finished())
    });
    assert_eq!(
        c.wait_done(big, Duration::from_secs(20)).state,
        JobState::Completed
    );
    assert_eq!(
        c.wait_done(next, Duration::from_secs(20)).state,
        JobState::Completed
    );
}

#[test]
fn cancel_kills_every_process_of_a_running_multinode_job() {
    let c = Cluster::start(4, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let pids = w.path().join("pids");
    write_script(
        w.path(),
        "bg.sh",
        &format!(
            "#!/bin/bash\nsleep 300 &\necho $! >> {p}\nsleep 300 &\necho $! >> {p}\necho $$ >> {p}\nwait\n",
            p = pids.display()
        ),
    );
    let id = c.sbatch(w.path(), &["-N", "3", "bg.sh"]);
    c.wait_for(Duration::from_secs(10), "three pids", |_| {
        std::fs::read_to_string(&pids).is_ok_and(|s| s.lines().count() == 3)
    });
    let list: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(list.iter().all(|&p| alive(p)));
    assert_eq!(c.job(id).unwrap().state, JobState::Running);
    let out = c.cli(w.path(), "scancel", &[&id.to_string()]);
    assert!(out.status.success());
    let j = c.wait_done(id, Duration::from_secs(15));
    assert_eq!(j.state, JobState::Cancelled);
    for p in list {
        assert!(!alive(p), "process {p} survived scancel");
    }
    // Cancelling again exits 0; the error shows only with -v (as in Slurm 22.05).
    let out = c.cli(w.path(), "scancel", &[&id.to_string()]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let out = c.cli(w.path(), "scancel", &["-v", &id.to_string()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already completing or completed"));
    // Pending jobs are removed at once.
    let held = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    assert!(c
        .cli(w.path(), "scancel", &[&held.to_string()])
        .status
        .success());
    assert_eq!(c.job(held).unwrap().state, JobState::Cancelled);
}

#[test]
fn dead_relay_subtree_reattaches_without_false_down() {
    // Width 2 over 7 nodes: n1 relays for n2 (which relays n3) and n4.
    let mut c = Cluster::start(7, 2, 4);
    let relay = "n1";
    let kids: Vec<String> = (1..=7)
        .map(|i| format!("n{i}"))
        .filter(|n| c.natural_parent(n).as_deref() == Some(relay))
        .collect();
    assert_eq!(kids, ["n2", "n4"]);
    c.kill_node(relay);
    let t = Instant::now();
    // The orphans re-attach elsewhere while n1 is still in its timeout window.
    c.wait_for(Duration::from_secs(3), "orphans re-attached", |c| {
        let nodes = c.nodes_info();
        kids.iter().all(|k| {
            nodes.iter().any(|n| {
                &n.name == k && n.attached_to.as_deref() != Some(relay) && !n.not_responding
            })
        })
    });
    assert!(t.elapsed() < Duration::from_secs(4));
    // n1 goes DOWN after SlurmdTimeout; nobody else ever does.
    c.wait_for(Duration::from_secs(10), "n1 DOWN", |c| {
        c.node(relay).base == NodeBaseState::Down
    });
    let n1 = c.node(relay);
    assert_eq!(n1.reason.as_deref(), Some("Not responding"));
    for n in c.nodes_info().into_iter().filter(|n| n.name != relay) {
        assert_ne!(n.base, NodeBaseState::Down, "{} wrongly DOWN", n.name);
        assert!(!n.not_responding, "{} wrongly not responding", n.name);
    }
    // Jobs still reach the orphans through their new parent: use every live node.
    let w = tempfile::tempdir().unwrap();
    let id = c.sbatch(w.path(), &["-N", "6", "--wrap", "echo $SLURM_JOB_NODELIST"]);
    let j = c.wait_done(id, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert_eq!(j.nodes, "n[2-7]");
    // When n1 comes back, its children move back under it.
    c.start_node(relay);
    c.wait_for(Duration::from_secs(15), "subtree back under n1", |c| {
        let nodes = c.nodes_info();
        nodes
            .iter()
            .any(|n| n.name == relay && n.base == NodeBaseState::Idle)
            && kids.iter().all(|k| {
                nodes
                    .iter()
                    .any(|n| &n.name == k && n.attached_to.as_deref() == Some(relay))
            })
    });
}

#[test]
fn silent_leaf_goes_down_after_slurmd_timeout_and_fails_its_job() {
    let mut c = Cluster::start(3, 2, 3);
    let w = tempfile::tempdir().unwrap();
    // Find a leaf: a node nobody is attached to.
    let nodes = c.nodes_info();
    let leaf = nodes
        .iter()
        .rev()
        .find(|n| {
            !nodes
                .iter()
                .any(|m| m.attached_to.as_deref() == Some(n.name.as_str()))
        })
        .unwrap()
        .name
        .clone();
    // A job on every node, so the leaf's loss must fail it.
    let started = w.path().join("started");
    let cmd = format!("touch {}; sleep 60", started.display());
    let id = c.sbatch(w.path(), &["-N", "3", "--wrap", &cmd]);
    c.wait_for(Duration::from_secs(10), "job script started", |_| {
        started.exists()
    });
    // The launch reached every node before the script's node reported back.
    std::thread::sleep(Duration::from_millis(300));
    c.kill_node(&leaf);
    let t = Instant::now();
    c.wait_for(Duration::from_secs(2), "leaf not responding", |c| {
        c.node(&leaf).not_responding
    });
    assert_ne!(
        c.node(&leaf).base,
        NodeBaseState::Down,
        "DOWN before SlurmdTimeout"
    );
    c.wait_for(Duration::from_secs(10), "leaf DOWN", |c| {
        c.node(&leaf).base == NodeBaseState::Down
    });
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "went DOWN too early: {:?}",
        t.elapsed()
    );
    assert_eq!(c.node(&leaf).reason.as_deref(), Some("Not responding"));
    let j = c.wait_done(id, Duration::from_secs(10));
    assert_eq!(
        (j.state, j.reason.as_str()),
        (JobState::NodeFail, "NodeDown")
    );
    // The surviving nodes are freed and stay up.
    c.wait_for(Duration::from_secs(10), "survivors idle", |c| {
        c.nodes_info()
            .iter()
            .filter(|n| n.name != leaf)
            .all(|n| n.base == NodeBaseState::Idle && !n.not_responding)
    });
}

#[test]
fn controller_kill9_restart_keeps_every_job() {
    let mut c = Cluster::start(4, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let running = c.sbatch(w.path(), &["-N", "2", "--wrap", "sleep 4; echo finished"]);
    let held = c.sbatch(w.path(), &["--hold", "-J", "keepme", "--wrap", "true"]);
    let done = c.sbatch(w.path(), &["--wrap", "exit 2"]);
    c.wait_done(done, Duration::from_secs(10));
    c.wait_for(Duration::from_secs(10), "job running", |c| {
        c.job(running).is_some_and(|j| j.state == JobState::Running)
    });
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(Duration::from_secs(15), "controller back", |c| {
        c.try_call(Body::Ping).is_some()
    });
    let j = c.job(held).expect("held job survives");
    assert_eq!((j.state, j.name.as_str()), (JobState::Pending, "keepme"));
    let j = c.job(done).expect("finished job survives");
    assert_eq!((j.state, j.exit_code), (JobState::Failed, (2, 0)));
    // The running job keeps running on its nodes and finishes normally.
    let j = c.job(running).expect("running job survives");
    assert!(
        matches!(j.state, JobState::Running | JobState::Completed),
        "{j:?}"
    );
    let j = c.wait_done(running, Duration::from_secs(20));
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    let out = std::fs::read_to_string(w.path().join(format!("slurm-{running}.out"))).unwrap();
    assert_eq!(out, "finished\n");
    // Job ids continue after the restart.
    let next = c.sbatch(w.path(), &["--wrap", "true"]);
    assert!(next > done);
}

#[test]
fn node_drain_and_resume_by_operator() {
    let c = Cluster::start(2, 2, 30);
    let drain = Body::UpdateNodes(NodeUpdate {
        nodes: "n[1-2]".into(),
        state: Some(NodeUpdateState::Drain),
        reason: Some("maintenance".into()),
    });
    assert_eq!(c.call(drain), Body::Ok);
    let n = c.node("n1");
    assert!(n.drain);
    assert_eq!(n.reason.as_deref(), Some("maintenance"));
    let w = tempfile::tempdir().unwrap();
    let id = c.sbatch(w.path(), &["--wrap", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.job(id).unwrap().state, JobState::Pending);
    let bad = c.try_call(Body::UpdateNodes(NodeUpdate {
        nodes: "n9".into(),
        state: Some(NodeUpdateState::Resume),
        reason: None,
    }));
    assert!(bad.is_none());
    let resume = Body::UpdateNodes(NodeUpdate {
        nodes: "n[1-2]".into(),
        state: Some(NodeUpdateState::Resume),
        reason: None,
    });
    assert_eq!(c.call(resume), Body::Ok);
    assert_eq!(
        c.wait_done(id, Duration::from_secs(10)).state,
        JobState::Completed
    );
}
