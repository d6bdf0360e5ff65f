//! `fanout`: broadcast a no-op to every node through the relay tree and
//! gather every outcome; latency percentiles over repeated rounds, then the
//! same with 1% of the relays killed mid-run. Every round must produce
//! exactly one outcome per target (checked by the controller and here).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use super::{relays_and_leaves, Lcg};
use crate::harness::{ClusterSpec, Harness};
use crate::report::{latency, Row};
use canopy::wire::messages::{Body, BroadcastRequest};

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    pub rounds: u32,
    pub budget: Duration,
}

struct Phase {
    hist: Histogram<u64>,
    missing: u64,
    duplicates: u64,
    failed: u64,
}

fn rounds(
    h: &Harness,
    n: u32,
    count: u32,
    budget: Duration,
    mut between: impl FnMut(u32),
) -> Result<Phase> {
    let mut p = Phase {
        hist: Histogram::new(3)?,
        missing: 0,
        duplicates: 0,
        failed: 0,
    };
    for i in 0..count {
        between(i);
        let req = BroadcastRequest {
            nodes: None,
            budget_ms: budget.as_millis() as u64,
        };
        let t0 = Instant::now();
        let reply = match h.call(Body::Broadcast(req))? {
            Body::BroadcastReply(r) => r,
            other => bail!("unexpected reply {}", other.kind()),
        };
        p.hist.record(t0.elapsed().as_micros() as u64)?;
        let failed: u64 = reply.targets - reply.ok;
        if reply.targets != u64::from(n) {
            bail!("broadcast covered {} targets, expected {n}", reply.targets);
        }
        p.missing += reply.missing;
        p.duplicates += reply.duplicates;
        p.failed += failed;
    }
    Ok(p)
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!("fanout: {n} nodes, TreeWidth {w}"));
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
            let healthy = rounds(&h, n, o.rounds, o.budget, |_| {})?;
            let row = latency(
                Row::new("fanout")
                    .set("nodes", n)
                    .set("tree_width", w)
                    .set("tree_depth", depth)
                    .set("relays_killed", 0)
                    .set("rounds", o.rounds),
                &healthy.hist,
            )
            .set("missing_outcomes", healthy.missing)
            .set("duplicate_outcomes", healthy.duplicates)
            .set("failed_targets", healthy.failed);
            progress(&row.json());
            rows.push(row);

            // 1% of the relays die halfway through the rounds.
            let (relays, _) = relays_and_leaves(n, w);
            let kill = (relays.len() / 100).max(1);
            let victims = Lcg::new(u64::from(n) * 31 + u64::from(w)).pick(&relays, kill);
            let half = o.rounds / 2;
            let mut killed = false;
            let hurt = rounds(&h, n, o.rounds, o.budget, |i| {
                if i == half && !killed {
                    killed = h.kill(victims.clone()).is_ok();
                }
            })?;
            let row = latency(
                Row::new("fanout")
                    .set("nodes", n)
                    .set("tree_width", w)
                    .set("tree_depth", depth)
                    .set("relays_killed", victims.len())
                    .set("rounds", o.rounds),
                &hurt.hist,
            )
            .set("missing_outcomes", hurt.missing)
            .set("duplicate_outcomes", hurt.duplicates)
            .set("failed_targets", hurt.failed);
            progress(&row.json());
            rows.push(row);
        }
    }
    Ok(rows)
}
