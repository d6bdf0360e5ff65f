//! Client requests to the controller (what the CLI sends): one function per
//! request kind, mapping a `Body` to actor messages and back.
//!
//! Authorization lives here because it depends on the verified uid that
//! travels beside the message, never inside it.

use std::sync::Arc;

use super::limit::ConnLimiter;
use super::stats::Traffic;
use crate::actors::controller::GetCounts;
use crate::actors::controller::{
    Admit, Cancel, CancelStep, ControllerHandles, GetAcct, GetJobs, GetNodes, GetPartitions,
    GetRanks, GetRanksReply, GetStatus, NamesOf, Reconfigure, StartStep, StepDone, UpdateJobs,
    UpdateNodes,
};
use crate::actors::partition::ValidateSubmit;
use crate::actors::relay::Fanout;
use crate::actors::stats::send_counted;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    AcctQuery, Body, BroadcastReply, BroadcastRequest, CancelRequest, CtldStats, Envelope,
    ErrorCode, ErrorReply, JobQuery, NodeCommand, NodeQuery, NodeUpdate, PongReply,
};
use crate::wire::types::JobSubmit;

/// Facts about the controller the RPC layer reports.
#[derive(Clone)]
pub struct CtldInfo {
    pub host: String,
    pub boot_id: u64,
    pub started: i64,
    /// The uid the controller runs as: it and root are operators.
    pub slurm_uid: u32,
    pub traffic: Arc<Traffic>,
    /// uid → user name, so submissions do not each cost a passwd lookup.
    pub users: Arc<std::sync::Mutex<std::collections::HashMap<u32, String>>>,
    /// The client/node port's connection limit and its counters.
    pub conns: Arc<ConnLimiter>,
}

impl CtldInfo {
    fn user_name(&self, uid: u32) -> String {
        if let Ok(mut cache) = self.users.lock() {
            return cache.entry(uid).or_insert_with(|| user_name(uid)).clone();
        }
        user_name(uid)
    }
}

fn error(code: ErrorCode, message: impl Into<String>) -> Body {
    Body::Error(ErrorReply {
        code,
        message: message.into(),
    })
}

fn gone() -> Body {
    error(ErrorCode::Internal, "controller is shutting down")
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// Answer one client request.
pub async fn handle(env: Envelope, h: &ControllerHandles, info: &CtldInfo) -> Body {
    let operator = env.uid == 0 || env.uid == info.slurm_uid;
    match env.body {
        Body::Ping => Body::Pong(PongReply {
            host: info.host.clone(),
            boot_id: info.boot_id,
            started: info.started,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }),
        Body::SubmitJob(s) => submit(*s, env.uid, operator, h, info).await,
        Body::QueryJobs(JobQuery { job_ids, brief, .. }) => {
            let msg = GetJobs {
                ids: job_ids,
                brief,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(jobs) => Body::Jobs(jobs),
                Err(_) => gone(),
            }
        }
        Body::QueryNodes(NodeQuery { names }) => {
            match send_counted(&h.controller, &h.controller_stats, GetNodes { names }).await {
                Ok(n) => Body::Nodes(n),
                Err(_) => gone(),
            }
        }
        Body::QueryPartitions => {
            match send_counted(&h.controller, &h.controller_stats, GetPartitions).await {
                Ok(p) => Body::Partitions(p),
                Err(_) => gone(),
            }
        }
        Body::CancelJobs(req) => cancel(req, env.uid, operator, h).await,
        Body::CancelStep(req) => {
            let msg = CancelStep {
                req,
                uid: env.uid,
                operator,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(r) => Body::CancelReply(r),
                Err(_) => gone(),
            }
        }
        Body::UpdateNodes(update) => update_nodes(update, env.uid, operator, h).await,
        Body::QueryStatus => {
            match send_counted(&h.controller, &h.controller_stats, GetStatus).await {
                Ok(s) => Body::Status(Box::new(s)),
                Err(_) => gone(),
            }
        }
        Body::QueryStats => stats(h, info).await,
        Body::LaunchStep(req) => {
            let msg = StartStep {
                req: *req,
                uid: env.uid,
                operator,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Ok(l)) => Body::StepLaunched(l),
                Ok(Err(e)) => Body::Error(e),
                Err(_) => gone(),
            }
        }
        Body::StepComplete(done) => {
            let msg = StepDone {
                done,
                uid: env.uid,
                operator,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Ok(())) => Body::Ok,
                Ok(Err(e)) => Body::Error(e),
                Err(_) => gone(),
            }
        }
        Body::UpdateJobs(update) => {
            let msg = UpdateJobs {
                update,
                operator,
                uid: env.uid,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(r) => Body::UpdateJobsReply(r),
                Err(_) => gone(),
            }
        }
        Body::QueryAcct(mut q) => {
            // Users see their own jobs unless they are operators.
            if !operator {
                q.uids = vec![env.uid];
            }
            acct(q, h).await
        }
        Body::Reconfigure if operator => {
            match send_counted(&h.controller, &h.controller_stats, Reconfigure).await {
                Ok(Ok(())) => Body::Ok,
                Ok(Err(e)) => error(ErrorCode::InvalidConfig, &e),
                Err(_) => gone(),
            }
        }
        // Slurm's words for a reconfigure from anyone else.
        Body::Reconfigure => error(ErrorCode::PermissionDenied, "Invalid user id"),
        Body::Broadcast(req) if operator => broadcast(req, h).await,
        Body::Broadcast(_) => error(ErrorCode::PermissionDenied, "Access/permission denied"),
        other => error(
            ErrorCode::InvalidRequest,
            format!("unexpected request {}", other.kind()),
        ),
    }
}

async fn submit(
    mut s: JobSubmit,
    uid: u32,
    operator: bool,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    // The credential, not the request body, says who is submitting (an
    // operator may submit on behalf of another uid).
    if !operator && s.uid != uid {
        return error(ErrorCode::PermissionDenied, "Access/permission denied");
    }
    s.user = info.user_name(s.uid);
    // Only operators may raise a job's priority; a user's `--priority` is
    // ignored and a negative `--nice` refused, as in Slurm.
    if !operator {
        s.priority = None;
        if s.nice < 0 {
            return error(ErrorCode::InvalidRequest, "Invalid --nice value");
        }
    }
    // Slurm stores accounts lower-cased, and shows `a,b` constraints as `a&b`.
    let non_empty = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    s.account = non_empty(s.account.take()).map(|a| a.to_lowercase());
    s.constraint = non_empty(s.constraint.take()).map(|c| crate::sched::features::normalise(&c));
    // `-w`/`-x` are kept in Slurm's form: sorted and compressed.
    for list in [&mut s.req_nodes, &mut s.exc_nodes].into_iter().flatten() {
        match crate::config::hostlist::expand(list) {
            Ok(names) => *list = crate::config::hostlist::compress_sorted(&names),
            Err(_) => return error(ErrorCode::InvalidNodeName, "Invalid node name specified"),
        }
    }
    let routing = h.routing.get();
    // No reservations exist yet, and only configured licenses may be asked
    // for (their counts are not enforced yet): Slurm's refusals otherwise.
    if s.reservation.is_some() {
        return error(
            ErrorCode::InvalidRequest,
            "Requested reservation is invalid",
        );
    }
    if let Some(asked) = &s.licenses {
        // `a,b` (all) or `a|b` (either): every name must exist.
        let known = asked
            .split([',', '|'])
            .map(|l| l.split([':', '*']).next().unwrap_or_default().trim())
            .all(|name| !name.is_empty() && routing.licenses.iter().any(|l| l == name));
        if !known {
            return error(ErrorCode::InvalidRequest, "Invalid license specification");
        }
    }
    let part_name = match s
        .partition
        .clone()
        .or_else(|| routing.default_partition.clone())
    {
        Some(p) => p,
        None => {
            return error(
                ErrorCode::NoDefaultPartition,
                "No partition specified or system default partition",
            )
        }
    };
    let Some((part, pstats)) = routing.partitions.get(&part_name) else {
        return error(
            ErrorCode::InvalidPartition,
            "Invalid partition name specified",
        );
    };
    let s = Arc::new(s);
    let limit = match send_counted(part, pstats, ValidateSubmit(s.clone())).await {
        Ok(Ok(limit)) => limit,
        Ok(Err(e)) => return Body::Error(e),
        Err(_) => return gone(),
    };
    let admit = Admit {
        submit: s,
        partition: part_name,
        time_limit_min: limit,
    };
    match send_counted(&h.controller, &h.controller_stats, admit).await {
        Ok(Ok(reply)) => Body::SubmitReply(reply),
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}

async fn cancel(mut req: CancelRequest, uid: u32, operator: bool, h: &ControllerHandles) -> Body {
    // Users may only touch their own jobs; others' are refused one by one
    // (as Slurm does), while the caller's own are still acted on.
    let mut denied = Vec::new();
    if !operator {
        let ids = req.job_ids.clone();
        let msg = GetJobs { ids, brief: true };
        let jobs = match send_counted(&h.controller, &h.controller_stats, msg).await {
            Ok(j) => j,
            Err(_) => return gone(),
        };
        let foreign: std::collections::HashSet<u32> = jobs
            .rows()
            .iter()
            .filter(|j| j.uid != uid)
            .map(|j| j.job_id)
            .collect();
        req.job_ids.retain(|id| {
            let mine = !foreign.contains(id);
            if !mine {
                denied.push((*id, Some("Access/permission denied".to_string())));
            }
            mine
        });
    }
    match send_counted(&h.controller, &h.controller_stats, Cancel(req)).await {
        Ok(mut r) => {
            r.results.extend(denied);
            Body::CancelReply(r)
        }
        Err(_) => gone(),
    }
}

async fn update_nodes(update: NodeUpdate, uid: u32, operator: bool, h: &ControllerHandles) -> Body {
    if !operator {
        return error(ErrorCode::PermissionDenied, "Access/permission denied");
    }
    let msg = UpdateNodes {
        update,
        user: user_name(uid),
    };
    match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(())) => Body::Ok,
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}

async fn stats(h: &ControllerHandles, info: &CtldInfo) -> Body {
    let Ok(c) = send_counted(&h.controller, &h.controller_stats, GetCounts).await else {
        return gone();
    };
    let t = info.traffic.snapshot();
    let conns = info.conns.counts();
    Body::Stats(Box::new(CtldStats {
        connections_max: conns.max,
        connections_current: conns.current,
        connections_peak: conns.peak,
        connections_refused: conns.refused,
        started: info.started,
        node_frames_in: t.node_frames,
        node_bytes_in: t.node_bytes,
        client_frames_in: t.client_frames,
        client_bytes_in: t.client_bytes,
        by_kind: t.kinds,
        ..c
    }))
}

/// Fan a no-op out and check the outcomes cover every target exactly once.
async fn broadcast(req: BroadcastRequest, h: &ControllerHandles) -> Body {
    let ranks = match &req.nodes {
        None => None,
        Some(list) => {
            let Ok(GetRanksReply(r)) =
                send_counted(&h.controller, &h.controller_stats, GetRanks(list.clone())).await
            else {
                return gone();
            };
            match r {
                Ok(r) => Some(r),
                Err(e) => return error(ErrorCode::InvalidNodeName, e),
            }
        }
    };
    let targets = match ranks {
        Some(r) => r,
        None => RankSet::from_range(0..h.node_count),
    };
    let t0 = std::time::Instant::now();
    let msg = Fanout {
        targets: targets.clone(),
        cmd: NodeCommand::Noop,
        budget: std::time::Duration::from_millis(req.budget_ms.max(1)),
    };
    let Ok(outcomes) = send_counted(&h.relay, &h.relay_stats, msg).await else {
        return gone();
    };
    let elapsed_us = t0.elapsed().as_micros() as u64;
    let mut covered = RankSet::new();
    let mut reply = BroadcastReply {
        targets: targets.len(),
        elapsed_us,
        ..Default::default()
    };
    let mut seen = 0u64;
    for o in outcomes {
        seen += o.ranks.len();
        covered = covered.union(&o.ranks);
        match o.result {
            Ok(_) => reply.ok += o.ranks.len(),
            Err(reason) => {
                let names = send_counted(&h.controller, &h.controller_stats, NamesOf(o.ranks))
                    .await
                    .unwrap_or_default();
                reply.failed.push((names, reason));
            }
        }
    }
    reply.missing = targets.difference(&covered).len();
    reply.duplicates = seen.saturating_sub(covered.len());
    Body::BroadcastReply(reply)
}

async fn acct(q: AcctQuery, h: &ControllerHandles) -> Body {
    let Ok(reply) = send_counted(&h.controller, &h.controller_stats, GetAcct(q.clone())).await
    else {
        return gone();
    };
    let mut jobs = reply.jobs;
    if let Some(store) = reply.scan {
        // A scan of every finished job must not stall the controller's thread.
        let now = chrono::Utc::now().timestamp();
        let scanned = tokio::task::spawn_blocking(move || {
            store.acct_scan(|a| crate::state::acct::matches(a, &q, now))
        })
        .await;
        match scanned {
            Ok(Ok(found)) => {
                let live: std::collections::HashSet<u32> = jobs.iter().map(|j| j.job_id).collect();
                jobs.extend(found.into_iter().filter(|a| !live.contains(&a.job_id)));
            }
            Ok(Err(e)) => {
                return error(ErrorCode::Internal, format!("accounting read failed: {e}"))
            }
            Err(e) => return error(ErrorCode::Internal, format!("accounting read failed: {e}")),
        }
    }
    jobs.sort_by_key(|j| j.job_id);
    Body::Acct(jobs)
}
