//! `memory`: controller RSS with many nodes and a deep queue of pending
//! jobs, and what a full job listing (squeue's query) costs at that size.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::harness::{ClusterSpec, Harness};
use crate::report::Row;
use canopy::wire::messages::{Body, JobQuery};
use canopy::wire::types::JobSubmit;

pub struct Opts {
    pub nodes: u32,
    pub tree_width: u32,
    pub jobs: u32,
    pub clients: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    if o.clients == 0 {
        bail!("--clients must be at least 1");
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
    let rss_idle = h.ctld_rss_mb()?;
    let uid = nix::unistd::getuid().as_raw();
    progress(&format!("memory: queueing {} pending jobs", o.jobs));
    let per = o.jobs.div_ceil(o.clients);
    let t0 = Instant::now();
    h.rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..o.clients {
            let mut conn = h.connect().await?;
            let count = per.min(o.jobs.saturating_sub(c * per));
            tasks.push(tokio::spawn(async move {
                for i in 0..count {
                    let s = JobSubmit {
                        name: format!("m{c}-{i}"),
                        hold: true,
                        script: "#!/bin/sh\n#SBATCH -N 1\nsrun ./simulate --input data.h5\n".into(),
                        workdir: "/home/user/project".into(),
                        submit_dir: "/home/user/project".into(),
                        user: "loadtest".into(),
                        uid,
                        gid: uid,
                        command: "/home/user/project/job.sh".into(),
                        ..Default::default()
                    };
                    match conn.request(&Body::SubmitJob(Box::new(s))).await?.body {
                        Body::SubmitReply(_) => {}
                        other => bail!("submit failed: {other:?}"),
                    }
                }
                Ok::<(), anyhow::Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok::<(), anyhow::Error>(())
    })?;
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
