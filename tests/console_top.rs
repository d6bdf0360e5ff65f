//! `canopy top` against real daemons on loopback: the actors of the
//! controller and of every node daemon, folded up the relay tree; a stuck
//! actor reported as stuck (read from its published counters while it is
//! blocked); scopes; daemons that do not answer named.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Cluster;
use serde_json::Value;

/// Four nodes under TreeWidth=2: n1 relays for n2, n3 for n4. n4 runs the
/// test hook's stuck actor, blocked for `stall_ms`.
fn cluster_with_stall(stall_ms: u64) -> Cluster {
    let mut c = Cluster::configure(4, 2, 30, "", &[]);
    c.start_authd();
    c.start_ctld();
    let stall = format!("n4:{stall_ms}");
    for i in 1..=4 {
        let name = format!("n{i}");
        if i == 4 {
            c.start_node_env(&name, &[("CANOPY_TEST_STALL", &stall)]);
        } else {
            c.start_node(&name);
        }
    }
    c.wait_for(Duration::from_secs(60), "all nodes IDLE", |c| {
        c.nodes_info()
            .iter()
            .filter(|n| n.scontrol_state() == "IDLE")
            .count()
            == 4
    });
    c.wait_for(
        Duration::from_secs(30),
        "every node on its natural parent",
        |c| {
            c.nodes_info()
                .iter()
                .all(|n| n.attached_to == c.natural_parent(&n.name))
        },
    );
    c
}

fn top_json(c: &Cluster, dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--once", "--json"];
    all.extend_from_slice(args);
    let out = c.cli(dir, "top", &all);
    assert!(
        out.status.success(),
        "canopy top {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (daemon, kind, name, stuck) of every listed actor.
fn actors(v: &Value) -> Vec<(String, String, String, bool)> {
    v["summary"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["daemon"].as_str().unwrap().to_string(),
                a["kind"].as_str().unwrap().to_string(),
                a["name"].as_str().unwrap().to_string(),
                a["stuck"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn has(list: &[(String, String, String, bool)], daemon: &str, kind: &str) -> bool {
    list.iter().any(|(d, k, _, _)| d == daemon && k == kind)
}

#[test]
fn top_shows_every_daemons_actors_a_stuck_one_and_what_it_left_out() {
    let mut c = cluster_with_stall(20_000);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();

    // The stuck actor blocks its handler from start-up; wait until its age
    // passes the threshold (no timing is asserted, only the state).
    let t0 = Instant::now();
    let v = loop {
        let v = top_json(&c, w, &["-k", "200", "--stuck", "300"]);
        if v["summary"]["totals"]["stuck"].as_u64() == Some(1) {
            break v;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never stuck: {v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(v["scope"], "cluster");
    assert_eq!(v["asked"], 5, "four node daemons and the controller");
    assert_eq!(v["summary"]["totals"]["daemons"], 5, "{v}");
    assert_eq!(v["missing"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["left_out"], 0, "-k 200 lists every actor");
    let list = actors(&v);
    assert!(has(&list, "controller", "controller"), "{list:?}");
    assert!(has(&list, "controller", "relay"), "{list:?}");
    assert!(has(&list, "controller", "partition"), "{list:?}");
    for n in ["n1", "n2", "n3", "n4"] {
        assert!(has(&list, n, "agent"), "{n}'s agent missing: {list:?}");
        assert!(has(&list, n, "relay"), "{n}'s relay missing: {list:?}");
    }
    // Published state, read without asking the actor.
    let state = |daemon: &str, kind: &str| {
        v["summary"]["top"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["daemon"] == daemon && a["kind"] == kind)
            .map(|a| a["state"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(
        state("controller", "relay").starts_with("attached=2 "),
        "{v}"
    );
    assert!(state("n1", "relay").starts_with("attached=1 "), "{v}");
    assert!(
        state("n4", "relay").is_empty(),
        "a leaf's relay had no link change: {v}"
    );
    let stuck: Vec<_> = list.iter().filter(|a| a.3).collect();
    assert_eq!(stuck.len(), 1, "{list:?}");
    assert_eq!((stuck[0].0.as_str(), stuck[0].1.as_str()), ("n4", "stall"));
    let s = &v["summary"]["stuck"][0];
    assert_eq!(s["daemon"], "n4");
    assert_eq!(s["depth"], 1, "the second message waits behind the first");
    assert!(s["busy_ms"].as_u64().unwrap() >= 300, "{s}");
    // Per-branch totals: the controller's children and the controller itself.
    let heads: Vec<&str> = v["summary"]["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["head"].as_str().unwrap())
        .collect();
    assert_eq!(heads, ["controller", "n1", "n3"], "{v}");

    // A short list says how many it left out, and still shows the stuck one.
    let v = top_json(&c, w, &["-k", "2", "--stuck", "300", "--sort", "rate"]);
    assert_eq!(v["summary"]["top"].as_array().unwrap().len(), 2);
    let total = v["summary"]["totals"]["actors"].as_u64().unwrap();
    assert_eq!(v["left_out"].as_u64().unwrap(), total - 2);
    assert_eq!(v["summary"]["stuck"][0]["kind"], "stall");
    // What top found stuck is in the event log too.
    let o = c.cli(w, "events", &["--type", "actor"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("n4 stall"), "{text}");

    // Scopes: a relay's subtree, one node, the controller alone.
    let v = top_json(&c, w, &["-k", "200", "--subtree", "n1"]);
    assert_eq!(v["scope"], "subtree n1");
    assert_eq!(v["summary"]["totals"]["daemons"], 2);
    let list = actors(&v);
    assert!(
        list.iter().all(|(d, ..)| d == "n1" || d == "n2"),
        "{list:?}"
    );
    let v = top_json(&c, w, &["-k", "200", "--node", "n2"]);
    assert_eq!(v["summary"]["totals"]["daemons"], 1);
    assert!(actors(&v).iter().all(|(d, ..)| d == "n2"), "{v}");
    let v = top_json(&c, w, &["--node", "controller"]);
    assert!(actors(&v).iter().all(|(d, ..)| d == "controller"), "{v}");

    // The plain table, and clear errors.
    let out = c.cli(w, "top", &["--once", "--stuck", "300"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("5 of 5 daemons answered"), "{text}");
    assert!(text.contains("STUCK"), "{text}");
    let out = c.cli(w, "top", &["--once", "--node", "nosuch"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
    let out = c.cli(w, "top", &["--once", "--sort", "cpu"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'cpu'"));

    // A daemon that is gone is named, not silently dropped.
    c.kill_node("n2");
    let t0 = Instant::now();
    let v = loop {
        let v = top_json(&c, w, &[]);
        if !v["missing"].as_array().unwrap().is_empty() {
            break v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "n2 never missing: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(v["missing"][0][0], "n2", "{v}");
    assert_eq!(v["summary"]["totals"]["daemons"], 4);
    let out = c.cli(w, "top", &["--once"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("did not answer: n2"), "{text}");
}
