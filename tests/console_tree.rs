//! `canopy tree` on real daemons on loopback: a killed node shows up in a hostlist line with
//! its reason (and nowhere else is it counted healthy), `--down` keeps only the subtree that
//! holds it, `--node` walks the hops from the controller to it with each hop's view, the JSON
//! carries the same counts, and the view says what it left out.

mod common;

use std::path::Path;
use std::time::Duration;

use canopy::console::tree::TreeReport;
use common::Cluster;

fn tree(c: &Cluster, args: &[&str]) -> (String, i32) {
    let o = c.cli(Path::new("/"), "tree", args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (text, o.status.code().unwrap_or(-1))
}

fn tree_json(c: &Cluster, args: &[&str]) -> TreeReport {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = c.cli(Path::new("/"), "tree", &all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_killed_node_is_listed_by_reason_and_the_view_stays_bounded() {
    // Width 2 over 7 nodes: three levels (n3 is at depth 3, under n1 and n2).
    let mut c = Cluster::start(7, 2, 4);
    let (text, code) = tree(&c, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with("7 nodes, 3 levels, TreeWidth=2: idle 7"),
        "{text}"
    );
    assert!(text.contains("no unhealthy nodes"), "{text}");

    c.kill_node("n7");
    // First the tree loses it (link lost), then SlurmdTimeout sets it DOWN.
    c.wait_for(Duration::from_secs(30), "n7 down in canopy tree", |c| {
        tree(c, &[]).0.contains("n7 down: Not responding")
    });
    let (text, _) = tree(&c, &["--depth", "3"]);
    assert!(
        text.lines().count() <= canopy::console::tree::MAX_LINES,
        "{text}"
    );
    assert!(text.contains("idle 6, down* 1"), "{text}");
    assert!(text.contains("UNHEALTHY: 1 nodes in 1 groups"), "{text}");

    let r = tree_json(&c, &["--depth", "3"]);
    assert_eq!(r.nodes, 7);
    assert_eq!(r.unhealthy, 1);
    assert_eq!(r.failures.len(), 1);
    assert_eq!(r.failures[0].hostlist, "n7");
    assert!(r.failures[0].oldest.is_some());
    let level1: u64 = r
        .subtrees
        .iter()
        .filter(|s| s.level == 1)
        .map(|s| s.nodes)
        .sum();
    assert_eq!(level1, 7, "the level-1 subtrees cover every node once");

    // --down: only the subtrees on the way to n7.
    let r = tree_json(&c, &["--depth", "3", "--down"]);
    assert!(!r.subtrees.is_empty());
    assert!(r.subtrees.iter().all(|s| s.unhealthy == 1), "{r:?}");
    assert!(r.omitted.healthy_subtrees > 0);
    let (text, _) = tree(&c, &["--depth", "3", "--down"]);
    assert!(text.contains("healthy subtrees hidden"), "{text}");
}

#[test]
fn node_path_shows_each_hop_and_who_answered() {
    let mut c = Cluster::start(7, 2, 60);
    // Relays fold their children's reports upward every 100 ms: wait for n1 to hear of n3.
    c.wait_for(Duration::from_secs(10), "n1 reaches n3", |c| {
        tree_json(c, &["--node", "n3"]).path.is_some_and(|p| {
            p.hops
                .iter()
                .any(|h| h.hop == "n1" && h.says.starts_with("reaches"))
        })
    });
    let r = tree_json(&c, &["--node", "n3"]);
    let p = r.path.expect("a path");
    // The controller, two relays and the node itself, all answering.
    assert_eq!(p.depth, 3);
    assert_eq!(p.hops.len(), 4, "{p:?}");
    assert_eq!(p.hops[0].hop, "controller");
    assert!(p.hops[1].says == "reaches it through a child", "{p:?}");
    assert_eq!(p.hops[2].says, "link to it up");
    assert!(p.hops[3].says.starts_with("connected to"), "{p:?}");
    assert_eq!(p.disputed, None);
    assert_eq!(r.omitted.hops_unanswered, 0);

    // The node gone: its parent has no link, the node does not answer; the view says so.
    c.kill_node("n3");
    c.wait_for(Duration::from_secs(30), "n3 unreachable", |c| {
        tree_json(c, &[]).unhealthy == 1
    });
    let (text, code) = tree(&c, &["--node", "n3"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("NODE n3 (rank 2, depth 3)"), "{text}");
    assert!(text.contains("no link to it"), "{text}");
    assert!(text.contains("no answer"), "{text}");

    let (text, code) = tree(&c, &["--node", "nope"]);
    assert_ne!(code, 0);
    assert!(text.contains("--node nope: no such node"), "{text}");
    let (text, code) = tree(&c, &["--depth", "many"]);
    assert_eq!(code, 2);
    assert!(text.contains("--depth many"), "{text}");
}
