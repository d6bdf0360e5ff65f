//! `canopy ping` and `canopy trace fanout` against real daemons on loopback:
//! a probe to a node at depth 3 (TreeWidth 2) shows every hop, controller
//! first, in a table whose lines sum to the end-to-end time; a node set
//! names the nodes that did not answer; a real broadcast and a job launch
//! are traced back through the relays' records.

mod common;

use std::path::Path;
use std::time::Duration;

use canopy::tree::topology::Topology;
use canopy::wire::messages::{Body, BroadcastRequest, FanoutTraceReport, ProbeReport};
use canopy::wire::types::JobState;
use common::Cluster;

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The deepest node and the names on its way from the controller.
fn deepest(c: &Cluster) -> (String, Vec<String>) {
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let topo = Topology::new(c.nodes, conf.tree_width).unwrap();
    let rank = (0..c.nodes).max_by_key(|&r| (topo.depth(r), r)).unwrap();
    let mut hops = vec!["controller".to_string()];
    let mut chain = topo.ancestors(rank);
    chain.reverse();
    chain.retain(|&r| r != rank);
    for r in chain {
        hops.push(conf.nodes[r as usize].name.clone());
    }
    let name = conf.nodes[rank as usize].name.clone();
    hops.push(name.clone());
    (name, hops)
}

#[test]
fn a_ping_shows_every_hop_and_a_set_names_who_did_not_answer() {
    let mut c = Cluster::start(7, 2, 30);
    let cwd = c.dir.path().to_path_buf();
    let (target, hops) = deepest(&c);
    assert!(
        hops.len() >= 4,
        "depth 3 expected with 7 nodes at TreeWidth 2: {hops:?}"
    );

    // JSON: the path is the tree's, every hop stamped, and the lines add up.
    let o = c.cli(&cwd, "ping", &[&target, "--json"]);
    assert!(o.status.success(), "{}", out(&o));
    let rep: ProbeReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rep.rounds.len(), 1);
    let r = &rep.rounds[0];
    assert_eq!((r.targets, r.answered), (1, 1), "{r:?}");
    let p = &r.slowest[0];
    assert_eq!(p.target, target);
    assert_eq!(p.hops, hops);
    let b = &p.breakdown;
    assert_eq!(b.lines.len(), hops.len());
    let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
    assert_eq!(sum, b.end_to_end_us + b.skew_us);
    assert!(b.end_to_end_us > 0);
    // Every hop but the target has a wire leg below it (loopback is fast, not free).
    for l in &b.lines[..b.lines.len() - 1] {
        assert!(l.wire_down_us + l.wire_up_us > 0 || b.skew_us > 0, "{l:?}");
    }
    // The controller's own measure covers the probe's whole trip.
    assert!(r.elapsed_us >= b.end_to_end_us, "{r:?}");

    // Text: a header naming the path, then one line per hop.
    let o = c.cli(&cwd, "ping", &[&target, "--count", "2"]);
    assert!(o.status.success(), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let header = format!(
        "PING {target} (depth {}) via {}",
        hops.len() - 1,
        hops.join(" > ")
    );
    assert_eq!(text.matches(&header).count(), 2, "{text}");
    assert!(
        text.contains(&format!("--- {target}: 2 probes, 2 answered")),
        "{text}"
    );
    for h in &hops {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(h.as_str())),
            "{h} in {text}"
        );
    }

    // A node set with one node down: the others answer, the dead one is named.
    let all = "n[1-7]";
    let o = c.cli(&cwd, "ping", &[all, "--json"]);
    assert!(o.status.success(), "{}", out(&o));
    let rep: ProbeReport = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rep.rounds[0].answered, 7);
    assert!(rep.rounds[0].failed.is_empty());
    c.kill_node(&target);
    let o = c.cli(&cwd, "ping", &[all, "--json", "--timeout", "3"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a missing node fails the ping: {}",
        out(&o)
    );
    let rep: ProbeReport = serde_json::from_slice(&o.stdout).unwrap();
    let r = &rep.rounds[0];
    assert_eq!((r.targets, r.answered), (7, 6), "{r:?}");
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert_eq!(r.failed[0].0, target);

    // Bad input gets a clear error naming it.
    let o = c.cli(&cwd, "ping", &["nosuch1"]);
    assert!(!o.status.success());
    assert!(out(&o).contains("nosuch1"), "{}", out(&o));
    let o = c.cli(&cwd, "ping", &["n1", "--count", "50"]);
    assert!(!o.status.success());
    assert!(out(&o).contains("--count must be 1 to 10"), "{}", out(&o));
    common::keep_logs(&c);
}

#[test]
fn a_real_broadcast_and_a_launch_are_traced_through_the_relays() {
    let c = Cluster::start(7, 2, 30);
    let cwd = c.dir.path().to_path_buf();
    // Nothing sent yet: the trace says so and lists nothing.
    let o = c.cli(&cwd, "trace", &["fanout", "--last", "Launch"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("no recent broadcast matches (Launch)"),
        "{}",
        out(&o)
    );

    let reply = c.call(Body::Broadcast(BroadcastRequest {
        nodes: None,
        budget_ms: 5000,
    }));
    assert!(
        matches!(reply, Body::BroadcastReply(ref r) if r.ok == 7),
        "{reply:?}"
    );
    let o = c.cli(&cwd, "trace", &["fanout", "--last", "noop", "--json"]);
    assert!(o.status.success(), "{}", out(&o));
    let rep: FanoutTraceReport = serde_json::from_slice(&o.stdout).unwrap();
    let f = rep.fold.as_ref().expect("the no-op is found");
    assert_eq!(f.kind, "Noop");
    assert_eq!(f.targets, 7);
    // Every node's record was found and placed on the controller's clock.
    assert_eq!(f.node_done.count, 7, "{f:?}");
    assert!(f.unanswered.is_empty() && f.no_record.is_empty(), "{f:?}");
    assert!(rep.unreachable.is_empty(), "{rep:?}");
    // The controller has two children at TreeWidth 2; the slowest chain
    // starts at one of them and goes down to a leaf.
    assert_eq!(f.subtrees.len(), 2, "{f:?}");
    assert_eq!(f.critical_path[0].0, f.subtrees[0].child);
    assert!(f.critical_path.len() >= 2, "{f:?}");

    // A job's launch, found by its id.
    let script = common::write_script(Path::new(&cwd), "j.sh", "#!/bin/sh\nsleep 30\n");
    let id = c.sbatch(&cwd, &["-N", "3", script.to_str().unwrap()]);
    c.wait_for(Duration::from_secs(30), "job running", |c| {
        c.job(id).is_some_and(|j| j.state == JobState::Running)
    });
    // The controller calls the job running as it sends the launch; the
    // record is kept once every node has answered it.
    let job = id.to_string();
    c.wait_for(Duration::from_secs(20), "the launch's record", |c| {
        c.cli(&cwd, "trace", &["fanout", "--job", &job])
            .status
            .success()
    });
    let o = c.cli(&cwd, "trace", &["fanout", "--job", &job]);
    assert!(o.status.success(), "{}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.starts_with(&format!("FANOUT Launch job {id}: 3 targets")),
        "{text}"
    );
    assert!(text.contains("slowest chain: controller > "), "{text}");
    common::keep_logs(&c);
}
