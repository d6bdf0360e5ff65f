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
use std::path::PathBuf;

use nix::sys::signal::Signal;
use tokio::sync::oneshot;

use super::process::{signal_group, spawn_batch, wait_with_usage};
use super::record::{start_ticks, Proc};
use crate::wire::messages::{ExitStatus, JobLaunch, StepLaunch, Usage};

pub use super::abort::{open_interruptible, Abort};

/// A batch script that has started.
pub struct BatchStarted {
    pub pid: i32,
    /// The script's start time, to tell it from a later process with its pid.
    pub proc: Proc,
    /// The script's stderr as opened for the user (for the node's notes).
    pub stderr: File,
    pub spool_dir: PathBuf,
    /// The job's cgroup on this node, when the node tracks by cgroup.
    pub cgroup: Option<std::sync::Arc<super::contain::JobCgroup>>,
    /// The batch step's cgroup while the script runs, for `sstat`; the
    /// supervisor takes it back (leaving `None`) to tear it down.
    pub batch_step: Option<super::leaf::SharedStep>,
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
    /// How the node tracks, confines and binds (`None`: plain processes).
    pub leaf: Option<std::sync::Arc<super::leaf::Leaf>>,
}

/// Start `req`'s batch script on a thread of its own, which then reaps it.
pub fn supervise_batch(req: BatchRequest, abort: Abort) -> io::Result<BatchSupervisor> {
    let (started_tx, started) = oneshot::channel();
    let (exited_tx, exited) = oneshot::channel();
    let job_id = req.launch.job_id;
    std::thread::Builder::new()
        .name(format!("job{job_id}-stepd"))
        .spawn(move || {
            // The job's cgroup and its batch step, before the script: what
            // it starts is tracked from its first instruction.
            let share = req.launch.held.get(req.node_index as usize);
            let (cgroup, step, attach) = match &req.leaf {
                Some(leaf) => match leaf.job(job_id, req.launch.uid, share) {
                    Ok(Some(job)) => match super::leaf::batch_step(&job) {
                        Ok((step, attach)) => (Some(job), Some(step), Some(attach)),
                        Err(e) => {
                            abort.settle();
                            let _ = started_tx.send(Err(e));
                            return;
                        }
                    },
                    Ok(None) => (None, None, None),
                    Err(e) => {
                        abort.settle();
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                },
                None => (None, None, None),
            };
            let renumber = req.leaf.as_ref().is_some_and(|l| l.renumbers(share));
            let r = spawn_batch(
                &req.launch,
                &req.node,
                req.node_index,
                &req.conf_path,
                &req.spool,
                &abort,
                super::process::Confinement {
                    attach,
                    renumber_gpus: renumber,
                },
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
                if let Some(step) = step {
                    super::leaf::end_step(step, job_id);
                }
                let _ = std::fs::remove_dir_all(&p.spool_dir);
                let _ = started_tx.send(Err("the job was cancelled while it was starting".into()));
                return;
            }
            let pid = p.pid;
            let note = p.stderr.try_clone().ok();
            let step = step.map(|s| std::sync::Arc::new(std::sync::Mutex::new(Some(s))));
            let started = BatchStarted {
                pid,
                proc: Proc {
                    pid,
                    start_ticks: start_ticks(pid).unwrap_or(0),
                },
                stderr: p.stderr,
                spool_dir: p.spool_dir,
                cgroup,
                batch_step: step.clone(),
            };
            // If the agent is gone (the daemon is stopping) the script runs on.
            let _ = started_tx.send(Ok(started));
            let (status, mut usage) = wait_with_usage(pid);
            let step = step.and_then(|s| s.lock().unwrap_or_else(|e| e.into_inner()).take());
            if let Some(step) = step {
                // The cgroup counts every process of the step, not only
                // those the script waited for; and it alone knows OOM kills.
                let u = step.usage();
                usage.oom_kills = step.oom_kills();
                if let (n @ 1.., Some(mut f)) = (usage.oom_kills, note) {
                    use std::io::Write;
                    // slurmstepd's words, in the job's stderr.
                    let _ = writeln!(
                        f,
                        "slurmstepd: error: Detected {n} oom_kill event{} in StepId={job_id}.batch. \
                         Some of the step tasks have been OOM Killed.",
                        if n == 1 { "" } else { "s" }
                    );
                }
                if let Some(b) = u.max_rss_bytes {
                    usage.max_rss_kb = usage.max_rss_kb.max(b / 1024);
                }
                if let (Some(user), Some(sys)) = (u.user_cpu_us, u.system_cpu_us) {
                    usage.user_cpu_ms = usage.user_cpu_ms.max(user / 1000);
                    usage.system_cpu_ms = usage.system_cpu_ms.max(sys / 1000);
                }
                let _ = exited_tx.send((status, usage));
                // What the script left behind (an srun still printing its
                // steps' notes, a daemon that double-forked away) ends with
                // the job, when the node empties the job's cgroup; here the
                // step's cgroup only goes if it is empty already.
                if let Err(e) = step.remove() {
                    tracing::debug!(job_id, error = %e, "batch step cgroup left to the job's end");
                }
                return;
            }
            let _ = exited_tx.send((status, usage));
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
    leaf: Option<std::sync::Arc<super::leaf::Leaf>>,
    job_cgroup: Option<std::sync::Arc<super::contain::JobCgroup>>,
) -> io::Result<oneshot::Receiver<Result<super::tasks::ForkedStep, String>>> {
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(format!("step{}.{}", launch.job_id, launch.step_id))
        .spawn(move || {
            let _entered = runtime.enter();
            let r = super::tasks::fork_tasks(
                &launch,
                &node,
                node_index,
                &abort,
                leaf.as_deref(),
                job_cgroup,
            );
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
