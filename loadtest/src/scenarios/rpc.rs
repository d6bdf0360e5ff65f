//! `rpc`: many concurrent clients speaking the wire protocol (no CLI
//! processes). Closed loop (each client waits for its reply, then sends the
//! next: maximum throughput) and open loop at a target rate with
//! coordinated-omission correction (latency counted from when a request was
//! *due*, so a stalled server is not hidden by clients that stopped sending).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use crate::harness::{job, ClusterSpec, Harness};
use crate::report::{latency, Row};
use canopy::wire::messages::{Body, JobQuery};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// squeue-like query for one job.
    Query,
    /// Durable submission of a held job.
    Submit,
    /// 90% queries, 10% submissions.
    Mixed,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Query => "query",
            Mix::Submit => "submit",
            Mix::Mixed => "mixed",
        }
    }
}

pub struct Opts {
    pub clients: u32,
    pub duration: Duration,
    pub mixes: Vec<Mix>,
    /// Open-loop target rates (requests/s, all clients together) per mix.
    pub query_rate: u32,
    pub submit_rate: u32,
    /// Held jobs queued before measuring (what the queries look up).
    pub preload: u32,
}

struct Outcome {
    hist: Histogram<u64>,
    ops: u64,
    errors: u64,
}

/// Run `clients` tasks for `duration`; `rate` = Some(total per second) for open loop.
fn drive(
    h: &Harness,
    clients: u32,
    duration: Duration,
    mix: Mix,
    rate: Option<u32>,
    ids: Arc<Vec<u32>>,
) -> Result<Outcome> {
    h.rt.block_on(async {
        let mut tasks = Vec::new();
        let start = Instant::now() + Duration::from_millis(50);
        for c in 0..clients {
            let mut conn = h.connect().await?;
            let ids = ids.clone();
            tasks.push(tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
                let (mut ops, mut errors) = (0u64, 0u64);
                let mut seed = u64::from(c) * 0x9E37_79B9 + 1;
                let period =
                    rate.map(|r| Duration::from_secs_f64(f64::from(clients) / f64::from(r.max(1))));
                tokio::time::sleep_until(start.into()).await;
                let mut i: u64 = 0;
                loop {
                    let due = match period {
                        Some(p) => start + p.mul_f64(i as f64),
                        None => Instant::now(),
                    };
                    if due.duration_since(start) >= duration {
                        break;
                    }
                    if period.is_some() {
                        tokio::time::sleep_until(due.into()).await;
                    }
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let submit = match mix {
                        Mix::Query => false,
                        Mix::Submit => true,
                        Mix::Mixed => (seed >> 40) % 10 == 0,
                    };
                    let body = if submit || ids.is_empty() {
                        Body::SubmitJob(Box::new(job(format!("rpc{seed}"), true, None)))
                    } else {
                        let id = ids[((seed >> 33) % ids.len() as u64) as usize];
                        Body::QueryJobs(JobQuery {
                            job_ids: vec![id],
                            include_finished: true,
                            brief: false,
                        })
                    };
                    match conn.request(&body).await {
                        Ok(env) if !matches!(env.body, Body::Error(_)) => ops += 1,
                        _ => errors += 1,
                    }
                    // Open loop: from when it was due; closed loop: from when it was sent.
                    hist.record(due.elapsed().as_micros().max(1) as u64)?;
                    i += 1;
                }
                Ok::<_, anyhow::Error>(Outcome { hist, ops, errors })
            }));
        }
        let mut total = Outcome {
            hist: Histogram::new_with_bounds(1, 120_000_000, 3)?,
            ops: 0,
            errors: 0,
        };
        for t in tasks {
            let o = t.await??;
            total.hist.add(&o.hist)?;
            total.ops += o.ops;
            total.errors += o.errors;
        }
        Ok(total)
    })
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    if o.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let spec = ClusterSpec {
        nodes: 16,
        tree_width: 16,
        slurmd_timeout: 300,
        cpus: 2,
        job_runtime: Duration::ZERO,
        start_nodes: true,
        dynamic: 0,
    };
    let h = Harness::start(spec, progress)?;
    progress(&format!("rpc: preloading {} held jobs", o.preload));
    let pre = h.submit_many(o.preload, 1, |i| job(format!("pre{i}"), true, None))?;
    let ids = Arc::new(pre);
    let mut rows = Vec::new();
    for &mix in &o.mixes {
        for open in [false, true] {
            let target = match mix {
                Mix::Submit => o.submit_rate,
                _ => o.query_rate,
            };
            let rate = open.then_some(target);
            progress(&format!(
                "rpc: {} {} with {} clients for {:?}",
                mix.name(),
                rate.map(|r| format!("open loop at {r}/s"))
                    .unwrap_or_else(|| "closed loop".into()),
                o.clients,
                o.duration
            ));
            let c0 = h.ctld_cpu()?;
            let t0 = Instant::now();
            let out = drive(&h, o.clients, o.duration, mix, rate, ids.clone())?;
            let secs = t0.elapsed().as_secs_f64();
            let cpu = (h.ctld_cpu()? - c0).as_secs_f64() / secs * 100.0;
            let row = latency(
                Row::new("rpc")
                    .set("mix", mix.name())
                    .set("mode", if open { "open" } else { "closed" })
                    .set("clients", o.clients)
                    .set("target_ops_per_s", rate.unwrap_or(0))
                    .num("ops_per_s", out.ops as f64 / o.duration.as_secs_f64())
                    .set("errors", out.errors),
                &out.hist,
            )
            .num("ctld_cpu_pct", cpu);
            progress(&row.json());
            rows.push(row);
        }
    }
    Ok(rows)
}
