//! Dynamic nodes with real daemons on loopback, as Slurm 22.05's `slurmd -Z`: a controller whose
//! slurm.conf lists no node (and one that lists some) takes `canopy-noded -Z` daemons, which
//! become IDLE+DYNAMIC_NORM, sit in the relay tree where its arithmetic puts them, and run a
//! job; `scontrol delete nodename=` is refused while a job is on the node and then removes it;
//! after the controller restarts, the rest are there at the same ranks.

mod common;

use std::net::TcpListener;
use std::time::Duration;

use canopy::exec::record::{read_records, records_dir};
use canopy::tree::topology::Topology;
use canopy::wire::types::NodeInfo;
use common::Cluster;

const LONG: Duration = Duration::from_secs(60);

/// Free loopback ports for the dynamic nodes' listeners.
fn ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn start_dynamic(c: &mut Cluster, name: &str, port: u16, features: &str) {
    let conf = format!("CPUs=2 RealMemory=1000 Port={port}{features}");
    c.start_node_args(name, &["-Z", "--conf", &conf]);
}

fn by_name(c: &Cluster, name: &str) -> Option<NodeInfo> {
    c.nodes_info().into_iter().find(|n| n.name == name)
}

fn idle_dynamic(c: &Cluster, names: &[&str]) -> bool {
    names
        .iter()
        .all(|n| by_name(c, n).is_some_and(|i| i.scontrol_state() == "IDLE+DYNAMIC_NORM"))
}

/// Where the tree's arithmetic puts node `name` (its parent's name; `None`: the controller).
fn natural_parent(c: &Cluster, name: &str) -> Option<String> {
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    let (fixed, capacity) = conf.tree_ranks();
    let topo = Topology::with_dynamic(fixed, capacity, conf.tree_width).unwrap();
    let nodes = c.nodes_info();
    let rank = nodes.iter().find(|n| n.name == name)?.rank;
    let parent = topo.parent(rank)?;
    nodes
        .iter()
        .find(|n| n.rank == parent)
        .map(|n| n.name.clone())
}

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_file_without_nodes_takes_dynamic_nodes_runs_a_job_deletes_one_and_keeps_the_rest() {
    // Width 2: d1 heads the first block, d2 hangs under d1, d3 under d2.
    let mut c = Cluster::configure(0, 2, 30, "MaxNodeCount=8\n", &[]);
    c.start_authd();
    c.start_ctld();
    let p = ports(3);
    for (i, name) in ["d1", "d2", "d3"].iter().enumerate() {
        start_dynamic(&mut c, name, p[i], "");
        // One after another, so that the ranks (join order) are known.
        c.wait_for(LONG, "the node created", |c| by_name(c, name).is_some());
    }
    let names = ["d1", "d2", "d3"];
    c.wait_for(LONG, "d[1-3] IDLE+DYNAMIC_NORM", |c| {
        idle_dynamic(c, &names)
    });
    c.wait_for(LONG, "every dynamic node on its natural parent", |c| {
        names
            .iter()
            .all(|n| by_name(c, n).and_then(|i| i.attached_to) == natural_parent(c, n))
    });
    assert_eq!(natural_parent(&c, "d2").as_deref(), Some("d1"));
    assert_eq!(natural_parent(&c, "d3").as_deref(), Some("d2"));
    let d2 = by_name(&c, "d2").unwrap();
    assert_eq!((d2.addr.as_str(), d2.port, d2.cpus), ("127.0.0.1", p[1], 2));
    assert_eq!(d2.partitions, ["debug"]);

    // sinfo and scontrol show them as any other node.
    let cwd = c.dir.path().to_path_buf();
    let (sinfo, _) = out(&c.cli(&cwd, "sinfo", &["-h", "-o", "%P %D %t %N"]));
    assert_eq!(sinfo.trim(), "debug* 3 idle d[1-3]");
    let (show, _) = out(&c.cli(&cwd, "scontrol", &["show", "node", "d3"]));
    assert!(show.contains("State=IDLE+DYNAMIC_NORM"), "{show}");

    // A job across all three: the launch goes down the dynamic relays.
    let job = c.sbatch(&cwd, &["-N3", "--wrap", "srun hostname"]);
    let done = c.wait_done(job, LONG);
    assert_eq!(done.state.name(), "COMPLETED", "{done:?}");
    assert_eq!(done.nodes, "d[1-3]");

    // Busy: refused, in Slurm's words, and nothing changes.
    let busy = c.sbatch(&cwd, &["-w", "d2", "--wrap", "sleep 300"]);
    c.wait_for(LONG, "job on d2 running", |c| {
        c.job(busy).is_some_and(|j| j.state.name() == "RUNNING")
    });
    let o = c.cli(&cwd, "scontrol", &["delete", "nodename=d2"]);
    let (_, err) = out(&o);
    assert!(!o.status.success());
    // Slurm 22.05's two lines, word for word.
    assert!(
        err.contains("scontrol: error: failed to delete nodes d2\n")
            && err.contains("delete_node nodename=d2: Requested nodes are busy"),
        "{err}"
    );
    assert!(by_name(&c, "d2").is_some());
    let o = c.cli(&cwd, "scancel", &[&busy.to_string()]);
    assert!(o.status.success());
    c.wait_done(busy, LONG);

    // A name nobody has.
    let o = c.cli(&cwd, "scontrol", &["delete", "nodename=zz"]);
    assert!(
        out(&o).1.contains("Invalid node name specified"),
        "{:?}",
        out(&o)
    );

    // d3 goes: its daemon is stopped, then the node deleted.
    c.terminate_node("d3", Duration::from_secs(10));
    c.wait_for(LONG, "d2's job gone from it", |c| {
        by_name(c, "d2").is_some_and(|n| n.alloc_cpus == 0)
    });
    let o = c.cli(&cwd, "scontrol", &["delete", "nodename=d3"]);
    assert!(o.status.success(), "{:?}", out(&o));
    assert!(by_name(&c, "d3").is_none());

    // A restart: d1 and d2 come back at their ranks, d3 stays gone.
    let ranks: Vec<(String, u32)> = c
        .nodes_info()
        .into_iter()
        .map(|n| (n.name, n.rank))
        .collect();
    c.kill_ctld();
    c.start_ctld();
    c.wait_for(LONG, "d1 and d2 IDLE again", |c| {
        idle_dynamic(c, &["d1", "d2"])
    });
    let after: Vec<(String, u32)> = c
        .nodes_info()
        .into_iter()
        .map(|n| (n.name, n.rank))
        .collect();
    assert_eq!(after, ranks);
    let (sinfo, _) = out(&c.cli(&cwd, "sinfo", &["-h", "-o", "%P %D %t %N"]));
    assert_eq!(sinfo.trim(), "debug* 2 idle d[1-2]");
    let job = c.sbatch(&cwd, &["-N2", "--wrap", "true"]);
    assert_eq!(c.wait_done(job, LONG).state.name(), "COMPLETED");
}

#[test]
fn listed_and_dynamic_nodes_share_partitions_and_max_node_count_bounds_them() {
    let extra = "MaxNodeCount=3\nNodeSet=big Feature=big\nPartitionName=bigs Nodes=big\n";
    let mut c = Cluster::start_with(2, 2, 30, extra);
    let cwd = c.dir.path().to_path_buf();
    let p = ports(2);
    start_dynamic(&mut c, "d1", p[0], " Feature=big");
    c.wait_for(LONG, "d1 IDLE+DYNAMIC_NORM", |c| idle_dynamic(c, &["d1"]));
    let d1 = by_name(&c, "d1").unwrap();
    assert_eq!(d1.rank, 2);
    // File order: `extra` comes before the harness's partitions.
    assert_eq!(d1.partitions, ["bigs", "debug"]);
    let job = c.sbatch(&cwd, &["-N3", "--wrap", "srun true"]);
    let done = c.wait_done(job, LONG);
    assert_eq!(
        (done.state.name(), done.nodes.as_str()),
        ("COMPLETED", "n[1-2],d1")
    );

    // MaxNodeCount=3: a fourth node is refused and its daemon says why.
    let mut refused = c.cli(
        &cwd,
        "scontrol",
        &["create", "NodeName=f1", "CPUs=2", "State=FUTURE"],
    );
    let (_, err) = out(&refused);
    assert!(!refused.status.success());
    assert!(
        err.contains("Attempting to create node record past MaxNodeCount:3"),
        "{err}"
    );
    start_dynamic(&mut c, "d2", p[1], "");
    c.wait_for(LONG, "d2's daemon to give up", |c| {
        c.log_text("d2").contains("past MaxNodeCount:3")
    });
    // After a delete there is room again; scontrol creates FUTURE nodes only.
    c.terminate_node("d1", Duration::from_secs(10));
    refused = c.cli(&cwd, "scontrol", &["delete", "NodeName=d1"]);
    assert!(refused.status.success(), "{:?}", out(&refused));
    let o = c.cli(&cwd, "scontrol", &["create", "NodeName=f1", "CPUs=2"]);
    assert!(
        out(&o)
            .1
            .contains("Error creating the node(s): Invalid node state specified"),
        "{:?}",
        out(&o)
    );
    let o = c.cli(
        &cwd,
        "scontrol",
        &["create", "NodeName=f1", "CPUs=2", "State=FUTURE"],
    );
    assert!(o.status.success(), "{:?}", out(&o));
    let f1 = by_name(&c, "f1").unwrap();
    assert_eq!(
        (f1.rank, f1.scontrol_state().as_str()),
        (2, "FUTURE+DYNAMIC_NORM")
    );
}

/// Send `sig` (`STOP`, `CONT`) to node daemon `name`.
fn signal_node(c: &Cluster, name: &str, sig: &str) {
    let pid = c.noded[name].id().to_string();
    let s = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid])
        .status()
        .unwrap();
    assert!(s.success());
}

/// A dynamic node deleted while its daemon still runs: the daemon is told to stop, so its link
/// does not hold the rank that the next node created is given. A daemon that missed that
/// (frozen during the delete) is told again when it comes back and registers, and the new
/// node at its old rank recovers.
#[test]
fn a_deleted_nodes_daemon_stops_and_its_rank_serves_the_next_node() {
    let mut c = Cluster::configure(0, 4, 30, "MaxNodeCount=4\n", &[]);
    c.start_authd();
    c.start_ctld();
    let cwd = c.dir.path().to_path_buf();
    let p = ports(4);
    for (i, name) in ["d1", "d2"].iter().enumerate() {
        start_dynamic(&mut c, name, p[i], "");
        c.wait_for(LONG, "the node created", |c| by_name(c, name).is_some());
    }
    c.wait_for(LONG, "d[1-2] idle", |c| idle_dynamic(c, &["d1", "d2"]));
    let rank = by_name(&c, "d2").unwrap().rank;

    // Deleted while its daemon runs: the daemon stops by itself.
    let o = c.cli(&cwd, "scontrol", &["delete", "nodename=d2"]);
    assert!(o.status.success(), "{:?}", out(&o));
    let mut d2 = c.noded.remove("d2").unwrap();
    let status = common::wait_exit(&mut d2, LONG);
    assert!(status.is_some(), "d2's daemon still runs after the delete");
    assert!(
        c.log_text("d2").contains("deleted from the cluster"),
        "{}",
        c.log_text("d2")
    );
    // Its rank goes to the next node, which comes up.
    start_dynamic(&mut c, "d3", p[2], "");
    c.wait_for(LONG, "d3 idle", |c| idle_dynamic(c, &["d3"]));
    assert_eq!(by_name(&c, "d3").unwrap().rank, rank);

    // d1 frozen while it is deleted: its rank goes to d4, whose link replaces d1's. Thawed,
    // d1 reads the word still waiting on its link and stops, and d4 stays. (A daemon that was
    // down at the delete is told when it registers: the core's tests.)
    let r1 = by_name(&c, "d1").unwrap().rank;
    signal_node(&c, "d1", "STOP");
    let o = c.cli(&cwd, "scontrol", &["delete", "nodename=d1"]);
    assert!(o.status.success(), "{:?}", out(&o));
    start_dynamic(&mut c, "d4", p[3], "");
    c.wait_for(LONG, "d4 idle", |c| idle_dynamic(c, &["d4"]));
    assert_eq!(by_name(&c, "d4").unwrap().rank, r1);
    signal_node(&c, "d1", "CONT");
    let mut d1 = c.noded.remove("d1").unwrap();
    assert!(
        common::wait_exit(&mut d1, LONG).is_some(),
        "d1's daemon still runs after it came back"
    );
    c.wait_for(LONG, "d4 idle again", |c| idle_dynamic(c, &["d4"]));
    let job = c.sbatch(&cwd, &["-N2", "--wrap", "srun true"]);
    let done = c.wait_done(job, LONG);
    // In rank order, as slurmctld lists a job's nodes in its node table's order.
    assert_eq!(
        (done.state.name(), done.nodes.as_str()),
        ("COMPLETED", "d[4,3]")
    );
}

/// slurm.conf gains a node line before the others while everything is down: the stored ranks
/// follow the nodes by name. A job running on n2 and one on dynamic node d1 stay RUNNING on
/// them (each node is one rank further on now) and are cancelled normally; a MaxNodeCount
/// below the nodes that exist is refused at start with the remedy, and nothing is lost.
#[test]
fn a_node_line_added_before_the_others_moves_stored_ranks_by_name() {
    let mut c = Cluster::start_with(2, 4, 30, "MaxNodeCount=4\n");
    let cwd = c.dir.path().to_path_buf();
    let p = ports(2);
    start_dynamic(&mut c, "d1", p[0], "");
    c.wait_for(LONG, "d1 idle", |c| idle_dynamic(c, &["d1"]));
    let on_n2 = c.sbatch(&cwd, &["-w", "n2", "--wrap", "sleep 300"]);
    let on_d1 = c.sbatch(&cwd, &["-w", "d1", "--wrap", "sleep 300"]);
    c.wait_for(LONG, "both jobs running", |c| {
        [on_n2, on_d1]
            .iter()
            .all(|&j| c.job(j).is_some_and(|j| j.state.name() == "RUNNING"))
    });
    assert_eq!(by_name(&c, "d1").unwrap().rank, 2);
    // Killed daemons find their jobs again from their spool records: wait for them.
    for (job, node) in [(on_n2, "n2"), (on_d1, "d1")] {
        let dir = records_dir(&c.dir.path().join(format!("spool/{node}")));
        c.wait_for(LONG, "the job's spool record", |_| {
            read_records(&dir).is_ok_and(|r| r.iter().any(|r| r.job_id == job))
        });
    }

    // Everything down; n0 goes in front of n1 and n2.
    c.kill_ctld();
    for n in ["n1", "n2", "d1"] {
        c.kill_node(n);
    }
    let text = std::fs::read_to_string(&c.conf).unwrap();
    let n0 = format!(
        "NodeName=n0 NodeAddr=127.0.0.1 Port={} State=FUTURE\nNodeName=n1 ",
        p[1]
    );
    std::fs::write(&c.conf, text.replacen("NodeName=n1 ", &n0, 1)).unwrap();

    // First with MaxNodeCount too low for the four nodes: refused, and it says how to fix it.
    let good = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, good.replace("MaxNodeCount=4", "MaxNodeCount=3")).unwrap();
    c.start_ctld();
    let status = c.wait_ctld_exit(LONG);
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
    let log = c.log_text("ctld");
    assert!(
        log.contains("MaxNodeCount=3 leaves no room for the 4 nodes"),
        "{log}"
    );
    std::fs::write(&c.conf, good).unwrap();

    c.start_ctld();
    for n in ["n1", "n2"] {
        c.start_node(n);
    }
    start_dynamic(&mut c, "d1", p[0], "");
    c.wait_for(LONG, "n[1-2] and d1 back", |c| {
        ["n1", "n2", "d1"]
            .iter()
            .all(|n| by_name(c, n).is_some_and(|i| !i.not_responding))
    });
    let ranks: Vec<(String, u32)> = c
        .nodes_info()
        .into_iter()
        .map(|n| (n.name, n.rank))
        .collect();
    let want: Vec<(String, u32)> = [("n0", 0), ("n1", 1), ("n2", 2), ("d1", 3)]
        .iter()
        .map(|(n, r)| (n.to_string(), *r))
        .collect();
    assert_eq!(ranks, want);
    for (job, node) in [(on_n2, "n2"), (on_d1, "d1")] {
        let j = c.job(job).unwrap();
        assert_eq!((j.state.name(), j.nodes.as_str()), ("RUNNING", node));
        assert_eq!(by_name(&c, node).unwrap().alloc_cpus, 1, "{node}");
    }
    let o = c.cli(&cwd, "scancel", &[&on_n2.to_string(), &on_d1.to_string()]);
    assert!(o.status.success(), "{:?}", out(&o));
    for job in [on_n2, on_d1] {
        assert_eq!(c.wait_done(job, LONG).state.name(), "CANCELLED");
    }
}
