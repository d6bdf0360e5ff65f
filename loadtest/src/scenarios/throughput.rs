//! `throughput`: short jobs end to end (submit → schedule → launch through
//! the relay tree → run → report → teardown → complete) on simulated nodes;
//! jobs completed per second.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::harness::{job, ClusterSpec, Harness};
use crate::report::Row;

pub struct Opts {
    pub nodes: u32,
    pub tree_width: u32,
    pub jobs: u32,
    pub clients: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    if o.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let spec = ClusterSpec {
        nodes: o.nodes,
        tree_width: o.tree_width,
        slurmd_timeout: 300,
        cpus: 2,
        job_runtime: Duration::ZERO,
        start_nodes: true,
        dynamic: 0,
    };
    let h = Harness::start(spec, progress)?;
    progress(&format!(
        "throughput: {} jobs from {} clients on {} nodes",
        o.jobs, o.clients, o.nodes
    ));
    let c0 = h.ctld_cpu()?;
    let t0 = Instant::now();
    let submitted = h
        .submit_many(o.jobs, o.clients, |i| job(format!("t{i}"), false, Some(1)))?
        .len() as u32;
    let submit_s = t0.elapsed().as_secs_f64();
    let limit = Duration::from_secs(60 + u64::from(o.jobs) / 100);
    h.wait(limit, "every job to complete", |h| {
        h.try_stats()
            .is_ok_and(|s| s.jobs_completed + s.jobs_failed >= u64::from(submitted))
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let s = h.try_stats()?;
    let cpu = (h.ctld_cpu()? - c0).as_secs_f64() / secs * 100.0;
    let row = Row::new("throughput")
        .set("nodes", o.nodes)
        .set("tree_width", o.tree_width)
        .set("jobs", submitted)
        .set("clients", o.clients)
        .num("submit_ops_per_s", f64::from(submitted) / submit_s)
        .num("jobs_per_s", f64::from(submitted) / secs)
        .num("elapsed_s", secs)
        .set("completed", s.jobs_completed)
        .set("failed", s.jobs_failed)
        .num("ctld_cpu_pct", cpu);
    progress(&row.json());
    Ok(vec![row])
}
