//! Starting and signalling a batch script as a real process.
//!
//! Each job gets its own session (`setsid`), so the whole process group —
//! the script and anything it started in the background — can be signalled
//! and killed together. When the daemon runs as root the script runs as the
//! submitting user, and every file the user named is opened as that user
//! (see [`super::identity`]); otherwise it all runs as the daemon's user (a
//! personal test cluster).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::OFlag;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{Gid, Pid, Uid};
use thiserror::Error;

use super::abort::{open_interruptible, Abort};
use super::env::batch_env;
use super::identity::{JobUser, WorkDir};
use super::pattern::{expand, resolve, PatternContext};
use crate::wire::messages::{ExitStatus, JobLaunch, Usage};

#[derive(Debug, Error)]
pub enum ExecError {
    #[error("cannot prepare spool directory {path}: {source}")]
    Spool {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open {what} file {path}: {source}")]
    Output {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot act as uid {uid} for job {job_id}: {source}")]
    Identity {
        job_id: u32,
        uid: u32,
        source: std::io::Error,
    },
    #[error("cannot start batch script for job {job_id}: {source}")]
    Spawn { job_id: u32, source: std::io::Error },
}

/// A started batch script. Reap it with [`wait_with_usage`], not through
/// `std::process::Child` (whose wait would not report resource usage).
pub struct BatchProcess {
    pub pid: i32,
    /// The script's stderr, as opened for the user: the node's own notes
    /// (a cancel's `*** JOB ... ***` line) go here, never through the path
    /// again, which the user may have swapped for a link meanwhile.
    pub stderr: fs::File,
    /// The job's spool directory, to remove once the job is gone.
    pub spool_dir: PathBuf,
}

/// The batch script's standard streams, opened as the job's user.
struct BatchFiles {
    stdout: fs::File,
    stderr: fs::File,
    stdin: Option<fs::File>,
}

/// Write the script under `spool` and start it with the job's environment.
/// If it cannot start, its spool directory is removed again.
pub fn spawn_batch(
    launch: &JobLaunch,
    node: &str,
    node_index: u32,
    conf_path: &str,
    spool: &Path,
    abort: &Abort,
    confine: Confinement,
) -> Result<BatchProcess, ExecError> {
    let dir = spool.join(format!("job{:05}", launch.job_id));
    let started = start_batch(
        launch,
        node,
        node_index,
        conf_path,
        dir.clone(),
        abort,
        confine,
    );
    if started.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    started
}

/// How a batch script is confined: the cgroup it joins before it runs, and
/// whether its GPUs are fenced (and so renumbered from 0).
#[derive(Default)]
pub struct Confinement {
    pub attach: Option<super::contain::Attach>,
    pub renumber_gpus: bool,
}

fn start_batch(
    launch: &JobLaunch,
    node: &str,
    node_index: u32,
    conf_path: &str,
    dir: PathBuf,
    abort: &Abort,
    confine: Confinement,
) -> Result<BatchProcess, ExecError> {
    let Confinement {
        attach,
        renumber_gpus,
    } = confine;
    let spool_err = |source| ExecError::Spool {
        path: dir.clone(),
        source,
    };
    fs::create_dir_all(&dir).map_err(spool_err)?;
    let script = dir.join("slurm_script");
    fs::write(&script, &launch.script).map_err(spool_err)?;
    // The user runs the script, and only they may read it (it may hold secrets).
    fs::set_permissions(&script, fs::Permissions::from_mode(0o700)).map_err(spool_err)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(spool_err)?;
    if Uid::effective().is_root() {
        let owner = (
            Some(Uid::from_raw(launch.uid)),
            Some(Gid::from_raw(launch.gid)),
        );
        for p in [&dir, &script] {
            nix::unistd::chown(p, owner.0, owner.1)
                .map_err(|e| spool_err(std::io::Error::from(e)))?;
        }
    }

    let ctx = PatternContext {
        job_id: launch.job_id,
        array_job_id: launch.array.map(|a| a.array_job_id),
        array_task_id: launch.array.map(|a| a.task_id),
        job_name: launch.name.clone(),
        user: launch.user.clone(),
        first_node: node.to_string(),
        node_index,
        step_id: None,
        task_id: None,
        restart: launch.restarts,
    };
    let workdir = Path::new(&launch.workdir);
    let out_path = resolve(&expand(&launch.stdout, &ctx), workdir);
    let err_path = launch
        .stderr
        .as_ref()
        .map(|p| resolve(&expand(p, &ctx), workdir));
    let in_path = launch
        .stdin
        .as_ref()
        .map(|p| resolve(&expand(p, &ctx), workdir));

    let user = JobUser::new(&launch.user, launch.uid, launch.gid);
    let files = user
        .run(|| {
            open_batch_files(
                &out_path,
                err_path.as_deref(),
                in_path.as_deref(),
                launch.open_append,
                abort,
            )
        })
        .map_err(|source| ExecError::Identity {
            job_id: launch.job_id,
            uid: launch.uid,
            source,
        })??;
    let stderr_path = err_path.unwrap_or(out_path);
    let note_handle = files
        .stderr
        .try_clone()
        .map_err(|source| ExecError::Output {
            what: "stderr",
            path: stderr_path,
            source,
        })?;
    let cwd = WorkDir::new(workdir, node).map_err(|source| ExecError::Spawn {
        job_id: launch.job_id,
        source,
    })?;

    let mut env = batch_env(launch, node, conf_path);
    if renumber_gpus {
        // Devices are fenced: the script sees its GPUs as 0..n.
        let gpus = launch
            .held
            .get(node_index as usize)
            .map(|h| h.gpus())
            .unwrap_or_default();
        for (k, v) in super::env::gpu_vars(&gpus, "SLURM_JOB_GPUS", true) {
            env.retain(|(key, _)| *key != k);
            env.push((k, v));
        }
    }
    let mut cmd = std::process::Command::new(&script);
    cmd.args(&launch.script_args)
        .env_clear()
        .envs(env)
        .stdin(files.stdin.map(Stdio::from).unwrap_or_else(Stdio::null))
        .stdout(files.stdout)
        .stderr(files.stderr);
    // SAFETY: setsid, setgroups/setgid/setuid, chdir and the cgroup
    // attach's write to descriptors opened before the fork are
    // async-signal-safe and use only memory prepared before the fork. The
    // script joins its cgroup first, so everything it starts is tracked;
    // the directory is entered after root is given up, so the user's own
    // rights decide.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(a) = &attach {
                a.apply()?;
            }
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            user.become_in_child()?;
            cwd.enter_in_child()
        });
    }
    let child = cmd.spawn().map_err(|source| ExecError::Spawn {
        job_id: launch.job_id,
        source,
    })?;
    // Dropping a std Child neither kills nor reaps it; `wait_with_usage` reaps.
    Ok(BatchProcess {
        pid: child.id() as i32,
        stderr: note_handle,
        spool_dir: dir,
    })
}

/// Open the script's streams. Runs as the job's user: a path they may not
/// write is refused to them, as it should be.
fn open_batch_files(
    out: &Path,
    err: Option<&Path>,
    input: Option<&Path>,
    append: bool,
    abort: &Abort,
) -> Result<BatchFiles, ExecError> {
    let stdout = open_output(out, "stdout", append, abort)?;
    let stderr = match err {
        Some(p) => open_output(p, "stderr", append, abort)?,
        None => stdout.try_clone().map_err(|source| ExecError::Output {
            what: "stderr",
            path: out.to_path_buf(),
            source,
        })?,
    };
    let stdin = input
        .map(|p| {
            open_interruptible(p, OFlag::O_RDONLY, abort).map_err(|source| ExecError::Output {
                what: "stdin",
                path: p.to_path_buf(),
                source,
            })
        })
        .transpose()?;
    Ok(BatchFiles {
        stdout,
        stderr,
        stdin,
    })
}

/// Block until `pid` exits; its exit status and resource usage (Slurm's
/// MaxRSS, UserCPU, SystemCPU for the step). Run on a blocking thread.
pub fn wait_with_usage(pid: i32) -> (ExitStatus, Usage) {
    use nix::libc;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: plain syscall on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return (ExitStatus { code: 1, signal: 0 }, Usage::default());
    }
    let exit = if libc::WIFEXITED(status) {
        ExitStatus {
            code: libc::WEXITSTATUS(status),
            signal: 0,
        }
    } else if libc::WIFSIGNALED(status) {
        ExitStatus {
            code: 0,
            signal: libc::WTERMSIG(status),
        }
    } else {
        ExitStatus { code: 1, signal: 0 }
    };
    let ms = |t: libc::timeval| (t.tv_sec as u64) * 1000 + (t.tv_usec as u64) / 1000;
    let usage = Usage {
        // ru_maxrss is in KiB on Linux.
        max_rss_kb: ru.ru_maxrss.max(0) as u64,
        user_cpu_ms: ms(ru.ru_utime),
        system_cpu_ms: ms(ru.ru_stime),
        oom_kills: 0,
    };
    (exit, usage)
}

fn open_output(
    path: &Path,
    what: &'static str,
    append: bool,
    abort: &Abort,
) -> Result<fs::File, ExecError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|source| ExecError::Output {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    }
    let err = |source| ExecError::Output {
        what,
        path: path.to_path_buf(),
        source,
    };
    // Always O_APPEND (truncated first unless --open-mode=append): the node
    // appends its own notes (a cancel's `*** JOB ... ***` line) to the same
    // file, and the script's writes must land after them, not over them.
    // Interruptible: a FIFO nobody reads blocks this open until a cancel.
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_APPEND;
    let file = open_interruptible(path, flags, abort).map_err(err)?;
    // Only a regular file can be truncated: `-o /dev/null` (or a FIFO) is
    // used as it is.
    if !append && file.metadata().map_err(err)?.is_file() {
        file.set_len(0).map_err(err)?;
    }
    Ok(file)
}

/// Signal a job's whole process group. Returns false if it no longer exists.
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
    pgid > 0 && killpg(Pid::from_raw(pgid), sig).is_ok()
}

/// Whether any of `groups` still has a running (or stopped) process.
///
/// SIGCONT is the first probe (harmless, and it wakes a suspended job so its
/// SIGTERM can act); it fails once a group is empty. But it succeeds on a
/// group left with only zombies, dead tasks whose new parent (init, or a
/// container's first process) has not reaped them yet, which would keep the
/// job COMPLETING for as long as that takes. So groups that answer are
/// checked once more in /proc, by the state and process group fields of
/// each process's `stat`: two fields, read here rather than through a
/// crate.
pub fn any_group_alive(groups: &[i32]) -> bool {
    let answering: Vec<i32> = groups
        .iter()
        .copied()
        .filter(|&g| signal_group(g, Signal::SIGCONT))
        .collect();
    if answering.is_empty() {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        if !pgrp.is_some_and(|p| answering.contains(&p)) {
            return false;
        }
        // A main thread that called pthread_exit shows Z while its other
        // threads run on: such a process is alive.
        state != Some("Z") || live_threads(pid)
    })
}

/// Whether process `pid` has a thread that is not a zombie.
fn live_threads(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| !r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    })
}

/// [`any_group_alive`] off the async thread: the `/proc` scan is blocking
/// file I/O, and a node with thousands of processes must not stall its
/// event loop (and heartbeats) while jobs end.
async fn any_group_alive_blocking(groups: &[i32]) -> bool {
    let groups = groups.to_vec();
    tokio::task::spawn_blocking(move || any_group_alive(&groups))
        .await
        .unwrap_or(true)
}

/// End process groups as slurmstepd does: SIGCONT and SIGTERM, then SIGKILL
/// to whatever is left after `wait`. Returns as soon as every group is
/// gone, or once the SIGKILL has had a moment to land.
pub async fn term_then_kill(groups: &[i32], wait: std::time::Duration) {
    for &g in groups {
        signal_group(g, Signal::SIGCONT);
        signal_group(g, Signal::SIGTERM);
    }
    let step = std::time::Duration::from_millis(50);
    let mut waited = std::time::Duration::ZERO;
    while any_group_alive_blocking(groups).await && waited < wait {
        tokio::time::sleep(step).await;
        waited += step;
    }
    // Whatever still answers gets SIGKILL, whether the probe thought it
    // alive or not: a kill too many costs nothing.
    let mut killed = false;
    for &g in groups {
        killed |= signal_group(g, Signal::SIGKILL);
    }
    if killed && any_group_alive_blocking(groups).await {
        tokio::time::sleep(step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A process in a group of its own.
    fn leader(script: &str) -> std::process::Child {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script]);
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
        cmd.spawn().unwrap()
    }

    #[test]
    fn a_group_of_zombies_is_not_alive() {
        let mut running = leader("exec sleep 30");
        let mut dead = leader("exit 0");
        let (r, d) = (running.id() as i32, dead.id() as i32);
        // Not reaped yet: a zombie, which killpg still reaches.
        let t = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{d}/stat")).is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(t.elapsed().as_secs() < 10, "the child never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(signal_group(d, Signal::SIGCONT));
        assert!(!any_group_alive(&[d]));
        assert!(any_group_alive(&[d, r]));
        signal_group(r, Signal::SIGKILL);
        running.wait().unwrap();
        dead.wait().unwrap();
        assert!(!any_group_alive(&[d, r]));
    }
}
