//! A real node daemon registers with the hardware it finds (faked through
//! CANOPY_TOPOLOGY): one with less than slurm.conf says is drained with
//! Slurm's reason, shown by `scontrol show node` and `sinfo -R`, until an
//! operator resumes it; one that matches its line goes IDLE.

mod common;

use std::time::Duration;

use common::Cluster;

#[test]
fn a_node_with_less_hardware_than_configured_is_drained() {
    // `SlurmdParameters=` (empty) leaves the harness's config_overrides out.
    let mut c = Cluster::configure(
        2,
        2,
        60,
        "SlurmdParameters=\n",
        &[
            "CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=1",
            "CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1",
        ],
    );
    c.start_authd();
    c.start_ctld();
    c.start_node_env("n1", &[("CANOPY_TOPOLOGY", "package:1 core:1 pu:1")]);
    c.start_node_env("n2", &[("CANOPY_TOPOLOGY", "package:1 core:2 pu:1")]);
    // Until the controller answers, there is nothing to look at.
    let state = |c: &Cluster, name: &str| {
        c.nodes_info()
            .into_iter()
            .find(|n| n.name == name)
            .map(|n| (n.scontrol_state(), n.reason))
    };
    c.wait_for(Duration::from_secs(60), "n1 drained, n2 IDLE", |c| {
        // Registered (so drained) and reached: the controller marks a node
        // responding a moment after its registration.
        state(c, "n1").is_some_and(|(s, r)| {
            s.contains("DRAIN") && !s.contains("NOT_RESPONDING") && r.is_some()
        }) && state(c, "n2").is_some_and(|(s, _)| s == "IDLE")
    });
    let n1 = c.node("n1");
    assert_eq!(
        n1.reason.as_deref(),
        Some("Low socket*core*thread count, Low CPUs")
    );
    assert_eq!(n1.reason_user.as_deref(), Some("root"));
    let cwd = c.dir.path().to_path_buf();
    let out = c.cli(&cwd, "scontrol", &["show", "node", "n1"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Reason=Low socket*core*thread count, Low CPUs [root@"),
        "{text}"
    );
    assert!(text.contains("State=IDLE+DRAIN+INVALID_REG "), "{text}");
    let out = c.cli(&cwd, "sinfo", &["-R", "-h", "-o", "%E|%N"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(text.trim(), "Low socket*core*thread count, Low CPUs|n1");
    assert_eq!(
        c.log_text("ctld").matches("INVALID_REG").count(),
        1,
        "the controller says why, once"
    );
    // The drain is on disk: a restarted controller shows the same one
    // (same time), though the node registers again with it.
    let since = n1.reason_time;
    c.kill_ctld();
    c.start_ctld();
    // Each controller run logs an invalid node once, when it registers.
    c.wait_for(Duration::from_secs(60), "n1 registered again", |c| {
        c.log_text("ctld").matches("INVALID_REG").count() == 2
    });
    assert_eq!(c.node("n1").reason_time, since);
    assert!(c.node("n1").scontrol_state().contains("DRAIN"));
    // The operator resumes it: it takes work again (until it registers
    // again, which drains it again).
    let out = c.cli(&cwd, "scontrol", &["update", "NodeName=n1", "State=RESUME"]);
    assert!(out.status.success(), "{out:?}");
    c.wait_for(Duration::from_secs(30), "n1 IDLE", |c| {
        c.node("n1").scontrol_state() == "IDLE" && c.node("n1").reason.is_none()
    });
}
