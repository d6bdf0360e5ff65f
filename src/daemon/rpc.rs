//! Client requests to the controller (what the CLI sends): one function per
//! request kind, mapping a `Body` to actor messages and back.
//!
//! The verified uid that travels beside the message (never inside it)
//! becomes the [`Caller`] of the controller's commands; who may do what is
//! decided by `policy::authz`, in the controller core for job commands.

use std::sync::Arc;

use super::guard::{Daemons, PeerLog, RateLimiter};
use super::limit::ConnLimiter;
use super::stats::Traffic;
use crate::actors::controller::GetCounts;
use crate::actors::controller::{
    Cancel, CancelStep, ControllerHandles, GetAcct, GetJobs, GetNodes, GetPartitions, GetRanks,
    GetRanksReply, GetStatus, NamesOf, Reconfigure, StartStep, StepDone, Submit, UpdateJobs,
    UpdateNodes,
};
use crate::actors::relay::Fanout;
use crate::actors::stats::send_counted;
use crate::policy::authz::{self, Caller};
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    AcctQuery, Body, BroadcastReply, BroadcastRequest, CtldStats, Envelope, ErrorCode, ErrorReply,
    JobQuery, NodeCommand, NodeQuery, NodeUpdate, PongReply,
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
    /// gid → group name, likewise.
    pub groups: Arc<std::sync::Mutex<std::collections::HashMap<u32, String>>>,
    /// The controller's authenticator (its keys are re-read on
    /// reconfigure; its refusals are counted for sdiag).
    pub auth: Arc<crate::wire::auth::Authenticator>,
    /// The signing key file (`slurm.key`; `slurm.key.alt` beside it).
    pub key_path: std::path::PathBuf,
    /// Some node did not take the last key change: the next reconfigure
    /// tells every node again, even if the files did not change since.
    pub keys_incomplete: Arc<std::sync::atomic::AtomicBool>,
    /// The client/node port's connection limit and its counters.
    pub conns: Arc<ConnLimiter>,
    /// Who may speak as a node daemon (root, this uid, SlurmUser); they
    /// are operators too.
    pub daemons: Daemons,
    /// Operators named in the configuration (`canopy_operators`).
    pub operators: Arc<super::guard::Operators>,
    /// Bad peers, logged at a bounded rate and counted for sdiag.
    pub peers: Arc<PeerLog>,
    /// Per-user RPC rate limiting (`rl_enable`).
    pub rate: Arc<RateLimiter>,
    /// How long an authenticated client connection may sit idle.
    pub read_timeout: std::time::Duration,
}

impl CtldInfo {
    /// The uid's user name: from the cache, or looked up off the event loop
    /// (a passwd lookup may wait on LDAP or NFS, and this loop serves every
    /// client).
    pub(crate) async fn user_name(&self, uid: u32) -> String {
        let lookup = |uid| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .ok()
                .flatten()
                .map(|u| u.name)
        };
        cached(self.users.clone(), uid, lookup).await
    }

    /// The gid's group name, likewise.
    async fn group_name(&self, gid: u32) -> String {
        cached(self.groups.clone(), gid, crate::exec::identity::group_name).await
    }
}

/// The asker's groups, for the partitions whose AllowGroups hide them
/// (operators see every partition, so theirs are not looked up).
async fn viewer_groups(caller: Caller, gid: u32, info: &CtldInfo) -> Vec<String> {
    if caller.operator {
        return Vec::new();
    }
    user_groups(info.user_name(caller.uid).await, gid).await
}

/// The names of every group `user` belongs to (`initgroups`' list: the
/// primary group `gid` and each group naming them), looked up on a blocking
/// thread (the group database may be LDAP). Empty when unknown.
async fn user_groups(user: String, gid: u32) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        let Ok(name) = std::ffi::CString::new(user) else {
            return Vec::new();
        };
        nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|g| crate::exec::identity::group_name(g.as_raw()))
            .collect()
    })
    .await
    .unwrap_or_default()
}

type NameCache = Arc<std::sync::Mutex<std::collections::HashMap<u32, String>>>;

/// `id`'s name from `cache`, or from `lookup` on a blocking thread; only
/// names found are cached (so the cache holds real accounts only), and an
/// id without one stands for itself.
async fn cached(cache: NameCache, id: u32, lookup: fn(u32) -> Option<String>) -> String {
    if let Some(name) = cache.lock().ok().and_then(|c| c.get(&id).cloned()) {
        return name;
    }
    match tokio::task::spawn_blocking(move || lookup(id)).await {
        Ok(Some(name)) => {
            if let Ok(mut c) = cache.lock() {
                c.insert(id, name.clone());
            }
            name
        }
        _ => id.to_string(),
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

/// Answer one client request.
pub async fn handle(env: Envelope, h: &ControllerHandles, info: &CtldInfo) -> Body {
    // Root, SlurmUser and the daemons' uid may also submit as others
    // (`--uid`, as in Slurm); operators named by `canopy_operators` may not.
    let superuser = env.uid == 0 || env.uid == info.slurm_uid || info.daemons.allows(env.uid);
    let operator = superuser || info.operators.allows(env.uid, env.gid);
    let caller = Caller {
        uid: env.uid,
        operator,
    };
    // The door: each request kind's one role (policy/authz.rs). Node
    // daemons' messages never arrive here (they travel on node links).
    let kind = env.body.kind();
    if let Err(d) = authz::admit_rpc(caller, false, kind) {
        return match authz::rpc_role(kind) {
            None => error(
                ErrorCode::InvalidRequest,
                format!("unexpected request {kind}"),
            ),
            Some(_) => error(ErrorCode::PermissionDenied, d.0),
        };
    }
    match env.body {
        Body::Ping => Body::Pong(PongReply {
            host: info.host.clone(),
            boot_id: info.boot_id,
            started: info.started,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }),
        Body::SubmitJob(s) => submit(*s, caller, superuser, env.gid, h, info).await,
        Body::QueryJobs(JobQuery { job_ids, brief, .. }) => {
            let msg = GetJobs {
                ids: job_ids,
                brief,
                caller,
                groups: viewer_groups(caller, env.gid, info).await,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(jobs) => Body::Jobs(jobs),
                Err(_) => gone(),
            }
        }
        Body::QueryNodes(NodeQuery { names }) => {
            match send_counted(
                &h.controller,
                &h.controller_stats,
                GetNodes { names, caller },
            )
            .await
            {
                Ok(n) => Body::Nodes(n),
                Err(_) => gone(),
            }
        }
        Body::QueryPartitions => {
            let msg = GetPartitions {
                caller,
                groups: viewer_groups(caller, env.gid, info).await,
            };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(p) => Body::Partitions(p),
                Err(_) => gone(),
            }
        }
        Body::CancelJobs(req) => {
            match send_counted(&h.controller, &h.controller_stats, Cancel { req, caller }).await {
                Ok(Some(r)) => Body::CancelReply(r),
                _ => gone(),
            }
        }
        Body::CancelStep(req) => {
            let msg = CancelStep { req, caller };
            // `None`: the controller stopped before the change was durable.
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Some(r)) => Body::CancelReply(r),
                _ => gone(),
            }
        }
        Body::UpdateNodes(update) => update_nodes(update, caller, h, info).await,
        Body::QueryStatus => {
            match send_counted(&h.controller, &h.controller_stats, GetStatus { caller }).await {
                Ok(s) => Body::Status(Box::new(s)),
                Err(_) => gone(),
            }
        }
        Body::QueryStats => stats(h, info).await,
        Body::QueryPriority(query) => {
            let msg = crate::actors::controller::GetPriority { query, caller };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(r) => Body::Priority(Box::new(r)),
                Err(_) => gone(),
            }
        }
        Body::QueryShares(query) => {
            let msg = crate::actors::controller::GetShares { query };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(r) => Body::Shares(Box::new(r)),
                Err(_) => gone(),
            }
        }
        Body::LaunchStep(req) => {
            let msg = StartStep { req: *req, caller };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Ok(l)) => Body::StepLaunched(l),
                Ok(Err(e)) => Body::Error(e),
                Err(_) => gone(),
            }
        }
        Body::StepComplete(done) => {
            let msg = StepDone { done, caller };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Ok(())) => Body::Ok,
                Ok(Err(e)) => Body::Error(e),
                Err(_) => gone(),
            }
        }
        Body::UpdateJobs(update) => {
            let msg = UpdateJobs { update, caller };
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(Some(r)) => Body::UpdateJobsReply(r),
                _ => gone(),
            }
        }
        Body::QueryAcct(mut q) => {
            // Users see their own jobs unless they are operators.
            if !operator {
                q.uids = vec![env.uid];
            }
            acct(q, h).await
        }
        Body::Reconfigure => {
            match send_counted(&h.controller, &h.controller_stats, Reconfigure).await {
                Ok(Ok(())) => reload_keys(h, info).await,
                Ok(Err(e)) => error(ErrorCode::InvalidConfig, &e),
                Err(_) => gone(),
            }
        }
        Body::Broadcast(req) => broadcast(req, h).await,
        Body::AcctMgr(req) => acct_mgr(*req, caller, h, info).await,
        Body::QueryAccounts => {
            let msg = crate::actors::controller::GetAccounts;
            match send_counted(&h.controller, &h.controller_stats, msg).await {
                Ok(db) => Body::Accounts(Box::new(db)),
                Err(_) => gone(),
            }
        }
        Body::CreateResv(spec) => resv::create(spec, caller, h).await,
        Body::UpdateResv(spec) => resv::update(spec, caller, h).await,
        Body::DeleteResv(name) => resv::delete(name, caller, h).await,
        Body::CreateNode(line) => super::rpc_nodes::create(line, caller, h).await,
        Body::DeleteNode(names) => super::rpc_nodes::delete(names, caller, h).await,
        Body::QueryResv => {
            let user = info.user_name(caller.uid).await;
            resv::query(caller, user, h).await
        }
        Body::QueryLicenses => resv::licenses(h).await,
        Body::QueryStepStats(req) => step_stats(req, caller, h).await,
        Body::QueryTop(q) => super::rpc_console::top(q, h).await,
        Body::QueryLatency(q) => super::rpc_console::latency(q, caller, h),
        Body::Exec(req) => super::rpc_exec::exec(req, caller, env.gid, h, info).await,
        Body::ExecInterrupt(req) => super::rpc_exec::interrupt(req, caller, h).await,
        Body::QueryTree(q) => super::rpc_tree::tree(q, caller, h, info).await,
        Body::QueryEvents(q) => super::rpc_tree::events(q, h).await,
        Body::Probe(req) => super::rpc_trace::probe(req, h).await,
        Body::TraceFanout(req) => super::rpc_trace::trace_fanout(req, h).await,
        Body::Debug(req) => super::rpc_trace::debug(req, h).await,
        other => error(
            ErrorCode::InvalidRequest,
            format!("unexpected request {}", other.kind()),
        ),
    }
}

async fn submit(
    mut s: JobSubmit,
    caller: Caller,
    superuser: bool,
    cred_gid: u32,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    // Refused before any lookup: nobody makes the controller look up ids
    // it will not run a job as (the core checks the uid again). The job
    // runs as the body's uid and gid, so a user's must be the credential's.
    let as_self = Caller {
        operator: superuser,
        ..caller
    };
    if let Err(d) = authz::check_submit_identity(as_self, cred_gid, s.uid, s.gid) {
        tracing::warn!(
            uid = caller.uid,
            gid = cred_gid,
            body_uid = s.uid,
            body_gid = s.gid,
            "submission refused: identity is not the credential's"
        );
        return error(ErrorCode::PermissionDenied, d.0);
    }
    // Names are looked up here, not in the controller core: a passwd or
    // group lookup is I/O, and the core's commands must replay the same.
    s.user = info.user_name(s.uid).await;
    s.group = info.group_name(s.gid).await;
    // Partitions' AllowGroups are checked against these, as slurmctld
    // checks a user's primary group and the groups that list them.
    s.groups = user_groups(s.user.clone(), s.gid).await;
    match send_counted(
        &h.controller,
        &h.controller_stats,
        Submit { submit: s, caller },
    )
    .await
    {
        Ok(Ok(reply)) => Body::SubmitReply(reply),
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}

/// sacctmgr add/modify/delete: the caller's name decides its AdminLevel.
async fn acct_mgr(
    req: crate::wire::messages::AcctMgrRequest,
    caller: Caller,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    let msg = crate::actors::controller::AccountsChange {
        req: req.req,
        commit: req.commit,
        user: info.user_name(caller.uid).await,
        caller,
    };
    match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(o)) => Body::AcctMgrReply(crate::wire::messages::AcctMgrReply {
            ok: true,
            changed: o.changed,
            lines: o.lines,
        }),
        Ok(Err(r)) => Body::AcctMgrReply(crate::wire::messages::AcctMgrReply {
            ok: false,
            changed: false,
            lines: r.lines,
        }),
        Err(_) => gone(),
    }
}

async fn update_nodes(
    update: NodeUpdate,
    caller: Caller,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    let msg = UpdateNodes {
        update,
        user: info.user_name(caller.uid).await,
        caller,
    };
    match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(())) => Body::Ok,
        Ok(Err(e)) => Body::Error(e),
        Err(_) => gone(),
    }
}

/// After a reconfigure: re-read the key files here and on every node
/// daemon, so a rotation needs no restart. A failure keeps the old keys
/// where it happened and says where.
async fn reload_keys(h: &ControllerHandles, info: &CtldInfo) -> Body {
    let path = info.key_path.clone();
    match tokio::task::spawn_blocking(move || crate::wire::auth::load_keyring(&path)).await {
        Ok(Ok(keys)) => {
            let (sign, alt) = (keys.signing.id(), keys.alternate.as_ref().map(|k| k.id()));
            let incomplete = &info.keys_incomplete;
            if info.auth.key_ids() == (sign, alt)
                && !incomplete.load(std::sync::atomic::Ordering::Relaxed)
            {
                // No rotation: nothing to tell the nodes (some may be down).
                return Body::Ok;
            }
            tracing::info!(key_id = format!("{sign:#010x}"), alternate = ?alt.map(|a| format!("{a:#010x}")), "keys changed; re-reading them on every node");
            // The nodes first, while every link still speaks the old key:
            // a node that has not taken the new one must not be cut off.
            let msg = Fanout {
                targets: RankSet::from_range(0..h.nodes_now()),
                cmd: NodeCommand::ReloadKeys,
                budget: std::time::Duration::from_secs(10),
            };
            let failed = match send_counted(&h.relay, &h.relay_stats, msg).await {
                Ok(outcomes) => outcomes
                    .into_iter()
                    .filter_map(|o| o.result.err().map(|e| (o.ranks, e)))
                    .collect::<Vec<_>>(),
                Err(_) => return gone(),
            };
            info.auth.set_keys(keys);
            incomplete.store(!failed.is_empty(), std::sync::atomic::Ordering::Relaxed);
            if failed.is_empty() {
                return Body::Ok;
            }
            let mut what = Vec::new();
            for (ranks, e) in failed {
                let Ok(names) =
                    send_counted(&h.controller, &h.controller_stats, NamesOf(ranks)).await
                else {
                    return gone();
                };
                what.push(format!("{names}: {e}"));
            }
            error(
                ErrorCode::InvalidConfig,
                format!(
                    "configuration applied and keys re-read here, but not on every node ({})",
                    what.join("; ")
                ),
            )
        }
        Ok(Err(e)) => error(
            ErrorCode::InvalidConfig,
            format!("configuration applied, but the keys were not re-read ({e}); the old keys stay in use"),
        ),
        Err(e) => error(ErrorCode::Internal, e.to_string()),
    }
}

async fn stats(h: &ControllerHandles, info: &CtldInfo) -> Body {
    let Ok(c) = send_counted(&h.controller, &h.controller_stats, GetCounts).await else {
        return gone();
    };
    let t = info.traffic.snapshot();
    let conns = info.conns.counts();
    let bad = info.peers.counts();
    let rl = info.rate.counts();
    let (_, preauth_refused) = crate::wire::frame::preauth_budget();
    Body::Stats(Box::new(CtldStats {
        bad_frames: bad.bad_frames,
        auth_rejected: bad.auth_rejected,
        auth_timeouts: bad.auth_timeouts,
        idle_closed: bad.idle_closed,
        not_daemon: bad.not_daemon,
        preauth_refused,
        rl_enabled: rl.enabled,
        rl_bucket_size: rl.bucket_size,
        rl_refill_rate: rl.refill_rate,
        rl_refill_period: rl.refill_period_s,
        rl_table_size: rl.table_size,
        rl_users: rl.users,
        rl_limited: rl.limited,
        rl_table_full: rl.table_full,
        rl_top: rl.top,
        connections_max: conns.max,
        connections_current: conns.current,
        connections_peak: conns.peak,
        connections_refused: conns.refused,
        auth_refused_by: info
            .auth
            .rejections()
            .snapshot()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
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
        None => RankSet::from_range(0..h.nodes_now()),
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

/// `sstat`: ask the chosen steps' nodes for their usage now and fold the
/// answers per step (MaxRSS the highest task's, CPU summed, AveRSS over
/// tasks). Nodes that fail to answer are left out, as Slurm's sstat leaves
/// out a node whose slurmd does not answer.
async fn step_stats(
    req: crate::wire::messages::StepStatRequest,
    caller: Caller,
    h: &ControllerHandles,
) -> Body {
    use crate::wire::messages::{NodeReply, StepStat};
    let job_id = req.job_id;
    let msg = crate::actors::controller::StatTargets { req, caller };
    let targets = match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Body::Error(e),
        Err(_) => return gone(),
    };
    if targets.is_empty() {
        return Body::StepStats(Vec::new());
    }
    let ranks = targets
        .iter()
        .fold(RankSet::new(), |acc, (_, r)| acc.union(r));
    let steps: Vec<_> = targets.iter().map(|(s, _)| *s).collect();
    let msg = Fanout {
        targets: ranks,
        cmd: NodeCommand::StatSteps {
            job_id,
            steps: steps.clone(),
        },
        budget: std::time::Duration::from_secs(10),
    };
    let Ok(outcomes) = send_counted(&h.relay, &h.relay_stats, msg).await else {
        return gone();
    };
    let mut out: Vec<StepStat> = steps
        .iter()
        .map(|&step| StepStat {
            job_id,
            step,
            nodes: String::new(),
            totals: Default::default(),
            pids: Vec::new(),
        })
        .collect();
    for o in outcomes {
        match o.result {
            Ok(NodeReply::StepStats(v)) => {
                for (step, usage, pids) in v {
                    if let Some(s) = out.iter_mut().find(|s| s.step == step) {
                        s.totals.add(&usage);
                        s.pids.push((usage.node.clone(), pids));
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(job_id, ranks = ?o.ranks, error = %e, "sstat: nodes did not answer")
            }
        }
    }
    for s in &mut out {
        s.pids.sort();
        let names: Vec<&str> = s.pids.iter().map(|(n, _)| n.as_str()).collect();
        s.nodes = crate::config::hostlist::compress(&names);
    }
    // A step that ended between the choice and the question is not running.
    out.retain(|s| s.totals.nodes > 0);
    Body::StepStats(out)
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
        let q = q.clone();
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
    // Each run its own record with -D (earlier ones first), else the last.
    let now = chrono::Utc::now().timestamp();
    let mut jobs: Vec<_> = jobs
        .into_iter()
        .flat_map(|j| crate::state::acct::runs(j, &q, now))
        .collect();
    jobs.sort_by_key(|j| j.job_id);
    Body::Acct(jobs)
}

/// Reservation requests: the users a reservation names are looked up here
/// (a passwd lookup is I/O, which the core does not do).
mod resv {
    use super::{error, gone};
    use crate::actors::controller::resv::{
        CreateResv, DeleteResv, GetLicenses, GetReservations, UpdateResv,
    };
    use crate::actors::controller::ControllerHandles;
    use crate::actors::stats::send_counted;
    use crate::policy::authz::Caller;
    use crate::wire::messages::{Body, ErrorCode};
    use crate::wire::resv::{ListOp, ResvSpec};

    /// Every user `Users=` names exists ("Invalid user id" otherwise, as
    /// Slurm answers).
    async fn users_exist(spec: &ResvSpec) -> Result<(), Body> {
        let Some(users) = spec.users.clone() else {
            return Ok(());
        };
        if spec.users_op == ListOp::Remove {
            return Ok(());
        }
        let found = tokio::task::spawn_blocking(move || {
            users
                .split(',')
                .map(|u| u.trim().trim_start_matches(['-', '+']))
                .filter(|u| !u.is_empty())
                .all(|u| matches!(nix::unistd::User::from_name(u), Ok(Some(_))))
        })
        .await
        .unwrap_or(false);
        if found {
            Ok(())
        } else {
            Err(error(ErrorCode::InvalidRequest, "Invalid user id"))
        }
    }

    pub(super) async fn create(spec: ResvSpec, caller: Caller, h: &ControllerHandles) -> Body {
        if let Err(b) = users_exist(&spec).await {
            return b;
        }
        let msg = CreateResv { spec, caller };
        match send_counted(&h.controller, &h.controller_stats, msg).await {
            Ok(Ok(name)) => Body::ResvCreated(name),
            Ok(Err(e)) => Body::Error(e),
            Err(_) => gone(),
        }
    }

    pub(super) async fn update(spec: ResvSpec, caller: Caller, h: &ControllerHandles) -> Body {
        if let Err(b) = users_exist(&spec).await {
            return b;
        }
        let msg = UpdateResv { spec, caller };
        match send_counted(&h.controller, &h.controller_stats, msg).await {
            Ok(Ok(())) => Body::Ok,
            Ok(Err(e)) => Body::Error(e),
            Err(_) => gone(),
        }
    }

    pub(super) async fn delete(name: String, caller: Caller, h: &ControllerHandles) -> Body {
        let msg = DeleteResv { name, caller };
        match send_counted(&h.controller, &h.controller_stats, msg).await {
            Ok(Ok(())) => Body::Ok,
            Ok(Err(e)) => Body::Error(e),
            Err(_) => gone(),
        }
    }

    pub(super) async fn query(caller: Caller, user: String, h: &ControllerHandles) -> Body {
        let msg = GetReservations { caller, user };
        match send_counted(&h.controller, &h.controller_stats, msg).await {
            Ok(r) => Body::Reservations(r),
            Err(_) => gone(),
        }
    }

    pub(super) async fn licenses(h: &ControllerHandles) -> Body {
        match send_counted(&h.controller, &h.controller_stats, GetLicenses).await {
            Ok(l) => Body::Licenses(l),
            Err(_) => gone(),
        }
    }
}
