//! Mailbox accounting for `canopy status`.
//!
//! actix does not expose a mailbox's depth, so every actor carries an
//! [`ActorStats`]: senders bump `queued` through [`ActorStats::sent`] before
//! `send`, and the handler calls [`ActorStats::handled`]. The numbers are
//! approximate under races but never drift: each send is matched by one handle.
//!
//! For `canopy top` the same struct is the actor's *published* state: the
//! age of its oldest queued message, how long its current handler has run,
//! and the time spent in handlers. All of it is atomics the actor writes as it
//! works, so a daemon's query handler reads them without sending anything to
//! the actor: a stuck actor is still visible (nothing waits on its mailbox).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Enqueue times kept per actor. The mailbox is FIFO, so the next message to
/// be handled is `sent - depth`; a queue deeper than this reports the age of
/// the oldest stamp still kept (a lower bound, which is enough to call an
/// actor stuck).
const STAMPS: usize = 64;

#[derive(Debug)]
pub struct ActorStats {
    queued: AtomicI64,
    handled: AtomicU64,
    /// Messages ever counted in (sequence of `sent`).
    sent_seq: AtomicU64,
    /// When each of the last `STAMPS` messages was sent, µs since [`epoch`].
    stamps: [AtomicU64; STAMPS],
    /// When the handler running now started (µs since [`epoch`], plus one so
    /// that 0 means "not in a handler").
    busy_since: AtomicU64,
    /// Time spent in handlers since start, µs.
    busy_total_us: AtomicU64,
    /// A one-line summary the actor publishes when it changes (`canopy top`
    /// shows it without asking the actor).
    state: Mutex<Option<Arc<str>>>,
}

impl Default for ActorStats {
    fn default() -> Self {
        ActorStats {
            queued: AtomicI64::new(0),
            handled: AtomicU64::new(0),
            sent_seq: AtomicU64::new(0),
            stamps: std::array::from_fn(|_| AtomicU64::new(0)),
            busy_since: AtomicU64::new(0),
            busy_total_us: AtomicU64::new(0),
            state: Mutex::new(None),
        }
    }
}

/// The process's monotonic time origin for the stamps above.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Microseconds since this process's stats epoch (monotonic).
pub fn now_us() -> u64 {
    epoch().elapsed().as_micros() as u64
}

/// One reading of an actor's published counters (see `console::top`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawStats {
    pub depth: u64,
    /// When the oldest queued message was sent (µs since the epoch); `None`
    /// when nothing is queued.
    pub oldest_sent_us: Option<u64>,
    /// When the running handler started; `None` when idle.
    pub busy_since_us: Option<u64>,
    pub handled: u64,
    pub busy_total_us: u64,
}

/// Marks one handler's run: created by [`ActorStats::handled`], it adds the
/// time until it is dropped to the actor's handling time. Kept by
/// `let _busy = self.stats.handled();` for the whole handler; a handler that
/// drops it at once is counted with no handling time.
pub struct Handling {
    stats: Arc<ActorStats>,
    start_us: u64,
}

impl Drop for Handling {
    fn drop(&mut self) {
        let took = now_us().saturating_sub(self.start_us);
        self.stats.busy_total_us.fetch_add(took, Ordering::Relaxed);
        self.stats.busy_since.store(0, Ordering::Relaxed);
    }
}

impl ActorStats {
    pub fn new() -> Arc<ActorStats> {
        Arc::new(ActorStats::default())
    }

    /// Call just before sending a message to the actor.
    pub fn sent(&self) {
        let seq = self.sent_seq.fetch_add(1, Ordering::Relaxed);
        self.stamps[(seq % STAMPS as u64) as usize].store(now_us(), Ordering::Relaxed);
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Call at the top of every handler; keep the guard for the handler's
    /// length to count its handling time.
    pub fn handled(self: &Arc<Self>) -> Handling {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        self.handled.fetch_add(1, Ordering::Relaxed);
        let start_us = now_us();
        self.busy_since.store(start_us + 1, Ordering::Relaxed);
        Handling {
            stats: self.clone(),
            start_us,
        }
    }

    /// Publish a one-line state summary (call when it changes, not per
    /// message: it allocates).
    pub fn publish(&self, state: String) {
        if let Ok(mut s) = self.state.lock() {
            *s = Some(state.into());
        }
    }

    /// The last published summary, if any.
    pub fn published(&self) -> Option<Arc<str>> {
        self.state.lock().ok().and_then(|s| s.clone())
    }

    /// The published counters, read without touching the actor.
    pub fn read(&self) -> RawStats {
        let depth = self.depth() as u64;
        let oldest_sent_us = (depth > 0).then(|| {
            let sent = self.sent_seq.load(Ordering::Relaxed);
            // The next message to be handled, or the oldest stamp still kept.
            let next = sent.saturating_sub(depth.min(STAMPS as u64));
            self.stamps[(next % STAMPS as u64) as usize].load(Ordering::Relaxed)
        });
        let busy = self.busy_since.load(Ordering::Relaxed);
        RawStats {
            depth,
            oldest_sent_us,
            busy_since_us: busy.checked_sub(1),
            handled: self.total(),
            busy_total_us: self.busy_total_us.load(Ordering::Relaxed),
        }
    }

    pub fn depth(&self) -> i64 {
        self.queued.load(Ordering::Relaxed).max(0)
    }

    pub fn total(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }
}

/// Send `msg` to `addr`, counting it against `stats`; waits while the mailbox is full.
pub async fn send_counted<A, M>(
    addr: &actix::Addr<A>,
    stats: &ActorStats,
    msg: M,
) -> Result<M::Result, actix::MailboxError>
where
    A: actix::Actor + actix::Handler<M>,
    A::Context: actix::dev::ToEnvelope<A, M>,
    M: actix::Message + Send + 'static,
    M::Result: Send,
{
    stats.sent();
    let r = addr.send(msg).await;
    if r.is_err() {
        // The actor is gone: the message will never be handled.
        stats.queued.fetch_sub(1, Ordering::Relaxed);
    }
    r
}

/// A recipient that counts what it sends against the receiving actor's stats,
/// so the receiver's mailbox depth stays right whoever sends to it.
pub struct Counted<M>
where
    M: actix::Message + Send,
    M::Result: Send,
{
    recipient: actix::Recipient<M>,
    stats: Arc<ActorStats>,
}

impl<M> Clone for Counted<M>
where
    M: actix::Message + Send,
    M::Result: Send,
{
    fn clone(&self) -> Self {
        Counted {
            recipient: self.recipient.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<M> Counted<M>
where
    M: actix::Message + Send + 'static,
    M::Result: Send,
{
    pub fn new(recipient: actix::Recipient<M>, stats: Arc<ActorStats>) -> Self {
        Counted { recipient, stats }
    }

    /// Send, waiting while the mailbox is full.
    pub async fn send(&self, msg: M) -> Result<M::Result, actix::MailboxError> {
        self.stats.sent();
        let r = self.recipient.send(msg).await;
        if r.is_err() {
            self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_depth_oldest_stamp_and_running_handler() {
        let s = ActorStats::new();
        assert_eq!(s.read().oldest_sent_us, None, "nothing queued");
        let before = now_us();
        s.sent();
        s.sent();
        let r = s.read();
        assert_eq!(r.depth, 2);
        let oldest = r.oldest_sent_us.expect("two queued");
        assert!(oldest >= before);
        let busy = s.handled();
        let r = s.read();
        assert_eq!((r.depth, r.handled), (1, 1));
        assert!(r.busy_since_us.is_some(), "a handler is running");
        assert!(r.oldest_sent_us.expect("one queued") >= oldest);
        drop(busy);
        let _ = s.handled();
        let r = s.read();
        assert_eq!((r.depth, r.handled, r.oldest_sent_us), (0, 2, None));
        assert_eq!(r.busy_since_us, None, "the guard was dropped");
    }

    #[test]
    fn a_queue_deeper_than_the_stamps_reports_the_oldest_kept() {
        let s = ActorStats::new();
        for _ in 0..(STAMPS * 3) {
            s.sent();
        }
        let r = s.read();
        assert_eq!(r.depth, (STAMPS * 3) as u64);
        let kept: Vec<u64> = s.stamps.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        assert_eq!(r.oldest_sent_us, kept.iter().copied().min());
    }
}
