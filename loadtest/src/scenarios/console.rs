//! `console-idle`: what the operator console costs. N simulated nodes,
//! registered and idle: the controller's CPU over a window with nobody
//! watching; then `canopy top` (one request per sample, the way the terminal
//! UI refreshes) timed and its text view's length counted, and `canopy
//! stats`; then the idle window again, once the console is closed. Nothing
//! of the console runs while idle, so the two idle figures should match
//! each other (and the `heartbeat` scenario's on a build without the console).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use canopy::console::top::{render, TopQuery};
use canopy::wire::messages::{Body, LatencyQuery};

use crate::harness::{ClusterSpec, Harness};
use crate::report::Row;

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    /// Heartbeat intervals per idle window.
    pub intervals: u32,
    /// `canopy top` samples taken while "watching".
    pub samples: u32,
    /// Time between samples (the terminal UI refreshes once a second).
    pub refresh: Duration,
    pub slurmd_timeout: u32,
}

fn idle_cpu_pct(h: &Harness, window: Duration) -> Result<f64> {
    let (c0, t0) = (h.ctld_cpu()?, Instant::now());
    std::thread::sleep(window);
    let (c1, dt) = (h.ctld_cpu()?, t0.elapsed());
    Ok((c1 - c0).as_secs_f64() / dt.as_secs_f64() * 100.0)
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!("console-idle: {n} nodes, TreeWidth {w}"));
            let spec = ClusterSpec {
                nodes: n,
                tree_width: w,
                slurmd_timeout: o.slurmd_timeout,
                cpus: 2,
                job_runtime: Duration::ZERO,
                start_nodes: true,
                dynamic: 0,
            };
            let h = Harness::start(spec, progress)?;
            let hb = h.heartbeat();
            std::thread::sleep(hb * 2);
            let window = hb * o.intervals;
            let before = idle_cpu_pct(&h, window)?;
            // Watching: one sample per request, as the UI refreshes.
            let q = TopQuery::default();
            let (mut times, mut lines, mut answered, mut missing) = (Vec::new(), 0, 0, 0);
            let (c0, t0) = (h.ctld_cpu()?, Instant::now());
            for _ in 0..o.samples.max(1) {
                let t = Instant::now();
                let next = t + o.refresh;
                let r = match h.call(Body::QueryTop(q.clone()))? {
                    Body::Top(r) => r,
                    other => bail!("canopy top: unexpected reply {}", other.kind()),
                };
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                lines = render(&r).lines().count();
                answered = r.summary.totals.daemons;
                missing = r.missing.len();
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            let watch_secs = t0.elapsed().as_secs_f64();
            let watch_cpu = (h.ctld_cpu()? - c0).as_secs_f64() / watch_secs * 100.0;
            let stats_ok = matches!(
                h.call(Body::QueryLatency(LatencyQuery { reset: false }))?,
                Body::Latency(_)
            );
            let after = idle_cpu_pct(&h, window)?;
            times.sort_by(|a, b| a.total_cmp(b));
            let row = Row::new("console-idle")
                .set("nodes", n)
                .set("tree_width", w)
                .num("idle_cpu_pct_before", before)
                .num("idle_cpu_pct_after", after)
                .num("watch_cpu_pct", watch_cpu)
                .set("top_samples", times.len() as u64)
                .num("top_ms_p50", pct(&times, 0.5))
                .num("top_ms_max", pct(&times, 1.0))
                .set("top_lines", lines as u64)
                .set("daemons_answered", answered)
                .set("missing_groups", missing as u64)
                .set("stats_ok", stats_ok);
            progress(&row.json());
            rows.push(row);
        }
    }
    Ok(rows)
}
