//! The connection limit of one listener: how many accepted connections may be
//! served at once, and the counters sdiag shows (current, peak, refused).
//!
//! Pure bookkeeping, no I/O: the accept loops ask for a [`Permit`] per
//! connection and hold it for the connection's life; what to tell a refused
//! peer is theirs to decide. Acquiring never waits, so a full limit cannot
//! stall an accept loop (the point of a limit is to keep serving the
//! connections already admitted).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Counters of one limiter at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnCounts {
    pub max: u64,
    pub current: u64,
    pub peak: u64,
    pub refused: u64,
}

/// Shared by an accept loop and every connection it admitted.
#[derive(Debug)]
pub struct ConnLimiter {
    max: usize,
    current: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicU64,
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<ConnLimiter>,
}

impl ConnLimiter {
    /// A limit of `max` concurrent connections (at least one).
    pub fn new(max: usize) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            max: max.max(1),
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// A place for one more connection, or `None` (counted as refused) when
    /// `max` are already held.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        // A compare-and-swap loop rather than add-then-check, so `current`
        // never reads above `max`, even for a moment.
        let mut now = self.current.load(Ordering::Relaxed);
        loop {
            if now >= self.max {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.current.compare_exchange_weak(
                now,
                now + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        self.peak.fetch_max(now + 1, Ordering::Relaxed);
        Some(Permit {
            limiter: self.clone(),
        })
    }

    pub fn counts(&self) -> ConnCounts {
        ConnCounts {
            max: self.max as u64,
            current: self.current.load(Ordering::Relaxed) as u64,
            peak: self.peak.load(Ordering::Relaxed) as u64,
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limiter.current.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_then_refuses_and_counts() {
        let l = ConnLimiter::new(2);
        let a = l.try_acquire();
        let b = l.try_acquire();
        assert!(a.is_some() && b.is_some());
        assert!(l.try_acquire().is_none());
        assert!(l.try_acquire().is_none());
        assert_eq!(
            l.counts(),
            ConnCounts {
                max: 2,
                current: 2,
                peak: 2,
                refused: 2
            }
        );
        // A closed connection frees its place; the peak is remembered.
        drop(a);
        assert_eq!(l.counts().current, 1);
        let c = l.try_acquire();
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(
            l.counts(),
            ConnCounts {
                max: 2,
                current: 0,
                peak: 2,
                refused: 2
            }
        );
    }

    #[test]
    fn a_zero_limit_still_admits_one() {
        let l = ConnLimiter::new(0);
        let a = l.try_acquire();
        assert!(a.is_some());
        assert!(l.try_acquire().is_none());
    }

    #[test]
    fn concurrent_acquirers_never_exceed_the_limit() {
        let l = ConnLimiter::new(8);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        if let Some(p) = l.try_acquire() {
                            assert!(l.counts().current <= 8);
                            drop(p);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        let c = l.counts();
        assert_eq!(c.current, 0);
        assert!(c.peak <= 8);
    }
}
