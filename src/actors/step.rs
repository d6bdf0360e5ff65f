//! One actor per running job step, in the controller. For now every job has
//! one step, its batch script; the actor drives it across all of the job's
//! nodes through the relay tree: launch, signals, and the final teardown,
//! and reports how the job ended. When the job's time limit comes is the
//! controller core's decision; it ends the job through this actor.
//!
//! Phases: `Launching` → `Running` → `Ending` (Terminate fanned out to every
//! node) → the controller is told `StepEnded` and the actor stops. A launch
//! may wait, while `Launching`, for the job's PrologSlurmctld
//! ([`ReleaseLaunch`]) and, with `PrologFlags=Alloc`, for every node's
//! Prolog ([`NodeCommand::Prolog`]); a teardown's budget grows by what an
//! Epilog may take.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::Serialize;

use super::relay::{Fanout, RelayActor};
use super::stats::{ActorStats, Counted};
use crate::model::reason::JobReason;
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{ExitStatus, JobLaunch, KillCause, NodeCommand, Outcome, Usage};
use crate::wire::types::JobState;

pub use crate::model::signal::signal_name;

const MAILBOX: usize = 64;
/// Time for a launch to reach every node and be answered, before depth scaling.
const LAUNCH_BASE: Duration = Duration::from_secs(10);
/// Extra time on top of KillWait for a teardown to be confirmed.
const TEARDOWN_SLACK: Duration = Duration::from_secs(5);

/// The step is over on every node.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StepEnded {
    pub job_id: u32,
    pub state: JobState,
    pub exit: ExitStatus,
    pub reason: JobReason,
    /// What the batch script used (zero if it never ran or was not reaped).
    pub usage: Usage,
}

/// The batch script exited on the batch host.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ScriptExited(pub ExitStatus, pub Usage);

/// Stop the step: cancel, node failure, or time limit.
#[derive(Message)]
#[rtype(result = "()")]
pub struct EndStep {
    pub state: JobState,
    pub reason: JobReason,
    /// The exit status to record (default: what the state implies).
    pub exit: Option<ExitStatus>,
    /// Why, for the note in the job's stderr (default: what the state implies).
    pub cause: Option<KillCause>,
}

/// Deliver a signal to the step's processes on every node.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SignalStep {
    pub signal: i32,
    pub batch_only: bool,
    /// Only the srun steps' tasks, not the batch shell (`--signal` without `B:`).
    pub steps_only: bool,
}

#[derive(Message)]
#[rtype(result = "StepStatus")]
pub struct GetStepStatus;

/// `PrologFlags=Alloc`: every node's Prolog of run `run` (the job's
/// restart count) succeeded; told to the controller.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PrologsDone {
    pub job_id: u32,
    pub run: u32,
}

/// The held launch may go: the job's PrologSlurmctld succeeded.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReleaseLaunch;

/// Wait until the job's launch has reached every node (`true`), or failed or
/// was overtaken by the job's end (`false`). An srun step travels as a fanout
/// of its own, and must not reach a node before the job it belongs to.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct AwaitLaunch;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    Launching,
    Running,
    Ending,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepStatus {
    pub job_id: u32,
    pub phase: Phase,
    pub nodes: u64,
    pub failed_nodes: u64,
}

pub struct StepActor {
    job_id: u32,
    ranks: RankSet,
    launch: Option<JobLaunch>,
    kill_wait_s: u32,
    phase: Phase,
    /// How the step ends once teardown completes.
    ending: Option<(JobState, ExitStatus, JobReason)>,
    /// Why the job is killed, when its state does not say (a requeue).
    cause: Option<KillCause>,
    usage: Usage,
    failed_nodes: u64,
    relay: Addr<RelayActor>,
    relay_stats: Arc<ActorStats>,
    controller: Counted<StepEnded>,
    stats: Arc<ActorStats>,
    /// Depth of the relay tree: every deadline grows with it.
    tree_depth: u32,
    /// Those waiting for the launch to settle ([`AwaitLaunch`]).
    launch_waiters: Vec<tokio::sync::oneshot::Sender<bool>>,
    /// The launch waits for this (the job's start being on disk).
    gate: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The gate has opened (or there was none).
    gate_open: bool,
    /// The launch also waits for [`ReleaseLaunch`] (PrologSlurmctld).
    held: bool,
    /// `PrologFlags=Alloc`: every node runs its Prolog before the launch.
    alloc_prolog: bool,
    /// Time a Prolog or Epilog may take on top of each phase's budget.
    script_slack: Duration,
    /// Told when every node's Prolog succeeded (`PrologFlags=Alloc`).
    prologs_done: Option<Recipient<PrologsDone>>,
}

impl StepActor {
    /// `launch = None` adopts a step that is already running (controller restart).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        job_id: u32,
        ranks: RankSet,
        launch: Option<JobLaunch>,
        kill_wait_s: u32,
        relay: Addr<RelayActor>,
        relay_stats: Arc<ActorStats>,
        controller: Counted<StepEnded>,
        stats: Arc<ActorStats>,
        tree_depth: u32,
    ) -> Self {
        let phase = if launch.is_some() {
            Phase::Launching
        } else {
            Phase::Running
        };
        StepActor {
            job_id,
            ranks,
            launch,
            kill_wait_s,
            phase,
            ending: None,
            cause: None,
            usage: Usage::default(),
            failed_nodes: 0,
            relay,
            relay_stats,
            controller,
            stats,
            tree_depth,
            launch_waiters: Vec::new(),
            gate: None,
            gate_open: false,
            held: false,
            alloc_prolog: false,
            script_slack: Duration::ZERO,
            prologs_done: None,
        }
    }

    /// Launch only after [`ReleaseLaunch`] too (the job is CONFIGURING).
    pub fn held(mut self, held: bool) -> Self {
        self.held = held;
        self
    }

    /// With `alloc`, run every node's Prolog first (`PrologFlags=Alloc`);
    /// `slack` is how long a Prolog or Epilog may take.
    pub fn with_prologs(
        mut self,
        alloc: bool,
        slack: Duration,
        done: Recipient<PrologsDone>,
    ) -> Self {
        self.alloc_prolog = alloc;
        self.script_slack = slack;
        self.prologs_done = Some(done);
        self
    }

    /// Launch only once `gate` fires (or its sender is dropped). A cancel
    /// that comes first ends the job without launching it.
    pub fn with_gate(mut self, gate: tokio::sync::oneshot::Receiver<()>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Tell everyone waiting on the launch how it went.
    fn settle_launch(&mut self, launched: bool) {
        for w in self.launch_waiters.drain(..) {
            let _ = w.send(launched);
        }
    }

    fn budget(&self, base: Duration) -> Duration {
        root_budget(base, self.tree_depth)
    }

    fn fanout(
        &self,
        cmd: NodeCommand,
        budget: Duration,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, Vec<Outcome>, &mut Context<Self>) + 'static,
    ) {
        let relay = self.relay.clone();
        let rstats = self.relay_stats.clone();
        let msg = Fanout {
            targets: self.ranks.clone(),
            cmd,
            budget,
        };
        let ranks = self.ranks.clone();
        ctx.spawn(
            async move {
                rstats.sent();
                relay.send(msg).await.unwrap_or_else(|e| {
                    vec![Outcome {
                        ranks,
                        result: Err(format!("relay unavailable: {e}")),
                    }]
                })
            }
            .into_actor(self)
            .map(move |outcomes, act, ctx| then(act, outcomes, ctx)),
        );
    }

    fn begin_end(
        &mut self,
        state: JobState,
        exit: ExitStatus,
        reason: JobReason,
        ctx: &mut Context<Self>,
    ) {
        if self.phase == Phase::Ending {
            return;
        }
        tracing::info!(
            job_id = self.job_id,
            state = state.name(),
            "ending job step"
        );
        self.phase = Phase::Ending;
        self.settle_launch(false);
        self.ending = Some((state, exit, reason));
        if self.launch.take().is_some() {
            // Ended before its start was on disk: nothing reached any node,
            // so there is nothing to tear down.
            self.finish(ctx);
            return;
        }
        // The nodes' Epilogs run before they answer.
        let budget = self.budget(
            Duration::from_secs(u64::from(self.kill_wait_s)) + TEARDOWN_SLACK + self.script_slack,
        );
        let cause = self.cause.or(match state {
            JobState::Cancelled => Some(KillCause::Cancelled),
            JobState::Timeout => Some(KillCause::TimeLimit),
            JobState::NodeFail => Some(KillCause::NodeFailure),
            _ => None,
        });
        let cmd = NodeCommand::Terminate {
            job_id: self.job_id,
            kill_wait_s: self.kill_wait_s,
            cause,
            exit: Some(exit),
        };
        self.fanout(cmd, budget, ctx, |act, outcomes, ctx| {
            for o in outcomes.iter().filter(|o| o.result.is_err()) {
                // A node we cannot reach will be reconciled when it re-registers.
                tracing::warn!(job_id = act.job_id, nodes = o.ranks.len(), error = ?o.result, "teardown not confirmed");
            }
            act.finish(ctx);
        });
    }

    fn finish(&mut self, ctx: &mut Context<Self>) {
        let (state, exit, reason) = self.ending.take().unwrap_or((
            JobState::Failed,
            ExitStatus::default(),
            JobReason::SystemFailure,
        ));
        let msg = StepEnded {
            job_id: self.job_id,
            state,
            exit,
            reason,
            usage: self.usage,
        };
        let c = self.controller.clone();
        // Stop only once the controller has the message: stopping cancels
        // whatever the context is still waiting on.
        ctx.wait(
            async move {
                let _ = c.send(msg).await;
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        );
    }
}

impl Actor for StepActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        if self.launch.is_none() {
            return;
        }
        match self.gate.take() {
            Some(gate) => {
                ctx.spawn(gate.into_actor(self).map(|_, act, ctx| {
                    act.gate_open = true;
                    act.try_launch(ctx)
                }));
            }
            None => {
                self.gate_open = true;
                self.try_launch(ctx)
            }
        }
    }
}

impl Handler<ReleaseLaunch> for StepActor {
    type Result = ();
    fn handle(&mut self, _msg: ReleaseLaunch, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        self.held = false;
        self.try_launch(ctx);
    }
}

impl StepActor {
    /// Launch once nothing holds it any more: the start is on disk and no
    /// PrologSlurmctld runs. With `PrologFlags=Alloc` every node's Prolog
    /// runs first.
    fn try_launch(&mut self, ctx: &mut Context<Self>) {
        if !self.gate_open || self.held || self.phase != Phase::Launching {
            return;
        }
        if self.alloc_prolog {
            self.run_prologs(ctx);
        } else {
            self.launch(ctx);
        }
    }

    /// `PrologFlags=Alloc`: every node runs its Prolog; the batch script
    /// is launched only once all have succeeded. A node whose Prolog failed
    /// answers `PrologFailed` and reports why to the controller, whose core
    /// then requeues or cancels the job (this actor waits for that).
    fn run_prologs(&mut self, ctx: &mut Context<Self>) {
        // Out of `launch` meanwhile: a job ended now is torn down on its
        // nodes (their Epilogs run), not just forgotten.
        let Some(launch) = self.launch.take() else {
            return;
        };
        let job = crate::wire::messages::ScriptJob::from_launch(&launch);
        let cmd = NodeCommand::Prolog(Box::new(job));
        let budget = self.budget(LAUNCH_BASE + self.script_slack);
        self.fanout(cmd, budget, ctx, move |act, outcomes, ctx| {
            if act.phase != Phase::Launching {
                return;
            }
            let failed_prolog = outcomes
                .iter()
                .any(|o| o.result == Ok(crate::wire::messages::NodeReply::PrologFailed));
            let unreachable: Vec<&Outcome> =
                outcomes.iter().filter(|o| o.result.is_err()).collect();
            if !unreachable.is_empty() {
                act.failed_nodes = unreachable.iter().map(|o| o.ranks.len()).sum();
                for o in &unreachable {
                    tracing::error!(job_id = act.job_id, nodes = o.ranks.len(), error = ?o.result, "prolog request failed");
                }
                act.begin_end(
                    JobState::Failed,
                    ExitStatus { code: 1, signal: 0 },
                    JobReason::JobLaunchFailure,
                    ctx,
                );
                return;
            }
            if failed_prolog {
                tracing::warn!(job_id = act.job_id, "a node's Prolog failed; not launching");
                return;
            }
            if let Some(done) = &act.prologs_done {
                let msg = PrologsDone {
                    job_id: act.job_id,
                    run: launch.restarts,
                };
                let done = done.clone();
                actix::spawn(async move {
                    let _ = done.send(msg).await;
                });
            }
            act.launch = Some(launch);
            act.launch(ctx);
        });
    }

    /// Fan the job's launch out to its nodes; the job runs once all answer.
    fn launch(&mut self, ctx: &mut Context<Self>) {
        let Some(launch) = self.launch.take() else {
            return;
        };
        let cmd = NodeCommand::Launch(Box::new(launch));
        let budget = self.budget(LAUNCH_BASE);
        self.fanout(cmd, budget, ctx, |act, outcomes, ctx| {
            let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.result.is_err()).collect();
            if failed.is_empty() {
                if act.phase == Phase::Launching {
                    act.phase = Phase::Running;
                    act.settle_launch(true);
                }
                return;
            }
            act.failed_nodes = failed.iter().map(|o| o.ranks.len()).sum();
            for o in &failed {
                tracing::error!(job_id = act.job_id, nodes = o.ranks.len(), error = ?o.result, "launch failed");
            }
            act.begin_end(
                JobState::Failed,
                ExitStatus { code: 1, signal: 0 },
                JobReason::JobLaunchFailure,
                ctx,
            );
        });
    }
}

impl Handler<ScriptExited> for StepActor {
    type Result = ();
    fn handle(&mut self, msg: ScriptExited, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let mut s = msg.0;
        self.usage = msg.1;
        let (state, reason) = if self.usage.oom_kills > 0 {
            // Slurm's OOM ending: exit 0:125 whatever the script returned.
            s = ExitStatus {
                code: 0,
                signal: 125,
            };
            (JobState::OutOfMemory, JobReason::OutOfMemory)
        } else if s.signal != 0 {
            (JobState::Failed, JobReason::RaisedSignal(s.signal))
        } else if s.code != 0 {
            (JobState::Failed, JobReason::NonZeroExitCode)
        } else {
            (JobState::Completed, JobReason::None)
        };
        if self.phase == Phase::Ending {
            // Already being torn down (cancel/timeout): keep that state, record the status.
            if let Some(e) = &mut self.ending {
                e.1 = s;
            }
            return;
        }
        self.begin_end(state, s, reason, ctx);
    }
}

impl Handler<EndStep> for StepActor {
    type Result = ();
    fn handle(&mut self, msg: EndStep, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let exit = msg.exit.unwrap_or(match msg.state {
            JobState::Cancelled | JobState::Timeout => ExitStatus {
                code: 0,
                signal: 15,
            },
            _ => ExitStatus::default(),
        });
        self.cause = msg.cause;
        self.begin_end(msg.state, exit, msg.reason, ctx);
    }
}

impl Handler<SignalStep> for StepActor {
    type Result = ();
    fn handle(&mut self, msg: SignalStep, ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        let cmd = NodeCommand::Signal {
            job_id: self.job_id,
            signal: msg.signal,
            batch_only: msg.batch_only,
            steps_only: msg.steps_only,
            step: None,
        };
        let budget = self.budget(LAUNCH_BASE);
        self.fanout(cmd, budget, ctx, |_, _, _| {});
    }
}

impl Handler<AwaitLaunch> for StepActor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, _msg: AwaitLaunch, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        match self.phase {
            Phase::Running => Box::pin(async { true }),
            Phase::Ending => Box::pin(async { false }),
            Phase::Launching => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.launch_waiters.push(tx);
                Box::pin(async move { rx.await.unwrap_or(false) })
            }
        }
    }
}

impl Handler<GetStepStatus> for StepActor {
    type Result = MessageResult<GetStepStatus>;
    fn handle(&mut self, _msg: GetStepStatus, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(StepStatus {
            job_id: self.job_id,
            phase: self.phase,
            nodes: self.ranks.len(),
            failed_nodes: self.failed_nodes,
        })
    }
}
