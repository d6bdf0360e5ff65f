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
//!
//! An ordinary user's command is adopted into one of their jobs here (its
//! `extern` step cgroup, entered before the command execs, as
//! pam_slurm_adopt does for ssh), so the job's CPU, memory and device
//! limits bind it; what it leaves there is killed when the last run
//! adopted into that job ends. A node runs at most [`MAX_RUNS_PER_NODE`]
//! at once, and refuses a run whose interrupt arrived first.

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

use super::contain::{Attach, JobCgroup, JobLimits, StepName};
use super::identity::JobUser;
use super::leaf::Leaf;
use crate::wire::exec::{ExecEnd, ExecOutput, ExecSpec};

/// How long, after killing a command, its output is waited for before
/// answering with what was captured (a process that left the group may
/// still hold the pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// PATH for commands run this way: they get a clean environment, not the
/// daemon's.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs at once on one node: each is a process and two threads of the
/// daemon's, and a user could otherwise start them without end.
pub const MAX_RUNS_PER_NODE: usize = 32;
/// Interrupts remembered for runs not (yet) here: an interrupt may overtake
/// its run on the way down the tree, and must still stop it.
const RECENT_INTERRUPTS: usize = 256;
const RECENT_INTERRUPT_AGE: Duration = Duration::from_secs(60);

/// Why a run was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// That token already runs here (a replayed request).
    Duplicate,
    /// The node's limit of concurrent runs is reached.
    Busy(usize),
    /// Its interrupt came first.
    Interrupted,
    /// What the job's last run left is being killed.
    Cleaning(u32),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Duplicate => f.write_str("this canopy exec already runs here"),
            Refused::Busy(n) => write!(
                f,
                "too many canopy exec commands run on this node (its limit is {n} at once); try again later"
            ),
            Refused::Interrupted => f.write_str("interrupted before it started"),
            Refused::Cleaning(job) => write!(
                f,
                "job {job}'s last canopy exec is still being cleaned up here; try again"
            ),
        }
    }
}

struct Run {
    uid: u32,
    stop: Arc<Notify>,
    /// The job it was adopted into, if any.
    job: Option<u32>,
}

/// The runs in progress on this node, by the client's token.
#[derive(Default)]
pub struct Running {
    runs: HashMap<u64, Run>,
    /// (token, uid, by an operator, when) of interrupts that found no run.
    early: std::collections::VecDeque<(u64, u32, bool, std::time::Instant)>,
    /// Jobs whose extern step is being emptied: a run started there now
    /// would be killed with it.
    cleaning: std::collections::HashSet<u32>,
}

impl Running {
    /// Register run `token` of `uid`, adopted into `job` if given.
    pub fn begin(
        &mut self,
        token: u64,
        uid: u32,
        job: Option<u32>,
    ) -> Result<Arc<Notify>, Refused> {
        if self.runs.contains_key(&token) {
            return Err(Refused::Duplicate);
        }
        self.prune();
        if self
            .early
            .iter()
            .any(|&(t, u, op, _)| t == token && (op || u == uid))
        {
            return Err(Refused::Interrupted);
        }
        if let Some(job) = job.filter(|j| self.cleaning.contains(j)) {
            return Err(Refused::Cleaning(job));
        }
        if self.runs.len() >= MAX_RUNS_PER_NODE {
            return Err(Refused::Busy(MAX_RUNS_PER_NODE));
        }
        let stop = Arc::new(Notify::new());
        self.runs.insert(
            token,
            Run {
                uid,
                stop: stop.clone(),
                job,
            },
        );
        Ok(stop)
    }

    /// Forget run `token`; the job it was adopted into if no other run of
    /// that job is left here: the caller kills what it left there, then
    /// says [`Running::cleaned`].
    pub fn end(&mut self, token: u64) -> Option<u32> {
        let job = self.runs.remove(&token)?.job?;
        let last = !self.runs.values().any(|r| r.job == Some(job));
        if last {
            self.cleaning.insert(job);
        }
        last.then_some(job)
    }

    /// Job `job`'s extern step is empty again: runs may join it.
    pub fn cleaned(&mut self, job: u32) {
        self.cleaning.remove(&job);
    }

    /// Interrupt run `token` if `uid` owns it or an operator asks; whether
    /// one was interrupted. One not here yet is refused when it comes.
    pub fn interrupt(&mut self, token: u64, uid: u32, operator: bool) -> bool {
        match self.runs.get(&token) {
            Some(run) if operator || run.uid == uid => {
                // A stored permit: an interrupt that beats the start still counts.
                run.stop.notify_one();
                true
            }
            Some(_) => false,
            None => {
                self.prune();
                if self.early.len() >= RECENT_INTERRUPTS {
                    self.early.pop_front();
                }
                self.early
                    .push_back((token, uid, operator, std::time::Instant::now()));
                false
            }
        }
    }

    fn prune(&mut self) {
        while self
            .early
            .front()
            .is_some_and(|e| e.3.elapsed() > RECENT_INTERRUPT_AGE)
        {
            self.early.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// The job to adopt a command into: of the caller's running jobs
/// (`wanted`, as the controller knows them), the one with the lowest id
/// that `here` holds on this node (the oldest, so repeated runs land in
/// the same one).
pub fn choose_job<T>(wanted: &[u32], here: impl Fn(u32) -> Option<T>) -> Option<(u32, T)> {
    let mut ids = wanted.to_vec();
    ids.sort_unstable();
    ids.into_iter().find_map(|id| here(id).map(|t| (id, t)))
}

/// The job cgroup a command is adopted into.
#[derive(Clone)]
pub enum Adopt {
    /// The job's cgroup, as its launch made it.
    Held(Arc<JobCgroup>),
    /// Not made here yet (its launch is still under way): reopened, or made
    /// without limits (its launch writes them), off the event loop.
    Track {
        leaf: Arc<Leaf>,
        job_id: u32,
        uid: u32,
    },
}

impl Adopt {
    pub fn job_id(&self) -> u32 {
        match self {
            Adopt::Held(j) => j.job_id(),
            Adopt::Track { job_id, .. } => *job_id,
        }
    }

    /// The job's cgroup; `Ok(None)`: this node does not track jobs by
    /// cgroup. Blocking (writes the cgroup file system).
    pub fn resolve(&self) -> Result<Option<Arc<JobCgroup>>, String> {
        match self {
            Adopt::Held(j) => Ok(Some(j.clone())),
            Adopt::Track { leaf, job_id, uid } => leaf.track_job(*job_id, *uid),
        }
    }

    /// Let go of a handle from [`Adopt::resolve`]. One made here for
    /// tracking must not remove the job's cgroup when dropped (the job's
    /// launch is in charge of it, and may be about to use it).
    pub fn release(&self, job: Arc<JobCgroup>) {
        if let Adopt::Track { .. } = self {
            if let Ok(job) = Arc::try_unwrap(job) {
                job.keep();
            }
        }
    }

    /// Kill what runs in the job's extern step and remove it (the last
    /// run adopted there ended). Blocking.
    pub fn end(&self) {
        let job_id = self.job_id();
        match self.resolve() {
            Ok(Some(job)) => {
                match job.step(StepName::Extern, &JobLimits::default()) {
                    Ok(step) => super::leaf::end_step(step, job_id),
                    Err(e) => {
                        tracing::warn!(job_id, error = %e, "canopy exec: extern step not cleaned")
                    }
                }
                self.release(job);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(job_id, error = %e, "canopy exec: extern step not cleaned"),
        }
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
/// With `job`, the command starts inside that job's `extern` step cgroup
/// (as pam_slurm_adopt places an ssh session), so the job's limits bind it.
pub async fn run(
    spec: ExecSpec,
    node: String,
    stop: Arc<Notify>,
    job: Option<Adopt>,
) -> ExecOutput {
    let capture = Arc::new(Mutex::new(Capture::default()));
    let pgid = Arc::new(AtomicI32::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let timeout = Duration::from_millis(spec.timeout_ms);
    let mut worker = {
        let (capture, pgid, killed) = (capture.clone(), pgid.clone(), killed.clone());
        tokio::task::spawn_blocking(move || {
            run_blocking(&spec, &node, job.as_ref(), &capture, &pgid, &killed)
        })
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
    adopt: Option<&Adopt>,
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
        .unwrap_or_else(|| "/".into());
    // Entered in the child once it is the user: a root-squashed home
    // (NFS, mode 0700) refuses root. Made here, as the child may not allocate.
    let home_c = std::ffi::CString::new(home.as_os_str().as_encoded_bytes())
        .unwrap_or_else(|_| c"/".to_owned());
    // The job's extern step, kept open until the command is inside it
    // (dropping the handle removes an empty cgroup).
    let job = match adopt {
        Some(adopt) => adopt.resolve().map_err(|e| {
            format!(
                "canopy exec: cannot place the command in job {}'s cgroup on {node}: {e}",
                adopt.job_id()
            )
        })?,
        None => None,
    };
    let step = match &job {
        Some(job) => {
            let step = job
                .step(StepName::Extern, &JobLimits::default())
                .map_err(|e| {
                    format!(
                        "canopy exec: cannot place the command in job {}'s cgroup on {node}: {e}",
                        job.job_id()
                    )
                })?;
            let attach = step.attach().map_err(|e| {
                format!(
                    "canopy exec: cannot place the command in job {}'s cgroup on {node}: {e}",
                    job.job_id()
                )
            })?;
            Some((step, attach))
        }
        None => None,
    };
    let attach = match &step {
        Some((_, a)) => a.try_clone().map_err(|e| format!("canopy exec: {e}"))?,
        None => Attach::none(),
    };
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
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    // SAFETY: the cgroup attach (writes on descriptors opened before the
    // fork), setsid, the identity switch and chdir are async-signal-safe
    // and use only memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // Into the job's cgroup while still root, before anything the
            // command could fork escapes it.
            attach.apply()?;
            nix::unistd::setsid()?;
            user.become_in_child()?;
            if nix::unistd::chdir(home_c.as_c_str()).is_err() {
                let _ = nix::unistd::chdir(c"/");
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The command is inside (or never started): the handles may go.
    drop(step);
    if let (Some(adopt), Some(job)) = (adopt, job) {
        adopt.release(job);
    }
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
        let _stop = r.begin(7, 1000, None).expect("fresh token");
        assert_eq!(r.begin(7, 1000, None).err(), Some(Refused::Duplicate));
        assert!(!r.interrupt(7, 1001, false), "another user");
        assert!(r.interrupt(7, 1000, false));
        assert!(r.interrupt(7, 0, true));
        assert_eq!(r.end(7), None);
        assert!(r.is_empty());
    }

    #[test]
    fn an_interrupt_that_comes_first_stops_its_run() {
        let mut r = Running::default();
        assert!(!r.interrupt(8, 1000, false), "nothing to stop yet");
        // Another user's early interrupt does not stop it.
        assert!(!r.interrupt(9, 1001, false));
        assert_eq!(r.begin(8, 1000, None).err(), Some(Refused::Interrupted));
        assert!(r.begin(9, 1000, None).is_ok());
        // An operator's does.
        assert!(!r.interrupt(10, 0, true));
        assert_eq!(r.begin(10, 1000, None).err(), Some(Refused::Interrupted));
        // The memory of early interrupts is bounded.
        for t in 100..100 + RECENT_INTERRUPTS as u64 {
            r.interrupt(t, 1000, false);
        }
        assert!(r.early.len() <= RECENT_INTERRUPTS);
        assert!(r.begin(8, 1000, None).is_ok(), "the oldest was forgotten");
    }

    #[test]
    fn a_node_runs_at_most_its_limit_at_once() {
        let mut r = Running::default();
        for t in 0..MAX_RUNS_PER_NODE as u64 {
            r.begin(t, 1000 + t as u32, None).expect("under the limit");
        }
        let e = r.begin(999, 5, None).unwrap_err();
        assert_eq!(e, Refused::Busy(MAX_RUNS_PER_NODE));
        assert!(e.to_string().contains("its limit is 32"), "{e}");
        r.end(0);
        assert!(r.begin(999, 5, None).is_ok(), "a slot comes back");
    }

    #[test]
    fn the_last_run_in_a_job_says_so_at_its_end() {
        let mut r = Running::default();
        r.begin(1, 1000, Some(5)).unwrap();
        r.begin(2, 1000, Some(5)).unwrap();
        r.begin(3, 1000, None).unwrap();
        assert_eq!(r.end(1), None, "run 2 is still in job 5");
        assert_eq!(r.end(3), None);
        assert_eq!(r.end(2), Some(5));
        assert_eq!(r.end(2), None, "ended twice");
        // Until job 5 is cleaned, nothing joins it (it would be killed).
        assert_eq!(r.begin(4, 1000, Some(5)).err(), Some(Refused::Cleaning(5)));
        assert!(r.begin(5, 1000, Some(6)).is_ok(), "another job");
        r.cleaned(5);
        assert!(r.begin(4, 1000, Some(5)).is_ok());
    }

    #[test]
    fn the_callers_oldest_job_held_here_is_chosen() {
        let here = |id: u32| match id {
            20 => Some("b"),
            30 => Some("c"),
            _ => None,
        };
        assert_eq!(
            choose_job(&[30, 12, 20], here),
            Some((20, "b")),
            "12 is elsewhere"
        );
        assert_eq!(choose_job(&[30], here), Some((30, "c")));
        assert_eq!(choose_job(&[12], here), None, "none of theirs here");
        assert_eq!(choose_job(&[], here), None, "an operator's run");
    }
}
