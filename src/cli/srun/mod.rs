//! `srun`: run a parallel step. Inside an allocation (found through
//! `SLURM_JOB_ID`/`SLURM_JOBID` alone) it launches a step of that job;
//! outside one it first creates an allocation, runs the step in it, and
//! releases it. Task output is streamed back as it is produced: node daemons
//! connect to a listener srun opens, and report every task's exit status.
//! The same links carry srun's standard input and forwarded signals down.
//!
//! This module owns the command's entry point, [`SrunArgs`] and launching the
//! step; the command line is parsed in `options`, the allocation handled in
//! `alloc`, the running step in `session` (with `signals` and `io` below it).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::client::{CliError, Client};
use super::getopt::{
    self, spec, Ambiguity,
    ArgKind::{Flag, Optional, Required},
    OptSpec, Word,
};
use crate::wire::connection::{ConnWriter, Connection};
use crate::wire::messages::{
    Body, ExitStatus, JobQuery, StdinTarget, StepComplete, StepLaunched, StepRequest, StepStdin,
    TaskOutput,
};
use crate::wire::types::{JobState, JobSubmit};

mod alloc;
mod io;
mod options;
mod session;
mod signals;

use alloc::*;
use io::*;
use session::*;
use signals::*;

pub(crate) use alloc::{allocate, job_ended, release};
pub(crate) use options::parse_options_env;
pub use options::{parse, parse_env, OptError};

/// What srun was asked to do.
#[derive(Debug, Default, PartialEq)]
pub struct SrunArgs {
    pub ntasks: Option<u32>,
    pub nodes: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub label: bool,
    pub output: Option<String>,
    pub error: Option<String>,
    pub job_name: Option<String>,
    pub partition: Option<String>,
    pub time_limit_min: Option<u32>,
    pub mem_mb: Option<u64>,
    pub chdir: Option<String>,
    pub quiet: bool,
    /// `-w`: nodes to use (for a new allocation and for the step).
    pub nodelist: Option<String>,
    /// `-x`: nodes not to use.
    pub exclude: Option<String>,
    /// `-i`: where the tasks' standard input comes from.
    pub input: Input,
    /// `-X`: Ctrl-C goes straight to the tasks, no status report.
    pub disable_status: bool,
    /// `--quit-on-interrupt`: one Ctrl-C ends the step.
    pub quit_on_interrupt: bool,
    /// `--export`: the tasks' environment (default `ALL`).
    pub export: Option<String>,
    /// For an allocation srun or salloc creates: `-A`, `-C`, `--exclusive`,
    /// `--mem-per-cpu`, `--comment`. Inside an existing allocation they are
    /// the job's, already settled.
    pub account: Option<String>,
    /// `-q/--qos`, for an allocation srun or salloc creates.
    pub qos: Option<String>,
    pub constraint: Option<String>,
    pub exclusive: bool,
    /// `-s/--oversubscribe`: the new allocation may share CPUs (the later
    /// of it and `--exclusive` wins).
    pub oversubscribe: bool,
    pub mem_per_cpu_mb: Option<u64>,
    pub comment: Option<String>,
    /// `-H`, `-b`, `-d`, `--nice`, `--priority`: for a new allocation too.
    pub hold: bool,
    pub begin_time: Option<i64>,
    pub dependency: Option<String>,
    pub nice: Option<i32>,
    pub priority: Option<u32>,
    /// `-I[secs]`: give up on a new allocation not granted within secs.
    pub immediate: Option<u32>,
    /// `-K`: a task that exits non-zero ends the step.
    pub kill_on_bad_exit: bool,
    /// `-W secs`: end the step this long after its first task exits.
    pub wait_s: Option<u32>,
    /// `--pty`: task 0 on a pseudo-terminal, this terminal in raw mode.
    pub pty: bool,
    /// `--jobid`: run the step in this job (before SLURM_JOB_ID).
    pub jobid: Option<u32>,
    /// `--signal`: for an allocation srun or salloc creates.
    pub signal: Option<crate::wire::types::SignalSpec>,
    /// `--test-only`: only say when and where a new allocation would start.
    pub test_only: bool,
    /// `--multi-prog`: the command is a file of per-task programs.
    pub multi_prog: bool,
    /// salloc `--no-shell`: exit once granted, keeping the allocation.
    pub no_shell: bool,
    /// salloc `--bell`/`--no-bell`: ring when the allocation is granted.
    pub bell: Option<bool>,
    /// salloc `-K/--kill-command[=sig]`: signal the command if the
    /// allocation is revoked.
    pub kill_command: Option<i32>,
    /// `--reservation`, `-L`: checked by the controller for a new allocation.
    pub reservation: Option<String>,
    pub licenses: Option<String>,
    /// `--gres`, `--gpus*`, `-B`, `--hint`, `--cpu-bind`, `-m`, `--gpu-bind`
    /// and the rest, merged with their input variables by Slurm's rules:
    /// for a new allocation, and for the step.
    pub resources: crate::model::tres::ResourceRequest,
    /// The command line's resource options, before the environment's.
    pub(crate) res_cli: crate::cli::sbatch_args::ResLayer,
    /// `--mail-type`, `--mail-user`: for an allocation srun or salloc makes.
    pub mail_type: Option<u32>,
    pub mail_user: Option<String>,
    /// `-M`: must name this cluster.
    pub clusters: Option<String>,
    /// `--open-mode`: `Some(true)` append, `Some(false)` truncate.
    pub open_append: Option<bool>,
    pub verbose: u32,
    /// `--help`, `--usage`, `-V`: print it and do nothing else.
    pub info: Option<Info>,
    pub command: Vec<String>,
    pub warnings: Vec<String>,
}

/// What `--help`, `--usage` and `--version` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Info {
    Help,
    Usage,
    Version,
    /// `--gres=help` / `--hint=help`.
    Resource(crate::cli::sbatch_args::ResHelp),
}

/// `-i/--input`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Input {
    /// srun's stdin, copied to every task (Slurm's default).
    #[default]
    All,
    /// No task gets input.
    None,
    /// srun's stdin to this task only.
    Task(u32),
    /// A file on srun's host, copied to every task.
    File(String),
    /// A file name with `%` fields (`in.%t`): each task reads its own,
    /// opened on its node as the output files are.
    Pattern(String),
}

impl Input {
    fn parse(v: &str) -> Input {
        match v {
            "all" | "-" => Input::All,
            "none" => Input::None,
            _ => match v.parse() {
                Ok(t) => Input::Task(t),
                Err(_) if v.contains('%') => Input::Pattern(v.to_string()),
                Err(_) => Input::File(v.to_string()),
            },
        }
    }

    fn target(&self) -> StdinTarget {
        match self {
            Input::All | Input::File(_) => StdinTarget::All,
            Input::None | Input::Pattern(_) => StdinTarget::None,
            Input::Task(t) => StdinTarget::Task(*t),
        }
    }
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse_env(args, &std::env::vars().collect::<Vec<_>>()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message);
            return e.code;
        }
    };
    if let Some(info) = a.info {
        print_info(info, SRUN_USAGE, SRUN_HELP);
        return 0;
    }
    for w in &a.warnings {
        eprintln!("{w}");
    }
    super::block_on(async move {
        match step(a).await {
            Ok(code) => code,
            Err(e) => super::report("srun", &e),
        }
    })
}

/// Print what `--help`, `--usage` or `--version` asked for, to stdout.
pub(crate) fn print_info(info: Info, usage: &str, help: &str) {
    match info {
        Info::Help => print!("{help}"),
        Info::Usage => print!("{usage}"),
        Info::Version => println!("canopy {}", env!("CARGO_PKG_VERSION")),
        Info::Resource(crate::cli::sbatch_args::ResHelp::Hint) => {
            println!("{}", crate::cli::sbatch_args::HINT_HELP)
        }
        // Slurm lists the GRES plugins configured; without a readable
        // configuration the list is empty.
        Info::Resource(crate::cli::sbatch_args::ResHelp::Gres) => {
            let types = crate::config::Config::load(&crate::config::Config::locate(None))
                .map(|c| c.gres_types)
                .unwrap_or_default();
            println!("{}", crate::cli::sbatch_args::gres_help(&types))
        }
    }
}

const SRUN_USAGE: &str = "\
Usage: srun [-N nodes] [-n ntasks] [-c ncpus] [--ntasks-per-node=n] [-i in]
            [-o out] [-e err] [-l] [-u] [-p partition] [-t time] [-J name]
            [-D dir] [-w hosts] [-x hosts] [--mem=size] [--mem-per-cpu=size]
            [-A account] [-C features] [--exclusive] [--export=vars] [-H]
            [-b time] [-d dependency] [--nice[=adj]] [-I[secs]] [-K] [-W secs]
            [--jobid=id] [--pty] [--test-only] [--signal=[B:]sig[@secs]]
            executable [args...] | --multi-prog file
";

const SRUN_HELP: &str = "\
Usage: srun [OPTIONS...] executable [args...]

Run a parallel step: inside the allocation named by SLURM_JOB_ID, or in a new
allocation made for it and released when it ends.

  -n, --ntasks=n              number of tasks
  -N, --nodes=n               number of nodes
      --ntasks-per-node=n     tasks per node
  -c, --cpus-per-task=n       CPUs per task
  -w, --nodelist=hosts        nodes to run on
  -x, --exclude=hosts         nodes not to run on
  -o, --output=pattern        tasks' stdout file (%j %J %s %t %n %N %A %a %u %x %%)
  -e, --error=pattern         tasks' stderr file
  -i, --input=what            all, none, a task number, a file or a pattern
  -l, --label                 prefix each output line with its task number
  -u, --unbuffered            pass output on as it comes (always so in canopy)
  -D, --chdir=dir             tasks' working directory
      --export=ALL|NONE|vars  tasks' environment
  -K, --kill-on-bad-exit      a task exiting non-zero ends the step
  -W, --wait=secs             end the step secs after its first task exits
  -X, --disable-status        Ctrl-C goes straight to the tasks
      --quit-on-interrupt     one Ctrl-C ends the step
      --jobid=id              run in this job (instead of SLURM_JOB_ID's)
      --pty                   task 0 on a terminal; this one raw meanwhile
      --multi-prog            the executable is a file of per-task programs
      --test-only             only say when and where it would start
Resources (for the step, and for a new allocation; SLURM_* variables of the
same names are read too, so steps inherit what their job asked for):
      --gres=list             name[[:type]:count],... per node (--gres=help)
  -G, --gpus=[type:]n  --gpus-per-node=  --gpus-per-task=  --gpus-per-socket=
      --cpus-per-gpu=n  --mem-per-gpu=size  --gres-flags=enforce-binding|disable-binding
  -B, --extra-node-info=S[:C[:T]]  --sockets-per-node=n  --cores-per-socket=n
      --threads-per-core=n  --ntasks-per-socket=n  --ntasks-per-core=n
      --hint=compute_bound|memory_bound|[no]multithread  (--hint=help)
      --cpu-bind=spec  -m, --distribution=spec  --gpu-bind=spec
For a new allocation:
  -p, --partition=name  -t, --time=limit  -J, --job-name=name  --mem=size
  --mem-per-cpu=size  -A, --account=name  -C, --constraint=features
  --exclusive  -s, --oversubscribe  --comment=text  -H, --hold  -b, --begin=time
  -d, --dependency=list  --nice[=adj]  --priority=n  -I, --immediate[=secs]
  --signal=[B:]sig[@secs]  -Q, --quiet  -h, --help  --usage  -V, --version

Other Slurm srun options are accepted with a warning and ignored.
";

/// Run the step; returns srun's exit code.
async fn step(a: SrunArgs) -> Result<i32, CliError> {
    let mut c = Client::connect(None).await?;
    let cwd = match &a.chdir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?.display().to_string(),
    };
    // A missing input file is refused before anything is allocated.
    let input = match &a.input {
        Input::None | Input::Pattern(_) => None,
        Input::File(path) => match std::fs::File::open(path) {
            Ok(f) => Some(read_input(Box::new(f))),
            Err(e) => {
                eprintln!("srun: error: Could not open stdin file {path}: {e}");
                return Ok(1);
            }
        },
        // Reading /dev/null gives nothing: the tasks get it directly, with no
        // pipes and no frames (the usual case inside a batch script).
        Input::All | Input::Task(_) if stdin_is_null() => None,
        Input::All | Input::Task(_) => {
            stdin_readable().then(|| read_input(Box::new(std::io::stdin())))
        }
    };
    let target = match (&input, &a.input) {
        (None, _) => StdinTarget::None,
        // --pty: only task 0 has a terminal to read from.
        (Some(_), Input::All) if a.pty => StdinTarget::Task(0),
        (Some(_), i) => i.target(),
    };
    let gres = super::sbatch_args::request_names(&a.resources);
    if let Err(e) = super::sbatch_args::check_gres(&gres, &c.conf.gres_types) {
        eprintln!("srun: error: {e}");
        return Ok(1);
    }
    if let Some(Err(e)) = a
        .clusters
        .as_deref()
        .map(|l| super::check_clusters(l, &c.conf.cluster_name))
    {
        eprintln!("srun: error: {e}");
        return Ok(1);
    }
    if a.test_only {
        return test_only(&mut c, &a, &cwd, "srun").await;
    }
    // --multi-prog: the file is read and checked here, before any allocation.
    let multi_prog = match (a.multi_prog, a.command.first()) {
        (true, Some(file)) => match read_multi_prog(file, a.ntasks) {
            Ok(m) => Some(m),
            Err(lines) => {
                for line in lines {
                    eprintln!("srun: error: {line}");
                }
                return Ok(1);
            }
        },
        _ => None,
    };
    let (job_id, own_allocation) = match a.jobid.or_else(env_job_id) {
        Some(id) => (id, false),
        None => match allocate(&mut c, &a, &cwd, "srun").await? {
            Some(id) => (id, true),
            None => return Ok(1),
        },
    };
    let ip = c
        .local_ip()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let listener =
        crate::daemon::listen::bind(&std::net::SocketAddr::new(ip, 0).to_string()).await?;
    let io_addr = listener.local_addr()?.to_string();
    let token: u64 = crate::daemon::new_boot_id();
    let start_time = chrono::Utc::now().timestamp();
    // Caught from before the launch: a signal that comes while the tasks
    // start is forwarded once they are linked, not lost.
    let signals = catch_signals(if a.pty { PTY_SIGNALS } else { &[] });
    let req = StepRequest {
        job_id,
        nodes: a.nodes,
        ntasks: a.ntasks,
        ntasks_per_node: a.ntasks_per_node,
        cpus_per_task: a.cpus_per_task,
        // -J names the step; otherwise its program does, as in Slurm.
        name: a.job_name.clone().unwrap_or_else(|| {
            a.command
                .first()
                .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
                .unwrap_or_default()
        }),
        argv: a.command.clone(),
        env: super::sbatch_args::export_env(
            a.export.as_deref(),
            &std::env::vars().collect::<Vec<_>>(),
        ),
        cwd,
        io_addr,
        io_token: token,
        stdout: a.output.clone(),
        stderr: a.error.clone(),
        stdin: target,
        nodelist: a.nodelist.clone(),
        exclude: a.exclude.clone(),
        srun_host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        srun_pid: std::process::id(),
        stdin_pattern: match &a.input {
            Input::Pattern(p) => Some(p.clone()),
            _ => None,
        },
        pty: a
            .pty
            .then(|| crate::exec::pty::size_of(&std::io::stdin()).unwrap_or_default()),
        multi_prog,
        // Slurm's default is to truncate; a batch job started with
        // --open-mode=append passes SLURM_OPEN_MODE=a on to its steps.
        open_append: a.open_append.unwrap_or_else(|| {
            std::env::var("SLURM_OPEN_MODE").is_ok_and(|m| m.starts_with(['a', 'A']))
        }),
        resources: a.resources.clone(),
    };
    let launched = match c.call(Body::LaunchStep(Box::new(req))).await {
        Ok(Body::StepLaunched(l)) => l,
        Ok(other) => return Err(CliError::Unexpected(other.kind())),
        Err(CliError::Refused(e)) => {
            use crate::wire::messages::ErrorCode;
            let about_job = matches!(
                e.code,
                ErrorCode::InvalidJobId | ErrorCode::AlreadyDone | ErrorCode::PermissionDenied
            );
            if about_job && !own_allocation {
                // Slurm's words for a job id that names no usable allocation.
                eprintln!(
                    "srun: error: Unable to confirm allocation for job {job_id}: {}",
                    e.message
                );
                eprintln!(
                    "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job {job_id}"
                );
            } else {
                for line in e.message.lines() {
                    eprintln!("srun: error: {line}");
                }
            }
            if own_allocation {
                release(
                    &mut c,
                    job_id,
                    0,
                    ExitStatus { code: 1, signal: 0 },
                    start_time,
                )
                .await;
            }
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    let session = Session {
        launched: &launched,
        token,
        label: a.label,
        target,
        interrupts: if a.quit_on_interrupt {
            Interrupts::Quit
        } else if a.disable_status {
            Interrupts::Forward
        } else {
            Interrupts::Status
        },
        kill_wait_s: c.conf.kill_wait_s,
        kill_on_bad_exit: a.kill_on_bad_exit,
        wait_s: a.wait_s,
        pty: a.pty,
    };
    let auth = c.signer();
    // Keys go to the task's terminal as typed, until the step ends.
    let raw = a.pty.then(super::terminal::RawMode::enter).flatten();
    let exit = session.run(listener, auth, input, signals, &mut c).await;
    drop(raw);
    let done = StepComplete {
        job_id,
        step_id: launched.step_id,
        exit: exit.worst,
        start_time,
        release: own_allocation,
    };
    let _ = c.call(Body::StepComplete(done)).await;
    Ok(exit.code)
}

#[cfg(test)]
mod tests;
