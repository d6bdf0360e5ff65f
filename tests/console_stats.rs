//! `canopy stats` and sdiag's percentile section against real daemons on
//! loopback: a request kind's count and percentiles after some requests, by
//! user and by fan-out depth; reset; Slurm's sdiag lines left as they were.

mod common;

use common::{gid_of, user, Cluster};
use serde_json::Value;

fn stats_json(c: &Cluster, dir: &std::path::Path) -> Value {
    let out = c.cli(dir, "stats", &["--json"]);
    assert!(
        out.status.success(),
        "canopy stats failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn row<'a>(v: &'a Value, section: &str, key: &str) -> Option<&'a Value> {
    v[section]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str() == Some(key))
}

#[test]
fn stats_show_percentiles_per_kind_user_and_depth_and_reset() {
    let c = Cluster::start(3, 2, 30);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    for _ in 0..5 {
        assert!(c.cli(w, "squeue", &[]).status.success());
    }
    // A job's launch and end go through the tree: the per-depth histogram counts them. The
    // console's own fan-outs (a top) are left out of it.
    let job = c.sbatch(w, &["-N", "3", "--wrap", "true"]);
    c.wait_done(job, std::time::Duration::from_secs(60));
    assert!(c.cli(w, "top", &["--once"]).status.success());

    let v = stats_json(&c, w);
    let q = row(&v, "by_kind", "QueryJobs").expect("QueryJobs recorded");
    assert!(q["count"].as_u64().unwrap() >= 5, "{q}");
    let p = |k: &str| q[k].as_u64().unwrap();
    assert!(p("p50_us") >= 1);
    assert!(
        p("p50_us") <= p("p99_us") && p("p99_us") <= p("p999_us"),
        "{q}"
    );
    assert!(p("p999_us") <= p("max_us") + p("max_us") / 100 + 1, "{q}");
    let buckets = q["buckets"].as_array().unwrap();
    assert_eq!(
        buckets.last().unwrap()[1].as_u64().unwrap(),
        q["count"].as_u64().unwrap(),
        "cumulative buckets end at the count"
    );
    let me = nix::unistd::getuid().as_raw().to_string();
    let named = format!("({me})");
    let users = v["by_user"].as_array().unwrap();
    assert!(
        users.iter().any(|u| {
            let key = u["key"].as_str().unwrap();
            key == me || key.ends_with(&named)
        }),
        "this user recorded: {users:?}"
    );
    assert!(
        !v["by_depth"].as_array().unwrap().is_empty(),
        "the top fan-out is recorded by depth: {v}"
    );

    // sdiag: Slurm's lines as before, the percentiles in a section of their own.
    let out = c.cli(w, "sdiag", &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let slurm = text
        .lines()
        .find(|l| l.trim_start().starts_with("QueryJobs") && l.contains("ave_time:"))
        .unwrap_or_else(|| panic!("Slurm's RPC line kept: {text}"));
    assert!(
        slurm.contains("count:") && slurm.contains("total_time:"),
        "{slurm}"
    );
    let (_, extra) = text
        .split_once("latency percentiles by message type")
        .unwrap_or_else(|| panic!("percentile section: {text}"));
    let pct = extra
        .lines()
        .find(|l| l.trim_start().starts_with("QueryJobs"))
        .unwrap_or_else(|| panic!("QueryJobs percentiles: {extra}"));
    assert!(pct.contains("p99:") && pct.contains("p99.9:") && !pct.contains("ave_time:"));

    // The text view, then a reset: the old kinds are gone.
    let out = c.cli(w, "stats", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("MESSAGE KIND") && text.contains("QueryJobs"),
        "{text}"
    );
    assert!(c.cli(w, "stats", &["--reset"]).status.success());
    let v = stats_json(&c, w);
    assert!(row(&v, "by_kind", "QueryJobs").is_none(), "reset: {v}");
    let out = c.cli(w, "stats", &["--bogus"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn users_read_stats_but_only_operators_reset_them_or_run_top() {
    use std::os::unix::fs::PermissionsExt;
    if !common::require(nix::unistd::Uid::effective().is_root(), "root") {
        return;
    }
    let c = Cluster::start(1, 2, 30);
    // The user must reach the configuration (and the signer's socket).
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let uid = user("canopy-alice");
    let gid = gid_of(uid);
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run =
        |cmd: &str, args: &[&str]| common::run_as(&c, (uid, gid), home.path(), &c.conf, cmd, args);
    let out = run("stats", &["--json"]);
    assert!(
        out.status.success(),
        "a user reads the histograms: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run("stats", &["--reset"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only operators may reset"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run("top", &["--once"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The user's reset did nothing: both of the user's QueryLatency
    // requests are still counted (after a reset only the resetting one
    // would be).
    let w = tempfile::tempdir().unwrap();
    let v = stats_json(&c, w.path());
    let q = row(&v, "by_kind", "QueryLatency").expect("QueryLatency recorded");
    assert!(q["count"].as_u64().unwrap() >= 2, "{v}");
    assert!(
        row(&v, "by_kind", "QueryTop").is_some(),
        "refused requests count too: {v}"
    );
}
