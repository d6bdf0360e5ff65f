//! The controller's side of `canopy tree`: a copy of every node's facts and the tree's shape,
//! taken in one pass over the core's state. The folding and rendering happen off the
//! controller's event loop (`daemon::rpc`, `console::tree`), so a view at 100,000 nodes costs
//! the controller one copy, not the whole computation.

use std::sync::Arc;

use actix::prelude::*;

use super::ControllerActor;
use crate::console::tree::NodeFacts;
use crate::policy::authz::Caller;
use crate::tree::topology::Topology;
use crate::wire::messages::{ErrorCode, ErrorReply};

/// Every node's facts, for `canopy tree`.
#[derive(Message)]
#[rtype(result = "Result<TreeFacts, ErrorReply>")]
pub struct GetTreeFacts {
    pub caller: Caller,
    /// `--node`: also give this node's address, to ask it directly if the tree cannot.
    pub node: Option<String>,
}

/// What [`GetTreeFacts`] answers.
#[derive(Debug, Clone)]
pub struct TreeFacts {
    pub topo: Arc<Topology>,
    pub facts: Vec<NodeFacts>,
    /// `host:port` of the node `--node` names, for a direct question.
    pub direct: Option<String>,
}

impl Handler<GetTreeFacts> for ControllerActor {
    type Result = Result<TreeFacts, ErrorReply>;
    fn handle(&mut self, msg: GetTreeFacts, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        // The tree view is the nodes' view folded: hidden where sinfo's would be.
        if self.core.conf().private_data.nodes && !msg.caller.operator {
            return Err(ErrorReply {
                code: ErrorCode::PermissionDenied,
                message: "PrivateData=nodes: only operators may see the node tree".into(),
            });
        }
        let conf = self.core.conf();
        let direct = msg
            .node
            .as_deref()
            .and_then(|n| conf.node_index(n))
            .and_then(|i| conf.nodes.get(i))
            .map(|n| format!("{}:{}", n.addr, n.port));
        Ok(TreeFacts {
            topo: self.topo.clone(),
            facts: self.core.tree_facts(),
            direct,
        })
    }
}
