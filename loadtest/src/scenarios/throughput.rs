//! `throughput`: short jobs end to end (submit → schedule → launch through
//! the relay tree → run → report → teardown → complete) on simulated nodes;
//! jobs completed per second.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::harness::{ClusterSpec, Harness};
use crate::report::Row;
use canopy::wire::messages::Body;
use canopy::wire::types::JobSubmit;

pub struct Opts {
    pub nodes: u32,
    pub tree_width: u32,
    pub jobs: u32,
    pub clients: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    if o.clients == 0 || o.jobs == 0 {
        bail!("--clients and --jobs must be at least 1");
    }
    let spec = ClusterSpec {
        nodes: o.nodes,
        tree_width: o.tree_width,
        slurmd_timeout: 300,
        cpus: 2,
        job_runtime: Duration::ZERO,
        start_nodes: true,
    };
    let h = Harness::start(spec, progress)?;
    let uid = nix::unistd::getuid().as_raw();
    progress(&format!(
        "throughput: {} jobs from {} clients on {} nodes",
        o.jobs, o.clients, o.nodes
    ));
    let c0 = h.ctld_cpu()?;
    let t0 = Instant::now();
    let per = o.jobs.div_ceil(o.clients);
    let submitted: u32 = h.rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..o.clients {
            let mut conn = h.connect().await?;
            let count = per.min(o.jobs.saturating_sub(c * per));
            tasks.push(tokio::spawn(async move {
                for i in 0..count {
                    let s = JobSubmit {
                        name: format!("t{c}-{i}"),
                        min_nodes: Some(1),
                        script: "#!/bin/sh\ntrue\n".into(),
                        workdir: "/tmp".into(),
                        submit_dir: "/tmp".into(),
                        user: "loadtest".into(),
                        uid,
                        gid: uid,
                        command: "(null)".into(),
                        ..Default::default()
                    };
                    match conn.request(&Body::SubmitJob(Box::new(s))).await?.body {
                        Body::SubmitReply(_) => {}
                        other => bail!("submit failed: {other:?}"),
                    }
                }
                Ok::<u32, anyhow::Error>(count)
            }));
        }
        let mut n = 0;
        for t in tasks {
            n += t.await??;
        }
        Ok::<u32, anyhow::Error>(n)
    })?;
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
