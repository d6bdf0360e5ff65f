//! Starting and signalling a batch script as a real process.
//!
//! Each job gets its own session (`setsid`), so the whole process group —
//! the script and anything it started in the background — can be signalled
//! and killed together. When the daemon runs as root the script runs as the
//! submitting user; otherwise it runs as the daemon's user (a personal test
//! cluster).

use std::fs::{self, OpenOptions};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{Pid, Uid};
use thiserror::Error;

use super::env::batch_env;
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
    #[error("cannot start batch script for job {job_id}: {source}")]
    Spawn { job_id: u32, source: std::io::Error },
}

/// A started batch script. Reap it with [`wait_with_usage`], not through
/// `std::process::Child` (whose wait would not report resource usage).
pub struct BatchProcess {
    pub pid: i32,
    /// The file the script's stderr goes to.
    pub stderr: PathBuf,
}

/// Write the script under `spool` and start it with the job's environment.
pub fn spawn_batch(
    launch: &JobLaunch,
    node: &str,
    node_index: u32,
    conf_path: &str,
    spool: &Path,
) -> Result<BatchProcess, ExecError> {
    let dir = spool.join(format!("job{:05}", launch.job_id));
    let spool_err = |source| ExecError::Spool {
        path: dir.clone(),
        source,
    };
    fs::create_dir_all(&dir).map_err(spool_err)?;
    let script = dir.join("slurm_script");
    fs::write(&script, &launch.script).map_err(spool_err)?;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o700)).map_err(spool_err)?;

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
    let stdout = open_output(&out_path, "stdout", launch.open_append)?;
    let err_path = match &launch.stderr {
        Some(p) => resolve(&expand(p, &ctx), workdir),
        None => out_path.clone(),
    };
    let stderr = match &launch.stderr {
        Some(_) => open_output(&err_path, "stderr", launch.open_append)?,
        None => stdout.try_clone().map_err(|source| ExecError::Output {
            what: "stderr",
            path: out_path.clone(),
            source,
        })?,
    };
    let stdin = match &launch.stdin {
        Some(p) => {
            let path = resolve(&expand(p, &ctx), workdir);
            Stdio::from(fs::File::open(&path).map_err(|source| ExecError::Output {
                what: "stdin",
                path,
                source,
            })?)
        }
        None => Stdio::null(),
    };

    let mut cmd = std::process::Command::new(&script);
    cmd.args(&launch.script_args)
        .env_clear()
        .envs(batch_env(launch, node, conf_path))
        .current_dir(workdir)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    if Uid::effective().is_root() {
        cmd.uid(launch.uid).gid(launch.gid);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| ExecError::Spawn {
        job_id: launch.job_id,
        source,
    })?;
    // Dropping a std Child neither kills nor reaps it; `wait_with_usage` reaps.
    Ok(BatchProcess {
        pid: child.id() as i32,
        stderr: err_path,
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
    };
    (exit, usage)
}

fn open_output(path: &Path, what: &'static str, append: bool) -> Result<fs::File, ExecError> {
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
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    if !append {
        file.set_len(0).map_err(err)?;
    }
    Ok(file)
}

/// Signal a job's whole process group. Returns false if it no longer exists.
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
    pgid > 0 && killpg(Pid::from_raw(pgid), sig).is_ok()
}
