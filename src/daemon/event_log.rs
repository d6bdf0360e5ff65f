//! The controller's event log as a shared handle: the pure [`EventBook`] behind a short lock,
//! a wake-up for followers, and a writer thread that keeps the records on disk.
//!
//! Why a handle and not an actor: events come from the controller actor, from connection tasks
//! (authentication failures) and from the stuck-actor detector, and a follower must be able to
//! wait without occupying anyone's mailbox. Recording takes the lock for an in-memory fold only;
//! the disk write goes to a dedicated thread (sled may block on I/O, and no event loop that
//! forwards messages may wait on it).
//!
//! Crash-only: records live in their own sled database (`<StateSaveLocation>/events.sled`),
//! keyed by sequence number; a restart reads back what is there and expires what is too old.
//! A crash loses at most what came in the writer's last gather interval. The event
//! log is a diagnostic, not state: a failed write is logged and the record stays in memory,
//! rather than stopping the controller the way a failed state write must.
//!
//! Cost while idle: nothing. There is no timer; expiry runs when an event is recorded or a
//! query arrives (at most once a minute), and a follower's request sleeps on a [`Notify`] until
//! an event arrives or its wait ends.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::Notify;

use crate::console::events::{Change, Event, EventBook, EventQuery, EventRecord, EventReport};

/// Expire at most this often (records are kept for days; a minute's slack costs nothing).
const EXPIRE_EVERY_S: i64 = 60;
/// A follower's wake-up waits this long for the rest of a burst, so a relay's loss folded into
/// one record reaches it as one line, not one per node.
const BURST_GATHER: Duration = Duration::from_millis(200);
/// The longest a follower's request is held (it asks again after; the controller closes idle
/// client connections after its read timeout, so this stays well below it).
pub const MAX_WAIT_MS: u32 = 20_000;

#[derive(Debug, Error)]
pub enum EventLogError {
    #[error("cannot open the event log at {path}: {source}")]
    Open {
        path: std::path::PathBuf,
        source: sled::Error,
    },
}

type Book = Arc<Mutex<(EventBook, i64)>>;

struct Inner {
    book: Book,
    notify: Notify,
    /// Wakes the writer thread.
    disk: Option<Mutex<mpsc::Sender<ToWriter>>>,
}

/// What the writer thread is told.
enum ToWriter {
    /// The book has changes to persist.
    Changed,
    /// Persist now and say when done (a clean shutdown).
    Sync(tokio::sync::oneshot::Sender<()>),
}

/// The event log (cheap to clone).
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("persistent", &self.inner.disk.is_some())
            .finish()
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl EventLog {
    /// A log kept in memory only (tests, the load-test harness).
    pub fn in_memory(retention_s: i64) -> Self {
        Self::with(
            Arc::new(Mutex::new((EventBook::new(retention_s), i64::MIN))),
            None,
        )
    }

    fn with(book: Book, disk: Option<mpsc::Sender<ToWriter>>) -> Self {
        EventLog {
            inner: Arc::new(Inner {
                book,
                notify: Notify::new(),
                disk: disk.map(Mutex::new),
            }),
        }
    }

    /// Open (or create) the log under `state_dir`, read back what a previous run kept, and
    /// start its writer thread.
    pub fn open(state_dir: &Path, retention_s: i64) -> Result<Self, EventLogError> {
        let path = state_dir.join("events.sled");
        let db = sled::Config::new()
            .path(&path)
            // No background flusher: an idle log must cost nothing; the writer flushes.
            .flush_every_ms(None)
            // Records are small and read once at start: a small cache is plenty.
            .cache_capacity(16 << 20)
            .open()
            .map_err(|source| EventLogError::Open {
                path: path.clone(),
                source,
            })?;
        let mut kept = Vec::new();
        let mut unreadable = 0u64;
        for item in db.iter() {
            match item.map_err(|e| e.to_string()).and_then(|(_, v)| {
                rmp_serde::from_slice::<EventRecord>(&v).map_err(|e| e.to_string())
            }) {
                Ok(r) => kept.push(r),
                // One bad record must not cost the rest: skip it, say so.
                Err(_) => unreadable += 1,
            }
        }
        if unreadable > 0 {
            tracing::warn!(unreadable, path = %path.display(), "event log records unreadable; skipped");
        }
        tracing::info!(records = kept.len(), retention_s, "event log opened");
        let book: Book = Arc::new(Mutex::new((
            EventBook::restore(retention_s, kept),
            i64::MIN,
        )));
        let (tx, rx) = mpsc::channel::<ToWriter>();
        let for_writer = book.clone();
        let spawned = std::thread::Builder::new()
            .name("canopy-events".into())
            .spawn(move || writer(db, for_writer, rx));
        let tx = match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!(error = %e, "event log writer not started; events kept in memory only");
                None
            }
        };
        Ok(Self::with(book, tx))
    }

    /// Make every event recorded so far durable (a clean shutdown); bounded, so a stuck disk
    /// cannot hold the shutdown up for ever.
    pub async fn sync(&self) {
        let (ack, done) = tokio::sync::oneshot::channel();
        let sent = match &self.inner.disk {
            Some(tx) => tx
                .lock()
                .map(|tx| tx.send(ToWriter::Sync(ack)).is_ok())
                .unwrap_or(false),
            None => false,
        };
        if sent
            && tokio::time::timeout(Duration::from_secs(5), done)
                .await
                .is_err()
        {
            tracing::warn!("event log not synced within 5 s; recent events may be lost");
        }
    }

    /// Record `ev` now.
    pub fn record(&self, ev: Event) {
        self.record_at(now(), ev);
    }

    /// An actor whose oldest queued message is older than `threshold` (the stuck-actor
    /// detector calls this). The detail names the threshold, not the age, so repeats fold.
    pub fn actor_stuck(&self, actor: &str, threshold: Duration) {
        self.record(Event::new(
            crate::console::events::EventKind::ActorStuck,
            actor,
            format!("oldest queued message older than {} s", threshold.as_secs()),
        ));
    }

    /// Record `ev` at `now` (the clock is read by the caller; tests pass their own).
    pub fn record_at(&self, now: i64, ev: Event) {
        tracing::debug!(kind = ev.kind.word(), subject = %ev.subject, detail = %ev.detail, "event");
        self.touch(now, |book| book.record(now, ev));
        self.inner.notify.notify_waiters();
    }

    /// Run `f` on the book, expire if due, and wake the writer (or drop the changes when
    /// nothing persists them).
    fn touch(&self, now: i64, f: impl FnOnce(&mut EventBook)) {
        {
            let Ok(mut g) = self.inner.book.lock() else {
                return;
            };
            let (book, last_expire) = &mut *g;
            f(book);
            if now.saturating_sub(*last_expire) >= EXPIRE_EVERY_S {
                *last_expire = now;
                book.expire(now);
            }
            if self.inner.disk.is_none() {
                book.discard_changes();
                return;
            }
        }
        if let Some(tx) = &self.inner.disk {
            if let Ok(tx) = tx.lock() {
                if tx.send(ToWriter::Changed).is_err() {
                    tracing::warn!("event log writer has stopped; events kept in memory only");
                }
            }
        }
    }

    fn query_now(&self, q: &EventQuery) -> (EventReport, bool) {
        let now = now();
        let mut out = (EventReport::default(), true);
        self.touch(now, |book| {
            let fresh = book.has_after(q.after_seq.unwrap_or(0), q);
            out = (book.query(q, now), fresh);
        });
        out
    }

    /// Answer `q`; with `wait_ms` and nothing newer than `after_seq`, wait (up to
    /// [`MAX_WAIT_MS`]) until something is recorded. The wait holds no lock and no mailbox.
    pub async fn query(&self, q: EventQuery) -> EventReport {
        let wait = Duration::from_millis(u64::from(q.wait_ms.min(MAX_WAIT_MS)));
        if wait.is_zero() || q.after_seq.is_none() {
            return self.query_now(&q).0;
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the check, so an event between the check and the wait wakes us.
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (report, fresh) = self.query_now(&q);
            if fresh {
                return report;
            }
            tokio::select! {
                _ = &mut notified => {
                    tokio::time::sleep(BURST_GATHER).await;
                }
                _ = tokio::time::sleep_until(deadline) => return self.query_now(&q).0,
            }
        }
    }
}

/// The writer thread: woken by a change, it writes at once (so a crash loses only what came
/// in the last moments), then waits [`BURST_GATHER`] before the next write, so a folded record
/// growing by thousands is written a few times, not thousands. It ends when the log is dropped.
fn writer(db: sled::Db, book: Book, rx: mpsc::Receiver<ToWriter>) {
    let mut pending = false;
    loop {
        let msg = if pending {
            ToWriter::Changed
        } else {
            match rx.recv() {
                Ok(m) => m,
                Err(_) => return,
            }
        };
        pending = false;
        write_changes(&db, &book);
        if let ToWriter::Sync(ack) = msg {
            let _ = ack.send(());
            continue;
        }
        std::thread::sleep(BURST_GATHER);
        for m in rx.try_iter() {
            match m {
                ToWriter::Changed => pending = true,
                ToWriter::Sync(ack) => {
                    write_changes(&db, &book);
                    pending = false;
                    let _ = ack.send(());
                }
            }
        }
    }
}

fn write_changes(db: &sled::Db, book: &Book) {
    let changes = match book.lock() {
        Ok(mut g) => g.0.take_changes(),
        Err(_) => return,
    };
    if changes.is_empty() {
        return;
    }
    let n = changes.len();
    let mut batch = sled::Batch::default();
    for c in changes {
        match c {
            Change::Put(r) => match rmp_serde::to_vec_named(&r) {
                Ok(bytes) => batch.insert(&r.seq.to_be_bytes(), bytes),
                Err(e) => {
                    tracing::warn!(seq = r.seq, error = %e, "event record not encodable; not kept on disk")
                }
            },
            Change::Delete(seq) => batch.remove(&seq.to_be_bytes()),
        }
    }
    if let Err(e) = db.apply_batch(batch).and_then(|_| db.flush().map(|_| ())) {
        tracing::warn!(changes = n, error = %e, "event log write failed; those events are kept in memory only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::events::EventKind;

    #[tokio::test]
    async fn a_follower_wakes_on_a_new_event_and_not_before() {
        let log = EventLog::in_memory(3600);
        log.record(Event::new(EventKind::NodeDown, "n1", "x"));
        let first = log.query(EventQuery::default()).await;
        assert_eq!(first.records.len(), 1);
        let q = EventQuery {
            after_seq: Some(first.last_seq),
            wait_ms: 10_000,
            ..Default::default()
        };
        let waiting = tokio::spawn({
            let log = log.clone();
            async move { log.query(q).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        log.record(Event::new(EventKind::NodeDrain, "n2", "y"));
        let got = waiting.await.unwrap();
        assert_eq!(got.records.len(), 1);
        assert_eq!(got.records[0].kind, EventKind::NodeDrain);
    }

    #[test]
    fn stuck_actors_fold_by_threshold() {
        let log = EventLog::in_memory(3600);
        log.actor_stuck("relay/n17", Duration::from_secs(5));
        log.actor_stuck("relay/n18", Duration::from_secs(5));
        let r = log.query_now(&EventQuery::default()).0;
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.records[0].kind, EventKind::ActorStuck);
        assert_eq!(r.records[0].subjects, "relay/n[17-18]");
    }

    #[tokio::test]
    async fn records_survive_a_restart_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = EventLog::open(dir.path(), 3600).unwrap();
            log.record(Event::new(EventKind::NodeDown, "n1", "gone"));
            log.record(Event::new(EventKind::NodeDown, "n2", "gone"));
            log.sync().await;
        }
        // The writer thread lets go of the database once the log is dropped.
        let mut again = None;
        for _ in 0..100 {
            match EventLog::open(dir.path(), 3600) {
                Ok(l) => {
                    again = Some(l);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        let got = again
            .expect("reopened")
            .query_now(&EventQuery::default())
            .0
            .records;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].subjects, "n[1-2]");
        assert_eq!(got[0].count, 2);
    }
}
