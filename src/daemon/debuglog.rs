//! A daemon's log filter as `canopy debug` changes it: the subscriber the
//! daemon binaries install (a reloadable `EnvFilter` and a line budget on
//! debug and trace lines), and the process-wide [`DebugState`] behind it.
//!
//! The state is process-wide because the subscriber is: in a `--simulate`
//! process every simulated node shares one filter, so a raise on one of them
//! raises all of them (load tests only). The decisions (which directives,
//! when to revert, which lines to drop) are the pure core in
//! `console::debug`; this module only holds the handle and reads the clock.
//! Reloading is a lock and a callsite-cache rebuild, no I/O, so it is done
//! on the relay's event loop.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use tracing::{Event, Level, Metadata};
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::console::debug::{DebugState, LineBudget, Raised};
use crate::wire::messages::DebugSet;

/// Debug and trace lines one daemon process writes per second at most
/// (`CANOPY_DEBUG_RATE` in the daemon's environment overrides it).
pub const DEBUG_LINES_PER_SEC: u64 = 500;

/// The rate in force, set once by [`init_tracing`].
static RATE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(DEBUG_LINES_PER_SEC);

struct Control {
    handle: Option<reload::Handle<EnvFilter, Registry>>,
    state: DebugState,
}

fn control() -> &'static Mutex<Control> {
    static CONTROL: OnceLock<Mutex<Control>> = OnceLock::new();
    CONTROL.get_or_init(|| {
        Mutex::new(Control {
            handle: None,
            state: DebugState::new("info"),
        })
    })
}

fn budget() -> &'static Mutex<LineBudget> {
    static BUDGET: OnceLock<Mutex<LineBudget>> = OnceLock::new();
    BUDGET.get_or_init(|| {
        Mutex::new(LineBudget::new(
            RATE.load(std::sync::atomic::Ordering::Relaxed),
        ))
    })
}

/// Drops debug and trace lines past the budget; says how many, once a second.
struct RateLimit;

impl<S> Filter<S> for RateLimit {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        // Level::DEBUG and TRACE compare greater than INFO (more verbose).
        if *event.metadata().level() < Level::DEBUG {
            return true;
        }
        let verdict = match budget().lock() {
            Ok(mut b) => b.admit(Instant::now()),
            Err(_) => return true,
        };
        if verdict.report_dropped > 0 {
            // Written directly: an event from inside the filter would re-enter it.
            eprintln!(
                "{} WARN canopy::daemon::debuglog: {} debug lines dropped in the last second \
                 (at most {} per second)",
                chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ"),
                verdict.report_dropped,
                RATE.load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        verdict.admit
    }
}

/// The daemons' subscriber: as `cli::init_tracing`, but reloadable by
/// `canopy debug` and with debug lines rate-limited.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let base = std::env::var("CANOPY_LOG")
        .ok()
        .filter(|b| EnvFilter::try_new(b).is_ok())
        .unwrap_or_else(|| default.to_string());
    if let Some(rate) = std::env::var("CANOPY_DEBUG_RATE")
        .ok()
        .and_then(|r| r.parse::<u64>().ok())
    {
        RATE.store(rate, std::sync::atomic::Ordering::Relaxed);
    }
    let filter = EnvFilter::try_new(&base).unwrap_or_else(|_| EnvFilter::new(default));
    let (layer, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(RateLimit);
    if tracing_subscriber::registry()
        .with(layer)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        if let Ok(mut c) = control().lock() {
            c.handle = Some(handle);
            c.state = DebugState::new(base);
        }
    }
}

fn install(c: &Control, directives: &str) -> Result<(), String> {
    let Some(h) = &c.handle else {
        // No reloadable subscriber (a library user, a test): the state is
        // kept and shown, nothing else changes.
        return Ok(());
    };
    let f = EnvFilter::try_new(directives).map_err(|e| format!("bad filter {directives}: {e}"))?;
    h.reload(f)
        .map_err(|e| format!("log filter not reloaded: {e}"))
}

/// Raise (or, with no flags, clear) as asked; what is raised afterwards and
/// the next revert deadline.
pub fn apply(set: &DebugSet, now: Instant) -> Result<(Vec<Raised>, Option<Instant>), String> {
    let flags = if set.flags.is_empty() {
        Vec::new()
    } else {
        crate::console::debug::parse_flags(&set.flags.join(",")).map_err(|e| e.to_string())?
    };
    let level = crate::console::debug::parse_level(&set.level).map_err(|e| e.to_string())?;
    let mut c = control()
        .lock()
        .map_err(|_| "debug state poisoned".to_string())?;
    let directives = if flags.is_empty() {
        c.state.clear()
    } else {
        let d = crate::console::debug::check_duration(set.for_secs).map_err(|e| e.to_string())?;
        c.state.raise(now, &flags, &level, d, set.until)
    };
    install(&c, &directives)?;
    tracing::info!(flags = ?flags, level = %level, for_secs = set.for_secs, filter = %directives, "log detail changed by canopy debug");
    Ok((c.state.show(), c.state.next_deadline()))
}

/// Revert what is due at `now`; the next deadline, if any is left.
pub fn expire(now: Instant) -> Option<Instant> {
    let mut c = control().lock().ok()?;
    if let Some(directives) = c.state.expire(now) {
        match install(&c, &directives) {
            Ok(()) => tracing::info!(filter = %directives, "raised log detail reverted"),
            Err(e) => tracing::warn!(error = %e, "raised log detail not reverted"),
        }
    }
    c.state.next_deadline()
}

/// What is raised now.
pub fn show() -> Vec<Raised> {
    control().lock().map(|c| c.state.show()).unwrap_or_default()
}
