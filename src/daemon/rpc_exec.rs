//! `canopy exec` at the controller's door: check the request, ask the
//! controller actor where the caller may run (`console::exec_access`), fan
//! the command out through the relay tree, and fold what comes back into a
//! bounded report (`console::fold`). The wait for the nodes happens here, on
//! the client's connection task, never inside an actor: one user's slow
//! command stalls nobody else.

use std::time::{Duration, Instant};

use super::rpc::CtldInfo;
use crate::actors::controller::exec::{ExecTargets, NamesOfEach};
use crate::actors::controller::ControllerHandles;
use crate::actors::relay::Fanout;
use crate::actors::stats::send_counted;
use crate::console::fold::{bound_outputs, fold_outcomes};
use crate::policy::authz::Caller;
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::wire::exec::{
    ExecGroup, ExecInterrupt, ExecReport, ExecRequest, ExecSpec, MAX_OUTPUT_LIMIT, MAX_TIMEOUT_S,
};
use crate::wire::messages::{Body, ErrorCode, ErrorReply, NodeCommand, NodeReply};

/// Bytes of output one report carries at most (a frame holds 64 MiB; the
/// rest of the report and the encoding need room too).
pub const REPORT_OUTPUT_BUDGET: usize = 32 << 20;
/// Time the nodes get beyond the command's own limit to kill it and answer.
const NODE_GRACE: Duration = Duration::from_secs(1);
/// Budget of the interrupt's own fan-out.
const INTERRUPT_BUDGET: Duration = Duration::from_secs(5);

/// `canopy exec` runs one ordinary user may have in progress at once
/// (root and operators are not counted): each holds a process on every
/// node it names.
pub const MAX_EXECS_PER_USER: usize = 4;

/// The runs in progress, per user.
#[derive(Default)]
pub struct ExecSlots {
    held: std::sync::Mutex<std::collections::HashMap<u32, usize>>,
}

/// One run's place among its user's; given back when dropped (the run
/// ended, or its client went away).
pub struct ExecSlot {
    slots: std::sync::Arc<ExecSlots>,
    uid: u32,
}

impl ExecSlots {
    /// A slot for `uid`, or `None` at its limit.
    pub fn take(self: &std::sync::Arc<Self>, uid: u32) -> Option<ExecSlot> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(uid).or_default();
        if *n >= MAX_EXECS_PER_USER {
            return None;
        }
        *n += 1;
        Some(ExecSlot {
            slots: self.clone(),
            uid,
        })
    }
}

impl Drop for ExecSlot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.uid);
            }
        }
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

/// The request's own faults, named.
fn validate(req: &ExecRequest) -> Result<(), String> {
    if req.argv.first().is_none_or(|a| a.is_empty()) {
        return Err("no command given (canopy exec -w NODES -- CMD [ARGS...])".into());
    }
    if req.timeout_ms == 0 || req.timeout_ms > MAX_TIMEOUT_S * 1000 {
        return Err(format!(
            "timeout {} ms is out of range (1 ms to {MAX_TIMEOUT_S} s)",
            req.timeout_ms
        ));
    }
    if req.max_output > MAX_OUTPUT_LIMIT {
        return Err(format!(
            "output limit {} bytes is above the most allowed ({MAX_OUTPUT_LIMIT})",
            req.max_output
        ));
    }
    Ok(())
}

/// `canopy exec`: run, gather, fold.
pub async fn exec(
    req: ExecRequest,
    caller: Caller,
    gid: u32,
    h: &ControllerHandles,
    info: &CtldInfo,
) -> Body {
    if let Err(why) = validate(&req) {
        return error(ErrorCode::InvalidRequest, why);
    }
    let _slot = if caller.operator || caller.uid == 0 {
        None
    } else {
        match h.execs.take(caller.uid) {
            Some(slot) => Some(slot),
            None => {
                return error(
                    ErrorCode::PermissionDenied,
                    format!(
                        "uid {} already has {MAX_EXECS_PER_USER} canopy exec commands running (the most one user may run at once); wait for one to end",
                        caller.uid
                    ),
                )
            }
        }
    };
    let msg = ExecTargets {
        nodes: req.nodes.clone(),
        caller,
    };
    let (targets, depth, jobs) = match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Body::Error(e),
        Err(_) => return gone(),
    };
    let user = info.user_name(caller.uid).await;
    let timeout = Duration::from_millis(req.timeout_ms);
    tracing::info!(uid = caller.uid, nodes = %req.nodes, argv = ?req.argv, token = req.token, "canopy exec");
    let spec = ExecSpec {
        argv: req.argv,
        uid: caller.uid,
        gid,
        user,
        timeout_ms: req.timeout_ms,
        max_output: req.max_output,
        token: req.token,
        jobs: if caller.uid == 0 { Vec::new() } else { jobs },
    };
    let t0 = Instant::now();
    let msg = Fanout {
        targets: targets.clone(),
        cmd: NodeCommand::Exec(Box::new(spec)),
        budget: root_budget(timeout + NODE_GRACE, depth),
    };
    let Ok(outcomes) = send_counted(&h.relay, &h.relay_stats, msg).await else {
        return gone();
    };
    let folded = fold_outcomes(outcomes.into_iter().map(|o| {
        let r = match o.result {
            Ok(NodeReply::Exec(out)) => Ok(out),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e),
        };
        (o.ranks, r)
    }));
    let ok = folded.ok.into_sorted();
    let missing = folded.missing.into_sorted();
    let sets: Vec<RankSet> = ok
        .iter()
        .map(|(s, _)| s.clone())
        .chain(missing.iter().map(|(s, _)| s.clone()))
        .collect();
    let Ok(names) = send_counted(&h.controller, &h.controller_stats, NamesOfEach(sets)).await
    else {
        return gone();
    };
    let mut names = names.into_iter();
    let mut groups: Vec<ExecGroup> = ok
        .into_iter()
        .map(|(ranks, result)| ExecGroup {
            nodes: names.next().unwrap_or_default(),
            count: ranks.len(),
            result,
            output_dropped: false,
        })
        .collect();
    let missing: Vec<(String, String)> = missing
        .into_iter()
        .map(|(_, why)| (names.next().unwrap_or_default(), why))
        .collect();
    let outputs_dropped = bound_outputs(&mut groups, REPORT_OUTPUT_BUDGET);
    tracing::info!(
        targets = targets.len(),
        groups = groups.len(),
        missing = missing.len(),
        elapsed_ms = t0.elapsed().as_millis() as u64,
        "canopy exec done"
    );
    Body::ExecReply(Box::new(ExecReport {
        targets: targets.len(),
        groups,
        missing,
        outputs_dropped,
        elapsed_ms: t0.elapsed().as_millis() as u64,
    }))
}

/// Ctrl-C on `canopy exec`: tell the nodes to stop run `token`. Each node
/// stops it only if the caller owns it (or is an operator); the fan-out
/// itself is bounded as the run's is (an ordinary user reaches only nodes
/// where they run a job), so an interrupt cannot be sent to the whole
/// cluster by anyone.
pub async fn interrupt(req: ExecInterrupt, caller: Caller, h: &ControllerHandles) -> Body {
    let msg = ExecTargets {
        nodes: req.nodes,
        caller,
    };
    let ranks = match send_counted(&h.controller, &h.controller_stats, msg).await {
        Ok(Ok((r, _, _))) => r,
        Ok(Err(e)) => return Body::Error(e),
        Err(_) => return gone(),
    };
    tracing::info!(uid = caller.uid, token = req.token, "canopy exec interrupt");
    let msg = Fanout {
        targets: ranks,
        cmd: NodeCommand::ExecInterrupt {
            token: req.token,
            uid: caller.uid,
            operator: caller.operator,
        },
        budget: INTERRUPT_BUDGET,
    };
    match send_counted(&h.relay, &h.relay_stats, msg).await {
        Ok(_) => Body::Ok,
        Err(_) => gone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ExecRequest {
        ExecRequest {
            nodes: "n1".into(),
            argv: vec!["true".into()],
            timeout_ms: 1000,
            max_output: 100,
            token: 1,
        }
    }

    #[test]
    fn validate_names_the_bad_field() {
        assert!(validate(&req()).is_ok());
        let e = validate(&ExecRequest {
            argv: vec![],
            ..req()
        })
        .unwrap_err();
        assert!(e.contains("no command"), "{e}");
        let e = validate(&ExecRequest {
            timeout_ms: 0,
            ..req()
        })
        .unwrap_err();
        assert!(e.contains("timeout"), "{e}");
        let e = validate(&ExecRequest {
            max_output: MAX_OUTPUT_LIMIT + 1,
            ..req()
        })
        .unwrap_err();
        assert!(e.contains("output limit"), "{e}");
    }

    #[test]
    fn a_user_holds_at_most_the_limit_of_slots() {
        let slots = std::sync::Arc::new(ExecSlots::default());
        let held: Vec<ExecSlot> = (0..MAX_EXECS_PER_USER)
            .map(|_| slots.take(1000).expect("under the limit"))
            .collect();
        assert!(slots.take(1000).is_none(), "one past the limit");
        assert!(slots.take(1001).is_some(), "another user is not counted");
        drop(held);
        assert!(slots.take(1000).is_some(), "slots come back when runs end");
        assert!(slots.held.lock().unwrap().get(&1001).is_none());
    }

    /// An ordinary user's interrupt reaches only nodes where they run a
    /// job, as their run does: one with no job is refused before any
    /// fan-out (an operator's goes out).
    #[test]
    fn an_interrupt_is_bounded_as_its_run_is() {
        use crate::actors::controller::{ControllerActor, FatalHook};
        let dir = tempfile::tempdir().expect("temp dir");
        let text = format!(
            "ClusterName=t\nSlurmctldHost=ctl(127.0.0.1)\nStateSaveLocation={}\n\
             NodeName=n[1-2] CPUs=2 RealMemory=1000\nPartitionName=p Nodes=n[1-2] Default=YES\n",
            dir.path().display()
        );
        let conf = std::sync::Arc::new(
            crate::config::Config::parse_str(&text, &dir.path().join("slurm.conf"))
                .expect("test config parses"),
        );
        let fatal: FatalHook = std::sync::Arc::new(|_| {});
        let sys = actix::System::new();
        let (user, operator) = sys.block_on(async {
            let (store, recovered) =
                crate::state::store::Store::open(dir.path()).expect("store opens");
            let h = ControllerActor::start(conf, store, recovered, fatal);
            let req = ExecInterrupt {
                nodes: "n[1-2]".into(),
                token: 1,
            };
            let user = Caller {
                uid: 1000,
                operator: false,
            };
            let u = interrupt(req.clone(), user, &h).await;
            let o = interrupt(req, Caller::ROOT, &h).await;
            (u, o)
        });
        drop(sys);
        match user {
            Body::Error(e) => {
                assert_eq!(e.code, ErrorCode::PermissionDenied, "{e:?}");
                assert!(e.message.contains("no running job on n[1-2]"), "{e:?}");
            }
            other => panic!("an ordinary user's interrupt went out: {other:?}"),
        }
        assert!(matches!(operator, Body::Ok), "{operator:?}");
    }
}
