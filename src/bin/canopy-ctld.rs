//! canopy-ctld: the controller daemon (like slurmctld). Parses arguments,
//! loads the configuration and runs `canopy::daemon::ctld` until SIGTERM or
//! SIGINT; then it shuts down cleanly (state flushed, exit status 0) within
//! a bounded time. A second signal, or the deadline passing, exits at once.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use canopy::daemon::shutdown::{Signals, HARD_DEADLINE};
use clap::Parser;

/// mimalloc rather than glibc's malloc: a listing reply builds and frees
/// tens of thousands of small strings, and with mimalloc the controller spends
/// about a third less CPU per 10,000-job `squeue` (loadtest/RESULTS.md). The
/// CLI keeps glibc's: there mimalloc's start-up cost outweighs its gain.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "canopy-ctld", version, about = "canopy controller daemon")]
struct Args {
    /// Configuration file (slurm.conf syntax); else $CANOPY_CONF, $SLURM_CONF, /etc/canopy/slurm.conf.
    #[arg(short = 'f', long = "config")]
    config: Option<PathBuf>,
    /// Run in the foreground (always the case; accepted for slurmctld compatibility).
    #[arg(short = 'D')]
    foreground: bool,
    /// More logging (repeatable); with --check, list the harmless ignored keys too.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
    /// Check the configuration (slurm.conf, gres.conf, cgroup.conf, the key) and exit
    /// without starting: status 0 if the controller would start, 1 if not.
    #[arg(long = "check")]
    check: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    canopy::cli::init_tracing(args.verbose);
    let path = canopy::config::Config::locate(args.config.as_deref());
    if args.check {
        let report = canopy::daemon::check::check(&path);
        print!("{}", report.render(args.verbose > 0));
        std::process::exit(report.exit_code());
    }
    let conf = canopy::config::Config::load(&path)
        .with_context(|| format!("cannot load configuration {}", path.display()))?;
    // Warnings, and one line per ignored setting that changes what Slurm would do.
    conf.log_load_notes();
    raise_fd_limit(conf.max_connections);
    let conf = Arc::new(conf);
    let system = actix::System::new();
    system.block_on(async move {
        // Before anything listens: an early SIGTERM must not kill unflushed.
        let mut signals = Signals::new().context("cannot install signal handlers")?;
        let stop = async move {
            let sig = signals.recv().await;
            signals.arm_hard_stop("canopy-ctld", HARD_DEADLINE);
            sig
        };
        canopy::daemon::ctld::run(conf, stop).await?;
        Ok::<(), anyhow::Error>(())
    })?;
    // N.B. Exit here rather than return: the state is flushed, and dropping
    // the runtime would wait for any blocking task still running (an
    // accounting scan) without a bound.
    std::process::exit(0);
}

/// Room for `max_connections` sockets plus the store's and the log's files;
/// a warning, not a refusal, where the hard limit is lower.
fn raise_fd_limit(max_connections: u32) {
    let wanted = u64::from(max_connections) + 256;
    if let Err(e) = canopy::sim::raise_fd_limit(wanted) {
        tracing::warn!(error = %e, max_connections, "open file limit below the connection limit; accepts may fail with EMFILE first");
    }
}
