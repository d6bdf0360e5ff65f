//! Dynamic node lines: read as the file's are, bounded by MaxNodeCount, placed on appended or
//! vacant ranks, joining partitions by `ALL` and NodeSet features.

use std::path::Path;

use super::*;

fn conf(text: &str) -> Config {
    let full = format!("SlurmctldHost=ctl\n{text}");
    Config::parse_str_with_gres(&full, Path::new("/etc/canopy/slurm.conf"), None)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn part<'a>(c: &'a Config, name: &str) -> &'a [String] {
    &c.partitions.iter().find(|p| p.name == name).unwrap().nodes
}

#[test]
fn a_node_line_reads_as_the_files_own_lines_do() {
    let c = conf("GresTypes=gpu\nSlurmdPort=7000\nMaxNodeCount=10\n");
    let nodes = c
        .read_node_line(
            "NodeName=d1 CPUs=8 CoresPerSocket=4 RealMemory=1000 Feature=f1,big Gres=gpu:2",
        )
        .unwrap();
    assert_eq!(nodes.len(), 1);
    let (n, g) = &nodes[0];
    assert_eq!((n.cpus, n.sockets, n.cores_per_socket), (8, 2, 4));
    assert_eq!(
        (n.real_memory_mb, n.port, n.addr.as_str()),
        (1000, 7000, "d1")
    );
    assert_eq!(n.features, ["f1", "big"]);
    assert!(n.dynamic && !n.vacant);
    assert_eq!(g.configured.len(), 1);
    assert_eq!(g.configured[0].count, 2);
    // A hostlist makes several, as scontrol create does.
    assert_eq!(c.read_node_line("NodeName=d[1-3] CPUs=2").unwrap().len(), 3);
    // What the file refuses, a created node's line refuses with the same words.
    let e = c.read_node_line("NodeName=d1 CPUs=x").unwrap_err();
    assert!(
        matches!(&e, DynamicError::Line(m) if m.contains("CPUs=x")),
        "{e}"
    );
    let e = c.read_node_line("NodeName=d1 Bogus=1").unwrap_err();
    assert!(e.to_string().contains("Bogus"), "{e}");
    assert!(c.read_node_line("CPUs=2").is_err());
    assert!(c.read_node_line("NodeName=DEFAULT CPUs=2").is_err());
    assert!(c.read_node_line("NodeName=d1 CPUs=2\nNodeName=d2").is_err());
    assert!(c.read_node_line("NodeName=d1 PartitionName=x").is_err());
}

#[test]
fn max_node_count_bounds_the_nodes_and_unset_leaves_no_room() {
    let c = conf("NodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=ALL\n");
    assert_eq!(c.node_capacity(), 2);
    assert_eq!(
        c.with_created_nodes("NodeName=d1 CPUs=2", false)
            .unwrap_err(),
        DynamicError::TooMany(2)
    );
    let c = conf("MaxNodeCount=4\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=ALL\n");
    let (c, ranks) = c.with_created_nodes("NodeName=d1 CPUs=2", false).unwrap();
    assert_eq!(ranks, [2]);
    let (c, ranks) = c.with_created_nodes("NodeName=d2 CPUs=2", false).unwrap();
    assert_eq!(ranks, [3]);
    let e = c
        .with_created_nodes("NodeName=d3 CPUs=2", false)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Attempting to create node record past MaxNodeCount:4"
    );
    assert_eq!(c.fixed_nodes, 2);
    assert!(c.is_dynamic("d2") && !c.is_dynamic("n1"));
    // Below the file's own count, MaxNodeCount is ignored.
    assert_eq!(conf("MaxNodeCount=1\nNodeName=n[1-3]\n").node_capacity(), 3);
}

#[test]
fn scontrol_creates_only_future_or_cloud_nodes_and_never_a_second_of_a_name() {
    let c = conf("MaxNodeCount=8\nNodeName=n1\n");
    let e = c
        .with_created_nodes("NodeName=d1 CPUs=2", true)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Only State=FUTURE and State=CLOUD allowed for nodes created by scontrol"
    );
    let (c2, ranks) = c
        .with_created_nodes("NodeName=d[1-2] CPUs=2 State=FUTURE", true)
        .unwrap();
    assert_eq!(ranks, [1, 2]);
    assert_eq!(c2.nodes[2].state, ConfNodeState::Future);
    assert!(c
        .with_created_nodes("NodeName=d1 State=CLOUD", true)
        .is_ok());
    for line in ["NodeName=n1 State=FUTURE", "NodeName=d2 State=FUTURE"] {
        let e = c2.with_created_nodes(line, true).unwrap_err();
        assert!(matches!(e, DynamicError::Exists(_)), "{line}: {e}");
    }
    assert_eq!(
        DynamicError::Exists("n1".into()).to_string(),
        "Node 'n1' already exists in the node table"
    );
}

#[test]
fn dynamic_nodes_join_all_partitions_and_nodesets_by_feature() {
    let c = conf(
        "MaxNodeCount=10\nNodeName=n[1-2] Feature=f1\nNodeSet=ns1 Feature=f1\n\
         NodeSet=ns2 Feature=f2\nNodeSet=fixed Nodes=n1\n\
         PartitionName=all Nodes=ALL\nPartitionName=p1 Nodes=ns1\nPartitionName=p2 Nodes=ns2,n2\n\
         PartitionName=named Nodes=n[1-2],fixed\n",
    );
    assert_eq!(part(&c, "p2"), ["n2"]);
    let (c, _) = c
        .with_created_nodes("NodeName=d1 Feature=f2", false)
        .unwrap();
    let (c, _) = c
        .with_created_nodes("NodeName=d2 Feature=f1,f2", false)
        .unwrap();
    let (c, _) = c.with_created_nodes("NodeName=d3", false).unwrap();
    assert_eq!(part(&c, "all"), ["n1", "n2", "d1", "d2", "d3"]);
    assert_eq!(part(&c, "p1"), ["n1", "n2", "d2"]);
    assert_eq!(part(&c, "p2"), ["n2", "d1", "d2"]);
    assert_eq!(part(&c, "named"), ["n1", "n2"]);
}

#[test]
fn a_deleted_node_leaves_its_rank_vacant_for_the_next_one() {
    let c = conf("MaxNodeCount=4\nNodeName=n1\nPartitionName=p Nodes=ALL\n");
    let (c, _) = c.with_created_nodes("NodeName=d[1-3]", false).unwrap();
    assert_eq!(
        c.with_created_nodes("NodeName=d9", false).unwrap_err(),
        DynamicError::TooMany(4)
    );
    let (c, rank) = c.with_deleted_node("d2").unwrap();
    assert_eq!(rank, 2);
    assert!(c.nodes[2].vacant);
    assert_eq!(c.node_index("d2"), None);
    assert_eq!(c.node_index("d3"), Some(3));
    assert_eq!(part(&c, "p"), ["n1", "d1", "d3"]);
    // Room again; the vacant rank is taken, nothing shifts.
    let (c, ranks) = c.with_created_nodes("NodeName=d4", false).unwrap();
    assert_eq!(ranks, [2]);
    assert_eq!(part(&c, "p"), ["n1", "d1", "d4", "d3"]);
    assert_eq!(
        c.with_deleted_node("n1").unwrap_err().to_string(),
        "Can't delete non-dynamic node 'n1'."
    );
    assert_eq!(
        c.with_deleted_node("d2").unwrap_err().to_string(),
        "Invalid node name specified"
    );
}

#[test]
fn stored_nodes_come_back_at_their_ranks_and_lines_round_trip() {
    let c = conf("MaxNodeCount=8\nGresTypes=gpu\nNodeName=n1\nPartitionName=p Nodes=ALL\n");
    let (made, _) = c
        .with_created_nodes(
            "NodeName=d[1-3] CPUs=4 RealMemory=512 Feature=f Gres=gpu:1 NodeAddr=10.0.0.9 Port=7001",
            false,
        )
        .unwrap();
    let (made, _) = made.with_deleted_node("d2").unwrap();
    let stored: Vec<(u32, String)> = made.nodes[made.fixed_nodes..]
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.vacant)
        .map(|(i, n)| (i as u32, node_line(n)))
        .collect();
    assert_eq!(stored.len(), 2);
    let back = c.with_stored_nodes(&stored);
    assert_eq!(back.node_index("d1"), Some(1));
    assert_eq!(back.node_index("d3"), Some(3));
    assert!(back.nodes[2].vacant);
    assert_eq!(back.nodes[3], made.nodes[3]);
    assert_eq!(part(&back, "p"), ["n1", "d1", "d3"]);
    assert_eq!(back.node_gres(3), made.node_gres(3));
    // The file now lists a stored name: the file wins, with a word.
    let c2 = conf("MaxNodeCount=8\nGresTypes=gpu\nNodeName=n1,d1\n");
    let back = c2.with_stored_nodes(&stored);
    assert_eq!(back.node_index("d1"), Some(1));
    assert!(!back.nodes[1].dynamic);
    assert!(
        back.warnings.iter().any(|w| w.contains("d1")),
        "{:?}",
        back.warnings
    );
}

#[test]
fn the_registered_line_is_detected_hardware_unless_conf_says_otherwise() {
    let hw = Detected {
        cpus: 16,
        boards: 1,
        sockets: 2,
        cores_per_socket: 4,
        threads_per_core: 2,
        real_memory_mb: 64000,
    };
    assert_eq!(
        dynamic_line("d1", &hw, ""),
        "NodeName=d1 CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=2 \
         RealMemory=64000"
    );
    assert_eq!(
        dynamic_line("d1", &hw, "CPUs=4 RealMemory=1000 Feature=f1"),
        "NodeName=d1 CPUs=4 RealMemory=1000 Feature=f1"
    );
    let c = conf("MaxNodeCount=4\n");
    let line = dynamic_line("d1", &hw, "Feature=f1 Gres=");
    let (n, _) = &c.read_node_line(&line).unwrap()[0];
    assert_eq!((n.cpus, n.sockets, n.threads_per_core), (16, 2, 2));
}

#[test]
fn a_file_with_no_node_lines_loads_and_takes_dynamic_nodes() {
    let c = conf("MaxNodeCount=100\nPartitionName=dyn Nodes=ALL Default=YES\n");
    assert!(c.nodes.is_empty());
    assert_eq!(part(&c, "dyn"), [] as [String; 0]);
    let (c, ranks) = c.with_created_nodes("NodeName=d1 CPUs=2", false).unwrap();
    assert_eq!(ranks, [0]);
    assert_eq!(part(&c, "dyn"), ["d1"]);
}
