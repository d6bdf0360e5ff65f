//! `canopy debug` against real daemons on loopback: log detail raised on one
//! node only (its relay writes trace lines, its neighbour's does not), shown
//! by `--show`, reverted by the daemon itself when the time is up (even with
//! the controller gone), reverted at once by `--off`; refused for an
//! ordinary user, as `canopy ping` and `canopy trace` are.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use canopy::wire::messages::DebugReport;
use common::{gid_of, user, Cluster};

const PROBE_LINE: &str = "probe stamped on its way down";

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn show(c: &Cluster, cwd: &Path) -> DebugReport {
    let o = c.cli(cwd, "debug", &["--show", "--json"]);
    assert!(o.status.success(), "{}", out(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The flags raised on `node` according to `--show`.
fn raised_on(rep: &DebugReport, node: &str) -> Vec<String> {
    rep.groups
        .iter()
        .find(|(list, _)| {
            canopy::config::hostlist::expand(list)
                .unwrap()
                .iter()
                .any(|n| n == node)
        })
        .map(|(_, v)| {
            v.iter()
                .map(|r| format!("{}={}", r.flag, r.level))
                .collect()
        })
        .unwrap_or_else(|| panic!("{node} missing from {rep:?}"))
}

#[test]
fn debug_is_raised_on_the_named_nodes_only_and_reverts_by_itself() {
    let mut c = Cluster::start(5, 2, 30);
    let cwd = c.dir.path().to_path_buf();
    // Nothing raised anywhere to begin with.
    let rep = show(&c, &cwd);
    assert_eq!(rep.groups.len(), 1, "{rep:?}");
    assert!(rep.groups[0].1.is_empty());

    // Bad input is refused by the command, naming what was wrong.
    let o = c.cli(&cwd, "debug", &["-w", "n3", "--flags", "route,bogus"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("unknown debug flag 'bogus'"),
        "{}",
        out(&o)
    );
    let o = c.cli(
        &cwd,
        "debug",
        &["-w", "n3", "--flags", "route", "--for", "3d"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let o = c.cli(&cwd, "debug", &["--flags", "route"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));

    // Route tracing on n3 for a few seconds.
    let o = c.cli(
        &cwd,
        "debug",
        &[
            "-w", "n3", "--flags", "route", "--level", "trace", "--for", "6s",
        ],
    );
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("n3: route=trace for 0m0"),
        "{}",
        out(&o)
    );
    let rep = show(&c, &cwd);
    assert_eq!(raised_on(&rep, "n3"), vec!["route=trace"]);
    assert!(raised_on(&rep, "n4").is_empty());
    assert_eq!(
        rep.groups.len(),
        2,
        "the others fold into one group: {rep:?}"
    );

    // A probe through n3 and n4: only n3's relay writes its trace line.
    let o = c.cli(&cwd, "ping", &["n[3-4]"]);
    assert!(o.status.success(), "{}", out(&o));
    c.wait_for(Duration::from_secs(5), "n3's trace line", |c| {
        c.log_text("n3").contains(PROBE_LINE)
    });
    assert!(!c.log_text("n4").contains(PROBE_LINE));

    // The daemon reverts by itself when the time is up.
    c.wait_for(Duration::from_secs(20), "n3 reverted", |c| {
        c.log_text("n3").contains("raised log detail reverted")
    });
    assert!(raised_on(&show(&c, &cwd), "n3").is_empty());
    let before = c.log_text("n3").matches(PROBE_LINE).count();
    let o = c.cli(&cwd, "ping", &["n3"]);
    assert!(o.status.success(), "{}", out(&o));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        c.log_text("n3").matches(PROBE_LINE).count(),
        before,
        "no trace once reverted"
    );

    // --off reverts at once.
    let o = c.cli(
        &cwd,
        "debug",
        &["-w", "n[1-2]", "--flags", "agent,link", "--for", "10m"],
    );
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        raised_on(&show(&c, &cwd), "n2"),
        vec!["agent=debug", "link=debug"]
    );
    let o = c.cli(&cwd, "debug", &["-w", "n[1-2]", "--off"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(raised_on(&show(&c, &cwd), "n2").is_empty());

    // The node holds the deadline: it reverts with the controller gone.
    let o = c.cli(
        &cwd,
        "debug",
        &["-w", "n5", "--flags", "wire", "--for", "3s"],
    );
    assert!(o.status.success(), "{}", out(&o));
    c.kill_ctld();
    c.wait_for(Duration::from_secs(20), "n5 reverted alone", |c| {
        c.log_text("n5").contains("raised log detail reverted")
    });
    common::keep_logs(&c);
}

#[test]
fn an_ordinary_user_may_not_debug_ping_or_trace() {
    if !common::require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let c = Cluster::start(3, 2, 30);
    // The configuration must be readable by the user (the key stays root's).
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let uid = user("canopy-dbg");
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for args in [
        vec!["debug", "-w", "n1", "--flags", "route"],
        vec!["debug", "--show"],
        vec!["ping", "n1"],
        vec!["trace", "fanout"],
    ] {
        let o = common::run_as(
            &c,
            (uid, gid_of(uid)),
            home.path(),
            &c.conf,
            args[0],
            &args[1..],
        );
        assert!(!o.status.success(), "{args:?}: {}", out(&o));
        assert!(
            out(&o).contains("Access/permission denied"),
            "{args:?}: {}",
            out(&o)
        );
    }
    // Root may.
    let o = c.cli(c.dir.path(), "debug", &["--show"]);
    assert!(o.status.success(), "{}", out(&o));
}

#[test]
fn debug_lines_past_the_rate_are_dropped_and_counted() {
    let mut c = Cluster::configure(3, 2, 30, "", &[]);
    c.start_authd();
    c.start_ctld();
    c.start_node("n1");
    // n2 may write 3 debug lines a second; n1 and n3 the default 500.
    c.start_node_env("n2", &[("CANOPY_DEBUG_RATE", "3")]);
    c.start_node("n3");
    c.wait_for(Duration::from_secs(60), "all nodes IDLE", |c| {
        c.nodes_info()
            .iter()
            .filter(|n| n.scontrol_state() == "IDLE")
            .count()
            == 3
    });
    let cwd = c.dir.path().to_path_buf();
    // Each probe costs n2's relay two debug lines; a burst is more than 3.
    for _ in 0..4 {
        let o = c.cli(&cwd, "ping", &["n2"]);
        assert!(o.status.success(), "{}", out(&o));
    }
    // The count is written once the next second opens with a line admitted.
    c.wait_for(Duration::from_secs(15), "n2's drop report", |c| {
        let _ = c.cli(&cwd, "ping", &["n2"]);
        c.log_text("n2")
            .contains("debug lines dropped in the last second (at most 3 per second)")
    });
    assert!(!c.log_text("n1").contains("debug lines dropped"));
    assert!(!c.log_text("n3").contains("debug lines dropped"));
    common::keep_logs(&c);
}
