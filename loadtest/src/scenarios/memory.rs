//! `memory`: controller RSS with many nodes and a deep queue of pending
//! jobs, and what a full job listing (squeue's query) costs at that size.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::harness::{job, ClusterSpec, Harness};
use crate::report::Row;
use canopy::wire::messages::{Body, JobQuery};

pub struct Opts {
    pub nodes: u32,
    pub tree_width: u32,
    pub jobs: u32,
    pub clients: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
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
    let rss_idle = h.ctld_rss_mb()?;
    progress(&format!("memory: queueing {} pending jobs", o.jobs));
    let t0 = Instant::now();
    h.submit_many(o.jobs, o.clients, |i| job(format!("m{i}"), true, None))?;
    let submit_s = t0.elapsed().as_secs_f64();
    let rss = h.ctld_rss_mb()?;
    let t1 = Instant::now();
    let listed = match h.call(Body::QueryJobs(JobQuery::default()))? {
        Body::Jobs(j) => j.len(),
        other => bail!("unexpected reply {}", other.kind()),
    };
    let list_ms = t1.elapsed().as_secs_f64() * 1000.0;
    let row = Row::new("memory")
        .set("nodes", o.nodes)
        .set("tree_width", o.tree_width)
        .set("pending_jobs", o.jobs)
        .num("ctld_rss_idle_mb", rss_idle)
        .num("ctld_rss_mb", rss)
        .num("submit_ops_per_s", f64::from(o.jobs) / submit_s)
        .set("listed_jobs", listed)
        .num("list_all_ms", list_ms);
    progress(&row.json());
    Ok(vec![row])
}
