//! Per-job supervisors: the blocking part of starting a job or a step, off
//! the node daemon's event loop.
//!
//! Starting a job blocks in ways a user (or a slow LDAP/NFS server) controls:
//! the group database lookup, spool writes and `chown`, opening the files a
//! user named (a FIFO nobody writes blocks `open` for ever), the thread that
//! takes the user's identity, the fork and exec. The node agent shares its
//! thread with the relay and every link, so none of that may run there.
//!
//! Each launch gets a dedicated OS thread, named after the job, rather than a
//! slot in tokio's blocking pool: a launch may block for ever, and a pool is
//! both bounded (enough blocked jobs would starve every other launch) and
//! waited for when the runtime shuts down (a stuck open would hold the
//! daemon's exit). The number of such threads is bounded by the jobs a node
//! holds. A batch job's thread then stays on as its supervisor, as
//! slurmstepd does: it reaps the script and reports its status. A separate
//! process per job would also survive the daemon, but needs a re-exec'd
//! helper and a protocol to it; a restarted daemon re-adopts the processes
//! from its spool records instead (see [`super::record`]).
//!
//! A cancel must reach a launch that is stuck in the kernel: [`Abort`]
//! interrupts the blocked thread with a signal (an `open` on a FIFO then
//! fails with `EINTR`, and the launch gives up), and a launch that finishes
//! after its job was cancelled kills what it started at once.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;
use tokio::sync::oneshot;

use super::process::{signal_group, spawn_batch, wait_with_usage};
use super::record::{start_ticks, Proc};
use crate::wire::messages::{ExitStatus, JobLaunch, StepLaunch, Usage};

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

    fn settle(&self) {
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

/// A batch script that has started.
pub struct BatchStarted {
    pub pid: i32,
    /// The script's start time, to tell it from a later process with its pid.
    pub proc: Proc,
    /// The script's stderr as opened for the user (for the node's notes).
    pub stderr: File,
    pub spool_dir: PathBuf,
}

/// The two things a batch supervisor reports.
pub struct BatchSupervisor {
    /// The script started, or could not.
    pub started: oneshot::Receiver<Result<BatchStarted, String>>,
    /// The script's exit status and usage, once reaped.
    pub exited: oneshot::Receiver<(ExitStatus, Usage)>,
}

/// What a batch launch needs, owned (it moves to the supervisor thread).
pub struct BatchRequest {
    pub launch: JobLaunch,
    pub node: String,
    pub node_index: u32,
    pub conf_path: String,
    pub spool: PathBuf,
}

/// Start `req`'s batch script on a thread of its own, which then reaps it.
pub fn supervise_batch(req: BatchRequest, abort: Abort) -> io::Result<BatchSupervisor> {
    let (started_tx, started) = oneshot::channel();
    let (exited_tx, exited) = oneshot::channel();
    let job_id = req.launch.job_id;
    std::thread::Builder::new()
        .name(format!("job{job_id}-stepd"))
        .spawn(move || {
            let r = spawn_batch(
                &req.launch,
                &req.node,
                req.node_index,
                &req.conf_path,
                &req.spool,
                &abort,
            );
            abort.settle();
            let p = match r {
                Ok(p) => p,
                Err(e) => {
                    let _ = started_tx.send(Err(e.to_string()));
                    return;
                }
            };
            if abort.is_cancelled() {
                // Cancelled while it started: nothing of it may stay.
                tracing::info!(
                    job_id,
                    pid = p.pid,
                    "batch script started after its cancel; killed"
                );
                signal_group(p.pid, Signal::SIGKILL);
                wait_with_usage(p.pid);
                let _ = std::fs::remove_dir_all(&p.spool_dir);
                let _ = started_tx.send(Err("the job was cancelled while it was starting".into()));
                return;
            }
            let pid = p.pid;
            let started = BatchStarted {
                pid,
                proc: Proc {
                    pid,
                    start_ticks: start_ticks(pid).unwrap_or(0),
                },
                stderr: p.stderr,
                spool_dir: p.spool_dir,
            };
            // If the agent is gone (the daemon is stopping) the script runs on.
            let _ = started_tx.send(Ok(started));
            let _ = exited_tx.send(wait_with_usage(pid));
        })?;
    Ok(BatchSupervisor { started, exited })
}

/// Start a step's tasks on this node on a thread of its own: the user's
/// files are opened and the tasks forked there. The children are
/// registered with the daemon's runtime (`runtime`), whose event loop then
/// streams their output.
pub fn supervise_step(
    launch: StepLaunch,
    node: String,
    node_index: usize,
    runtime: tokio::runtime::Handle,
    abort: Abort,
) -> io::Result<oneshot::Receiver<Result<super::tasks::ForkedStep, String>>> {
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(format!("step{}.{}", launch.job_id, launch.step_id))
        .spawn(move || {
            let _entered = runtime.enter();
            let r = super::tasks::fork_tasks(&launch, &node, node_index, &abort);
            abort.settle();
            let r = match r {
                Ok(forked) if abort.is_cancelled() => {
                    forked.kill();
                    Err("the step was cancelled while it was starting".into())
                }
                r => r,
            };
            if let Err(Ok(forked)) = tx.send(r) {
                // Nobody waits for these tasks any more: they must not run.
                forked.kill();
            }
        })?;
    Ok(rx)
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
