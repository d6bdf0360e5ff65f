//! `console-exec`: `canopy exec` of a no-op on every simulated node through
//! the relay tree; the report must come back as one folded group holding
//! every node (goal: within 1 s at 10,000 nodes). Simulated nodes answer
//! the exec without forking (an empty output, exit 0), so this measures the
//! tree's fan-out, the folding at every relay and the controller's report,
//! not process start-up. The controller's CPU over an idle spell before and
//! after the runs shows that an exec leaves no work behind.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use crate::harness::{ClusterSpec, Harness};
use crate::report::{latency, Row};
use canopy::wire::exec::{ExecRequest, DEFAULT_MAX_OUTPUT};
use canopy::wire::messages::Body;

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    pub rounds: u32,
    /// How long the controller is watched idle, before and after.
    pub idle: Duration,
    /// Also run `hostname`, which every simulated node answers with its own
    /// name: the worst case for folding (as many groups as nodes).
    pub distinct: bool,
}

/// Controller CPU time spent over `idle` with nobody asking anything.
fn idle_cpu(h: &Harness, idle: Duration) -> Result<Duration> {
    let before = h.ctld_cpu()?;
    std::thread::sleep(idle);
    Ok(h.ctld_cpu()?.saturating_sub(before))
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!("console-exec: {n} nodes, TreeWidth {w}"));
            let spec = ClusterSpec {
                nodes: n,
                tree_width: w,
                slurmd_timeout: 300,
                cpus: 2,
                job_runtime: Duration::ZERO,
                start_nodes: true,
                dynamic: 0,
            };
            let h = Harness::start(spec, progress)?;
            let depth = canopy::tree::topology::Topology::new(n, w)?.max_depth();
            let all = if n == 1 {
                "s00001".to_string()
            } else {
                format!("s[00001-{n:05}]")
            };
            let cpu_idle_before = idle_cpu(&h, o.idle)?;
            let (hist, worst_groups, missing) = rounds(&h, n, &all, "true", o.rounds)?;
            let cpu_idle_after = idle_cpu(&h, o.idle)?;
            let p99_ms = hist.value_at_quantile(0.99) as f64 / 1000.0;
            let row = latency(
                Row::new("console-exec")
                    .set("nodes", n)
                    .set("tree_width", w)
                    .set("tree_depth", depth)
                    .set("command", "true")
                    .set("rounds", o.rounds),
                &hist,
            )
            // The goal: one folded line, every node in it, within a second.
            .set("folded_lines", worst_groups)
            .set("missing_nodes", missing)
            .set("goal_ms", 1000)
            .set(
                "meets_goal",
                worst_groups == 1 && missing == 0 && p99_ms <= 1000.0,
            )
            .num(
                "ctld_idle_cpu_ms_before",
                cpu_idle_before.as_secs_f64() * 1000.0,
            )
            .num(
                "ctld_idle_cpu_ms_after",
                cpu_idle_after.as_secs_f64() * 1000.0,
            )
            .num("idle_window_s", o.idle.as_secs_f64());
            progress(&row.json());
            rows.push(row);
            if o.distinct {
                let (hist, groups, missing) = rounds(&h, n, &all, "hostname", o.rounds)?;
                let row = latency(
                    Row::new("console-exec")
                        .set("nodes", n)
                        .set("tree_width", w)
                        .set("tree_depth", depth)
                        .set("command", "hostname")
                        .set("rounds", o.rounds),
                    &hist,
                )
                // Every node differs: one line per node is right here.
                .set("folded_lines", groups)
                .set("missing_nodes", missing)
                .set("expected_lines", n);
                progress(&row.json());
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// `count` runs of `cmd` on every node: latencies, the most groups
/// (folded results plus missing-node lines) seen in one report, and the
/// nodes that gave no result, summed over the runs.
fn rounds(
    h: &Harness,
    n: u32,
    all: &str,
    cmd: &str,
    count: u32,
) -> Result<(Histogram<u64>, usize, u64)> {
    let mut hist = Histogram::<u64>::new(3)?;
    let mut worst_groups = 0usize;
    let mut missing = 0u64;
    for _ in 0..count {
        let req = ExecRequest {
            nodes: all.to_string(),
            argv: vec![cmd.into()],
            timeout_ms: 10_000,
            max_output: DEFAULT_MAX_OUTPUT,
            token: rand::random(),
        };
        let t0 = Instant::now();
        let report = match h.call(Body::Exec(req))? {
            Body::ExecReply(r) => r,
            other => bail!("unexpected reply {}", other.kind()),
        };
        hist.record(t0.elapsed().as_micros() as u64)?;
        if report.targets != u64::from(n) {
            bail!("exec covered {} targets, expected {n}", report.targets);
        }
        let answered: u64 = report.groups.iter().map(|g| g.count).sum();
        missing += u64::from(n) - answered.min(u64::from(n));
        worst_groups = worst_groups.max(report.groups.len() + report.missing.len());
    }
    Ok((hist, worst_groups, missing))
}
