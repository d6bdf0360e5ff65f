//! Carrying out what the controller core decided: the records to the
//! store first, then (once they are durable) everything that leaves the
//! controller; and the local changes an effect makes at once (step actors,
//! timers, partition actors after a reconfigure).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{ControllerActor, RunSchedule, StepHandle};
use crate::actors::partition::{JobCounts, PartitionActor, SetPartitionConf};
use crate::actors::relay::{Fanout, RelayActor};
use crate::actors::stats::{ActorStats, Counted};
use crate::actors::step::{
    AwaitLaunch, EndStep, ReleaseLaunch, ScriptExited, SignalStep, StepActor,
};
use crate::config::Config;
use crate::ctld::{Command, CtldScript, Effect, Output, Reply, StartJob};
use crate::exec::prolog::{Context as ScriptContext, ScriptRun};
use crate::wire::messages::{ErrorCode, ErrorReply};

/// How long a node's Prolog or Epilog may hold a launch or a teardown up
/// when `PrologEpilogTimeout` is not set (Slurm then waits for ever).
const SCRIPT_SLACK: Duration = Duration::from_secs(60);

impl ControllerActor {
    /// Write the output's records, make local changes at once (step actors,
    /// timers, configuration), and return a future that, once the records
    /// are durable, sends everything else and yields the reply. If the write
    /// fails, the fatal hook runs and nothing is sent.
    pub(super) fn carry_out(
        &mut self,
        out: Output,
        ctx: &mut Context<Self>,
    ) -> BoxFuture<'static, Option<Reply>> {
        let Output {
            persist,
            effects,
            mut reply,
        } = out;
        self.counts_dirty = true;
        // Every job's end, however it ended (a pending job cancelled, a node failure, a
        // requeue) writes its accounting record: `canopy events` takes the ends from there.
        for op in &persist {
            if let crate::state::store::Op::PutAcct(a) = op {
                self.events.record(crate::console::events::Event::new(
                    crate::console::events::EventKind::JobState,
                    a.job_id.to_string(),
                    a.state.name(),
                ));
            }
        }
        let mut gates = Vec::new();
        let mut deferred: Vec<Deferred> = Vec::new();
        for e in effects {
            match e {
                Effect::StartJob(s) => {
                    let id = s.job_id;
                    self.events.record(crate::console::events::Event::new(
                        crate::console::events::EventKind::JobState,
                        id.to_string(),
                        "RUNNING",
                    ));
                    if let Some(gate) = self.spawn_step(*s, ctx) {
                        if let Ok(mut u) = self.unlaunched.lock() {
                            u.insert(id);
                        }
                        gates.push((id, gate));
                    }
                }
                Effect::Reschedule => self.queue_schedule(ctx),
                Effect::WakeAt(t) => {
                    // One timer per distinct time, however many jobs share it.
                    if self.armed.insert(t) {
                        let wait = u64::try_from(t - chrono::Utc::now().timestamp()).unwrap_or(0);
                        ctx.run_later(Duration::from_secs(wait), move |act, ctx| {
                            act.armed.remove(&t);
                            act.queue_schedule(ctx)
                        });
                    }
                }
                Effect::Reconfigured(conf) => self.apply_conf(&conf),
                Effect::EndJob {
                    job_id,
                    state,
                    reason,
                    exit,
                    cause,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = EndStep {
                            state,
                            reason,
                            exit,
                            cause,
                        };
                        let unlaunched = self
                            .unlaunched
                            .lock()
                            .map(|mut u| u.remove(&job_id))
                            .unwrap_or(false);
                        if unlaunched {
                            // Its launch waits for the start to be durable and
                            // has not left: the step actor ends the job without
                            // it, and nothing reaches a node.
                            let addr = h.addr.clone();
                            actix::spawn(async move {
                                let _ = addr.send(msg).await;
                            });
                        } else {
                            deferred.push(Deferred::EndStep(h.addr.clone(), msg));
                        }
                    }
                }
                Effect::SignalJob {
                    job_id,
                    signal,
                    batch_only,
                    steps_only,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = SignalStep {
                            signal,
                            batch_only,
                            steps_only,
                        };
                        deferred.push(Deferred::Signal(h.addr.clone(), msg));
                    }
                }
                Effect::ScriptExited {
                    job_id,
                    status,
                    usage,
                } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        let msg = ScriptExited(status, usage);
                        deferred.push(Deferred::ScriptExited(h.addr.clone(), msg));
                    }
                }
                Effect::Fanout {
                    targets,
                    cmd,
                    budget,
                } => {
                    let msg = Fanout {
                        targets,
                        cmd,
                        budget,
                    };
                    deferred.push(Deferred::Fanout(
                        self.relay.clone(),
                        self.relay_stats.clone(),
                        msg,
                    ));
                }
                Effect::LaunchStep {
                    targets,
                    launch,
                    budget,
                } => {
                    let job = self.steps.get(&launch.job_id).map(|h| {
                        h.stats.sent();
                        h.addr.clone()
                    });
                    let (job_id, step_id) = (launch.job_id, launch.step_id);
                    let msg = Fanout {
                        targets,
                        cmd: crate::wire::messages::NodeCommand::RunStep(launch),
                        budget,
                    };
                    deferred.push(Deferred::LaunchStep {
                        job,
                        job_id,
                        step_id,
                        relay: self.relay.clone(),
                        relay_stats: self.relay_stats.clone(),
                        msg,
                        me: ctx.address(),
                    });
                }
                Effect::RunCtldScript(s) => {
                    let stop = crate::exec::prolog::Stop::default();
                    if s.prolog {
                        self.ctld_prologs.insert((s.job_id, s.run), stop.clone());
                    }
                    deferred.push(Deferred::CtldScript(s, stop, ctx.address()));
                }
                Effect::StopCtldPrologs { job_id } => {
                    self.ctld_prologs.retain(|&(id, _), stop| {
                        if id == job_id {
                            tracing::info!(
                                job_id,
                                "job ended while CONFIGURING; killing its PrologSlurmctld"
                            );
                            stop.stop();
                        }
                        id != job_id
                    });
                }
                Effect::ReleaseLaunch { job_id } => {
                    if let Some(h) = self.steps.get(&job_id) {
                        h.stats.sent();
                        deferred.push(Deferred::Release(h.addr.clone()));
                    }
                }
                Effect::RunPowerProgram(p) => deferred.push(Deferred::Power(*p)),
                Effect::Mail(m) => {
                    let conf = self.core.conf();
                    let sender = crate::mail::Sender {
                        prog: conf.mail_prog.clone(),
                        slurm_user: conf.slurm_user.clone(),
                    };
                    deferred.push(Deferred::Mail(sender, *m))
                }
                Effect::Event(ev) => self.events.record(ev),
            }
        }
        // What leaves waits for this command's records, and for every
        // earlier command's too: with nothing of its own to write, an empty
        // batch through the same ordered writer is the barrier (a signal or
        // a step's kill must not overtake the launch an earlier command is
        // still making durable).
        let durable = (!persist.is_empty() || !deferred.is_empty() || !gates.is_empty())
            .then(|| self.store.submit(persist));
        let fatal = self.fatal.clone();
        let halted = self.halted.clone();
        let unlaunched = self.unlaunched.clone();
        async move {
            if let Some(durable) = durable {
                let failure = match durable.await {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some("state store writer has stopped".to_string()),
                };
                if let Some(e) = failure {
                    // Crash-only: what depended on this write never leaves,
                    // not even a launch whose gate would open on drop.
                    std::mem::forget(gates);
                    if !halted.swap(true, Ordering::SeqCst) {
                        tracing::error!(error = %e, "state store write failed; stopping the controller");
                        fatal(e);
                    }
                    return None;
                }
            }
            if halted.load(Ordering::SeqCst) {
                std::mem::forget(gates);
                return None;
            }
            for (id, g) in gates {
                if let Ok(mut u) = unlaunched.lock() {
                    u.remove(&id);
                }
                let _ = g.send(());
            }
            for d in deferred {
                if let Err(e) = d.run().await {
                    if let Some(Reply::Step(r @ Ok(_))) = &mut reply {
                        *r = Err(ErrorReply {
                            code: ErrorCode::Internal,
                            message: e,
                        });
                    }
                }
            }
            reply
        }
        .boxed()
    }

    /// Start job `s.job_id`'s actor: it launches the job once the returned
    /// gate fires, or adopts it as already running (no launch, no gate).
    fn spawn_step(
        &mut self,
        s: StartJob,
        ctx: &mut Context<Self>,
    ) -> Option<tokio::sync::oneshot::Sender<()>> {
        let st = ActorStats::new();
        self.registry
            .register("step", &format!("{}.batch", s.job_id), &st);
        let launching = s.launch.is_some();
        let prolog = &self.core.conf().prolog;
        // How long a node's Prolog or Epilog may hold a phase up: the
        // timeout, or (Slurm waits for ever) a generous bound.
        let slack = match (&prolog.prolog, &prolog.epilog, prolog.timeout_s) {
            (None, None, _) => Duration::ZERO,
            (_, _, Some(t)) if t > 0 => Duration::from_secs(u64::from(t)),
            _ => SCRIPT_SLACK,
        };
        let alloc = prolog.alloc && prolog.prolog.is_some();
        let actor = StepActor::new(
            s.job_id,
            s.ranks,
            s.launch.map(|l| *l),
            self.core.conf().kill_wait_s,
            self.relay.clone(),
            self.relay_stats.clone(),
            Counted::new(ctx.address().recipient(), self.stats.clone()),
            st.clone(),
            self.topo.max_depth(),
        )
        .held(s.held)
        .with_prologs(alloc, slack, ctx.address().recipient());
        let (open, gate) = tokio::sync::oneshot::channel();
        let addr = if launching {
            actor.with_gate(gate).start()
        } else {
            actor.start()
        };
        self.steps.insert(s.job_id, StepHandle { addr, stats: st });
        launching.then_some(open)
    }

    pub(super) fn queue_schedule(&mut self, ctx: &mut Context<Self>) {
        if !self.schedule_queued && !self.stopping {
            self.schedule_queued = true;
            ctx.notify(RunSchedule);
        }
    }

    /// Push partition counters to the partition actors (advisory: at most
    /// once per `COUNTS_EVERY`, and only if they may have changed).
    pub(super) fn push_partition_counts(&mut self) {
        if !self.counts_dirty {
            return;
        }
        self.counts_dirty = false;
        for (name, (addr, st)) in &self.partitions {
            let c = self.core.jobs().counts(name);
            st.sent();
            if addr
                .try_send(JobCounts {
                    pending: c.pending,
                    running: c.running,
                })
                .is_err()
            {
                st.handled(); // dropped: counters are advisory
            }
        }
    }

    /// Follow a configuration the core accepted: partition actors (new ones
    /// started, removed ones dropped).
    fn apply_conf(&mut self, conf: &Config) {
        self.node_count.store(
            conf.nodes.len() as u32,
            std::sync::atomic::Ordering::Relaxed,
        );
        let mut partitions = HashMap::new();
        for pc in &conf.partitions {
            let pconf = Arc::new(pc.clone());
            let entry = match self.partitions.remove(&pc.name) {
                Some((addr, st)) => {
                    st.sent();
                    addr.do_send(SetPartitionConf(pconf));
                    (addr, st)
                }
                None => {
                    let st = ActorStats::new();
                    self.registry.register("partition", &pc.name, &st);
                    (PartitionActor::new(pconf, st.clone()).start(), st)
                }
            };
            partitions.insert(pc.name.clone(), entry);
        }
        self.partitions = partitions;
    }
}

/// An effect waiting for its records to be durable, with its addressee
/// already looked up.
enum Deferred {
    EndStep(Addr<StepActor>, EndStep),
    Signal(Addr<StepActor>, SignalStep),
    ScriptExited(Addr<StepActor>, ScriptExited),
    Fanout(Addr<RelayActor>, Arc<ActorStats>, Fanout),
    LaunchStep {
        job: Option<Addr<StepActor>>,
        job_id: u32,
        step_id: u32,
        relay: Addr<RelayActor>,
        relay_stats: Arc<ActorStats>,
        msg: Fanout,
        me: Addr<ControllerActor>,
    },
    Mail(crate::mail::Sender, crate::mail::Mail),
    CtldScript(
        Box<CtldScript>,
        crate::exec::prolog::Stop,
        Addr<ControllerActor>,
    ),
    Release(Addr<StepActor>),
    Power(crate::ctld::PowerProgram),
}

impl Deferred {
    /// Send it. Fire-and-forget effects are spawned; a step launch is
    /// awaited, since srun's reply depends on it (`Err` fails the reply).
    async fn run(self) -> Result<(), String> {
        match self {
            Deferred::EndStep(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::Signal(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::ScriptExited(a, m) => {
                actix::spawn(async move {
                    let _ = a.send(m).await;
                });
            }
            Deferred::Fanout(relay, st, msg) => {
                actix::spawn(async move {
                    st.sent();
                    let failed: Vec<String> = match relay.send(msg).await {
                        Ok(o) => o.into_iter().filter_map(|o| o.result.err()).collect(),
                        Err(e) => vec![e.to_string()],
                    };
                    if !failed.is_empty() {
                        tracing::warn!(errors = %failed.join("; "), "node command not delivered everywhere");
                    }
                });
            }
            Deferred::LaunchStep {
                job,
                job_id,
                step_id,
                relay,
                relay_stats,
                msg,
                me,
            } => {
                // The job's own launch may still be on its way down the tree
                // (srun asks as soon as the job is running): the step follows it.
                let outcome = async {
                    if let Some(job) = job {
                        if !job.send(AwaitLaunch).await.unwrap_or(false) {
                            return Err("the job's launch failed or the job is ending".to_string());
                        }
                    }
                    relay_stats.sent();
                    let outcomes = relay.send(msg).await.map_err(|e| e.to_string())?;
                    let failed: Vec<String> = outcomes
                        .into_iter()
                        .filter_map(|o| o.result.err())
                        .collect();
                    if failed.is_empty() {
                        Ok(())
                    } else {
                        Err(failed.join("; "))
                    }
                }
                .await;
                if let Err(e) = outcome {
                    let _ = me.send(LaunchFailed { job_id, step_id }).await;
                    return Err(format!("step launch failed: {e}"));
                }
            }
            Deferred::Power(p) => {
                actix::spawn(super::power::run(p));
            }
            Deferred::CtldScript(s, stop, me) => {
                let run = ScriptRun {
                    context: if s.prolog {
                        ScriptContext::PrologSlurmctld
                    } else {
                        ScriptContext::EpilogSlurmctld
                    },
                    job_id: s.job_id,
                    pattern: s.pattern,
                    env: s.env,
                    timeout: s.timeout,
                    serial: false,
                    stop: Some(stop),
                };
                let (job_id, run_no, prolog) = (s.job_id, s.run, s.prolog);
                actix::spawn(async move {
                    let outcome = crate::exec::prolog::spawn(run).await;
                    if !prolog {
                        // Slurm only logs an EpilogSlurmctld's failure.
                        if !outcome.ok() {
                            tracing::error!(job_id, outcome = %outcome, "EpilogSlurmctld failed");
                        }
                        return;
                    }
                    let _ = me
                        .send(CtldPrologFinished {
                            job_id,
                            run: run_no,
                            ok: outcome.ok(),
                        })
                        .await;
                });
            }
            Deferred::Release(a) => {
                actix::spawn(async move {
                    let _ = a.send(ReleaseLaunch).await;
                });
            }
            Deferred::Mail(sender, m) => {
                tracing::info!(to = %m.to, subject = %m.subject, "mailing");
                crate::mail::send(sender, m);
            }
        }
        Ok(())
    }
}

/// A step's launch did not reach every node.
#[derive(Message)]
#[rtype(result = "()")]
struct LaunchFailed {
    job_id: u32,
    step_id: u32,
}

impl Handler<LaunchFailed> for ControllerActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, msg: LaunchFailed, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::StepLaunchFailed {
            job_id: msg.job_id,
            step_id: msg.step_id,
        };
        let done = self.run(cmd, ctx);
        Box::pin(async move {
            done.await;
        })
    }
}

impl Handler<crate::actors::step::PrologsDone> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: crate::actors::step::PrologsDone, ctx: &mut Context<Self>) {
        let cmd = Command::NodePrologsDone {
            job_id: msg.job_id,
            run: msg.run,
        };
        let done = self.run(cmd, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}

/// A PrologSlurmctld ended (run on its own thread).
#[derive(Message)]
#[rtype(result = "()")]
struct CtldPrologFinished {
    job_id: u32,
    run: u32,
    ok: bool,
}

impl Handler<CtldPrologFinished> for ControllerActor {
    type Result = ();
    fn handle(&mut self, msg: CtldPrologFinished, ctx: &mut Context<Self>) {
        self.ctld_prologs.remove(&(msg.job_id, msg.run));
        let cmd = Command::CtldPrologDone {
            job_id: msg.job_id,
            run: msg.run,
            ok: msg.ok,
        };
        let done = self.run(cmd, ctx);
        ctx.spawn(done.map(|_| ()).into_actor(self));
    }
}
