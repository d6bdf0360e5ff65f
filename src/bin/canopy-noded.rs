//! canopy-noded: the node daemon (like slurmd); also hosts the relay agent
//! for its subtree. Parses arguments and runs `canopy::daemon::noded` until
//! SIGTERM or SIGINT, then stops cleanly within a bounded time, leaving
//! running jobs running.
//!
//! `-C` and `-G` print the node's hardware and GRES as slurmd's do, and
//! exit without reading the configuration (`canopy::exec::hw`).
//!
//! `--simulate --ranks A-B` runs the daemons of nodes A..=B (config order) in
//! this one process with a sleeping executor, for load tests; it prints
//! `ready <count>` once all are listening, takes `kill <rank,...>` lines on
//! stdin, and exits when stdin closes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

use canopy::actors::agent::ExecMode;
use canopy::daemon::noded::{start_at, NodeOptions};
use canopy::daemon::shutdown::{Signals, HARD_DEADLINE, TASK_GRACE};

#[derive(Parser)]
#[command(name = "canopy-noded", version, about = "canopy node daemon")]
struct Args {
    /// Configuration file (slurm.conf syntax).
    #[arg(short = 'f', long = "config")]
    config: Option<PathBuf>,
    /// The node this daemon is (as slurmd -N); defaults to the short host name.
    #[arg(short = 'N', long = "node")]
    node: Option<String>,
    /// Run in the foreground (always; accepted for slurmd compatibility).
    #[arg(short = 'D')]
    foreground: bool,
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print this node's hardware in slurm.conf form and its uptime (as
    /// slurmd -C), then exit; needs no configuration.
    #[arg(short = 'C')]
    print_config: bool,
    /// Print the GRES (GPUs) this node would report (as slurmd -G), then exit.
    #[arg(short = 'G')]
    print_gres: bool,
    /// Register a node slurm.conf does not list, as slurmd -Z: the controller
    /// creates it (MaxNodeCount bounds how many) from the detected hardware
    /// and --conf.
    #[arg(short = 'Z')]
    dynamic: bool,
    /// With -Z: node attributes that override the detected hardware, in
    /// slurm.conf's words, e.g. "CPUs=4 RealMemory=2000 Feature=f1 Gres=gpu:1".
    #[arg(long = "conf", requires = "dynamic")]
    conf_line: Option<String>,
    /// Load testing: run many simulated nodes (see --ranks) in this process.
    #[arg(long)]
    simulate: bool,
    /// With --simulate: the node ranks to run, `A-B` (inclusive, 0-based config order).
    #[arg(long, requires = "simulate")]
    ranks: Option<String>,
    /// With --simulate -Z: how many dynamic nodes to run (z00001...), from --first.
    #[arg(long, requires = "simulate")]
    count: Option<u32>,
    /// With --simulate -Z --count: the number of the first of them (0-based).
    #[arg(long, default_value_t = 0, requires = "simulate")]
    first: u32,
    /// With --simulate: how long a job "runs", milliseconds.
    #[arg(long = "job-runtime-ms", default_value_t = 0, requires = "simulate")]
    job_runtime_ms: u64,
    /// With --simulate: start no node until `start R,...` comes on stdin
    /// (powered-down cloud nodes a ResumeProgram starts).
    #[arg(long, requires = "simulate")]
    deferred: bool,
}

/// Jobs run their script from the spool directory as their own user, so as
/// root every directory on the way must be searchable by others. Warn, not
/// refuse: a site running only root's jobs does not need it.
fn warn_if_users_cannot_reach(spool: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if !nix::unistd::Uid::effective().is_root() {
        return;
    }
    for dir in spool.ancestors().filter(|d| !d.as_os_str().is_empty()) {
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        if meta.permissions().mode() & 0o001 == 0 {
            tracing::warn!(
                dir = %dir.display(),
                spool = %spool.display(),
                "SlurmdSpoolDir is not searchable by other users here; jobs of users other than root cannot start"
            );
            return;
        }
    }
}

fn short_hostname() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    host.split('.').next().unwrap_or_default().to_string()
}

/// `-C` / `-G`: hardware reports that need no slurm.conf, keys or controller.
fn print_hardware(args: &Args) -> anyhow::Result<()> {
    use std::io::Write;
    if args.print_config {
        let node = args.node.clone().unwrap_or_else(short_hostname);
        let report = canopy::exec::hw::node_config_report(&node)
            .context("cannot read this node's hardware")?;
        print!("{report}");
    }
    if args.print_gres {
        // slurmd logs these, so they go to stderr with the daemon's name.
        let mut err = std::io::stderr().lock();
        for line in canopy::exec::hw::gres_report().context("cannot read this node's hardware")? {
            writeln!(err, "canopy-noded: {line}")?;
        }
    }
    Ok(())
}

fn parse_ranks(s: &str, n: usize) -> anyhow::Result<std::ops::Range<u32>> {
    let (a, b) = s
        .split_once('-')
        .with_context(|| format!("--ranks {s}: expected A-B"))?;
    let a: u32 = a
        .parse()
        .with_context(|| format!("--ranks {s}: bad start"))?;
    let b: u32 = b.parse().with_context(|| format!("--ranks {s}: bad end"))?;
    if a > b || b as usize >= n {
        bail!("--ranks {s}: must satisfy A <= B < {n} (the configured node count)");
    }
    Ok(a..b + 1)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Reloadable, so that `canopy debug` can raise and revert it.
    canopy::daemon::debuglog::init_tracing(args.verbose);
    if args.print_config || args.print_gres {
        return print_hardware(&args);
    }
    let path = canopy::config::Config::locate(args.config.as_deref());
    let conf = canopy::config::Config::load(&path)
        .with_context(|| format!("cannot load configuration {}", path.display()))?;
    let conf = Arc::new(conf);
    let auth = canopy::daemon::authenticator(&conf)?;
    if args.simulate {
        let run_for = Duration::from_millis(args.job_runtime_ms);
        if args.dynamic {
            let count = args.count.context("--simulate -Z needs --count")?;
            let line = args.conf_line.clone().unwrap_or_default();
            let nodes = Nodes::Dynamic(args.first, count, line);
            return simulate(conf, auth, nodes, run_for, args.deferred);
        }
        let ranks = parse_ranks(args.ranks.as_deref().unwrap_or("0-0"), conf.nodes.len())?;
        return simulate(conf, auth, Nodes::Listed(ranks), run_for, args.deferred);
    }
    let short = short_hostname();
    let node = args.node.unwrap_or(short.clone());
    let spool = canopy::daemon::spool_dir(&conf.slurmd_spool_dir, &node, &short);
    std::fs::create_dir_all(&spool)
        .with_context(|| format!("cannot create SlurmdSpoolDir {}", spool.display()))?;
    warn_if_users_cannot_reach(&spool);
    let mode = ExecMode::Real {
        spool,
        conf_path: path.display().to_string(),
    };
    if let Err(e) = canopy::sim::raise_fd_limit(u64::from(conf.max_connections) + 256) {
        tracing::warn!(error = %e, max_connections = conf.max_connections, "open file limit below the connection limit");
    }
    let (dynamic, conf_line) = (args.dynamic, args.conf_line.unwrap_or_default());
    let system = actix::System::new();
    system.block_on(async move {
        // Before anything listens: an early SIGTERM gets the clean path too.
        let mut signals = Signals::new().context("cannot install signal handlers")?;
        let opts = NodeOptions {
            node,
            mode,
            shutdown: tokio_util::sync::CancellationToken::new(),
        };
        let socket = conf.auth_socket.clone();
        // Its replay cache starts empty: refuse what was signed before now.
        auth.refuse_issued_before(std::time::SystemTime::now());
        // SIGHUP re-reads the key files (a rotation), as slurmd re-reads
        // its configuration.
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("cannot install the SIGHUP handler")?;
        let (key_path, hup_auth) = (conf.auth_key_path.clone(), auth.clone());
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let path = key_path.clone();
                match tokio::task::spawn_blocking(move || canopy::wire::auth::load_keyring(&path))
                    .await
                {
                    Ok(Ok(k)) => {
                        hup_auth.set_keys(k);
                        tracing::info!("keys re-read");
                    }
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "keys not re-read; keeping the old ones")
                    }
                    Err(e) => tracing::error!(error = %e, "keys not re-read"),
                }
            }
        });
        let (conf, joined) = if dynamic {
            use canopy::daemon::noded_join;
            let hw = noded_join::detect().await;
            let line = noded_join::line_for(&opts.node, hw, &conf_line, Some(&short));
            let asked = noded_join::join(&conf, auth.clone(), &line, &opts.shutdown);
            let (c, j) = tokio::select! {
                r = asked => r?,
                sig = signals.recv() => {
                    tracing::info!(signal = sig, "stopped before joining");
                    std::process::exit(0);
                }
            };
            (c, Some(j))
        } else {
            (conf, None)
        };
        // Cancelled from inside too: the controller retires a deleted node's daemon.
        let retired = opts.shutdown.clone();
        let handles = start_at(conf, auth.clone(), opts, joined).await?;
        // Jobs on this node call srun and squeue: they need a signer here.
        let signer_stop = tokio_util::sync::CancellationToken::new();
        let serving = canopy::authd::serve_if_free(&socket, auth, signer_stop.clone()).await;
        let sig = tokio::select! {
            sig = signals.recv() => sig,
            _ = retired.cancelled() => "the node's deletion",
        };
        signals.arm_hard_stop("canopy-noded", HARD_DEADLINE);
        signer_stop.cancel();
        if serving {
            let _ = std::fs::remove_file(&socket);
        }
        // Jobs are left running, in their own sessions, as slurmd leaves them.
        handles.stop(sig, TASK_GRACE).await;
        Ok::<(), anyhow::Error>(())
    })?;
    // N.B. Exit here rather than return: each running job has a blocking
    // wait for its process on the runtime's pool, and dropping the runtime
    // would wait for those jobs to end.
    std::process::exit(0);
}

/// Which simulated nodes one process runs.
enum Nodes {
    /// slurm.conf's nodes at these ranks.
    Listed(std::ops::Range<u32>),
    /// Dynamic nodes joining with -Z: the first one's number, how many, their --conf.
    Dynamic(u32, u32, String),
}

fn simulate(
    conf: Arc<canopy::config::Config>,
    auth: Arc<canopy::wire::auth::Authenticator>,
    which: Nodes,
    run_for: Duration,
    deferred: bool,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let count = match &which {
        Nodes::Listed(r) => r.end - r.start,
        Nodes::Dynamic(_, n, _) => *n,
    };
    // A listener, an upward link and the children's links per node.
    let wanted = u64::from(count) * 3 + 1024;
    canopy::sim::raise_fd_limit(wanted)?;
    let system = actix::System::new();
    system.block_on(async move {
        // `start`/`kill` name listed ranks only.
        let ranks = match &which {
            Nodes::Listed(r) => r.clone(),
            Nodes::Dynamic(..) => 0..0,
        };
        let mut nodes = match which {
            Nodes::Listed(r) => {
                let first = if deferred { 0..0 } else { r };
                canopy::sim::start_nodes(conf.clone(), auth.clone(), first, run_for).await?
            }
            Nodes::Dynamic(first, n, line) => {
                canopy::sim::start_dynamic_nodes(
                    conf.clone(),
                    auth.clone(),
                    first,
                    n,
                    &line,
                    run_for,
                )
                .await?
            }
        };
        println!("ready {}", nodes.len());
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            let (cmd, list) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let listed: Vec<u32> = list
                .split(',')
                .filter_map(|r| r.trim().parse().ok())
                .filter(|r| ranks.contains(r))
                .collect();
            match cmd {
                "kill" => {
                    for n in nodes.iter().filter(|n| listed.contains(&n.rank)) {
                        n.shutdown.cancel();
                    }
                    nodes.retain(|n| !listed.contains(&n.rank));
                }
                // A node already running is left as it is.
                "start" => {
                    let new: Vec<u32> = listed
                        .into_iter()
                        .filter(|r| nodes.iter().all(|n| n.rank != *r))
                        .collect();
                    match canopy::sim::start_nodes(conf.clone(), auth.clone(), new, run_for).await {
                        Ok(started) => nodes.extend(started),
                        // As a node that fails to boot: ResumeTimeout catches it.
                        Err(e) => eprintln!("canopy-noded: {e}"),
                    }
                }
                _ => eprintln!("canopy-noded: unknown command {line:?}"),
            }
        }
        Ok::<(), anyhow::Error>(())
    })
}
