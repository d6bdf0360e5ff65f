//! Decayed usage per association, what fair share weighs: each running
//! job adds billing × seconds (× its QOS's UsageFactor) to its association
//! and every ancestor; all of it decays with `PriorityDecayHalfLife` and is
//! cleared by `PriorityUsageResetPeriod`. Pure (times are passed in); the
//! controller stores the book whole ([`crate::state::store::Op::PutUsage`])
//! so usage survives a restart, and the jobs' ages with it
//! ([`crate::state::store::Op::PutAges`]).

use std::collections::BTreeMap;

use chrono::{Datelike, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::config::priority::ResetPeriod;
use crate::model::time::UnixTime;

/// Usage by association key (see `ShareTree::key`), and when it was last
/// decayed and reset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageBook {
    pub raw: BTreeMap<String, f64>,
    /// The last accrual and decay: running jobs have been counted up to
    /// here.
    pub last_calc: Option<UnixTime>,
    /// The last reset (`PriorityUsageResetPeriod`); `None` before the first.
    pub last_reset: Option<UnixTime>,
    /// Pending jobs eligible to run → since when (their age counts from
    /// there). Stored apart ([`crate::state::store::Op::PutAges`], at each
    /// calculation only): a job's end rewrites the usage, and should not
    /// rewrite an entry per pending job with it.
    #[serde(skip)]
    pub accrue: BTreeMap<u32, UnixTime>,
    /// What `GrpTRESMins`/`GrpWall` are compared with, per association
    /// key (as `raw`): each TRES's seconds and wall seconds, decayed and
    /// reset with `raw` (Slurm's `usage_tres_raw` and `grp_used_wall`).
    pub assoc_use: BTreeMap<String, GroupUse>,
    /// The same per QOS name.
    pub qos_use: BTreeMap<String, GroupUse>,
}

/// One association's or QOS's usage for the minutes limits: TRES-seconds
/// by TRES name (`cpu`, `mem` in MiB, `node`, `billing`, `gres/gpu`) and
/// wall seconds, each × the job's QOS `UsageFactor`, decayed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupUse {
    pub tres: BTreeMap<String, f64>,
    pub wall: f64,
}

impl GroupUse {
    fn scale(&mut self, f: f64) {
        for v in self.tres.values_mut() {
            *v *= f;
        }
        self.wall *= f;
    }

    /// Add `secs` (already decayed and × the usage factor) of a job
    /// holding `tres`.
    pub fn add(&mut self, tres: &BTreeMap<String, u64>, secs: f64) {
        if secs.is_nan() || secs <= 0.0 {
            return;
        }
        for (k, n) in tres {
            *self.tres.entry(k.clone()).or_insert(0.0) += *n as f64 * secs;
        }
        self.wall += secs;
    }

    /// Whole minutes used of each TRES, as Slurm truncates them.
    pub fn tres_mins(&self, name: &str) -> u64 {
        (self.tres.get(name).copied().unwrap_or(0.0) / 60.0) as u64
    }

    /// Whole wall minutes used.
    pub fn wall_mins(&self) -> u64 {
        (self.wall / 60.0) as u64
    }
}

/// What is left of usage after `elapsed` seconds: `0.5^(elapsed/half_life)`
/// (half-life 0 means no decay).
pub fn decay_factor(elapsed_s: f64, half_life_s: u64) -> f64 {
    if half_life_s == 0 || elapsed_s <= 0.0 {
        1.0
    } else {
        0.5f64.powf(elapsed_s / half_life_s as f64)
    }
}

impl UsageBook {
    /// Decay everything from `last_calc` to `now`.
    pub fn decay_to(&mut self, now: UnixTime, half_life_s: u64) {
        let Some(last) = self.last_calc else {
            return;
        };
        let f = decay_factor((now - last) as f64, half_life_s);
        if f < 1.0 {
            for v in self.raw.values_mut() {
                *v *= f;
            }
            for g in self.assoc_use.values_mut().chain(self.qos_use.values_mut()) {
                g.scale(f);
            }
        }
    }

    /// Add `amount` to each of `keys` (an association and its ancestors).
    pub fn add(&mut self, keys: &[String], amount: f64) {
        // Nothing to add (and never a NaN or a negative amount).
        if amount.is_nan() || amount <= 0.0 {
            return;
        }
        for k in keys {
            *self.raw.entry(k.clone()).or_insert(0.0) += amount;
        }
    }

    /// Forget all usage (a reset).
    pub fn clear(&mut self) {
        self.raw.clear();
        self.assoc_use.clear();
        self.qos_use.clear();
    }

    pub fn get(&self, key: &str) -> f64 {
        self.raw.get(key).copied().unwrap_or(0.0)
    }

    /// Clear all usage if `period` says a reset falls between the last one
    /// and `now` (the first call only records `now`). True if cleared.
    pub fn reset_if_due(&mut self, period: ResetPeriod, now: UnixTime) -> bool {
        let due = match (period, self.last_reset) {
            (ResetPeriod::None | ResetPeriod::Now, _) => false,
            (_, None) => {
                self.last_reset = Some(now);
                false
            }
            (p, Some(last)) => next_reset(p, last).is_some_and(|t| t <= now),
        };
        if due {
            self.clear();
            self.last_reset = Some(now);
        }
        due
    }
}

/// The first reset boundary after `last` (midnight UTC of the next day,
/// Sunday, first of the month, quarter or year). canopy's controller keeps
/// time in UTC, so the boundaries are UTC ones (Slurm uses local time).
pub fn next_reset(period: ResetPeriod, last: UnixTime) -> Option<UnixTime> {
    let t = Utc.timestamp_opt(last, 0).single()?;
    let midnight = t.date_naive().and_hms_opt(0, 0, 0)?;
    let day = 86_400;
    let base = Utc.from_utc_datetime(&midnight).timestamp();
    let first_of = |year: i32, month: u32| {
        chrono::NaiveDate::from_ymd_opt(year, month, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| Utc.from_utc_datetime(&d).timestamp())
    };
    let (y, m) = (t.year(), t.month());
    match period {
        ResetPeriod::None | ResetPeriod::Now => None,
        ResetPeriod::Daily => Some(base + day),
        ResetPeriod::Weekly => {
            // Sunday midnight, as Slurm counts weeks.
            let from_sunday = i64::from(t.weekday().num_days_from_sunday());
            Some(base + (7 - from_sunday) * day)
        }
        ResetPeriod::Monthly => {
            if m == 12 {
                first_of(y + 1, 1)
            } else {
                first_of(y, m + 1)
            }
        }
        ResetPeriod::Quarterly => {
            let next = ((m - 1) / 3 + 1) * 3 + 1;
            if next > 12 {
                first_of(y + 1, 1)
            } else {
                first_of(y, next)
            }
        }
        ResetPeriod::Yearly => first_of(y + 1, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Decaying over random periods, in steps, matches the closed form
    /// over the whole span.
    #[test]
    fn stepwise_decay_matches_the_closed_form() {
        let seed: u64 = std::env::var("DECAY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        println!("decay seed: {seed} (replay with DECAY_SEED={seed})");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..100 {
            let half_life = rng.gen_range(1..30 * 86_400u64);
            let start: UnixTime = 1_700_000_000;
            let mut book = UsageBook {
                last_calc: Some(start),
                ..Default::default()
            };
            let initial = rng.gen_range(1.0..1e9);
            book.add(&["a".into(), "root".into()], initial);
            let mut now = start;
            for _ in 0..rng.gen_range(1..50) {
                now += rng.gen_range(0..100_000);
                book.decay_to(now, half_life);
                book.last_calc = Some(now);
            }
            let expected = initial * 0.5f64.powf((now - start) as f64 / half_life as f64);
            let got = book.get("a");
            assert!(
                (got - expected).abs() <= expected * 1e-9 + 1e-12,
                "seed {seed}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn limit_usage_decays_resets_and_is_stored_with_the_book() {
        let mut b = UsageBook {
            last_calc: Some(0),
            ..Default::default()
        };
        let held: BTreeMap<String, u64> = [("cpu".to_string(), 4), ("mem".to_string(), 1000)]
            .into_iter()
            .collect();
        b.assoc_use
            .entry("chem".into())
            .or_default()
            .add(&held, 600.0);
        b.qos_use
            .entry("normal".into())
            .or_default()
            .add(&held, 600.0);
        let g = &b.assoc_use["chem"];
        assert_eq!(
            (g.tres_mins("cpu"), g.tres_mins("mem"), g.wall_mins()),
            (40, 10_000, 10)
        );
        b.decay_to(3600, 3600);
        let g = &b.assoc_use["chem"];
        assert_eq!((g.tres_mins("cpu"), g.wall_mins()), (20, 5));
        assert_eq!(b.qos_use["normal"].tres_mins("cpu"), 20);
        // Stored and read back; a book stored before these existed reads
        // with none.
        let bytes = rmp_serde::to_vec_named(&b).unwrap();
        let back: UsageBook = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back.assoc_use, b.assoc_use);
        #[derive(Serialize)]
        struct Old {
            raw: BTreeMap<String, f64>,
            last_calc: Option<UnixTime>,
        }
        let old = rmp_serde::to_vec_named(&Old {
            raw: b.raw.clone(),
            last_calc: Some(5),
        })
        .unwrap();
        let back: UsageBook = rmp_serde::from_slice(&old).unwrap();
        assert!(back.assoc_use.is_empty() && back.qos_use.is_empty());
        b.clear();
        assert!(b.assoc_use.is_empty() && b.qos_use.is_empty());
    }

    #[test]
    fn one_half_life_halves_and_zero_means_none() {
        assert_eq!(decay_factor(3600.0, 3600), 0.5);
        assert_eq!(decay_factor(7200.0, 3600), 0.25);
        assert_eq!(decay_factor(1e9, 0), 1.0);
    }

    #[test]
    fn resets_fall_on_utc_boundaries() {
        // Wed 2026-11-25 13:00:00 UTC.
        let t = 1_795_611_600;
        assert_eq!(next_reset(ResetPeriod::Daily, t), Some(1_795_651_200));
        // Sunday 2026-11-29.
        assert_eq!(next_reset(ResetPeriod::Weekly, t), Some(1_795_910_400));
        assert_eq!(next_reset(ResetPeriod::Monthly, t), Some(1_796_083_200)); // 2026-12-01
        assert_eq!(next_reset(ResetPeriod::Quarterly, t), Some(1_798_761_600)); // 2027-01-01
        assert_eq!(next_reset(ResetPeriod::Yearly, t), Some(1_798_761_600));
        let mut b = UsageBook::default();
        b.add(&["a".into()], 5.0);
        assert!(!b.reset_if_due(ResetPeriod::Daily, t));
        assert!(!b.reset_if_due(ResetPeriod::Daily, t + 3600));
        assert!(b.reset_if_due(ResetPeriod::Daily, t + 86_400));
        assert_eq!(b.get("a"), 0.0);
    }
}
