//! `canopy-ctld`: open the state store, start the actors, and serve node
//! links and CLI clients on one listening port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;

use super::link::{serve_child, RelayCtx};
use super::rpc::{self, CtldInfo};
use super::stats::{Source, Traffic};
use crate::actors::controller::{ControllerActor, ControllerHandles};
use crate::config::Config;
use crate::state::store::{Store, StoreError};
use crate::tree::topology::Topology;
use crate::wire::auth::{AuthError, Authenticator};
use crate::wire::connection::Connection;
use crate::wire::messages::Body;

/// How long a new connection may take to send its first frame.
const FIRST_FRAME: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum CtldError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("cannot create StateSaveLocation {path}: {source}")]
    StateDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Run the controller until the process is killed. Must be called inside an
/// actix `System`.
pub async fn run(conf: Arc<Config>) -> Result<(), CtldError> {
    std::fs::create_dir_all(&conf.state_save_location).map_err(|source| CtldError::StateDir {
        path: conf.state_save_location.clone(),
        source,
    })?;
    let auth = super::authenticator(&conf)?;
    let (store, recovered) = Store::open(&conf.state_save_location)?;
    tracing::info!(
        jobs = recovered.jobs.len(),
        next_job_id = ?recovered.next_job_id,
        "state recovered"
    );
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|source| CtldError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let topo = Arc::new(
        Topology::new(conf.nodes.len().max(1) as u32, conf.tree_width)
            .map_err(|e| CtldError::Config(e.to_string()))?,
    );
    // Crash-only: a state write whose outcome is unknown ends the daemon at
    // once, and a restart recovers from what is on disk.
    let fatal: crate::actors::controller::FatalHook = Arc::new(|e: String| {
        tracing::error!(error = %e, "state store failed; exiting so that a restart recovers from disk");
        std::process::exit(70);
    });
    let handles = ControllerActor::start(conf.clone(), store, recovered, fatal);
    let boot_id = super::new_boot_id();
    let info = CtldInfo {
        host: conf.control_host.clone(),
        boot_id,
        started: chrono::Utc::now().timestamp(),
        slurm_uid: nix::unistd::getuid().as_raw(),
        traffic: Arc::default(),
        users: Arc::default(),
        groups: Arc::default(),
    };
    let traffic = Arc::new(Traffic::default());
    let info = CtldInfo {
        traffic: traffic.clone(),
        ..info
    };
    let relay_ctx = RelayCtx {
        conf: conf.clone(),
        topo,
        me: None,
        my_name: "controller".into(),
        relay: handles.relay.clone(),
        relay_stats: handles.relay_stats.clone(),
        heartbeat: conf.heartbeat_interval(),
        traffic: Some(traffic),
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    tracing::info!(%addr, nodes = conf.nodes.len(), tree_width = conf.tree_width, "canopy-ctld listening");
    serve(listener, auth, boot_id, handles, info, relay_ctx).await;
    Ok(())
}

async fn serve(
    listener: TcpListener,
    auth: Arc<Authenticator>,
    boot_id: u64,
    handles: ControllerHandles,
    info: CtldInfo,
    relay_ctx: RelayCtx,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Typically EMFILE: back off rather than spin.
                tracing::error!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let conn = Connection::new(stream, auth.clone(), boot_id);
        let (h, i, r) = (handles.clone(), info.clone(), relay_ctx.clone());
        actix::spawn(async move { serve_conn(conn, peer, h, i, r).await });
    }
}

async fn serve_conn(
    mut conn: Connection,
    peer: SocketAddr,
    h: ControllerHandles,
    info: CtldInfo,
    relay_ctx: RelayCtx,
) {
    let first = match tokio::time::timeout(FIRST_FRAME, conn.recv_sized()).await {
        Ok(Ok(Some(env))) => env,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            reject(&mut conn, peer, &e).await;
            return;
        }
        Err(_) => return,
    };
    let (first, first_len) = first;
    if let Body::Hello(hello) = first.body {
        serve_child(conn, hello, relay_ctx).await;
        return;
    }
    // A CLI client: request/response until it hangs up.
    let mut next = Some((first, first_len));
    loop {
        let (env, bytes) = match next.take() {
            Some(e) => e,
            None => match conn.recv_sized().await {
                Ok(Some(e)) => e,
                Ok(None) => return,
                Err(e) => {
                    reject(&mut conn, peer, &e).await;
                    if e.ends_connection() {
                        return;
                    }
                    continue;
                }
            },
        };
        let corr = env.header.corr;
        let kind = env.body.kind();
        let t0 = std::time::Instant::now();
        let reply = rpc::handle(env, &h, &info).await;
        info.traffic
            .record(Source::Client, kind, bytes, t0.elapsed());
        if conn.send(corr, &reply).await.is_err() {
            return;
        }
    }
}

/// Log a rejected frame and tell the peer why (best effort; the stream may be gone).
async fn reject(conn: &mut Connection, peer: SocketAddr, e: &crate::wire::error::WireError) {
    tracing::warn!(%peer, error = %e, "rejected frame");
    let reply = Body::Error(crate::wire::messages::ErrorReply {
        code: crate::wire::messages::ErrorCode::PermissionDenied,
        message: format!("request rejected: {e}"),
    });
    let _ = conn.send(0, &reply).await;
}
