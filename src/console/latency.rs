//! Latency histograms of the controller (`canopy stats`, sdiag): per message
//! kind, per user and per tree depth, each an HDR histogram, so p50, p99 and
//! p99.9 are exact to 1% rather than hidden in an average.
//!
//! A plain struct: recording takes the measured time, and nothing here reads
//! a clock or does I/O. The shared wrapper the daemon uses is [`Latency`].
//! Snapshots are plain serialisable rows ([`LatencyRow`]) with cumulative
//! buckets, ready to be served as OpenMetrics histograms later.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest value recorded (µs); longer ones are counted at this value.
const HIGHEST_US: u64 = 3_600_000_000;
/// Two significant figures: 1% precision, ~25 KiB per histogram.
const SIGFIG: u8 = 2;
/// Users tracked separately; the rest are counted under [`OTHER_USERS`] (a
/// bound on memory whatever the number of users).
pub const MAX_USERS: usize = 256;
/// The key that collects users beyond [`MAX_USERS`].
pub const OTHER_USERS: &str = "other";
/// Upper bounds (µs) of the cumulative buckets exported with each row.
pub const BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 250_000, 1_000_000, 10_000_000,
];

/// One histogram as plain numbers (times in µs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    /// The kind, the user (name or uid) or the depth.
    pub key: String,
    pub count: u64,
    pub mean_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// (upper bound µs, count at or below it), cumulative, for a metrics
    /// endpoint's histogram buckets.
    #[serde(default)]
    pub buckets: Vec<(u64, u64)>,
}

/// The controller's histograms at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// When recording started (controller start or the last reset), Unix time.
    pub since: i64,
    /// Client requests: time from reading the request to sending the reply.
    pub by_kind: Vec<LatencyRow>,
    /// Client requests by the user who sent them.
    pub by_user: Vec<LatencyRow>,
    /// Fan-outs through the relay tree by the depth of their deepest target:
    /// time from the first send to the last outcome.
    pub by_depth: Vec<LatencyRow>,
    /// Users folded into `other` because more than [`MAX_USERS`] were seen.
    #[serde(default)]
    pub users_folded: u64,
}

fn new_hist() -> Histogram<u32> {
    // Bounds and sigfig are constants that hdrhistogram accepts; the fallback
    // only guards a future change to them.
    Histogram::new_with_bounds(1, HIGHEST_US, SIGFIG)
        .or_else(|_| Histogram::new(SIGFIG))
        .unwrap_or_else(|_| Histogram::new(3).expect("sigfig 3 is valid"))
}

/// The histograms themselves.
pub struct LatencyBook {
    since: i64,
    kinds: BTreeMap<String, Histogram<u32>>,
    users: BTreeMap<String, Histogram<u32>>,
    depths: BTreeMap<u32, Histogram<u32>>,
    users_folded: u64,
}

impl LatencyBook {
    pub fn new(since: i64) -> LatencyBook {
        LatencyBook {
            since,
            kinds: BTreeMap::new(),
            users: BTreeMap::new(),
            depths: BTreeMap::new(),
            users_folded: 0,
        }
    }

    /// A client request of `kind` from `user` answered in `took_us`.
    pub fn record_request(&mut self, kind: &str, user: &str, took_us: u64) {
        let v = took_us.clamp(1, HIGHEST_US);
        self.kinds
            .entry(kind.to_string())
            .or_insert_with(new_hist)
            .saturating_record(v);
        let key = if self.users.contains_key(user) || self.users.len() < MAX_USERS {
            user
        } else {
            self.users_folded += 1;
            OTHER_USERS
        };
        self.users
            .entry(key.to_string())
            .or_insert_with(new_hist)
            .saturating_record(v);
    }

    /// A fan-out whose deepest target was `depth` levels below the controller.
    pub fn record_fanout(&mut self, depth: u32, took_us: u64) {
        self.depths
            .entry(depth)
            .or_insert_with(new_hist)
            .saturating_record(took_us.clamp(1, HIGHEST_US));
    }

    pub fn report(&self) -> LatencyReport {
        LatencyReport {
            since: self.since,
            by_kind: self.kinds.iter().map(|(k, h)| row(k.clone(), h)).collect(),
            by_user: self.users.iter().map(|(k, h)| row(k.clone(), h)).collect(),
            by_depth: self
                .depths
                .iter()
                .map(|(d, h)| row(d.to_string(), h))
                .collect(),
            users_folded: self.users_folded,
        }
    }

    /// Start again from empty (`canopy stats --reset`, `sdiag --reset`).
    pub fn reset(&mut self, now: i64) {
        *self = LatencyBook::new(now);
    }
}

fn row(key: String, h: &Histogram<u32>) -> LatencyRow {
    let buckets = BUCKETS_US
        .iter()
        .map(|&le| (le, h.count_between(0, le)))
        .collect();
    LatencyRow {
        key,
        count: h.len(),
        mean_us: h.mean().round() as u64,
        p50_us: h.value_at_quantile(0.50),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        max_us: h.max(),
        buckets,
    }
}

/// The book shared by the controller's connection tasks. The controller's
/// tasks run on one thread, so the lock is never contended.
pub struct Latency {
    inner: Mutex<LatencyBook>,
}

impl Latency {
    pub fn new(since: i64) -> Latency {
        Latency {
            inner: Mutex::new(LatencyBook::new(since)),
        }
    }

    pub fn record_request(&self, kind: &str, user: &str, took_us: u64) {
        if let Ok(mut b) = self.inner.lock() {
            b.record_request(kind, user, took_us);
        }
    }

    pub fn record_fanout(&self, depth: u32, took_us: u64) {
        if let Ok(mut b) = self.inner.lock() {
            b.record_fanout(depth, took_us);
        }
    }

    pub fn report(&self) -> LatencyReport {
        self.inner.lock().map(|b| b.report()).unwrap_or_default()
    }

    pub fn reset(&self, now: i64) {
        if let Ok(mut b) = self.inner.lock() {
            b.reset(now);
        }
    }
}

/// `850us`, `12.3ms`, `1.20s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// The percentile table `canopy stats` and sdiag print.
pub fn render(r: &LatencyReport) -> String {
    let mut out = String::new();
    let section = |title: &str, rows: &[LatencyRow], out: &mut String| {
        if rows.is_empty() {
            return;
        }
        out.push_str(&format!(
            "{:<24} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            title, "COUNT", "MEAN", "P50", "P99", "P99.9", "MAX"
        ));
        for r in rows {
            out.push_str(&format!(
                "{:<24} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                r.key,
                r.count,
                fmt_us(r.mean_us),
                fmt_us(r.p50_us),
                fmt_us(r.p99_us),
                fmt_us(r.p999_us),
                fmt_us(r.max_us)
            ));
        }
        out.push('\n');
    };
    section("MESSAGE KIND", &r.by_kind, &mut out);
    section("USER", &r.by_user, &mut out);
    section("FAN-OUT DEPTH", &r.by_depth, &mut out);
    if r.users_folded > 0 {
        out.push_str(&format!(
            "({} requests from users beyond the first {MAX_USERS} are counted under '{OTHER_USERS}')\n",
            r.users_folded
        ));
    }
    if out.is_empty() {
        out.push_str("no requests recorded since the last reset\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_a_sorted_oracle_within_one_percent() {
        let mut b = LatencyBook::new(0);
        // 1..=1000 µs plus a tail: p50 ≈ 500, p99 ≈ 990, max = 50 ms.
        let mut values: Vec<u64> = (1..=1000).collect();
        values.extend([20_000, 50_000]);
        for &v in &values {
            b.record_request("QueryJobs", "alice", v);
        }
        let r = b.report();
        let row = &r.by_kind[0];
        values.sort_unstable();
        let oracle = |q: f64| values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
        for (got, q) in [(row.p50_us, 0.5), (row.p99_us, 0.99), (row.p999_us, 0.999)] {
            let want = oracle(q) as f64;
            assert!(
                (got as f64 - want).abs() <= want * 0.01 + 1.0,
                "q{q}: got {got}, want {want}"
            );
        }
        assert_eq!(row.count, 1002);
        assert!((row.max_us as f64 - 50_000.0).abs() <= 500.0);
        assert_eq!(r.by_user[0].key, "alice");
        assert_eq!(r.by_user[0].count, 1002);
        // Buckets are cumulative and end at the total.
        let counts: Vec<u64> = row.buckets.iter().map(|(_, c)| *c).collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        assert_eq!(*counts.last().unwrap(), 1002);
    }

    #[test]
    fn users_beyond_the_bound_fold_into_other_and_reset_empties() {
        let mut b = LatencyBook::new(5);
        for u in 0..(MAX_USERS + 10) {
            b.record_request("Ping", &format!("u{u}"), 10);
        }
        let r = b.report();
        assert_eq!(r.by_user.len(), MAX_USERS + 1);
        assert_eq!(r.users_folded, 10);
        let other = r.by_user.iter().find(|r| r.key == OTHER_USERS).unwrap();
        assert_eq!(other.count, 10);
        b.record_fanout(3, 1200);
        assert_eq!(b.report().by_depth[0].key, "3");
        b.reset(99);
        let r = b.report();
        assert_eq!(r.since, 99);
        assert!(r.by_kind.is_empty() && r.by_user.is_empty() && r.by_depth.is_empty());
        assert!(render(&r).contains("no requests recorded"));
    }
}
