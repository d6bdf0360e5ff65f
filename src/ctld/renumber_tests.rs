//! Stored ranks mapped by name onto a changed node table (`renumber.rs`).

use super::*;
use crate::ctld::fixtures::running;
use crate::model::job::JobState;
use crate::model::reservation::AccessList;

fn conf(nodes: &str, max: u32) -> Config {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nMaxNodeCount={max}\n{nodes}\
         PartitionName=p Nodes=ALL Default=YES\n"
    );
    Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A dynamic node's stored line, as the controller writes it.
fn line(c: &Config, name: &str) -> String {
    let (made, _) = c
        .with_created_nodes(&format!("NodeName={name} CPUs=2 State=CLOUD"), true)
        .unwrap();
    crate::config::dynamic::node_line(&made.nodes[made.node_index(name).unwrap()])
}

fn resv(ranks: &[u32], list: &str) -> Reservation {
    Reservation {
        name: "r".into(),
        start: 0,
        end: 100,
        ranks: ranks.to_vec(),
        node_list: list.into(),
        cpus: 0,
        partition: None,
        features: None,
        users: AccessList::default(),
        accounts: AccessList::default(),
        flags: vec![],
        purge_secs: None,
        licenses: vec![],
    }
}

fn put_jobs(r: &Restored) -> Vec<u32> {
    r.persist
        .iter()
        .filter_map(|op| match op {
            Op::PutJob(j) => Some(j.job_id),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unchanged_table_moves_nothing_and_records_the_names_once() {
    let c = conf("NodeName=n[1-2] CPUs=2\n", 4);
    let stored = vec![(0, line(&c, "d1"))];
    let mut jobs = vec![running(1, 2)];
    let first = restore(&c, None, &stored, &mut jobs, &mut []).unwrap();
    assert_eq!(first.moved, 0);
    assert_eq!(first.dyn_nodes, stored);
    assert!(matches!(&first.persist[..], [Op::PutFileNodes(n)] if *n == names(&["n1", "n2"])));
    let again = restore(&c, Some(&names(&["n1", "n2"])), &stored, &mut jobs, &mut []).unwrap();
    assert!(again.persist.is_empty(), "{:?}", again.persist);
    assert_eq!(jobs[0].alloc.as_ref().unwrap().ranks, [2]);
}

#[test]
fn lines_added_before_move_jobs_reservations_and_dynamic_nodes_by_name() {
    let old = conf("NodeName=n[1-2] CPUs=2\n", 4);
    let stored = vec![(0, line(&old, "d1"))];
    // n0 is added first: n1, n2 and d1 each move one rank up.
    let new = conf("NodeName=n0 CPUs=2\nNodeName=n[1-2] CPUs=2\n", 4);
    let mut jobs = vec![running(1, 1), running(2, 2), running(3, 0)];
    let mut done = running(4, 0);
    done.state = JobState::Completed;
    jobs.push(done);
    // Job 2 lent CPUs on n2 to a preemptor (job 1): the lent node moves too.
    jobs[1].preempt_suspended = Some(crate::model::job::PreemptSuspend {
        at: 5,
        by: 1,
        lent: vec![crate::model::job::LentCpus {
            rank: 1,
            ids: vec![0],
            count: 1,
        }],
    });
    let mut resvs = vec![resv(&[1, 2], "n2,d1")];
    let r = restore(
        &new,
        Some(&names(&["n1", "n2"])),
        &stored,
        &mut jobs,
        &mut resvs,
    )
    .unwrap();
    let ranks: Vec<Vec<u32>> = jobs
        .iter()
        .map(|j| j.alloc.as_ref().unwrap().ranks.clone())
        .collect();
    assert_eq!(ranks, [vec![2], vec![3], vec![1], vec![1]]);
    assert_eq!(put_jobs(&r), [1, 2, 3, 4]);
    let lent = &jobs[1].preempt_suspended.as_ref().unwrap().lent[0];
    assert_eq!(lent.rank, 2, "n2's new rank");
    assert_eq!(
        (resvs[0].ranks.clone(), resvs[0].node_list.as_str()),
        (vec![2, 3], "n2,d1")
    );
    // d1 keeps its offset: its rank follows the file's nodes.
    assert_eq!(r.dyn_nodes, stored);
    assert!(r
        .persist
        .iter()
        .any(|op| matches!(op, Op::PutFileNodes(n) if *n == names(&["n0", "n1", "n2"]))));
}

#[test]
fn a_node_a_running_job_holds_cannot_vanish_but_a_finished_ones_can() {
    let new = conf("NodeName=n1 CPUs=2\n", 4);
    let old_file = names(&["n1", "n2"]);
    let mut jobs = vec![running(7, 1)];
    let e = restore(&new, Some(&old_file), &[], &mut jobs, &mut []).unwrap_err();
    assert_eq!(
        e,
        RenumberError::HeldNodeGone {
            job_id: 7,
            node: "n2".into()
        }
    );
    assert!(e.to_string().contains("put its NodeName line back"), "{e}");
    jobs[0].state = JobState::Completed;
    let r = restore(&new, Some(&old_file), &[], &mut jobs, &mut []).unwrap();
    assert_eq!(jobs[0].alloc.as_ref().unwrap().ranks, [GONE]);
    assert_eq!(put_jobs(&r), [7]);
}

#[test]
fn a_lowered_max_node_count_packs_dynamic_nodes_or_refuses() {
    let old = conf("NodeName=n[1-2] CPUs=2\n", 8);
    // d1 at offset 0, d2 at offset 5 (the ranks between were deleted).
    let stored = vec![(0, line(&old, "d1")), (5, line(&old, "d2"))];
    let old_file = names(&["n1", "n2"]);
    let mut jobs = vec![running(1, 7)];
    let lower = conf("NodeName=n[1-2] CPUs=2\n", 4);
    let r = restore(&lower, Some(&old_file), &stored, &mut jobs, &mut []).unwrap();
    assert_eq!(
        r.dyn_nodes,
        vec![(0, stored[0].1.clone()), (1, stored[1].1.clone())]
    );
    assert_eq!(jobs[0].alloc.as_ref().unwrap().ranks, [3]);
    assert!(r
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteDynNode(5))));
    // The packed table loads as the controller will start it.
    let started = lower.with_stored_nodes(&r.dyn_nodes);
    assert_eq!(started.node_index("d2"), Some(3));

    let too_low = conf("NodeName=n[1-2] CPUs=2\n", 3);
    let e = restore(&too_low, Some(&old_file), &stored, &mut jobs, &mut []).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("MaxNodeCount=3 leaves no room for the 4 nodes") && text.contains("d[1-2]"),
        "{text}"
    );
}

#[test]
fn a_dynamic_node_now_in_the_file_keeps_its_jobs_and_loses_its_stored_line() {
    let old = conf("NodeName=n1 CPUs=2\n", 4);
    let stored = vec![(0, line(&old, "d1"))];
    let new = conf("NodeName=n1 CPUs=2\nNodeName=d1 CPUs=2\n", 4);
    let mut jobs = vec![running(1, 1)];
    let r = restore(&new, Some(&names(&["n1"])), &stored, &mut jobs, &mut []).unwrap();
    assert!(r.dyn_nodes.is_empty());
    assert!(r
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteDynNode(0))));
    assert_eq!(jobs[0].alloc.as_ref().unwrap().ranks, [1]);
}
