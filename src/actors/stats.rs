//! Mailbox accounting for `canopy status`.
//!
//! actix does not expose a mailbox's depth, so every actor carries an
//! [`ActorStats`]: senders bump `queued` through [`ActorStats::sent`] before
//! `send`, and the handler calls [`ActorStats::handled`]. The numbers are
//! approximate under races but never drift: each send is matched by one handle.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct ActorStats {
    queued: AtomicI64,
    handled: AtomicU64,
}

impl ActorStats {
    pub fn new() -> Arc<ActorStats> {
        Arc::new(ActorStats::default())
    }

    /// Call just before sending a message to the actor.
    pub fn sent(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Call at the top of every handler.
    pub fn handled(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        self.handled.fetch_add(1, Ordering::Relaxed);
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
