//! The `held` field of launch messages: every node's share, as runs of equal shares.
//!
//! A launch carries every node's share (`JobLaunch::held`, `StepLaunch::held`), and
//! every node of the fan-out tree decodes it, keeps it and (a relay) encodes it again
//! for its children: a K-node launch moved and allocated O(K²) shares in all. Most
//! jobs hold the same on each node (`srun -N 512 true`: one CPU and the same memory
//! everywhere), so [`Shares`] keeps consecutive equal shares as one run, in memory and
//! on the wire, and a 512-node launch carries one share instead of 512.
//!
//! On the wire each entry is a `NodeShare` with an optional `repeat` key (absent = 1),
//! so frames written before runs existed read unchanged.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::messages::NodeShare;
use crate::model::tres::GresAlloc;

/// Most shares one message may stand for: more nodes than any cluster has, yet a
/// bound, so that a forged repeat count cannot make a node walk or allocate without end.
pub const MAX_SHARES: usize = 1 << 20;

/// Each node's share, in nodelist order, kept as runs of equal shares. Built with
/// `collect()` or `From<Vec<NodeShare>>`; read with [`Shares::get`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shares {
    /// (how many nodes in a row, their share); adjacent runs always differ, so equal
    /// lists of shares compare equal.
    runs: Vec<(u32, NodeShare)>,
    len: usize,
}

impl Shares {
    /// The share of the node at `index` in the nodelist (a walk over the runs: few).
    pub fn get(&self, index: usize) -> Option<&NodeShare> {
        let mut start = 0usize;
        for (count, share) in &self.runs {
            start += *count as usize;
            if index < start {
                return Some(share);
            }
        }
        None
    }

    pub fn first(&self) -> Option<&NodeShare> {
        self.runs.first().map(|(_, s)| s)
    }

    /// How many nodes' shares (not runs).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every node's share, in order.
    pub fn iter(&self) -> impl Iterator<Item = &NodeShare> + '_ {
        self.runs
            .iter()
            .flat_map(|(count, share)| std::iter::repeat_n(share, *count as usize))
    }

    /// How many runs hold the shares (1 when every node holds the same).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Add the next node's share.
    pub fn push(&mut self, share: NodeShare) {
        self.push_run(1, share);
    }

    fn push_run(&mut self, count: u32, share: NodeShare) {
        if count == 0 {
            return;
        }
        self.len += count as usize;
        if let Some((n, last)) = self.runs.last_mut() {
            if *last == share {
                if let Some(sum) = n.checked_add(count) {
                    *n = sum;
                    return;
                }
            }
        }
        self.runs.push((count, share));
    }
}

impl FromIterator<NodeShare> for Shares {
    fn from_iter<I: IntoIterator<Item = NodeShare>>(iter: I) -> Self {
        let mut out = Shares::default();
        for share in iter {
            out.push(share);
        }
        out
    }
}

impl From<Vec<NodeShare>> for Shares {
    fn from(v: Vec<NodeShare>) -> Self {
        v.into_iter().collect()
    }
}

#[derive(Serialize)]
struct RunRef<'a> {
    cpu_ids: &'a [u32],
    mem_mb: u64,
    gres: &'a [GresAlloc],
    #[serde(skip_serializing_if = "is_one")]
    repeat: u32,
}

#[derive(Deserialize)]
struct Run {
    cpu_ids: Vec<u32>,
    mem_mb: u64,
    gres: Vec<GresAlloc>,
    #[serde(default = "one")]
    repeat: u32,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn one() -> u32 {
    1
}

impl Serialize for Shares {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.runs.iter().map(|(count, share)| RunRef {
            cpu_ids: &share.cpu_ids,
            mem_mb: share.mem_mb,
            gres: &share.gres,
            repeat: *count,
        }))
    }
}

impl<'de> Deserialize<'de> for Shares {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shares, D::Error> {
        let runs = Vec::<Run>::deserialize(d)?;
        let mut out = Shares::default();
        for run in runs {
            if run.repeat == 0 {
                return Err(D::Error::custom("held: a run of 0 node shares"));
            }
            if out.len.saturating_add(run.repeat as usize) > MAX_SHARES {
                return Err(D::Error::custom(format!(
                    "held: more than the {MAX_SHARES} node shares a message may carry"
                )));
            }
            let share = NodeShare {
                cpu_ids: run.cpu_ids,
                mem_mb: run.mem_mb,
                gres: run.gres,
            };
            out.push_run(run.repeat, share);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Carrier {
        #[serde(default)]
        held: Shares,
    }

    /// The field as it was written before runs: a plain list of shares.
    #[derive(Serialize)]
    struct Plain {
        held: Vec<NodeShare>,
    }

    fn share(cpus: &[u32], mem_mb: u64, gpus: &[u32]) -> NodeShare {
        NodeShare {
            cpu_ids: cpus.to_vec(),
            mem_mb,
            gres: if gpus.is_empty() {
                Vec::new()
            } else {
                vec![GresAlloc {
                    name: "gpu".into(),
                    type_: Some("a100".into()),
                    indices: gpus.to_vec(),
                    count: gpus.len() as u64,
                }]
            },
        }
    }

    fn round_trip(held: &[NodeShare]) -> (Vec<u8>, Shares) {
        let bytes = rmp_serde::to_vec_named(&Carrier {
            held: held.to_vec().into(),
        })
        .expect("encode");
        let back: Carrier = rmp_serde::from_slice(&bytes).expect("decode");
        (bytes, back.held)
    }

    fn expanded(s: &Shares) -> Vec<NodeShare> {
        s.iter().cloned().collect()
    }

    #[test]
    fn equal_shares_are_one_run_whatever_the_node_count() {
        let held = vec![share(&[0], 100, &[]); 512];
        let (bytes, back) = round_trip(&held);
        assert_eq!((back.len(), back.runs()), (512, 1));
        assert_eq!(expanded(&back), held);
        assert_eq!(back.get(511), Some(&held[0]));
        assert_eq!(back.get(512), None);
        let one = rmp_serde::to_vec_named(&Plain {
            held: vec![share(&[0], 100, &[])],
        })
        .expect("encode");
        // One entry plus its count.
        assert!(bytes.len() < one.len() + 16, "{} bytes", bytes.len());
    }

    #[test]
    fn order_and_differences_survive() {
        let held = vec![
            share(&[0, 1], 100, &[0]),
            share(&[0, 1], 100, &[0]),
            share(&[0, 1], 100, &[1]),
            share(&[2], 100, &[]),
            share(&[2], 200, &[]),
            share(&[2], 200, &[]),
            share(&[0, 1], 100, &[0]),
        ];
        let (_, back) = round_trip(&held);
        assert_eq!(back.runs(), 5);
        assert_eq!(expanded(&back), held);
        for (i, s) in held.iter().enumerate() {
            assert_eq!(back.get(i), Some(s), "node {i}");
        }
        assert_eq!(back.first(), held.first());
        let (_, empty) = round_trip(&[]);
        assert!(empty.is_empty() && empty.first().is_none() && empty.get(0).is_none());
    }

    #[test]
    fn equal_lists_compare_equal_however_they_were_built() {
        let a: Shares = vec![share(&[0], 1, &[]); 3].into();
        let mut b = Shares::default();
        b.push_run(2, share(&[0], 1, &[]));
        b.push(share(&[0], 1, &[]));
        assert_eq!(a, b);
        assert_eq!(b.runs(), 1);
    }

    #[test]
    fn frames_written_before_runs_still_read() {
        let held = vec![
            share(&[0], 10, &[]),
            share(&[0], 10, &[]),
            share(&[1], 10, &[]),
        ];
        let bytes = rmp_serde::to_vec_named(&Plain { held: held.clone() }).expect("encode");
        let back: Carrier = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(expanded(&back.held), held);
        assert_eq!(back.held.runs(), 2);
    }

    #[test]
    fn zero_and_oversized_runs_are_refused_by_name() {
        #[derive(Serialize)]
        struct ForgedRun {
            cpu_ids: Vec<u32>,
            mem_mb: u64,
            gres: Vec<GresAlloc>,
            repeat: u32,
        }
        #[derive(Serialize)]
        struct ForgedCarrier {
            held: Vec<ForgedRun>,
        }
        for (repeat, words) in [(0u32, "a run of 0"), (u32::MAX, "more than")] {
            let bytes = rmp_serde::to_vec_named(&ForgedCarrier {
                held: vec![ForgedRun {
                    cpu_ids: vec![0],
                    mem_mb: 1,
                    gres: Vec::new(),
                    repeat,
                }],
            })
            .expect("encode");
            let e = rmp_serde::from_slice::<Carrier>(&bytes).expect_err("refused");
            assert!(e.to_string().contains(words), "{e}");
        }
    }
}
