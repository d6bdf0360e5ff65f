//! Many node daemons in one process, for load testing (like
//! `flux start --test-size=N`). Each simulated node is the production node
//! daemon — registration, heartbeats, relay role, fan-out, its own listener
//! and its own TCP link to its parent — with only the executor replaced: a
//! job "runs" by sleeping (`ExecMode::Simulated`).
//!
//! Nodes get distinct loopback addresses (127.x.y.z, all routed to `lo` on
//! Linux), so N nodes need no more than one port number.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::actors::agent::ExecMode;
use crate::config::Config;
use crate::daemon::noded::{start, NodeOptions, NodedError};
use crate::wire::auth::Authenticator;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("cannot raise the open-file limit to {wanted} (hard limit {hard}); run as root or raise `ulimit -Hn`")]
    FdLimit { wanted: u64, hard: u64 },
    #[error("cannot read the open-file limit: {0}")]
    Rlimit(nix::Error),
    #[error("simulated node {node}: {source}")]
    Node { node: String, source: NodedError },
}

/// The loopback address of simulated node `rank` (never 127.0.0.x, which the
/// controller and tools use).
pub fn node_addr(rank: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 1 + (rank >> 16) as u8, (rank >> 8) as u8, rank as u8)
}

/// Raise RLIMIT_NOFILE to at least `wanted` (up to the hard limit).
pub fn raise_fd_limit(wanted: u64) -> Result<u64, SimError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(SimError::Rlimit)?;
    if soft >= wanted {
        return Ok(soft);
    }
    if hard < wanted {
        // Root may raise the hard limit itself.
        if setrlimit(Resource::RLIMIT_NOFILE, wanted, wanted).is_ok() {
            return Ok(wanted);
        }
        return Err(SimError::FdLimit { wanted, hard });
    }
    setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).map_err(SimError::Rlimit)?;
    Ok(wanted)
}

/// One running simulated node.
pub struct SimNode {
    pub rank: u32,
    pub shutdown: CancellationToken,
}

/// Start the simulated nodes for `ranks` inside the current actix System.
pub async fn start_nodes(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    ranks: impl IntoIterator<Item = u32>,
    run_for: Duration,
) -> Result<Vec<SimNode>, SimError> {
    let mut out = Vec::new();
    for rank in ranks {
        let Some(nc) = conf.nodes.get(rank as usize) else {
            continue;
        };
        let shutdown = CancellationToken::new();
        let opts = NodeOptions {
            node: nc.name.clone(),
            mode: ExecMode::Simulated { run_for },
            shutdown: shutdown.clone(),
        };
        start(conf.clone(), auth.clone(), opts)
            .await
            .map_err(|source| SimError::Node {
                node: nc.name.clone(),
                source,
            })?;
        out.push(SimNode { rank, shutdown });
    }
    Ok(out)
}

/// Start `count` simulated dynamic nodes (`canopy-noded -Z`), `z00001`... from `first`, each
/// on its own loopback address ([`node_addr`] of its number) with `conf_line`'s attributes
/// (a `Port=` and the hardware): all ask the controller at once, as a cloud burst would, then
/// run at the ranks they were given.
pub async fn start_dynamic_nodes(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    first: u32,
    count: u32,
    conf_line: &str,
    run_for: Duration,
) -> Result<Vec<SimNode>, SimError> {
    use crate::daemon::noded::start_at;
    use crate::daemon::noded_join::{join, line_for};
    let asks = (first..first.saturating_add(count)).map(|i| {
        let name = format!("z{:05}", i + 1);
        let conf_line = format!("{conf_line} NodeAddr={}", node_addr(i));
        let line = line_for(&name, None, &conf_line, None);
        let (conf, auth) = (conf.clone(), auth.clone());
        async move {
            let shutdown = CancellationToken::new();
            let r = join(&conf, auth, &line, &shutdown).await;
            (name, shutdown, r)
        }
    });
    let mut out = Vec::new();
    for (name, shutdown, r) in futures::future::join_all(asks).await {
        let fail = |source| SimError::Node {
            node: name.clone(),
            source,
        };
        let (local, joined) = r.map_err(fail)?;
        let rank = joined.rank;
        let opts = NodeOptions {
            node: name.clone(),
            mode: ExecMode::Simulated { run_for },
            shutdown: shutdown.clone(),
        };
        start_at(local, auth.clone(), opts, Some(joined))
            .await
            .map_err(fail)?;
        out.push(SimNode { rank, shutdown });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_off_127_0() {
        let a: std::collections::HashSet<Ipv4Addr> = (0..70_000).map(node_addr).collect();
        assert_eq!(a.len(), 70_000);
        assert!(a
            .iter()
            .all(|ip| ip.octets()[0] == 127 && ip.octets()[1] != 0));
    }
}
