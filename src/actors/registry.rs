//! A daemon's list of its actors' published counters, for `canopy top`.
//!
//! Each actor's [`ActorStats`] is registered once, by whoever creates the
//! actor, with a kind and a name. A top query reads every entry's atomics
//! directly, never through the actor's mailbox, so a stuck actor is reported
//! rather than waited on. Entries hold a `Weak`: an actor that is gone drops
//! out at the next read. Nothing here runs unless someone asks (no timer).

use std::sync::{Arc, Mutex, Weak};

use super::stats::{now_us, ActorStats};
use crate::console::top::{self, ActorSample, Mark, TopQuery, TopSummary, Who};

struct Entry {
    kind: String,
    name: String,
    stats: Weak<ActorStats>,
    /// Where the next sample's window starts.
    mark: Mark,
}

/// One daemon's actors (the controller's, or one node daemon's).
pub struct ActorRegistry {
    daemon: String,
    entries: Mutex<Vec<Entry>>,
}

impl ActorRegistry {
    pub fn new(daemon: impl Into<String>) -> Arc<ActorRegistry> {
        Arc::new(ActorRegistry {
            daemon: daemon.into(),
            entries: Mutex::new(Vec::new()),
        })
    }

    pub fn daemon(&self) -> &str {
        &self.daemon
    }

    /// Publish an actor's counters under `kind`/`name`. Its first window
    /// starts now.
    pub fn register(&self, kind: &str, name: &str, stats: &Arc<ActorStats>) {
        let raw = stats.read();
        let entry = Entry {
            kind: kind.to_string(),
            name: name.to_string(),
            stats: Arc::downgrade(stats),
            mark: Mark {
                at_us: now_us(),
                handled: raw.handled,
                busy_total_us: raw.busy_total_us,
            },
        };
        if let Ok(mut e) = self.entries.lock() {
            // Every job's step registers here: without a `canopy top` to sweep them, the
            // finished ones are dropped whenever the list has doubled (amortised O(1)).
            if e.len() >= 64 && e.len().is_power_of_two() {
                e.retain(|x| x.stats.strong_count() > 0);
            }
            e.push(entry);
        }
    }

    /// Every live actor's sample over the window since the previous read
    /// (each read starts the next window: rates are recent, not since boot).
    pub fn samples(&self, stuck_ms: u64) -> Vec<ActorSample> {
        let Ok(mut entries) = self.entries.lock() else {
            return Vec::new();
        };
        entries.retain(|e| e.stats.strong_count() > 0);
        let now = now_us();
        let mut out = Vec::with_capacity(entries.len());
        for e in entries.iter_mut() {
            let Some(stats) = e.stats.upgrade() else {
                continue;
            };
            let who = Who {
                daemon: &self.daemon,
                kind: &e.kind,
                name: &e.name,
            };
            let (mut s, mark) = top::sample(who, stats.read(), e.mark, now, stuck_ms);
            if let Some(state) = stats.published() {
                s.state = state.to_string();
            }
            e.mark = mark;
            out.push(s);
        }
        out
    }

    /// The actors stuck now (`kind name` each), read without starting a new window for
    /// `canopy top` (the controller's timer looks, so that a stuck actor is an event even
    /// while nobody watches).
    pub fn stuck_now(&self, stuck_ms: u64) -> Vec<String> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        let now = now_us();
        entries
            .iter()
            .filter_map(|e| {
                let stats = e.stats.upgrade()?;
                let who = Who {
                    daemon: &self.daemon,
                    kind: &e.kind,
                    name: &e.name,
                };
                let (s, _) = top::sample(who, stats.read(), e.mark, now, stuck_ms);
                s.stuck
                    .then(|| format!("{} {} {}", self.daemon, e.kind, e.name))
            })
            .collect()
    }

    /// This daemon's own summary for `q`.
    pub fn summary(&self, q: &TopQuery) -> TopSummary {
        top::local(&self.daemon, self.samples(q.stuck_ms), q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_registered_actors_and_forgets_dropped_ones() {
        let reg = ActorRegistry::new("n1");
        let a = ActorStats::new();
        let b = ActorStats::new();
        reg.register("agent", "n1", &a);
        reg.register("relay", "n1", &b);
        a.sent();
        a.sent();
        let s = reg.samples(5_000);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].kind.as_str(), s[0].depth), ("agent", 2));
        assert_eq!(s[0].daemon, "n1");
        drop(b);
        let s = reg.samples(5_000);
        assert_eq!(s.len(), 1, "the relay's stats are gone");
        // With a zero threshold anything queued counts as stuck.
        assert!(reg.samples(0)[0].stuck);
        let _ = a.handled();
        let _ = a.handled();
        let s = reg.summary(&TopQuery::default());
        assert_eq!(s.totals.actors, 1);
        assert_eq!(s.top[0].handled, 2);
        assert!(!s.top[0].stuck);
    }

    /// Steps come and go for as long as the daemon runs: the dead are swept as the list
    /// grows, without anyone asking `canopy top`; and what is stuck can be read without
    /// starting a new window.
    #[test]
    fn finished_actors_are_swept_as_they_come_and_stuck_ones_read_without_a_window() {
        let reg = ActorRegistry::new("ctld");
        let keep = ActorStats::new();
        reg.register("controller", "c", &keep);
        for i in 0..10_000 {
            let step = ActorStats::new();
            reg.register("step", &i.to_string(), &step);
        }
        let len = reg.entries.lock().map(|e| e.len()).unwrap_or(usize::MAX);
        assert!(len < 200, "{len} entries kept for 1 live actor");
        keep.sent();
        assert_eq!(reg.stuck_now(0), ["ctld controller c"]);
        assert!(reg.stuck_now(60_000).is_empty());
    }
}
