//! The node agent: the part of a node daemon that holds this node's jobs and
//! runs their batch scripts. Commands reach it from the local relay actor (a
//! fan-out that includes this node); process exits are reported upward.
//!
//! A node keeps every job until the controller tells it to `Terminate`, so a
//! finished script's exit status survives a lost link or a controller restart:
//! it is repeated in every `Hello`/`Register` until acknowledged that way.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use nix::sys::signal::Signal;

use super::agent_link::{RunCommand, SendUp};
use super::stats::ActorStats;
use crate::exec::process::{signal_group, spawn_batch, term_then_kill, wait_with_usage};
use crate::wire::messages::{
    BatchFinished, Body, ExitStatus, Hello, JobLaunch, JobOnNode, JobReport, KillCause,
    NodeCommand, NodeReply, NodeResources, Registration, Usage, PROTOCOL_VERSION,
};
use crate::wire::types::UnixTime;

const MAILBOX: usize = 1024;

/// The Hello this node introduces itself with right now.
#[derive(Message)]
#[rtype(result = "Hello")]
pub struct GetHello;

/// Tell the agent which relay carries its upward messages.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetRelay(pub Recipient<SendUp>);

#[derive(Message)]
#[rtype(result = "()")]
struct ProcessExited {
    job_id: u32,
    status: ExitStatus,
    usage: Usage,
}

#[derive(Message)]
#[rtype(result = "AgentState")]
pub struct GetAgentState;

/// Stop the agent (its daemon is shutting down). Running jobs keep running.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AgentState {
    pub node: String,
    pub running: Vec<u32>,
    pub finished: Vec<(u32, ExitStatus)>,
}

/// How jobs are executed on this node.
#[derive(Clone)]
pub enum ExecMode {
    /// Fork real processes; scripts are written under `spool`.
    Real { spool: PathBuf, conf_path: String },
    /// Pretend: a batch job "runs" for `run_for` and exits 0 (load testing).
    Simulated { run_for: Duration },
}

struct LocalJob {
    /// Process group of the batch script (0 if it does not run here).
    pgid: i32,
    /// The batch script's stderr (if it runs here), as opened for its user.
    batch_stderr: Option<std::fs::File>,
    /// The batch script's spool directory, removed with the job.
    spool_dir: Option<PathBuf>,
    /// Process groups of srun tasks started here (one per task).
    tasks: Vec<i32>,
    /// The srun steps started here, for their kill notes.
    steps: Vec<crate::exec::tasks::StartedStep>,
    finished: Option<ExitStatus>,
}

impl LocalJob {
    fn new(pgid: i32) -> LocalJob {
        LocalJob {
            pgid,
            batch_stderr: None,
            spool_dir: None,
            tasks: Vec::new(),
            steps: Vec::new(),
            finished: None,
        }
    }

    /// The srun steps whose tasks may still run (their link to srun is open).
    fn live_steps(&self) -> impl Iterator<Item = &crate::exec::tasks::StartedStep> {
        self.steps.iter().filter(|s| s.notes.strong_count() > 0)
    }

    /// The process groups of step `id`, while it runs: once its link has
    /// closed they may have been reused by other processes.
    fn live_step_groups(&self, id: u32) -> impl Iterator<Item = i32> + '_ {
        self.live_steps()
            .filter(move |s| s.step_id == id)
            .flat_map(|s| s.groups.iter().copied())
            .filter(|&g| g > 0)
    }

    /// Every process group of the job on this node.
    fn groups(&self) -> impl Iterator<Item = i32> + '_ {
        std::iter::once(self.pgid)
            .chain(self.tasks.iter().copied())
            .filter(|&g| g > 0)
    }
}

pub struct NodeAgent {
    node: String,
    rank: u32,
    /// Index of this node in each job's nodelist is computed per launch.
    boot_id: u64,
    started: UnixTime,
    resources: NodeResources,
    jobs: HashMap<u32, LocalJob>,
    relay: Option<Recipient<SendUp>>,
    mode: ExecMode,
    /// Signs the links to srun that carry step output.
    auth: Option<Arc<crate::wire::auth::Authenticator>>,
    stats: Arc<ActorStats>,
}

impl NodeAgent {
    pub fn new(
        node: String,
        rank: u32,
        boot_id: u64,
        resources: NodeResources,
        mode: ExecMode,
        stats: Arc<ActorStats>,
    ) -> Self {
        NodeAgent {
            node,
            rank,
            boot_id,
            started: chrono::Utc::now().timestamp(),
            resources,
            jobs: HashMap::new(),
            relay: None,
            mode,
            auth: None,
            stats,
        }
    }

    /// Give the agent the key it signs step I/O links with.
    pub fn with_auth(mut self, auth: Arc<crate::wire::auth::Authenticator>) -> Self {
        self.auth = Some(auth);
        self
    }

    fn run_step(&mut self, l: &crate::wire::messages::StepLaunch) -> Result<NodeReply, String> {
        let ExecMode::Real { .. } = &self.mode else {
            return Err("simulated nodes do not run srun steps".into());
        };
        let Some(auth) = self.auth.clone() else {
            return Err("node agent has no key to reach srun".into());
        };
        let Some(job) = self.jobs.get_mut(&l.job_id) else {
            return Err(format!("job {} is not running on this node", l.job_id));
        };
        let index = crate::config::hostlist::expand(&l.nodelist)
            .ok()
            .and_then(|v| v.iter().position(|n| *n == self.node))
            .ok_or_else(|| format!("{} is not in step nodelist {}", self.node, l.nodelist))?;
        let step = crate::exec::tasks::spawn_tasks(l, &self.node, index, auth)?;
        tracing::info!(
            job_id = l.job_id,
            step_id = l.step_id,
            tasks = step.groups.len(),
            "step tasks started"
        );
        job.tasks.extend(step.groups.iter().copied());
        // Forget steps whose link has closed (their tasks are done).
        job.steps.retain(|s| s.notes.strong_count() > 0);
        job.steps.push(step);
        Ok(NodeReply::Launched)
    }

    fn hello(&self) -> Hello {
        let mut jobs: Vec<JobReport> = self
            .jobs
            .iter()
            .map(|(&job_id, j)| JobReport {
                job_id,
                state: match j.finished {
                    Some(s) => JobOnNode::BatchFinished(s),
                    None => JobOnNode::Running,
                },
            })
            .collect();
        jobs.sort_by_key(|j| j.job_id);
        Hello {
            node: self.node.clone(),
            rank: self.rank,
            boot_id: self.boot_id,
            started: self.started,
            version: format!("{}/{}", env!("CARGO_PKG_VERSION"), PROTOCOL_VERSION),
            resources: self.resources.clone(),
            jobs,
        }
    }

    fn launch(&mut self, l: &JobLaunch, ctx: &mut Context<Self>) -> Result<NodeReply, String> {
        if self.jobs.contains_key(&l.job_id) {
            return Ok(NodeReply::Launched); // a retried launch is idempotent
        }
        if l.batch_host != self.node || l.interactive {
            // Holding the allocation; srun steps may start processes later.
            self.jobs.insert(l.job_id, LocalJob::new(0));
            return Ok(NodeReply::Launched);
        }
        let job_id = l.job_id;
        match &self.mode {
            ExecMode::Real { spool, conf_path } => {
                let index = node_index(&l.nodelist, &self.node);
                let proc = spawn_batch(l, &self.node, index, conf_path, spool)
                    .map_err(|e| e.to_string())?;
                tracing::info!(job_id, pid = proc.pid, node = %self.node, "batch script started");
                let mut job = LocalJob::new(proc.pid);
                job.batch_stderr = Some(proc.stderr);
                job.spool_dir = Some(proc.spool_dir);
                self.jobs.insert(job_id, job);
                let me = ctx.address();
                let pid = proc.pid;
                actix::spawn(async move {
                    let (status, usage) = tokio::task::spawn_blocking(move || wait_with_usage(pid))
                        .await
                        .unwrap_or((ExitStatus { code: 1, signal: 0 }, Usage::default()));
                    let _ = me
                        .send(ProcessExited {
                            job_id,
                            status,
                            usage,
                        })
                        .await;
                });
            }
            ExecMode::Simulated { run_for } => {
                self.jobs.insert(job_id, LocalJob::new(0));
                ctx.run_later(*run_for, move |_, ctx| {
                    ctx.notify(ProcessExited {
                        job_id,
                        status: ExitStatus::default(),
                        usage: Usage::default(),
                    })
                });
            }
        }
        Ok(NodeReply::Launched)
    }

    fn send_up(&self, body: Body, ctx: &mut Context<Self>) {
        if let Some(relay) = &self.relay {
            let relay = relay.clone();
            ctx.wait(
                async move {
                    let _ = relay.send(SendUp(body)).await;
                }
                .into_actor(self),
            );
        }
    }
}

/// Slurm's note, in a killed batch job's stderr, of when and why it was
/// killed. Best effort: the kill goes ahead whether or not it is written.
///
/// It goes through the descriptor opened for the user at launch, and only if
/// that is a regular file: a FIFO or terminal named as output could block the
/// agent, and reopening the path would follow whatever the user put there
/// since.
fn write_banner(file: &std::fs::File, job_id: u32, node: &str, cause: KillCause) {
    use std::io::Write;
    let line = kill_note(&format!("JOB {job_id}"), node, cause);
    let written = file.metadata().and_then(|m| {
        if m.is_file() {
            let mut f = file;
            f.write_all(line.as_bytes())
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        tracing::warn!(job_id, error = %e, "cannot write the cancel note");
    }
}

/// slurmstepd's line for a killed job or step (`what` is `JOB 12` or
/// `STEP 12.0`), stamped now in local time.
fn kill_note(what: &str, node: &str, cause: KillCause) -> String {
    let when = crate::cli::format::time::fmt_timestamp(Some(chrono::Utc::now().timestamp()));
    format!(
        "{}: error: *** {what} ON {node} CANCELLED AT {when}{} ***\n",
        crate::exec::identity::stepd_prefix(node),
        cause.suffix()
    )
}

/// Position of `node` in a compressed nodelist (0 if absent).
fn node_index(nodelist: &str, node: &str) -> u32 {
    crate::config::hostlist::expand(nodelist)
        .ok()
        .and_then(|v| v.iter().position(|n| n == node))
        .unwrap_or(0) as u32
}

impl Actor for NodeAgent {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
    }
}

impl Handler<SetRelay> for NodeAgent {
    type Result = ();
    fn handle(&mut self, msg: SetRelay, _ctx: &mut Context<Self>) {
        self.relay = Some(msg.0);
    }
}

impl Handler<GetHello> for NodeAgent {
    type Result = MessageResult<GetHello>;
    fn handle(&mut self, _msg: GetHello, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.hello())
    }
}

impl Handler<GetAgentState> for NodeAgent {
    type Result = MessageResult<GetAgentState>;
    fn handle(&mut self, _msg: GetAgentState, _ctx: &mut Context<Self>) -> Self::Result {
        let mut running: Vec<u32> = Vec::new();
        let mut finished = Vec::new();
        for (&id, j) in &self.jobs {
            match j.finished {
                Some(s) => finished.push((id, s)),
                None => running.push(id),
            }
        }
        running.sort_unstable();
        finished.sort_unstable_by_key(|f| f.0);
        MessageResult(AgentState {
            node: self.node.clone(),
            running,
            finished,
        })
    }
}

impl Handler<ProcessExited> for NodeAgent {
    type Result = ();
    fn handle(&mut self, msg: ProcessExited, ctx: &mut Context<Self>) {
        let Some(job) = self.jobs.get_mut(&msg.job_id) else {
            return;
        };
        job.finished = Some(msg.status);
        tracing::info!(
            job_id = msg.job_id,
            code = msg.status.code,
            signal = msg.status.signal,
            "batch script ended"
        );
        let body = Body::BatchFinished(BatchFinished {
            job_id: msg.job_id,
            node: self.node.clone(),
            status: msg.status,
            usage: msg.usage,
        });
        self.send_up(body, ctx);
    }
}

impl Handler<RunCommand> for NodeAgent {
    type Result = ResponseActFuture<Self, Result<NodeReply, String>>;
    fn handle(&mut self, msg: RunCommand, ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let now = |r: Result<NodeReply, String>| -> Self::Result { Box::pin(fut::ready(r)) };
        match msg.0 {
            NodeCommand::Noop => now(Ok(NodeReply::Ack)),
            NodeCommand::Reregister => {
                let hello = self.hello();
                self.send_up(
                    Body::Register(Registration {
                        hello,
                        parent: None,
                    }),
                    ctx,
                );
                now(Ok(NodeReply::Ack))
            }
            NodeCommand::Launch(l) => {
                let r = self.launch(&l, ctx);
                now(r)
            }
            NodeCommand::RunStep(l) => {
                let r = self.run_step(&l);
                now(r)
            }
            NodeCommand::Signal {
                job_id,
                signal,
                batch_only,
                steps_only,
                step,
            } => {
                let sig = match Signal::try_from(signal) {
                    Ok(s) => s,
                    Err(e) => return now(Err(format!("invalid signal {signal}: {e}"))),
                };
                let count = match self.jobs.get(&job_id) {
                    Some(j) if j.finished.is_none() || !j.tasks.is_empty() => {
                        // -b: only the batch shell; otherwise every group of the job.
                        let groups: Vec<i32> = if let Some(id) = step {
                            j.live_step_groups(id).collect()
                        } else if batch_only {
                            vec![j.pgid]
                        } else if steps_only {
                            j.tasks.iter().copied().filter(|&g| g > 0).collect()
                        } else {
                            j.groups().collect()
                        };
                        groups.into_iter().filter(|&g| signal_group(g, sig)).count() as u32
                    }
                    _ => 0,
                };
                now(Ok(NodeReply::Signalled { processes: count }))
            }
            NodeCommand::KillStep {
                job_id,
                step_id,
                kill_wait_s,
            } => {
                let Some(job) = self.jobs.get(&job_id) else {
                    return now(Ok(NodeReply::Signalled { processes: 0 }));
                };
                for step in job.live_steps().filter(|s| s.step_id == step_id) {
                    step.aborted();
                    step.note(&kill_note(
                        &format!("STEP {job_id}.{step_id}"),
                        &self.node,
                        KillCause::Cancelled,
                    ));
                }
                let groups: Vec<i32> = job.live_step_groups(step_id).collect();
                let count = match kill_wait_s {
                    None => groups
                        .into_iter()
                        .filter(|&g| signal_group(g, Signal::SIGKILL))
                        .count() as u32,
                    Some(w) => {
                        // srun ending its own step: the tasks may clean up.
                        let count = groups.len() as u32;
                        let wait = Duration::from_secs(u64::from(w));
                        actix::spawn(async move { term_then_kill(&groups, wait).await });
                        count
                    }
                };
                tracing::info!(job_id, step_id, groups = count, "step cancelled");
                now(Ok(NodeReply::Signalled { processes: count }))
            }
            NodeCommand::Terminate {
                job_id,
                kill_wait_s,
                cause,
            } => {
                let Some(job) = self.jobs.get(&job_id) else {
                    return now(Ok(NodeReply::Terminated));
                };
                if let Some(cause) = cause {
                    // slurmstepd's line for each srun step still running here…
                    for step in job.live_steps() {
                        step.aborted();
                        step.note(&kill_note(
                            &format!("STEP {job_id}.{}", step.step_id),
                            &self.node,
                            cause,
                        ));
                    }
                    // …and for the batch script, in its stderr.
                    if let (Some(file), None) = (&job.batch_stderr, job.finished) {
                        write_banner(file, job_id, &self.node, cause);
                    }
                }
                let groups: Vec<i32> = job.groups().collect();
                let wait = Duration::from_secs(u64::from(kill_wait_s));
                Box::pin(
                    async move { term_then_kill(&groups, wait).await }
                        .into_actor(self)
                    .map(move |_, act, _| {
                        let spool = act.jobs.remove(&job_id).and_then(|j| j.spool_dir);
                        if let Some(dir) = spool {
                            if let Err(e) = std::fs::remove_dir_all(&dir) {
                                tracing::warn!(job_id, dir = %dir.display(), error = %e, "cannot remove the job's spool directory");
                            }
                        }
                        tracing::info!(job_id, "job terminated on node");
                        Ok(NodeReply::Terminated)
                    }),
                )
            }
        }
    }
}

impl Handler<Stop> for NodeAgent {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
        self.relay = None;
        ctx.stop();
    }
}
