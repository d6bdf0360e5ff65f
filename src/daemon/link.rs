//! A link to an attached descendant (a node daemon below this relay), and the
//! writer half shared by both directions of a daemon link.
//!
//! Liveness by idleness: a writer that has sent nothing for a heartbeat
//! interval sends a `Keepalive`; a reader that hears nothing for three
//! intervals drops the link, which fails everything in flight through it at
//! once (see the relay actor).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Addr;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::guard::{Bad, Daemons, PeerLog};
use super::stats::{Source, Traffic};
use crate::actors::relay::{ChildAttached, ChildDetached, FromChild, RelayActor};
use crate::actors::stats::ActorStats;
use crate::config::Config;
use crate::tree::topology::Topology;
use crate::wire::connection::{ConnWriter, Connection};
use crate::wire::messages::{Body, ErrorCode, ErrorReply, Hello, Welcome};

/// Queue between the relay actor and one link's socket writer.
pub const LINK_QUEUE: usize = 4096;
/// Missed heartbeats before a silent link is declared dead.
const MISSES: u32 = 3;

static NEXT_LINK: AtomicU64 = AtomicU64::new(1);

/// Everything a relay needs to accept children.
#[derive(Clone)]
pub struct RelayCtx {
    pub conf: Arc<Config>,
    pub topo: Arc<Topology>,
    /// `None` in the controller.
    pub me: Option<u32>,
    pub my_name: String,
    pub relay: Addr<RelayActor>,
    pub relay_stats: Arc<ActorStats>,
    pub heartbeat: Duration,
    /// Traffic counters (the controller only).
    pub traffic: Option<Arc<Traffic>>,
    /// Cancelled when the daemon stops: every link task ends with it.
    pub shutdown: CancellationToken,
    /// The uids whose frames a link accepts (root, this uid, SlurmUser).
    pub daemons: Daemons,
    /// Bad peers, logged at a bounded rate and counted.
    pub peers: Arc<PeerLog>,
}

/// Write frames from `rx` to the socket; keepalive when idle. Ends when the
/// queue closes or the socket fails.
pub async fn write_loop(
    mut w: ConnWriter,
    mut rx: mpsc::Receiver<Body>,
    heartbeat: Duration,
    shutdown: CancellationToken,
) {
    // One ticker and one cancellation waiter per link, not one timer per
    // frame: the hot path of a fan-out is a frame per link.
    let cancelled = shutdown.cancelled();
    tokio::pin!(cancelled);
    // Ticking at half the interval keeps an idle link's keepalives 1–1.5
    // intervals apart, well inside the receiver's three-interval silence limit.
    let mut tick = tokio::time::interval(heartbeat / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sent = Instant::now();
    loop {
        let body = tokio::select! {
            _ = &mut cancelled => return,
            b = rx.recv() => match b {
                Some(b) => b,
                None => return,
            },
            _ = tick.tick() => {
                if last_sent.elapsed() < heartbeat {
                    continue;
                }
                Body::Keepalive
            }
        };
        if let Err(e) = w.send(0, &body).await {
            tracing::debug!(error = %e, "link write failed");
            return;
        }
        last_sent = Instant::now();
    }
}

/// Hand a frame to the relay: without a reply channel when its mailbox has
/// room, otherwise wait for room (back-pressure; nothing is dropped).
pub async fn to_relay<M>(relay: &Addr<RelayActor>, msg: M) -> Result<(), ()>
where
    M: actix::Message<Result = ()> + Send + 'static,
    RelayActor: actix::Handler<M>,
{
    match relay.try_send(msg) {
        Ok(()) => Ok(()),
        Err(actix::dev::SendError::Full(msg)) => relay.send(msg).await.map_err(|_| ()),
        Err(actix::dev::SendError::Closed(_)) => Err(()),
    }
}

fn refuse(why: &str) -> Body {
    Body::Error(ErrorReply {
        code: ErrorCode::PermissionDenied,
        message: why.to_string(),
    })
}

/// Check that `hello` comes from a node that may attach below `ctx.me`.
fn admissible(ctx: &RelayCtx, hello: &Hello) -> Result<(), String> {
    let dynamic = hello.rank >= ctx.topo.fixed() && ctx.topo.contains(hello.rank);
    let conf = ctx.conf.nodes.get(hello.rank as usize);
    if conf.is_none() && !dynamic {
        return Err(format!("rank {} is not a configured node", hello.rank));
    }
    // A dynamic node's name is not in this daemon's slurm.conf: the controller, which made
    // the node, checks it when the registration arrives.
    if let Some(conf) = conf.filter(|_| !dynamic) {
        if conf.name != hello.node {
            return Err(format!(
                "rank {} is node {}, not {}",
                hello.rank, conf.name, hello.node
            ));
        }
    }
    match ctx.me {
        None => Ok(()),
        Some(me) if me == hello.rank => Err("a node cannot attach to itself".into()),
        Some(me) if ctx.topo.subtree(me).contains(&hello.rank) => Ok(()),
        Some(_) => Err(format!(
            "{} is not in the subtree of {}",
            hello.node, ctx.my_name
        )),
    }
}

/// Serve one attached descendant until its link ends. `uid` signed the
/// `Hello`: only the daemons' identity may attach (anyone else could
/// otherwise register a node as freshly restarted and end its jobs), and
/// every later frame on the link must be signed by it too.
pub async fn serve_child(mut conn: Connection, hello: Hello, uid: u32, ctx: RelayCtx) {
    let peer = conn.peer_addr();
    if !ctx.daemons.allows(uid) {
        let why = format!("Hello for {} signed by uid {uid}", hello.node);
        ctx.peers.record(Bad::NotDaemon, peer, &why);
        let _ = conn
            .send(0, &super::ctld::not_daemon_reply(uid, &ctx.daemons))
            .await;
        return;
    }
    if let Err(why) = admissible(&ctx, &hello) {
        tracing::warn!(node = %hello.node, rank = hello.rank, %why, "refusing link");
        let _ = conn.send(0, &refuse(&why)).await;
        return;
    }
    let welcome = Body::Welcome(Welcome {
        parent: ctx.my_name.clone(),
        heartbeat_ms: ctx.heartbeat.as_millis() as u64,
    });
    if conn.send(0, &welcome).await.is_err() {
        return;
    }
    let rank = hello.rank;
    let link_id = NEXT_LINK.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(LINK_QUEUE);
    let (mut reader, writer) = conn.into_split();
    let writer = tokio::spawn(write_loop(writer, rx, ctx.heartbeat, ctx.shutdown.clone()));
    ctx.relay_stats.sent();
    if ctx
        .relay
        .send(ChildAttached {
            rank,
            link_id,
            tx,
            hello,
            peer: peer.map(|p| p.ip()),
        })
        .await
        .is_err()
    {
        writer.abort();
        return;
    }
    let silence = ctx.heartbeat * MISSES;
    let cancelled = ctx.shutdown.cancelled();
    tokio::pin!(cancelled);
    let mut tick = tokio::time::interval(ctx.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    loop {
        let frame = tokio::select! {
            _ = &mut cancelled => break,
            f = reader.recv_sized() => f,
            _ = tick.tick() => {
                if last_heard.elapsed() > silence {
                    tracing::warn!(rank, "child silent for {:?}; dropping link", silence);
                    break;
                }
                continue;
            }
        };
        match frame {
            Ok(Some((env, _))) if !ctx.daemons.allows(env.uid) => {
                let why = format!(
                    "{} from rank {rank} signed by uid {}",
                    env.body.kind(),
                    env.uid
                );
                ctx.peers.record(Bad::NotDaemon, peer, &why);
                break;
            }
            Ok(Some((env, bytes))) => {
                last_heard = Instant::now();
                if let Some(t) = &ctx.traffic {
                    t.record(Source::Node, env.body.kind(), bytes, Duration::ZERO);
                }
                ctx.relay_stats.sent();
                let msg = FromChild {
                    rank,
                    link_id,
                    body: env.body,
                    received: last_heard,
                };
                if to_relay(&ctx.relay, msg).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                let why = format!("from rank {rank}: {e}; link dropped");
                ctx.peers.record(Bad::Frame, peer, &why);
                break;
            }
        }
    }
    // Awaited, not only aborted: the writer ends inside this (tracked) task.
    writer.abort();
    let _ = writer.await;
    ctx.relay_stats.sent();
    let _ = ctx.relay.send(ChildDetached { rank, link_id }).await;
}
