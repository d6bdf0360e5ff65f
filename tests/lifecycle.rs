//! Daemon lifecycle against real daemons on loopback: SIGTERM stops the
//! controller cleanly with every acknowledged job durable, stops a node
//! daemon promptly while its jobs keep running, and a listener refuses
//! connections beyond its limit, counts them, and keeps serving.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use canopy::cli::client::{CliError, Client};
use canopy::wire::connection::Connection;
use canopy::wire::messages::Body;
use canopy::wire::types::JobState;
use common::{alive, write_script, Cluster};

/// A "did not hang" guard only: a clean stop takes well under a second.
const STOP_BOUND: Duration = Duration::from_secs(20);

fn squeue_ids(c: &Cluster, cwd: &std::path::Path) -> BTreeSet<u32> {
    let out = c.cli(cwd, "squeue", &["-h", "-o", "%i"]);
    assert!(
        out.status.success(),
        "squeue failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn ctld_sigterm_exits_zero_and_a_restart_finds_every_acknowledged_job() {
    let mut c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let pid = c.ctld.as_ref().unwrap().id() as i32;
    let acked = Mutex::new(Vec::new());
    let signalled = AtomicBool::new(false);
    // Submitters keep going while the signal arrives: every job whose id came
    // back, before or during the shutdown, must be there after the restart.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let out = c.cli(
                    w.path(),
                    "sbatch",
                    &["--parsable", "--hold", "--wrap", "true"],
                );
                if !out.status.success() {
                    assert!(
                        signalled.load(Ordering::SeqCst),
                        "sbatch failed before the signal"
                    );
                    return;
                }
                let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                acked.lock().unwrap().push(id);
            });
        }
        c.wait_for(Duration::from_secs(30), "20 jobs acknowledged", |_| {
            acked.lock().unwrap().len() >= 20
        });
        signalled.store(true, Ordering::SeqCst);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    });
    // Only the one signal above: a second would mean "exit at once".
    let status = c
        .wait_ctld_exit(STOP_BOUND)
        .expect("canopy-ctld exits after SIGTERM");
    assert!(status.success(), "{status:?}\n{}", c.log_text("ctld"));
    let log = c.log_text("ctld");
    assert!(log.contains("canopy-ctld shutting down"), "{log}");
    assert!(log.contains("canopy-ctld stopped; state flushed"), "{log}");

    c.start_ctld();
    c.wait_for(Duration::from_secs(15), "controller back", |c| {
        c.try_call(Body::Ping).is_some()
    });
    let acked: BTreeSet<u32> = acked.into_inner().unwrap().into_iter().collect();
    let listed = squeue_ids(&c, w.path());
    let lost: Vec<_> = acked.difference(&listed).collect();
    assert!(lost.is_empty(), "jobs acknowledged but lost: {lost:?}");
    // And the id sequence carries on past them.
    let next = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    assert!(acked.iter().all(|id| *id < next), "{next} reuses an id");
}

#[test]
fn noded_sigterm_exits_promptly_and_leaves_its_job_running() {
    let mut c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let pidfile = w.path().join("job.pid");
    write_script(
        w.path(),
        "long.sh",
        &format!("#!/bin/sh\necho $$ > {}\nsleep 120\n", pidfile.display()),
    );
    let id = c.sbatch(w.path(), &["-w", "n2", "long.sh"]);
    c.wait_for(
        Duration::from_secs(20),
        "job running with its pid file",
        |c| {
            c.job(id).is_some_and(|j| j.state == JobState::Running)
                && std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
        },
    );
    let job_pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = c
        .terminate_node("n2", STOP_BOUND)
        .expect("canopy-noded exits after SIGTERM");
    let log = c.log_text("n2");
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("canopy-noded shutting down"), "{log}");
    assert!(log.contains("canopy-noded stopped"), "{log}");
    // As under slurmd: the job is in its own session and keeps running.
    assert!(
        alive(job_pid),
        "job {id} (pid {job_pid}) died with its node daemon"
    );
    // The job's session leader is the script: its group is the whole job.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-job_pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[test]
fn connections_beyond_the_limit_are_refused_counted_and_service_goes_on() {
    const LIMIT: usize = 6;
    const OPENED: usize = 10;
    let c = Cluster::start_with(
        1,
        2,
        30,
        &format!("SlurmctldParameters=conmgr_max_connections={LIMIT}\n"),
    );
    let w = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Each connection asks for a ping and stays open: an admitted one gets
    // its answer and holds its place, a refused one gets the refusal.
    let (held, refusals) = rt.block_on(async {
        let mut held = Vec::new();
        let mut refusals = Vec::new();
        for _ in 0..OPENED {
            let mut client = Client::connect(Some(c.conf.as_path())).await.unwrap();
            match client.call(Body::Ping).await {
                Ok(Body::Pong(_)) => held.push(client),
                Err(CliError::Refused(e)) => refusals.push(e.message),
                other => panic!("neither served nor refused: {other:?}"),
            }
        }
        (held, refusals)
    });
    // n1's link holds one place; clients of the start-up checks may still be
    // closing, so at most the rest are admitted.
    assert!(
        (1..LIMIT).contains(&held.len()),
        "{} admitted of {OPENED} with limit {LIMIT}",
        held.len()
    );
    assert_eq!(held.len() + refusals.len(), OPENED);
    for r in &refusals {
        assert!(
            r.contains("canopy-ctld is at its connection limit (6 connections)"),
            "{r}"
        );
    }
    // A user's command while full is refused with the same words.
    let out = c.cli(w.path(), "squeue", &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connection limit"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(held);
    // Once they close, service goes on, and sdiag shows the refusals.
    c.wait_for(Duration::from_secs(10), "squeue served again", |c| {
        c.cli(w.path(), "squeue", &[]).status.success()
    });
    let out = c.cli(w.path(), "sdiag", &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key:?} in\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(
        field("Connections refused:") > refusals.len() as u64,
        "{text}"
    );
    assert_eq!(field("Connections limit:"), LIMIT as u64, "{text}");
    assert_eq!(field("Connections peak:"), LIMIT as u64, "{text}");
    // sdiag's own connection and n1's link.
    assert!(field("Connections:") >= 2, "{text}");
    // The node link was never dropped for it.
    assert_eq!(c.node("n1").scontrol_state(), "IDLE");
}

#[test]
fn a_node_daemon_refuses_connections_beyond_its_limit_too() {
    let c = Cluster::start_with(1, 2, 30, "SlurmctldParameters=conmgr_max_connections=3\n");
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let addr = format!("{}:{}", conf.nodes[0].addr, conf.nodes[0].port);
    let auth = canopy::daemon::authenticator(&conf).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Three silent connections fill n1's listener (each waits for a Hello).
    let idle: Vec<std::net::TcpStream> = (0..3)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let ask = |auth: std::sync::Arc<_>| {
        rt.block_on(async {
            let mut conn = Connection::connect(addr.as_str(), auth, 1).await.unwrap();
            conn.request(&Body::Ping).await
        })
    };
    match ask(auth.clone()) {
        Ok(env) => match env.body {
            Body::Error(e) => assert!(
                e.message
                    .contains("canopy-noded n1 is at its connection limit (3 connections)"),
                "{e:?}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        },
        Err(e) => panic!("expected a refusal frame, got {e}"),
    }
    drop(idle);
    // Places free again: a connection is served (a node daemon answers only
    // Hello, so a Ping is dropped without a refusal), and n1 stays up.
    c.wait_for(
        Duration::from_secs(10),
        "n1 admits again",
        |_| !matches!(ask(auth.clone()), Ok(env) if matches!(env.body, Body::Error(_))),
    );
    assert_eq!(c.node("n1").scontrol_state(), "IDLE");
}

#[test]
fn sigint_stops_the_controller_cleanly_too() {
    let mut c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let id = c.sbatch(w.path(), &["--hold", "--wrap", "true"]);
    let pid = nix::unistd::Pid::from_raw(c.ctld.as_ref().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = c
        .wait_ctld_exit(STOP_BOUND)
        .expect("canopy-ctld exits after SIGINT");
    assert!(status.success(), "{status:?}\n{}", c.log_text("ctld"));
    assert!(c.log_text("ctld").contains("signal=\"SIGINT\""));
    c.start_ctld();
    c.wait_for(Duration::from_secs(15), "controller back", |c| {
        c.try_call(Body::Ping).is_some()
    });
    assert!(squeue_ids(&c, w.path()).contains(&id));
}
