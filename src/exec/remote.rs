//! `canopy exec` on one node: run a command as the caller, with a time limit
//! and a bound on the output kept, and stop it early when the client is
//! interrupted.
//!
//! The process is started and read on a blocking thread (a fork and pipe
//! reads must not hold up the daemon's event loop, which forwards messages
//! for a whole subtree); the time limit and the interrupt are watched on the
//! event loop, which kills the command's whole process group (it runs in a
//! session of its own, as a job does). What the command wrote before it was
//! killed is still returned. Who may run where was decided by the
//! controller; this module only refuses to run as anyone but the daemon's
//! own user when the daemon cannot switch users.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::Notify;

use super::identity::JobUser;
use crate::wire::exec::{ExecEnd, ExecOutput, ExecSpec};

/// How long, after killing a command, its output is waited for before
/// answering with what was captured (a process that left the group may
/// still hold the pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// PATH for commands run this way: they get a clean environment, not the
/// daemon's.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The runs in progress on this node, by the client's token.
#[derive(Default)]
pub struct Running {
    runs: HashMap<u64, (u32, Arc<Notify>)>,
}

impl Running {
    /// Register run `token` of `uid`; `None` if that token already runs
    /// here (a replayed request must not start a second copy).
    pub fn begin(&mut self, token: u64, uid: u32) -> Option<Arc<Notify>> {
        if self.runs.contains_key(&token) {
            return None;
        }
        let stop = Arc::new(Notify::new());
        self.runs.insert(token, (uid, stop.clone()));
        Some(stop)
    }

    pub fn end(&mut self, token: u64) {
        self.runs.remove(&token);
    }

    /// Interrupt run `token` if `uid` owns it or an operator asks; whether
    /// one was interrupted.
    pub fn interrupt(&mut self, token: u64, uid: u32, operator: bool) -> bool {
        match self.runs.get(&token) {
            Some((owner, stop)) if operator || *owner == uid => {
                // A stored permit: an interrupt that beats the start still counts.
                stop.notify_one();
                true
            }
            _ => false,
        }
    }

    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// Output kept so far: shared so that a command killed while its pipe is
/// still held open can be answered with what it wrote.
#[derive(Default)]
struct Capture {
    buf: Vec<u8>,
    cut: u64,
}

impl Capture {
    fn push(&mut self, data: &[u8], limit: usize) {
        let room = limit.saturating_sub(self.buf.len());
        let keep = room.min(data.len());
        self.buf.extend_from_slice(&data[..keep]);
        self.cut += (data.len() - keep) as u64;
    }
}

/// Run `spec` on `node` as its user; `stop` is notified on an interrupt.
pub async fn run(spec: ExecSpec, node: String, stop: Arc<Notify>) -> ExecOutput {
    let capture = Arc::new(Mutex::new(Capture::default()));
    let pgid = Arc::new(AtomicI32::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let timeout = Duration::from_millis(spec.timeout_ms);
    let mut worker = {
        let (capture, pgid, killed) = (capture.clone(), pgid.clone(), killed.clone());
        tokio::task::spawn_blocking(move || run_blocking(&spec, &node, &capture, &pgid, &killed))
    };
    let ended = tokio::select! {
        r = &mut worker => Some(r),
        _ = tokio::time::sleep(timeout) => None,
        _ = stop.notified() => {
            kill(&pgid, &killed);
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut worker).await;
            return finish(&capture, 128 + Signal::SIGKILL as i32, ExecEnd::Interrupted);
        }
    };
    match ended {
        Some(Ok(Ok((code, end)))) => finish(&capture, code, end),
        Some(Ok(Err(why))) => not_started(why),
        Some(Err(e)) => not_started(format!("canopy exec: the runner failed: {e}")),
        None => {
            kill(&pgid, &killed);
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut worker).await;
            finish(&capture, 128 + Signal::SIGKILL as i32, ExecEnd::TimedOut)
        }
    }
}

fn finish(capture: &Mutex<Capture>, code: i32, end: ExecEnd) -> ExecOutput {
    let (output, cut) = match capture.lock() {
        Ok(mut c) => (std::mem::take(&mut c.buf), c.cut),
        Err(_) => (Vec::new(), 0),
    };
    ExecOutput {
        output,
        code,
        end,
        cut,
    }
}

fn not_started(why: String) -> ExecOutput {
    ExecOutput {
        output: format!("{why}\n").into_bytes(),
        code: 127,
        end: ExecEnd::NotStarted,
        cut: 0,
    }
}

/// Kill the command's process group, or make the runner do it as soon as
/// the command has started.
fn kill(pgid: &AtomicI32, killed: &AtomicBool) {
    killed.store(true, Ordering::SeqCst);
    let g = pgid.load(Ordering::SeqCst);
    if g > 0 {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
}

/// Start, read and reap the command (blocking). `Err`: it never started.
fn run_blocking(
    spec: &ExecSpec,
    node: &str,
    capture: &Arc<Mutex<Capture>>,
    pgid: &AtomicI32,
    killed: &AtomicBool,
) -> Result<(i32, ExecEnd), String> {
    let Some((prog, args)) = spec.argv.split_first() else {
        return Err("canopy exec: no command given".into());
    };
    let root = nix::unistd::Uid::effective().is_root();
    if !root && nix::unistd::Uid::effective().as_raw() != spec.uid {
        // Not root: there is nobody else to become, and running as the
        // daemon's user on someone else's behalf would lend them its rights.
        return Err(format!(
            "canopy exec: the node daemon on {node} does not run as root and cannot run commands as uid {}",
            spec.uid
        ));
    }
    let user = JobUser::new(&spec.user, spec.uid, spec.gid);
    let home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(spec.uid))
        .ok()
        .flatten()
        .map(|u| u.dir)
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| "/".into());
    // Close-on-exec: a process the daemon forks meanwhile (a job's) must
    // not inherit the write end and hold the output open. (nix's pipe2, not
    // std's pipe: std::io::pipe is newer than this crate's MSRV.)
    let (reader, writer) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| format!("canopy exec: pipe: {e}"))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| format!("canopy exec: pipe: {e}"))?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &home)
        .env("USER", &spec.user)
        .env("LOGNAME", &spec.user)
        .env("SLURMD_NODENAME", node)
        .current_dir(&home)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    // SAFETY: setsid and the identity switch are async-signal-safe and use
    // only memory prepared before the fork (`JobUser::become_in_child`).
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            user.become_in_child()
        });
    }
    let spawned = cmd.spawn();
    // The Command holds the pipe's write ends: drop them, or the read
    // below never sees the end of the output.
    drop(cmd);
    let mut child = spawned.map_err(|e| format!("canopy exec: {prog}: {e}"))?;
    pgid.store(child.id() as i32, Ordering::SeqCst);
    if killed.load(Ordering::SeqCst) {
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
    }
    let limit = spec.max_output as usize;
    let mut reader = std::fs::File::from(reader);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let capture2 = capture.clone();
    // Read on a thread of its own, so that the command's end is seen even
    // while something it left in the background still holds the pipe.
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    if let Ok(mut c) = capture2.lock() {
                        c.push(&chunk[..n], limit);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done_tx.send(());
    });
    let status = child
        .wait()
        .map_err(|e| format!("canopy exec: wait: {e}"))?;
    if done_rx.recv_timeout(DRAIN_GRACE).is_err() {
        // The command ended but left processes holding its output: they
        // are stopped with it (the run cleans up after itself).
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        let _ = done_rx.recv_timeout(DRAIN_GRACE);
    }
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => (code, ExecEnd::Exited),
        (None, Some(sig)) => (128 + sig, ExecEnd::Signalled(sig)),
        (None, None) => (1, ExecEnd::Exited),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_the_limit_and_counts_the_rest() {
        let mut c = Capture::default();
        c.push(b"hello ", 8);
        c.push(b"world", 8);
        assert_eq!(c.buf, b"hello wo");
        assert_eq!(c.cut, 3);
        c.push(b"!!", 8);
        assert_eq!(c.cut, 5);
    }

    #[test]
    fn an_interrupt_needs_the_owner_or_an_operator() {
        let mut r = Running::default();
        let _stop = r.begin(7, 1000).expect("fresh token");
        assert!(r.begin(7, 1000).is_none(), "a token runs once");
        assert!(!r.interrupt(7, 1001, false), "another user");
        assert!(!r.interrupt(8, 1000, false), "another run");
        assert!(r.interrupt(7, 1000, false));
        assert!(r.interrupt(7, 0, true));
        r.end(7);
        assert!(r.is_empty());
    }
}
