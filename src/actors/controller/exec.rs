//! `canopy exec` at the controller actor: resolving the node set and
//! applying who may run where (`console::exec_access`) against the caller's
//! running jobs, and naming the rank sets of a folded report. The fan-out
//! itself is the relay's and the request's handling is `daemon::rpc_exec`,
//! so a long run never occupies this actor.

use actix::prelude::*;

use super::ControllerActor;
use crate::config::hostlist;
use crate::model::job::JobState;
use crate::policy::authz::Caller;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{ErrorCode, ErrorReply};

/// The ranks of `nodes` the caller may run a command on, the relay
/// tree's depth (for the fan-out's deadline) and, for an ordinary user,
/// their running jobs there (to adopt the command into), or why not.
#[derive(Message)]
#[rtype(result = "Result<(RankSet, u32, Vec<u32>), ErrorReply>")]
pub struct ExecTargets {
    pub nodes: String,
    pub caller: Caller,
}

/// Hostlists of several rank sets, in one trip (a report may hold many groups).
#[derive(Message)]
#[rtype(result = "Vec<String>")]
pub struct NamesOfEach(pub Vec<RankSet>);

impl Handler<ExecTargets> for ControllerActor {
    type Result = Result<(RankSet, u32, Vec<u32>), ErrorReply>;
    fn handle(&mut self, msg: ExecTargets, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let invalid = |m: String| ErrorReply {
            code: ErrorCode::InvalidNodeName,
            message: m,
        };
        let names = hostlist::expand(&msg.nodes)
            .map_err(|e| invalid(format!("Invalid node name specified: {e}")))?;
        if names.is_empty() {
            return Err(invalid("no nodes named (-w)".into()));
        }
        let conf = self.core.conf();
        let mut requested = RankSet::new();
        for n in &names {
            match conf.node_index(n) {
                Some(r) => {
                    requested.insert(r as u32);
                }
                None => return Err(invalid(format!("Invalid node name specified: {n}"))),
            }
        }
        let uid = msg.caller.uid;
        let mut own = RankSet::new();
        let mut jobs = Vec::new();
        if !msg.caller.operator {
            for j in self
                .core
                .jobs()
                .running()
                .filter(|j| j.submit.uid == uid && j.state == JobState::Running)
            {
                let Some(a) = j.alloc.as_ref() else { continue };
                if a.ranks.iter().any(|&r| requested.contains(r)) {
                    jobs.push(j.job_id);
                }
                own = own.union(&RankSet::from_ranks(a.ranks.iter().copied()));
            }
        }
        crate::console::exec_access::check(msg.caller.operator, &requested, &own).map_err(
            |refused| {
                let names: Vec<&str> = refused
                    .iter()
                    .map(|r| conf.nodes.get(r as usize).map_or("?", |n| n.name.as_str()))
                    .collect();
                tracing::info!(uid, refused = %hostlist::compress(&names), "canopy exec refused");
                ErrorReply {
                    code: ErrorCode::PermissionDenied,
                    message: format!(
                        "uid {uid} has no running job on {}: only root and operators may run commands on nodes without a job of their own",
                        hostlist::compress(&names)
                    ),
                }
            },
        )?;
        Ok((requested, self.topo.max_depth(), jobs))
    }
}

impl Handler<NamesOfEach> for ControllerActor {
    type Result = Vec<String>;
    fn handle(&mut self, msg: NamesOfEach, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let conf = self.core.conf();
        msg.0
            .iter()
            .map(|set| {
                let names: Vec<&str> = set
                    .iter()
                    .map(|r| conf.nodes.get(r as usize).map_or("?", |n| n.name.as_str()))
                    .collect();
                hostlist::compress(&names)
            })
            .collect()
    }
}
