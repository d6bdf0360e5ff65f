//! `canopy-noded`: one node daemon. It runs the node agent (this node's jobs),
//! a relay agent for its subtree, a listener where its children attach, and
//! the upward link to its parent — re-attaching to the next live ancestor if
//! the parent dies, and moving back to a closer one once it answers again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::guard::{Bad, Daemons, PeerLog, AUTH_DEADLINE};
use super::limit::ConnLimiter;
use super::link::{serve_child, to_relay, write_loop, RelayCtx, LINK_QUEUE};
use super::listen::{accept_loop, Listen};
use super::shutdown::Tree;
use crate::actors::agent::{ExecMode, GetHello, NodeAgent, SetRelay};
use crate::actors::relay::{FromParent, RelayActor, SetUpstream, Upstream};
use crate::actors::stats::ActorStats;
use crate::config::Config;
use crate::exec::record::{records_dir, recover, RecordBook};
use crate::tree::plan::reattach_candidates;
use crate::tree::topology::Topology;
use crate::wire::auth::{AuthError, Authenticator};
use crate::wire::connection::Connection;
use crate::wire::error::WireError;
use crate::wire::messages::Body;

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
    /// `-Z`: the controller refused the node, or could not be asked.
    #[error("cannot join the cluster as a dynamic node: {0}")]
    Join(String),
}

/// Options for one node daemon.
pub struct NodeOptions {
    pub node: String,
    pub mode: ExecMode,
    /// Cancel to stop this daemon at once: its listener, links and actors
    /// end, and its sockets close (so its parent and children see it gone).
    /// The root of the daemon's shutdown tree; [`NodeHandles::stop`] also
    /// waits for the tasks.
    pub shutdown: CancellationToken,
}

/// Handles to a running node daemon (used by the binary, tests and the load harness).
pub struct NodeHandles {
    pub agent: Addr<NodeAgent>,
    pub relay: Addr<RelayActor>,
    /// Every task of this daemon, by subsystem; see [`NodeHandles::stop`].
    tree: Tree,
}

/// Start a node daemon inside the current actix System; returns once it is
/// listening. The upward link runs in the background.
pub async fn start(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    opts: NodeOptions,
) -> Result<NodeHandles, NodedError> {
    start_at(conf, auth, opts, None).await
}

/// [`start`], for a node slurm.conf lists (`joined` `None`) or one that joined dynamically
/// (`-Z`, see `noded_join`): then `conf` holds it and its ancestors, and its rank and the
/// tree's shape are the controller's.
pub async fn start_at(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    opts: NodeOptions,
    joined: Option<super::noded_join::Joined>,
) -> Result<NodeHandles, NodedError> {
    let index = conf
        .node_index(&opts.node)
        .ok_or_else(|| NodedError::UnknownNode(opts.node.clone()))?;
    let nc = conf.nodes[index].clone();
    let (rank, fixed, capacity, known) = match joined {
        Some(j) => (j.rank, j.fixed, j.capacity, j.ancestors),
        None => {
            let (fixed, capacity) = conf.tree_ranks();
            (index as u32, fixed, capacity, Default::default())
        }
    };
    let topo = Arc::new(
        Topology::with_dynamic(fixed, capacity, conf.tree_width)
            .map_err(|e| NodedError::Config(e.to_string()))?,
    );
    let boot_id = super::new_boot_id();
    // What the node registers with: real hardware, found once now.
    let (resources, detected) = match &opts.mode {
        ExecMode::Real { .. } => super::hardware::report(&nc).await,
        ExecMode::Simulated { .. } => (super::hardware::configured(&nc), None),
    };
    // Jobs an earlier daemon on this node left running, found before the
    // first registration so that it reports them (reading the spool blocks:
    // off the event loop).
    let leaf_spool = match &opts.mode {
        ExecMode::Real { spool, .. } => Some(spool.clone()),
        ExecMode::Simulated { .. } => None,
    };
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
    // Only real jobs get a Prolog and an Epilog.
    let script_conf = match &opts.mode {
        ExecMode::Real { conf_path, .. } => Some(conf_path.clone()),
        ExecMode::Simulated { .. } => None,
    };
    let detected_gpus = resources.gpus.clone();
    let registry = crate::actors::registry::ActorRegistry::new(nc.name.clone());
    let agent_stats = ActorStats::new();
    registry.register("agent", &nc.name, &agent_stats);
    let mut agent = NodeAgent::new(
        nc.name.clone(),
        rank,
        boot_id,
        resources,
        opts.mode,
        agent_stats,
    )
    .with_auth(auth.clone())
    .with_key_path(conf.auth_key_path.clone())
    .with_stop(opts.shutdown.clone());
    if let Some((book, adopted)) = records {
        agent = agent.with_records(book, adopted);
    }
    if let Some(spool) = leaf_spool {
        // cgroup.conf, the cgroup mount and hwloc are read off the loop.
        let (c, node, gpus) = (conf.clone(), nc.name.clone(), detected_gpus);
        let leaf = tokio::task::spawn_blocking(move || {
            crate::exec::leaf::Leaf::for_node(&c, &node, index, &spool, detected, &gpus)
        })
        .await
        .map_err(|e| NodedError::Config(format!("node set-up failed: {e}")))?;
        agent = agent.with_leaf(Arc::new(leaf));
    }
    if let Some(conf_path) = script_conf {
        let scripts = crate::exec::prolog::node_script_conf(&conf.prolog);
        agent = agent.with_scripts(scripts, conf_path);
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
    .with_registry(registry.clone())
    .start();
    let _ = agent.send(SetRelay(relay.clone().recipient())).await;
    crate::actors::stall::from_env(&registry);

    let addr = format!("{}:{}", nc.addr, nc.port);
    let listener = super::listen::bind(&addr)
        .await
        .map_err(|source| NodedError::Bind {
            addr: addr.clone(),
            source,
        })?;
    // Stopped in this order: nothing new attaches while links close, and the
    // actors go last, once nothing forwards to them any more.
    let mut tree = Tree::new(opts.shutdown.clone());
    let listener_part = tree.part("listener");
    let links = tree.part("links");
    let uplink = tree.part("uplink");
    let actors = tree.part("actors");
    let daemons = Daemons::resolve(conf.slurm_user.clone()).await;
    let peers = Arc::new(PeerLog::default());
    let ctx = RelayCtx {
        conf: conf.clone(),
        topo: topo.clone(),
        me: Some(rank),
        my_name: nc.name.clone(),
        relay: relay.clone(),
        relay_stats,
        heartbeat: conf.heartbeat_interval(),
        traffic: None,
        shutdown: links.token.clone(),
        daemons: daemons.clone(),
        peers: peers.clone(),
    };
    tracing::info!(node = %nc.name, rank, %addr, parent = ?topo.parent(rank), max_connections = conf.max_connections, "canopy-noded listening");
    let listen = Listen {
        listener,
        limiter: ConnLimiter::new(conf.max_connections as usize),
        auth: auth.clone(),
        boot_id,
        who: format!("canopy-noded {}", nc.name),
    };
    let serve = move |conn, peer| serve_conn(conn, peer, ctx.clone());
    listener_part.spawn(accept_loop(listen, listener_part.clone(), links, serve));
    let up = Uplink {
        me: nc.name.clone(),
        conf,
        topo,
        known,
        rank,
        boot_id,
        auth,
        agent: agent.clone(),
        relay: relay.clone(),
        shutdown: uplink.token.clone(),
        daemons,
        peers,
    };
    uplink.spawn(async move { up.run().await });
    let (a, r, token) = (agent.clone(), relay.clone(), actors.token.clone());
    actors.spawn(async move {
        token.cancelled().await;
        // The agent and relay hold each other's address: stop them explicitly.
        // Jobs keep running (each in its own session), as under slurmd.
        let _ = r.send(crate::actors::relay::Stop).await;
        let _ = a.send(crate::actors::agent::Stop).await;
    });
    Ok(NodeHandles { agent, relay, tree })
}

impl NodeHandles {
    /// Shut this daemon down: stop listening, close every link, stop the
    /// actors; wait for its tasks up to `grace`. Running jobs are left
    /// running. Logs one line as it starts and one when done.
    pub async fn stop(&self, reason: &'static str, grace: Duration) {
        let t0 = std::time::Instant::now();
        tracing::info!(
            signal = reason,
            grace_ms = grace.as_millis() as u64,
            "canopy-noded shutting down"
        );
        let left = self.tree.stop(grace).await;
        let tasks_left: usize = left.iter().map(|(_, n)| n).sum();
        tracing::info!(
            elapsed_ms = t0.elapsed().as_millis() as u64,
            tasks_left,
            "canopy-noded stopped"
        );
    }
}

/// Answer a direct `HopView` from this daemon's relay (its links, its parent link).
async fn answer_hop_view(
    mut conn: Connection,
    corr: u64,
    f: crate::wire::messages::Forward,
    ctx: &RelayCtx,
) {
    use crate::wire::messages::{ForwardReply, NodeCommand, NodeReply, Outcome};
    let NodeCommand::HopView { rank } = f.cmd else {
        return;
    };
    let Some(me) = ctx.me else {
        return;
    };
    // Counted in, as every message to the relay is: its handler counts it out.
    ctx.relay_stats.sent();
    let result = match ctx.relay.send(crate::actors::relay::GetHopView(rank)).await {
        Ok(mut v) => {
            v.direct = true;
            Ok(NodeReply::HopView(v))
        }
        Err(e) => Err(format!("relay unavailable: {e}")),
    };
    let reply = Body::ForwardReply(ForwardReply {
        id: f.id,
        outcomes: vec![Outcome {
            ranks: crate::tree::rankset::RankSet::from_ranks([me]),
            result,
        }],
    });
    if let Err(e) = conn.send(corr, &reply).await {
        tracing::debug!(error = %e, "direct hop view not sent");
    }
}

/// One connection to this node's listener: only descendants attaching
/// (`Hello`, from the daemons' uids) are served. Until its first frame
/// verifies, the peer gets a short deadline.
async fn serve_conn(mut conn: Connection, peer: SocketAddr, ctx: RelayCtx) {
    let stop = ctx.shutdown.clone();
    let first = tokio::select! {
        _ = stop.cancelled() => return,
        f = tokio::time::timeout(AUTH_DEADLINE, conn.recv()) => f,
    };
    match first {
        Ok(Ok(Some(env))) => match env.body {
            Body::Hello(h) => serve_child(conn, h, env.uid, ctx).await,
            // `canopy tree --node`: the controller asks this node's side of its link directly,
            // when the tree no longer reaches it. Daemons' identity only; one answer, then close.
            Body::Forward(f)
                if ctx.daemons.allows(env.uid)
                    && matches!(f.cmd, crate::wire::messages::NodeCommand::HopView { .. }) =>
            {
                answer_hop_view(conn, env.header.corr, *f, &ctx).await
            }
            other => {
                let why = format!("{} (node daemons only accept Hello)", other.kind());
                ctx.peers.record(Bad::Frame, Some(peer), &why);
            }
        },
        Ok(Err(e)) => {
            let kind = match e {
                WireError::Auth(_) | WireError::UnsupportedVersion { .. } => Bad::Auth,
                _ => Bad::Frame,
            };
            ctx.peers.record(kind, Some(peer), &e);
        }
        Ok(Ok(None)) => {}
        Err(_) => {
            let why = format!("no authenticated frame within {AUTH_DEADLINE:?}");
            ctx.peers.record(Bad::AuthTimeout, Some(peer), &why);
        }
    }
}

/// The upward link and its re-attach policy.
struct Uplink {
    conf: Arc<Config>,
    topo: Arc<Topology>,
    /// This node's name.
    me: String,
    /// Dynamic ancestors by rank: their ranks are not their places in `conf`.
    known: std::collections::HashMap<u32, crate::config::NodeConf>,
    rank: u32,
    boot_id: u64,
    auth: Arc<Authenticator>,
    agent: Addr<NodeAgent>,
    relay: Addr<RelayActor>,
    shutdown: CancellationToken,
    /// Whose frames the parent link accepts: a parent impostor (a user
    /// process on a dead relay's port) must not launch jobs here.
    daemons: Daemons,
    peers: Arc<PeerLog>,
}

impl Uplink {
    /// Where to attach, best first: the natural parent, then its ancestors,
    /// then the controller.
    fn candidates(&self) -> Vec<Option<u32>> {
        // A cloud node attaches to the controller directly: its relatives
        // in the tree may be powered down, and their addresses are only
        // known once they register (what Slurm's advice of a TreeWidth as
        // large as the cluster achieves). The tree still routes through it:
        // an attached node heads its own subtree (`tree::plan`).
        // Found by name: a dynamic node's rank is not its place in `conf`.
        let cloud = self
            .conf
            .node_index(&self.me)
            .and_then(|i| self.conf.nodes.get(i))
            .is_some_and(|n| n.state == crate::config::ConfNodeState::Cloud);
        if cloud {
            return vec![None];
        }
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
        // Nor does anyone attach to a cloud node: it may be powered down,
        // and its configured address may mean nothing.
        c.retain(|who| {
            who.and_then(|r| self.node_at(r))
                .is_none_or(|n| n.state != crate::config::ConfNodeState::Cloud)
        });
        c
    }

    /// The node at rank `r`: a dynamic ancestor, or one slurm.conf lists.
    fn node_at(&self, r: u32) -> Option<&crate::config::NodeConf> {
        match self.known.get(&r) {
            Some(n) => Some(n),
            None if r < self.topo.fixed() => self.conf.nodes.get(r as usize),
            None => None,
        }
    }

    fn addr_of(&self, who: Option<u32>) -> String {
        match who.and_then(|r| self.node_at(r)) {
            Some(n) => format!("{}:{}", n.addr, n.port),
            None => format!("{}:{}", self.conf.control_addr, self.conf.slurmctld_port),
        }
    }

    fn name_of(&self, who: Option<u32>) -> String {
        if who == Some(self.rank) {
            return self.me.clone();
        }
        match who.and_then(|r| self.node_at(r)) {
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
            Ok(Ok(Some(env))) if !self.daemons.allows(env.uid) => {
                let why = format!(
                    "{} from {} signed by uid {}",
                    env.body.kind(),
                    self.name_of(who),
                    env.uid
                );
                self.peers.record(Bad::NotDaemon, conn.peer_addr(), &why);
                None
            }
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
                    Ok(Some(env)) if !self.daemons.allows(env.uid) => {
                        let why = format!("{} from {} signed by uid {}", env.body.kind(), self.name_of(who), env.uid);
                        self.peers.record(Bad::NotDaemon, reader.peer_addr(), &why);
                        break;
                    }
                    Ok(Some(env)) => {
                        last_heard = std::time::Instant::now();
                        match env.body {
                            Body::Forward(f) => {
                                if to_relay(&self.relay, FromParent(*f, last_heard)).await.is_err() {
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
        // Awaited, not only aborted: the writer ends inside this (tracked) task.
        writer.abort();
        let _ = writer.await;
    }
}
