//! The `held` field of launch messages on the wire: runs of identical node shares.
//!
//! A launch carries every node's share (`JobLaunch::held`, `StepLaunch::held`) and
//! every node of the tree decodes it, so a K-node launch moved O(K²) shares over the
//! fan-out. Most jobs hold the same on each node (`srun -N 512 true`: one CPU and the
//! same memory everywhere), so consecutive equal shares travel as one entry with a
//! `repeat` count. In memory the field stays one `NodeShare` per node.
//!
//! Each entry is a `NodeShare` with an optional `repeat` key (absent = 1), so frames
//! written before runs existed read unchanged.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::messages::NodeShare;
use crate::model::tres::GresAlloc;

/// Most shares one message may expand to: more nodes than any cluster has, yet a
/// bound, so that a forged repeat count cannot make a node allocate without end.
pub const MAX_SHARES: usize = 1 << 20;

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

/// Consecutive equal shares as runs.
fn runs(held: &[NodeShare]) -> Vec<RunRef<'_>> {
    let mut out: Vec<RunRef<'_>> = Vec::new();
    for share in held {
        if let Some(last) = out.last_mut() {
            if last.repeat < u32::MAX
                && last.mem_mb == share.mem_mb
                && last.cpu_ids == share.cpu_ids.as_slice()
                && last.gres == share.gres.as_slice()
            {
                last.repeat += 1;
                continue;
            }
        }
        out.push(RunRef {
            cpu_ids: &share.cpu_ids,
            mem_mb: share.mem_mb,
            gres: &share.gres,
            repeat: 1,
        });
    }
    out
}

pub fn serialize<S: Serializer>(held: &[NodeShare], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(runs(held))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<NodeShare>, D::Error> {
    let runs = Vec::<Run>::deserialize(d)?;
    let mut total = 0usize;
    for run in &runs {
        if run.repeat == 0 {
            return Err(D::Error::custom("held: a run of 0 node shares"));
        }
        total = total.saturating_add(run.repeat as usize);
    }
    if total > MAX_SHARES {
        return Err(D::Error::custom(format!(
            "held: {total} node shares, more than the {MAX_SHARES} a message may carry"
        )));
    }
    let mut out = Vec::with_capacity(total);
    for run in runs {
        let share = NodeShare {
            cpu_ids: run.cpu_ids,
            mem_mb: run.mem_mb,
            gres: run.gres,
        };
        out.extend(std::iter::repeat_n(share, run.repeat as usize));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Carrier {
        #[serde(default, with = "super")]
        held: Vec<NodeShare>,
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

    fn round_trip(held: Vec<NodeShare>) -> (Vec<u8>, Carrier) {
        let bytes = rmp_serde::to_vec_named(&Carrier { held }).expect("encode");
        let back: Carrier = rmp_serde::from_slice(&bytes).expect("decode");
        (bytes, back)
    }

    #[test]
    fn equal_shares_travel_as_one_run_and_come_back_one_per_node() {
        let held = vec![share(&[0], 100, &[]); 512];
        let (bytes, back) = round_trip(held.clone());
        assert_eq!(back.held, held);
        let one = rmp_serde::to_vec_named(&Plain {
            held: vec![share(&[0], 100, &[])],
        })
        .expect("encode");
        // One entry plus its count, whatever the node count.
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
        assert_eq!(round_trip(held.clone()).1.held, held);
        assert_eq!(round_trip(Vec::new()).1.held, Vec::new());
    }

    #[test]
    fn frames_written_before_runs_still_read() {
        let held = vec![share(&[0], 10, &[]), share(&[0], 10, &[]), share(&[1], 10, &[])];
        let bytes = rmp_serde::to_vec_named(&Plain { held: held.clone() }).expect("encode");
        let back: Carrier = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(back.held, held);
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
            let e = rmp_serde::from_slice::<Carrier>(&bytes)
                .err()
                .expect("refused");
            assert!(e.to_string().contains(words), "{e}");
        }
    }
}
