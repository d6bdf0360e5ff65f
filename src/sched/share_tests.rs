//! Placement with shared CPUs (`OverSubscribe=YES[:N]`, `FORCE[:N]`), read
//! through the configuration as the scheduler reads it.

use std::path::Path;

use rand::{Rng, SeedableRng};

use super::*;
use crate::config::Config;
use crate::model::job::Exclusive;

fn conf(text: &str) -> Config {
    let base = "ClusterName=c\nSlurmctldHost=h\nNodeName=n[1-2] CPUs=2 RealMemory=1000\n\
                SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n";
    Config::parse_str_with_gres(&format!("{base}{text}"), Path::new("/x/slurm.conf"), None).unwrap()
}

const PARTS: &str = "PartitionName=yes Nodes=ALL OverSubscribe=YES:2\n\
                     PartitionName=force Nodes=ALL OverSubscribe=FORCE:3\n\
                     PartitionName=no Nodes=ALL\n";

fn job(part: &str, ntasks: u32, share: bool) -> JobSubmit {
    JobSubmit {
        partition: Some(part.into()),
        ntasks: Some(ntasks),
        oversubscribe: share,
        ..Default::default()
    }
}

fn slots(c: &Config) -> Vec<NodeSlot> {
    c.nodes
        .iter()
        .map(|n| {
            let mut s = NodeSlot::for_node(n, None);
            s.available = true;
            s
        })
        .collect()
}

/// Place `s` on its partition's nodes now and hold it; `None` if it does
/// not fit.
fn run(c: &Config, slots: &mut [NodeSlot], s: &JobSubmit) -> Option<Allocation> {
    let req = Request::for_job(s, c).unwrap();
    let part = c
        .partitions
        .iter()
        .find(|p| Some(&p.name) == s.partition.as_ref())
        .unwrap();
    let ranks: Vec<u32> = part
        .nodes
        .iter()
        .map(|n| c.node_index(n).unwrap() as u32)
        .collect();
    let a = place(&req, &ranks, slots)?;
    apply(&a, slots);
    Some(a)
}

#[test]
fn yes_shares_only_between_jobs_that_ask_up_to_n() {
    let c = conf(PARTS);
    let mut s = slots(&c);
    // Four 2-CPU jobs with -s fill both nodes twice over (YES:2).
    let all: Vec<Allocation> = (0..4)
        .map(|i| run(&c, &mut s, &job("yes", 2, true)).unwrap_or_else(|| panic!("job {i}")))
        .collect();
    // Idle CPUs first: the second job goes to the empty node.
    assert_eq!(all[0].ranks, vec![0]);
    assert_eq!(all[1].ranks, vec![1]);
    assert_eq!(all[2].ranks, vec![0]);
    assert_eq!(s[0].alloc_cpus, 2, "CPUAlloc counts distinct CPUs");
    assert_eq!(s[0].share.as_ref().unwrap().count(0), 2);
    // A fifth is one too many, with or without -s.
    assert!(run(&c, &mut s, &job("yes", 1, true)).is_none());
    assert!(run(&c, &mut s, &job("yes", 1, false)).is_none());
    // One leaves: its CPUs are free again for one sharer.
    release(&all[0], &mut s);
    assert_eq!(s[0].alloc_cpus, 2, "still held by the other job");
    assert!(run(&c, &mut s, &job("yes", 2, true)).is_some());
    for a in &all[1..] {
        release(a, &mut s);
    }
    assert_eq!(s[1], slots(&c)[1], "every share given back");
}

#[test]
fn a_job_that_does_not_share_never_overlaps_and_bars_sharers() {
    let c = conf(PARTS);
    let mut s = slots(&c);
    // Without -s in a YES partition: its own CPUs, like NO.
    let solo = run(&c, &mut s, &job("yes", 1, false)).unwrap();
    assert_eq!(solo.share.as_ref().map(|t| t.limit), Some(1));
    // A sharer does not go on the node a non-sharing job runs on.
    let a = run(&c, &mut s, &job("yes", 1, true)).unwrap();
    assert_eq!(a.ranks, vec![1]);
    let b = run(&c, &mut s, &job("yes", 1, true)).unwrap();
    assert_eq!(b.ranks, vec![1]);
    // Node 1's CPUs are both held once; a 2-CPU sharer overlaps them.
    let d = run(&c, &mut s, &job("yes", 2, true)).unwrap();
    assert_eq!(d.ranks, vec![1]);
    // A job of a NO partition keeps off nodes where YES jobs run.
    assert!(run(&c, &mut s, &job("no", 1, false)).is_none());
}

#[test]
fn force_shares_without_asking_and_exclusive_never() {
    let c = conf(PARTS);
    let mut s = slots(&c);
    for _ in 0..6 {
        assert!(run(&c, &mut s, &job("force", 2, false)).is_some());
    }
    assert!(
        run(&c, &mut s, &job("force", 1, false)).is_none(),
        "3 × 2 nodes"
    );
    let mut s = slots(&c);
    let mut x = job("force", 1, false);
    x.exclusive = Some(Exclusive::Node);
    let a = run(&c, &mut s, &x).unwrap();
    assert_eq!(a.cpus, vec![2]);
    assert_eq!(a.share.as_ref().map(|t| t.limit), Some(1));
    // Nothing shares with the exclusive job; the other node is free.
    let b = run(&c, &mut s, &job("force", 2, false)).unwrap();
    assert_eq!(b.ranks, vec![1]);
    let b2 = run(&c, &mut s, &job("force", 2, false)).unwrap();
    assert_eq!(b2.ranks, vec![1]);
    // And an exclusive job never takes a node sharers are on.
    assert!(run(&c, &mut s, &x).is_none());
}

#[test]
fn sharers_of_another_partition_do_not_overlap() {
    let c = conf(
        "PartitionName=a Nodes=n1 OverSubscribe=FORCE:2\n\
         PartitionName=b Nodes=n1 OverSubscribe=FORCE:2\n",
    );
    let mut s = slots(&c);
    let req = |p| Request::for_job(&job(p, 1, false), &c).unwrap();
    let a = place(&req("a"), &[0], &s).unwrap();
    apply(&a, &mut s);
    // b takes the idle CPU, never a's.
    let b = place(&req("b"), &[0], &s).unwrap();
    assert_eq!(b.cpu_ids, vec![vec![1]]);
    apply(&b, &mut s);
    // Each doubles up on its own CPU only, then neither has room.
    let b2 = place(&req("b"), &[0], &s).unwrap();
    assert_eq!(b2.cpu_ids, vec![vec![1]]);
    apply(&b2, &mut s);
    let a2 = place(&req("a"), &[0], &s).unwrap();
    assert_eq!(a2.cpu_ids, vec![vec![0]]);
    apply(&a2, &mut s);
    assert!(place(&req("a"), &[0], &s).is_none());
    assert!(place(&req("b"), &[0], &s).is_none());
    assert_eq!(s[0].alloc_cpus, 2);
}

#[test]
fn memory_is_consumed_by_every_sharer() {
    let c = conf("PartitionName=f Nodes=n1 OverSubscribe=FORCE:4\n");
    let mut s = slots(&c);
    let mut j = job("f", 1, false);
    j.mem_per_node_mb = Some(400);
    assert!(run(&c, &mut s, &j).is_some());
    assert!(run(&c, &mut s, &j).is_some());
    // 800 of 1000 MiB held: a third 400 MiB job waits though CPUs are shareable.
    assert!(run(&c, &mut s, &j).is_none());
    assert_eq!(s[0].alloc_mem_mb, 800);
}

/// Random sharing jobs start and end: no CPU is ever held by more jobs than
/// its partition allows, the node's count is the distinct CPUs held, and
/// releasing everything leaves the nodes as they began.
#[test]
fn seeded_random_load_keeps_shares_within_n() {
    let seed: u64 = std::env::var("SHARE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0017);
    println!("seed {seed}");
    let c = conf(
        "NodeName=m[1-3] CPUs=8 Sockets=2 CoresPerSocket=4 RealMemory=8000\n\
         PartitionName=yes Nodes=ALL OverSubscribe=YES:3\n\
         PartitionName=force Nodes=ALL OverSubscribe=FORCE:2\n\
         PartitionName=no Nodes=ALL\n",
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let fresh = slots(&c);
    let mut s = fresh.clone();
    let ranks: Vec<u32> = (0..s.len() as u32).collect();
    let mut live: Vec<Allocation> = Vec::new();
    for step in 0..3000 {
        if !live.is_empty() && rng.gen_bool(0.45) {
            let a = live.swap_remove(rng.gen_range(0..live.len()));
            release(&a, &mut s);
        } else {
            let part = ["yes", "force", "no"][rng.gen_range(0..3)];
            let mut j = job(part, rng.gen_range(1..6), rng.gen_bool(0.5));
            if rng.gen_bool(0.1) {
                j.exclusive = Some(Exclusive::Node);
            }
            if rng.gen_bool(0.3) {
                j.mem_per_cpu_mb = Some(100);
            }
            let req = Request::for_job(&j, &c).unwrap();
            if let Some(a) = place(&req, &ranks, &s) {
                apply(&a, &mut s);
                live.push(a);
            }
        }
        // Per node and CPU: who holds it, from the live allocations.
        for (rank, slot) in s.iter().enumerate() {
            let mut holders: Vec<Vec<&Allocation>> = vec![Vec::new(); slot.cpus as usize];
            for a in &live {
                for (i, &r) in a.ranks.iter().enumerate() {
                    if r as usize == rank {
                        for &id in &a.cpu_ids[i] {
                            holders[id as usize].push(a);
                        }
                    }
                }
            }
            let held = holders.iter().filter(|h| !h.is_empty()).count() as u32;
            assert_eq!(slot.alloc_cpus, held, "seed {seed} step {step} node {rank}");
            for h in holders.iter().filter(|h| h.len() > 1) {
                let tag = |a: &Allocation| a.share.clone();
                let first = tag(h[0]).unwrap_or_else(|| panic!("seed {seed}: unshared overlap"));
                assert!(
                    h.iter().all(|a| tag(a).as_ref() == Some(&first)),
                    "seed {seed} step {step}: overlap across partitions or with a non-sharer"
                );
                assert!(
                    first.limit > 1 && h.len() <= usize::from(first.limit),
                    "seed {seed}"
                );
            }
        }
    }
    for a in live.drain(..) {
        release(&a, &mut s);
    }
    assert_eq!(s, fresh, "seed {seed}");
}
