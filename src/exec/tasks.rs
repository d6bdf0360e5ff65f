//! Running the tasks of an srun step on this node: one process per task
//! with its own Slurm environment, output to files or streamed to srun, and
//! every exit status reported to srun over one signed connection per node.
//! The same connection carries srun's standard input and the signals srun
//! forwards (Ctrl-C and friends) back down to the tasks.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use nix::fcntl::OFlag;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::abort::{open_interruptible, Abort};
use super::env::compress_counts;
use super::identity::{JobUser, WorkDir};
use super::pattern::{expand, resolve, PatternContext};
use super::record::{start_ticks, Proc};
use crate::wire::auth::Authenticator;
use crate::wire::connection::Connection;
use crate::wire::messages::{Body, ExitStatus, StepIoHello, StepLaunch, TaskOutput};

/// Chunks of standard input queued per task before the link stops reading
/// from srun (a task that never reads its stdin then holds srun back).
const STDIN_QUEUE: usize = 128;
/// How long a task's exit waits for the rest of its output to be read, so
/// srun prints the output before the exit (a background child keeping the
/// pipe open must not hold the exit back for ever).
const OUTPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The global ranks this node runs, given its position in the step's nodelist.
pub fn local_ranks(tasks_per_node: &[u32], node_index: usize) -> std::ops::Range<u32> {
    let first: u32 = tasks_per_node.iter().take(node_index).sum();
    let count = tasks_per_node.get(node_index).copied().unwrap_or(0);
    first..first + count
}

/// The environment of task `rank` (its `local` index on node `node_index`).
pub fn task_env(
    l: &StepLaunch,
    node: &str,
    node_index: usize,
    rank: u32,
    local: u32,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = l.env.clone();
    let ntasks: u32 = l.tasks_per_node.iter().sum();
    let ranks = local_ranks(&l.tasks_per_node, node_index);
    let set = |env: &mut Vec<(String, String)>, k: &str, v: String| match env
        .iter_mut()
        .find(|(key, _)| key == k)
    {
        Some(slot) => slot.1 = v,
        None => env.push((k.to_string(), v)),
    };
    let tpn = compress_counts(&l.tasks_per_node);
    let nnodes = l.tasks_per_node.len().to_string();
    for (k, v) in [
        ("SLURM_JOB_ID", l.job_id.to_string()),
        ("SLURM_JOBID", l.job_id.to_string()),
        ("SLURM_STEP_ID", l.step_id.to_string()),
        ("SLURM_STEPID", l.step_id.to_string()),
        ("SLURM_PROCID", rank.to_string()),
        ("SLURM_LOCALID", local.to_string()),
        ("SLURM_NODEID", node_index.to_string()),
        ("SLURM_STEP_NODELIST", l.nodelist.clone()),
        ("SLURM_STEP_NUM_NODES", nnodes.clone()),
        ("SLURM_STEP_NUM_TASKS", ntasks.to_string()),
        ("SLURM_STEP_TASKS_PER_NODE", tpn.clone()),
        ("SLURM_NTASKS", ntasks.to_string()),
        ("SLURM_NPROCS", ntasks.to_string()),
        ("SLURM_NNODES", nnodes),
        ("SLURM_TASKS_PER_NODE", tpn),
        ("SLURM_JOB_NODELIST", l.job_nodelist.clone()),
        ("SLURM_NODELIST", l.job_nodelist.clone()),
        ("SLURM_JOB_PARTITION", l.partition.clone()),
        ("SLURM_CLUSTER_NAME", l.cluster.clone()),
        ("SLURM_JOB_USER", l.user.clone()),
        ("SLURM_JOB_UID", l.uid.to_string()),
        ("SLURM_JOB_GID", l.gid.to_string()),
        ("SLURMD_NODENAME", node.to_string()),
        (
            "SLURM_GTIDS",
            ranks.map(|r| r.to_string()).collect::<Vec<_>>().join(","),
        ),
    ] {
        set(&mut env, k, v);
    }
    if let Some(c) = l.cpus_per_task {
        set(&mut env, "SLURM_CPUS_PER_TASK", c.to_string());
    }
    if let Some(a) = &l.array {
        super::env::array_vars(&mut env, a);
    }
    env
}

/// One task's files, opened as the step's user: `None` streams to (or, for
/// input, from) srun.
struct TaskFiles {
    stdout: Option<File>,
    stderr: Option<File>,
    stdin: Option<File>,
}

/// Where one task's streams go: output files, error files, input file.
type TaskPaths = (Option<PathBuf>, Option<PathBuf>, Option<PathBuf>);

/// Open every local task's `--output`/`--error`/`--input` file as the user
/// (run through [`JobUser::run`]). Each distinct output file is opened once
/// and shared by the tasks writing it; `truncate` empties it first. Opens
/// are interruptible by a cancel (a FIFO blocks them).
fn open_task_files(
    paths: &[TaskPaths],
    truncate: bool,
    abort: &Abort,
) -> Result<Vec<TaskFiles>, String> {
    let mut opened: std::collections::HashMap<PathBuf, File> = std::collections::HashMap::new();
    let mut open = |p: &Option<PathBuf>| -> Result<Option<File>, String> {
        let Some(p) = p else {
            return Ok(None);
        };
        let f = match opened.get(p) {
            Some(f) => f.try_clone(),
            None => open_output(p, truncate, abort).and_then(|f| {
                let copy = f.try_clone()?;
                opened.insert(p.clone(), f);
                Ok(copy)
            }),
        };
        f.map(Some)
            .map_err(|e| format!("cannot open {}: {e}", p.display()))
    };
    let mut files = Vec::with_capacity(paths.len());
    for (out, err, input) in paths {
        let stdout = open(out)?;
        let stderr = match (err, &stdout) {
            (Some(_), _) => open(err)?,
            (None, Some(f)) => Some(f.try_clone().map_err(|e| e.to_string())?),
            (None, None) => None,
        };
        let stdin = input
            .as_ref()
            .map(|p| {
                open_interruptible(p, OFlag::O_RDONLY, abort)
                    .map_err(|e| format!("cannot open {}: {e}", p.display()))
            })
            .transpose()?;
        files.push(TaskFiles {
            stdout,
            stderr,
            stdin,
        });
    }
    Ok(files)
}

fn open_output(path: &Path, truncate: bool, abort: &Abort) -> std::io::Result<std::fs::File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Always written in append mode: tasks on several nodes sharing one
    // file, or a file the batch script also writes (submitit's pattern),
    // must not clobber each other.
    let mut flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_APPEND;
    if truncate {
        flags |= OFlag::O_TRUNC;
    }
    open_interruptible(path, flags, abort)
}

/// A step's tasks started on this node.
pub struct StartedStep {
    pub step_id: u32,
    /// The tasks' process groups.
    pub groups: Vec<i32>,
    /// The lowest rank here, and a way to add a line to srun's stderr (the
    /// node's kill note) while the step's link is open. Weak: it must not
    /// keep the link open once the tasks are done.
    pub first_rank: u32,
    pub notes: mpsc::WeakSender<Body>,
    /// The step's cgroups while its tasks run (`sstat` reads them). Weak:
    /// the last task's end must still tear them down.
    pub guard: Option<std::sync::Weak<super::leaf::StepGuard>>,
}

impl StartedStep {
    /// Tell srun the step is being killed, if the link is still up.
    pub fn aborted(&self) {
        if let Some(tx) = self.notes.upgrade() {
            let _ = tx.try_send(Body::StepAborted);
        }
    }

    /// Send `line` to srun as this node's stderr, if the link is still up.
    pub fn note(&self, line: &str) {
        if let Some(tx) = self.notes.upgrade() {
            let _ = tx.try_send(Body::TaskOutput(TaskOutput {
                task: self.first_rank,
                stderr: true,
                data: line.as_bytes().to_vec(),
            }));
        }
    }
}

/// One task forked, its streams not yet served.
pub struct ForkedTask {
    rank: u32,
    child: tokio::process::Child,
    /// Task 0's pty master (`--pty`) and its reader and writer.
    pty: Option<PtyEnds>,
    piped_out: bool,
    piped_err: bool,
    /// The task's session leader, for the node's spool record.
    pub proc: Proc,
}

type PtyEnds = (
    std::os::fd::OwnedFd,
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
);

/// A step's tasks forked on this node, before their I/O is served.
pub struct ForkedStep {
    pub tasks: Vec<ForkedTask>,
    /// The job's cgroup, when this step made it (the first on a node
    /// that does not run the batch script): the agent keeps it.
    pub cgroup: Option<Arc<super::contain::JobCgroup>>,
    /// The step's cgroups, torn down when its tasks are done.
    pub guard: Option<Arc<super::leaf::StepGuard>>,
}

impl ForkedStep {
    /// Kill every task (the step was cancelled while it started).
    pub fn kill(&self) {
        for t in &self.tasks {
            super::process::signal_group(t.proc.pid, nix::sys::signal::Signal::SIGKILL);
        }
    }

    pub fn groups(&self) -> Vec<i32> {
        self.tasks
            .iter()
            .map(|t| t.proc.pid)
            .filter(|&g| g > 0)
            .collect()
    }
}

/// Fork this node's tasks: the user's files are opened as the user, then
/// each task started in its own session. Blocking (group lookup, opens,
/// fork and exec): runs on the step's supervisor thread, inside the
/// daemon's tokio runtime (`Handle::enter`) so the children are registered
/// with it. If any task cannot start, those already started are killed.
pub fn fork_tasks(
    l: &StepLaunch,
    node: &str,
    node_index: usize,
    abort: &Abort,
    leaf: Option<&super::leaf::Leaf>,
    job_cgroup: Option<Arc<super::contain::JobCgroup>>,
) -> Result<ForkedStep, String> {
    let ranks = local_ranks(&l.tasks_per_node, node_index);
    // Binding, GPUs and cgroups are settled before any task starts: a
    // request that cannot be met fails the step, not half of it.
    let mut setups: Vec<super::leaf::TaskSetup> = match leaf {
        Some(leaf) => leaf.tasks(l, node_index, ranks.clone())?,
        None => ranks.clone().map(|_| Default::default()).collect(),
    };
    // The job's cgroup is made at its launch with the job's share; one
    // missing here (a job adopted after a daemon restart) is made for
    // tracking only, never with this step's narrower limits.
    let made = match (leaf, &job_cgroup) {
        (Some(leaf), None) => leaf.track_job(l.job_id, l.uid)?,
        _ => None,
    };
    let (guard, mut attaches) = match (leaf, made.as_ref().or(job_cgroup.as_ref())) {
        (Some(leaf), Some(job)) => {
            // The step is confined to its own share within the job's.
            let limits = leaf.limits(l.held.get(node_index));
            let (g, a) = super::leaf::StepGuard::new(
                job,
                l.job_id,
                l.step_id,
                node,
                ranks.clone(),
                &limits,
            )?;
            (Some(Arc::new(g)), a.into_iter().map(Some).collect())
        }
        _ => (None, ranks.clone().map(|_| None).collect::<Vec<_>>()),
    };
    // Each task's command line: the step's, or its own (--multi-prog).
    let argv_of = |rank: u32| -> Result<Vec<String>, String> {
        let argv = match &l.multi_prog {
            Some(m) => super::multiprog::argv_for(m, rank)
                .ok_or_else(|| format!("no program for task {rank} in {}", m.file))?,
            None => l.argv.clone(),
        };
        if argv.is_empty() {
            return Err("no command given".into());
        }
        Ok(argv)
    };
    let cwd = Path::new(&l.cwd);
    let mut forked = ForkedStep {
        tasks: Vec::new(),
        cgroup: made,
        guard,
    };
    let abort_step = |forked: ForkedStep, e: String| -> Result<ForkedStep, String> {
        forked.kill();
        Err(e)
    };
    let paths: Vec<TaskPaths> = ranks
        .clone()
        .map(|rank| {
            let ctx = PatternContext {
                job_id: l.job_id,
                array_job_id: l.array.map(|a| a.array_job_id),
                array_task_id: l.array.map(|a| a.task_id),
                job_name: l.name.clone(),
                user: l.user.clone(),
                first_node: node.to_string(),
                node_index: node_index as u32,
                step_id: Some(l.step_id),
                task_id: Some(rank),
                restart: 0,
            };
            let path = |p: &Option<String>| p.as_ref().map(|p| resolve(&expand(p, &ctx), cwd));
            (path(&l.stdout), path(&l.stderr), path(&l.stdin_pattern))
        })
        .collect();
    let user = JobUser::new(&l.user, l.uid, l.gid);
    // Only files need the user's identity before the fork (a thread each
    // time); a step that streams everything to srun skips it.
    let files = if paths
        .iter()
        .all(|(o, e, i)| o.is_none() && e.is_none() && i.is_none())
    {
        paths
            .iter()
            .map(|_| TaskFiles {
                stdout: None,
                stderr: None,
                stdin: None,
            })
            .collect()
    } else {
        // Only the step's first node truncates, so that one node's late open
        // cannot wipe what another's tasks already wrote.
        let truncate = !l.open_append && node_index == 0;
        user.run(|| open_task_files(&paths, truncate, abort))
            .map_err(|e| format!("cannot act as uid {}: {e}", l.uid))??
    };
    let workdir = Arc::new(WorkDir::new(cwd, node).map_err(|e| e.to_string())?);
    for ((local, rank), files) in ranks.clone().enumerate().zip(files) {
        let argv = match argv_of(rank) {
            Ok(a) => a,
            Err(e) => return abort_step(forked, e),
        };
        let program = &argv[0];
        let setup = std::mem::take(&mut setups[local]);
        let attach = attaches[local].take();
        let mut env = task_env(l, node, node_index, rank, local as u32);
        for (k, v) in setup.env {
            env.retain(|(key, _)| *key != k);
            env.push((k, v));
        }
        let mut cmd = std::process::Command::new(program);
        cmd.args(&argv[1..])
            .env_clear()
            .envs(env)
            .stdin(if l.stdin.includes(rank) {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let TaskFiles {
            stdout: out_file,
            stderr: err_file,
            stdin: in_file,
        } = files;
        if let Some(f) = in_file {
            cmd.stdin(f);
        }
        let piped_out = out_file.is_none();
        let piped_err = err_file.is_none();
        let quiet = l.pty.is_some() && rank != 0;
        let stream = || if quiet { Stdio::null() } else { Stdio::piped() };
        cmd.stdout(out_file.map(Stdio::from).unwrap_or_else(stream));
        cmd.stderr(err_file.map(Stdio::from).unwrap_or_else(stream));
        let pty = match l.pty.filter(|_| rank == 0) {
            Some(size) => match pty_for(&mut cmd, size, l.uid, l.gid) {
                Ok(master) => Some(master),
                Err(e) => return abort_step(forked, format!("cannot open a pty: {e}")),
            },
            None => None,
        };
        let controlling_tty = pty.is_some();
        // SAFETY: setsid (each task its own group, so a cancel kills whatever
        // it started), the TIOCSCTTY ioctl, setgroups/setgid/setuid, chdir
        // and write are async-signal-safe and use only memory prepared
        // before the fork.
        unsafe {
            let (user, workdir) = (user.clone(), workdir.clone());
            let (affinity, verbose) = (setup.affinity, setup.verbose);
            cmd.pre_exec(move || {
                // Into the task's cgroup first, so all it starts is
                // tracked; then its CPUs (task/affinity), whose verbose
                // line goes to the task's stderr as slurmstepd writes it.
                if let Some(a) = &attach {
                    a.apply()?;
                }
                if let Some(m) = &affinity {
                    m.apply()?;
                }
                if let Some((head, tail)) = &verbose {
                    super::leaf::write_verbose_in_child(head.as_bytes(), tail.as_bytes());
                }
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if controlling_tty {
                    super::pty::take_as_controlling_in_child()?;
                }
                user.become_in_child()?;
                workdir.enter_in_child()
            });
        }
        // The Command (and with it our copies of a pty's slave end) is
        // dropped here, so reading the master ends when the task's side closes.
        let spawned = tokio::process::Command::from(cmd).spawn();
        let child = match spawned {
            Ok(c) => c,
            Err(e) => return abort_step(forked, format!("cannot start {program}: {e}")),
        };
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let proc = Proc {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        };
        let pty = match pty.map(|m| pty_streams(&m).map(|(r, w)| (m, r, w))) {
            Some(Err(e)) => {
                super::process::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                return abort_step(forked, format!("cannot read the pty: {e}"));
            }
            Some(Ok(ends)) => Some(ends),
            None => None,
        };
        forked.tasks.push(ForkedTask {
            rank,
            child,
            pty,
            piped_out,
            piped_err,
            proc,
        });
    }
    Ok(forked)
}

/// Serve a forked step's I/O from the event loop: output not sent to files
/// and every exit status go to srun at `l.io_addr`, srun's input and
/// signals come back. Nothing here blocks.
pub fn start_step_io(
    forked: ForkedStep,
    l: &StepLaunch,
    node: &str,
    node_index: usize,
    auth: Arc<Authenticator>,
) -> StartedStep {
    let ranks = local_ranks(&l.tasks_per_node, node_index);
    let (tx, rx) = mpsc::channel::<Body>(1024);
    let groups = forked.groups();
    let mut stdins: Vec<mpsc::Sender<Vec<u8>>> = Vec::new();
    // --pty: task 0's terminal, kept for srun's window resizes.
    let mut pty_master: Option<std::os::fd::OwnedFd> = None;
    // Each task's waiter holds the step's cgroups; the last to finish
    // tears them down.
    let guard = forked.guard.clone();
    for task in forked.tasks {
        let ForkedTask {
            rank,
            mut child,
            pty,
            piped_out,
            piped_err,
            ..
        } = task;
        let mut pumps = Vec::new();
        if let Some((master, reader, writer)) = pty {
            let (in_tx, in_rx) = mpsc::channel(STDIN_QUEUE);
            stdins.push(in_tx);
            actix::spawn(feed_stdin(writer, in_rx, Some(EOT)));
            pumps.push(actix::spawn(pump(
                PipeKind::Pty(reader),
                rank,
                false,
                tx.clone(),
            )));
            pty_master = Some(master);
        }
        if let Some(input) = child.stdin.take() {
            let (in_tx, in_rx) = mpsc::channel(STDIN_QUEUE);
            stdins.push(in_tx);
            actix::spawn(feed_stdin(input, in_rx, None));
        }
        for (pipe, stderr) in [
            (
                child.stdout.take().filter(|_| piped_out).map(PipeKind::Out),
                false,
            ),
            (
                child.stderr.take().filter(|_| piped_err).map(PipeKind::Err),
                true,
            ),
        ] {
            if let Some(p) = pipe {
                let tx = tx.clone();
                pumps.push(actix::spawn(pump(p, rank, stderr, tx)));
            }
        }
        let tx = tx.clone();
        let held = guard.clone();
        actix::spawn(async move {
            let _held = held;
            let waited = child.wait().await;
            let drained = futures::future::join_all(pumps);
            let _ = tokio::time::timeout(OUTPUT_DRAIN, drained).await;
            let status = match waited {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    ExitStatus {
                        code: s.code().unwrap_or(0),
                        signal: s.signal().unwrap_or(0),
                    }
                }
                Err(_) => ExitStatus { code: 1, signal: 0 },
            };
            let _ = tx.send(Body::TaskExit { task: rank, status }).await;
        });
    }
    let notes = tx.downgrade();
    drop(tx);
    let first_rank = ranks.start;
    let hello = StepIoHello {
        job_id: l.job_id,
        step_id: l.step_id,
        token: l.io_token,
        node: node.to_string(),
        tasks: ranks.collect(),
    };
    let control = Control {
        stdins,
        groups: groups.clone(),
        uid: l.uid,
        pty: pty_master,
    };
    actix::spawn(io_link(l.io_addr.clone(), auth, hello, rx, control));
    StartedStep {
        step_id: l.step_id,
        groups,
        first_rank,
        notes,
        guard: guard.as_ref().map(Arc::downgrade),
    }
}

/// What srun may act on through a node's I/O link.
struct Control {
    /// One queue per task that reads standard input.
    stdins: Vec<mpsc::Sender<Vec<u8>>>,
    /// The tasks' process groups, for forwarded signals.
    groups: Vec<i32>,
    /// The step owner's uid: only they (or root) may signal it.
    uid: u32,
    /// Task 0's pty master (`--pty`), for window resizes.
    pty: Option<std::os::fd::OwnedFd>,
}

/// What a terminal reads as end of input (Ctrl-D). After a partial line
/// the first one only hands that line over; a second is then the end.
const EOT: &[u8] = b"\x04";

/// Give `cmd` a new pty of `size` as stdin, stdout and stderr; returns the
/// master end.
fn pty_for(
    cmd: &mut std::process::Command,
    size: crate::wire::messages::WindowSize,
    uid: u32,
    gid: u32,
) -> std::io::Result<std::os::fd::OwnedFd> {
    let p = super::pty::open(size, uid, gid)?;
    cmd.stdin(Stdio::from(p.slave.try_clone()?))
        .stdout(Stdio::from(p.slave.try_clone()?))
        .stderr(Stdio::from(p.slave));
    Ok(p.master)
}

/// A pty master as a tokio reader and writer (two descriptors for the one
/// non-blocking terminal; the kernel polls ptys like pipes).
fn pty_streams(
    master: &std::os::fd::OwnedFd,
) -> std::io::Result<(
    tokio::net::unix::pipe::Receiver,
    tokio::net::unix::pipe::Sender,
)> {
    use tokio::net::unix::pipe;
    let reader = pipe::Receiver::from_owned_fd_unchecked(master.try_clone()?)?;
    let writer = pipe::Sender::from_owned_fd_unchecked(master.try_clone()?)?;
    Ok((reader, writer))
}

/// Write srun's standard input into one task; an empty chunk is the end of
/// it: the pipe is closed, or a terminal is sent `eof` (a pty must stay
/// open: closing the master would hang the task up).
async fn feed_stdin(
    mut input: impl tokio::io::AsyncWrite + Unpin,
    mut rx: mpsc::Receiver<Vec<u8>>,
    eof: Option<&'static [u8]>,
) {
    let mut at_line_start = true;
    while let Some(chunk) = rx.recv().await {
        if chunk.is_empty() {
            if let Some(eof) = eof {
                let _ = input.write_all(eof).await;
                if !at_line_start {
                    let _ = input.write_all(eof).await;
                }
            }
            return;
        }
        at_line_start = chunk.last() == Some(&b'\n');
        if input.write_all(&chunk).await.is_err() {
            // The task closed its stdin, or exited.
            return;
        }
    }
}

/// Act on what srun sends down the link until it closes.
async fn serve_control(
    mut reader: crate::wire::connection::ConnReader,
    mut control: Control,
    job_id: u32,
    step_id: u32,
) {
    while let Ok(Some(env)) = reader.recv().await {
        match env.body {
            Body::StepStdin(input) => {
                let eof = input.data.is_empty();
                let mut open = Vec::with_capacity(control.stdins.len());
                for tx in control.stdins.drain(..) {
                    // A closed queue means the task stopped reading: drop it.
                    if tx.send(input.data.clone()).await.is_ok() && !eof {
                        open.push(tx);
                    }
                }
                control.stdins = open;
            }
            Body::WindowChange(size) => {
                if let Some(master) = &control.pty {
                    if let Err(e) = super::pty::resize(master, size) {
                        tracing::debug!(job_id, step_id, error = %e, "cannot resize the pty");
                    }
                }
            }
            Body::SignalTasks { signal } => {
                if env.uid != control.uid && env.uid != 0 {
                    tracing::warn!(
                        job_id,
                        step_id,
                        uid = env.uid,
                        "signal from a user who does not own the step refused"
                    );
                    continue;
                }
                let Ok(sig) = nix::sys::signal::Signal::try_from(signal) else {
                    tracing::warn!(job_id, step_id, signal, "unknown signal from srun ignored");
                    continue;
                };
                tracing::debug!(job_id, step_id, %sig, "signal forwarded by srun");
                for &g in &control.groups {
                    super::process::signal_group(g, sig);
                }
            }
            other => {
                tracing::debug!(
                    job_id,
                    step_id,
                    kind = other.kind(),
                    "unexpected frame on a step I/O link"
                )
            }
        }
    }
    // srun is gone: whatever input is queued is all there will be.
}

enum PipeKind {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
    /// A pty master: reading fails with EIO once the task's side is closed.
    Pty(tokio::net::unix::pipe::Receiver),
}

/// Forward one pipe's bytes as they arrive.
async fn pump(mut p: PipeKind, task: u32, stderr: bool, tx: mpsc::Sender<Body>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let r = match &mut p {
            PipeKind::Out(o) => o.read(&mut buf).await,
            PipeKind::Err(e) => e.read(&mut buf).await,
            PipeKind::Pty(p) => p.read(&mut buf).await,
        };
        match r {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let out = TaskOutput {
                    task,
                    stderr,
                    data: buf[..n].to_vec(),
                };
                if tx.send(Body::TaskOutput(out)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One connection to srun carries every task's output and exit from this node.
async fn io_link(
    addr: String,
    auth: Arc<Authenticator>,
    hello: StepIoHello,
    mut rx: mpsc::Receiver<Body>,
    control: Control,
) {
    let conn = match Connection::connect(addr.as_str(), auth, rand::random()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(job_id = hello.job_id, step_id = hello.step_id, error = %e, "cannot reach srun; step output is lost");
            // Keep draining so the tasks never block on a full pipe.
            while rx.recv().await.is_some() {}
            return;
        }
    };
    let (job_id, step_id) = (hello.job_id, hello.step_id);
    let (reader, mut conn) = conn.into_split();
    if conn.send(0, &Body::StepIoHello(hello)).await.is_err() {
        while rx.recv().await.is_some() {}
        return;
    }
    let serving = actix::spawn(serve_control(reader, control, job_id, step_id));
    // Once every task has exited and its output is sent, srun has all it
    // needs; stop listening for input.
    let _guard = AbortOnDrop(serving);
    while let Some(body) = rx.recv().await {
        if conn.send(0, &body).await.is_err() {
            while rx.recv().await.is_some() {}
            return;
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_block_layout() {
        assert_eq!(local_ranks(&[2, 2, 1], 0), 0..2);
        assert_eq!(local_ranks(&[2, 2, 1], 2), 4..5);
        assert_eq!(local_ranks(&[2, 2, 1], 7), 5..5);
    }
}
