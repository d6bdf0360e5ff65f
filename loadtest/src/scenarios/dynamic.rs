//! `dynamic`: a burst of dynamic nodes (`canopy-noded -Z`, Slurm 22.05's `slurmd -Z`) joining a
//! running controller at once: time until every one was created, placed in the relay tree and is
//! IDLE; then a job over all of them, and how long until it starts.

use std::time::Duration;

use anyhow::Result;

use crate::harness::{job, ClusterSpec, Harness};
use crate::report::Row;
use canopy::wire::messages::{Body, JobQuery};
use canopy::wire::types::JobState;

pub struct Opts {
    /// Nodes slurm.conf lists (started first).
    pub listed: u32,
    /// Dynamic nodes joining at once, one run per value.
    pub dynamic: Vec<u32>,
    pub widths: Vec<u32>,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.dynamic {
        for &w in &o.widths {
            rows.push(one(o.listed, n, w, progress)?);
        }
    }
    Ok(rows)
}

fn one(listed: u32, n: u32, w: u32, progress: &mut dyn FnMut(&str)) -> Result<Row> {
    progress(&format!(
        "dynamic: {n} nodes joining a cluster of {listed}, TreeWidth {w}"
    ));
    let spec = ClusterSpec {
        nodes: listed,
        tree_width: w,
        slurmd_timeout: 30,
        cpus: 2,
        job_runtime: Duration::from_secs(1),
        start_nodes: listed > 0,
        dynamic: n,
    };
    let mut h = Harness::start(spec, progress)?;
    let idle = h.start_dynamic(progress)?;
    // A job over every node: the controller must route its launch to the new ranks.
    let all = listed + n;
    let id = match h.call(Body::SubmitJob(Box::new(job(
        "all".into(),
        false,
        Some(all),
    ))))? {
        Body::SubmitReply(r) => r.job_id,
        other => anyhow::bail!("submit: unexpected {}", other.kind()),
    };
    let started = h.wait(
        Duration::from_secs(60),
        "the job over every node started",
        |h| {
            let q = Body::QueryJobs(JobQuery {
                job_ids: vec![id],
                include_finished: true,
                brief: true,
            });
            match h.call(q) {
                Ok(Body::Jobs(j)) => j
                    .into_rows()
                    .first()
                    .is_some_and(|j| j.state != JobState::Pending),
                _ => false,
            }
        },
    )?;
    let row = Row::new("dynamic")
        .set("listed_nodes", listed)
        .set("dynamic_nodes", n)
        .set("tree_width", w)
        .num("all_idle_s", idle.as_secs_f64())
        .num("job_start_s", started.as_secs_f64())
        .num("ctld_rss_mb", h.ctld_rss_mb()?);
    progress(&row.json());
    Ok(row)
}
