//! canopy-authd: the local signer (like munged, or Slurm's sackd). Runs on
//! every host where users run commands; holds the cluster key (readable by
//! root and the daemons' user only) and signs credentials for local
//! callers, as the uid the kernel reports for them. SIGHUP re-reads the key
//! files (a rotation); SIGTERM or SIGINT stops it.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "canopy-authd",
    version,
    about = "canopy local credential signer"
)]
struct Args {
    /// Configuration file (slurm.conf syntax); else $CANOPY_CONF, $SLURM_CONF, /etc/canopy/slurm.conf.
    #[arg(short = 'f', long = "config")]
    config: Option<PathBuf>,
    /// Socket to listen on (default: AuthInfo=socket= from the configuration).
    #[arg(short = 'S', long = "socket")]
    socket: Option<PathBuf>,
    /// Run in the foreground (always the case; accepted like munged's -F).
    #[arg(short = 'F', short_alias = 'D')]
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
    let socket = args.socket.unwrap_or_else(|| conf.auth_socket.clone());
    let key_path = conf.auth_key_path.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    rt.block_on(async move {
        let auth = canopy::daemon::authenticator(&conf)
            .with_context(|| format!("cannot load the key {}", key_path.display()))?;
        // What it verifies for clients: nothing from before its own start
        // (its replay cache starts empty).
        auth.refuse_issued_before(std::time::SystemTime::now());
        let listener = canopy::authd::bind(&socket).await?;
        let (sign, alt) = auth.key_ids();
        tracing::info!(socket = %socket.display(), key_id = format!("{sign:#010x}"), alternate = ?alt.map(|a| format!("{a:#010x}")), "canopy-authd serving");
        let stats = Arc::new(canopy::authd::SignerStats::default());
        let stop = CancellationToken::new();
        let server = tokio::spawn(canopy::authd::serve(listener, auth.clone(), stats.clone(), stop.clone()));
        let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = hup.recv() => match canopy::wire::auth::load_keyring(&key_path) {
                    Ok(k) => {
                        auth.set_keys(k);
                        let (sign, alt) = auth.key_ids();
                        tracing::info!(key_id = format!("{sign:#010x}"), alternate = ?alt.map(|a| format!("{a:#010x}")), "keys re-read");
                    }
                    Err(e) => tracing::error!(error = %e, "keys not re-read; keeping the old ones"),
                },
            }
        }
        stop.cancel();
        let _ = server.await;
        let _ = std::fs::remove_file(&socket);
        tracing::info!(
            signed = stats.signed.load(Ordering::Relaxed),
            verified = stats.verified.load(Ordering::Relaxed),
            refused = stats.refused.load(Ordering::Relaxed),
            "canopy-authd stopped"
        );
        Ok::<(), anyhow::Error>(())
    })
}
