//! `canopy events` on real daemons on loopback: a killed node's loss and DOWN, an operator's
//! drain and a job's states appear, repeats fold into one line with a hostlist, `-f` prints an
//! event as it happens (no polling: the request is held until then), the log survives a
//! controller restart (on disk), authentication failures are logged, and ordinary users are
//! refused.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use canopy::console::events::{EventKind, EventReport};
use common::{write_script, Cluster};

fn events_json(c: &Cluster, args: &[&str]) -> EventReport {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = c.cli(Path::new("/"), "events", &all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn events_text(c: &Cluster, args: &[&str]) -> String {
    let o = c.cli(Path::new("/"), "events", args);
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn node_loss_drain_and_jobs_are_logged_folded_and_kept_across_a_restart() {
    let mut c = Cluster::start(4, 2, 4);
    // Start-up: every node became reachable, folded into one record.
    let r = events_json(&c, &["--type", "node"]);
    let up: Vec<_> = r
        .records
        .iter()
        .filter(|e| e.kind == EventKind::NodeUp)
        .collect();
    assert_eq!(up.len(), 1, "{r:?}");
    assert_eq!(up[0].subjects, "n[1-4]");
    assert_eq!(up[0].count, 4);

    c.kill_node("n4");
    c.wait_for(Duration::from_secs(30), "n4 down in canopy events", |c| {
        events_json(c, &["--type", "node-down"])
            .records
            .iter()
            .any(|e| e.subjects == "n4" && e.detail == "Not responding")
    });
    let text = events_text(&c, &["--type", "node"]);
    assert!(text.contains("node unreachable n4 link lost"), "{text}");
    assert!(text.contains("node down n4 Not responding"), "{text}");

    let w = c.dir.path();
    let o = c.cli(
        w,
        "scontrol",
        &["update", "NodeName=n[1-2]", "State=DRAIN", "Reason=bad fan"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = events_text(&c, &["--type", "node-drain"]);
    assert!(
        text.contains("node drain x 2 in 0 s n[1-2] bad fan"),
        "{text}"
    );

    let script = write_script(w, "quick.sh", "#!/bin/sh\ntrue\n");
    let id = c.sbatch(w, &["-w", "n3", script.to_str().unwrap()]);
    c.wait_done(id, Duration::from_secs(30));
    c.wait_for(Duration::from_secs(10), "job states logged", |c| {
        let r = events_json(c, &["--type", "job"]);
        let states: Vec<&str> = r.records.iter().map(|e| e.detail.as_str()).collect();
        states.contains(&"RUNNING") && states.contains(&"COMPLETED")
    });
    // A job cancelled while it waits never ran: its end is an event too.
    let held = c.sbatch(w, &["-H", script.to_str().unwrap()]);
    assert!(c.cli(w, "scancel", &[&held.to_string()]).status.success());
    c.wait_for(
        Duration::from_secs(10),
        "the pending job's end logged",
        |c| {
            let r = events_json(c, &["--type", "job"]);
            r.records
                .iter()
                .any(|e| e.subjects.contains(&held.to_string()) && e.detail == "CANCELLED")
        },
    );

    // --since in Slurm's forms: the future has nothing yet.
    let later = events_json(&c, &["--since", "now+1hour"]);
    assert!(later.records.is_empty(), "{later:?}");

    // The log is read back from disk after a restart (a clean stop makes every event durable;
    // a crash loses at most the last moments', see daemon::event_log).
    let before = events_json(&c, &[]);
    assert!(c
        .terminate_ctld(Duration::from_secs(30))
        .is_some_and(|s| s.success()));
    c.start_ctld();
    c.wait_for(Duration::from_secs(30), "controller back", |c| {
        c.try_call(canopy::wire::messages::Body::Ping).is_some()
    });
    let after = events_json(&c, &[]);
    for e in before
        .records
        .iter()
        .filter(|e| e.kind == EventKind::NodeDrain)
    {
        assert!(
            after
                .records
                .iter()
                .any(|a| a.subjects == e.subjects && a.detail == e.detail),
            "{e:?} lost across the restart: {after:?}"
        );
    }
    assert!(after.last_seq >= before.last_seq, "sequence numbers go on");
    // The nodes come back to the new controller: logged after what was kept, not over it.
    c.wait_for(Duration::from_secs(30), "nodes up again, logged", |c| {
        events_json(c, &["--type", "node-up"])
            .records
            .iter()
            .any(|e| e.seq > before.last_seq)
    });
}

#[test]
fn follow_prints_an_event_as_it_happens() {
    let c = Cluster::start(2, 2, 60);
    let mut child = c.spawn_cli(Path::new("/"), "events", &["-f", "--type", "node-drain"]);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Give the follower time to send its held request, then make the event.
    std::thread::sleep(Duration::from_millis(500));
    assert!(rx.try_recv().is_err(), "nothing to print before the drain");
    let o = c.cli(
        c.dir.path(),
        "scontrol",
        &["update", "NodeName=n2", "State=DRAIN", "Reason=followed"],
    );
    assert!(o.status.success());
    let line = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("the follower printed the drain");
    assert!(line.contains("node drain n2 followed"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn ordinary_users_may_not_read_the_event_log() {
    if !common::require(
        nix::unistd::Uid::effective().is_root(),
        "root (to run a command as another user)",
    ) {
        return;
    }
    let c = Cluster::start(1, 2, 60);
    let home = tempfile::tempdir().unwrap();
    // nobody: an existing unprivileged account.
    let o = common::run_as(&c, (65534, 65534), home.path(), &c.conf, "events", &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("canopy events: error:"), "{err}");
    // canopy tree stays readable (sinfo's view, folded).
    let o = common::run_as(&c, (65534, 65534), home.path(), &c.conf, "tree", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn frames_signed_with_an_unknown_key_are_logged_as_auth_failures() {
    use canopy::wire::auth::{Authenticator, Key};
    use canopy::wire::connection::Connection;
    use canopy::wire::messages::Body;
    let c = Cluster::start(1, 2, 60);
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Three peers' worth of bad frames: one folded record, not three.
    for _ in 0..3 {
        rt.block_on(async {
            let stranger = std::sync::Arc::new(Authenticator::new(
                Key::from_bytes(&[42; 32]).unwrap(),
                0,
                0,
            ));
            let mut conn = Connection::connect(addr.as_str(), stranger, 7)
                .await
                .unwrap();
            // Refused (the reply itself is signed with a key we do not hold either).
            let _ = conn.request(&Body::Ping).await;
        });
    }
    c.wait_for(Duration::from_secs(10), "auth failures logged", |c| {
        events_json(c, &["--type", "auth"])
            .records
            .iter()
            .any(|e| e.kind == EventKind::AuthFailure && e.count == 3 && e.subjects == "127.0.0.1")
    });
}
