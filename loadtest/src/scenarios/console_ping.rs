//! `console-ping`: the console's probe and trace on the simulated cluster.
//! Pings one node at the deepest level (depth 4 with 10,000 nodes at
//! TreeWidth 10) repeatedly and checks that every hop is shown and that the
//! lines sum to the end-to-end time; pings the whole node set once
//! (percentiles, stragglers, non-responders); traces a real no-op broadcast
//! back through every relay's record.

use std::time::Instant;

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use crate::harness::{ClusterSpec, Harness};
use crate::report::{latency, Row};
use canopy::console::trace::FanoutPick;
use canopy::tree::topology::Topology;
use canopy::wire::messages::{Body, BroadcastRequest, FanoutTraceRequest, ProbeRequest};

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    pub rounds: u32,
}

fn name(rank: u32) -> String {
    // The harness names rank r `s{r+1:05}`.
    format!("s{:05}", rank + 1)
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!("console-ping: {n} nodes, TreeWidth {w}"));
            let spec = ClusterSpec {
                nodes: n,
                tree_width: w,
                slurmd_timeout: 300,
                cpus: 2,
                job_runtime: std::time::Duration::ZERO,
                start_nodes: true,
                dynamic: 0,
            };
            let h = Harness::start(spec, progress)?;
            let topo = Topology::new(n, w)?;
            let target = (0..n).rev().max_by_key(|&r| topo.depth(r)).unwrap_or(0);
            let depth = topo.depth(target);

            // One node, `rounds` times: hops shown, lines summing to the total.
            let mut e2e = Histogram::<u64>::new(3)?;
            let mut cli = Histogram::<u64>::new(3)?;
            let mut hops_shown = 0usize;
            let mut sums_match = true;
            let mut skew_max = 0u64;
            for _ in 0..o.rounds.max(1) {
                let t0 = Instant::now();
                let reply = h.call(Body::Probe(ProbeRequest {
                    nodes: name(target),
                    count: 1,
                    budget_ms: 10_000,
                    keep: 1,
                }))?;
                cli.record(t0.elapsed().as_micros() as u64)?;
                let Body::ProbeReply(rep) = reply else {
                    bail!("unexpected reply {}", reply.kind());
                };
                let Some(p) = rep.rounds.first().and_then(|r| r.slowest.first()) else {
                    bail!("{} did not answer the probe", name(target));
                };
                let b = &p.breakdown;
                hops_shown = b.lines.len().saturating_sub(1);
                let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
                sums_match &= sum == b.end_to_end_us + b.skew_us;
                skew_max = skew_max.max(b.skew_us);
                e2e.record(b.end_to_end_us.max(1))?;
            }
            let row = latency(
                Row::new("console-ping")
                    .set("nodes", n)
                    .set("tree_width", w)
                    .set("target", name(target))
                    .set("target_depth", depth)
                    .set("hops_shown", hops_shown as u64)
                    .set("lines_sum_to_total", sums_match)
                    .set("skew_max_us", skew_max)
                    .set("rounds", o.rounds.max(1)),
                &e2e,
            )
            .num("client_p50_ms", cli.value_at_quantile(0.5) as f64 / 1000.0);
            progress(&row.json());
            rows.push(row);

            // Every node at once.
            let all = format!("s[{:05}-{:05}]", 1, n);
            let t0 = Instant::now();
            let reply = h.call(Body::Probe(ProbeRequest {
                nodes: all,
                count: 1,
                budget_ms: 30_000,
                keep: 3,
            }))?;
            let client_ms = t0.elapsed().as_secs_f64() * 1000.0;
            let Body::ProbeReply(rep) = reply else {
                bail!("unexpected reply {}", reply.kind());
            };
            let Some(r) = rep.rounds.first() else {
                bail!("no probe round came back");
            };
            let stragglers = canopy::config::hostlist::expand(&r.stragglers)
                .map(|v| v.len())
                .unwrap_or(0);
            let row = Row::new("console-ping-set")
                .set("nodes", n)
                .set("tree_width", w)
                .set("answered", r.answered)
                .set("failed_groups", r.failed.len() as u64)
                .set("stragglers", stragglers as u64)
                .num("path_p50_ms", r.spread.p50_us as f64 / 1000.0)
                .num("path_p99_ms", r.spread.p99_us as f64 / 1000.0)
                .num("path_max_ms", r.spread.max_us as f64 / 1000.0)
                .num("controller_ms", r.elapsed_us as f64 / 1000.0)
                .num("client_ms", client_ms);
            progress(&row.json());
            rows.push(row);

            // A real broadcast, traced back through the relays' records.
            h.call(Body::Broadcast(BroadcastRequest {
                nodes: None,
                budget_ms: 10_000,
            }))?;
            let t0 = Instant::now();
            let reply = h.call(Body::TraceFanout(FanoutTraceRequest {
                pick: FanoutPick::Last("Noop".into()),
                budget_ms: 30_000,
                keep: 10,
            }))?;
            let client_ms = t0.elapsed().as_secs_f64() * 1000.0;
            let Body::FanoutTraceReply(rep) = reply else {
                bail!("unexpected reply {}", reply.kind());
            };
            let Some(f) = &rep.fold else {
                bail!("the broadcast was not found in the controller's ring");
            };
            let row = Row::new("console-trace-fanout")
                .set("nodes", n)
                .set("tree_width", w)
                .set("records_placed", f.node_done.count)
                .set("no_record", f.no_record.len() as u64)
                .set("unanswered", f.unanswered.len() as u64)
                .set("late", f.late.len() as u64 + rep.late_omitted)
                .set("critical_path_len", f.critical_path.len() as u64)
                .num("broadcast_ms", f.total_us as f64 / 1000.0)
                .num("node_done_p99_ms", f.node_done.p99_us as f64 / 1000.0)
                .num("trace_client_ms", client_ms);
            progress(&row.json());
            rows.push(row);
        }
    }
    Ok(rows)
}
