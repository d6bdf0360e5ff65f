//! srun's and salloc's command line: the option tables they share and their own ones,
//! which options canopy honours, and getopt-driven parsing into [`SrunArgs`], with Slurm's
//! error lines.
//!
//! Does not: talk to the controller or start anything; `alloc` and the parent module
//! act on what is parsed here.

use super::*;
use crate::cli::sbatch_args;

/// Options srun and salloc share (Slurm 22.05's tables); the action is the
/// long name (see `set`). Options canopy does not act on are accepted with a
/// warning, so scripts written for Slurm keep running.
pub(super) const COMMON: &[OptSpec<&str>] = &[
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
pub(super) const SRUN_ONLY: &[OptSpec<&str>] = &[
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
pub(super) const SALLOC_ONLY: &[OptSpec<&str>] = &[
    spec("bell", None, Flag, "bell"),
    spec("get-user-env", None, Optional, "get-user-env"),
    spec("kill-command", Some('K'), Optional, "kill-command"),
    spec("no-bell", None, Flag, "no-bell"),
    spec("no-shell", None, Flag, "no-shell"),
    spec("wait-all-nodes", None, Required, "wait-all-nodes"),
];

pub(super) static SRUN_OPTIONS: std::sync::LazyLock<Vec<OptSpec<&str>>> =
    std::sync::LazyLock::new(|| [COMMON, SRUN_ONLY].concat());
pub(super) static SALLOC_OPTIONS: std::sync::LazyLock<Vec<OptSpec<&str>>> =
    std::sync::LazyLock::new(|| [COMMON, SALLOC_ONLY].concat());

/// Options canopy honours; the rest only warn.
pub(super) const HONOURED: &[&str] = &[
    // The resource options (`sbatch_args::RES_OPTIONS`) are handled before
    // this list is consulted.
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
    "oversubscribe",
    "partition",
    "priority",
    "pty",
    "qos",
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

pub(super) fn fatal(message: String) -> OptError {
    OptError { message, code: 255 }
}

pub(super) fn num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("srun: error: Invalid numeric value \"{v}\" for --{opt}."))
}

pub(super) fn set(a: &mut SrunArgs, opt: &str, value: Option<&str>) -> Result<(), OptError> {
    let v = value.unwrap_or_default();
    match opt {
        "help" => a.info = a.info.or(Some(Info::Help)),
        "usage" => a.info = a.info.or(Some(Info::Usage)),
        "version" => a.info = a.info.or(Some(Info::Version)),
        "hold" => a.hold = true,
        "begin" => {
            let now = chrono::Utc::now().timestamp();
            a.begin_time = match crate::cli::sacct_args::parse_slurm_time(
                v,
                now,
                &chrono::Local,
                crate::cli::sacct_args::Tense::Future,
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
            a.nice = Some(crate::cli::sbatch_args::parse_nice(value).map_err(|_| {
                fatal("srun: error: Invalid --nice value, out of range (+/- 2147483645)".into())
            })?)
        }
        "priority" => {
            a.priority = Some(
                crate::cli::sbatch_args::parse_priority(v)
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
                crate::cli::sbatch_args::parse_warn_signal(v)
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
        _ if sbatch_args::RES_OPTIONS.contains(&opt) => {
            match sbatch_args::apply_res(&mut a.res_cli, opt, v) {
                Ok(None) => {}
                // Slurm prints help at once, whatever else is given.
                Ok(Some(help)) => a.info = a.info.or(Some(Info::Resource(help))),
                Err(e) => return Err(format!("srun: {e}").into()),
            }
        }
        "multi-prog" => a.multi_prog = true,
        "no-shell" => a.no_shell = true,
        "bell" => a.bell = Some(true),
        "no-bell" => a.bell = Some(false),
        "kill-command" => {
            a.kill_command = Some(match value {
                None => nix::sys::signal::Signal::SIGTERM as i32,
                Some(s) => crate::cli::scancel::parse_signal(s).ok_or_else(|| {
                    fatal("srun: error: Invalid --kill-command specification".into())
                })?,
            })
        }
        "export" => a.export = Some(v.to_string()),
        "account" => a.account = Some(v.to_string()),
        "qos" => a.qos = Some(v.to_string()),
        "constraint" => a.constraint = Some(v.to_string()),
        "comment" => a.comment = Some(v.to_string()),
        // Steps inside an allocation already get CPUs of their own.
        "exclusive" => {
            a.exclusive = true;
            a.oversubscribe = false;
        }
        "oversubscribe" => {
            a.oversubscribe = true;
            a.exclusive = false;
        }
        "mem-per-cpu" => {
            a.mem_per_cpu_mb = Some(
                crate::config::units::parse_mem_mb(v)
                    .map_err(|_| "srun: error: Invalid --mem-per-cpu specification".to_string())?,
            )
        }
        "verbose" => a.verbose += 1,
        _ if !HONOURED.contains(&opt) => {
            a.warnings.push(crate::cli::unsupported_option("srun", opt))
        }
        _ => {}
    }
    Ok(())
}

/// Parse srun's command line: options (`--k=v`, `--k v`, `-kv`, `-k v`,
/// unique prefixes) up to the first non-option, which starts the command.
/// No input variables are read (see [`parse_env`]).
pub fn parse(args: &[String]) -> Result<SrunArgs, OptError> {
    parse_env(args, &[])
}

/// [`parse`] with srun's input variables (`SLURM_GPUS_PER_NODE`...) taken
/// from `env`, below the command line.
pub fn parse_env(args: &[String], env: &[(String, String)]) -> Result<SrunArgs, OptError> {
    let a = parse_options_env(args, "srun", env)?;
    if a.command.is_empty() && a.info.is_none() {
        return Err("srun: fatal: No command given to execute.".into());
    }
    Ok(a)
}

/// The options and the command (possibly empty: salloc runs a shell then),
/// with `prog`'s (srun's or salloc's) option table and name in messages and
/// its input variables read from `env`.
pub(crate) fn parse_options_env(
    args: &[String],
    prog: &'static str,
    env: &[(String, String)],
) -> Result<SrunArgs, OptError> {
    parse_table(args, prog)
        .and_then(|a| settle_resources(a, prog, env))
        .map_err(|mut e| {
            if prog != "srun" {
                e.message = e
                    .message
                    .replace("srun:", &format!("{prog}:"))
                    .replace("\"srun --help\"", &format!("\"{prog} --help\""));
            }
            e
        })
}

/// The resource options: the environment's under the command line's, by
/// Slurm's rules (the three memory options, `--hint`'s rivals), and srun's
/// `--threads-per-core` default binding.
fn settle_resources(
    mut a: SrunArgs,
    prog: &'static str,
    env: &[(String, String)],
) -> Result<SrunArgs, OptError> {
    let table = if prog == "salloc" {
        sbatch_args::SALLOC_ENV
    } else {
        sbatch_args::SRUN_ENV
    };
    let mut from_env = sbatch_args::ResLayer::default();
    for &(var, long) in table {
        let Some(value) = env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
        else {
            continue;
        };
        match sbatch_args::apply_res(&mut from_env, long, value) {
            // Help asked for in a variable is not a request to act on.
            Ok(_) => {}
            Err(e) => return Err(format!("srun: {e}").into()),
        }
    }
    // Only --mem-per-gpu is read from the environment by canopy's srun, so
    // only the command line can hold two memory kinds.
    let cli = sbatch_args::MemKinds {
        mem: a.mem_mb.is_some(),
        per_cpu: a.mem_per_cpu_mb.is_some(),
        per_gpu: a.res_cli.mem_per_gpu_mb.is_some(),
    };
    let envk = sbatch_args::MemKinds {
        per_gpu: from_env.mem_per_gpu_mb.is_some(),
        ..Default::default()
    };
    let mem_from_cli =
        sbatch_args::settle_memory(cli, envk).map_err(|e| fatal(format!("srun: {e}")))?;
    let (mut req, note) = sbatch_args::resolve_resources(
        std::mem::take(&mut a.res_cli),
        from_env,
        Default::default(),
        mem_from_cli,
        prog,
    );
    // srun binds to threads by default when --threads-per-core is given.
    if prog == "srun" && req.threads_per_core.is_some() {
        match req.cpu_bind.as_deref() {
            None => req.cpu_bind = Some("threads".into()),
            Some(b) if b.eq_ignore_ascii_case("verbose") => {
                req.cpu_bind = Some("threads,verbose".into())
            }
            Some(_) => {}
        }
    }
    if let Some(note) = note.filter(|_| a.verbose > 0) {
        a.warnings.push(note);
    }
    a.resources = req;
    Ok(a)
}

pub(super) fn parse_table(args: &[String], prog: &'static str) -> Result<SrunArgs, OptError> {
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
