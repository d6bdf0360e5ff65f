//! Console requests at the controller's door: `canopy tree` and `canopy events`.
//!
//! `canopy tree` takes one copy of the nodes' facts from the controller and folds it on a
//! blocking thread (the controller's loop serves everyone); `--node X` also asks the relays on
//! X's paths, and X itself, through the tree with a short budget, so the answer shows each
//! hop's side. `canopy events` never touches the controller's mailbox: it reads the event
//! log, and a follower waits on the log's wake-up.

use std::time::Duration;

use super::rpc::CtldInfo;
use crate::actors::controller::console::GetTreeFacts;
use crate::actors::controller::ControllerHandles;
use crate::actors::relay::Fanout;
use crate::actors::stats::send_counted;
use crate::console::events::EventQuery;
use crate::console::tree::{self, HopReport, TreeQuery};
use crate::policy::authz::Caller;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{Body, ErrorCode, ErrorReply, NodeCommand, NodeReply};

/// How long `--node` waits for the hops' answers: a hop that has not answered by then is shown
/// as not answering (the view says so), rather than holding the operator up.
const HOP_BUDGET: Duration = Duration::from_millis(1500);

fn error(code: ErrorCode, message: impl Into<String>) -> Body {
    Body::Error(ErrorReply {
        code,
        message: message.into(),
    })
}

fn gone() -> Body {
    error(ErrorCode::Internal, "controller is shutting down")
}

/// `canopy tree [--depth N] [--down] [--node X]`.
pub async fn tree(q: TreeQuery, caller: Caller, h: &ControllerHandles, info: &CtldInfo) -> Body {
    let msg = GetTreeFacts {
        caller,
        node: q.node.clone(),
    };
    let facts = match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => return Body::Error(e),
        Err(_) => return gone(),
    };
    let mut hops = Vec::new();
    if let Some(name) = &q.node {
        let Some(rank) = facts
            .facts
            .iter()
            .position(|f| !f.vacant && &f.name == name)
        else {
            return error(
                ErrorCode::InvalidNodeName,
                format!("--node {name}: no such node"),
            );
        };
        let ask = tree::hops_to_ask(&facts.topo, &facts.facts, rank as u32);
        let msg = Fanout {
            targets: RankSet::from_ranks(ask),
            cmd: NodeCommand::HopView { rank: rank as u32 },
            budget: HOP_BUDGET,
        };
        let Ok(outcomes) = send_counted(&h.relay, &h.relay_stats, msg).await else {
            return gone();
        };
        for o in outcomes {
            for r in o.ranks.iter() {
                let answer: Result<HopReport, String> = match &o.result {
                    Ok(NodeReply::HopView(v)) => Ok(v.clone()),
                    Ok(other) => Err(format!("unexpected answer {other:?}")),
                    Err(e) => Err(e.clone()),
                };
                hops.push((r, answer));
            }
        }
        // The tree did not reach the node: ask it on its own listener, so the view can show
        // its side of the link too (a parent that lost it while it thinks it is connected).
        let rank = rank as u32;
        if !hops.iter().any(|(r, a)| *r == rank && a.is_ok()) {
            if let Some(addr) = facts.direct.clone() {
                let answer = ask_directly(&addr, rank, info).await;
                hops.retain(|(r, _)| *r != rank);
                hops.push((rank, answer));
            }
        }
    }
    let now = chrono::Utc::now().timestamp();
    let built =
        tokio::task::spawn_blocking(move || tree::build(&facts.topo, &facts.facts, &q, now, &hops))
            .await;
    match built {
        Ok(report) => Body::Tree(Box::new(report)),
        Err(e) => error(ErrorCode::Internal, format!("tree view failed: {e}")),
    }
}

/// One `HopView` to the node at `addr`, bypassing the tree, within [`HOP_BUDGET`].
async fn ask_directly(addr: &str, rank: u32, info: &CtldInfo) -> Result<HopReport, String> {
    use crate::wire::connection::Connection;
    use crate::wire::messages::Forward;
    let asked = async {
        let mut conn = Connection::connect(addr, info.auth.clone(), info.boot_id)
            .await
            .map_err(|e| format!("not reachable directly either ({e})"))?;
        let fwd = Forward {
            id: 0,
            targets: RankSet::from_ranks([rank]),
            budget_ms: HOP_BUDGET.as_millis() as u64,
            cmd: NodeCommand::HopView { rank },
            origin: 0,
        };
        let env = conn
            .request(&Body::Forward(Box::new(fwd)))
            .await
            .map_err(|e| format!("no answer directly either ({e})"))?;
        if !info.daemons.allows(env.uid) {
            return Err(format!(
                "direct answer signed by uid {}, not a daemon",
                env.uid
            ));
        }
        match env.body {
            Body::ForwardReply(r) => r
                .outcomes
                .into_iter()
                .find_map(|o| match o.result {
                    Ok(NodeReply::HopView(v)) => Some(Ok(v)),
                    Err(e) => Some(Err(e)),
                    Ok(_) => None,
                })
                .unwrap_or_else(|| Err("direct answer without a view".into())),
            other => Err(format!("direct answer {}", other.kind())),
        }
    };
    tokio::time::timeout(HOP_BUDGET, asked)
        .await
        .unwrap_or_else(|_| Err("no answer in time, through the tree or directly".into()))
}

/// `canopy events [-f] [--since T]`.
pub async fn events(q: EventQuery, h: &ControllerHandles) -> Body {
    Body::Events(Box::new(h.events.query(q).await))
}
