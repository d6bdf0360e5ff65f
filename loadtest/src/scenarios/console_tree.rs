//! `console-tree`: `canopy tree` at scale. N simulated nodes with about 1% unhealthy in three
//! reasons (leaves killed, so their links are lost; nodes drained "bad fan"; nodes set DOWN
//! "memory errors"), chosen with a printed seed so a run replays. Then the tree view is asked
//! for repeatedly (default depth, `--depth 2`, `--down`): its latency as the client sees it,
//! and the lines of its text view. Goal: at 100,000 nodes, p99 ≤ 1 s and ≤ 25 lines, with the
//! three reasons as three failure groups covering every unhealthy node.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use super::{relays_and_leaves, Lcg};
use crate::harness::{ClusterSpec, Harness};
use crate::report::{latency, Row};
use canopy::console::tree::{render, TreeQuery, TreeReport, MAX_LINES};
use canopy::wire::messages::{Body, NodeUpdate, NodeUpdateState};

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    pub rounds: u32,
    pub seed: u64,
}

fn ask(h: &Harness, q: &TreeQuery) -> Result<TreeReport> {
    match h.call(Body::QueryTree(q.clone()))? {
        Body::Tree(t) => Ok(*t),
        other => bail!("unexpected reply {}", other.kind()),
    }
}

fn name(rank: u32) -> String {
    // The harness names rank r `s{r+1:05}`.
    format!("s{:05}", rank + 1)
}

fn update(h: &Harness, ranks: &[u32], state: NodeUpdateState, reason: &str) -> Result<()> {
    if ranks.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = ranks.iter().map(|&r| name(r)).collect();
    let nodes = canopy::config::hostlist::compress_sorted(&names);
    match h.call(Body::UpdateNodes(NodeUpdate {
        nodes,
        state: Some(state),
        reason: Some(reason.into()),
    }))? {
        Body::Ok => Ok(()),
        other => bail!("node update refused: {}", other.kind()),
    }
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            progress(&format!(
                "console-tree: {n} nodes, TreeWidth {w}, seed {}",
                o.seed
            ));
            let spec = ClusterSpec {
                nodes: n,
                tree_width: w,
                // Long enough that killed leaves stay "link lost" (not DOWN) while measured.
                slurmd_timeout: 600,
                cpus: 2,
                job_runtime: Duration::ZERO,
                start_nodes: true,
                dynamic: 0,
            };
            let h = Harness::start(spec, progress)?;
            let depth = canopy::tree::topology::Topology::new(n, w)?.max_depth();
            // 1% in three reasons, disjoint, leaves only (a killed relay would take its
            // subtree's links with it, which is another scenario's business).
            let (_, leaves) = relays_and_leaves(n, w);
            let per = ((n / 100) / 3).max(1) as usize;
            let mut rng = Lcg::new(o.seed);
            let picked = rng.pick(&leaves, per * 3);
            let (lost, rest) = picked.split_at(per.min(picked.len()));
            let (drained, downed) = rest.split_at(per.min(rest.len()));
            h.kill(lost.to_vec())?;
            update(&h, drained, NodeUpdateState::Drain, "bad fan")?;
            update(&h, downed, NodeUpdateState::Down, "memory errors")?;
            let want = picked.len() as u64;
            let base = TreeQuery {
                depth: 1,
                ..Default::default()
            };
            h.wait(
                Duration::from_secs(120),
                "every unhealthy node in the tree view",
                |h| ask(h, &base).is_ok_and(|t| t.unhealthy >= want),
            )?;

            for (label, q) in [
                ("default", base.clone()),
                (
                    "depth2",
                    TreeQuery {
                        depth: 2,
                        ..Default::default()
                    },
                ),
                (
                    "down",
                    TreeQuery {
                        depth: 3,
                        down: true,
                        node: None,
                    },
                ),
            ] {
                let mut hist = Histogram::<u64>::new(3)?;
                let mut lines = 0usize;
                let mut last = TreeReport::default();
                for _ in 0..o.rounds.max(1) {
                    let t0 = Instant::now();
                    let t = ask(&h, &q)?;
                    // What the operator waits for: the answer and its rendering.
                    let text = render(&t);
                    hist.record(t0.elapsed().as_micros() as u64)?;
                    lines = lines.max(text.lines().count());
                    last = t;
                }
                let groups = last.failures.len() as u64 + last.omitted.failure_groups;
                let p99_ms = hist.value_at_quantile(0.99) as f64 / 1000.0;
                let row = latency(
                    Row::new("console-tree")
                        .set("nodes", n)
                        .set("tree_width", w)
                        .set("tree_depth", depth)
                        .set("view", label)
                        .set("seed", o.seed)
                        .set("rounds", o.rounds),
                    &hist,
                )
                .set("unhealthy", last.unhealthy)
                .set("unhealthy_expected", want)
                .set("failure_groups", groups)
                .set("lines", lines as u64)
                .set("subtrees_shown", last.subtrees.len() as u64)
                .set(
                    "subtrees_omitted",
                    last.omitted.subtrees + last.omitted.healthy_subtrees,
                )
                .set("goal_lines_ok", lines <= MAX_LINES)
                .set("goal_latency_ok", p99_ms <= 1000.0);
                progress(&row.json());
                rows.push(row);
            }
        }
    }
    Ok(rows)
}
