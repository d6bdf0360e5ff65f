//! The console's requests at the controller: `canopy ping`, `canopy trace
//! fanout` and `canopy debug`. Each is one fan-out through the relay tree
//! (the relays do the stamping and the folding of identical answers), then
//! the pure folds of `console::trace`, then rank numbers turned into names.
//! Nothing here runs unless an operator asks: no polling, no gathering.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::actors::controller::{ControllerHandles, GetRanks, GetRanksReply, NamesOf};
use crate::actors::relay::{ConsoleFanout, GetFanoutRecords};
use crate::actors::stats::send_counted;
use crate::console::trace::{fold_fanout, fold_paths, straggler_threshold, FanoutRecord};
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    Body, DebugReport, DebugRequest, ErrorCode, ErrorReply, FanoutTraceReport, FanoutTraceRequest,
    NamedPath, NodeCommand, NodeReply, Outcome, ProbeReport, ProbeRequest, ProbeRound,
    PROBE_MAX_COUNT,
};

/// The most slowest-paths or late nodes one answer names one by one.
const MAX_KEEP: u32 = 100;
/// Recent broadcasts listed when none matched.
const RECENT: usize = 10;

fn error(code: ErrorCode, message: impl Into<String>) -> Body {
    Body::Error(ErrorReply {
        code,
        message: message.into(),
    })
}

fn gone() -> Body {
    error(ErrorCode::Internal, "controller is shutting down")
}

async fn ranks_of(nodes: Option<&str>, h: &ControllerHandles) -> Result<RankSet, Body> {
    let Some(list) = nodes else {
        return Ok(RankSet::from_range(0..h.nodes_now()));
    };
    match send_counted(
        &h.controller,
        &h.controller_stats,
        GetRanks(list.to_string()),
    )
    .await
    {
        Ok(GetRanksReply(Ok(r))) if r.is_empty() => {
            Err(error(ErrorCode::InvalidNodeName, "no nodes named"))
        }
        Ok(GetRanksReply(Ok(r))) => Ok(r),
        Ok(GetRanksReply(Err(e))) => Err(error(ErrorCode::InvalidNodeName, e)),
        Err(_) => Err(gone()),
    }
}

async fn hostlist(ranks: RankSet, h: &ControllerHandles) -> String {
    send_counted(&h.controller, &h.controller_stats, NamesOf(ranks))
        .await
        .unwrap_or_default()
}

/// Each rank of `ranks` with its node name (one controller message).
async fn names(ranks: RankSet, h: &ControllerHandles) -> HashMap<u32, String> {
    let list = hostlist(ranks.clone(), h).await;
    // NamesOf keeps rank order, and expanding a compressed list returns it.
    let expanded = crate::config::hostlist::expand(&list).unwrap_or_default();
    ranks.iter().zip(expanded).collect()
}

async fn fan(
    targets: RankSet,
    cmd: NodeCommand,
    budget: Duration,
    h: &ControllerHandles,
) -> Result<Vec<Outcome>, Body> {
    let msg = ConsoleFanout {
        targets,
        cmd,
        budget,
        asked: Instant::now(),
    };
    send_counted(&h.relay, &h.relay_stats, msg)
        .await
        .map_err(|_| gone())
}

fn budget(ms: u64) -> Duration {
    // At least a second: a probe that times out says nothing about the tree.
    Duration::from_millis(ms.clamp(1000, 120_000))
}

/// `canopy ping`.
pub async fn probe(req: ProbeRequest, h: &ControllerHandles) -> Body {
    if req.count == 0 || req.count > PROBE_MAX_COUNT {
        return error(
            ErrorCode::InvalidRequest,
            format!("--count must be 1 to {PROBE_MAX_COUNT} (got {})", req.count),
        );
    }
    let targets = match ranks_of(Some(&req.nodes), h).await {
        Ok(t) => t,
        Err(b) => return b,
    };
    let keep = req.keep.clamp(1, MAX_KEEP) as usize;
    let mut report = ProbeReport::default();
    for _ in 0..req.count {
        let t0 = Instant::now();
        let outcomes = match fan(
            targets.clone(),
            NodeCommand::Probe,
            budget(req.budget_ms),
            h,
        )
        .await
        {
            Ok(o) => o,
            Err(b) => return b,
        };
        let elapsed_us = t0.elapsed().as_micros() as u64;
        let mut paths = Vec::new();
        let mut failed = Vec::new();
        for o in outcomes {
            match o.result {
                Ok(NodeReply::Probe(p)) => {
                    for r in o.ranks.iter() {
                        paths.push((r, p.clone()));
                    }
                }
                Ok(other) => failed.push((o.ranks, format!("unexpected answer {other:?}"))),
                Err(e) => failed.push((o.ranks, e)),
            }
        }
        let fold = fold_paths(&paths, keep);
        let mut wanted = RankSet::from_ranks(fold.stragglers.iter().copied());
        for (r, b) in &fold.slowest {
            wanted.insert(*r);
            for l in &b.lines {
                if let Some(x) = l.rank {
                    wanted.insert(x);
                }
            }
        }
        let named = names(wanted, h).await;
        let name = |r: u32| named.get(&r).cloned().unwrap_or_else(|| format!("rank{r}"));
        let mut round = ProbeRound {
            targets: targets.len(),
            answered: paths.len() as u64,
            spread: fold.spread.clone(),
            omitted: fold.omitted,
            straggler_threshold_us: straggler_threshold(fold.spread.p50_us),
            elapsed_us,
            ..Default::default()
        };
        round.slowest = fold
            .slowest
            .into_iter()
            .map(|(r, b)| NamedPath {
                target: name(r),
                hops: b
                    .lines
                    .iter()
                    .map(|l| l.rank.map_or_else(|| "controller".to_string(), name))
                    .collect(),
                breakdown: b,
            })
            .collect();
        round.stragglers = hostlist(RankSet::from_ranks(fold.stragglers), h).await;
        for (ranks, why) in failed {
            round.failed.push((hostlist(ranks, h).await, why));
        }
        report.rounds.push(round);
    }
    Body::ProbeReply(Box::new(report))
}

/// `canopy trace fanout`.
pub async fn trace_fanout(req: FanoutTraceRequest, h: &ControllerHandles) -> Body {
    let ring: Vec<FanoutRecord> =
        match send_counted(&h.relay, &h.relay_stats, GetFanoutRecords).await {
            Ok(r) => r,
            Err(_) => return gone(),
        };
    let mut report = FanoutTraceReport {
        recent: ring
            .iter()
            .rev()
            .take(RECENT)
            .rev()
            .map(|r| (r.kind.to_string(), r.job_id, r.origin))
            .collect(),
        ..Default::default()
    };
    let Some(root) = crate::console::trace::pick(ring.iter(), &req.pick).cloned() else {
        return Body::FanoutTraceReply(Box::new(report));
    };
    // Every node is asked (the record does not keep the target set); those
    // that were not targets answer `None` and are simply not walked.
    let all = RankSet::from_range(0..h.nodes_now());
    let cmd = NodeCommand::FanoutTrace {
        origin: root.origin,
    };
    let outcomes = match fan(all, cmd, budget(req.budget_ms), h).await {
        Ok(o) => o,
        Err(b) => return b,
    };
    let mut records = HashMap::new();
    for o in outcomes {
        match o.result {
            Ok(NodeReply::FanoutRecord(Some(rec))) => {
                for r in o.ranks.iter() {
                    records.insert(r, (*rec).clone());
                }
            }
            Ok(_) => {}
            Err(e) => report.unreachable.push((hostlist(o.ranks, h).await, e)),
        }
    }
    let mut fold = fold_fanout(&root, &records);
    let keep = req.keep.clamp(1, MAX_KEEP) as usize;
    report.late_omitted = fold.late.len().saturating_sub(keep) as u64;
    fold.late.truncate(keep);
    let mut wanted = RankSet::new();
    for s in &fold.subtrees {
        wanted.insert(s.child);
    }
    for (r, _) in fold.critical_path.iter().chain(fold.late.iter()) {
        wanted.insert(*r);
    }
    for r in fold.unanswered.iter().chain(fold.no_record.iter()) {
        wanted.insert(*r);
    }
    let mut named: Vec<(u32, String)> = names(wanted, h).await.into_iter().collect();
    named.sort();
    report.names = named;
    report.fold = Some(fold);
    Body::FanoutTraceReply(Box::new(report))
}

/// `canopy debug`: raise, clear or show on a node set.
pub async fn debug(req: DebugRequest, h: &ControllerHandles) -> Body {
    let cmd = match &req.set {
        None => NodeCommand::ShowDebug,
        Some(set) => {
            if req.nodes.is_none() {
                return error(
                    ErrorCode::InvalidRequest,
                    "raising log detail needs the nodes it applies to (-w NODESET)",
                );
            }
            if !set.flags.is_empty() {
                let checked = crate::console::debug::parse_flags(&set.flags.join(","))
                    .and_then(|_| crate::console::debug::parse_level(&set.level))
                    .and_then(|_| crate::console::debug::check_duration(set.for_secs));
                if let Err(e) = checked {
                    return error(ErrorCode::InvalidRequest, e.to_string());
                }
            }
            NodeCommand::SetDebug(set.clone())
        }
    };
    let targets = match ranks_of(req.nodes.as_deref(), h).await {
        Ok(t) => t,
        Err(b) => return b,
    };
    let outcomes = match fan(targets, cmd, budget(req.budget_ms), h).await {
        Ok(o) => o,
        Err(b) => return b,
    };
    let mut report = DebugReport::default();
    // The relays already folded identical answers into one outcome each.
    for o in outcomes {
        let list = hostlist(o.ranks, h).await;
        match o.result {
            Ok(NodeReply::Debug(v)) => report.groups.push((list, v)),
            Ok(other) => report
                .failed
                .push((list, format!("unexpected answer {other:?}"))),
            Err(e) => report.failed.push((list, e)),
        }
    }
    Body::DebugReply(report)
}
