//! The timing model behind `canopy ping` and `canopy trace fanout`: turning
//! the stamps each daemon takes with its own clock into a per-hop breakdown,
//! folding many paths into percentiles, the slowest paths and the
//! stragglers, and folding the relays' records of one real broadcast into
//! the slowest subtree and the late nodes.
//!
//! Clocks differ between hosts, so no stamp is ever compared with another
//! host's. Each daemon reports only durations measured on its own monotonic
//! clock: how long the probe waited in its mailbox, how long it took to hand
//! it on, how long the hop below took to answer (from handing the probe to
//! the child's link to reading the child's answer off it), and the same two
//! waits on the way back. The wire time between a parent and a child is then
//! the parent's "below" time minus everything the child says it spent: a
//! round trip measured on one clock less a residence measured on another,
//! so the two clocks' offsets cancel and only their rates (ppm) remain. The
//! split of that round trip into "down" and "up" is not observable without
//! synchronised clocks; it is split evenly, as NTP does. Summed over the
//! hops, the lines equal the controller's own end-to-end time exactly
//! (telescoping sum), except where a child's residence exceeded its parent's
//! round trip (clock rate or rounding): that wire time is shown as 0 and the
//! excess is reported as `skew_us`, never hidden.
//!
//! This module owns the arithmetic only; the relay takes the stamps and the
//! CLI prints the results.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One daemon's share of a probe's round trip, microseconds on its own clock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopStamps {
    /// The daemon's rank (`None` = the controller).
    pub rank: Option<u32>,
    /// Read off the parent's link (or asked by the controller's RPC layer)
    /// until its relay handled it: the mailbox wait.
    pub queued_out_us: u64,
    /// Handled until handed to the child's link; at the target, until its
    /// node agent answered (the agent's mailbox included).
    pub handled_out_us: u64,
    /// Handed to the child's link until the child's answer was read off it.
    pub below_us: u64,
    /// The child's answer read until the relay handled it.
    pub queued_back_us: u64,
    /// Handled until this daemon's own answer was handed to its parent's
    /// link; for a node set this includes waiting for the siblings' answers.
    pub handled_back_us: u64,
}

impl HopStamps {
    /// Everything this daemon spent on the probe.
    pub fn residence_us(&self) -> u64 {
        self.queued_out_us
            + self.handled_out_us
            + self.below_us
            + self.queued_back_us
            + self.handled_back_us
    }
}

/// A probe's stamps along its path: the controller first, the target last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbePath {
    pub hops: Vec<HopStamps>,
}

impl ProbePath {
    /// The probed node (the last hop's rank).
    pub fn target(&self) -> Option<u32> {
        self.hops.last().and_then(|h| h.rank)
    }
}

fn us(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_micros() as u64
}

/// A relay's stamps for a probe it handed to `child`'s link, all on its own clock:
/// `received` (read off the parent link), `handled`, `sent` (to the child),
/// `back_read` (the child's answer read), `back_handled`, `answered` (own
/// answer handed upward).
pub fn hop_via_child(
    rank: Option<u32>,
    received: Instant,
    handled: Instant,
    sent: Instant,
    back: (Instant, Instant),
    answered: Instant,
) -> HopStamps {
    let (back_read, back_handled) = back;
    HopStamps {
        rank,
        queued_out_us: us(received, handled),
        handled_out_us: us(handled, sent),
        below_us: us(sent, back_read),
        queued_back_us: us(back_read, back_handled),
        handled_back_us: us(back_handled, answered),
    }
}

/// The target's stamps: `done` is when its node agent answered.
pub fn hop_at_target(
    rank: Option<u32>,
    received: Instant,
    handled: Instant,
    done: Instant,
    answered: Instant,
) -> HopStamps {
    HopStamps {
        rank,
        queued_out_us: us(received, handled),
        handled_out_us: us(handled, done),
        below_us: 0,
        queued_back_us: 0,
        handled_back_us: us(done, answered),
    }
}

/// One printed line: one hop's own times and the wire leg to the next hop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopLine {
    pub hop: usize,
    pub rank: Option<u32>,
    pub out_queued_us: u64,
    pub out_handled_us: u64,
    /// Wire to the next hop (half the measured round trip; 0 at the target).
    pub wire_down_us: u64,
    pub back_queued_us: u64,
    pub back_handled_us: u64,
    /// Wire from the next hop (the other half).
    pub wire_up_us: u64,
    /// The sum of this line.
    pub total_us: u64,
}

/// A probe's path cut into per-hop lines that sum to the end-to-end time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    pub lines: Vec<HopLine>,
    /// The controller's own measure, from asking its relay to the answer.
    pub end_to_end_us: u64,
    /// Time along this path without each hop's hold before answering (the
    /// wait for siblings' answers at a relay, for its subtree at a target
    /// that relays too): what ranks a node among the others of a node set.
    pub path_us: u64,
    /// Where a child reported more time than its parent's round trip to it:
    /// the excess (lines sum to `end_to_end_us + skew_us`).
    pub skew_us: u64,
}

/// Cut `path` into lines; see the module header for the model.
pub fn breakdown(path: &ProbePath) -> Breakdown {
    let hops = &path.hops;
    let mut lines = Vec::with_capacity(hops.len());
    let mut skew = 0u64;
    let mut path_us = 0u64;
    for (i, h) in hops.iter().enumerate() {
        let wire = match hops.get(i + 1) {
            Some(next) => {
                let child = next.residence_us();
                if child > h.below_us {
                    skew += child - h.below_us;
                    0
                } else {
                    h.below_us - child
                }
            }
            None => 0,
        };
        let down = wire / 2;
        let up = wire - down;
        let total =
            h.queued_out_us + h.handled_out_us + down + h.queued_back_us + h.handled_back_us + up;
        // handled_back is mostly waiting for the other answers a relay
        // gathers (siblings; at a target that relays too, its own subtree),
        // which is not this path's cost.
        path_us += h.queued_out_us + h.handled_out_us + wire + h.queued_back_us;
        lines.push(HopLine {
            hop: i,
            rank: h.rank,
            out_queued_us: h.queued_out_us,
            out_handled_us: h.handled_out_us,
            wire_down_us: down,
            back_queued_us: h.queued_back_us,
            back_handled_us: h.handled_back_us,
            wire_up_us: up,
            total_us: total,
        });
    }
    Breakdown {
        lines,
        end_to_end_us: hops.first().map_or(0, HopStamps::residence_us),
        path_us,
        skew_us: skew,
    }
}

/// Nearest-rank percentile of sorted `v` (`p` in 0..=100); 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The straggler rule, shared by ping and trace: later than twice the median
/// and at least a millisecond past it (so a fast, tight cluster does not call
/// 40 µs against 20 µs a straggler).
pub const STRAGGLER_FLOOR_US: u64 = 1000;

pub fn straggler_threshold(p50: u64) -> u64 {
    (p50 * 2).max(p50 + STRAGGLER_FLOOR_US)
}

/// Percentiles over a set of times.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Spread {
    pub fn of(values: &[u64]) -> Spread {
        let mut v = values.to_vec();
        v.sort_unstable();
        Spread {
            count: v.len() as u64,
            p50_us: percentile(&v, 50.0),
            p99_us: percentile(&v, 99.0),
            max_us: v.last().copied().unwrap_or(0),
        }
    }
}

/// Many probes' paths folded: percentiles, the slowest few, the stragglers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathFold {
    /// Over each path's `path_us`.
    pub spread: Spread,
    /// The `keep` slowest paths, slowest first: (target rank, breakdown).
    pub slowest: Vec<(u32, Breakdown)>,
    /// Targets past [`straggler_threshold`], slowest first.
    pub stragglers: Vec<u32>,
    /// Paths left out of `slowest` (they are still in the percentiles).
    pub omitted: u64,
}

/// Fold answered probes `(target, path)`; keeps the `keep` slowest.
pub fn fold_paths(paths: &[(u32, ProbePath)], keep: usize) -> PathFold {
    let mut timed: Vec<(u32, Breakdown)> = paths.iter().map(|(r, p)| (*r, breakdown(p))).collect();
    // Slowest first; ties by rank so the output is stable.
    timed.sort_by(|a, b| b.1.path_us.cmp(&a.1.path_us).then(a.0.cmp(&b.0)));
    let values: Vec<u64> = timed.iter().map(|(_, b)| b.path_us).collect();
    let spread = Spread::of(&values);
    let limit = straggler_threshold(spread.p50_us);
    let stragglers = timed
        .iter()
        .take_while(|(_, b)| b.path_us > limit)
        .map(|(r, _)| *r)
        .collect();
    let omitted = timed.len().saturating_sub(keep) as u64;
    timed.truncate(keep);
    PathFold {
        spread,
        slowest: timed,
        stragglers,
        omitted,
    }
}

// ---------------------------------------------------------------------------
// Fan-out records: one real broadcast, as each relay saw it.

/// One child's leg of a fan-out, offsets in µs from when the relay handled it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    pub child: u32,
    /// Targets routed through this child.
    pub targets: u64,
    pub sent_us: u64,
    /// When the child's answer was read (`None`: it never answered).
    pub back_us: Option<u64>,
    /// Targets of this leg that failed.
    pub failed: u64,
}

/// What one relay kept about one fan-out (a bounded ring of these).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanoutRecord {
    /// The controller's id for the broadcast, carried in every `Forward`.
    pub origin: u64,
    /// The command's kind (`Launch`, `Signal`, `Terminate`, ...); borrowed
    /// in the relays' rings, so a record costs no allocation for it.
    pub kind: std::borrow::Cow<'static, str>,
    pub job_id: Option<u32>,
    pub rank: Option<u32>,
    /// Wall-clock seconds when this relay handled it (for display only).
    pub started: i64,
    pub targets: u64,
    /// Read off the parent link until handled.
    pub queued_us: u64,
    pub legs: Vec<Leg>,
    /// This node's own part (its agent's answer), from handled.
    pub local_us: Option<u64>,
    /// Handled until the answer went upward.
    pub done_us: u64,
}

/// Which records a `canopy trace fanout` means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FanoutPick {
    /// The latest of this kind (any kind when empty).
    Last(String),
    /// The latest broadcast for this job.
    Job(u32),
}

/// The latest record of `ring` (oldest first) matching `pick`; console
/// commands' own fan-outs are never recorded, so they never match.
pub fn pick<'a>(
    ring: impl DoubleEndedIterator<Item = &'a FanoutRecord>,
    pick: &FanoutPick,
) -> Option<&'a FanoutRecord> {
    ring.rev().find(|r| match pick {
        FanoutPick::Last(k) => k.is_empty() || r.kind.eq_ignore_ascii_case(k),
        FanoutPick::Job(j) => r.job_id == Some(*j),
    })
}

/// A subtree of the controller, as its root saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtreeTime {
    pub child: u32,
    pub targets: u64,
    /// From handing it to the child's link to its answer (`None`: none came).
    pub rtt_us: Option<u64>,
    pub failed: u64,
}

/// One broadcast folded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanoutFold {
    pub origin: u64,
    pub kind: String,
    pub job_id: Option<u32>,
    pub started: i64,
    pub targets: u64,
    /// The controller's time from handling to the last answer.
    pub total_us: u64,
    /// The controller's children, slowest first.
    pub subtrees: Vec<SubtreeTime>,
    /// From the controller down, the slowest child at each level: (rank, rtt).
    pub critical_path: Vec<(u32, u64)>,
    /// When each node finished its own part, µs after the controller
    /// handled the broadcast (estimated on the controller's clock: each
    /// leg's wire time is split evenly, as for ping).
    pub node_done: Spread,
    /// Nodes past the straggler threshold, latest first: (rank, µs).
    pub late: Vec<(u32, u64)>,
    /// Nodes whose answer never reached their parent.
    pub unanswered: Vec<u32>,
    /// Nodes reached but holding no record of it (restarted, or the ring moved on).
    pub no_record: Vec<u32>,
}

/// Fold the controller's record `root` and the nodes' `records` (by rank).
pub fn fold_fanout(root: &FanoutRecord, records: &HashMap<u32, FanoutRecord>) -> FanoutFold {
    let mut fold = FanoutFold {
        origin: root.origin,
        kind: root.kind.to_string(),
        job_id: root.job_id,
        started: root.started,
        targets: root.targets,
        total_us: root.done_us,
        ..Default::default()
    };
    fold.subtrees = root
        .legs
        .iter()
        .map(|l| SubtreeTime {
            child: l.child,
            targets: l.targets,
            rtt_us: l.back_us.map(|b| b.saturating_sub(l.sent_us)),
            failed: l.failed,
        })
        .collect();
    // Unanswered first (the worst), then by round trip, slowest first.
    fold.subtrees.sort_by(|a, b| {
        rtt_key(b.rtt_us)
            .cmp(&rtt_key(a.rtt_us))
            .then(a.child.cmp(&b.child))
    });
    // The critical path: follow the slowest leg down.
    let mut at = root;
    let mut seen = 0;
    while let Some(l) = at.legs.iter().max_by_key(|l| {
        (
            rtt_key(l.back_us.map(|b| b.saturating_sub(l.sent_us))),
            std::cmp::Reverse(l.child),
        )
    }) {
        fold.critical_path.push((
            l.child,
            l.back_us.map_or(0, |b| b.saturating_sub(l.sent_us)),
        ));
        seen += 1;
        match records.get(&l.child) {
            Some(r) if seen < 64 => at = r,
            _ => break,
        }
    }
    let placed = place(root, records);
    fold.unanswered = placed.unanswered;
    fold.no_record = placed.no_record;
    let done = placed.done;
    let values: Vec<u64> = done.values().copied().collect();
    fold.node_done = Spread::of(&values);
    let limit = straggler_threshold(fold.node_done.p50_us);
    let mut late: Vec<(u32, u64)> = done.into_iter().filter(|(_, t)| *t > limit).collect();
    late.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    fold.late = late;
    fold
}

/// Every node of a broadcast placed on the controller's clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// When each node finished its own part, µs after the controller handled it.
    pub done: BTreeMap<u32, u64>,
    pub unanswered: Vec<u32>,
    pub no_record: Vec<u32>,
}

/// Walk the records from the controller's down. A child's start is its
/// parent's start, plus when the parent handed it on, plus half the wire
/// round trip (the parent's round trip to it less the child's own time),
/// plus the child's mailbox wait. Exact when the wire is symmetric.
pub fn place(root: &FanoutRecord, records: &HashMap<u32, FanoutRecord>) -> Placement {
    let mut out = Placement::default();
    let mut queue: Vec<(&FanoutRecord, u64)> = vec![(root, 0)];
    let mut guard = 0usize;
    while let Some((rec, start)) = queue.pop() {
        guard += 1;
        if guard > records.len() + 1 {
            break; // a cycle in bad records must not loop forever
        }
        if let (Some(rank), Some(local)) = (rec.rank, rec.local_us) {
            out.done.insert(rank, start + local);
        }
        for l in &rec.legs {
            let Some(back) = l.back_us else {
                out.unanswered.push(l.child);
                continue;
            };
            let Some(child) = records.get(&l.child) else {
                out.no_record.push(l.child);
                continue;
            };
            let rtt = back.saturating_sub(l.sent_us);
            let wire = rtt.saturating_sub(child.queued_us + child.done_us);
            queue.push((child, start + l.sent_us + wire / 2 + child.queued_us));
        }
    }
    out.unanswered.sort_unstable();
    out.no_record.sort_unstable();
    out
}

/// Sort key: no answer is slower than any answer.
fn rtt_key(rtt: Option<u64>) -> u64 {
    rtt.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hop(rank: Option<u32>, q: u64, h: u64, below: u64, qb: u64, hb: u64) -> HopStamps {
        HopStamps {
            rank,
            queued_out_us: q,
            handled_out_us: h,
            below_us: below,
            queued_back_us: qb,
            handled_back_us: hb,
        }
    }

    /// A path built from "true" per-hop times on one timeline: wire legs
    /// `wires[i]` (down, up) between hop i and i+1, and each hop's own times.
    fn simulated(own: &[(u64, u64, u64, u64)], wires: &[(u64, u64)]) -> ProbePath {
        // Residence of the deepest hop first, then each parent's below time.
        let n = own.len();
        let mut hops = vec![HopStamps::default(); n];
        let mut below_child = 0;
        for i in (0..n).rev() {
            let (q, h, qb, hb) = own[i];
            let below = if i + 1 < n {
                wires[i].0 + below_child + wires[i].1
            } else {
                0
            };
            hops[i] = hop(
                if i == 0 { None } else { Some(i as u32) },
                q,
                h,
                below,
                qb,
                hb,
            );
            below_child = hops[i].residence_us();
        }
        ProbePath { hops }
    }

    #[test]
    fn lines_sum_to_the_end_to_end_time() {
        let own = [(5, 20, 3, 7), (40, 10, 2, 9), (1, 2, 3, 4), (8, 300, 0, 6)];
        let wires = [(100, 120), (50, 50), (1000, 30)];
        let path = simulated(&own, &wires);
        let b = breakdown(&path);
        assert_eq!(b.lines.len(), 4);
        let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
        assert_eq!(sum, b.end_to_end_us);
        assert_eq!(b.skew_us, 0);
        // Each hop's own times come through as stamped.
        assert_eq!(b.lines[1].out_queued_us, 40);
        assert_eq!(b.lines[3].out_handled_us, 300);
        // The round trip between hops is recovered exactly; its split is even.
        for (i, (d, u)) in wires.iter().enumerate() {
            assert_eq!(
                b.lines[i].wire_down_us + b.lines[i].wire_up_us,
                d + u,
                "leg {i}"
            );
        }
        assert_eq!(b.lines[2].wire_down_us, 515);
        assert_eq!(b.lines[3].wire_down_us + b.lines[3].wire_up_us, 0);
    }

    #[test]
    fn a_child_that_reports_more_than_its_parent_saw_is_skew_not_negative_wire() {
        let path = ProbePath {
            hops: vec![hop(None, 0, 0, 100, 0, 0), hop(Some(1), 60, 60, 0, 0, 0)],
        };
        let b = breakdown(&path);
        assert_eq!(b.lines[0].wire_down_us, 0);
        assert_eq!(b.skew_us, 20);
        let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
        assert_eq!(sum, b.end_to_end_us + b.skew_us);
    }

    #[test]
    fn path_time_leaves_out_waiting_for_siblings() {
        // The relay held the answer 500 µs for its other children.
        let own = [(0, 10, 0, 500), (0, 5, 0, 1)];
        let path = simulated(&own, &[(20, 20)]);
        let b = breakdown(&path);
        assert_eq!(b.end_to_end_us, 10 + 20 + 5 + 1 + 20 + 500);
        assert_eq!(b.path_us, 10 + 20 + 5 + 20);
    }

    #[test]
    fn stamps_from_instants_are_per_clock_differences() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        let h = hop_via_child(Some(3), t, ms(1), ms(3), (ms(10), ms(11)), ms(15));
        assert_eq!(h, hop(Some(3), 1000, 2000, 7000, 1000, 4000));
        let leaf = hop_at_target(Some(9), t, ms(2), ms(5), ms(5));
        assert_eq!(leaf, hop(Some(9), 2000, 3000, 0, 0, 0));
        // Out of order instants (a stamp missing, say) never underflow.
        let odd = hop_via_child(None, ms(5), t, t, (t, t), t);
        assert_eq!(odd.queued_out_us, 0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 50.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn a_set_folds_into_the_slowest_and_the_stragglers() {
        // 20 nodes answering in ~100 µs, two at 5 ms and 9 ms.
        let mut paths = Vec::new();
        for r in 0..22u32 {
            let t = match r {
                7 => 5000,
                13 => 9000,
                _ => 100 + u64::from(r),
            };
            paths.push((r, simulated(&[(0, 0, 0, 0), (0, t, 0, 0)], &[(10, 10)])));
        }
        let f = fold_paths(&paths, 3);
        assert_eq!(f.spread.count, 22);
        assert_eq!(f.stragglers, vec![13, 7]);
        assert_eq!(f.slowest.len(), 3);
        assert_eq!(f.slowest[0].0, 13);
        assert_eq!(f.slowest[1].0, 7);
        assert_eq!(f.omitted, 19);
        assert_eq!(f.spread.max_us, 9020);
    }

    #[test]
    fn a_tight_cluster_has_no_stragglers() {
        let paths: Vec<(u32, ProbePath)> = (0..10)
            .map(|r| {
                (
                    r,
                    simulated(
                        &[(0, 0, 0, 0), (0, 30 + u64::from(r) * 10, 0, 0)],
                        &[(5, 5)],
                    ),
                )
            })
            .collect();
        assert!(fold_paths(&paths, 5).stragglers.is_empty());
    }

    fn leg(child: u32, sent: u64, back: Option<u64>) -> Leg {
        Leg {
            child,
            targets: 1,
            sent_us: sent,
            back_us: back,
            failed: 0,
        }
    }

    #[test]
    fn a_fanout_folds_into_its_slowest_subtree_and_late_nodes() {
        // controller -> {0, 1}; 0 -> {2, 3}; 1 -> {4}. Node 3 is late.
        let root = FanoutRecord {
            origin: 9,
            kind: "Launch".into(),
            targets: 5,
            legs: vec![leg(0, 10, Some(20_000)), leg(1, 12, Some(900))],
            done_us: 20_100,
            ..Default::default()
        };
        let rec = |rank, legs, local, done| FanoutRecord {
            origin: 9,
            rank: Some(rank),
            queued_us: 5,
            legs,
            local_us: Some(local),
            done_us: done,
            ..Default::default()
        };
        let mut records = HashMap::new();
        records.insert(
            0,
            rec(
                0,
                vec![leg(2, 20, Some(400)), leg(3, 25, Some(19_000))],
                50,
                19_200,
            ),
        );
        records.insert(1, rec(1, vec![leg(4, 20, Some(300))], 60, 400));
        records.insert(2, rec(2, vec![], 100, 150));
        records.insert(3, rec(3, vec![], 18_000, 18_100));
        records.insert(4, rec(4, vec![], 120, 140));
        let f = fold_fanout(&root, &records);
        assert_eq!(f.subtrees[0].child, 0);
        assert_eq!(f.subtrees[0].rtt_us, Some(19_990));
        assert_eq!(
            f.critical_path.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert_eq!(f.node_done.count, 5);
        assert_eq!(f.late.len(), 1);
        assert_eq!(f.late[0].0, 3);
        assert!(f.unanswered.is_empty() && f.no_record.is_empty());
    }

    #[test]
    fn a_fanout_says_who_never_answered_and_who_kept_no_record() {
        let root = FanoutRecord {
            legs: vec![leg(0, 1, None), leg(1, 1, Some(50))],
            ..Default::default()
        };
        let f = fold_fanout(&root, &HashMap::new());
        assert_eq!(f.unanswered, vec![0]);
        assert_eq!(f.no_record, vec![1]);
        // The child that never answered is the slowest subtree.
        assert_eq!(f.subtrees[0].child, 0);
    }

    #[test]
    fn the_latest_matching_record_is_picked() {
        let ring = [
            FanoutRecord {
                origin: 1,
                kind: "Launch".into(),
                job_id: Some(5),
                ..Default::default()
            },
            FanoutRecord {
                origin: 2,
                kind: "Signal".into(),
                job_id: Some(5),
                ..Default::default()
            },
            FanoutRecord {
                origin: 3,
                kind: "Launch".into(),
                job_id: Some(6),
                ..Default::default()
            },
        ];
        assert_eq!(
            pick(ring.iter(), &FanoutPick::Last("launch".into())).map(|r| r.origin),
            Some(3)
        );
        assert_eq!(
            pick(ring.iter(), &FanoutPick::Job(5)).map(|r| r.origin),
            Some(2)
        );
        assert_eq!(
            pick(ring.iter(), &FanoutPick::Last(String::new())).map(|r| r.origin),
            Some(3)
        );
        assert_eq!(pick(ring.iter(), &FanoutPick::Job(7)), None);
    }

    /// Seeded: random paths from "true" per-hop times; the breakdown must
    /// recover every round trip and, with symmetric wires, each direction.
    #[test]
    fn seeded_paths_break_down_exactly() {
        let seed = 0x5eed_0001;
        println!("seed {seed:#x}");
        let mut rng = crate::tree::test_rng::Lcg::new(seed);
        for case in 0..500 {
            let depth = 1 + rng.below(8) as usize;
            let own: Vec<(u64, u64, u64, u64)> = (0..=depth)
                .map(|_| {
                    (
                        u64::from(rng.below(500)),
                        u64::from(rng.below(500)),
                        u64::from(rng.below(500)),
                        u64::from(rng.below(500)),
                    )
                })
                .collect();
            let symmetric = rng.chance(50);
            let wires: Vec<(u64, u64)> = (0..depth)
                .map(|_| {
                    let d = u64::from(rng.below(5000));
                    (
                        d,
                        if symmetric {
                            d
                        } else {
                            u64::from(rng.below(5000))
                        },
                    )
                })
                .collect();
            let b = breakdown(&simulated(&own, &wires));
            let sum: u64 = b.lines.iter().map(|l| l.total_us).sum();
            assert_eq!(sum, b.end_to_end_us, "case {case}");
            assert_eq!(b.skew_us, 0, "case {case}");
            for (i, (d, u)) in wires.iter().enumerate() {
                let l = &b.lines[i];
                assert_eq!(l.wire_down_us + l.wire_up_us, d + u, "case {case} leg {i}");
                if symmetric {
                    assert_eq!(
                        (l.wire_down_us, l.wire_up_us),
                        (*d, *u),
                        "case {case} leg {i}"
                    );
                }
            }
        }
    }

    /// Seeded: a broadcast simulated on one true timeline over a real tree
    /// layout (each daemon's offsets on its own clock, symmetric wires); the
    /// placement must put every node's finish exactly where it happened.
    #[test]
    fn seeded_broadcasts_are_placed_exactly() {
        use crate::tree::topology::Topology;
        let seed = 0x5eed_0002;
        println!("seed {seed:#x}");
        let mut rng = crate::tree::test_rng::Lcg::new(seed);
        for case in 0..50 {
            let n = 1 + rng.below(300);
            let w = 2 + rng.below(8);
            let topo = Topology::new(n, w).unwrap();
            let mut records = HashMap::new();
            let mut truth = BTreeMap::new();
            // Returns (record, absolute answer time) for `me` handled at `handled`.
            #[allow(clippy::too_many_arguments)]
            fn sim(
                topo: &Topology,
                me: Option<u32>,
                handled: u64,
                queued: u64,
                rng: &mut crate::tree::test_rng::Lcg,
                records: &mut HashMap<u32, FanoutRecord>,
                truth: &mut BTreeMap<u32, u64>,
            ) -> (FanoutRecord, u64) {
                let gap = u64::from(rng.below(50)) + 1;
                let local = me.map(|_| u64::from(rng.below(3000)));
                let mut last = handled + local.unwrap_or(0);
                let mut legs = Vec::new();
                for (i, c) in topo.children(me).into_iter().enumerate() {
                    let sent = handled + gap * (i as u64 + 1);
                    let wire = u64::from(rng.below(2000));
                    let q = u64::from(rng.below(300));
                    let child_handled = sent + wire + q;
                    let (rec, answered) = sim(topo, Some(c), child_handled, q, rng, records, truth);
                    let back = answered + wire;
                    last = last.max(back);
                    legs.push(Leg {
                        child: c,
                        targets: 1,
                        sent_us: sent - handled,
                        back_us: Some(back - handled),
                        failed: 0,
                    });
                    records.insert(c, rec);
                }
                if let (Some(r), Some(l)) = (me, local) {
                    truth.insert(r, handled + l);
                }
                let answered = last + u64::from(rng.below(100));
                let rec = FanoutRecord {
                    rank: me,
                    queued_us: queued,
                    legs,
                    local_us: local,
                    done_us: answered - handled,
                    ..Default::default()
                };
                (rec, answered)
            }
            let (root, _) = sim(&topo, None, 0, 0, &mut rng, &mut records, &mut truth);
            let placed = place(&root, &records);
            assert_eq!(placed.done, truth, "case {case}: n={n} w={w}");
            assert!(placed.unanswered.is_empty() && placed.no_record.is_empty());
            let f = fold_fanout(&root, &records);
            assert_eq!(f.node_done.count, u64::from(n), "case {case}");
        }
    }
}
