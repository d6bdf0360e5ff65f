//! `canopy-ctld`: open the state store, start the actors, serve node links
//! and CLI clients on one listening port, and stop cleanly when asked: stop
//! accepting, end every connection task, then make every write accepted so
//! far durable before returning.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::guard::{Bad, Daemons, PeerLog, RateLimiter, Verdict, AUTH_DEADLINE};
use super::limit::ConnLimiter;
use super::link::{serve_child, RelayCtx};
use super::listen::{accept_loop, Listen};
use super::rpc::{self, CtldInfo};
use super::shutdown::{Tree, TASK_GRACE};
use super::stats::Source;
use crate::actors::controller::{ControllerActor, ControllerHandles};
use crate::config::Config;
use crate::state::store::{Store, StoreError};
use crate::tree::topology::Topology;
use crate::wire::auth::AuthError;
use crate::wire::connection::Connection;
use crate::wire::error::WireError;
use crate::wire::messages::{Body, ErrorCode, ErrorReply};

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
    /// The stored state cannot be mapped onto this configuration's nodes.
    #[error("the state in StateSaveLocation does not fit this slurm.conf: {0}")]
    Renumber(#[from] crate::ctld::renumber::RenumberError),
    #[error(transparent)]
    Events(#[from] crate::daemon::event_log::EventLogError),
}

/// Run the controller until `stop` resolves (to the reason, e.g. the signal's
/// name), then shut down: the listener closes, connections end (a request
/// being answered is answered first), and the state store is flushed.
/// Returns once every write accepted before the stop is durable. Must be
/// called inside an actix `System`.
pub async fn run<S>(conf: Arc<Config>, stop: S) -> Result<(), CtldError>
where
    S: Future<Output = &'static str>,
{
    std::fs::create_dir_all(&conf.state_save_location).map_err(|source| CtldError::StateDir {
        path: conf.state_save_location.clone(),
        source,
    })?;
    let auth = super::authenticator(&conf)?;
    // The replay cache starts empty: refuse what was signed before now,
    // which this controller may have accepted in its previous life.
    auth.refuse_issued_before(std::time::SystemTime::now());
    let (store, mut recovered) = Store::open(&conf.state_save_location)?;
    tracing::info!(
        jobs = recovered.jobs.len(),
        next_job_id = ?recovered.next_job_id,
        "state recovered"
    );
    // Stored ranks follow the nodes by name if slurm.conf's node list changed; written back
    // before anything is served.
    let restored = crate::ctld::renumber::restore(
        &conf,
        recovered.file_nodes.as_deref(),
        &recovered.dyn_nodes,
        &mut recovered.jobs,
        &mut recovered.reservations,
    )?;
    if restored.moved > 0 {
        tracing::warn!(
            moved = restored.moved,
            "slurm.conf's node list changed: stored ranks mapped to the nodes by name"
        );
    }
    recovered.dyn_nodes = restored.dyn_nodes;
    if !restored.persist.is_empty() {
        store.commit_atomic(restored.persist).await?;
    }
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let listener = super::listen::bind(&addr)
        .await
        .map_err(|source| CtldError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let (fixed, capacity) = conf.tree_ranks();
    let topo = Arc::new(
        Topology::with_dynamic(fixed, capacity, conf.tree_width)
            .map_err(|e| CtldError::Config(e.to_string()))?,
    );
    // Crash-only: a state write whose outcome is unknown ends the daemon at
    // once, and a restart recovers from what is on disk.
    let fatal: crate::actors::controller::FatalHook = Arc::new(|e: String| {
        tracing::error!(error = %e, "state store failed; exiting so that a restart recovers from disk");
        std::process::exit(70);
    });
    // The daemon keeps a store handle for the final flush; the actor owns the rest.
    let retention = conf
        .event_retention_s
        .and_then(|s| i64::try_from(s).ok())
        .unwrap_or(crate::console::events::DEFAULT_RETENTION_S);
    let events = crate::daemon::event_log::EventLog::open(&conf.state_save_location, retention)?;
    let handles = ControllerActor::start_with_events(
        conf.clone(),
        store.clone(),
        recovered,
        fatal,
        events.clone(),
    );
    let boot_id = super::new_boot_id();
    let limiter = ConnLimiter::new(conf.max_connections as usize);
    let daemons = Daemons::resolve(conf.slurm_user.clone()).await;
    let operators = Arc::new(super::guard::Operators::resolve(conf.operators.clone()).await);
    let peers = Arc::new(PeerLog::default());
    peers.set_events(events.clone());
    let rate = Arc::new(RateLimiter::new(conf.rate_limit.clone(), daemons.clone()));
    if conf.rate_limit.enabled {
        let rl = &conf.rate_limit;
        tracing::info!(
            bucket_size = rl.bucket_size,
            refill_rate = rl.refill_rate,
            refill_period_s = rl.refill_period_s,
            table_size = rl.table_size,
            log_freq_s = rl.log_freq_s,
            "RPC rate limiting enabled"
        );
    }
    let mut tree = Tree::default();
    let listener_part = tree.part("listener");
    let conns = tree.part("connections");
    let info = CtldInfo {
        host: conf.control_host.clone(),
        boot_id,
        started: chrono::Utc::now().timestamp(),
        slurm_uid: operator_uid(conf.slurm_user.as_deref()),
        traffic: Arc::default(),
        users: Arc::default(),
        groups: Arc::default(),
        conns: limiter.clone(),
        auth: auth.clone(),
        key_path: conf.auth_key_path.clone(),
        keys_incomplete: Arc::default(),
        daemons: daemons.clone(),
        operators,
        peers: peers.clone(),
        rate,
        read_timeout: conf.read_timeout(),
    };
    let relay_ctx = RelayCtx {
        conf: conf.clone(),
        topo,
        me: None,
        my_name: "controller".into(),
        relay: handles.relay.clone(),
        relay_stats: handles.relay_stats.clone(),
        heartbeat: conf.heartbeat_interval(),
        traffic: Some(info.traffic.clone()),
        shutdown: conns.token.clone(),
        daemons,
        peers,
    };
    tracing::info!(%addr, nodes = conf.nodes.len(), tree_width = conf.tree_width, max_connections = conf.max_connections, "canopy-ctld listening");
    let listen = Listen {
        listener,
        limiter,
        auth,
        boot_id,
        who: "canopy-ctld".into(),
    };
    let controller = handles.controller.clone();
    let serve =
        move |conn, peer| serve_conn(conn, peer, handles.clone(), info.clone(), relay_ctx.clone());
    listener_part.spawn(accept_loop(listen, listener_part.clone(), conns, serve));

    let reason = stop.await;
    let t0 = Instant::now();
    tracing::info!(
        signal = reason,
        grace_ms = TASK_GRACE.as_millis() as u64,
        "canopy-ctld shutting down"
    );
    let left = tree.stop(TASK_GRACE).await;
    // No new scheduling pass or timer from here: nothing starts that the
    // flush below would not cover.
    let _ = controller.send(crate::actors::controller::Stop).await;
    // Every reply already sent was sent after its write was durable; this
    // covers the writes the controller queued without a client waiting.
    let flushed = store.sync().await;
    events.sync().await;
    let tasks_left: usize = left.iter().map(|(_, n)| n).sum();
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    match flushed {
        Ok(()) => {
            tracing::info!(elapsed_ms, tasks_left, "canopy-ctld stopped; state flushed");
            Ok(())
        }
        Err(e) => {
            tracing::error!(elapsed_ms, tasks_left, error = %e, "canopy-ctld stopped; state flush failed");
            Err(e.into())
        }
    }
}

/// The next request of a client, or `None` once it hangs up or the
/// daemon stops (checked only between requests: one being answered is
/// answered).
async fn next_frame(
    conn: &mut Connection,
    stop: &CancellationToken,
) -> Option<Result<(crate::wire::messages::Envelope, usize), crate::wire::error::WireError>> {
    tokio::select! {
        _ = stop.cancelled() => None,
        r = conn.recv_sized() => r.transpose(),
    }
}

async fn serve_conn(
    mut conn: Connection,
    peer: SocketAddr,
    h: ControllerHandles,
    info: CtldInfo,
    relay_ctx: RelayCtx,
) {
    let stop = relay_ctx.shutdown.clone();
    // Until its first frame verifies, a peer is anyone who can reach the
    // port: it gets a short deadline (and the codec bounds its buffer).
    let first = match tokio::time::timeout(AUTH_DEADLINE, next_frame(&mut conn, &stop)).await {
        Ok(Some(Ok(env))) => env,
        Ok(Some(Err(e))) => {
            reject(&mut conn, peer, &e, &info.peers).await;
            return;
        }
        Ok(None) => return,
        Err(_) => {
            let why = format!("no authenticated frame within {AUTH_DEADLINE:?}");
            info.peers.record(Bad::AuthTimeout, Some(peer), &why);
            return;
        }
    };
    let (first, first_len) = first;
    if let Body::Hello(hello) = first.body {
        serve_child(conn, hello, first.uid, relay_ctx).await;
        return;
    }
    // A CLI client: request/response until it hangs up or idles past the
    // read timeout (Slurm's conmgr_read_timeout; a client that keeps its
    // connection reconnects after such a pause).
    let mut next = Some((first, first_len));
    loop {
        let (env, bytes) = match next.take() {
            Some(e) => e,
            None => {
                match tokio::time::timeout(info.read_timeout, next_frame(&mut conn, &stop)).await {
                    Ok(Some(Ok(e))) => e,
                    Ok(None) => return,
                    Ok(Some(Err(e))) => {
                        reject(&mut conn, peer, &e, &info.peers).await;
                        if e.ends_connection() {
                            return;
                        }
                        continue;
                    }
                    Err(_) => {
                        let why = format!("idle for {:?}", info.read_timeout);
                        info.peers.record(Bad::Idle, Some(peer), &why);
                        return;
                    }
                }
            }
        };
        let corr = env.header.corr;
        let kind = env.body.kind();
        let uid = env.uid;
        let t0 = std::time::Instant::now();
        let reply = if is_node_message(&env.body) && !info.daemons.allows(env.uid) {
            // Node-daemon traffic outside a link is refused anyway
            // (`rpc::handle` answers "unexpected request"); from a user it
            // is also worth counting.
            let why = format!("{kind} signed by uid {}", env.uid);
            info.peers.record(Bad::NotDaemon, Some(peer), &why);
            not_daemon_reply(env.uid, &info.daemons)
        } else if let Verdict::Limited { log, retry_in } = info.rate.check(env.uid, t0) {
            if log {
                tracing::info!(uid = env.uid, msg_kind = kind, %peer, "RPC rate limit exceeded; client told to back off");
            }
            // The reply waits until the user's next tokens are due (a
            // second at most): a client that ignores "back off" and asks
            // again at once is paced to the refill rate per connection
            // instead of spinning the controller. The wait is a timer, not
            // work, and shutdown cuts it short.
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(retry_in.min(MAX_BACKOFF_DELAY)) => {}
            }
            Body::Error(ErrorReply {
                code: ErrorCode::Backoff,
                message: BACKOFF_MESSAGE.into(),
            })
        } else if let Body::JoinNode(line) = env.body {
            super::rpc_nodes::join(line, env.uid, peer, &h, &info).await
        } else {
            rpc::handle(env, &h, &info).await
        };
        let took = t0.elapsed();
        info.traffic.record(Source::Client, kind, bytes, took);
        if conn.send(corr, &reply).await.is_err() {
            return;
        }
        super::rpc_console::record(&h, kind, uid, took);
    }
}

/// Longest a rate-limited reply is held back.
const MAX_BACKOFF_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// Slurm's text for SLURMCTLD_COMMUNICATIONS_BACKOFF.
pub const BACKOFF_MESSAGE: &str = "Rate limit exceeded, please retry momentarily";

/// Messages only node daemons send (upward on their links).
fn is_node_message(body: &Body) -> bool {
    matches!(
        body,
        Body::Hello(_)
            | Body::Register(_)
            | Body::Health(_)
            | Body::BatchFinished(_)
            | Body::ScriptFailed(_)
            | Body::StepUsage(_)
            | Body::ForwardReply(_)
    )
}

/// The refusal of node-daemon traffic from a uid that is not a daemon's.
pub fn not_daemon_reply(uid: u32, daemons: &Daemons) -> Body {
    Body::Error(ErrorReply {
        code: ErrorCode::PermissionDenied,
        message: format!(
            "only root and the daemons' user (uids {:?}) may speak as a node daemon; uid {uid} refused",
            daemons.uids()
        ),
    })
}

/// Log a rejected frame (at a bounded rate) and tell the peer why (best
/// effort; the stream may be gone).
async fn reject(
    conn: &mut Connection,
    peer: SocketAddr,
    e: &crate::wire::error::WireError,
    peers: &PeerLog,
) {
    let kind = match e {
        WireError::Auth(_) | WireError::UnsupportedVersion { .. } => Bad::Auth,
        _ => Bad::Frame,
    };
    peers.record(kind, Some(peer), e);
    let reply = Body::Error(crate::wire::messages::ErrorReply {
        code: crate::wire::messages::ErrorCode::PermissionDenied,
        message: format!("request rejected: {e}"),
    });
    let _ = conn.send(0, &reply).await;
}

/// The uid that is an operator besides root: SlurmUser's when the
/// controller runs as root and SlurmUser names a known account (as in
/// Slurm, where SlurmUser and root are operators), else the uid the
/// controller runs as.
fn operator_uid(slurm_user: Option<&str>) -> u32 {
    let me = nix::unistd::getuid();
    let Some(name) = slurm_user.filter(|_| me.is_root()) else {
        return me.as_raw();
    };
    let found = match name.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)),
        Err(_) => nix::unistd::User::from_name(name),
    };
    match found {
        Ok(Some(u)) => u.uid.as_raw(),
        _ => {
            tracing::warn!(
                slurm_user = name,
                "SlurmUser is not a known user; only root is an operator"
            );
            me.as_raw()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::operator_uid;

    #[test]
    fn slurm_user_is_the_operator_only_for_a_root_controller() {
        let me = nix::unistd::getuid();
        assert_eq!(operator_uid(None), me.as_raw());
        assert_eq!(operator_uid(Some("no-such-user-here")), me.as_raw());
        let nobody = nix::unistd::User::from_name("nobody").ok().flatten();
        if let Some(n) = nobody {
            let expected = if me.is_root() {
                n.uid.as_raw()
            } else {
                me.as_raw()
            };
            assert_eq!(operator_uid(Some("nobody")), expected);
        }
    }
}
