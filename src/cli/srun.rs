//! `srun`: run a parallel step. Inside an allocation (found through
//! `SLURM_JOB_ID`/`SLURM_JOBID` alone) it launches a step of that job;
//! outside one it first creates an allocation, runs the step in it, and
//! releases it. Task output is streamed back as it is produced: node daemons
//! connect to a listener srun opens, and report every task's exit status.
//! The same links carry srun's standard input and forwarded signals down.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
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
    pub constraint: Option<String>,
    pub exclusive: bool,
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
    /// `--gres`, `--gpus*`: the names asked for (checked against GresTypes).
    pub gres: Vec<String>,
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

/// Options srun and salloc share (Slurm 22.05's tables); the action is the
/// long name (see `set`). Options canopy does not act on are accepted with a
/// warning, so scripts written for Slurm keep running.
const COMMON: &[OptSpec<&str>] = &[
    spec("account", Some('A'), Required, "account"),
    spec("acctg-freq", None, Required, "acctg-freq"),
    spec("bb", None, Required, "bb"),
    spec("bbf", None, Required, "bbf"),
    spec("begin", Some('b'), Required, "begin"),
    spec("chdir", Some('D'), Required, "chdir"),
    spec("cluster-constraint", None, Required, "cluster-constraint"),
    spec("clusters", Some('M'), Required, "clusters"),
    spec("comment", None, Required, "comment"),
    spec("constraint", Some('C'), Required, "constraint"),
    spec("container", None, Required, "container"),
    spec("contiguous", None, Flag, "contiguous"),
    spec("core-spec", Some('S'), Required, "core-spec"),
    spec("cores-per-socket", None, Required, "cores-per-socket"),
    spec("cpu-freq", None, Required, "cpu-freq"),
    spec("cpus-per-gpu", None, Required, "cpus-per-gpu"),
    spec("cpus-per-task", Some('c'), Required, "cpus-per-task"),
    spec("deadline", None, Required, "deadline"),
    spec("delay-boot", None, Required, "delay-boot"),
    spec("dependency", Some('d'), Required, "dependency"),
    spec("distribution", Some('m'), Required, "distribution"),
    spec("exclude", Some('x'), Required, "exclude"),
    spec("exclusive", None, Optional, "exclusive"),
    spec("extra-node-info", Some('B'), Required, "extra-node-info"),
    spec("gid", None, Required, "gid"),
    spec("gpu-bind", None, Required, "gpu-bind"),
    spec("gpu-freq", None, Required, "gpu-freq"),
    spec("gpus", Some('G'), Required, "gpus"),
    spec("gpus-per-node", None, Required, "gpus-per-node"),
    spec("gpus-per-socket", None, Required, "gpus-per-socket"),
    spec("gpus-per-task", None, Required, "gpus-per-task"),
    spec("gres", None, Required, "gres"),
    spec("gres-flags", None, Required, "gres-flags"),
    spec("help", Some('h'), Flag, "help"),
    spec("hint", None, Required, "hint"),
    spec("hold", Some('H'), Flag, "hold"),
    spec("immediate", Some('I'), Optional, "immediate"),
    spec("job-name", Some('J'), Required, "job-name"),
    spec("licenses", Some('L'), Required, "licenses"),
    spec("mail-type", None, Required, "mail-type"),
    spec("mail-user", None, Required, "mail-user"),
    spec("mcs-label", None, Required, "mcs-label"),
    spec("mem", None, Required, "mem"),
    spec("mem-bind", None, Required, "mem-bind"),
    spec("mem-per-cpu", None, Required, "mem-per-cpu"),
    spec("mem-per-gpu", None, Required, "mem-per-gpu"),
    spec("mincpus", None, Required, "mincpus"),
    spec("network", None, Required, "network"),
    spec("nice", None, Optional, "nice"),
    spec("no-kill", Some('k'), Optional, "no-kill"),
    spec("nodefile", Some('F'), Required, "nodefile"),
    spec("nodelist", Some('w'), Required, "nodelist"),
    spec("nodes", Some('N'), Required, "nodes"),
    spec("ntasks", Some('n'), Required, "ntasks"),
    spec("ntasks-per-core", None, Required, "ntasks-per-core"),
    spec("ntasks-per-gpu", None, Required, "ntasks-per-gpu"),
    spec("ntasks-per-node", None, Required, "ntasks-per-node"),
    spec("ntasks-per-socket", None, Required, "ntasks-per-socket"),
    spec("overcommit", Some('O'), Flag, "overcommit"),
    spec("oversubscribe", Some('s'), Flag, "oversubscribe"),
    spec("partition", Some('p'), Required, "partition"),
    spec("power", None, Required, "power"),
    spec("prefer", None, Required, "prefer"),
    spec("priority", None, Required, "priority"),
    spec("profile", None, Required, "profile"),
    spec("qos", Some('q'), Required, "qos"),
    spec("quiet", Some('Q'), Flag, "quiet"),
    spec("reboot", None, Flag, "reboot"),
    spec("reservation", None, Required, "reservation"),
    spec("signal", None, Required, "signal"),
    spec("sockets-per-node", None, Required, "sockets-per-node"),
    spec("spread-job", None, Flag, "spread-job"),
    spec("switches", None, Required, "switches"),
    spec("thread-spec", None, Required, "thread-spec"),
    spec("threads-per-core", None, Required, "threads-per-core"),
    spec("time", Some('t'), Required, "time"),
    spec("time-min", None, Required, "time-min"),
    spec("tmp", None, Required, "tmp"),
    spec("uid", None, Required, "uid"),
    spec("usage", None, Flag, "usage"),
    spec("use-min-nodes", None, Flag, "use-min-nodes"),
    spec("verbose", Some('v'), Flag, "verbose"),
    spec("version", Some('V'), Flag, "version"),
    spec("wckey", None, Required, "wckey"),
    spec("x11", None, Optional, "x11"),
];

/// srun's own options: the step's I/O, layout and launch.
const SRUN_ONLY: &[OptSpec<&str>] = &[
    spec("bcast", None, Optional, "bcast"),
    spec("bcast-exclude", None, Required, "bcast-exclude"),
    spec("compress", None, Optional, "compress"),
    spec("cpu-bind", None, Required, "cpu-bind"),
    spec("disable-status", Some('X'), Flag, "disable-status"),
    spec("epilog", None, Required, "epilog"),
    spec("error", Some('e'), Required, "error"),
    spec("exact", None, Flag, "exact"),
    spec("export", None, Required, "export"),
    spec("het-group", None, Required, "het-group"),
    spec("input", Some('i'), Required, "input"),
    spec("jobid", None, Required, "jobid"),
    spec("kill-on-bad-exit", Some('K'), Optional, "kill-on-bad-exit"),
    spec("label", Some('l'), Flag, "label"),
    spec("mpi", None, Required, "mpi"),
    spec("multi-prog", None, Flag, "multi-prog"),
    spec("no-allocate", Some('Z'), Flag, "no-allocate"),
    spec("open-mode", None, Required, "open-mode"),
    spec("output", Some('o'), Required, "output"),
    spec("overlap", None, Flag, "overlap"),
    spec("preserve-env", Some('E'), Flag, "preserve-env"),
    spec("prolog", None, Required, "prolog"),
    spec("propagate", None, Optional, "propagate"),
    spec("pty", None, Flag, "pty"),
    spec("quit-on-interrupt", None, Flag, "quit-on-interrupt"),
    spec("relative", Some('r'), Required, "relative"),
    spec("resv-ports", None, Optional, "resv-ports"),
    spec("send-libs", None, Optional, "send-libs"),
    spec("slurmd-debug", None, Required, "slurmd-debug"),
    spec("task-epilog", None, Required, "task-epilog"),
    spec("task-prolog", None, Required, "task-prolog"),
    spec("test-only", None, Flag, "test-only"),
    spec("threads", Some('T'), Required, "threads"),
    spec("unbuffered", Some('u'), Flag, "unbuffered"),
    spec("wait", Some('W'), Required, "wait"),
    spec("whole", None, Flag, "whole"),
];

/// salloc's own options.
const SALLOC_ONLY: &[OptSpec<&str>] = &[
    spec("bell", None, Flag, "bell"),
    spec("get-user-env", None, Optional, "get-user-env"),
    spec("kill-command", Some('K'), Optional, "kill-command"),
    spec("no-bell", None, Flag, "no-bell"),
    spec("no-shell", None, Flag, "no-shell"),
    spec("wait-all-nodes", None, Required, "wait-all-nodes"),
];

static SRUN_OPTIONS: std::sync::LazyLock<Vec<OptSpec<&str>>> =
    std::sync::LazyLock::new(|| [COMMON, SRUN_ONLY].concat());
static SALLOC_OPTIONS: std::sync::LazyLock<Vec<OptSpec<&str>>> =
    std::sync::LazyLock::new(|| [COMMON, SALLOC_ONLY].concat());

/// Options canopy honours; the rest only warn.
const HONOURED: &[&str] = &[
    "account",
    "begin",
    "bell",
    "chdir",
    "comment",
    "constraint",
    "cpu-bind",
    "cpus-per-task",
    "dependency",
    "disable-status",
    "error",
    "exact",
    "exclude",
    "exclusive",
    "export",
    "help",
    "hold",
    "immediate",
    "input",
    "job-name",
    "jobid",
    "kill-command",
    "kill-on-bad-exit",
    "label",
    "mem",
    "mem-per-cpu",
    "mpi",
    "multi-prog",
    "nice",
    "no-bell",
    "no-shell",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "output",
    "overlap",
    "partition",
    "priority",
    "pty",
    "quiet",
    "quit-on-interrupt",
    "reservation",
    "licenses",
    "mail-type",
    "mail-user",
    "clusters",
    "open-mode",
    // Steps are not confined to part of a node yet: every step has it whole.
    "whole",
    "signal",
    "test-only",
    "time",
    "unbuffered",
    "usage",
    "verbose",
    "version",
    "wait",
];

/// A command line srun or salloc refuses: the message and the exit status
/// (Slurm exits 255 where getopt or an option's check fails, 1 elsewhere).
#[derive(Debug, Clone, PartialEq)]
pub struct OptError {
    pub message: String,
    pub code: i32,
}

impl From<String> for OptError {
    fn from(message: String) -> Self {
        OptError { message, code: 1 }
    }
}

impl From<&str> for OptError {
    fn from(message: &str) -> Self {
        OptError::from(message.to_string())
    }
}

fn fatal(message: String) -> OptError {
    OptError { message, code: 255 }
}

fn num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("srun: error: Invalid numeric value \"{v}\" for --{opt}."))
}

fn set(a: &mut SrunArgs, opt: &str, value: Option<&str>) -> Result<(), OptError> {
    let v = value.unwrap_or_default();
    match opt {
        "help" => a.info = a.info.or(Some(Info::Help)),
        "usage" => a.info = a.info.or(Some(Info::Usage)),
        "version" => a.info = a.info.or(Some(Info::Version)),
        "hold" => a.hold = true,
        "begin" => {
            let now = chrono::Utc::now().timestamp();
            a.begin_time = match super::sacct_args::parse_slurm_time(
                v,
                now,
                &chrono::Local,
                super::sacct_args::Tense::Future,
            ) {
                Ok(Some(t)) => Some(t),
                _ => {
                    return Err(fatal(format!(
                        "Invalid time specification (pos=0): {v}\nsrun: error: Invalid --begin specification"
                    )))
                }
            }
        }
        "dependency" => a.dependency = Some(v.to_string()),
        "nice" => {
            a.nice = Some(super::sbatch_args::parse_nice(value).map_err(|_| {
                fatal("srun: error: Invalid --nice value, out of range (+/- 2147483645)".into())
            })?)
        }
        "priority" => {
            a.priority = Some(
                super::sbatch_args::parse_priority(v)
                    .map_err(|e| fatal(e.to_string().replacen("sbatch:", "srun:", 1)))?,
            )
        }
        // Bare -I: granted at once or not at all.
        "immediate" => {
            a.immediate = Some(match value {
                None => 0,
                Some(v) => v.parse().map_err(|_| {
                    format!("srun: error: Invalid numeric value \"{v}\" for immediate.")
                })?,
            })
        }
        "kill-on-bad-exit" => a.kill_on_bad_exit = value.is_none_or(|v| v.trim() != "0"),
        "wait" => a.wait_s = Some(num(opt, v)?).filter(|&s| s > 0),
        "ntasks" => a.ntasks = Some(num(opt, v)?),
        // min[-max]: canopy uses the minimum.
        "nodes" => a.nodes = Some(num(opt, v.split('-').next().unwrap_or(v))?),
        "ntasks-per-node" => a.ntasks_per_node = Some(num(opt, v)?),
        "cpus-per-task" => a.cpus_per_task = Some(num(opt, v)?),
        "output" => a.output = Some(v.to_string()),
        "error" => a.error = Some(v.to_string()),
        "job-name" => a.job_name = Some(v.to_string()),
        "partition" => a.partition = Some(v.to_string()),
        "time" => {
            a.time_limit_min = match crate::config::units::parse_time_limit_min(v) {
                Ok(Some(m)) => Some(m),
                Ok(None) => Some(0),
                Err(_) => return Err("srun: error: Invalid --time specification".into()),
            }
        }
        "mem" => {
            a.mem_mb = Some(
                crate::config::units::parse_mem_mb(v)
                    .map_err(|_| "srun: error: Invalid --mem specification".to_string())?,
            )
        }
        "chdir" => a.chdir = Some(v.to_string()),
        "label" => a.label = true,
        "quiet" => a.quiet = true,
        "nodelist" => a.nodelist = Some(v.to_string()),
        "exclude" => a.exclude = Some(v.to_string()),
        "input" => a.input = Input::parse(v),
        "disable-status" => a.disable_status = true,
        "quit-on-interrupt" => a.quit_on_interrupt = true,
        "pty" => a.pty = true,
        "jobid" => a.jobid = Some(num(opt, v)?),
        "signal" => {
            a.signal = Some(
                super::sbatch_args::parse_warn_signal(v)
                    .map_err(|_| fatal("srun: error: Invalid --signal specification".into()))?,
            )
        }
        "test-only" => a.test_only = true,
        "reservation" => a.reservation = Some(v.to_string()),
        "mail-type" => {
            a.mail_type =
                Some(crate::mail::parse_mail_type(v).ok_or_else(|| {
                    fatal("srun: error: Invalid --mail-type specification".into())
                })?)
        }
        "mail-user" => a.mail_user = Some(v.to_string()),
        "clusters" => a.clusters = Some(v.to_string()),
        "open-mode" => {
            a.open_append = match v.chars().next() {
                Some('a' | 'A') => Some(true),
                Some('t' | 'T') => Some(false),
                _ => {
                    let w = format!("srun: error: Invalid --open-mode argument: {v}. Ignored");
                    a.warnings.push(w);
                    a.open_append
                }
            }
        }
        "licenses" => a.licenses = Some(v.to_string()),
        "gres" | "gpus" | "gpus-per-node" | "gpus-per-task" | "gpus-per-socket" => {
            a.gres.extend(super::sbatch_args::gres_names(opt, v));
            a.warnings.push(super::unsupported_option("srun", opt));
        }
        "multi-prog" => a.multi_prog = true,
        "no-shell" => a.no_shell = true,
        "bell" => a.bell = Some(true),
        "no-bell" => a.bell = Some(false),
        "kill-command" => {
            a.kill_command = Some(match value {
                None => nix::sys::signal::Signal::SIGTERM as i32,
                Some(s) => super::scancel::parse_signal(s).ok_or_else(|| {
                    fatal("srun: error: Invalid --kill-command specification".into())
                })?,
            })
        }
        "export" => a.export = Some(v.to_string()),
        "account" => a.account = Some(v.to_string()),
        "constraint" => a.constraint = Some(v.to_string()),
        "comment" => a.comment = Some(v.to_string()),
        // Steps inside an allocation already get CPUs of their own.
        "exclusive" => a.exclusive = true,
        "mem-per-cpu" => {
            a.mem_per_cpu_mb = Some(
                crate::config::units::parse_mem_mb(v)
                    .map_err(|_| "srun: error: Invalid --mem-per-cpu specification".to_string())?,
            )
        }
        "verbose" => a.verbose += 1,
        _ if !HONOURED.contains(&opt) => a.warnings.push(super::unsupported_option("srun", opt)),
        _ => {}
    }
    Ok(())
}

/// Parse srun's command line: options (`--k=v`, `--k v`, `-kv`, `-k v`,
/// unique prefixes) up to the first non-option, which starts the command.
pub fn parse(args: &[String]) -> Result<SrunArgs, OptError> {
    let a = parse_options(args, "srun")?;
    if a.command.is_empty() && a.info.is_none() {
        return Err("srun: fatal: No command given to execute.".into());
    }
    Ok(a)
}

/// The options and the command (possibly empty: salloc runs a shell then),
/// with `prog`'s (srun's or salloc's) option table and name in messages.
pub(crate) fn parse_options(args: &[String], prog: &'static str) -> Result<SrunArgs, OptError> {
    parse_table(args, prog).map_err(|mut e| {
        if prog != "srun" {
            e.message = e
                .message
                .replace("srun:", &format!("{prog}:"))
                .replace("\"srun --help\"", &format!("\"{prog} --help\""));
        }
        e
    })
}

fn parse_table(args: &[String], prog: &'static str) -> Result<SrunArgs, OptError> {
    let table: &'static [OptSpec<&str>] = if prog == "salloc" {
        &SALLOC_OPTIONS
    } else {
        &SRUN_OPTIONS
    };
    let mut a = SrunArgs::default();
    let mut i = 0;
    loop {
        match getopt::read_word(table, args, i, Ambiguity::Error) {
            Word::EndOfOptions => {
                i += 1;
                break;
            }
            Word::Positional => break,
            Word::Options {
                given,
                problem,
                next,
            } => {
                for g in given {
                    set(&mut a, g.spec.action, g.value.as_deref())?;
                }
                if let Some(p) = problem {
                    return Err(fatal(format!(
                        "{}\nTry \"srun --help\" for more information",
                        p.message("srun")
                    )));
                }
                i = next;
            }
        }
    }
    a.command = args[i.min(args.len())..].to_vec();
    Ok(a)
}

pub fn run(args: &[String]) -> i32 {
    let a = match parse(args) {
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
For a new allocation:
  -p, --partition=name  -t, --time=limit  -J, --job-name=name  --mem=size
  --mem-per-cpu=size  -A, --account=name  -C, --constraint=features
  --exclusive  --comment=text  -H, --hold  -b, --begin=time
  -d, --dependency=list  --nice[=adj]  --priority=n  -I, --immediate[=secs]
  --signal=[B:]sig[@secs]  -Q, --quiet  -h, --help  --usage  -V, --version

Other Slurm srun options are accepted with a warning and ignored.
";

fn env_job_id() -> Option<u32> {
    ["SLURM_JOB_ID", "SLURM_JOBID"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

/// Create an allocation for this srun (or salloc: `prog`) and wait until it
/// runs. `None`: a signal (Ctrl-C) came first and the request was withdrawn.
pub(crate) async fn allocate(
    c: &mut Client,
    a: &SrunArgs,
    cwd: &str,
    prog: &str,
) -> Result<Option<u32>, CliError> {
    let submit = allocation_request(a, cwd);
    let id = match c.call(Body::SubmitJob(Box::new(submit))).await {
        Ok(Body::SubmitReply(r)) => r.job_id,
        Ok(other) => return Err(CliError::Unexpected(other.kind())),
        // Slurm's wording: srun "Unable to allocate resources", salloc
        // "Job submit/allocate failed".
        Err(CliError::Refused(e)) if prog == "salloc" => {
            return Err(CliError::Usage(format!(
                "Job submit/allocate failed: {}",
                e.message
            )))
        }
        Err(CliError::Refused(e)) => {
            return Err(CliError::Usage(format!(
                "Unable to allocate resources: {}",
                e.message
            )))
        }
        Err(e) => return Err(e),
    };
    wait_for_grant(c, a, id, prog).await
}

/// The job an allocation srun or salloc makes is (also for `--test-only`).
fn allocation_request(a: &SrunArgs, cwd: &str) -> JobSubmit {
    let uid = nix::unistd::getuid().as_raw();
    let name = a
        .job_name
        .clone()
        .or_else(|| {
            a.command.first().map(|c| {
                std::path::Path::new(c)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_else(|| c.clone())
            })
        })
        // Slurm's name for `salloc --no-shell`.
        .unwrap_or_else(|| if a.no_shell { "no-shell" } else { "srun" }.into());
    JobSubmit {
        name,
        partition: a.partition.clone(),
        min_nodes: a.nodes,
        ntasks: a.ntasks,
        cpus_per_task: a.cpus_per_task,
        ntasks_per_node: a.ntasks_per_node,
        mem_per_node_mb: a.mem_mb,
        mem_per_cpu_mb: a.mem_per_cpu_mb.filter(|_| a.mem_mb.is_none()),
        account: a.account.clone(),
        constraint: a.constraint.clone(),
        comment: a.comment.clone(),
        exclusive: a.exclusive.then_some(crate::wire::types::Exclusive::Node),
        time_limit_min: a.time_limit_min,
        workdir: cwd.to_string(),
        submit_dir: cwd.to_string(),
        uid,
        gid: nix::unistd::getgid().as_raw(),
        submit_line: std::env::args().collect::<Vec<_>>().join(" "),
        command: a.command.join(" "),
        interactive: true,
        req_nodes: a.nodelist.clone(),
        exc_nodes: a.exclude.clone(),
        hold: a.hold,
        begin_time: a.begin_time,
        dependency: a.dependency.clone(),
        nice: a.nice.unwrap_or(0),
        priority: a.priority,
        signal: a.signal,
        test_only: a.test_only,
        reservation: a.reservation.clone(),
        licenses: a.licenses.clone(),
        mail_type: a.mail_type.unwrap_or(0),
        mail_user: a.mail_user.clone(),
        ..Default::default()
    }
}

/// `--test-only`: when and where the allocation would start; nothing is
/// queued (the job id is used up, as in Slurm).
async fn test_only(c: &mut Client, a: &SrunArgs, cwd: &str, prog: &str) -> Result<i32, CliError> {
    let submit = allocation_request(a, cwd);
    match c.call(Body::SubmitJob(Box::new(submit))).await {
        Ok(Body::SubmitReply(crate::wire::messages::SubmitReply {
            job_id,
            will_run: Some(w),
        })) => {
            eprintln!(
                "{prog}: Job {job_id} to start at {} using {} processors on nodes {} in partition {}",
                super::format::time::fmt_timestamp(Some(w.start_time)),
                w.cpus,
                w.nodes,
                w.partition
            );
            Ok(0)
        }
        Ok(other) => Err(CliError::Unexpected(other.kind())),
        Err(CliError::Refused(e)) => {
            eprintln!("allocation failure: {}", e.message);
            Ok(1)
        }
        Err(e) => Err(e),
    }
}

/// Wait until allocation `id` runs; `None` if it was withdrawn (`-I`, a
/// signal).
async fn wait_for_grant(
    c: &mut Client,
    a: &SrunArgs,
    id: u32,
    prog: &str,
) -> Result<Option<u32>, CliError> {
    if a.hold && !a.quiet {
        eprintln!("{prog}: Job is in held state, pending scheduler release");
    }
    let mut said = false;
    let give_up_at = a
        .immediate
        .map(|s| Instant::now() + Duration::from_secs(u64::from(s)));
    let mut signals = catch_signals(&[]);
    // Start fast (an idle cluster grants at once), back off for a busy one.
    let mut delay = Duration::from_millis(1);
    loop {
        let q = Body::QueryJobs(JobQuery {
            job_ids: vec![id],
            include_finished: true,
            brief: false,
        });
        let state = match c.call(q).await? {
            Body::Jobs(j) => j.rows().first().map(|j| j.state),
            other => return Err(CliError::Unexpected(other.kind())),
        };
        match state {
            Some(JobState::Running) => {
                if said && !a.quiet {
                    eprintln!("{prog}: job {id} has been allocated resources");
                }
                return Ok(Some(id));
            }
            Some(JobState::Pending) if give_up_at.is_some_and(|t| Instant::now() >= t) => {
                // -I: not granted in time; withdraw the request. The
                // controller scheduled it before answering the first query.
                cancel_request(c, id).await;
                let why = "Unable to allocate resources: Requested nodes are busy";
                if prog == "salloc" {
                    eprintln!("salloc: error: {why}");
                    eprintln!("salloc: Job allocation {id} has been revoked.");
                    return Ok(None);
                }
                return Err(CliError::Usage(why.into()));
            }
            Some(JobState::Pending) => {
                if !said && !a.quiet {
                    if prog == "salloc" {
                        eprintln!("salloc: Pending job allocation {id}");
                    }
                    eprintln!("{prog}: job {id} queued and waiting for resources");
                }
                said = true;
            }
            _ => {
                return Err(CliError::Usage(format!(
                    "job {id} ended before its allocation was granted"
                )))
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            Some(sig) = signals.recv() => {
                if matches!(sig, libc_sig::SIGCONT | libc_sig::SIGTSTP) {
                    continue;
                }
                // Withdraw the request rather than leave a job nobody will use.
                cancel_request(c, id).await;
                if prog == "salloc" {
                    eprintln!("salloc: Job allocation {id} has been revoked.");
                    eprintln!("salloc: Job aborted due to signal");
                } else {
                    eprintln!("srun: Job allocation {id} has been revoked");
                    eprintln!("srun: Force Terminated JobId={id}");
                }
                return Ok(None);
            }
        }
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// Withdraw an allocation request nobody will use.
async fn cancel_request(c: &mut Client, id: u32) {
    let cancel = Body::CancelJobs(crate::wire::messages::CancelRequest {
        job_ids: vec![id],
        signal: None,
        batch_only: false,
        exact: true,
    });
    let _ = c.call(cancel).await;
}

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
    if let Err(e) = super::sbatch_args::check_gres(&a.gres, &c.conf.gres_types) {
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
    let listener = TcpListener::bind((ip, 0)).await?;
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
    let auth = crate::daemon::authenticator(&c.conf)?;
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

/// Read and parse a `--multi-prog` file; errors are srun's lines.
/// With `-n`, it is also checked against that many tasks (without, the
/// controller checks it once it has laid the step out).
fn read_multi_prog(
    file: &str,
    ntasks: Option<u32>,
) -> Result<crate::wire::messages::MultiProg, Vec<String>> {
    let text = std::fs::read_to_string(file)
        .map_err(|_| vec![format!("Could not open multi_prog config file {file}")])?;
    let m = crate::exec::multiprog::parse(file, &text)?;
    if let Some(n) = ntasks {
        crate::exec::multiprog::check(&m, n)?;
    }
    Ok(m)
}

/// srun's stdin is /dev/null.
fn stdin_is_null() -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (Ok(me), Ok(null)) = (
        std::fs::metadata("/proc/self/fd/0"),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    me.file_type().is_char_device() && me.rdev() == null.rdev()
}

/// False when reading stdin would stop srun: it is a terminal and srun runs
/// in the background (the read would raise SIGTTIN).
fn stdin_readable() -> bool {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return true;
    }
    nix::unistd::tcgetpgrp(&stdin).is_ok_and(|fg| fg == nix::unistd::getpgrp())
}

/// Read `source` on a thread of its own (a blocking read of a terminal can
/// not be cancelled, and must not hold up srun's exit). An empty chunk marks
/// the end.
fn read_input(mut source: Box<dyn Read + Send>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match source.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.blocking_send(Vec::new());
    });
    rx
}

pub(crate) async fn release(
    c: &mut Client,
    job_id: u32,
    step_id: u32,
    exit: ExitStatus,
    start_time: i64,
) {
    let done = StepComplete {
        job_id,
        step_id,
        exit,
        start_time,
        release: true,
    };
    let _ = c.call(Body::StepComplete(done)).await;
}

enum Event {
    Hello {
        node: String,
        tasks: Vec<u32>,
        writer: Box<ConnWriter>,
    },
    Output(TaskOutput),
    Exit {
        task: u32,
        status: ExitStatus,
    },
    /// A node is killing the step (the job or the step was cancelled).
    Aborted,
    Closed,
}

/// True once the controller no longer runs `job_id`. A failed query (the
/// controller restarted, say) answers no, and the next call goes over a new
/// connection.
pub(crate) async fn job_ended(c: &mut Client, job_id: u32) -> bool {
    let q = Body::QueryJobs(JobQuery {
        job_ids: vec![job_id],
        include_finished: true,
        brief: true,
    });
    match c.call(q).await {
        Ok(Body::Jobs(j)) => j
            .into_rows()
            .first()
            .is_none_or(|j| j.state.is_finished() || j.state == JobState::Completing),
        Ok(_) => false,
        Err(_) => {
            if let Ok(fresh) = Client::connect(None).await {
                *c = fresh;
            }
            false
        }
    }
}

struct StepExit {
    /// srun's own exit code: the highest task exit code (128+signal if killed).
    code: i32,
    /// The task status recorded for accounting.
    worst: ExitStatus,
}

/// What Ctrl-C does (Slurm's three modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupts {
    /// Once: report task states; twice within a second: abort the step.
    Status,
    /// `-X`: forward SIGINT to the tasks.
    Forward,
    /// `--quit-on-interrupt`: abort at the first one.
    Quit,
}

/// How long srun gathers task exits before reporting them.
const EXIT_REPORT_DELAY: Duration = Duration::from_millis(20);

/// Signals srun handles itself; everything else listed is forwarded.
const HANDLED_SIGNALS: &[i32] = &[
    libc_sig::SIGINT,
    libc_sig::SIGTERM,
    libc_sig::SIGHUP,
    libc_sig::SIGQUIT,
    libc_sig::SIGUSR1,
    libc_sig::SIGUSR2,
    libc_sig::SIGALRM,
    libc_sig::SIGCONT,
    libc_sig::SIGTSTP,
];

/// Signal numbers, from nix so no libc dependency is needed.
mod libc_sig {
    use nix::sys::signal::Signal;
    pub const SIGINT: i32 = Signal::SIGINT as i32;
    pub const SIGTERM: i32 = Signal::SIGTERM as i32;
    pub const SIGHUP: i32 = Signal::SIGHUP as i32;
    pub const SIGQUIT: i32 = Signal::SIGQUIT as i32;
    pub const SIGUSR1: i32 = Signal::SIGUSR1 as i32;
    pub const SIGUSR2: i32 = Signal::SIGUSR2 as i32;
    pub const SIGALRM: i32 = Signal::SIGALRM as i32;
    pub const SIGCONT: i32 = Signal::SIGCONT as i32;
    pub const SIGTSTP: i32 = Signal::SIGTSTP as i32;
    pub const SIGKILL: i32 = Signal::SIGKILL as i32;
    pub const SIGWINCH: i32 = Signal::SIGWINCH as i32;
}

/// Caught as well with `--pty`: the terminal's size changed.
const PTY_SIGNALS: &[i32] = &[libc_sig::SIGWINCH];

/// Deliver every signal in `HANDLED_SIGNALS` and `extra` to one channel.
fn catch_signals(extra: &[i32]) -> mpsc::UnboundedReceiver<i32> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = mpsc::unbounded_channel();
    for &sig in HANDLED_SIGNALS.iter().chain(extra) {
        let Ok(mut stream) = signal(SignalKind::from_raw(sig)) else {
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(sig).is_err() {
                    return;
                }
            }
        });
    }
    rx
}

/// What srun sends down every node link, besides input.
#[derive(Debug, Clone, Copy)]
enum Down {
    Signal(i32),
    /// `--pty`: the terminal's new size.
    Resize(crate::wire::messages::WindowSize),
}

/// Where forwarded signals go: one queue per node link. Signals that come
/// before every node has linked up are kept and replayed to late links.
struct Links {
    queues: Vec<mpsc::UnboundedSender<Down>>,
    expected: usize,
    early: Vec<Down>,
}

impl Links {
    fn forward(&mut self, signal: i32) {
        self.send(Down::Signal(signal));
    }

    fn send(&mut self, msg: Down) {
        for q in &self.queues {
            let _ = q.send(msg);
        }
        if self.queues.len() < self.expected {
            self.early.push(msg);
        }
    }

    fn add(&mut self, queue: mpsc::UnboundedSender<Down>) {
        for &s in &self.early {
            let _ = queue.send(s);
        }
        self.queues.push(queue);
        if self.queues.len() == self.expected {
            self.early.clear();
        }
    }

    fn all_linked(&self) -> bool {
        self.queues.len() == self.expected
    }
}

/// Send what srun has for one node: signals first, then input.
async fn link_writer(
    mut w: ConnWriter,
    mut signals: mpsc::UnboundedReceiver<Down>,
    mut input: Option<mpsc::Receiver<Vec<u8>>>,
) {
    loop {
        let next_input = async {
            match input.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let body = tokio::select! {
            biased;
            s = signals.recv() => match s {
                Some(Down::Signal(signal)) => Body::SignalTasks { signal },
                Some(Down::Resize(size)) => Body::WindowChange(size),
                None => return,
            },
            d = next_input => match d {
                Some(data) => Body::StepStdin(StepStdin { data }),
                None => {
                    input = None;
                    continue;
                }
            },
        };
        if w.send(0, &body).await.is_err() {
            return;
        }
    }
}

/// Copy the input to every node that runs a task reading it, once all
/// nodes have linked up (so none misses the start).
async fn forward_input(
    mut source: mpsc::Receiver<Vec<u8>>,
    links: oneshot::Receiver<Vec<mpsc::Sender<Vec<u8>>>>,
) {
    let Ok(links) = links.await else { return };
    loop {
        let chunk = source.recv().await.unwrap_or_default();
        let end = chunk.is_empty();
        for l in &links {
            let _ = l.send(chunk.clone()).await;
        }
        if end {
            return;
        }
    }
}

/// Task ranks as Slurm writes them: `task 3` or `tasks 0-2,5`.
fn tasks_phrase(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    let noun = if ranks.len() == 1 { "task" } else { "tasks" };
    format!("{noun} {}", parts.join(","))
}

/// The error line for tasks that ended badly, or None for a clean exit.
fn exit_message(s: &ExitStatus) -> Option<String> {
    if s.signal != 0 {
        Some(crate::model::signal::signal_name(s.signal).to_string())
    } else if s.code != 0 {
        Some(format!("Exited with exit code {}", s.code))
    } else {
        None
    }
}

/// A step's I/O, signals and exits, from launch to the last task's exit.
struct Session<'a> {
    launched: &'a StepLaunched,
    token: u64,
    label: bool,
    target: StdinTarget,
    interrupts: Interrupts,
    kill_wait_s: u32,
    /// `-K`: the first task to exit badly ends the step.
    kill_on_bad_exit: bool,
    /// `-W`: the step ends this long after its first task exits.
    wait_s: Option<u32>,
    /// `--pty`: SIGWINCH resizes task 0's terminal.
    pty: bool,
}

/// Where Ctrl-C handling stands.
#[derive(Default)]
struct Abort {
    last_interrupt: Option<Instant>,
    /// Set once the step is being killed: srun waits until then at most.
    deadline: Option<tokio::time::Instant>,
    /// "Job step aborted" has been printed.
    said: bool,
}

impl Session<'_> {
    fn step_name(&self) -> String {
        format!("StepId={}.{}", self.launched.job_id, self.launched.step_id)
    }

    fn ntasks(&self) -> u32 {
        self.launched.tasks_per_node.iter().sum()
    }

    /// Kill every task now and wait a little for them to report.
    fn force_termination(&self, links: &mut Links, abort: &mut Abort) {
        if abort.deadline.is_some() {
            return;
        }
        super::terminal::restore();
        eprintln!("srun: forcing job termination");
        links.forward(libc_sig::SIGKILL);
        self.say_aborted(abort);
        let wait = self.kill_wait_s + 2;
        abort.deadline = Some(tokio::time::Instant::now() + Duration::from_secs(u64::from(wait)));
    }

    /// End the step through the controller, as srun's `-K` and `-W` do: the
    /// nodes note it and kill the tasks, whose exits then come in as usual.
    async fn terminate(&self, ctl: &mut Client) {
        let (job_id, step_id) = (self.launched.job_id, self.launched.step_id);
        super::terminal::restore();
        eprintln!("srun: launch/slurm: _step_signal: Terminating StepId={job_id}.{step_id}");
        let req = crate::wire::messages::StepCancel {
            job_id,
            step_id,
            signal: None,
            terminate: true,
        };
        match ctl.call(Body::CancelStep(req)).await {
            Ok(Body::CancelReply(r)) => {
                for msg in r.results.into_iter().filter_map(|(_, e)| e) {
                    eprintln!("srun: error: cannot end StepId={job_id}.{step_id}: {msg}");
                }
            }
            Ok(other) => eprintln!("srun: error: unexpected reply {}", other.kind()),
            Err(e) => eprintln!("srun: error: cannot end StepId={job_id}.{step_id}: {e}"),
        }
    }

    /// Slurm's line for a step being killed, once.
    fn say_aborted(&self, abort: &mut Abort) {
        if !abort.said {
            abort.said = true;
            super::terminal::restore();
            let wait = self.kill_wait_s + 2;
            eprintln!(
                "srun: Job step aborted: Waiting up to {wait} seconds for job step to finish."
            );
        }
    }

    /// Ctrl-C once: where every task stands.
    fn print_status(&self, exits: &HashMap<u32, ExitStatus>) {
        let mut groups: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        for t in 0..self.ntasks() {
            let state = match exits.get(&t) {
                None => 0,
                Some(s) if s.code == 0 && s.signal == 0 => 1,
                Some(_) => 2,
            };
            groups.entry(state).or_default().push(t);
        }
        for (state, ranks) in groups {
            let what = ["running", "exited", "exited abnormally"][usize::from(state)];
            eprintln!(
                "srun: {} {}: {what}",
                self.step_name(),
                tasks_phrase(&ranks)
            );
        }
    }

    /// React to a signal srun received. True: leave at once (third Ctrl-C).
    fn on_signal(
        &self,
        sig: i32,
        links: &mut Links,
        exits: &HashMap<u32, ExitStatus>,
        abort: &mut Abort,
    ) -> bool {
        match sig {
            libc_sig::SIGINT => {
                if abort.deadline.is_some() {
                    return true;
                }
                let again = abort
                    .last_interrupt
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(1));
                match self.interrupts {
                    Interrupts::Forward => links.forward(sig),
                    Interrupts::Status if !again => {
                        eprintln!("srun: interrupt (one more within 1 sec to abort)");
                        self.print_status(exits);
                        abort.last_interrupt = Some(Instant::now());
                    }
                    Interrupts::Status | Interrupts::Quit => {
                        eprintln!("srun: sending Ctrl-C to {}", self.step_name());
                        links.forward(sig);
                        self.force_termination(links, abort);
                    }
                }
            }
            libc_sig::SIGQUIT | libc_sig::SIGTERM | libc_sig::SIGHUP => {
                if sig == libc_sig::SIGQUIT {
                    eprintln!("srun: Quit");
                }
                self.force_termination(links, abort);
            }
            // Job control stays with srun: Ctrl-Z is ignored, as in Slurm.
            libc_sig::SIGTSTP | libc_sig::SIGCONT => {}
            libc_sig::SIGWINCH => {
                if self.pty {
                    let size = crate::exec::pty::size_of(&std::io::stdin()).unwrap_or_default();
                    links.send(Down::Resize(size));
                }
            }
            _ => links.forward(sig),
        }
        false
    }

    /// Print task output as it arrives, forward input and signals, and
    /// gather every task's exit.
    async fn run(
        &self,
        listener: TcpListener,
        auth: std::sync::Arc<crate::wire::auth::Authenticator>,
        input: Option<mpsc::Receiver<Vec<u8>>>,
        mut signals: mpsc::UnboundedReceiver<i32>,
        ctl: &mut Client,
    ) -> StepExit {
        let ntasks = self.ntasks();
        let width = ntasks.saturating_sub(1).to_string().len();
        let (tx, mut rx) = mpsc::channel::<Event>(1024);
        let (job_id, step_id, token) = (self.launched.job_id, self.launched.step_id, self.token);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut conn = Connection::new(stream, auth.clone(), 0);
                let tx = tx.clone();
                tokio::spawn(async move {
                    // The first frame must name this step and carry its token.
                    let hello = match conn.recv().await {
                        Ok(Some(env)) => match env.body {
                            Body::StepIoHello(h)
                                if h.token == token
                                    && h.job_id == job_id
                                    && h.step_id == step_id =>
                            {
                                h
                            }
                            _ => return,
                        },
                        _ => return,
                    };
                    let (mut reader, writer) = conn.into_split();
                    let hello = Event::Hello {
                        node: hello.node,
                        tasks: hello.tasks,
                        writer: Box::new(writer),
                    };
                    if tx.send(hello).await.is_err() {
                        return;
                    }
                    while let Ok(Some(env)) = reader.recv().await {
                        let ev = match env.body {
                            Body::TaskOutput(o) => Event::Output(o),
                            Body::TaskExit { task, status } => Event::Exit { task, status },
                            Body::StepAborted => Event::Aborted,
                            _ => continue,
                        };
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                    let _ = tx.send(Event::Closed).await;
                });
            }
        });
        let nodes = self.launched.tasks_per_node.len();
        // Input starts flowing once every node has linked up.
        let (links_tx, links_rx) = oneshot::channel();
        let mut links_tx = Some(links_tx);
        let mut input_links: Vec<mpsc::Sender<Vec<u8>>> = Vec::new();
        let forwarder = input.map(|source| tokio::spawn(forward_input(source, links_rx)));
        let mut writers = Vec::new();
        let mut links = Links {
            queues: Vec::new(),
            expected: nodes,
            early: Vec::new(),
        };
        let mut node_of: HashMap<u32, String> = HashMap::new();
        let mut partial: HashMap<(u32, bool), Vec<u8>> = HashMap::new();
        let mut exits: HashMap<u32, ExitStatus> = HashMap::new();
        // Exits not yet reported: printed a moment after the first of them,
        // so tasks that end together share one line.
        let mut unreported: Vec<(u32, ExitStatus)> = Vec::new();
        let mut report_at: Option<tokio::time::Instant> = None;
        let mut closed = 0usize;
        let mut abort = Abort::default();
        let mut left_early = false;
        // -W: when to end the step; -K: whether srun ended it.
        let mut wait_until: Option<tokio::time::Instant> = None;
        let mut killed_bad_exit = false;
        let write = |stderr: bool, bytes: &[u8]| {
            if stderr {
                let _ = std::io::stderr().write_all(bytes);
            } else {
                let mut o = std::io::stdout();
                let _ = o.write_all(bytes);
                let _ = o.flush();
            }
        };
        // A node that cannot reach us (or dies) would leave us waiting forever:
        // check now and then that the job itself is still running.
        let mut check = tokio::time::interval(Duration::from_secs(5));
        check.tick().await;
        while exits.len() < ntasks as usize {
            // Every node reported and all links are gone: nothing more can come.
            if links.all_linked() && closed == nodes {
                break;
            }
            let deadline = abort.deadline;
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                _ = async {
                    match report_at {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    report_exits(&mut unreported, &node_of);
                    report_at = None;
                    continue;
                }
                Some(sig) = signals.recv() => {
                    if self.on_signal(sig, &mut links, &exits, &mut abort) {
                        left_early = true;
                        break;
                    }
                    continue;
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => break,
                _ = async {
                    match wait_until {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    wait_until = None;
                    if let Some(w) = self.wait_s {
                        eprintln!("srun: First task exited {w}s ago");
                    }
                    self.print_status(&exits);
                    self.terminate(ctl).await;
                    continue;
                }
                _ = check.tick() => {
                    if job_ended(ctl, job_id).await {
                        eprintln!("srun: error: job {job_id} ended before every task reported");
                        break;
                    }
                    continue;
                }
            };
            let Some(ev) = ev else { break };
            match ev {
                Event::Hello {
                    node,
                    tasks,
                    writer,
                } => {
                    let (sig_tx, sig_rx) = mpsc::unbounded_channel();
                    let reads_input = tasks.iter().any(|&t| self.target.includes(t));
                    let input_rx = reads_input.then(|| {
                        let (in_tx, in_rx) = mpsc::channel(16);
                        input_links.push(in_tx);
                        in_rx
                    });
                    writers.push(tokio::spawn(link_writer(*writer, sig_rx, input_rx)));
                    for t in tasks {
                        node_of.insert(t, node.clone());
                    }
                    links.add(sig_tx);
                    if links.all_linked() {
                        if let Some(l) = links_tx.take() {
                            let _ = l.send(std::mem::take(&mut input_links));
                        }
                    }
                }
                Event::Closed => closed += 1,
                Event::Aborted => self.say_aborted(&mut abort),
                Event::Output(o) if self.label => {
                    // -l: prefix every complete line with the task rank.
                    let buf = partial.entry((o.task, o.stderr)).or_default();
                    buf.extend_from_slice(&o.data);
                    while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=nl).collect();
                        let mut out = format!("{:>width$}: ", o.task).into_bytes();
                        out.extend_from_slice(&line);
                        write(o.stderr, &out);
                    }
                }
                Event::Output(o) => write(o.stderr, &o.data),
                Event::Exit { task, status } => {
                    if self.pty && task == 0 {
                        // The terminal's session is over: srun's own lines
                        // that follow need it cooked again.
                        super::terminal::restore();
                    }
                    exits.insert(task, status);
                    unreported.push((task, status));
                    let bad = status.code != 0 || status.signal != 0;
                    if self.kill_on_bad_exit && bad && !killed_bad_exit && abort.deadline.is_none()
                    {
                        // The bad exit is reported first, then the step ended.
                        killed_bad_exit = true;
                        abort.said = true;
                        report_exits(&mut unreported, &node_of);
                        report_at = None;
                        self.terminate(ctl).await;
                        continue;
                    }
                    if exits.len() == 1 {
                        wait_until = self.wait_s.map(|w| {
                            tokio::time::Instant::now() + Duration::from_secs(u64::from(w))
                        });
                    }
                    report_at
                        .get_or_insert_with(|| tokio::time::Instant::now() + EXIT_REPORT_DELAY);
                }
            }
        }
        accept.abort();
        if let Some(f) = forwarder {
            f.abort();
        }
        for w in writers {
            w.abort();
        }
        report_exits(&mut unreported, &node_of);
        if killed_bad_exit {
            eprintln!("srun: Force Terminated {}", self.step_name());
        }
        for ((task, stderr), rest) in partial {
            if !rest.is_empty() {
                let mut out = format!("{task:>width$}: ").into_bytes();
                out.extend_from_slice(&rest);
                write(stderr, &out);
            }
        }
        let mut code = 0;
        let mut worst = ExitStatus::default();
        for s in exits.values() {
            let c = if s.signal != 0 {
                128 + s.signal
            } else {
                s.code
            };
            if c > code {
                code = c;
                worst = *s;
            }
        }
        if exits.len() < ntasks as usize {
            if !left_early {
                eprintln!(
                    "srun: error: {} of {ntasks} tasks did not report an exit status",
                    ntasks as usize - exits.len()
                );
            }
            code = code.max(1);
            worst = ExitStatus { code: 1, signal: 0 };
        }
        StepExit { code, worst }
    }
}

/// Print the exits gathered so far (see [`exit_lines`]).
fn report_exits(unreported: &mut Vec<(u32, ExitStatus)>, node_of: &HashMap<u32, String>) {
    for l in exit_lines(unreported, node_of) {
        eprintln!("{l}");
    }
}

/// `srun: error: <node>: tasks 0-1: Exited with exit code 3`: one line per
/// node and status among `unreported`, which is emptied.
fn exit_lines(
    unreported: &mut Vec<(u32, ExitStatus)>,
    node_of: &HashMap<u32, String>,
) -> Vec<String> {
    // (node, what happened) → the tasks it happened to, in rank order.
    let mut groups: BTreeMap<(&str, String), Vec<u32>> = BTreeMap::new();
    unreported.sort_by_key(|(t, _)| *t);
    for (task, s) in unreported.drain(..) {
        if let Some(what) = exit_message(&s) {
            let node = node_of.get(&task).map(String::as_str).unwrap_or("?");
            groups.entry((node, what)).or_default().push(task);
        }
    }
    let mut lines: Vec<(u32, String)> = groups
        .into_iter()
        .map(|((node, what), ranks)| {
            let line = format!("srun: error: {node}: {}: {what}", tasks_phrase(&ranks));
            (ranks[0], line)
        })
        .collect();
    lines.sort();
    lines.into_iter().map(|(_, l)| l).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<SrunArgs, OptError> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_end_at_the_command() {
        let a = p(&[
            "-n4",
            "-N",
            "2",
            "--label",
            "-c2",
            "--mpi=none",
            "hostname",
            "-n",
            "x",
        ])
        .unwrap();
        assert_eq!(
            (a.ntasks, a.nodes, a.cpus_per_task, a.label),
            (Some(4), Some(2), Some(2), true)
        );
        assert_eq!(a.command, vec!["hostname", "-n", "x"]);
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn submitit_invocation_parses() {
        let a = p(&[
            "--unbuffered",
            "--output",
            "/l/%j_%t_log.out",
            "--error",
            "/l/%j_%t_log.err",
            "python",
            "-u",
            "-m",
            "submitit.core._submit",
            "/l",
        ])
        .unwrap();
        assert_eq!(a.output.as_deref(), Some("/l/%j_%t_log.out"));
        assert_eq!(a.error.as_deref(), Some("/l/%j_%t_log.err"));
        assert_eq!(a.command[0], "python");
    }

    #[test]
    fn bad_input_is_refused_with_slurm_messages() {
        assert_eq!(
            p(&["--bogus", "x"]).unwrap_err(),
            OptError {
                message: "srun: unrecognized option '--bogus'\n\
                          Try \"srun --help\" for more information"
                    .into(),
                code: 255
            }
        );
        let e = p(&["-n", "x", "true"]).unwrap_err();
        assert!(e.message.contains("Invalid numeric value"), "{e:?}");
        assert!(p(&["-n"])
            .unwrap_err()
            .message
            .contains("requires an argument"));
        assert!(p(&["-l"]).unwrap_err().message.contains("No command given"));
        let a = p(&["--gres=gpu:1", "true"]).unwrap();
        assert_eq!(a.warnings.len(), 1);
        // Option checks as srun 22.05 words them.
        let e = p(&["-b", "garbage", "true"]).unwrap_err();
        assert_eq!(e.code, 255);
        assert!(e
            .message
            .ends_with("srun: error: Invalid --begin specification"));
        assert_eq!(
            p(&["--priority=-3", "true"]).unwrap_err().message,
            "srun: error: Priority must be >= 0"
        );
        assert_eq!(
            p(&["-Ix", "true"]).unwrap_err(),
            OptError {
                message: "srun: error: Invalid numeric value \"x\" for immediate.".into(),
                code: 1
            }
        );
        assert_eq!(
            p(&["-W", "x", "true"]).unwrap_err().message,
            "srun: error: Invalid numeric value \"x\" for --wait."
        );
    }

    #[test]
    fn every_slurm_option_is_known_with_its_argument_kind() {
        // Flags must not swallow the command; valued options must take theirs.
        let a = p(&[
            "--contiguous",
            "-O",
            "--multi-prog",
            "--gpus-per-task",
            "1",
            "-k",
            "--propagate",
            "hostname",
        ])
        .unwrap();
        assert_eq!(a.command, ["hostname"]);
        assert!(a.multi_prog);
        assert_eq!(a.warnings.len(), 5, "{:?}", a.warnings);
        assert_eq!(
            a.warnings[0],
            "srun: warning: option --contiguous is not supported by canopy yet; ignored"
        );
        // salloc has its own table: -K is --kill-command there, and srun's
        // I/O options are not salloc's.
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = parse_options(&args(&["-K", "--bell", "sleep", "1"]), "salloc").unwrap();
        assert!(!s.kill_on_bad_exit);
        assert_eq!(s.command, ["sleep", "1"]);
        let e = parse_options(&args(&["--label", "true"]), "salloc").unwrap_err();
        assert_eq!(
            e.message,
            "salloc: unrecognized option '--label'\nTry \"salloc --help\" for more information"
        );
    }

    #[test]
    fn allocation_step_and_informational_options() {
        let a = p(&[
            "-H",
            "-b",
            "now+60",
            "-d",
            "afterok:5",
            "--nice",
            "--priority=7",
            "-I",
            "-K",
            "-W",
            "3",
            "true",
        ])
        .unwrap();
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        assert!(a.hold && a.kill_on_bad_exit);
        let now = chrono::Utc::now().timestamp();
        assert!((now + 55..=now + 65).contains(&a.begin_time.unwrap()));
        assert_eq!(a.dependency.as_deref(), Some("afterok:5"));
        assert_eq!((a.nice, a.priority), (Some(100), Some(7)));
        assert_eq!((a.immediate, a.wait_s), (Some(0), Some(3)));
        assert_eq!(p(&["-I5", "true"]).unwrap().immediate, Some(5));
        assert!(
            !p(&["--kill-on-bad-exit=0", "true"])
                .unwrap()
                .kill_on_bad_exit
        );
        assert_eq!(p(&["-W0", "true"]).unwrap().wait_s, None);
        // --help needs no command, and wins over what else is given.
        assert_eq!(p(&["--help"]).unwrap().info, Some(Info::Help));
        assert_eq!(p(&["-V", "-n2"]).unwrap().info, Some(Info::Version));
        assert_eq!(p(&["--usage"]).unwrap().info, Some(Info::Usage));
    }

    #[test]
    fn allocation_and_environment_options_are_kept() {
        let a = p(&[
            "-A",
            "proj",
            "-C",
            "fast",
            "--exclusive",
            "--mem-per-cpu=2G",
            "--comment=c",
            "--export=NONE",
            "true",
        ])
        .unwrap();
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        assert_eq!(a.account.as_deref(), Some("proj"));
        assert_eq!(a.constraint.as_deref(), Some("fast"));
        assert!(a.exclusive);
        assert_eq!(a.mem_per_cpu_mb, Some(2048));
        assert_eq!(a.comment.as_deref(), Some("c"));
        assert_eq!(a.export.as_deref(), Some("NONE"));
    }

    #[test]
    fn input_node_and_interrupt_options() {
        let a = p(&["-w", "n[1-2]", "-x", "n3", "-i", "0", "-X", "cat"]).unwrap();
        assert_eq!(a.nodelist.as_deref(), Some("n[1-2]"));
        assert_eq!(a.exclude.as_deref(), Some("n3"));
        assert_eq!(a.input, Input::Task(0));
        assert!(a.disable_status && a.warnings.is_empty());
        assert_eq!(p(&["--input=none", "cat"]).unwrap().input, Input::None);
        assert_eq!(p(&["-i", "all", "cat"]).unwrap().input, Input::All);
        assert_eq!(
            p(&["-i", "in.txt", "cat"]).unwrap().input,
            Input::File("in.txt".into())
        );
        assert_eq!(
            p(&["-i", "in.%t", "cat"]).unwrap().input,
            Input::Pattern("in.%t".into())
        );
        assert_eq!(p(&["cat"]).unwrap().input, Input::All);
        assert!(
            p(&["--quit-on-interrupt", "cat"])
                .unwrap()
                .quit_on_interrupt
        );
    }

    #[test]
    fn task_ranks_read_as_slurm_writes_them() {
        assert_eq!(tasks_phrase(&[3]), "task 3");
        assert_eq!(tasks_phrase(&[0, 1]), "tasks 0-1");
        assert_eq!(tasks_phrase(&[0, 1, 2, 5, 7, 8]), "tasks 0-2,5,7-8");
    }

    #[test]
    fn exits_are_reported_per_node_and_status() {
        let node_of: HashMap<u32, String> = [(0, "n1"), (1, "n1"), (2, "n2")]
            .into_iter()
            .map(|(t, n)| (t, n.to_string()))
            .collect();
        let mut exits = vec![
            (1, ExitStatus { code: 3, signal: 0 }),
            (0, ExitStatus { code: 3, signal: 0 }),
            (2, ExitStatus { code: 0, signal: 0 }),
        ];
        exits.push((3, ExitStatus { code: 0, signal: 9 }));
        assert_eq!(
            exit_lines(&mut exits, &node_of),
            [
                "srun: error: n1: tasks 0-1: Exited with exit code 3",
                "srun: error: ?: task 3: Killed"
            ]
        );
        assert!(exits.is_empty());
        assert_eq!(
            exit_message(&ExitStatus { code: 0, signal: 9 }).as_deref(),
            Some("Killed")
        );
        assert_eq!(exit_message(&ExitStatus::default()), None);
    }

    #[test]
    fn layout_blocks_tasks_over_nodes() {
        use crate::ctld::step_layout;
        assert_eq!(step_layout(5, 2), vec![3, 2]);
        assert_eq!(step_layout(2, 4), vec![1, 1]);
        assert_eq!(step_layout(4, 4), vec![1, 1, 1, 1]);
    }
}
