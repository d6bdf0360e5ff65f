//! The command-line front end. `canopy` is multi-call: invoked as `sbatch`,
//! `squeue`, `sinfo`, `scancel` or `scontrol` (through links that
//! `canopy cluster up` creates) it behaves as that Slurm command;
//! `canopy <command> ...` works too, plus the operator commands
//! `canopy status` and `canopy cluster up|down`.

pub mod client;
pub mod cluster;
pub mod config_check;
pub mod debug;
pub mod events;
pub mod exec;
pub mod format;
pub mod getopt;
pub mod ping;
pub mod sacct;
pub mod sacct_args;
pub mod sacctmgr;
pub mod salloc;
pub mod sbatch;
pub mod sbatch_args;
pub mod scancel;
pub mod scontrol;
pub mod scontrol_node;
pub mod scontrol_resv;
pub mod sdiag;
pub mod sinfo;
pub mod sprio;
pub mod squeue;
pub mod srun;
pub mod sshare;
pub mod sstat;
pub mod stats;
pub mod status;
pub mod terminal;
pub mod top;
pub mod trace;
pub mod tree;

use std::future::Future;

use client::CliError;

/// The Slurm commands canopy answers to when invoked under their names.
pub const SLURM_COMMANDS: &[&str] = &[
    "sbatch", "squeue", "sinfo", "scancel", "scontrol", "sacct", "sdiag", "srun", "salloc",
    "sshare", "sprio", "sstat", "sacctmgr",
];

/// Whether a user-typed job id names a job: `N` names job N and every task
/// of array N; `N_T` (`task`) names only task T of array N. Shared by
/// squeue, sacct and scancel.
pub(crate) fn names_job(
    id: u32,
    task: Option<u32>,
    job_id: u32,
    array: Option<crate::wire::types::ArrayTask>,
) -> bool {
    match (task, array) {
        (None, Some(a)) => job_id == id || a.array_job_id == id,
        (None, None) => job_id == id,
        (Some(t), Some(a)) => a.array_job_id == id && a.task_id == t,
        (Some(_), None) => false,
    }
}

/// Log to stderr; `CANOPY_LOG` (an EnvFilter) overrides the -v level.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CANOPY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Run an async command body on a small current-thread runtime.
pub fn block_on<F: Future<Output = i32>>(f: F) -> i32 {
    // I/O and timers only: a CLI needs no signal or child-process driver,
    // and every command pays for whatever it starts here.
    match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("canopy: cannot start runtime: {e}");
            1
        }
    }
}

/// `-i/--iterate` of squeue and sinfo: a whole number of seconds, at least 1
/// (atoi-style, as Slurm reads it; the error is Slurm's `--iterate=VALUE`).
fn parse_iterate(v: &str) -> Result<u64, String> {
    let digits: String = v
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("--iterate={v}"))
}

/// squeue/sinfo `-i secs` as given (`None` without `-i`); a bad value is
/// reported as `prog` reports it, and its exit code returned.
pub(crate) fn iterate_option(prog: &str, arg: Option<&str>) -> Result<Option<u64>, i32> {
    arg.map(parse_iterate).transpose().map_err(|e| {
        eprintln!("{prog}: error: {e}\n");
        1
    })
}

/// squeue/sinfo `-i`: print the listing again every `secs` seconds until
/// interrupted, each followed by a blank line, as Slurm's do (the caller
/// turns the date line on). Returns the first failing listing's exit code.
pub(crate) async fn repeat_every<F, Fut>(secs: u64, mut once: F) -> i32
where
    F: FnMut() -> Fut,
    Fut: Future<Output = i32>,
{
    loop {
        let code = once().await;
        if code != 0 {
            return code;
        }
        println!();
        let _ = std::io::Write::flush(&mut std::io::stdout());
        tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
    }
}

/// The warning for a real Slurm option canopy accepts but does not act on.
pub fn unsupported_option(cmd: &str, long: &str) -> String {
    format!("{cmd}: warning: option --{long} is not supported by canopy yet; ignored")
}

/// `-M/--clusters LIST`: canopy runs one cluster, so the list must name it
/// (or be `all`); the error is Slurm's for a cluster it cannot reach.
pub fn check_clusters(list: &str, ours: &str) -> Result<(), String> {
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name != ours && !name.eq_ignore_ascii_case("all") {
            return Err(format!(
                "'{name}' can't be reached now, or it is an invalid entry for --cluster.  \
                 Use 'sacctmgr list clusters' to see available clusters."
            ));
        }
    }
    Ok(())
}

/// Print a CLI error the way the named Slurm command would, and return its exit code.
pub fn report(cmd: &str, e: &CliError) -> i32 {
    eprintln!("{cmd}: error: {e}");
    1
}

/// Rust starts programs with SIGPIPE ignored, so `squeue | head` would
/// fail on a print and panic. Slurm's commands, like any C program, just end
/// quietly; so do these. Sockets are unaffected: Rust sends with MSG_NOSIGNAL.
fn restore_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: installs the default disposition before any thread exists; no
    // handler code runs.
    if let Err(e) = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) } {
        tracing::debug!(error = %e, "could not restore SIGPIPE");
    }
}

/// Entry point of the `canopy` binary; returns the process exit code.
pub fn main() -> i32 {
    restore_sigpipe();
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv
        .first()
        .map(|a| {
            std::path::Path::new(a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let (cmd, rest): (String, Vec<String>) = if SLURM_COMMANDS.contains(&prog.as_str()) {
        (prog, argv.into_iter().skip(1).collect())
    } else {
        match argv.get(1) {
            Some(c) => (c.clone(), argv.into_iter().skip(2).collect()),
            None => {
                eprintln!("{}", USAGE);
                return 2;
            }
        }
    };
    match cmd.as_str() {
        "sbatch" => sbatch::run(&rest),
        "squeue" => squeue::run(&rest),
        "sinfo" => sinfo::run(&rest),
        "scancel" => scancel::run(&rest),
        "scontrol" => scontrol::run(&rest),
        "sacct" => sacct::run(&rest),
        "sdiag" => sdiag::run(&rest),
        "srun" => srun::run(&rest),
        "salloc" => salloc::run(&rest),
        "sshare" => sshare::run(&rest),
        "sprio" => sprio::run(&rest),
        "sstat" => sstat::run(&rest),
        "sacctmgr" => sacctmgr::run(&rest),
        "status" => status::run(&rest),
        "cluster" => cluster::run(&rest),
        "config" => config_check::run(&rest),
        "top" => top::run(&rest),
        "stats" => stats::run(&rest),
        "exec" => exec::run(&rest),
        "tree" => tree::run(&rest),
        "events" => events::run(&rest),
        "ping" => ping::run(&rest),
        "trace" => trace::run(&rest),
        "debug" => debug::run(&rest),
        "-h" | "--help" | "help" => {
            println!("{}", USAGE);
            0
        }
        "-V" | "--version" => {
            println!("canopy {}", env!("CARGO_PKG_VERSION"));
            0
        }
        other => {
            eprintln!("canopy: unknown command '{other}'\n{USAGE}");
            2
        }
    }
}

const USAGE: &str = "usage: canopy <command> [args]

Slurm commands (also available under their own names):
  sbatch, squeue, sinfo, scancel, scontrol, sacct, sdiag, srun, sstat
Operator commands:
  status                         print the live actor tree and relay tree
  cluster up --nodes N [--tree-width W] [--dir DIR]
                                 start a local cluster on loopback
  cluster down --dir DIR         stop it
  config check [-f FILE] [-v]    check a configuration without starting anything
  top [--once] [--json] [--sort depth|age|rate|time] [--node X|--subtree R]
                                 the busiest actors of every daemon
  stats [--json] [--reset]       latency percentiles per message kind, user, depth
  exec -w NODES [--timeout S] [--diff] [--json] -- CMD [ARGS...]
                                 run CMD on the nodes through the tree, output folded
  tree [--depth N] [--down] [--node NODE] [--json]
                                 relay tree health in one screen
  events [-f] [--since TIME] [--type KIND] [--json]
                                 node, relay, job and auth events, repeats folded
  ping NODESET [-c N] [--json]   time a probe through the relay tree, hop by hop
  trace fanout [--last KIND|--job ID] [--json]
                                 where one real broadcast spent its time
  debug -w NODESET --flags F,... --for 10m [--level debug|trace]
  debug --show [-w NODESET] | debug -w NODESET --off
                                 raise log detail on some daemons for a while";
