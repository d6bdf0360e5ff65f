//! Defences of the daemons' listeners against peers that are hostile or
//! merely too eager: how long a connection may take to authenticate, which
//! uids may speak as node daemons, log lines about bad peers that cannot
//! fill a disk, and Slurm's per-user RPC rate limiting (`rl_enable`).
//!
//! Pure bookkeeping, no I/O beyond log lines: the accept loops and
//! connection tasks ask, and decide what to send.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::RateLimitConf;

/// How long an accepted connection may take to deliver its first verified
/// frame. Legitimate peers send it at once (a CLI request, a `Hello`); the
/// deadline covers a frame trickled in byte by byte too.
pub const AUTH_DEADLINE: Duration = Duration::from_secs(5);

/// At most one line per kind of bad peer per interval (plus the count of
/// those not logged); the counters keep every event.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Kinds of misbehaving peers, each logged and counted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// A frame that could not be read: garbage, oversized, truncated, or a
    /// large unauthenticated frame the shared budget could not take.
    Frame,
    /// A frame whose credential was rejected (signature, expiry, replay).
    Auth,
    /// No verified frame within [`AUTH_DEADLINE`].
    AuthTimeout,
    /// An authenticated connection idle past the read timeout (not hostile:
    /// counted, logged at debug only).
    Idle,
    /// Node-daemon traffic signed by a uid that is not a daemon's.
    NotDaemon,
}

const KINDS: usize = 5;

impl Bad {
    fn index(self) -> usize {
        match self {
            Bad::Frame => 0,
            Bad::Auth => 1,
            Bad::AuthTimeout => 2,
            Bad::Idle => 3,
            Bad::NotDaemon => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Bad::Frame => "bad_frame",
            Bad::Auth => "auth_rejected",
            Bad::AuthTimeout => "auth_timeout",
            Bad::Idle => "idle_timeout",
            Bad::NotDaemon => "not_daemon",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Bad::Frame => "unreadable frame; connection closed",
            Bad::Auth => "frame rejected",
            Bad::AuthTimeout => "no authenticated frame in time; connection closed",
            Bad::Idle => "idle connection closed",
            Bad::NotDaemon => "node-daemon message from a uid that is not a daemon's; refused",
        }
    }
}

/// Every event's count, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BadCounts {
    pub bad_frames: u64,
    pub auth_rejected: u64,
    pub auth_timeouts: u64,
    pub idle_closed: u64,
    pub not_daemon: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Window {
    started: Option<Instant>,
    suppressed: u64,
}

/// Rate-limited logging and counting of bad peers, one per daemon.
#[derive(Debug, Default)]
pub struct PeerLog {
    counts: [AtomicU64; KINDS],
    windows: Mutex<[Window; KINDS]>,
    /// Where authentication failures also go (`canopy events`), once the controller set it.
    events: std::sync::OnceLock<super::event_log::EventLog>,
}

impl PeerLog {
    /// Send authentication failures to `log` too (the controller's; node daemons have none).
    pub fn set_events(&self, log: super::event_log::EventLog) {
        let _ = self.events.set(log);
    }

    /// Count one event; log it unless a line of its kind was written less
    /// than [`LOG_INTERVAL`] ago. The first line after a quiet interval
    /// carries how many events the previous one left unlogged.
    pub fn record(&self, kind: Bad, peer: Option<SocketAddr>, detail: &dyn fmt::Display) {
        self.counts[kind.index()].fetch_add(1, Ordering::Relaxed);
        if let (Some(log), Bad::Auth | Bad::AuthTimeout | Bad::NotDaemon) =
            (self.events.get(), kind)
        {
            // Folded by kind (the message), not by the error text, so a storm of bad frames
            // from many peers is one record with their addresses.
            use crate::console::events::{Event, EventKind};
            let subject = peer
                .map(|p| p.ip().to_string())
                .unwrap_or_else(|| "local".into());
            log.record(Event::new(EventKind::AuthFailure, subject, kind.message()));
        }
        let now = Instant::now();
        let suppressed = {
            let Ok(mut w) = self.windows.lock() else {
                return;
            };
            let w = &mut w[kind.index()];
            match w.started {
                Some(t) if now.duration_since(t) < LOG_INTERVAL => {
                    w.suppressed += 1;
                    return;
                }
                _ => {
                    w.started = Some(now);
                    std::mem::take(&mut w.suppressed)
                }
            }
        };
        let total = self.counts[kind.index()].load(Ordering::Relaxed);
        let peer = peer.map(|p| p.to_string()).unwrap_or_default();
        let interval_s = LOG_INTERVAL.as_secs();
        if kind == Bad::Idle {
            tracing::debug!(kind = kind.name(), %peer, error = %detail, total, "{}", kind.message());
        } else {
            tracing::warn!(
                kind = kind.name(),
                %peer,
                error = %detail,
                suppressed,
                total,
                interval_s,
                "{}{}",
                kind.message(),
                if suppressed > 0 { " (more like it not logged; see sdiag)" } else { "" }
            );
        }
    }

    pub fn counts(&self) -> BadCounts {
        let c = |k: Bad| self.counts[k.index()].load(Ordering::Relaxed);
        BadCounts {
            bad_frames: c(Bad::Frame),
            auth_rejected: c(Bad::Auth),
            auth_timeouts: c(Bad::AuthTimeout),
            idle_closed: c(Bad::Idle),
            not_daemon: c(Bad::NotDaemon),
        }
    }
}

/// The uids that may speak as node daemons (Hello, registrations, job ends,
/// health, forwarded replies): root, the uid this daemon runs as, and the
/// configured SlurmUser. They are also exempt from rate limiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemons {
    uids: Vec<u32>,
}

impl Daemons {
    pub fn new(own_uid: u32, slurm_user_uid: Option<u32>) -> Daemons {
        let mut uids = vec![0, own_uid];
        uids.extend(slurm_user_uid);
        uids.sort_unstable();
        uids.dedup();
        Daemons { uids }
    }

    /// This process's uid and `slurm_user`'s, looked up off the event loop
    /// (a passwd lookup may wait on LDAP or NFS). An unknown SlurmUser is
    /// logged and ignored: the daemons still recognise root and themselves.
    pub async fn resolve(slurm_user: Option<String>) -> Daemons {
        let own = nix::unistd::getuid().as_raw();
        let Some(name) = slurm_user else {
            return Daemons::new(own, None);
        };
        let lookup = name.clone();
        let found = tokio::task::spawn_blocking(move || {
            nix::unistd::User::from_name(&lookup)
                .ok()
                .flatten()
                .map(|u| u.uid.as_raw())
        })
        .await
        .ok()
        .flatten();
        if found.is_none() {
            tracing::warn!(slurm_user = %name, "SlurmUser is not a known user; only root and this daemon's own uid may speak as node daemons");
        }
        Daemons::new(own, found)
    }

    pub fn allows(&self, uid: u32) -> bool {
        self.uids.contains(&uid)
    }

    pub fn uids(&self) -> &[u32] {
        &self.uids
    }
}

/// What the rate limiter says about one RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Over the limit: answer "try again", not before `retry_in` (when the
    /// user's next tokens are due); `log` says whether this one should be
    /// logged (`rl_log_freq`).
    Limited {
        log: bool,
        retry_in: Duration,
    },
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u32,
    /// Refill periods since the limiter started, as of the last refill.
    period: u64,
    limited: u64,
    last_log: Option<Instant>,
}

/// The counters sdiag shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateCounts {
    pub enabled: bool,
    pub bucket_size: u32,
    pub refill_rate: u32,
    pub refill_period_s: u32,
    pub table_size: u32,
    /// Users tracked now.
    pub users: u64,
    /// RPCs answered "try again" since start.
    pub limited: u64,
    /// RPCs let through unlimited because the table was full of active users.
    pub table_full: u64,
    /// The users limited most, `(uid, RPCs limited)`, most first (10 at most).
    pub top: Vec<(u32, u64)>,
}

/// Slurm's per-user token buckets: each RPC of a user takes a token; a
/// user whose bucket is empty is told to back off. Root and the daemons'
/// uids are exempt, as in Slurm. The table holds at most `table_size`
/// users: when it is full, users whose buckets have refilled completely
/// (no different from a new entry) are dropped; if none has, the newcomer
/// goes unlimited and is counted, as Slurm lets it through.
#[derive(Debug)]
pub struct RateLimiter {
    conf: RateLimitConf,
    exempt: Daemons,
    epoch: Instant,
    table: Mutex<HashMap<u32, Bucket>>,
    limited: AtomicU64,
    table_full: AtomicU64,
}

impl RateLimiter {
    pub fn new(conf: RateLimitConf, exempt: Daemons) -> RateLimiter {
        RateLimiter {
            conf,
            exempt,
            epoch: Instant::now(),
            table: Mutex::new(HashMap::new()),
            limited: AtomicU64::new(0),
            table_full: AtomicU64::new(0),
        }
    }

    fn period_at(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_secs()
            / u64::from(self.conf.refill_period_s.max(1))
    }

    fn refilled(&self, b: &Bucket, period: u64) -> u32 {
        let add = period
            .saturating_sub(b.period)
            .saturating_mul(u64::from(self.conf.refill_rate));
        let tokens = u64::from(b.tokens).saturating_add(add);
        tokens.min(u64::from(self.conf.bucket_size)) as u32
    }

    /// Take a token for one RPC of `uid` at `now`.
    pub fn check(&self, uid: u32, now: Instant) -> Verdict {
        if !self.conf.enabled || self.exempt.allows(uid) {
            return Verdict::Allowed;
        }
        let period = self.period_at(now);
        let Ok(mut table) = self.table.lock() else {
            return Verdict::Allowed;
        };
        if !table.contains_key(&uid) && table.len() >= self.conf.table_size as usize {
            let full = self.conf.bucket_size;
            table.retain(|_, b| self.refilled(b, period) < full);
            if table.len() >= self.conf.table_size as usize {
                self.table_full.fetch_add(1, Ordering::Relaxed);
                return Verdict::Allowed;
            }
        }
        let b = table.entry(uid).or_insert(Bucket {
            tokens: self.conf.bucket_size,
            period,
            limited: 0,
            last_log: None,
        });
        b.tokens = self.refilled(b, period);
        b.period = period;
        if b.tokens > 0 {
            b.tokens -= 1;
            return Verdict::Allowed;
        }
        b.limited += 1;
        self.limited.fetch_add(1, Ordering::Relaxed);
        let log = match self.conf.log_freq_s {
            f if f < 0 => false,
            0 => true,
            f => b
                .last_log
                .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(f as u64)),
        };
        if log {
            b.last_log = Some(now);
        }
        let period = Duration::from_secs(u64::from(self.conf.refill_period_s.max(1)));
        let into = now.saturating_duration_since(self.epoch).as_nanos() % period.as_nanos();
        let retry_in = period.saturating_sub(Duration::from_nanos(into as u64));
        Verdict::Limited { log, retry_in }
    }

    pub fn counts(&self) -> RateCounts {
        let (users, mut top) = match self.table.lock() {
            Ok(t) => (
                t.len() as u64,
                t.iter()
                    .filter(|(_, b)| b.limited > 0)
                    .map(|(&uid, b)| (uid, b.limited))
                    .collect::<Vec<_>>(),
            ),
            Err(_) => (0, Vec::new()),
        };
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(10);
        RateCounts {
            enabled: self.conf.enabled,
            bucket_size: self.conf.bucket_size,
            refill_rate: self.conf.refill_rate,
            refill_period_s: self.conf.refill_period_s,
            table_size: self.conf.table_size,
            users,
            limited: self.limited.load(Ordering::Relaxed),
            table_full: self.table_full.load(Ordering::Relaxed),
            top,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(bucket: u32, rate: u32, period: u32, table: u32) -> RateLimitConf {
        RateLimitConf {
            enabled: true,
            bucket_size: bucket,
            refill_rate: rate,
            refill_period_s: period,
            table_size: table,
            log_freq_s: 0,
        }
    }

    #[test]
    fn a_bucket_allows_a_burst_then_refills_at_the_rate() {
        let rl = RateLimiter::new(conf(3, 2, 1, 8), Daemons::new(500, None));
        let t0 = rl.epoch;
        for _ in 0..3 {
            assert_eq!(rl.check(1000, t0), Verdict::Allowed);
        }
        assert_eq!(
            rl.check(1000, t0),
            Verdict::Limited {
                log: true,
                retry_in: Duration::from_secs(1)
            }
        );
        // Another user has a bucket of their own.
        assert_eq!(rl.check(1001, t0), Verdict::Allowed);
        // One period later: two tokens.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(rl.check(1000, t1), Verdict::Allowed);
        assert_eq!(rl.check(1000, t1), Verdict::Allowed);
        assert!(matches!(rl.check(1000, t1), Verdict::Limited { .. }));
        // Never more than the bucket holds.
        let t9 = t0 + Duration::from_secs(100);
        for _ in 0..3 {
            assert_eq!(rl.check(1000, t9), Verdict::Allowed);
        }
        assert!(matches!(rl.check(1000, t9), Verdict::Limited { .. }));
        let c = rl.counts();
        assert_eq!((c.limited, c.users, c.top.clone()), (3, 2, vec![(1000, 3)]));
    }

    #[test]
    fn root_and_daemons_are_exempt_and_disabled_limits_nothing() {
        let rl = RateLimiter::new(conf(1, 1, 1, 8), Daemons::new(500, Some(64)));
        let t0 = rl.epoch;
        for uid in [0, 500, 64] {
            for _ in 0..10 {
                assert_eq!(rl.check(uid, t0), Verdict::Allowed);
            }
        }
        let off = RateLimiter::new(
            RateLimitConf {
                enabled: false,
                ..conf(1, 1, 1, 8)
            },
            Daemons::new(500, None),
        );
        for _ in 0..10 {
            assert_eq!(off.check(1000, off.epoch), Verdict::Allowed);
        }
        assert_eq!(rl.counts().users, 0);
    }

    #[test]
    fn the_table_is_bounded_and_recycles_refilled_buckets() {
        let rl = RateLimiter::new(conf(2, 1, 1, 2), Daemons::new(500, None));
        let t0 = rl.epoch;
        rl.check(1000, t0);
        rl.check(1001, t0);
        // Full of users with tokens spent: a third goes unlimited, counted.
        assert_eq!(rl.check(1002, t0), Verdict::Allowed);
        assert_eq!(rl.counts().table_full, 1);
        assert_eq!(rl.counts().users, 2);
        // Once their buckets are full again their entries are recycled.
        let later = t0 + Duration::from_secs(5);
        assert_eq!(rl.check(1002, later), Verdict::Allowed);
        let c = rl.counts();
        assert!(c.users <= 2, "{c:?}");
    }

    #[test]
    fn log_frequency_limits_lines_per_user() {
        let mut c = conf(1, 1, 3600, 8);
        c.log_freq_s = 10;
        let rl = RateLimiter::new(c, Daemons::new(500, None));
        let t0 = rl.epoch;
        rl.check(1000, t0);
        let log = |v| matches!(v, Verdict::Limited { log: true, .. });
        assert!(log(rl.check(1000, t0)));
        assert!(!log(rl.check(1000, t0)));
        let t11 = t0 + Duration::from_secs(11);
        assert!(log(rl.check(1000, t11)));
        let mut c = conf(1, 1, 3600, 8);
        c.log_freq_s = -1;
        let quiet = RateLimiter::new(c, Daemons::new(500, None));
        quiet.check(1000, quiet.epoch);
        assert!(matches!(
            quiet.check(1000, quiet.epoch),
            Verdict::Limited { log: false, .. }
        ));
    }

    #[test]
    fn peer_log_counts_everything_and_logs_once_per_interval() {
        let log = PeerLog::default();
        for _ in 0..1000 {
            log.record(Bad::Frame, None, &"garbage");
        }
        log.record(Bad::NotDaemon, None, &"uid 1000");
        let c = log.counts();
        assert_eq!((c.bad_frames, c.not_daemon, c.auth_rejected), (1000, 1, 0));
        let w = log.windows.lock().unwrap();
        assert_eq!(w[Bad::Frame.index()].suppressed, 999);
        assert_eq!(w[Bad::NotDaemon.index()].suppressed, 0);
    }

    #[test]
    fn daemons_are_root_self_and_slurm_user() {
        let d = Daemons::new(500, Some(64));
        assert!(d.allows(0) && d.allows(500) && d.allows(64));
        assert!(!d.allows(1000));
        assert_eq!(Daemons::new(0, None).uids(), &[0]);
    }
}

/// Operators named in `SlurmctldParameters=canopy_operators=` (users, and
/// `@group`s: a caller whose credential's gid is the group's, or whom the
/// group lists as a member), resolved once at start-up, off the event loop.
#[derive(Debug, Clone, Default)]
pub struct Operators {
    uids: Vec<u32>,
    gids: Vec<u32>,
}

impl Operators {
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }

    /// Look the names up (a passwd or group lookup may wait on LDAP or
    /// NFS, so on a blocking thread). An unknown name is logged and left out.
    pub async fn resolve(names: Vec<String>) -> Operators {
        if names.is_empty() {
            return Operators::default();
        }
        tokio::task::spawn_blocking(move || Operators::resolve_now(&names))
            .await
            .unwrap_or_default()
    }

    fn resolve_now(names: &[String]) -> Operators {
        let mut ops = Operators::default();
        for name in names {
            if let Some(group) = name.strip_prefix('@') {
                match nix::unistd::Group::from_name(group) {
                    Ok(Some(g)) => {
                        ops.gids.push(g.gid.as_raw());
                        for member in &g.mem {
                            if let Ok(Some(u)) = nix::unistd::User::from_name(member) {
                                ops.uids.push(u.uid.as_raw());
                            }
                        }
                    }
                    _ => tracing::warn!(group, "canopy_operators: no such group; ignored"),
                }
            } else {
                match nix::unistd::User::from_name(name) {
                    Ok(Some(u)) => ops.uids.push(u.uid.as_raw()),
                    _ => tracing::warn!(user = %name, "canopy_operators: no such user; ignored"),
                }
            }
        }
        ops.uids.sort_unstable();
        ops.uids.dedup();
        ops
    }
}
