//! CI smoke test of the load harness: every scenario at a small size
//! (`--quick`: 200 simulated nodes), asserting correctness — outcome counts,
//! no node wrongly DOWN, every job completed — never timing.
//!
//! The harness starts the `canopy-ctld` built beside it. Cargo builds that binary
//! when the tests run from the workspace root (`cargo test`), not for
//! `cargo test -p canopy-loadtest` alone, so a missing one is reported by name.

use std::process::Command;

use serde_json::Value;

fn run(scenario: &str) -> Vec<Value> {
    let exe = env!("CARGO_BIN_EXE_canopy-loadtest");
    let ctld = std::path::Path::new(exe).with_file_name("canopy-ctld");
    assert!(
        ctld.exists(),
        "{} is missing: run the tests from the workspace root, or `cargo build --bins` first",
        ctld.display()
    );
    let out = Command::new(exe)
        .args([scenario, "--quick", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{scenario} failed:\n{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!rows.is_empty(), "{scenario} printed no rows:\n{stderr}");
    for r in &rows {
        assert_eq!(r["scenario"], scenario, "{r}");
    }
    rows
}

fn num(r: &Value, k: &str) -> f64 {
    r[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {r}"))
}

#[test]
fn heartbeat_controller_sees_about_treewidth_messages_per_interval() {
    for r in run("heartbeat") {
        assert_eq!(num(&r, "nodes"), 200.0);
        assert_eq!(num(&r, "false_down"), 0.0, "{r}");
        assert_eq!(num(&r, "not_responding"), 0.0, "{r}");
        // Keepalives from the direct children only (plus slack for timing).
        assert!(
            num(&r, "ctld_msgs_per_interval") <= 2.0 * num(&r, "tree_width"),
            "{r}"
        );
    }
}

#[test]
fn fanout_gives_exactly_one_outcome_per_target() {
    let rows = run("fanout");
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(num(r, "missing_outcomes"), 0.0, "{r}");
        assert_eq!(num(r, "duplicate_outcomes"), 0.0, "{r}");
    }
    assert_eq!(
        num(&rows[0], "failed_targets"),
        0.0,
        "healthy tree: {}",
        rows[0]
    );
    assert!(num(&rows[1], "relays_killed") >= 1.0);
    // Killed relays fail explicitly (their own outcome), and nothing goes missing.
    assert!(num(&rows[1], "failed_targets") >= 1.0, "{}", rows[1]);
}

#[test]
fn dynamic_nodes_join_become_idle_and_take_a_job() {
    // The scenario itself fails unless every node is IDLE and the job over all of them starts.
    for r in run("dynamic") {
        assert_eq!(num(&r, "dynamic_nodes"), 50.0, "{r}");
        assert_eq!(num(&r, "listed_nodes"), 0.0, "{r}");
        assert!(num(&r, "all_idle_s") > 0.0, "{r}");
    }
}

#[test]
fn storm_reattaches_the_dead_relays_subtree_without_false_down() {
    for r in run("storm") {
        assert_eq!(num(&r, "false_down"), 0.0, "{r}");
        assert!(num(&r, "killed_relay_subtree") >= 1.0, "{r}");
        // Only the killed nodes remain not responding.
        assert_eq!(
            num(&r, "still_not_responding"),
            num(&r, "killed_leaves") + 1.0,
            "{r}"
        );
    }
}

#[test]
fn rpc_mixes_complete_without_errors() {
    let rows = run("rpc");
    assert_eq!(rows.len(), 6);
    for r in rows {
        assert_eq!(num(&r, "errors"), 0.0, "{r}");
        assert!(num(&r, "ops_per_s") > 0.0, "{r}");
    }
}

#[test]
fn throughput_completes_every_job() {
    for r in run("throughput") {
        assert_eq!(num(&r, "completed"), num(&r, "jobs"), "{r}");
        assert_eq!(num(&r, "failed"), 0.0, "{r}");
    }
}

#[test]
fn memory_lists_every_pending_job() {
    for r in run("memory") {
        assert_eq!(num(&r, "listed_jobs"), num(&r, "pending_jobs"), "{r}");
    }
}

#[test]
fn sched_examines_every_pending_job_and_reserves() {
    for r in run("sched") {
        assert_eq!(num(&r, "nodes"), 500.0, "{r}");
        // Every pending job is looked at; the top ones plan a start.
        assert_eq!(num(&r, "examined"), num(&r, "pending_jobs"), "{r}");
        assert!(num(&r, "reserved") > 0.0, "{r}");
        assert!(num(&r, "reserved") <= num(&r, "reserve_depth"), "{r}");
        assert!(num(&r, "quick_passes") > 0.0, "{r}");
    }
}

#[test]
fn peer_runs_or_skips_cleanly() {
    for r in run("peer") {
        if r.get("skipped").is_some() {
            assert!(r["note"].as_str().is_some_and(|n| !n.is_empty()), "{r}");
            continue;
        }
        assert!(num(&r, "canopy") > 0.0, "{r}");
        if let Some(s) = r["slurm"].as_f64() {
            assert!(s > 0.0 && num(&r, "ratio") > 0.0, "{r}");
        }
    }
}

#[test]
fn leaf_times_every_row() {
    // In process: needs no daemon, so it does not go through `run`'s ctld check.
    let exe = env!("CARGO_BIN_EXE_canopy-loadtest");
    let out = Command::new(exe)
        .args(["leaf", "--quick", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "leaf failed:\n{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let metrics: Vec<&str> = rows.iter().filter_map(|r| r["metric"].as_str()).collect();
    assert_eq!(
        metrics,
        [
            "setup_confined",
            "setup_plain",
            "teardown_confined",
            "teardown_plain",
            "setup_confined_cpu",
            "fork_exec_confined",
            "fork_exec_plain",
            "added_launch",
            "added_teardown"
        ]
    );
    for r in rows.iter().filter(|r| r.get("n").is_some()) {
        assert!(num(r, "n") > 0.0 && num(r, "p50_ms") > 0.0, "{r}");
        assert!(num(r, "p50_ms") <= num(r, "p99_ms"), "{r}");
    }
}

#[test]
fn resv_gate_lets_every_job_through_without_rules_and_holds_some_with_them() {
    let rows = run("resv-gate");
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let (allowed, jobs) = (num(r, "allowed"), num(r, "pending_jobs"));
        if r["rules"] == "none" {
            assert_eq!(allowed, jobs, "{r}");
        } else {
            assert!(allowed > 0.0 && allowed < jobs, "{r}");
        }
    }
}

/// `peer-sched`'s figure rows (after the set-up row) with canopy's value.
fn peer_sched_rows(rows: &[Value]) -> Vec<&Value> {
    assert_eq!(rows[0]["metric"], "node_daemons", "{}", rows[0]);
    assert!(
        rows[0]["canopy"]
            .as_str()
            .is_some_and(|c| c.starts_with("8 simulated (canopy-noded --simulate")),
        "{}",
        rows[0]
    );
    rows[1..].iter().collect()
}

#[test]
fn peer_sched_reads_both_sdiags_or_skips_cleanly() {
    let rows = run("peer-sched");
    if rows[0].get("skipped").is_some() {
        assert!(rows[0]["note"].as_str().is_some_and(|n| !n.is_empty()));
        return;
    }
    for r in peer_sched_rows(&rows) {
        if r["metric"] == "bf_queue_len_mean" || r["metric"] == "bf_depth_mean" {
            // Every measured cycle went through the whole queue, on both.
            assert_eq!(num(r, "canopy"), 200.0, "{r}");
            assert_eq!(num(r, "slurm"), 200.0, "{r}");
        }
        if r["metric"] == "bf_cycle_mean_us" {
            assert!(num(r, "canopy") > 0.0 && num(r, "slurm") > 0.0, "{r}");
        }
    }
}

#[test]
fn peer_sched_canopy_only_needs_no_slurm() {
    let exe = env!("CARGO_BIN_EXE_canopy-loadtest");
    let out = Command::new(exe)
        .args(["peer-sched", "--quick", "--json", "--canopy-only"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "peer-sched failed:\n{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["slurm"], "not run", "{}", rows[0]);
    let rows = peer_sched_rows(&rows);
    assert_eq!(rows.len(), 13);
    for r in rows {
        assert!(r["slurm"].is_null() && r["ratio"].is_null(), "{r}");
        match r["metric"].as_str() {
            Some("bf_queue_len_mean" | "bf_depth_mean" | "bf_depth_try_mean") => {
                assert_eq!(num(r, "canopy"), 200.0, "{r}")
            }
            Some("bf_cycle_mean_us" | "bf_examined_per_s" | "ctld_rss_mib") => {
                assert!(num(r, "canopy") > 0.0, "{r}")
            }
            _ => {}
        }
    }
}

#[test]
fn power_storm_starts_the_job_and_powered_down_nodes_are_not_examined() {
    let rows = run("power");
    let interval: Vec<&Value> = rows.iter().filter(|r| r["measure"] == "interval").collect();
    assert_eq!(interval.len(), 2, "{rows:?}");
    for r in &interval {
        // The pass looks at the powered-on nodes only.
        let on = num(r, "nodes") * (100.0 - num(r, "powered_down_pct")) / 100.0;
        assert_eq!(num(r, "nodes_examined_per_interval"), on, "{r}");
    }
    let storm: Vec<&Value> = rows.iter().filter(|r| r["measure"] == "storm").collect();
    assert_eq!(storm.len(), 1, "{rows:?}");
    let r = storm[0];
    assert_eq!(num(r, "nodes"), 50.0);
    assert!(num(r, "resume_program_s") <= num(r, "job_running_s"), "{r}");
    assert!(num(r, "job_running_s") <= num(r, "all_idle_s"), "{r}");
}

#[test]
fn console_exec_folds_a_noop_into_one_line_and_distinct_outputs_stay_apart() {
    let rows = run("console-exec");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let noop = &rows[0];
    assert_eq!(noop["command"], "true", "{noop}");
    assert_eq!(num(noop, "folded_lines"), 1.0, "{noop}");
    assert_eq!(num(noop, "missing_nodes"), 0.0, "{noop}");
    let distinct = &rows[1];
    assert_eq!(distinct["command"], "hostname", "{distinct}");
    assert_eq!(
        num(distinct, "folded_lines"),
        num(distinct, "nodes"),
        "every node's own name: {distinct}"
    );
    assert_eq!(num(distinct, "missing_nodes"), 0.0, "{distinct}");
}

#[test]
fn console_tree_groups_the_unhealthy_by_reason_within_the_line_budget() {
    let rows = run("console-tree");
    assert_eq!(rows.len(), 3, "default, depth2 and down views: {rows:?}");
    for r in &rows {
        // Three reasons (links lost, drained, down), each its own group, every node counted.
        assert_eq!(num(r, "failure_groups"), 3.0, "{r}");
        assert_eq!(num(r, "unhealthy"), num(r, "unhealthy_expected"), "{r}");
        assert!(num(r, "lines") <= 25.0, "{r}");
    }
}
