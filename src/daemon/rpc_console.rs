//! The controller's side of `canopy top` and `canopy stats`: choosing the
//! daemons in scope, one fan-out whose answers every relay folds on the way
//! up, the controller's own actors read from their published counters, and
//! the latency histograms.
//!
//! Nothing here runs unless a client asks: no timer gathers anything while
//! nobody watches.

use std::time::{Duration, Instant};

use crate::actors::controller::{ControllerHandles, GetRanks, GetRanksReply, NamesOf};
use crate::actors::relay::Fanout;
use crate::actors::stats::send_counted;
use crate::console::top::{self, TopQuery, TopReport, TopSummary};
use crate::policy::authz::Caller;
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{Body, ErrorCode, ErrorReply, LatencyQuery, NodeCommand, NodeReply};

/// The time each daemon gets to answer a top; the hops add their margins.
const TOP_BUDGET: Duration = Duration::from_millis(1500);

fn error(code: ErrorCode, message: impl Into<String>) -> Body {
    Body::Error(ErrorReply {
        code,
        message: message.into(),
    })
}

fn gone() -> Body {
    error(ErrorCode::Internal, "controller is shutting down")
}

/// The rank of one node named by the client.
async fn rank_of(name: &str, h: &ControllerHandles) -> Result<u32, Body> {
    let Ok(GetRanksReply(r)) = send_counted(
        &h.controller,
        &h.controller_stats,
        GetRanks(name.to_string()),
    )
    .await
    else {
        return Err(gone());
    };
    let ranks = r.map_err(|e| error(ErrorCode::InvalidNodeName, e))?;
    let mut it = ranks.iter();
    match (it.next(), it.next()) {
        (Some(rank), None) => Ok(rank),
        _ => Err(error(
            ErrorCode::InvalidNodeName,
            format!("'{name}' must name exactly one node"),
        )),
    }
}

/// `canopy top`.
pub async fn top(q: TopQuery, h: &ControllerHandles) -> Body {
    let t0 = Instant::now();
    let (scope, targets, with_ctld) = match (&q.node, &q.subtree) {
        (Some(_), Some(_)) => {
            return error(
                ErrorCode::InvalidRequest,
                "--node and --subtree cannot be given together",
            )
        }
        (Some(n), None) if n == "controller" => {
            ("node controller".to_string(), RankSet::new(), true)
        }
        (Some(n), None) => match rank_of(n, h).await {
            Ok(r) => (format!("node {n}"), RankSet::from_ranks([r]), false),
            Err(b) => return b,
        },
        (None, Some(n)) => match rank_of(n, h).await {
            Ok(r) => (
                format!("subtree {n}"),
                RankSet::from_range(h.topo.subtree(r)),
                false,
            ),
            Err(b) => return b,
        },
        (None, None) => (
            "cluster".to_string(),
            RankSet::from_range(0..h.nodes_now()),
            true,
        ),
    };
    let asked = targets.len() + u64::from(with_ctld);
    let mut summaries: Vec<TopSummary> = Vec::new();
    let mut missing = Vec::new();
    if !targets.is_empty() {
        let msg = Fanout {
            targets,
            cmd: NodeCommand::TopActors(q.clone()),
            budget: root_budget(TOP_BUDGET, h.topo.max_depth()),
        };
        let Ok(outcomes) = send_counted(&h.relay, &h.relay_stats, msg).await else {
            return gone();
        };
        for o in outcomes {
            match o.result {
                Ok(NodeReply::Top(s)) => summaries.push(*s),
                Ok(other) => missing.push((
                    names(o.ranks, h).await,
                    format!("unexpected reply {other:?}"),
                )),
                Err(why) => missing.push((names(o.ranks, h).await, why)),
            }
        }
    }
    // The controller's own actors, read from their counters: this answers
    // even while the controller actor is stuck in a handler.
    let summary = match (with_ctld, summaries.len()) {
        (true, _) => {
            let own = h.registry.summary(&q);
            top::absorb(summaries, own, &q)
        }
        (false, 1) => summaries.remove(0),
        (false, _) => top::fold("controller", summaries, &q),
    };
    // What `top` finds stuck goes to the event log too (repeats fold there).
    for s in &summary.stuck {
        let who = format!("{} {} {}", s.daemon, s.kind, s.name);
        h.events
            .actor_stuck(&who, Duration::from_millis(q.stuck_ms));
    }
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    tracing::debug!(scope = %scope, asked, missing = missing.len(), elapsed_ms, "top answered");
    Body::Top(Box::new(TopReport::new(
        scope, q, summary, asked, missing, elapsed_ms,
    )))
}

async fn names(ranks: RankSet, h: &ControllerHandles) -> String {
    send_counted(&h.controller, &h.controller_stats, NamesOf(ranks))
        .await
        .unwrap_or_default()
}

/// `canopy stats`: the histograms, then (operators only) a reset.
pub fn latency(q: LatencyQuery, caller: Caller, h: &ControllerHandles) -> Body {
    if q.reset && !caller.operator {
        return error(
            ErrorCode::PermissionDenied,
            "only operators may reset the statistics",
        );
    }
    let r = h.latency.report();
    if q.reset {
        h.latency.reset(chrono::Utc::now().timestamp());
    }
    Body::Latency(Box::new(r))
}

/// After a client request is answered: its time, by kind and by user (the
/// uid: no name lookup on the daemon's path; the CLI shows names).
pub fn record(h: &ControllerHandles, kind: &str, uid: u32, took: Duration) {
    h.latency
        .record_request(kind, &uid.to_string(), took.as_micros() as u64);
}
