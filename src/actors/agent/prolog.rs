//! The node agent's Prolog and Epilog (Slurm's slurmd side): when they
//! run, and what a failure sends up. Running a script is
//! `crate::exec::prolog`'s, on a thread of its own, so the agent (which
//! shares its event loop with the relay and every link) never waits.
//!
//! - The Prolog runs once per job per node, before the job's first process
//!   there: before the batch script on the batch host, before an srun
//!   step's first tasks on the others; with `PrologFlags=Alloc` when the
//!   controller asks ([`NodeCommand::Prolog`]) at allocation. Every caller
//!   awaits one shared run, so concurrent steps do not start it twice.
//! - The Epilog runs when the job is terminated here, after its processes
//!   are gone (and after a Prolog still running has ended), on every node
//!   that knew the job.
//! - A failure (non-zero exit, signal, timeout, nothing to run) goes up as
//!   a [`ScriptFailure`]; the controller drains the node and, for a
//!   Prolog, requeues or cancels the job.
//!
//! [`NodeCommand::Prolog`]: crate::wire::messages::NodeCommand::Prolog

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use futures::future::{BoxFuture, FutureExt, Shared};

use super::NodeAgent;
use crate::exec::prolog::{node_env, spawn, Context as ScriptContext, ScriptRun};
use crate::wire::messages::{
    Body, ExitStatus, NodeScript, NodeScriptConf, ScriptFailure, ScriptJob,
};

/// One shared Prolog run: `true` once it has succeeded.
pub(super) type PrologRun = Shared<BoxFuture<'static, bool>>;

/// The agent's scripts and what it knows of each job for them.
pub(super) struct NodeScripts {
    pub(super) conf: NodeScriptConf,
    conf_path: String,
    /// Jobs this node knows, with their Prolog run once started.
    jobs: HashMap<u32, JobScripts>,
}

#[derive(Default)]
struct JobScripts {
    info: Option<ScriptJob>,
    prolog: Option<PrologRun>,
}

impl NodeScripts {
    pub(super) fn new(conf: NodeScriptConf, conf_path: String) -> NodeScripts {
        NodeScripts {
            conf,
            conf_path,
            jobs: HashMap::new(),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.conf
            .timeout_s
            .filter(|&t| t > 0)
            .map(|t| Duration::from_secs(u64::from(t)))
    }
}

/// A script failed here: send it up (handled on the agent, which owns the
/// upward link).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct ReportScriptFailure(pub ScriptFailure);

impl Handler<ReportScriptFailure> for NodeAgent {
    type Result = ();
    fn handle(&mut self, msg: ReportScriptFailure, ctx: &mut Context<Self>) {
        self.send_up(Body::ScriptFailed(msg.0), ctx);
    }
}

impl NodeAgent {
    /// Remember what the Prolog and Epilog are told about a job.
    pub(super) fn note_script_job(&mut self, info: ScriptJob) {
        if let Some(s) = &mut self.scripts {
            let id = info.job_id;
            s.jobs.entry(id).or_default().info = Some(info);
        }
    }

    /// Job `job_id`'s Prolog run here, started now if it has not been;
    /// `None` when no Prolog is configured.
    pub(super) fn prolog_run(&mut self, job_id: u32, ctx: &mut Context<Self>) -> Option<PrologRun> {
        let node = self.node.clone();
        let scripts = self.scripts.as_mut()?;
        let pattern = scripts.conf.prolog.clone()?;
        let timeout = scripts.timeout();
        let serial = scripts.conf.serial;
        let conf_path = scripts.conf_path.clone();
        let entry = scripts.jobs.entry(job_id).or_default();
        if let Some(run) = &entry.prolog {
            return Some(run.clone());
        }
        let info = entry.info.clone().unwrap_or_else(|| ScriptJob {
            job_id,
            ..Default::default()
        });
        let req = ScriptRun {
            context: ScriptContext::PrologSlurmd,
            job_id,
            pattern,
            env: node_env(&info, &node, &conf_path, ScriptContext::PrologSlurmd, None),
            timeout,
            serial,
            stop: None,
        };
        tracing::info!(job_id, node = %node, "running the Prolog");
        let me = ctx.address();
        let run: PrologRun = async move {
            let outcome = spawn(req).await;
            if outcome.ok() {
                return true;
            }
            tracing::error!(job_id, node = %node, outcome = %outcome, "Prolog failed");
            let failure = ScriptFailure {
                job_id,
                node,
                script: NodeScript::Prolog,
                detail: outcome.to_string(),
            };
            let _ = me.send(ReportScriptFailure(failure)).await;
            false
        }
        .boxed()
        .shared();
        // Driven here, so the failure is reported whoever waits.
        actix::spawn(run.clone().map(|_| ()));
        entry.prolog = Some(run.clone());
        Some(run)
    }

    /// Whether job `job_id`'s Prolog has already succeeded here.
    pub(super) fn prolog_done(&self, job_id: u32) -> bool {
        self.scripts
            .as_ref()
            .and_then(|s| s.jobs.get(&job_id))
            .and_then(|j| j.prolog.as_ref())
            .is_some_and(|r| r.peek() == Some(&true))
    }

    /// Whether this node knows job `job_id` for its scripts.
    pub(super) fn knows_script_job(&self, job_id: u32) -> bool {
        self.scripts
            .as_ref()
            .is_some_and(|s| s.jobs.contains_key(&job_id))
    }

    /// Forget job `job_id` and return its Epilog run (after its Prolog,
    /// if one is still running), to await before the job is reported gone;
    /// `None` when no Epilog is configured.
    pub(super) fn epilog_run(
        &mut self,
        job_id: u32,
        exit: Option<ExitStatus>,
        ctx: &mut Context<Self>,
    ) -> Option<BoxFuture<'static, ()>> {
        let node = self.node.clone();
        let me = ctx.address();
        let scripts = self.scripts.as_mut()?;
        let known = scripts.jobs.remove(&job_id).unwrap_or_default();
        let pattern = scripts.conf.epilog.clone()?;
        let info = known.info.unwrap_or_else(|| ScriptJob {
            job_id,
            ..Default::default()
        });
        let req = ScriptRun {
            context: ScriptContext::EpilogSlurmd,
            job_id,
            pattern,
            env: node_env(
                &info,
                &node,
                &scripts.conf_path,
                ScriptContext::EpilogSlurmd,
                exit,
            ),
            timeout: scripts.timeout(),
            serial: scripts.conf.serial,
            stop: None,
        };
        let prolog = known.prolog;
        Some(
            async move {
                if let Some(p) = prolog {
                    let _ = p.await;
                }
                tracing::info!(job_id, node = %node, "running the Epilog");
                let outcome = spawn(req).await;
                if outcome.ok() {
                    return;
                }
                tracing::error!(job_id, node = %node, outcome = %outcome, "Epilog failed");
                let failure = ScriptFailure {
                    job_id,
                    node,
                    script: NodeScript::Epilog,
                    detail: outcome.to_string(),
                };
                let _ = me.send(ReportScriptFailure(failure)).await;
            }
            .boxed(),
        )
    }
}
