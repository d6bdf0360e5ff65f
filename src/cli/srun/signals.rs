//! Signals srun itself receives: which it handles (the rest are forwarded), the three
//! Ctrl-C modes ([`Interrupts`]), and the channel that delivers them to the session.
//!
//! Does not: act on a signal; `session` decides what each one does to the step.

use super::*;

/// What Ctrl-C does (Slurm's three modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interrupts {
    /// Once: report task states; twice within a second: abort the step.
    Status,
    /// `-X`: forward SIGINT to the tasks.
    Forward,
    /// `--quit-on-interrupt`: abort at the first one.
    Quit,
}

/// Signals srun handles itself; everything else listed is forwarded.
pub(super) const HANDLED_SIGNALS: &[i32] = &[
    libc_sig::SIGINT,
    libc_sig::SIGTERM,
    libc_sig::SIGHUP,
    libc_sig::SIGQUIT,
    libc_sig::SIGUSR1,
    libc_sig::SIGUSR2,
    libc_sig::SIGALRM,
    libc_sig::SIGCONT,
    libc_sig::SIGTSTP,
];

/// Signal numbers, from nix so no libc dependency is needed.
pub(super) mod libc_sig {
    use nix::sys::signal::Signal;
    pub const SIGINT: i32 = Signal::SIGINT as i32;
    pub const SIGTERM: i32 = Signal::SIGTERM as i32;
    pub const SIGHUP: i32 = Signal::SIGHUP as i32;
    pub const SIGQUIT: i32 = Signal::SIGQUIT as i32;
    pub const SIGUSR1: i32 = Signal::SIGUSR1 as i32;
    pub const SIGUSR2: i32 = Signal::SIGUSR2 as i32;
    pub const SIGALRM: i32 = Signal::SIGALRM as i32;
    pub const SIGCONT: i32 = Signal::SIGCONT as i32;
    pub const SIGTSTP: i32 = Signal::SIGTSTP as i32;
    pub const SIGKILL: i32 = Signal::SIGKILL as i32;
    pub const SIGWINCH: i32 = Signal::SIGWINCH as i32;
}

/// Caught as well with `--pty`: the terminal's size changed.
pub(super) const PTY_SIGNALS: &[i32] = &[libc_sig::SIGWINCH];

/// Deliver every signal in `HANDLED_SIGNALS` and `extra` to one channel.
pub(super) fn catch_signals(extra: &[i32]) -> mpsc::UnboundedReceiver<i32> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = mpsc::unbounded_channel();
    for &sig in HANDLED_SIGNALS.iter().chain(extra) {
        let Ok(mut stream) = signal(SignalKind::from_raw(sig)) else {
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(sig).is_err() {
                    return;
                }
            }
        });
    }
    rx
}
