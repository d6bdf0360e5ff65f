//! The backfill comparison's jobs, the same list for both systems: the fill that
//! occupies every node with long jobs of spread time limits (so the timeline has
//! many different end times), and the pending jobs of mixed widths and limits.
//! Seeded, so a run is repeated exactly from its seed.
//!
//! Does not: submit anything (the parent module does).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One batch job: whole nodes (`--exclusive`), a time limit in minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::peer) struct Shape {
    pub(in crate::peer) nodes: u32,
    pub(in crate::peer) minutes: u32,
}

/// Fill jobs are at most this wide, so that their ends free the cluster piecemeal.
pub(in crate::peer) const FILL_MAX_WIDTH: u32 = 8;
/// Fill jobs' time limits: from two hours (longer than a large run takes, so no node
/// frees while either system is measured and both see the same full cluster) to a day.
pub(in crate::peer) const FILL_MINUTES: (u32, u32) = (120, 1440);
/// Pending jobs' time limits: a minute to a day.
pub(in crate::peer) const PENDING_MINUTES: (u32, u32) = (1, 1440);
/// The share of pending jobs that ask for one node.
const ONE_NODE_SHARE: f64 = 0.5;

impl Shape {
    /// sbatch's arguments, the same on both systems. The script sleeps for the time
    /// limit, so a job orphaned by a failed run still ends by itself.
    pub(in crate::peer) fn sbatch_args(&self, name: &str) -> Vec<String> {
        vec![
            "--parsable".into(),
            "-J".into(),
            name.into(),
            "-N".into(),
            self.nodes.to_string(),
            "--exclusive".into(),
            "-t".into(),
            self.minutes.to_string(),
            "-o".into(),
            "/dev/null".into(),
            "--wrap".into(),
            format!("sleep {}", u64::from(self.minutes) * 60),
        ]
    }
}

/// Jobs that together cover exactly `nodes` nodes, widths 1..=8, limits spread
/// uniformly over [`FILL_MINUTES`].
pub(in crate::peer) fn fill_jobs(nodes: u32, rng: &mut StdRng) -> Vec<Shape> {
    let mut out = Vec::new();
    let mut left = nodes;
    while left > 0 {
        let width = rng.gen_range(1..=FILL_MAX_WIDTH.min(left));
        left -= width;
        out.push(Shape {
            nodes: width,
            minutes: rng.gen_range(FILL_MINUTES.0..=FILL_MINUTES.1),
        });
    }
    out
}

/// `count` jobs: half one node wide, the rest log-uniform over 2..=nodes/4 (1 when
/// the cluster is smaller than 8 nodes); limits log-uniform over [`PENDING_MINUTES`],
/// so short and long jobs are both common.
pub(in crate::peer) fn pending_jobs(count: u32, nodes: u32, rng: &mut StdRng) -> Vec<Shape> {
    let widest = (nodes / 4).max(1);
    (0..count)
        .map(|_| {
            let width = if widest < 2 || rng.gen_bool(ONE_NODE_SHARE) {
                1
            } else {
                log_uniform(rng, 2, widest)
            };
            Shape {
                nodes: width,
                minutes: log_uniform(rng, PENDING_MINUTES.0, PENDING_MINUTES.1),
            }
        })
        .collect()
}

/// An integer in lo..=hi whose logarithm is uniform.
fn log_uniform(rng: &mut StdRng, lo: u32, hi: u32) -> u32 {
    let (l, h) = (f64::from(lo).ln(), (f64::from(hi) + 1.0).ln());
    let x = rng.gen_range(l..h).exp().floor() as u32;
    x.clamp(lo, hi)
}

/// The fill and the pending jobs of one run, drawn from `seed`.
pub(in crate::peer) fn workload(nodes: u32, pending: u32, seed: u64) -> (Vec<Shape>, Vec<Shape>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fill = fill_jobs(nodes, &mut rng);
    let queue = pending_jobs(pending, nodes, &mut rng);
    (fill, queue)
}
