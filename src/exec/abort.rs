//! Interrupting a launch that is stuck in the kernel: [`Abort`] is a
//! launch's cancel handle, and [`open_interruptible`] an `open` that a
//! cancel knocks out of a blocking call (a FIFO nobody writes) with a
//! signal. Used by the supervisor threads and by the process code that
//! opens the user's files; it knows nothing of jobs.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;

/// The signal that knocks a launch thread out of a blocking syscall. Its
/// default action is to ignore it and nothing else in the daemon uses it;
/// the handler does nothing and is installed without `SA_RESTART`, so the
/// syscall returns `EINTR`.
const INTERRUPT: Signal = Signal::SIGURG;

/// A handle on one launch: cancel it, and see whether it has settled.
#[derive(Clone, Default)]
pub struct Abort(Arc<AbortInner>);

#[derive(Default)]
struct AbortInner {
    cancelled: AtomicBool,
    settled: AtomicBool,
    /// The kernel thread id of the thread now in an interruptible call.
    blocked: Mutex<Option<i32>>,
}

impl Abort {
    pub fn new() -> Abort {
        Abort::default()
    }

    /// Give up on the launch: a blocked call is interrupted, and what the
    /// launch starts after this is killed.
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        self.interrupt();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// The launch has started its processes or failed: nothing left to interrupt.
    pub fn is_settled(&self) -> bool {
        self.0.settled.load(Ordering::SeqCst)
    }

    pub(super) fn settle(&self) {
        self.0.settled.store(true, Ordering::SeqCst);
    }

    /// Signal the thread blocked in [`Abort::interruptible`], if any.
    /// N.B. a signal that lands just before the thread enters the syscall is
    /// lost, so a canceller repeats this until the launch has settled.
    pub fn interrupt(&self) {
        let blocked = self.0.blocked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tid) = *blocked {
            // SAFETY: tgkill to a thread of this process; the thread cannot
            // exit (and its id be reused) while it is registered, because it
            // must take this lock to unregister.
            unsafe {
                nix::libc::syscall(
                    nix::libc::SYS_tgkill,
                    nix::libc::getpid(),
                    tid,
                    INTERRUPT as i32,
                );
            }
        }
    }

    /// Run a blocking call that a cancel may interrupt. `EINTR` is retried
    /// unless the launch was cancelled, which fails with `Interrupted`.
    /// `op` itself must not retry `EINTR` (std's `File::open` does).
    pub fn interruptible<T>(&self, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        install_interrupt_handler();
        loop {
            {
                let mut blocked = self.0.blocked.lock().unwrap_or_else(|p| p.into_inner());
                if self.is_cancelled() {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "the job was cancelled while it was starting",
                    ));
                }
                *blocked = Some(nix::unistd::gettid().as_raw());
            }
            let r = op();
            *self.0.blocked.lock().unwrap_or_else(|p| p.into_inner()) = None;
            match r {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

extern "C" fn on_interrupt(_: nix::libc::c_int) {}

fn install_interrupt_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
        let action = SigAction::new(
            SigHandler::Handler(on_interrupt),
            SaFlags::empty(),
            SigSet::empty(),
        );
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        if let Err(e) = unsafe { sigaction(INTERRUPT, &action) } {
            tracing::warn!(error = %e, "cannot install the launch interrupt handler");
        }
    });
}

/// Open `path` with `flags` (and mode 0666 less the umask when creating),
/// interruptibly: unlike std's open, `EINTR` reaches [`Abort`].
pub fn open_interruptible(path: &Path, flags: OFlag, abort: &Abort) -> io::Result<File> {
    abort.interruptible(|| {
        let fd = nix::fcntl::open(
            path,
            flags | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )
        .map_err(io::Error::from)?;
        // SAFETY: `open` just returned this descriptor, owned by nobody else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_interrupts_an_open_blocked_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let abort = Abort::new();
        let opener = {
            let (abort, fifo) = (abort.clone(), fifo.clone());
            std::thread::spawn(move || open_interruptible(&fifo, OFlag::O_RDONLY, &abort))
        };
        // Nobody writes the FIFO: the open blocks until the cancel, which
        // is repeated until it lands (as the agent repeats it).
        while abort.0.blocked.lock().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!opener.is_finished());
        abort.cancel();
        while !opener.is_finished() {
            abort.interrupt();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let err = opener.join().unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted);
        // An open that is not cancelled is not disturbed by the handler.
        let f = open_interruptible(
            &dir.path().join("plain"),
            OFlag::O_WRONLY | OFlag::O_CREAT,
            &Abort::new(),
        );
        assert!(f.is_ok());
    }
}
