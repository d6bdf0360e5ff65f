//! Console requests at the controller's door: `canopy tree` and `canopy events`.
//!
//! `canopy tree` takes one copy of the nodes' facts from the controller and folds it on a
//! blocking thread (the controller's loop serves everyone); `--node X` also asks the relays on
//! X's paths, and X itself, through the tree with a short budget, so the answer shows each
//! hop's side. `canopy events` never touches the controller's mailbox: it reads the event
//! log, and a follower waits on the log's wake-up.

use std::time::Duration;

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
pub async fn tree(q: TreeQuery, caller: Caller, h: &ControllerHandles) -> Body {
    let facts = match send_counted(&h.controller, &h.controller_stats, GetTreeFacts { caller }).await
    {
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
    }
    let now = chrono::Utc::now().timestamp();
    let built = tokio::task::spawn_blocking(move || {
        tree::build(&facts.topo, &facts.facts, &q, now, &hops)
    })
    .await;
    match built {
        Ok(report) => Body::Tree(Box::new(report)),
        Err(e) => error(ErrorCode::Internal, format!("tree view failed: {e}")),
    }
}

/// `canopy events [-f] [--since T]`.
pub async fn events(q: EventQuery, h: &ControllerHandles) -> Body {
    Body::Events(Box::new(h.events.query(q).await))
}
