//! `canopy-noded -Z`: a node daemon whose node slurm.conf does not list (Slurm 22.05's
//! `slurmd -Z`). Before it starts, it asks the controller for its place with the node line
//! `slurmd -Z` would send (the hardware it detects, then `--conf`'s attributes, which win), and
//! the controller creates the node, or finds it, and answers with its rank, its line as kept,
//! the relay tree's shape and its ancestors' lines. The daemon then runs as any other at that
//! rank, attaching under its own parent.
//!
//! While the controller cannot be reached it asks again (as slurmd keeps trying to register);
//! a refusal (MaxNodeCount reached, a bad `--conf`) ends the daemon with the controller's words.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::noded::NodedError;
use crate::config::dynamic::{dynamic_line, Detected};
use crate::config::{Config, NodeConf};
use crate::wire::auth::Authenticator;
use crate::wire::connection::Connection;
use crate::wire::messages::{Body, NodeJoined};

const ASK_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Where a joined node sits: its rank, the tree's shape, and the nodes on its way up.
#[derive(Debug, Clone)]
pub struct Joined {
    pub rank: u32,
    pub fixed: u32,
    pub capacity: u32,
    /// Ancestors by rank (their addresses are not in this daemon's slurm.conf).
    pub ancestors: HashMap<u32, NodeConf>,
}

/// What this machine has, for the node line; `None` when `--conf` must say (simulated nodes,
/// or detection failed).
pub async fn detect() -> Option<Detected> {
    match tokio::task::spawn_blocking(super::hardware::detect).await {
        Ok(Ok((r, _))) => Some(Detected {
            cpus: r.cpus,
            boards: r.boards,
            sockets: r.sockets,
            cores_per_socket: r.cores_per_socket,
            threads_per_core: r.threads_per_core,
            real_memory_mb: r.real_memory_mb,
        }),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "hardware detection failed; the node line is --conf's alone");
            None
        }
        Err(_) => None,
    }
}

/// The line a joining node sends: detected hardware (one CPU and 1 MiB, Slurm's defaults,
/// when nothing was detected) under `--conf`'s attributes, and the machine's host name as
/// NodeHostname (slurmctld shows a dynamic node's real host name) unless `--conf` names one.
pub fn line_for(node: &str, hw: Option<Detected>, conf_line: &str, host: Option<&str>) -> String {
    let hw = hw.unwrap_or(Detected {
        cpus: 1,
        boards: 1,
        sockets: 1,
        cores_per_socket: 1,
        threads_per_core: 1,
        real_memory_mb: 1,
    });
    let named = conf_line.split_whitespace().any(|kv| {
        kv.split_once('=')
            .is_some_and(|(k, _)| k.eq_ignore_ascii_case("NodeHostname"))
    });
    match host.filter(|h| !h.is_empty() && !named) {
        Some(h) => dynamic_line(node, &hw, &format!("{conf_line} NodeHostname={h}")),
        None => dynamic_line(node, &hw, conf_line),
    }
}

/// Ask the controller for this node's place until it answers; returns the configuration this
/// daemon runs with (slurm.conf's, plus this node and its ancestors) and where it sits.
pub async fn join(
    conf: &Config,
    auth: Arc<Authenticator>,
    line: &str,
    stop: &CancellationToken,
) -> Result<(Arc<Config>, Joined), NodedError> {
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let daemons = super::guard::Daemons::resolve(conf.slurm_user.clone()).await;
    let mut backoff = Duration::from_millis(100);
    loop {
        let asked = async {
            let mut c = Connection::connect(addr.as_str(), auth.clone(), super::new_boot_id())
                .await
                .map_err(|e| e.to_string())?;
            c.request_timeout(&Body::JoinNode(line.to_string()), ASK_TIMEOUT)
                .await
                .map_err(|e| e.to_string())
        };
        let env = tokio::select! {
            _ = stop.cancelled() => return Err(NodedError::Join("stopped before joining".into())),
            r = asked => r,
        };
        match env {
            Ok(env) if !daemons.allows(env.uid) => {
                return Err(NodedError::Join(format!(
                    "the answer to JoinNode was signed by uid {}, not a daemon",
                    env.uid
                )))
            }
            Ok(env) => match env.body {
                Body::NodeJoined(j) => return placed(conf, *j),
                Body::Error(e) => return Err(NodedError::Join(e.message)),
                other => {
                    return Err(NodedError::Join(format!(
                        "unexpected answer {} to JoinNode",
                        other.kind()
                    )))
                }
            },
            Err(e) => {
                tracing::warn!(controller = %addr, error = %e, "cannot reach the controller to join; trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// The local configuration and place from the controller's answer.
fn placed(conf: &Config, j: NodeJoined) -> Result<(Arc<Config>, Joined), NodedError> {
    let bad = |e: crate::config::dynamic::DynamicError| {
        NodedError::Join(format!("the controller's node line does not read: {e}"))
    };
    let (mut local, _) = conf.with_created_nodes(&j.line, false).map_err(bad)?;
    let mut ancestors = HashMap::new();
    for (rank, line) in &j.ancestors {
        if *rank < j.fixed {
            continue; // slurm.conf lists it; this daemon knows it already
        }
        let (next, at) = local.with_created_nodes(line, false).map_err(bad)?;
        if let Some(&i) = at.first() {
            ancestors.insert(*rank, next.nodes[i as usize].clone());
        }
        local = next;
    }
    tracing::info!(rank = j.rank, fixed = j.fixed, line = %j.line, "joined the cluster as a dynamic node");
    Ok((
        Arc::new(local),
        Joined {
            rank: j.rank,
            fixed: j.fixed,
            capacity: j.capacity,
            ancestors,
        },
    ))
}
