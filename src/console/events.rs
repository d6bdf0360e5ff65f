//! `canopy events`' pure core: the controller's event log, with repeats folded and old records
//! expired by `now`.
//!
//! An event is a kind (node down, relay re-attachment, job state change, authentication failure,
//! stuck actor, ...), a detail (the reason, the new state) and a subject (a node, a job, a peer).
//! Events of one kind and detail that arrive within [`FOLD_WINDOW`] of the first fold into one
//! record: a subject set shown as a hostlist, a count and the first and last times. So a relay
//! dying under 312 nodes is one line, `node down x 312 in 10 s n[1-312]`, not 312.
//!
//! Every record carries a sequence number, renewed whenever the record changes, so "everything
//! after seq S" is what a follower has not seen yet (a folded record that grew comes again, with
//! its new count). The book is bounded twice: by age (`retention`) and by count
//! ([`MAX_RECORDS`]); what was dropped for count is counted and reported, never silently lost.
//!
//! Owns: folding, expiry, queries and rendering. Does not: read the clock, write the disk (the
//! shell, `daemon::event_log`, persists the [`Change`]s this returns), or decide what an event is
//! (the controller and the daemon's guards do).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::config::hostlist;

/// Unix seconds.
pub type UnixTime = i64;

/// Repeats of one kind and detail within this many seconds of the first fold into one record.
pub const FOLD_WINDOW: i64 = 10;
/// Most records kept; the oldest go first beyond it (and are counted).
pub const MAX_RECORDS: usize = 100_000;
/// Most subjects kept by name in one record; beyond it only the count grows.
pub const MAX_SUBJECTS: usize = 100_000;
/// Most records one query returns (the rest are counted in `truncated`).
pub const MAX_REPLY: usize = 5_000;
/// Default retention when slurm.conf does not say (`canopy_event_retention`).
pub const DEFAULT_RETENTION_S: i64 = 7 * 86_400;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// A node became usable again (reachable, resumed, returned to service).
    NodeUp,
    /// A node was set DOWN (by an operator, or not responding).
    NodeDown,
    NodeDrain,
    /// An operator resumed or undrained a node.
    NodeResume,
    /// The tree stopped reaching a node (not yet DOWN).
    NodeUnreachable,
    /// A node now hangs under a relay other than before (or its natural parent).
    RelayReattach,
    /// A job changed state (running, completed, failed, ...).
    JobState,
    /// A frame failed authentication or a peer failed to authenticate in time.
    AuthFailure,
    /// An actor's oldest queued message is older than the stuck threshold.
    ActorStuck,
}

impl EventKind {
    pub fn word(self) -> &'static str {
        match self {
            EventKind::NodeUp => "node up",
            EventKind::NodeDown => "node down",
            EventKind::NodeDrain => "node drain",
            EventKind::NodeResume => "node resume",
            EventKind::NodeUnreachable => "node unreachable",
            EventKind::RelayReattach => "relay re-attach",
            EventKind::JobState => "job state",
            EventKind::AuthFailure => "auth failure",
            EventKind::ActorStuck => "actor stuck",
        }
    }

    /// Parses a `--type` word (`node`, `job`, `auth`, `actor`, `relay` or a kind's full word).
    pub fn matches_filter(self, filter: &str) -> bool {
        let w = self.word().replace('-', " ");
        let f = filter.trim().to_ascii_lowercase().replace(['-', '_'], " ");
        w == f || w.split(' ').next() == Some(f.as_str())
    }
}

/// One event as it is recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    /// What the event is about: a node name, a job id, a peer address, an actor.
    pub subject: String,
    /// The reason, the new state, ... (events fold only with the same detail).
    pub detail: String,
}

impl Event {
    pub fn new(kind: EventKind, subject: impl Into<String>, detail: impl Into<String>) -> Self {
        Event {
            kind,
            subject: subject.into(),
            detail: detail.into(),
        }
    }
}

/// One record of the log: one event, or repeats folded together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    pub seq: u64,
    pub kind: EventKind,
    pub detail: String,
    /// Distinct subjects (at most [`MAX_SUBJECTS`]).
    pub subjects: BTreeSet<String>,
    /// How many events were folded in (may exceed `subjects.len()`: repeats of one subject).
    pub count: u64,
    pub first: UnixTime,
    pub last: UnixTime,
}

impl EventRecord {
    /// The subjects as a hostlist (sorted, so node and job ranges come out compressed).
    pub fn subjects_hostlist(&self) -> String {
        let names: Vec<&str> = self.subjects.iter().map(String::as_str).collect();
        hostlist::compress_sorted(&names)
    }

    /// The form a reply carries: the subjects as one hostlist.
    pub fn line(&self) -> EventLine {
        EventLine {
            seq: self.seq,
            kind: self.kind,
            detail: self.detail.clone(),
            subjects: self.subjects_hostlist(),
            distinct: self.subjects.len() as u64,
            count: self.count,
            first: self.first,
            last: self.last,
        }
    }
}

/// One record as `canopy events` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLine {
    pub seq: u64,
    pub kind: EventKind,
    pub detail: String,
    /// The subjects as a hostlist.
    pub subjects: String,
    /// How many distinct subjects.
    pub distinct: u64,
    pub count: u64,
    pub first: UnixTime,
    pub last: UnixTime,
}

/// A change to persist: a record written (new or grown), or one removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(EventRecord),
    Delete(u64),
}

/// What `canopy events` asks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventQuery {
    /// Only records whose last event is at or after this time.
    pub since: Option<UnixTime>,
    /// Only records changed after this sequence number (a follower's bookmark).
    pub after_seq: Option<u64>,
    /// Follow: hold the request up to this long until there is something newer than
    /// `after_seq` (a long poll: no reply, no work, while nothing happens).
    #[serde(default)]
    pub wait_ms: u32,
    /// Only these kinds (`--type`); empty: all.
    #[serde(default)]
    pub types: Vec<String>,
}

/// The answer: matching records, oldest first, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventReport {
    pub now: UnixTime,
    pub records: Vec<EventLine>,
    /// The highest sequence number in the book (a follower's next `after_seq`).
    pub last_seq: u64,
    /// Matching records not returned because the reply is bounded (the newest are returned).
    pub truncated: u64,
    /// Records dropped since start because the book was full (older than what is kept).
    pub dropped: u64,
    /// The oldest time the book still covers (earlier events have expired).
    pub covers_since: Option<UnixTime>,
    pub retention_s: i64,
}

/// The event log.
#[derive(Debug, Clone)]
pub struct EventBook {
    retention_s: i64,
    records: BTreeMap<u64, EventRecord>,
    /// Folds still open, by (kind, detail): their seq.
    open: HashMap<(EventKind, String), u64>,
    next_seq: u64,
    dropped: u64,
    /// Records changed since the last [`EventBook::take_changes`], and seqs removed.
    dirty: BTreeSet<u64>,
    deleted: Vec<u64>,
}

impl EventBook {
    pub fn new(retention_s: i64) -> Self {
        EventBook {
            retention_s: retention_s.max(1),
            records: BTreeMap::new(),
            open: HashMap::new(),
            next_seq: 1,
            dropped: 0,
            dirty: BTreeSet::new(),
            deleted: Vec::new(),
        }
    }

    /// Rebuild from persisted records (a restart): sequence numbers continue after the highest.
    /// Folds do not reopen: a restart starts new records.
    pub fn restore(retention_s: i64, records: impl IntoIterator<Item = EventRecord>) -> Self {
        let mut b = EventBook::new(retention_s);
        for r in records {
            b.next_seq = b.next_seq.max(r.seq + 1);
            b.records.insert(r.seq, r);
        }
        b
    }

    pub fn retention_s(&self) -> i64 {
        self.retention_s
    }

    pub fn set_retention(&mut self, retention_s: i64) {
        self.retention_s = retention_s.max(1);
    }

    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Record `ev` at `now`. Cheap however large its fold grows: the record is moved, not
    /// copied (what to persist is taken later, at most once per batch).
    pub fn record(&mut self, now: UnixTime, ev: Event) {
        let key = (ev.kind, ev.detail);
        let seq = self.next_seq;
        self.next_seq += 1;
        let folded = self
            .open
            .get(&key)
            .copied()
            .filter(|old| {
                self.records
                    .get(old)
                    // A clock step back by a little still folds (events come from many
                    // places, each stamped when recorded).
                    .is_some_and(|r| (now - r.first).abs() <= FOLD_WINDOW)
            })
            .and_then(|old| self.records.remove(&old).map(|r| (old, r)));
        let rec = match folded {
            Some((old, mut r)) => {
                self.forget(old);
                r.seq = seq;
                r.count += 1;
                r.last = r.last.max(now);
                r.first = r.first.min(now);
                if r.subjects.len() < MAX_SUBJECTS {
                    r.subjects.insert(ev.subject);
                }
                r
            }
            None => EventRecord {
                seq,
                kind: key.0,
                detail: key.1.clone(),
                subjects: BTreeSet::from([ev.subject]),
                count: 1,
                first: now,
                last: now,
            },
        };
        self.open.insert(key, seq);
        self.dirty.insert(seq);
        self.records.insert(seq, rec);
        while self.records.len() > MAX_RECORDS {
            if let Some((old, _)) = self.records.pop_first() {
                self.dropped += 1;
                self.forget(old);
            }
        }
    }

    fn forget(&mut self, seq: u64) {
        // Never written yet: nothing to delete on disk.
        if !self.dirty.remove(&seq) {
            self.deleted.push(seq);
        }
    }

    /// Drop records whose last event is older than the retention.
    pub fn expire(&mut self, now: UnixTime) {
        let cutoff = now.saturating_sub(self.retention_s);
        let old: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| r.last < cutoff)
            .map(|(s, _)| *s)
            .collect();
        for s in old {
            self.records.remove(&s);
            self.forget(s);
        }
        let records = &self.records;
        self.open.retain(|_, s| records.contains_key(s));
    }

    /// Forget what changed (a book kept in memory only).
    pub fn discard_changes(&mut self) {
        self.dirty.clear();
        self.deleted.clear();
    }

    /// What to persist since the last call: records written or grown, and seqs removed.
    pub fn take_changes(&mut self) -> Vec<Change> {
        let mut out: Vec<Change> = self.deleted.drain(..).map(Change::Delete).collect();
        for seq in std::mem::take(&mut self.dirty) {
            if let Some(r) = self.records.get(&seq) {
                out.push(Change::Put(r.clone()));
            }
        }
        out
    }

    /// Whether anything newer than `after` is in the book (what wakes a follower).
    pub fn has_after(&self, after: u64, q: &EventQuery) -> bool {
        self.records.range(after + 1..).any(|(_, r)| wanted(r, q))
    }

    pub fn query(&self, q: &EventQuery, now: UnixTime) -> EventReport {
        let after = q.after_seq.unwrap_or(0);
        let mut matching: Vec<&EventRecord> = self
            .records
            .range(after + 1..)
            .map(|(_, r)| r)
            .filter(|r| wanted(r, q))
            .collect();
        let truncated = matching.len().saturating_sub(MAX_REPLY);
        if truncated > 0 {
            matching.drain(..truncated);
        }
        let mut records: Vec<EventLine> = matching.into_iter().map(EventRecord::line).collect();
        // Oldest first by when they began (a grown fold keeps its place in time).
        records.sort_by_key(|r| (r.first, r.seq));
        EventReport {
            now,
            records,
            last_seq: self.last_seq(),
            truncated: truncated as u64,
            dropped: self.dropped,
            covers_since: self.records.values().map(|r| r.first).min(),
            retention_s: self.retention_s,
        }
    }
}

fn wanted(r: &EventRecord, q: &EventQuery) -> bool {
    q.since.is_none_or(|t| r.last >= t)
        && (q.types.is_empty() || q.types.iter().any(|t| r.kind.matches_filter(t)))
}

/// `2026-12-06T18:30:01 node down x 312 in 10 s n[1-312] Not responding`.
pub fn line(r: &EventLine, fmt_time: impl Fn(UnixTime) -> String) -> String {
    let times = if r.count > 1 {
        format!(" x {} in {} s", r.count, (r.last - r.first).max(0))
    } else {
        String::new()
    };
    let detail = if r.detail.is_empty() {
        String::new()
    } else {
        format!(" {}", r.detail)
    };
    format!(
        "{} {}{times} {}{detail}",
        fmt_time(r.first),
        r.kind.word(),
        r.subjects
    )
}

/// The text view: one line per record, then what was left out.
pub fn render(rep: &EventReport, fmt_time: impl Fn(UnixTime) -> String + Copy) -> String {
    let mut out = String::new();
    for r in &rep.records {
        out.push_str(&line(r, fmt_time));
        out.push('\n');
    }
    out.push_str(&left_out(rep));
    out
}

/// The notes about what a reply did not include (empty when nothing was left out).
pub fn left_out(rep: &EventReport) -> String {
    let mut out = String::new();
    if rep.truncated > 0 {
        out.push_str(&format!(
            "... {} older records not shown (use --since to narrow)\n",
            rep.truncated
        ));
    }
    if rep.dropped > 0 {
        out.push_str(&format!(
            "... {} records dropped since the controller started (the log holds {MAX_RECORDS})\n",
            rep.dropped
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down(node: &str) -> Event {
        Event::new(EventKind::NodeDown, node, "Not responding")
    }

    #[test]
    fn repeats_fold_into_one_record_with_a_hostlist() {
        let mut b = EventBook::new(3600);
        for i in 1..=312 {
            b.record(100 + i64::from(i % 10), down(&format!("n{i}")));
        }
        b.record(105, Event::new(EventKind::NodeDrain, "n7", "fan"));
        let rep = b.query(&EventQuery::default(), 200);
        assert_eq!(rep.records.len(), 2);
        let r = &rep.records[0];
        assert_eq!(r.count, 312);
        assert_eq!(r.subjects, "n[1-312]");
        assert_eq!(r.distinct, 312);
        assert_eq!((r.first, r.last), (100, 109));
        assert_eq!(
            line(r, |t| t.to_string()),
            "100 node down x 312 in 9 s n[1-312] Not responding"
        );
        assert_eq!(
            line(&rep.records[1], |t| t.to_string()),
            "105 node drain n7 fan"
        );
    }

    #[test]
    fn a_fold_closes_after_its_window_and_details_do_not_mix() {
        let mut b = EventBook::new(3600);
        b.record(0, down("a1"));
        b.record(FOLD_WINDOW, down("a2"));
        b.record(FOLD_WINDOW + 1, down("a3"));
        b.record(1, Event::new(EventKind::NodeDown, "a4", "bad fan"));
        let rep = b.query(&EventQuery::default(), 100);
        let got: Vec<(String, u64)> = rep
            .records
            .iter()
            .map(|r| (r.subjects.clone(), r.count))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a[1-2]".to_string(), 2),
                ("a4".to_string(), 1),
                ("a3".to_string(), 1)
            ]
        );
    }

    #[test]
    fn followers_see_grown_folds_again_and_nothing_twice_otherwise() {
        let mut b = EventBook::new(3600);
        b.record(0, down("n1"));
        let first = b.query(&EventQuery::default(), 0);
        assert_eq!(first.records.len(), 1);
        let bookmark = first.last_seq;
        let q = EventQuery {
            after_seq: Some(bookmark),
            ..Default::default()
        };
        assert!(!b.has_after(bookmark, &q));
        assert!(b.query(&q, 0).records.is_empty());
        b.record(2, down("n2"));
        assert!(b.has_after(bookmark, &q));
        let next = b.query(&q, 2);
        assert_eq!(next.records.len(), 1);
        assert_eq!(
            next.records[0].count, 2,
            "the grown fold, with its new count"
        );
        let q2 = EventQuery {
            after_seq: Some(next.last_seq),
            types: vec!["job".into()],
            ..Default::default()
        };
        b.record(3, down("n3"));
        assert!(!b.has_after(next.last_seq, &q2), "filtered out: no wake-up");
        b.record(3, Event::new(EventKind::JobState, "17", "RUNNING"));
        assert!(b.has_after(next.last_seq, &q2));
        assert_eq!(b.query(&q2, 3).records[0].kind, EventKind::JobState);
    }

    #[test]
    fn expiry_by_now_and_persisted_changes_match_the_book() {
        let mut b = EventBook::new(100);
        let mut disk: BTreeMap<u64, EventRecord> = BTreeMap::new();
        let apply = |disk: &mut BTreeMap<u64, EventRecord>, ch: Vec<Change>| {
            for c in ch {
                match c {
                    Change::Put(r) => {
                        disk.insert(r.seq, r);
                    }
                    Change::Delete(s) => {
                        disk.remove(&s);
                    }
                }
            }
        };
        for t in 0..50 {
            b.record(t * 7, down(&format!("n{}", t % 5)));
            if t % 3 == 0 {
                apply(&mut disk, b.take_changes());
            }
        }
        b.expire(350);
        apply(&mut disk, b.take_changes());
        let rep = b.query(&EventQuery::default(), 350);
        assert!(rep.records.iter().all(|r| r.last >= 250));
        assert!(!rep.records.is_empty());
        let kept: Vec<EventRecord> = disk.values().cloned().collect();
        assert_eq!(kept.len(), b.len(), "what is on disk is what is kept");
        // A restart from disk answers the same and continues the sequence.
        let mut again = EventBook::restore(100, kept);
        assert_eq!(
            again.query(&EventQuery::default(), 350).records,
            rep.records
        );
        let before = again.last_seq();
        again.record(351, down("z"));
        assert!(again.last_seq() > before);
        assert_eq!(again.last_seq(), b.last_seq() + 1);
    }

    #[test]
    fn since_filters_and_bounds_say_what_was_left_out() {
        let mut b = EventBook::new(1_000_000);
        for t in 0..(MAX_REPLY as i64 + 10) {
            // Distinct details: no folding.
            b.record(
                t * 100,
                Event::new(EventKind::JobState, t.to_string(), format!("s{t}")),
            );
        }
        let all = b.query(&EventQuery::default(), 0);
        assert_eq!(all.records.len(), MAX_REPLY);
        assert_eq!(all.truncated, 10);
        assert_eq!(all.records[0].first, 1000, "the newest are kept");
        assert!(render(&all, |t| t.to_string()).contains("10 older records not shown"));
        let recent = b.query(
            &EventQuery {
                since: Some(100 * (MAX_REPLY as i64)),
                ..Default::default()
            },
            0,
        );
        assert_eq!(recent.records.len(), 10);
        assert_eq!(recent.truncated, 0);
        assert_eq!(left_out(&recent), "");
    }

    #[test]
    fn the_book_is_bounded_and_counts_what_it_dropped() {
        let mut b = EventBook::new(i64::MAX / 4);
        let n = MAX_RECORDS + 3;
        for t in 0..n {
            b.record(
                t as i64 * 100,
                Event::new(EventKind::AuthFailure, "peer", format!("{t}")),
            );
        }
        assert_eq!(b.len(), MAX_RECORDS);
        let rep = b.query(&EventQuery::default(), 0);
        assert_eq!(rep.dropped, 3);
        assert!(left_out(&rep).contains("3 records dropped"));
    }

    #[test]
    fn type_filters() {
        assert!(EventKind::NodeDown.matches_filter("node"));
        assert!(EventKind::NodeDown.matches_filter("node-down"));
        assert!(!EventKind::NodeDown.matches_filter("job"));
        assert!(EventKind::RelayReattach.matches_filter("relay"));
        assert!(EventKind::RelayReattach.matches_filter("relay-re-attach"));
        assert!(EventKind::ActorStuck.matches_filter("actor"));
        assert!(EventKind::AuthFailure.matches_filter("auth"));
    }
}
