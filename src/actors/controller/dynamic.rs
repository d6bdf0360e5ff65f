//! The controller actor's side of dynamic nodes (`ctld/dynamic.rs` decides): `scontrol
//! create/delete node` and a joining `canopy-noded -Z` go to the core, and the answer leaves
//! only once the node's line is on disk. A joining daemon is also told the relay tree's shape
//! and its ancestors' lines, so that it attaches under its own parent.

use std::sync::Arc;

use actix::prelude::*;
use futures::FutureExt;

use super::ControllerActor;
use crate::config::dynamic::node_line;
use crate::ctld::{Command, NodePlace, Reply};
use crate::wire::messages::{ErrorCode, ErrorReply, NodeJoined};

/// `scontrol create NodeName=...` or `scontrol delete nodename=...` (a [`Command::CreateNodes`]
/// or [`Command::DeleteNodes`]).
#[derive(Message)]
#[rtype(result = "Result<Vec<NodePlace>, ErrorReply>")]
pub struct ChangeNodes(pub Command);

/// `canopy-noded -Z` asks for its place; `peer` is where the request came from.
#[derive(Message)]
#[rtype(result = "Result<NodeJoined, ErrorReply>")]
pub struct JoinNode {
    pub line: String,
    pub peer: Option<String>,
}

fn unsaved() -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message: "could not save node state".into(),
    }
}

impl Handler<ChangeNodes> for ControllerActor {
    type Result = ResponseFuture<Result<Vec<NodePlace>, ErrorReply>>;
    fn handle(&mut self, msg: ChangeNodes, ctx: &mut Context<Self>) -> Self::Result {
        let done = self.run(msg.0, ctx);
        Box::pin(done.map(|reply| match reply {
            Some(Reply::Nodes(r)) => r,
            Some(Reply::Done(r)) => r.map(|()| Vec::new()),
            _ => Err(unsaved()),
        }))
    }
}

impl Handler<JoinNode> for ControllerActor {
    type Result = ResponseFuture<Result<NodeJoined, ErrorReply>>;
    fn handle(&mut self, msg: JoinNode, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::JoinNode {
            line: msg.line,
            peer: msg.peer,
        };
        let done = self.run(cmd, ctx);
        // The configuration and tree as the core left them: the new node is in it.
        let (conf, topo) = (self.core.conf().clone(), self.topo.clone());
        Box::pin(done.map(move |reply| {
            let placed = match reply {
                Some(Reply::Nodes(r)) => r?,
                _ => return Err(unsaved()),
            };
            let p = placed.into_iter().next().ok_or_else(unsaved)?;
            let ancestors = topo
                .ancestors(p.rank)
                .into_iter()
                // A deleted node's rank is a hole: the daemon skips to the
                // next ancestor up (or the controller).
                .filter_map(|r| conf.nodes.get(r as usize).map(|n| (r, n)))
                .filter(|(_, n)| !n.vacant)
                .map(|(r, n)| (r, node_line(n)))
                .collect();
            Ok(NodeJoined {
                rank: p.rank,
                line: p.line,
                fixed: topo.fixed(),
                capacity: topo.len(),
                ancestors,
            })
        }))
    }
}

/// The configuration a controller starts with: the file's, and the dynamic nodes the store
/// kept, at their ranks (each line that no longer applies is logged and left out).
pub(super) fn with_stored(
    conf: Arc<crate::config::Config>,
    stored: &[(u32, String)],
) -> Arc<crate::config::Config> {
    if stored.is_empty() {
        return conf;
    }
    let before = conf.warnings.len();
    let restored = conf.with_stored_nodes(stored);
    for w in &restored.warnings[before..] {
        tracing::warn!("{w}");
    }
    tracing::info!(nodes = stored.len(), "dynamic nodes restored");
    Arc::new(restored)
}
