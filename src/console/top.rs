//! `canopy top`'s pure core: turning an actor's published counters into a
//! sample over a window, and folding samples up the relay tree so that the
//! controller receives a bounded summary (the top K actors, per-branch
//! totals) however many daemons answered.
//!
//! It does no I/O and reads no clock: `now` comes in as an argument. Reading
//! the counters (`actors::registry`), carrying summaries between hops
//! (`actors::relay`) and printing them (`cli::top`) are elsewhere.
//!
//! The fold is exact: every hop keeps the K best of what it received under a
//! total order (sort key, then daemon, kind, name), so the K best of the whole
//! cluster are always among what each hop keeps of its subtree. The unit tests
//! check this against a flat sort of every sample.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::actors::stats::RawStats;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{NodeReply, Outcome};

/// The most actors a summary may carry per list; a request asking for more
/// is clamped (a summary must stay one small frame at every hop).
pub const MAX_K: u32 = 200;
/// Default number of actors shown.
pub const DEFAULT_K: u32 = 20;
/// Default age past which an actor is called stuck.
pub const DEFAULT_STUCK_MS: u64 = 5_000;

/// What the rows are ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopSort {
    /// Mailbox depth (then oldest age).
    #[default]
    Depth,
    /// Age of the oldest queued message, or of the running handler.
    Age,
    /// Messages handled per second over the window.
    Rate,
    /// Share of the window spent in handlers.
    Time,
}

impl TopSort {
    pub fn parse(s: &str) -> Result<TopSort, String> {
        match s {
            "depth" => Ok(TopSort::Depth),
            "age" => Ok(TopSort::Age),
            "rate" => Ok(TopSort::Rate),
            "time" => Ok(TopSort::Time),
            other => Err(format!(
                "invalid sort key '{other}': expected depth, age, rate or time"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TopSort::Depth => "depth",
            TopSort::Age => "age",
            TopSort::Rate => "rate",
            TopSort::Time => "time",
        }
    }

    /// The next key, for the terminal UI's sort key.
    pub fn next(self) -> TopSort {
        match self {
            TopSort::Depth => TopSort::Age,
            TopSort::Age => TopSort::Rate,
            TopSort::Rate => TopSort::Time,
            TopSort::Time => TopSort::Depth,
        }
    }
}

/// What `canopy top` asks; the same struct travels down the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopQuery {
    /// Actors kept per list (clamped to [`MAX_K`]).
    pub k: u32,
    pub sort: TopSort,
    /// Older than this (oldest queued message or running handler) = stuck.
    pub stuck_ms: u64,
    /// Only this node's daemon (a node name).
    #[serde(default)]
    pub node: Option<String>,
    /// Only the daemons of this relay's subtree (a node name).
    #[serde(default)]
    pub subtree: Option<String>,
}

impl Default for TopQuery {
    fn default() -> Self {
        TopQuery {
            k: DEFAULT_K,
            sort: TopSort::Depth,
            stuck_ms: DEFAULT_STUCK_MS,
            node: None,
            subtree: None,
        }
    }
}

impl TopQuery {
    pub fn k(&self) -> usize {
        self.k.clamp(1, MAX_K) as usize
    }
}

/// One actor, as one daemon saw it at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActorSample {
    /// The daemon: a node name, or `controller`.
    pub daemon: String,
    pub kind: String,
    pub name: String,
    pub depth: u64,
    /// Age of the oldest queued message, ms (0 when nothing is queued).
    pub oldest_ms: u64,
    /// How long the handler running now has run, ms (0 when idle).
    pub busy_ms: u64,
    /// Messages handled since the actor started.
    pub handled: u64,
    /// Messages handled per second over the window.
    pub rate: f64,
    /// Mean handling time over the window, µs.
    pub handle_us: u64,
    /// Share of the window spent in handlers (0..1).
    pub load: f64,
    /// The window `rate`, `handle_us` and `load` cover, ms: since the
    /// previous sample of this actor (or since it started).
    pub window_ms: u64,
    pub stuck: bool,
    /// The actor's last published one-line state ("" if it publishes none).
    #[serde(default)]
    pub state: String,
}

impl ActorSample {
    /// The age that decides "stuck": the oldest waiting message, or the
    /// handler that has not returned.
    pub fn age_ms(&self) -> u64 {
        self.oldest_ms.max(self.busy_ms)
    }
}

/// The previous sample of an actor: where its window starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    pub at_us: u64,
    pub handled: u64,
    pub busy_total_us: u64,
}

/// Who an actor is, for [`sample`].
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub daemon: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

/// Turn one reading of an actor's counters into a sample over the window
/// since `prev`; returns the sample and the mark that starts the next window.
pub fn sample(
    who: Who<'_>,
    raw: RawStats,
    prev: Mark,
    now_us: u64,
    stuck_ms: u64,
) -> (ActorSample, Mark) {
    let window_us = now_us.saturating_sub(prev.at_us);
    let handled = raw.handled.saturating_sub(prev.handled);
    // Handling time includes the handler running now, up to `now`.
    let running_us = raw
        .busy_since_us
        .map(|s| now_us.saturating_sub(s))
        .unwrap_or(0);
    let busy_us = raw
        .busy_total_us
        .saturating_sub(prev.busy_total_us)
        .saturating_add(running_us);
    let oldest_ms = raw
        .oldest_sent_us
        .map(|s| now_us.saturating_sub(s) / 1000)
        .unwrap_or(0);
    let busy_ms = running_us / 1000;
    let s = ActorSample {
        daemon: who.daemon.to_string(),
        kind: who.kind.to_string(),
        name: who.name.to_string(),
        depth: raw.depth,
        oldest_ms,
        busy_ms,
        handled: raw.handled,
        rate: if window_us == 0 {
            0.0
        } else {
            handled as f64 * 1e6 / window_us as f64
        },
        handle_us: raw
            .busy_total_us
            .saturating_sub(prev.busy_total_us)
            .checked_div(handled)
            .unwrap_or(0),
        load: if window_us == 0 {
            0.0
        } else {
            (busy_us as f64 / window_us as f64).min(1.0)
        },
        window_ms: window_us / 1000,
        // Something must be waiting (a message, or a handler's return):
        // an idle actor is never stuck, whatever the threshold.
        stuck: (raw.oldest_sent_us.is_some() || raw.busy_since_us.is_some())
            && oldest_ms.max(busy_ms) >= stuck_ms,
        state: String::new(),
    };
    let mark = Mark {
        at_us: now_us,
        handled: raw.handled,
        // The running handler's time is counted when it ends; start the
        // next window from the finished handlers only.
        busy_total_us: raw.busy_total_us,
    };
    (s, mark)
}

/// Orders samples best-first under `sort`; ties broken by identity, so the
/// order is total and the fold is exact.
pub fn compare(sort: TopSort, a: &ActorSample, b: &ActorSample) -> Ordering {
    let key = match sort {
        TopSort::Depth => b.depth.cmp(&a.depth).then(b.age_ms().cmp(&a.age_ms())),
        TopSort::Age => b.age_ms().cmp(&a.age_ms()).then(b.depth.cmp(&a.depth)),
        TopSort::Rate => b.rate.total_cmp(&a.rate),
        TopSort::Time => b
            .load
            .total_cmp(&a.load)
            .then(b.handle_us.cmp(&a.handle_us)),
    };
    key.then_with(|| a.daemon.cmp(&b.daemon))
        .then_with(|| a.kind.cmp(&b.kind))
        .then_with(|| a.name.cmp(&b.name))
}

/// Totals of a subtree (or one daemon): enough to rank branches and to say
/// what the top list left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub daemons: u64,
    pub actors: u64,
    /// Queued messages, summed.
    pub depth: u64,
    pub max_depth: u64,
    /// The oldest age (queued message or running handler) of any actor, ms.
    pub max_age_ms: u64,
    /// Messages handled per second, summed.
    pub rate: f64,
    pub stuck: u64,
}

impl Totals {
    fn add(&mut self, o: &Totals) {
        self.daemons += o.daemons;
        self.actors += o.actors;
        self.depth += o.depth;
        self.max_depth = self.max_depth.max(o.max_depth);
        self.max_age_ms = self.max_age_ms.max(o.max_age_ms);
        self.rate += o.rate;
        self.stuck += o.stuck;
    }

    fn of(samples: &[ActorSample]) -> Totals {
        Totals {
            daemons: 1,
            actors: samples.len() as u64,
            depth: samples.iter().map(|s| s.depth).sum(),
            max_depth: samples.iter().map(|s| s.depth).max().unwrap_or(0),
            max_age_ms: samples.iter().map(|s| s.age_ms()).max().unwrap_or(0),
            rate: samples.iter().map(|s| s.rate).sum(),
            stuck: samples.iter().filter(|s| s.stuck).count() as u64,
        }
    }
}

/// One input of a fold: a child's subtree, or a daemon's own actors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    /// The daemon at its head (node name, or `controller`).
    pub head: String,
    pub totals: Totals,
}

/// What one hop sends upward for its whole subtree: bounded by K (two lists)
/// plus one branch per input, whatever the subtree's size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopSummary {
    /// The daemon that folded this summary.
    pub head: String,
    pub totals: Totals,
    /// The K best actors under the query's sort.
    pub top: Vec<ActorSample>,
    /// The K oldest stuck actors, so that a stuck actor is never hidden by
    /// busier ones (it may also be in `top`).
    pub stuck: Vec<ActorSample>,
    /// Each folded input's totals (children's subtrees, the hop's own daemon).
    pub branches: Vec<Branch>,
}

/// A daemon's own summary from its actors' samples.
pub fn local(daemon: &str, mut samples: Vec<ActorSample>, q: &TopQuery) -> TopSummary {
    let totals = Totals::of(&samples);
    let mut stuck: Vec<ActorSample> = samples.iter().filter(|s| s.stuck).cloned().collect();
    stuck.sort_by(|a, b| compare(TopSort::Age, a, b));
    stuck.truncate(q.k());
    samples.sort_by(|a, b| compare(q.sort, a, b));
    samples.truncate(q.k());
    TopSummary {
        head: daemon.to_string(),
        branches: vec![Branch {
            head: daemon.to_string(),
            totals: totals.clone(),
        }],
        totals,
        top: samples,
        stuck,
    }
}

/// Fold several summaries (a hop's children and its own) into one headed by
/// `head`: the K best of all inputs, the K oldest stuck, summed totals, and
/// one branch per input.
pub fn fold(head: &str, inputs: Vec<TopSummary>, q: &TopQuery) -> TopSummary {
    let mut totals = Totals::default();
    let mut top = Vec::new();
    let mut stuck = Vec::new();
    let mut branches = Vec::with_capacity(inputs.len());
    for i in inputs {
        totals.add(&i.totals);
        top.extend(i.top);
        stuck.extend(i.stuck);
        branches.push(Branch {
            head: i.head,
            totals: i.totals,
        });
    }
    top.sort_by(|a, b| compare(q.sort, a, b));
    top.truncate(q.k());
    stuck.sort_by(|a, b| compare(TopSort::Age, a, b));
    stuck.truncate(q.k());
    branches.sort_by(|a, b| a.head.cmp(&b.head));
    TopSummary {
        head: head.to_string(),
        totals,
        top,
        stuck,
        branches,
    }
}

/// The controller's view of the whole cluster: the root relay's folded
/// summaries (whose branches are the controller's children) and the
/// controller's own actors, keeping every branch of both.
pub fn absorb(relayed: Vec<TopSummary>, own: TopSummary, q: &TopQuery) -> TopSummary {
    let mut branches: Vec<Branch> = Vec::new();
    for s in &relayed {
        branches.extend(s.branches.iter().cloned());
    }
    branches.extend(own.branches.iter().cloned());
    let head = own.head.clone();
    let mut inputs = relayed;
    inputs.push(own);
    let mut out = fold(&head, inputs, q);
    branches.sort_by(|a, b| a.head.cmp(&b.head));
    out.branches = branches;
    out
}

/// A hop's fan-out outcomes with every successful summary folded into one
/// (the union of their ranks); failures pass through unchanged, grouped by
/// reason as the collector left them. What goes upward is then one summary
/// plus one entry per distinct failure.
pub fn fold_outcomes(head: &str, outcomes: Vec<Outcome>, q: &TopQuery) -> Vec<Outcome> {
    let mut ranks = RankSet::new();
    let mut summaries = Vec::new();
    let mut rest = Vec::new();
    for o in outcomes {
        match o.result {
            Ok(NodeReply::Top(s)) => {
                ranks = ranks.union(&o.ranks);
                summaries.push(*s);
            }
            other => rest.push(Outcome {
                ranks: o.ranks,
                result: other,
            }),
        }
    }
    if summaries.is_empty() {
        return rest;
    }
    let folded = if summaries.len() == 1 {
        // Nothing to merge: keep the child's own branches, so that one
        // subtree asked alone still shows its children.
        summaries.pop().unwrap_or_else(|| fold(head, Vec::new(), q))
    } else {
        fold(head, summaries, q)
    };
    let mut out = vec![Outcome {
        ranks,
        result: Ok(NodeReply::Top(Box::new(folded))),
    }];
    out.extend(rest);
    out
}

/// What `canopy top` prints: the scope's folded summary (its branches are the
/// scope's children) and what it could not show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopReport {
    /// `cluster`, `subtree NODE` or `node NODE`.
    pub scope: String,
    pub query: TopQuery,
    pub summary: TopSummary,
    /// Daemons asked (the controller included when in scope).
    pub asked: u64,
    /// Daemons that did not answer, as (hostlist, reason).
    pub missing: Vec<(String, String)>,
    /// Actors seen but not listed in `top`.
    pub left_out: u64,
    pub elapsed_ms: u64,
}

impl TopReport {
    pub fn new(
        scope: String,
        query: TopQuery,
        summary: TopSummary,
        asked: u64,
        missing: Vec<(String, String)>,
        elapsed_ms: u64,
    ) -> TopReport {
        let left_out = summary
            .totals
            .actors
            .saturating_sub(summary.top.len() as u64);
        TopReport {
            scope,
            query,
            summary,
            asked,
            missing,
            left_out,
            elapsed_ms,
        }
    }
}

/// The plain table `canopy top --once` prints.
pub fn render(r: &TopReport) -> String {
    let t = &r.summary.totals;
    let mut out = format!(
        "canopy top: {} (sort {}), {} of {} daemons answered, {} actors, {} queued, {:.0} msg/s, {} stuck (older than {} ms)\n",
        r.scope,
        r.query.sort.name(),
        t.daemons,
        r.asked,
        t.actors,
        t.depth,
        t.rate,
        t.stuck,
        r.query.stuck_ms
    );
    out.push_str(&format!(
        "{:<16} {:<10} {:<20} {:>7} {:>9} {:>9} {:>9} {:>6}  STATE\n",
        "DAEMON", "KIND", "NAME", "DEPTH", "OLDEST", "MSG/S", "HANDLE", "LOAD"
    ));
    let row = |s: &ActorSample| {
        format!(
            "{:<16} {:<10} {:<20} {:>7} {:>9} {:>9.1} {:>9} {:>5.1}%  {:<5} {}\n",
            s.daemon,
            s.kind,
            s.name,
            s.depth,
            fmt_ms(s.age_ms()),
            s.rate,
            format!("{}us", s.handle_us),
            s.load * 100.0,
            if s.stuck { "STUCK" } else { "ok" },
            s.state
        )
    };
    for s in &r.summary.top {
        out.push_str(&row(s));
    }
    let hidden: Vec<&ActorSample> = r
        .summary
        .stuck
        .iter()
        .filter(|s| !r.summary.top.contains(s))
        .collect();
    if !hidden.is_empty() {
        out.push_str("stuck, not in the list above:\n");
        for s in hidden {
            out.push_str(&row(s));
        }
    }
    if r.summary.branches.len() > 1 {
        out.push_str(&format!(
            "\n{:<16} {:>8} {:>7} {:>9} {:>9} {:>9} {:>6}\n",
            "BRANCH", "DAEMONS", "ACTORS", "QUEUED", "MAXAGE", "MSG/S", "STUCK"
        ));
        for b in &r.summary.branches {
            let t = &b.totals;
            out.push_str(&format!(
                "{:<16} {:>8} {:>7} {:>9} {:>9} {:>9.1} {:>6}\n",
                b.head,
                t.daemons,
                t.actors,
                t.depth,
                fmt_ms(t.max_age_ms),
                t.rate,
                t.stuck
            ));
        }
    }
    if r.left_out > 0 {
        out.push_str(&format!(
            "({} more actors not shown; -k raises the limit up to {MAX_K})\n",
            r.left_out
        ));
    }
    for (nodes, why) in &r.missing {
        out.push_str(&format!("did not answer: {nodes}: {why}\n"));
    }
    out
}

/// `850ms`, `12.3s`, `4m05s`.
pub fn fmt_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn actor(daemon: &str, name: &str, depth: u64, age: u64, rate: f64) -> ActorSample {
        ActorSample {
            daemon: daemon.into(),
            kind: "agent".into(),
            name: name.into(),
            depth,
            oldest_ms: age,
            busy_ms: 0,
            handled: 0,
            rate,
            handle_us: 0,
            load: rate / 1000.0,
            window_ms: 1000,
            stuck: age >= DEFAULT_STUCK_MS,
            state: String::new(),
        }
    }

    fn q(k: u32, sort: TopSort) -> TopQuery {
        TopQuery {
            k,
            sort,
            ..Default::default()
        }
    }

    #[test]
    fn sample_rates_cover_the_window_since_the_previous_mark() {
        let raw = RawStats {
            depth: 3,
            oldest_sent_us: Some(4_000_000),
            busy_since_us: None,
            handled: 1_500,
            busy_total_us: 600_000,
        };
        let prev = Mark {
            at_us: 1_000_000,
            handled: 500,
            busy_total_us: 100_000,
        };
        let who = Who {
            daemon: "n1",
            kind: "agent",
            name: "n1",
        };
        let (s, mark) = sample(who, raw, prev, 11_000_000, 5_000);
        assert_eq!(s.window_ms, 10_000);
        assert_eq!(s.rate, 100.0, "1000 handled in 10 s");
        assert_eq!(s.handle_us, 500, "500 ms over 1000 messages");
        assert!((s.load - 0.05).abs() < 1e-9);
        assert_eq!(s.oldest_ms, 7_000);
        assert!(s.stuck, "7 s > 5 s");
        assert_eq!(
            mark,
            Mark {
                at_us: 11_000_000,
                handled: 1_500,
                busy_total_us: 600_000
            }
        );
        // The next sample, with nothing new, reports an idle window.
        let raw2 = RawStats {
            depth: 0,
            oldest_sent_us: None,
            ..raw
        };
        let (s2, _) = sample(who, raw2, mark, 12_000_000, 5_000);
        assert_eq!(
            (s2.rate, s2.handle_us, s2.oldest_ms, s2.stuck),
            (0.0, 0, 0, false)
        );
    }

    #[test]
    fn a_handler_that_does_not_return_is_stuck_with_nothing_queued() {
        let raw = RawStats {
            depth: 0,
            oldest_sent_us: None,
            busy_since_us: Some(2_000_000),
            handled: 1,
            busy_total_us: 0,
        };
        let who = Who {
            daemon: "n1",
            kind: "agent",
            name: "n1",
        };
        let (s, _) = sample(who, raw, Mark::default(), 10_000_000, 5_000);
        assert_eq!(s.busy_ms, 8_000);
        assert!(s.stuck);
        assert!((s.load - 0.8).abs() < 1e-9, "8 s of 10 in the handler");
    }

    #[test]
    fn sort_keys_parse_and_cycle() {
        for k in ["depth", "age", "rate", "time"] {
            assert_eq!(TopSort::parse(k).map(|s| s.name()), Ok(k));
        }
        let e = TopSort::parse("cpu").unwrap_err();
        assert!(e.contains("'cpu'"), "{e}");
        assert_eq!(TopSort::Time.next(), TopSort::Depth);
    }

    /// Seeded: a random cluster folded along a random tree gives exactly the
    /// flat top K, totals and stuck list. Prints the seed; set
    /// CANOPY_TOP_SEED to replay one.
    #[test]
    fn tree_fold_equals_flat_top_k_oracle() {
        let seed: u64 = std::env::var("CANOPY_TOP_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::thread_rng().gen());
        println!("seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for round in 0..50 {
            let daemons = rng.gen_range(1..80);
            let sort =
                [TopSort::Depth, TopSort::Age, TopSort::Rate, TopSort::Time][rng.gen_range(0..4)];
            let query = q(rng.gen_range(1..12), sort);
            let mut all = Vec::new();
            let mut locals = Vec::new();
            for d in 0..daemons {
                let name = format!("n{d}");
                let samples: Vec<ActorSample> = (0..rng.gen_range(0..5))
                    .map(|a| {
                        actor(
                            &name,
                            &format!("a{a}"),
                            rng.gen_range(0..4),
                            rng.gen_range(0..8_000),
                            rng.gen_range(0..5) as f64,
                        )
                    })
                    .collect();
                all.extend(samples.clone());
                locals.push(local(&name, samples, &query));
            }
            // Fold in random groups, level after level, to a single root.
            let mut level = locals;
            while level.len() > 1 {
                let mut next = Vec::new();
                while !level.is_empty() {
                    let take = rng.gen_range(1..=level.len().min(4));
                    let group: Vec<TopSummary> = level.drain(..take).collect();
                    next.push(fold("relay", group, &query));
                }
                level = next;
            }
            let root = fold("controller", level, &query);
            let mut flat = all.clone();
            flat.sort_by(|a, b| compare(sort, a, b));
            flat.truncate(query.k());
            assert_eq!(root.top, flat, "seed {seed} round {round}");
            let mut stuck: Vec<ActorSample> = all.iter().filter(|s| s.stuck).cloned().collect();
            stuck.sort_by(|a, b| compare(TopSort::Age, a, b));
            stuck.truncate(query.k());
            assert_eq!(root.stuck, stuck, "seed {seed} round {round}");
            assert_eq!(root.totals.daemons, daemons as u64);
            assert_eq!(root.totals.actors, all.len() as u64);
            assert_eq!(root.totals.depth, all.iter().map(|s| s.depth).sum::<u64>());
            assert_eq!(
                root.totals.stuck,
                all.iter().filter(|s| s.stuck).count() as u64
            );
        }
    }

    #[test]
    fn fold_outcomes_merges_summaries_and_keeps_failures() {
        let query = q(2, TopSort::Depth);
        let a = local("n1", vec![actor("n1", "x", 5, 0, 0.0)], &query);
        let b = local(
            "n2",
            vec![actor("n2", "y", 1, 0, 0.0), actor("n2", "z", 9, 0, 0.0)],
            &query,
        );
        let outcomes = vec![
            Outcome {
                ranks: RankSet::from_ranks([1]),
                result: Ok(NodeReply::Top(Box::new(a))),
            },
            Outcome {
                ranks: RankSet::from_ranks([3]),
                result: Err("timed out".into()),
            },
            Outcome {
                ranks: RankSet::from_ranks([2]),
                result: Ok(NodeReply::Top(Box::new(b))),
            },
        ];
        let out = fold_outcomes("n0", outcomes, &query);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].ranks, RankSet::from_ranks([1, 2]));
        let Ok(NodeReply::Top(s)) = &out[0].result else {
            panic!("expected a folded summary, got {:?}", out[0].result);
        };
        let names: Vec<&str> = s.top.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["z", "x"], "the two deepest, deepest first");
        assert_eq!(s.branches.len(), 2);
        assert_eq!((s.totals.daemons, s.totals.actors), (2, 3));
        assert_eq!(out[1].result, Err("timed out".to_string()));
    }

    #[test]
    fn render_says_what_it_left_out() {
        let query = q(1, TopSort::Depth);
        let s = local(
            "n1",
            vec![actor("n1", "x", 5, 0, 0.0), actor("n1", "y", 0, 9_000, 0.0)],
            &query,
        );
        let r = TopReport::new(
            "cluster".into(),
            query,
            s,
            3,
            vec![("n[2-3]".into(), "timed out".into())],
            4,
        );
        let text = render(&r);
        assert!(text.contains("1 of 3 daemons answered"), "{text}");
        assert!(text.contains("stuck, not in the list above"), "{text}");
        assert!(text.contains("1 more actors not shown"), "{text}");
        assert!(text.contains("did not answer: n[2-3]: timed out"), "{text}");
        assert_eq!(r.left_out, 1);
    }
}
