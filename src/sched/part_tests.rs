//! Placement under a partition's settings: `LLN` (least loaded nodes
//! first, also `SelectTypeParameters=CR_LLN`) and `MaxCPUsPerNode`, read
//! through the configuration as the scheduler reads them.

use std::path::Path;

use super::*;
use crate::config::Config;

fn conf(text: &str) -> Config {
    let base = "ClusterName=c\nSlurmctldHost=h\nNodeName=n[1-3] CPUs=4 RealMemory=4000\n";
    Config::parse_str_with_gres(&format!("{base}{text}"), Path::new("/x/slurm.conf"), None).unwrap()
}

fn submit(part: &str, ntasks: u32) -> JobSubmit {
    JobSubmit {
        partition: Some(part.into()),
        ntasks: Some(ntasks),
        ..Default::default()
    }
}

/// n1 with 3 of 4 CPUs busy, n2 with 1, n3 with 2.
fn loaded() -> Vec<NodeSlot> {
    let mut slots: Vec<NodeSlot> = (0..3).map(|_| NodeSlot::plain(4, 4000)).collect();
    for (rank, busy) in [(0u32, 3u32), (1, 1), (2, 2)] {
        let ids: Vec<u32> = (0..busy).collect();
        hold_cpus(rank, &ids, busy, &mut slots, true, None);
    }
    slots
}

#[test]
fn lln_places_on_the_least_loaded_node_first() {
    let c = conf(
        "PartitionName=lln Nodes=ALL LLN=YES\n\
         PartitionName=plain Nodes=ALL\n",
    );
    let slots = loaded();
    let ranks = [0, 1, 2];
    let req = Request::for_job(&submit("lln", 1), &c).unwrap();
    assert!(req.lln);
    assert_eq!(place(&req, &ranks, &slots).unwrap().ranks, [1]);
    // Without it, the first node with room.
    let req = Request::for_job(&submit("plain", 1), &c).unwrap();
    assert!(!req.lln);
    assert_eq!(place(&req, &ranks, &slots).unwrap().ranks, [0]);
    // CR_LLN makes every partition place so.
    let c = conf("SelectTypeParameters=CR_Core_Memory,CR_LLN\nPartitionName=plain Nodes=ALL\n");
    let req = Request::for_job(&submit("plain", 1), &c).unwrap();
    assert_eq!(place(&req, &ranks, &slots).unwrap().ranks, [1]);
    // Spread over nodes: emptiest first, then the next.
    let req = Request::for_job(&submit("plain", 5), &c).unwrap();
    assert_eq!(place(&req, &ranks, &slots).unwrap().ranks, [1, 2]);
}

#[test]
fn max_cpus_per_node_bounds_what_one_node_gives_a_job() {
    let c = conf(
        "PartitionName=two Nodes=ALL MaxCPUsPerNode=2\n\
         PartitionName=open Nodes=ALL\n",
    );
    let slots: Vec<NodeSlot> = (0..3).map(|_| NodeSlot::plain(4, 4000)).collect();
    let ranks = [0, 1, 2];
    // Four tasks: two nodes of two, not one node of four.
    let req = Request::for_job(&submit("two", 4), &c).unwrap();
    let a = place(&req, &ranks, &slots).unwrap();
    assert_eq!(
        (a.ranks.as_slice(), a.cpus.as_slice()),
        (&[0, 1][..], &[2, 2][..])
    );
    let req = Request::for_job(&submit("open", 4), &c).unwrap();
    assert_eq!(place(&req, &ranks, &slots).unwrap().ranks, [0]);
    // A task wider than the cap can never run there.
    let mut wide = submit("two", 1);
    wide.cpus_per_task = Some(3);
    let req = Request::for_job(&wide, &c).unwrap();
    assert_eq!(feasible(&req, &ranks, &slots), Err(Infeasible::NodeConfig));
    // -N given: each node's share still within the cap.
    let mut spread = submit("two", 6);
    spread.min_nodes = Some(2);
    let req = Request::for_job(&spread, &c).unwrap();
    assert!(place(&req, &ranks, &slots).is_none());
}

/// As slurm.conf defines it, `MaxCPUsPerNode` bounds all of a partition's jobs on a node
/// together, not each job: a second job of the partition gets what the first left of the cap,
/// another partition's jobs the rest of the node, and a job's end gives its share back.
#[test]
fn max_cpus_per_node_is_shared_by_all_of_the_partitions_jobs_on_a_node() {
    let c = conf(
        "PartitionName=two Nodes=ALL MaxCPUsPerNode=3\n\
         PartitionName=open Nodes=ALL\n",
    );
    let mut slots: Vec<NodeSlot> = (0..3).map(|_| NodeSlot::plain(4, 4000)).collect();
    let ranks = [0, 1, 2];
    let req = Request::for_job(&submit("two", 2), &c).unwrap();
    let first = place(&req, &ranks, &slots).unwrap();
    assert_eq!(first.ranks, [0]);
    apply(&first, &mut slots);
    assert_eq!(slots[0].part_cpus("two"), 2);
    // One CPU of the cap is left on n1: a two-task job on one node goes to n2; spread, it
    // takes the one CPU and one of n2's.
    let mut one_node = submit("two", 2);
    one_node.min_nodes = Some(1);
    let one_node = Request::for_job(&one_node, &c).unwrap();
    assert_eq!(place(&one_node, &ranks, &slots).unwrap().ranks, [1]);
    let spread = place(&req, &ranks, &slots).unwrap();
    assert_eq!((spread.ranks, spread.cpus), (vec![0, 1], vec![1, 1]));
    // A one-task job still fits beside the first.
    let one = Request::for_job(&submit("two", 1), &c).unwrap();
    assert_eq!(place(&one, &ranks, &slots).unwrap().ranks, [0]);
    // Another partition's job takes n1's other two CPUs.
    let open = Request::for_job(&submit("open", 2), &c).unwrap();
    assert_eq!(place(&open, &ranks, &slots).unwrap().ranks, [0]);
    // Whether it could ever run: the cap, not what others hold now.
    assert_eq!(feasible(&req, &[0], &slots), Ok(()));
    // The first job ends: its share of the cap is back.
    release(&first, &mut slots);
    assert_eq!(slots[0].part_cpus("two"), 0);
    assert_eq!(place(&one_node, &ranks, &slots).unwrap().ranks, [0]);
}
