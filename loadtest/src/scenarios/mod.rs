//! One module per scenario. Each takes its options and a progress callback
//! and returns one result row per measured configuration.

pub mod console;
pub mod console_exec;
pub mod console_ping;
pub mod console_tree;
pub mod dynamic;
pub mod fanout;
pub mod heartbeat;
pub mod leaf;
pub mod memory;
pub mod power;
pub mod prio;
pub mod replay;
pub mod resv;
pub mod rpc;
pub mod sched;
pub mod signer;
pub mod storm;
pub mod throughput;

use canopy::tree::topology::Topology;

/// Ranks that relay for someone (have children), and pure leaves.
pub fn relays_and_leaves(nodes: u32, width: u32) -> (Vec<u32>, Vec<u32>) {
    let topo = match Topology::new(nodes, width) {
        Ok(t) => t,
        Err(_) => return (Vec::new(), Vec::new()),
    };
    (0..nodes).partition(|&r| !topo.children(Some(r)).is_empty())
}

/// A small deterministic generator, so a scenario's choices replay exactly.
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1))
    }
    pub fn below(&mut self, n: u32) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % u64::from(n.max(1))) as u32
    }
    /// `k` distinct items of `from`, in a seeded order.
    pub fn pick(&mut self, from: &[u32], k: usize) -> Vec<u32> {
        let mut v = from.to_vec();
        let k = k.min(v.len());
        for i in 0..k {
            let j = i + self.below((v.len() - i) as u32) as usize;
            v.swap(i, j);
        }
        v.truncate(k);
        v
    }
}
