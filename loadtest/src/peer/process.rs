//! Running and watching processes and files for the peer scenario: commands with a time
//! limit and their failures described, log tails, directories and files, the canopy
//! binaries, the host name, the open-file limit, and finding, probing and waiting for
//! processes through /proc.
//!
//! Does not: know which cluster a process belongs to; `slurm` and `canopy` decide that.

use super::*;

/// Run `cmd` to completion with its output captured, killing it at `limit`.
pub(super) fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, PeerError> {
    let what = describe(cmd);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PeerError::Spawn {
            command: what.clone(),
            source,
        })?;
    let pid = Pid::from_raw(child.id() as i32);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let timed_out = AtomicBool::new(false);
    let flag = &timed_out;
    let output = thread::scope(|s| {
        s.spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = done_rx.recv_timeout(limit) {
                flag.store(true, Ordering::SeqCst);
                // The child is only reaped inside wait_with_output, just before the
                // watchdog hears back; a kill landing in that window would need the
                // pid to be reused within microseconds.
                let _ = kill(pid, Signal::SIGKILL);
            }
        });
        let out = child.wait_with_output();
        let _ = done_tx.send(());
        out
    })
    .map_err(|source| PeerError::Spawn {
        command: what.clone(),
        source,
    })?;
    if timed_out.load(Ordering::SeqCst) {
        return Err(PeerError::Timeout {
            what: format!("`{what}`"),
            limit_s: limit.as_secs(),
            last: tail_text(&String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(output)
}

/// run_bounded, and a non-zero exit is an error.
pub(super) fn run_ok(cmd: &mut Command, limit: Duration) -> Result<Output, PeerError> {
    let out = run_bounded(cmd, limit)?;
    if !out.status.success() {
        return Err(PeerError::Command {
            command: describe(cmd),
            status: out.status.to_string(),
            stderr: tail_text(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(out)
}

/// Wall time of one successful run, in ms.
pub(super) fn timed_ok(cmd: &mut Command, limit: Duration) -> Result<f64, PeerError> {
    let started = Instant::now();
    run_ok(cmd, limit)?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

pub(super) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The last few lines of some output, on one line, for error messages.
pub(super) fn tail_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines.get(from..).unwrap_or_default().join(" | ")
}

pub(super) fn log_tail(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(text) => format!("{}: {}", path.display(), tail_text(&text)),
        Err(e) => format!("{}: unreadable ({e})", path.display()),
    }
}

pub(super) fn create_dir(path: &Path) -> Result<(), PeerError> {
    fs::create_dir_all(path).map_err(|source| PeerError::Io {
        action: "create directory",
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn write_file(path: &Path, text: &str) -> Result<(), PeerError> {
    fs::write(path, text).map_err(|source| PeerError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn canopy_binaries(dir: &Path) -> Result<PathBuf, PeerError> {
    for name in ["canopy", "canopy-ctld", "canopy-noded"] {
        let path = dir.join(name);
        if !path.is_file() {
            return Err(PeerError::MissingBinary { path });
        }
    }
    Ok(dir.join("canopy"))
}

pub(super) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Hundreds of daemons and their connections need more descriptors than a login
/// shell's soft limit; children inherit the raised limit.
pub(super) fn raise_fd_limit(progress: &mut dyn FnMut(&str)) {
    let raised = getrlimit(Resource::RLIMIT_NOFILE)
        .and_then(|(_, hard)| setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map(|()| hard));
    match raised {
        Ok(n) => progress(&format!("open-file limit set to its hard limit, {n}")),
        Err(e) => progress(&format!("open-file limit left as is: {e}")),
    }
}

// ---------------------------------------------------------------- Slurm setup

/// The state letter of a /proc/PID/stat line (the field after the command name,
/// which may itself hold spaces and parentheses).
pub(super) fn proc_state(stat: &str) -> Option<char> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.trim_start().chars().next()
}

/// Whether `pid` is a live (not zombie) process; `needle`, when given, must appear in
/// its command line, so that a reused pid is never mistaken for ours.
pub(super) fn alive(pid: i32, needle: Option<&str>) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    if matches!(proc_state(&stat), Some('Z') | Some('X') | None) {
        return false;
    }
    match needle {
        None => true,
        Some(n) => fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(n))
            .unwrap_or(false),
    }
}

pub(super) fn pids_named(comm: &str) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
                && alive(*pid, None)
        })
        .collect()
}

/// Poll `done` until it holds or `limit` passes; whether it held.
pub(super) fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}
