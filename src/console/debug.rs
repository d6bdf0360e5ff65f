//! `canopy debug`: which log detail a daemon has raised, for which parts of
//! it, until when; and the line budget that keeps raised detail from
//! flooding a relay.
//!
//! A raise names flags (`route`, `agent`, ...), each standing for the
//! modules behind it, a level and a deadline. The daemon holds the deadline
//! itself, so the raise reverts even if the controller that asked is gone.
//! [`DebugState`] turns the active raises into one `EnvFilter` directive
//! string over the daemon's base filter; the daemon's shell reloads its
//! subscriber with it and arms one timer for [`DebugState::next_deadline`].
//! [`LineBudget`] is the rate limit on debug lines: a fixed number per
//! second, the rest dropped and counted, and the count reported once the
//! next second opens. Nothing here reads a clock.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The flags an operator may raise, and the modules each covers.
pub const FLAGS: &[(&str, &[&str])] = &[
    // Slurm's DebugFlags=Route: message forwarding through the tree.
    ("route", &["canopy::actors::relay", "canopy::tree"]),
    (
        "agent",
        &["canopy::actors::agent", "canopy::actors::agent_link"],
    ),
    ("link", &["canopy::daemon::link", "canopy::daemon::noded"]),
    ("wire", &["canopy::wire"]),
    ("auth", &["canopy::wire::auth", "canopy::authd"]),
    ("step", &["canopy::actors::step", "canopy::exec"]),
    ("all", &["canopy"]),
];

/// The levels a raise may ask for, least detailed first.
pub const LEVELS: &[&str] = &["info", "debug", "trace"];

/// The longest a raise may last: detail left on by mistake still ends.
pub const MAX_FOR: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DebugError {
    #[error("unknown debug flag '{0}' (known: route, agent, link, wire, auth, step, all)")]
    UnknownFlag(String),
    #[error("unknown level '{0}' (known: info, debug, trace)")]
    UnknownLevel(String),
    #[error("no debug flags given (--flags route,agent,...)")]
    NoFlags,
    #[error("the duration must be between 1 s and 24 h (got {0} s)")]
    BadDuration(u64),
}

/// Check a comma list of flags: lower-cased, deduplicated, in the given order.
pub fn parse_flags(list: &str) -> Result<Vec<String>, DebugError> {
    let mut out: Vec<String> = Vec::new();
    for f in list.split(',').map(|f| f.trim().to_ascii_lowercase()) {
        if f.is_empty() {
            continue;
        }
        if !FLAGS.iter().any(|(n, _)| *n == f) {
            return Err(DebugError::UnknownFlag(f));
        }
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        return Err(DebugError::NoFlags);
    }
    Ok(out)
}

pub fn parse_level(level: &str) -> Result<String, DebugError> {
    let l = level.trim().to_ascii_lowercase();
    if LEVELS.contains(&l.as_str()) {
        Ok(l)
    } else {
        Err(DebugError::UnknownLevel(level.to_string()))
    }
}

pub fn check_duration(secs: u64) -> Result<Duration, DebugError> {
    let d = Duration::from_secs(secs);
    if secs == 0 || d > MAX_FOR {
        return Err(DebugError::BadDuration(secs));
    }
    Ok(d)
}

fn level_rank(l: &str) -> usize {
    LEVELS.iter().position(|x| *x == l).unwrap_or(0)
}

/// One raised flag as `canopy debug --show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Raised {
    pub flag: String,
    pub level: String,
    /// Wall-clock seconds when it reverts, as the asker computed it (so that
    /// every node of one raise reports the same value and they fold).
    pub until: i64,
}

#[derive(Debug, Clone)]
struct Raise {
    raised: Raised,
    deadline: Instant,
}

/// A daemon's raised log detail.
#[derive(Debug, Clone)]
pub struct DebugState {
    base: String,
    raises: Vec<Raise>,
}

impl DebugState {
    /// `base`: the filter the daemon started with (what every revert returns to).
    pub fn new(base: impl Into<String>) -> Self {
        DebugState {
            base: base.into(),
            raises: Vec::new(),
        }
    }

    /// Raise `flags` to `level` for `for_` from `now`; `until` is the
    /// wall-clock second the asker shows for it. A flag raised again takes the
    /// new level and deadline (an operator extending or lowering it).
    /// Returns the filter to install.
    pub fn raise(
        &mut self,
        now: Instant,
        flags: &[String],
        level: &str,
        for_: Duration,
        until: i64,
    ) -> String {
        for f in flags {
            self.raises.retain(|r| r.raised.flag != *f);
            self.raises.push(Raise {
                raised: Raised {
                    flag: f.clone(),
                    level: level.to_string(),
                    until,
                },
                deadline: now + for_,
            });
        }
        self.filter()
    }

    /// Drop every raise (`canopy debug --off`); returns the filter.
    pub fn clear(&mut self) -> String {
        self.raises.clear();
        self.filter()
    }

    /// Drop the raises whose deadline has come; the filter to install if
    /// anything changed.
    pub fn expire(&mut self, now: Instant) -> Option<String> {
        let before = self.raises.len();
        self.raises.retain(|r| r.deadline > now);
        (self.raises.len() != before).then(|| self.filter())
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.raises.iter().map(|r| r.deadline).min()
    }

    /// What is raised now, by flag name.
    pub fn show(&self) -> Vec<Raised> {
        let mut v: Vec<Raised> = self.raises.iter().map(|r| r.raised.clone()).collect();
        v.sort_by(|a, b| a.flag.cmp(&b.flag));
        v
    }

    /// The base filter, then one directive per module of each raised flag
    /// (later directives for the same module would be ambiguous, so each
    /// module gets the most detailed level asked of it).
    pub fn filter(&self) -> String {
        let mut by_module: Vec<(&str, &str)> = Vec::new();
        for r in &self.raises {
            let Some((_, modules)) = FLAGS.iter().find(|(n, _)| *n == r.raised.flag) else {
                continue;
            };
            for m in modules.iter() {
                match by_module.iter_mut().find(|(mm, _)| mm == m) {
                    Some(e) if level_rank(&r.raised.level) > level_rank(e.1) => {
                        e.1 = r.raised.level.as_str()
                    }
                    Some(_) => {}
                    None => by_module.push((m, r.raised.level.as_str())),
                }
            }
        }
        by_module.sort();
        let mut out = self.base.clone();
        for (m, l) in by_module {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&format!("{m}={l}"));
        }
        out
    }
}

/// What the limiter says about one debug line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub admit: bool,
    /// Lines dropped in the window that just closed: to be reported now, once.
    pub report_dropped: u64,
}

/// A bounded number of debug lines per one-second window.
#[derive(Debug, Clone)]
pub struct LineBudget {
    per_sec: u64,
    window: Option<Instant>,
    used: u64,
    dropped: u64,
}

impl LineBudget {
    pub fn new(per_sec: u64) -> Self {
        LineBudget {
            per_sec,
            window: None,
            used: 0,
            dropped: 0,
        }
    }

    /// May a line go out at `now`?
    pub fn admit(&mut self, now: Instant) -> Verdict {
        let mut report = 0;
        let fresh = match self.window {
            None => true,
            Some(w) => now.saturating_duration_since(w) >= Duration::from_secs(1),
        };
        if fresh {
            report = std::mem::take(&mut self.dropped);
            self.window = Some(now);
            self.used = 0;
        }
        if self.used < self.per_sec {
            self.used += 1;
            Verdict {
                admit: true,
                report_dropped: report,
            }
        } else {
            self.dropped += 1;
            Verdict {
                admit: false,
                report_dropped: report,
            }
        }
    }

    /// Dropped so far in the current window (not yet reported).
    pub fn pending_dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Vec<String> {
        parse_flags(s).unwrap()
    }

    #[test]
    fn flags_and_levels_are_checked_with_a_clear_error() {
        assert_eq!(flags("Route, agent,route"), vec!["route", "agent"]);
        assert_eq!(
            parse_flags("route,bogus"),
            Err(DebugError::UnknownFlag("bogus".into()))
        );
        assert_eq!(parse_flags(" , "), Err(DebugError::NoFlags));
        assert!(parse_flags("x")
            .unwrap_err()
            .to_string()
            .contains("route, agent"));
        assert_eq!(parse_level("DEBUG").unwrap(), "debug");
        assert!(parse_level("loud").is_err());
        assert!(check_duration(0).is_err());
        assert!(check_duration(90_000).is_err());
        assert_eq!(check_duration(600).unwrap(), Duration::from_secs(600));
    }

    #[test]
    fn a_raise_adds_directives_and_reverts_by_itself() {
        let t = Instant::now();
        let mut s = DebugState::new("info");
        assert_eq!(s.filter(), "info");
        let f = s.raise(t, &flags("route"), "debug", Duration::from_secs(600), 1000);
        assert_eq!(f, "info,canopy::actors::relay=debug,canopy::tree=debug");
        assert_eq!(s.next_deadline(), Some(t + Duration::from_secs(600)));
        assert_eq!(s.expire(t + Duration::from_secs(599)), None);
        assert_eq!(
            s.expire(t + Duration::from_secs(600)),
            Some("info".to_string())
        );
        assert!(s.show().is_empty());
        assert_eq!(s.next_deadline(), None);
    }

    #[test]
    fn overlapping_raises_keep_the_most_detail_and_expire_separately() {
        let t = Instant::now();
        let mut s = DebugState::new("");
        s.raise(t, &flags("all"), "debug", Duration::from_secs(10), 10);
        s.raise(t, &flags("route"), "trace", Duration::from_secs(60), 60);
        assert_eq!(
            s.filter(),
            "canopy=debug,canopy::actors::relay=trace,canopy::tree=trace"
        );
        assert_eq!(
            s.expire(t + Duration::from_secs(11)).as_deref(),
            Some("canopy::actors::relay=trace,canopy::tree=trace")
        );
        let shown = s.show();
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].flag, "route");
        assert_eq!(shown[0].until, 60);
        // Raised again: the new deadline replaces the old one.
        s.raise(t, &flags("route"), "debug", Duration::from_secs(5), 5);
        assert_eq!(s.next_deadline(), Some(t + Duration::from_secs(5)));
        assert_eq!(s.clear(), "");
    }

    #[test]
    fn the_line_budget_drops_past_its_rate_and_says_how_many_once() {
        let t = Instant::now();
        let mut b = LineBudget::new(3);
        let ok: Vec<bool> = (0..5).map(|_| b.admit(t).admit).collect();
        assert_eq!(ok, vec![true, true, true, false, false]);
        assert_eq!(b.pending_dropped(), 2);
        // Still the same window.
        assert!(!b.admit(t + Duration::from_millis(999)).admit);
        // The next window reports the three dropped, once.
        let v = b.admit(t + Duration::from_millis(1000));
        assert_eq!(
            v,
            Verdict {
                admit: true,
                report_dropped: 3
            }
        );
        let v = b.admit(t + Duration::from_millis(1001));
        assert_eq!(
            v,
            Verdict {
                admit: true,
                report_dropped: 0
            }
        );
    }
}
