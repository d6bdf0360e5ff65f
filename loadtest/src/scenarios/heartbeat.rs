//! `heartbeat`: N nodes registered and idle; what liveness costs the
//! controller. Steady-state frames and bytes per second received from node
//! links (and per heartbeat interval), controller CPU% and RSS.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::harness::{ClusterSpec, Harness};
use crate::report::Row;

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    /// Heartbeat intervals to measure over, after settling.
    pub intervals: u32,
    pub slurmd_timeout: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!("heartbeat: {n} nodes, TreeWidth {w}"));
            let spec = ClusterSpec {
                nodes: n,
                tree_width: w,
                slurmd_timeout: o.slurmd_timeout,
                cpus: 2,
                job_runtime: Duration::ZERO,
                start_nodes: true,
                dynamic: 0,
            };
            let t0 = Instant::now();
            let h = Harness::start(spec, progress)?;
            let startup = t0.elapsed();
            let hb = h.heartbeat();
            // Let start-up traffic (registrations, full health reports) drain.
            std::thread::sleep(hb * 2);
            let (s0, c0, t_0) = (h.try_stats()?, h.ctld_cpu()?, Instant::now());
            std::thread::sleep(hb * o.intervals);
            let (s1, c1, dt) = (h.try_stats()?, h.ctld_cpu()?, t_0.elapsed());
            let secs = dt.as_secs_f64();
            let frames = (s1.node_frames_in - s0.node_frames_in) as f64;
            let bytes = (s1.node_bytes_in - s0.node_bytes_in) as f64;
            let cpu = (c1 - c0).as_secs_f64() / secs * 100.0;
            let row = Row::new("heartbeat")
                .set("nodes", n)
                .set("tree_width", w)
                .num("heartbeat_interval_s", hb.as_secs_f64())
                .num("ctld_msgs_per_interval", frames / secs * hb.as_secs_f64())
                .num("ctld_msgs_per_s", frames / secs)
                .num("ctld_bytes_per_s", bytes / secs)
                .num("ctld_cpu_pct", cpu)
                .num("ctld_rss_mb", h.ctld_rss_mb()?)
                .num("startup_s", startup.as_secs_f64())
                .set("false_down", s1.nodes.down)
                .set("not_responding", s1.nodes.not_responding);
            progress(&row.json());
            rows.push(row);
        }
    }
    Ok(rows)
}
