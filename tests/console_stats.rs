//! `canopy stats` and sdiag's percentile section against real daemons on
//! loopback: a request kind's count and percentiles after some requests, by
//! user and by fan-out depth; reset; Slurm's sdiag lines left as they were.

mod common;

use common::Cluster;
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
    // One fan-out through the tree, for the per-depth histogram.
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
