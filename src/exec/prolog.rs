//! Running a Prolog or Epilog (node side) and a PrologSlurmctld or
//! EpilogSlurmctld (controller side): the scripts a `Prolog=` or `Epilog=`
//! value names (a path or a glob, as slurmd's `glob(3)`; the controller's
//! are a single path), one after another (in reverse glob order, as slurmd
//! runs them), as the
//! daemon's own user (root, or SlurmdUser / SlurmUser), with Slurm's
//! environment and nothing else, each bounded by `PrologEpilogTimeout`.
//!
//! Everything here blocks (the fork, the wait), so [`spawn`] runs a run on
//! a thread of its own and hands the outcome back through a channel: no
//! daemon's event loop ever waits for a script an administrator (or a hung
//! file server) controls. What to do with an outcome (drain, requeue) is
//! the caller's business, not this module's.
//!
//! As in Slurm, scripts get no search path and their output goes nowhere
//! (Slurm keeps it only for its log line); stdin, stdout and stderr are
//! `/dev/null`, so a chatty script can never block on a full pipe. Each
//! script is its own process group, which gets Slurm's SIGTERM and, 10 ms
//! later, SIGKILL at the timeout, and also once the script has exited: what
//! it left running in the background does not outlive it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use thiserror::Error;
use tokio::sync::oneshot;

use super::process::signal_group;
use crate::config::PrologConf;
use crate::wire::messages::{ExitStatus, NodeScriptConf, ScriptJob};

/// How often a running script is checked for its end.
const POLL: Duration = Duration::from_millis(20);

/// Held while a script runs with `PrologFlags=Serial`: a node daemon runs
/// its prologs and epilogs one at a time then.
static SERIAL: Mutex<()> = Mutex::new(());

/// Which script runs: Slurm's `SLURM_SCRIPT_CONTEXT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    PrologSlurmd,
    EpilogSlurmd,
    PrologSlurmctld,
    EpilogSlurmctld,
}

impl Context {
    /// The value of `SLURM_SCRIPT_CONTEXT`.
    pub fn name(self) -> &'static str {
        match self {
            Context::PrologSlurmd => "prolog_slurmd",
            Context::EpilogSlurmd => "epilog_slurmd",
            Context::PrologSlurmctld => "prolog_slurmctld",
            Context::EpilogSlurmctld => "epilog_slurmctld",
        }
    }

    pub fn is_prolog(self) -> bool {
        matches!(self, Context::PrologSlurmd | Context::PrologSlurmctld)
    }
}

/// One run: every script `pattern` names, in order, with `env`.
#[derive(Debug, Clone)]
pub struct ScriptRun {
    pub context: Context,
    pub job_id: u32,
    /// A path or a glob (`/etc/slurm/prolog.d/*`).
    pub pattern: String,
    /// The whole environment (nothing of the daemon's is inherited).
    pub env: Vec<(String, String)>,
    /// `PrologEpilogTimeout`, for each script; `None` waits for ever.
    pub timeout: Option<Duration>,
    /// `PrologFlags=Serial`.
    pub serial: bool,
    /// Set from outside to kill the run (its job was cancelled).
    pub stop: Option<Stop>,
}

/// Kills a run from outside: a cancelled job's PrologSlurmctld, as
/// slurmctld flushes the scripts of a job cancelled while CONFIGURING.
#[derive(Debug, Clone, Default)]
pub struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Stop {
    pub fn stop(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_stopped(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// How a run ended. Only [`Outcome::Done`] is a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every script exited 0.
    Done,
    /// A script exited non-zero or was killed by a signal; the scripts
    /// after it were not run (as in Slurm).
    Failed { script: PathBuf, status: ExitStatus },
    /// A script outlived the timeout; its process group was killed.
    TimedOut { script: PathBuf, after: Duration },
    /// Nothing could run: no script matched, or one could not start.
    NotRun(String),
    /// Killed from outside ([`Stop`]).
    Stopped,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        *self == Outcome::Done
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Done => f.write_str("done"),
            Outcome::Failed { script, status } => write!(
                f,
                "{} failed: status={}:{}",
                script.display(),
                status.code,
                status.signal
            ),
            Outcome::TimedOut { script, after } => write!(
                f,
                "{} timed out after {}s; killed",
                script.display(),
                after.as_secs()
            ),
            Outcome::NotRun(why) => f.write_str(why),
            Outcome::Stopped => f.write_str("stopped: its job ended"),
        }
    }
}

#[derive(Debug, Error)]
pub enum ScriptError {
    #[error("cannot read directory {dir} for {pattern}: {source}")]
    Glob {
        pattern: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("no script matches {pattern}")]
    NoMatch { pattern: String },
    #[error("cannot start {path}: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot wait for {path}: {source}")]
    Wait {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Run `req` on a thread of its own; the outcome comes through the
/// returned future. A thread that cannot be created (or that dies) is a
/// run that could not start.
pub fn spawn(req: ScriptRun) -> impl std::future::Future<Output = Outcome> + Send + 'static {
    let (tx, rx) = oneshot::channel();
    let (job_id, context) = (req.job_id, req.context);
    let spawned = std::thread::Builder::new()
        .name(format!("job{job_id}-{}", context.name()))
        .spawn(move || {
            let _ = tx.send(run(&req));
        });
    if let Err(e) = &spawned {
        tracing::error!(job_id, script = context.name(), error = %e, "cannot start a thread for the script");
    }
    async move {
        rx.await
            .unwrap_or_else(|_| Outcome::NotRun("the script's thread could not run it".into()))
    }
}

/// Run `req` here and now (blocking): each script in turn, stopping at the
/// first that fails. N.B. the order is glob's, reversed: slurmd pushes each
/// match onto the front of its list, so `/etc/slurm/prolog.d/*` runs `20-b`
/// before `10-a`.
pub fn run(req: &ScriptRun) -> Outcome {
    let _serial = req
        .serial
        .then(|| SERIAL.lock().unwrap_or_else(|p| p.into_inner()));
    // slurmd globs its Prolog and Epilog; slurmctld runs its scripts by
    // their path as given.
    let scripts = match req.context {
        Context::PrologSlurmctld | Context::EpilogSlurmctld => vec![PathBuf::from(&req.pattern)],
        Context::PrologSlurmd | Context::EpilogSlurmd => match expand(&req.pattern) {
            Ok(s) => s,
            Err(e) => return Outcome::NotRun(e.to_string()),
        },
    };
    for script in scripts.into_iter().rev() {
        let outcome = match run_one(&script, req) {
            Ok(o) => o,
            Err(e) => Outcome::NotRun(e.to_string()),
        };
        if outcome == Outcome::Stopped {
            tracing::info!(
                job_id = req.job_id,
                script = req.context.name(),
                "script stopped: its job ended"
            );
            return outcome;
        }
        if !outcome.ok() {
            tracing::error!(job_id = req.job_id, script = req.context.name(), outcome = %outcome, "script failed");
            return outcome;
        }
    }
    Outcome::Done
}

/// How often a script that is "text file busy" is tried again: a file
/// just written (by an administrator's tools, or a forked process that
/// still holds it open for writing) is briefly not executable.
const BUSY_RETRIES: u32 = 20;

fn run_one(script: &Path, req: &ScriptRun) -> Result<Outcome, ScriptError> {
    let mut tries = 0;
    let mut child = loop {
        match start(script, req) {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < BUSY_RETRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => {
                break r.map_err(|source| ScriptError::Spawn {
                    path: script.to_path_buf(),
                    source,
                })?
            }
        }
    };
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let started = Instant::now();
    let wait_err = |source| ScriptError::Wait {
        path: script.to_path_buf(),
        source,
    };
    loop {
        if let Some(status) = child.try_wait().map_err(wait_err)? {
            // What it left running in its group goes with it, as in Slurm.
            kill_group(pgid);
            let status = ExitStatus {
                code: status.code().unwrap_or(0),
                signal: status.signal().unwrap_or(0),
            };
            return Ok(if status == ExitStatus::default() {
                Outcome::Done
            } else {
                Outcome::Failed {
                    script: script.to_path_buf(),
                    status,
                }
            });
        }
        if req.stop.as_ref().is_some_and(Stop::is_stopped) {
            kill_group(pgid);
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Outcome::Stopped);
        }
        if let Some(limit) = req.timeout {
            if started.elapsed() >= limit {
                kill_group(pgid);
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Outcome::TimedOut {
                    script: script.to_path_buf(),
                    after: limit,
                });
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Slurm's end for a script's process group: SIGTERM, and SIGKILL 10 ms
/// later.
fn kill_group(pgid: i32) {
    if signal_group(pgid, Signal::SIGTERM) {
        std::thread::sleep(Duration::from_millis(10));
        signal_group(pgid, Signal::SIGKILL);
    }
}

/// Start one script: its own process group, only `req.env`, no stdio.
fn start(script: &Path, req: &ScriptRun) -> std::io::Result<std::process::Child> {
    Command::new(script)
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: the timeout kills what it left in the background too.
        .process_group(0)
        .spawn()
}

/// The scripts `pattern` names, sorted, as `glob(3)` would: `*`, `?` and
/// `[...]` in any component (a leading `.` is matched only literally).
/// A pattern that matches nothing is an error, as in Slurm (the prolog
/// then fails).
pub fn expand(pattern: &str) -> Result<Vec<PathBuf>, ScriptError> {
    let no_match = || ScriptError::NoMatch {
        pattern: pattern.to_string(),
    };
    if !has_magic(pattern) {
        let p = PathBuf::from(pattern);
        return if p.exists() {
            Ok(vec![p])
        } else {
            Err(no_match())
        };
    }
    let (mut found, rest) = match pattern.strip_prefix('/') {
        Some(rest) => (vec![PathBuf::from("/")], rest),
        None => (vec![PathBuf::from(".")], pattern),
    };
    let parts: Vec<&str> = rest.split('/').filter(|c| !c.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &found {
            if !has_magic(part) {
                let p = dir.join(part);
                if p.exists() {
                    next.push(p);
                }
                continue;
            }
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                // Only the pattern's own directories are worth an error.
                Err(_) if i > 0 => continue,
                Err(source) => {
                    return Err(ScriptError::Glob {
                        pattern: pattern.to_string(),
                        dir: dir.clone(),
                        source,
                    })
                }
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| fnmatch(part.as_bytes(), n.as_bytes()))
                .collect();
            names.sort();
            for n in names {
                let p = dir.join(n);
                if last || p.is_dir() {
                    next.push(p);
                }
            }
        }
        found = next;
    }
    if found.is_empty() {
        return Err(no_match());
    }
    Ok(found)
}

fn has_magic(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Shell-style match of one path component.
fn fnmatch(pat: &[u8], name: &[u8]) -> bool {
    if name.first() == Some(&b'.') && pat.first() != Some(&b'.') {
        return false;
    }
    matches_from(pat, name)
}

fn matches_from(pat: &[u8], name: &[u8]) -> bool {
    match pat.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| matches_from(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && matches_from(rest, &name[1..]),
        Some((b'[', rest)) => {
            let Some((&c, tail)) = name.split_first() else {
                return false;
            };
            match class(rest, c) {
                Some((hit, after)) => hit && matches_from(after, tail),
                // An unclosed `[` is a literal.
                None => c == b'[' && matches_from(rest, tail),
            }
        }
        Some((&p, rest)) => name.first() == Some(&p) && matches_from(rest, &name[1..]),
    }
}

/// Whether `c` is in the bracket class at the start of `pat` (just after
/// its `[`), and what follows the class; `None` if it is not closed.
fn class(pat: &[u8], c: u8) -> Option<(bool, &[u8])> {
    let (negate, mut i) = match pat.first() {
        Some(b'!' | b'^') => (true, 1),
        _ => (false, 0),
    };
    let mut hit = false;
    let mut first = true;
    while i < pat.len() {
        let p = pat[i];
        if p == b']' && !first {
            return Some((hit != negate, &pat[i + 1..]));
        }
        first = false;
        if pat.get(i + 1) == Some(&b'-') && pat.get(i + 2).is_some_and(|&e| e != b']') {
            hit |= (p..=pat[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= p == c;
            i += 1;
        }
    }
    None
}

/// What a node daemon needs of `conf`.
pub fn node_script_conf(conf: &PrologConf) -> NodeScriptConf {
    NodeScriptConf {
        prolog: conf.prolog.clone(),
        epilog: conf.epilog.clone(),
        timeout_s: conf.timeout_s,
        serial: conf.serial,
    }
}

/// The wait(2) status Slurm's `SLURM_JOB_EXIT_CODE` carries.
pub fn wait_status(s: ExitStatus) -> i32 {
    ((s.code & 0xff) << 8) | (s.signal & 0x7f)
}

/// The environment of a node's Prolog or Epilog for `job` on `node`, as
/// slurmd builds it (22.05's `prep/script`): the job's ids and owner, the
/// node list, the partition, the credential's fields, and for an Epilog
/// the job's exit status when it is known. No `SLURM_JOB_NAME`,
/// `SLURM_JOB_NODELIST` or `SLURM_JOB_GROUP`: slurmd does not set them.
pub fn node_env(
    job: &ScriptJob,
    node: &str,
    conf_path: &str,
    context: Context,
    exit: Option<ExitStatus>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| env.push((k.to_string(), v));
    set("SLURMD_NODENAME", node.to_string());
    set("SLURM_CONF", conf_path.to_string());
    set("SLURM_CLUSTER_NAME", job.cluster.clone());
    set("SLURM_JOB_ID", job.job_id.to_string());
    set("SLURM_JOB_UID", job.uid.to_string());
    set("SLURM_JOB_GID", job.gid.to_string());
    if !job.workdir.is_empty() {
        set("SLURM_JOB_WORK_DIR", job.workdir.clone());
    }
    set("SLURM_JOB_USER", job.user.clone());
    set("SLURM_JOBID", job.job_id.to_string());
    set("SLURM_UID", job.uid.to_string());
    if !job.nodelist.is_empty() {
        set("SLURM_NODELIST", job.nodelist.clone());
    }
    if !job.partition.is_empty() {
        set("SLURM_JOB_PARTITION", job.partition.clone());
    }
    set("SLURM_SCRIPT_CONTEXT", context.name().to_string());
    if let (Context::EpilogSlurmd, Some(s)) = (context, exit) {
        let ws = wait_status(s);
        set("SLURM_JOB_DERIVED_EC", ws.to_string());
        set("SLURM_JOB_EXIT_CODE", ws.to_string());
        set("SLURM_JOB_EXIT_CODE2", format!("{}:{}", s.code, s.signal));
    }
    if let Some(a) = &job.account {
        set("SLURM_JOB_ACCOUNT", a.clone());
    }
    if !job.cpus_per_node.is_empty() {
        set(
            "SLURM_JOB_CPUS_PER_NODE",
            super::env::compress_counts(&job.cpus_per_node),
        );
    }
    if job.ntasks > 0 {
        set("SLURM_JOB_NTASKS", job.ntasks.to_string());
    }
    if job.num_nodes > 0 {
        set("SLURM_JOB_NUM_NODES", job.num_nodes.to_string());
    }
    set("SLURM_JOB_RESTART_COUNT", job.restarts.to_string());
    for (k, v) in [
        ("SLURM_JOB_STDERR", &job.stderr),
        ("SLURM_JOB_STDIN", &job.stdin),
        ("SLURM_JOB_STDOUT", &job.stdout),
    ] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            set(k, v.clone());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn req(pattern: &Path, env: Vec<(String, String)>, timeout: Option<Duration>) -> ScriptRun {
        ScriptRun {
            context: Context::PrologSlurmd,
            job_id: 7,
            pattern: pattern.to_string_lossy().into_owned(),
            env,
            timeout,
            serial: false,
            stop: None,
        }
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("canopy-prolog-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_script_sees_only_the_environment_it_is_given() {
        let d = tmp("env");
        let out = d.join("env.out");
        let s = script(&d, "p", &format!("env > {}", out.display()));
        let env = vec![("SLURM_JOB_ID".to_string(), "7".to_string())];
        assert_eq!(run(&req(&s, env, None)), Outcome::Done);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("SLURM_JOB_ID=7"), "{text}");
        assert!(!text.contains("HOME="), "nothing inherited: {text}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_exit_status_and_the_first_failure_stop_the_run() {
        let d = tmp("status");
        // Reverse glob order, as slurmd: b runs first, and a failure stops
        // the run before a.
        let marker = d.join("ran-a");
        script(&d, "a", &format!("touch {}", marker.display()));
        script(&d, "b", "exit 3");
        let o = run(&req(&d.join("*"), vec![], None));
        assert_eq!(
            o,
            Outcome::Failed {
                script: d.join("b"),
                status: ExitStatus { code: 3, signal: 0 }
            }
        );
        assert!(!marker.exists(), "scripts after a failure do not run");
        let killed = script(&d, "k", "kill -9 $$");
        let o = run(&req(&killed, vec![], None));
        assert!(
            matches!(
                o,
                Outcome::Failed {
                    status: ExitStatus { signal: 9, .. },
                    ..
                }
            ),
            "{o:?}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_globs_scripts_run_in_reverse_order() {
        let d = tmp("order");
        let log = d.join("log");
        for n in ["10-a", "20-b", "30-c"] {
            script(&d, n, &format!("echo {n} >> {}", log.display()));
        }
        assert_eq!(run(&req(&d.join("[0-9]*"), vec![], None)), Outcome::Done);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "30-c\n20-b\n10-a\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_timeout_kills_the_whole_process_group() {
        let d = tmp("timeout");
        let pidfile = d.join("bg.pid");
        // A background child that would outlive the script's own kill.
        let s = script(
            &d,
            "hang",
            &format!("sleep 30 & echo $! > {}; wait", pidfile.display()),
        );
        let t0 = Instant::now();
        let o = run(&req(&s, vec![], Some(Duration::from_millis(500))));
        assert!(matches!(o, Outcome::TimedOut { .. }), "{o:?}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        // Killed with its group (give the kernel a moment to reap it).
        assert!(
            gone_soon(&pidfile),
            "the background sleep survived the timeout"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Whether the process whose pid `pidfile` holds is gone (or a zombie)
    /// within a second.
    fn gone_soon(pidfile: &std::path::Path) -> bool {
        let pid: i32 = std::fs::read_to_string(pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (0..50).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let gone = stat.is_empty() || stat.contains(") Z ");
            if !gone {
                std::thread::sleep(Duration::from_millis(20));
            }
            gone
        })
    }

    #[test]
    fn a_stopped_run_is_killed() {
        let d = tmp("stop");
        let s = script(&d, "hang", "sleep 30");
        let stop = Stop::default();
        let mut r = req(&s, vec![], None);
        r.stop = Some(stop.clone());
        let t = std::thread::spawn(move || run(&r));
        std::thread::sleep(Duration::from_millis(200));
        stop.stop();
        assert_eq!(t.join().unwrap(), Outcome::Stopped);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn what_a_script_leaves_behind_is_killed_when_it_exits() {
        let d = tmp("leftover");
        let pidfile = d.join("bg.pid");
        let s = script(
            &d,
            "bg",
            &format!("sleep 30 &\necho $! > {}", pidfile.display()),
        );
        assert_eq!(run(&req(&s, vec![], None)), Outcome::Done);
        assert!(
            gone_soon(&pidfile),
            "the background sleep outlived its script"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn globs_expand_sorted_and_a_missing_script_is_a_failure() {
        let d = tmp("glob");
        script(&d, "20-b", "true");
        script(&d, "10-a", "true");
        std::fs::write(d.join(".hidden"), "").unwrap();
        let all = expand(&format!("{}/*", d.display())).unwrap();
        assert_eq!(all, vec![d.join("10-a"), d.join("20-b")]);
        let one = expand(&format!("{}/[1]?-*", d.display())).unwrap();
        assert_eq!(one, vec![d.join("10-a")]);
        assert!(matches!(
            expand(&format!("{}/nothing*", d.display())),
            Err(ScriptError::NoMatch { .. })
        ));
        let o = run(&req(&d.join("absent"), vec![], None));
        assert!(matches!(o, Outcome::NotRun(_)), "{o:?}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn fnmatch_classes() {
        assert!(fnmatch(b"[a-c]x", b"bx"));
        assert!(!fnmatch(b"[!a-c]x", b"bx"));
        assert!(fnmatch(b"[]]", b"]"));
        assert!(fnmatch(b"a[", b"a["));
        assert!(!fnmatch(b"*", b".x"));
        assert!(fnmatch(b".*", b".x"));
    }

    #[test]
    fn node_env_is_slurmds() {
        let job = ScriptJob {
            job_id: 12,
            cluster: "c".into(),
            user: "alice".into(),
            uid: 1000,
            gid: 100,
            partition: "debug".into(),
            nodelist: "n[1-2]".into(),
            num_nodes: 2,
            cpus_per_node: vec![2, 2],
            ntasks: 4,
            workdir: "/home/alice".into(),
            stdout: Some("/home/alice/out".into()),
            stderr: None,
            stdin: None,
            restarts: 1,
            account: Some("acct".into()),
        };
        let env = node_env(&job, "n2", "/etc/slurm.conf", Context::PrologSlurmd, None);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_JOB_ID"), Some("12"));
        assert_eq!(get("SLURM_JOBID"), Some("12"));
        assert_eq!(get("SLURMD_NODENAME"), Some("n2"));
        assert_eq!(get("SLURM_SCRIPT_CONTEXT"), Some("prolog_slurmd"));
        assert_eq!(get("SLURM_NODELIST"), Some("n[1-2]"));
        assert_eq!(get("SLURM_JOB_CPUS_PER_NODE"), Some("2(x2)"));
        assert_eq!(get("SLURM_JOB_ACCOUNT"), Some("acct"));
        assert_eq!(get("SLURM_JOB_NODELIST"), None, "slurmd does not set it");
        assert_eq!(get("SLURM_JOB_EXIT_CODE"), None);
        let exit = Some(ExitStatus { code: 2, signal: 0 });
        let env = node_env(&job, "n2", "/etc/slurm.conf", Context::EpilogSlurmd, exit);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_SCRIPT_CONTEXT"), Some("epilog_slurmd"));
        assert_eq!(get("SLURM_JOB_EXIT_CODE"), Some("512"));
        assert_eq!(get("SLURM_JOB_EXIT_CODE2"), Some("2:0"));
    }
}
