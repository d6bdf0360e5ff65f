//! Dynamic node requests at the controller's door: `scontrol create node` and `scontrol delete
//! nodename=` (operators), and `canopy-noded -Z` asking for its place (the daemons' identity
//! only: anyone else could otherwise claim a node's name and address).

use std::net::SocketAddr;

use super::rpc::CtldInfo;
use crate::actors::controller::dynamic::{ChangeNodes, JoinNode};
use crate::actors::controller::ControllerHandles;
use crate::actors::stats::send_counted;
use crate::ctld::Command;
use crate::policy::authz::Caller;
use crate::wire::messages::{Body, ErrorCode, ErrorReply};

fn gone() -> Body {
    Body::Error(ErrorReply {
        code: ErrorCode::Internal,
        message: "controller is shutting down".into(),
    })
}

async fn change(cmd: Command, h: &ControllerHandles) -> Body {
    match send_counted(&h.controller, &h.controller_stats, ChangeNodes(cmd)).await {
        Ok(Ok(_)) => Body::Ok,
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}

/// `scontrol create NodeName=...`.
pub async fn create(line: String, caller: Caller, h: &ControllerHandles) -> Body {
    change(Command::CreateNodes { line, caller }, h).await
}

/// `scontrol delete nodename=...`.
pub async fn delete(names: String, caller: Caller, h: &ControllerHandles) -> Body {
    change(Command::DeleteNodes { names, caller }, h).await
}

/// `canopy-noded -Z`: the node is created (or found) and told its rank.
pub async fn join(
    line: String,
    uid: u32,
    peer: SocketAddr,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    if !info.daemons.allows(uid) {
        let why = format!("JoinNode signed by uid {uid}");
        info.peers
            .record(super::guard::Bad::NotDaemon, Some(peer), &why);
        return super::ctld::not_daemon_reply(uid, &info.daemons);
    }
    let msg = JoinNode {
        line,
        peer: Some(peer.ip().to_string()),
    };
    match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(joined)) => Body::NodeJoined(Box::new(joined)),
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}
