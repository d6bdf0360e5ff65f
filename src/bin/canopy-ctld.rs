//! canopy-ctld: the controller daemon (like slurmctld). Parses arguments,
//! loads the configuration and runs `canopy::daemon::ctld`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
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
    /// More logging (repeatable).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    canopy::cli::init_tracing(args.verbose);
    let path = canopy::config::Config::locate(args.config.as_deref());
    let conf = canopy::config::Config::load(&path)
        .with_context(|| format!("cannot load configuration {}", path.display()))?;
    for w in &conf.warnings {
        tracing::warn!("{w}");
    }
    let conf = Arc::new(conf);
    let system = actix::System::new();
    system.block_on(async move { canopy::daemon::ctld::run(conf).await })?;
    Ok(())
}
