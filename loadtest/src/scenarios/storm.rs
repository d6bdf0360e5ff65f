//! `storm`: every node starts at once (time until all are IDLE); then 100
//! leaves and one relay die together: time until the leaves are DOWN, time
//! until the dead relay's subtree is re-attached, and how many nodes were
//! wrongly marked DOWN (goal: zero).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::{relays_and_leaves, Lcg};
use crate::harness::{ClusterSpec, Harness};
use crate::report::Row;
use canopy::tree::topology::Topology;
use canopy::wire::messages::{Body, NodeQuery};

pub struct Opts {
    pub nodes: Vec<u32>,
    pub widths: Vec<u32>,
    pub leaves: u32,
    pub slurmd_timeout: u32,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in &o.nodes {
        for &w in &o.widths {
            rows.push(one(o, n, w, progress)?);
        }
    }
    Ok(rows)
}

fn one(o: &Opts, n: u32, w: u32, progress: &mut dyn FnMut(&str)) -> Result<Row> {
    progress(&format!("storm: {n} nodes, TreeWidth {w}"));
    let spec = ClusterSpec {
        nodes: n,
        tree_width: w,
        slurmd_timeout: o.slurmd_timeout,
        cpus: 2,
        job_runtime: Duration::ZERO,
        start_nodes: false,
        dynamic: 0,
    };
    let mut h = Harness::start(spec, progress)?;
    let idle = h.start_nodes(progress)?;
    let topo = Topology::new(n, w)?;
    let (relays, leaves) = relays_and_leaves(n, w);
    let Some(&relay) = relays
        .iter()
        .filter(|&&r| topo.parent(r).is_some())
        .max_by_key(|&&r| topo.subtree(r).len())
        .or(relays.first())
    else {
        bail!("{n} nodes at TreeWidth {w} have no relay to kill");
    };
    let subtree = topo.subtree(relay);
    // Leaves to kill: outside the relay's subtree, so the two effects stay apart.
    let outside: Vec<u32> = leaves
        .into_iter()
        .filter(|r| !subtree.contains(r))
        .collect();
    let dead_leaves = Lcg::new(u64::from(n) + 7).pick(&outside, o.leaves as usize);
    let orphans: Vec<String> = subtree
        .clone()
        .filter(|&r| r != relay)
        .filter_map(|r| h.conf.nodes.get(r as usize).map(|c| c.name.clone()))
        .collect();
    let relay_name = h.conf.nodes[relay as usize].name.clone();
    let expected_down = dead_leaves.len() as u32 + 1;
    let mut victims = dead_leaves.clone();
    victims.push(relay);
    let t_kill = Instant::now();
    h.kill(victims)?;
    let hb = h.heartbeat();
    // Re-attached: every orphan responding again, hanging under someone else.
    let reattach = h.wait(
        Duration::from_secs(60),
        "orphans re-attached",
        |h| match h.call(Body::QueryNodes(NodeQuery {
            names: orphans.clone(),
        })) {
            Ok(Body::Nodes(ns)) => {
                ns.len() == orphans.len()
                    && ns.iter().all(|x| {
                        !x.not_responding && x.attached_to.as_deref() != Some(relay_name.as_str())
                    })
            }
            _ => false,
        },
    )?;
    let limit = Duration::from_secs(u64::from(o.slurmd_timeout) * 3 + 30);
    h.wait(limit, "dead nodes DOWN", |h| {
        h.try_stats().is_ok_and(|s| s.nodes.down >= expected_down)
    })?;
    let down = t_kill.elapsed();
    // Give any wrong verdict time to appear before counting.
    std::thread::sleep(hb * 2);
    let s = h.try_stats()?;
    let row = Row::new("storm")
        .set("nodes", n)
        .set("tree_width", w)
        .num("all_idle_s", idle.as_secs_f64())
        .set("killed_leaves", dead_leaves.len())
        .set("killed_relay_subtree", orphans.len())
        .num("heartbeat_interval_s", hb.as_secs_f64())
        .num("reattach_s", reattach.as_secs_f64())
        .num(
            "reattach_intervals",
            reattach.as_secs_f64() / hb.as_secs_f64(),
        )
        .num("dead_down_s", down.as_secs_f64())
        .set("slurmd_timeout_s", o.slurmd_timeout)
        .set("false_down", s.nodes.down.saturating_sub(expected_down))
        .set("still_not_responding", s.nodes.not_responding);
    progress(&row.json());
    Ok(row)
}
