//! canopy-noded: the node daemon (like slurmd); also hosts the relay agent
//! for its subtree. Parses arguments and runs `canopy::daemon::noded`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;

use canopy::actors::agent::ExecMode;
use canopy::daemon::noded::{start, NodeOptions};

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    canopy::cli::init_tracing(args.verbose);
    let path = canopy::config::Config::locate(args.config.as_deref());
    let conf = canopy::config::Config::load(&path)
        .with_context(|| format!("cannot load configuration {}", path.display()))?;
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let short = host.split('.').next().unwrap_or_default().to_string();
    let node = args.node.unwrap_or(short.clone());
    let spool = canopy::daemon::spool_dir(&conf.slurmd_spool_dir, &node, &short);
    std::fs::create_dir_all(&spool)
        .with_context(|| format!("cannot create SlurmdSpoolDir {}", spool.display()))?;
    let conf = Arc::new(conf);
    let auth = canopy::daemon::authenticator(&conf)?;
    let mode = ExecMode::Real {
        spool,
        conf_path: path.display().to_string(),
    };
    let system = actix::System::new();
    system.block_on(async move {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let opts = NodeOptions {
            node,
            mode,
            shutdown: shutdown.clone(),
        };
        start(conf, auth, opts).await?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("shutting down");
        shutdown.cancel();
        // Let the link tasks close their sockets cleanly.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(())
}
