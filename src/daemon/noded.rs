//! `canopy-noded`: one node daemon. It runs the node agent (this node's jobs),
//! a relay agent for its subtree, a listener where its children attach, and
//! the upward link to its parent — re-attaching to the next live ancestor if
//! the parent dies, and moving back to a closer one once it answers again.

use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::link::{serve_child, to_relay, write_loop, RelayCtx, LINK_QUEUE};
use crate::actors::agent::{ExecMode, GetHello, NodeAgent, SetRelay};
use crate::actors::relay::{FromParent, RelayActor, SetUpstream, Upstream};
use crate::actors::stats::ActorStats;
use crate::config::Config;
use crate::exec::record::{records_dir, recover, RecordBook};
use crate::tree::plan::reattach_candidates;
use crate::tree::topology::Topology;
use crate::wire::auth::{AuthError, Authenticator};
use crate::wire::connection::Connection;
use crate::wire::messages::{Body, NodeResources};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often an adopted node tries to move back to a closer parent. A refused
/// connect is cheap, and the tree's shape (and message locality) recovers fast.
const PROBE_CLOSER: Duration = Duration::from_secs(1);

#[derive(Debug, Error)]
pub enum NodedError {
    #[error("node {0} is not defined in the configuration")]
    UnknownNode(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot keep job records in {path}: {source}")]
    Records {
        path: String,
        source: std::io::Error,
    },
}

/// Options for one node daemon.
pub struct NodeOptions {
    pub node: String,
    pub mode: ExecMode,
    /// Cancel to stop this daemon: its listener, links and actors end, and its
    /// sockets close (so its parent and children see it gone at once).
    pub shutdown: CancellationToken,
}

/// Handles to a running node daemon (used by tests and the load harness).
pub struct NodeHandles {
    pub agent: Addr<NodeAgent>,
    pub relay: Addr<RelayActor>,
}

/// Start a node daemon inside the current actix System; returns once it is
/// listening. The upward link runs in the background.
pub async fn start(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    opts: NodeOptions,
) -> Result<NodeHandles, NodedError> {
    let rank = conf
        .node_index(&opts.node)
        .ok_or_else(|| NodedError::UnknownNode(opts.node.clone()))? as u32;
    let nc = conf.nodes[rank as usize].clone();
    let topo = Arc::new(
        Topology::new(conf.nodes.len() as u32, conf.tree_width)
            .map_err(|e| NodedError::Config(e.to_string()))?,
    );
    let boot_id = super::new_boot_id();
    let resources = NodeResources {
        cpus: nc.cpus,
        sockets: nc.sockets,
        cores_per_socket: nc.cores_per_socket,
        threads_per_core: nc.threads_per_core,
        real_memory_mb: nc.real_memory_mb,
    };
    // Jobs an earlier daemon on this node left running, found before the
    // first registration so that it reports them (reading the spool blocks:
    // off the event loop).
    let records = match &opts.mode {
        ExecMode::Real { spool, .. } => {
            let dir = records_dir(spool);
            let path = dir.display().to_string();
            let found = tokio::task::spawn_blocking(move || {
                let adopted = recover(&dir);
                RecordBook::open(dir).map(|book| (book, adopted))
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|r| r);
            Some(found.map_err(|source| NodedError::Records { path, source })?)
        }
        ExecMode::Simulated { .. } => None,
    };
    let mut agent = NodeAgent::new(
        nc.name.clone(),
        rank,
        boot_id,
        resources,
        opts.mode,
        ActorStats::new(),
    )
    .with_auth(auth.clone());
    if let Some((book, adopted)) = records {
        agent = agent.with_records(book, adopted);
    }
    let agent = agent.start();
    let relay_stats = ActorStats::new();
    let relay = RelayActor::new(
        Some(rank),
        topo.clone(),
        Upstream::Node {
            agent: agent.clone().recipient(),
            parent: None,
            parent_name: None,
            parent_rank: None,
        },
        relay_stats.clone(),
    )
    .start();
    let _ = agent.send(SetRelay(relay.clone().recipient())).await;

    let addr = format!("{}:{}", nc.addr, nc.port);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|source| NodedError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let ctx = RelayCtx {
        conf: conf.clone(),
        topo: topo.clone(),
        me: Some(rank),
        my_name: nc.name.clone(),
        relay: relay.clone(),
        relay_stats,
        heartbeat: conf.heartbeat_interval(),
        traffic: None,
        shutdown: opts.shutdown.clone(),
    };
    tracing::info!(node = %nc.name, rank, %addr, parent = ?topo.parent(rank), "canopy-noded listening");
    let accept_auth = auth.clone();
    let accept_ctx = ctx.clone();
    actix::spawn(async move { accept_loop(listener, accept_auth, boot_id, accept_ctx).await });
    let up = Uplink {
        conf,
        topo,
        rank,
        boot_id,
        auth,
        agent: agent.clone(),
        relay: relay.clone(),
        shutdown: opts.shutdown.clone(),
    };
    actix::spawn(async move { up.run().await });
    let (a, r, token) = (agent.clone(), relay.clone(), opts.shutdown);
    actix::spawn(async move {
        token.cancelled().await;
        // The agent and relay hold each other's address: stop them explicitly.
        let _ = r.send(crate::actors::relay::Stop).await;
        let _ = a.send(crate::actors::agent::Stop).await;
    });
    Ok(NodeHandles { agent, relay })
}

async fn accept_loop(listener: TcpListener, auth: Arc<Authenticator>, boot_id: u64, ctx: RelayCtx) {
    loop {
        let accepted = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut conn = Connection::new(stream, auth.clone(), boot_id);
        let ctx = ctx.clone();
        actix::spawn(async move {
            match tokio::time::timeout(Duration::from_secs(10), conn.recv()).await {
                Ok(Ok(Some(env))) => match env.body {
                    Body::Hello(h) => serve_child(conn, h, ctx).await,
                    other => {
                        tracing::warn!(%peer, msg_kind = other.kind(), "node daemons only accept Hello");
                    }
                },
                Ok(Err(e)) => tracing::warn!(%peer, error = %e, "rejected frame"),
                _ => {}
            }
        });
    }
}

/// The upward link and its re-attach policy.
struct Uplink {
    conf: Arc<Config>,
    topo: Arc<Topology>,
    rank: u32,
    boot_id: u64,
    auth: Arc<Authenticator>,
    agent: Addr<NodeAgent>,
    relay: Addr<RelayActor>,
    shutdown: CancellationToken,
}

impl Uplink {
    /// Where to attach, best first: the natural parent, then its ancestors,
    /// then the controller.
    fn candidates(&self) -> Vec<Option<u32>> {
        let mut c = Vec::new();
        if let Some(p) = self.topo.parent(self.rank) {
            c.push(Some(p));
        }
        for x in reattach_candidates(&self.topo, self.rank) {
            if !c.contains(&x) {
                c.push(x);
            }
        }
        if !c.contains(&None) {
            c.push(None);
        }
        c
    }

    fn addr_of(&self, who: Option<u32>) -> String {
        match who.and_then(|r| self.conf.nodes.get(r as usize)) {
            Some(n) => format!("{}:{}", n.addr, n.port),
            None => format!("{}:{}", self.conf.control_addr, self.conf.slurmctld_port),
        }
    }

    fn name_of(&self, who: Option<u32>) -> String {
        match who.and_then(|r| self.conf.nodes.get(r as usize)) {
            Some(n) => n.name.clone(),
            None => "controller".into(),
        }
    }

    /// Connect to `who` and complete the Hello/Welcome exchange.
    async fn attach(&self, who: Option<u32>) -> Option<Connection> {
        let addr = self.addr_of(who);
        let fut = Connection::connect(addr.as_str(), self.auth.clone(), self.boot_id);
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, fut)
            .await
            .ok()?
            .ok()?;
        let hello = self.agent.send(GetHello).await.ok()?;
        conn.send(0, &Body::Hello(hello)).await.ok()?;
        match tokio::time::timeout(CONNECT_TIMEOUT, conn.recv()).await {
            Ok(Ok(Some(env))) => match env.body {
                Body::Welcome(_) => Some(conn),
                Body::Error(e) => {
                    tracing::warn!(parent = %self.name_of(who), error = %e.message, "attach refused");
                    None
                }
                _ => None,
            },
            _ => None,
        }
    }

    async fn run(self) {
        let token = self.shutdown.clone();
        tokio::select! {
            _ = token.cancelled() => {}
            _ = self.attach_forever() => {}
        }
    }

    async fn attach_forever(&self) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let cands = self.candidates();
            let mut attached = None;
            for (i, who) in cands.iter().enumerate() {
                if let Some(conn) = self.attach(*who).await {
                    attached = Some((i, *who, conn));
                    break;
                }
            }
            let Some((index, who, conn)) = attached else {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            };
            backoff = Duration::from_millis(100);
            tracing::info!(node = %self.name_of(Some(self.rank)), parent = %self.name_of(who), natural = index == 0, "attached upward");
            self.serve(conn, who, &cands[..index]).await;
            let _ = self
                .relay
                .send(SetUpstream {
                    tx: None,
                    parent: None,
                    parent_rank: None,
                })
                .await;
            tracing::warn!(parent = %self.name_of(who), "upward link lost; re-attaching");
        }
    }

    /// Serve an attached upward link until it fails, or until a closer
    /// candidate (one of `closer`) accepts us.
    async fn serve(&self, conn: Connection, who: Option<u32>, closer: &[Option<u32>]) {
        let heartbeat = self.conf.heartbeat_interval();
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        let (mut reader, writer) = conn.into_split();
        let writer = tokio::spawn(write_loop(writer, rx, heartbeat, self.shutdown.clone()));
        let _ = self
            .relay
            .send(SetUpstream {
                tx: Some(tx),
                parent: Some(self.name_of(who)),
                parent_rank: who,
            })
            .await;
        let silence = heartbeat * 3;
        let mut probe = tokio::time::interval(PROBE_CLOSER);
        probe.tick().await;
        let mut tick = tokio::time::interval(heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_heard = std::time::Instant::now();
        loop {
            tokio::select! {
                r = reader.recv() => match r {
                    Ok(Some(env)) => {
                        last_heard = std::time::Instant::now();
                        match env.body {
                            Body::Forward(f) => {
                                if to_relay(&self.relay, FromParent(*f)).await.is_err() {
                                    break;
                                }
                            }
                            Body::Keepalive => {}
                            other => tracing::debug!(msg_kind = other.kind(), "ignored from parent"),
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "bad frame from parent");
                        break;
                    }
                },
                _ = tick.tick() => {
                    if last_heard.elapsed() > silence {
                        tracing::warn!("parent silent; re-attaching");
                        break;
                    }
                }
                _ = probe.tick(), if !closer.is_empty() => {
                    // Adopted by a more distant ancestor: move back as soon as a
                    // closer one answers, without dropping the current link first.
                    for c in closer {
                        if let Some(better) = self.attach(*c).await {
                            writer.abort();
                            tracing::info!(parent = %self.name_of(*c), "moving back to a closer parent");
                            let rest: Vec<Option<u32>> = closer.iter().take_while(|x| *x != c).copied().collect();
                            return Box::pin(self.serve(better, *c, &rest)).await;
                        }
                    }
                }
            }
        }
        writer.abort();
    }
}
