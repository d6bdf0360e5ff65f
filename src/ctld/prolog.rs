//! What the controller decides about prologs and epilogs (Slurm 22.05's
//! semantics); running them is the shells' business (`exec::prolog`).
//!
//! - `PrologSlurmctld`: a job that starts is CONFIGURING (squeue `CF`)
//!   and its launch is held until the script, run by the controller's
//!   shell, reports back ([`Command::CtldPrologDone`]). Success releases
//!   the launch; failure requeues a batch job (not held, as Slurm's
//!   `job_requeue`), and cancels one that cannot be requeued (an srun or
//!   salloc allocation, or `--no-requeue`).
//! - `EpilogSlurmctld`: run once the job is over; its outcome is only
//!   logged, as in Slurm.
//! - A node's `Prolog` or `Epilog` failed ([`ScriptFailure`]): the node is
//!   drained (`Prolog error` / `Epilog error`, by SlurmUser) unless it is
//!   drained already. A failed Prolog also requeues the job held
//!   (`launch failed requeued held`; not held with
//!   `SchedulerParameters=nohold_on_prolog_fail`), or cancels it when it
//!   cannot be requeued. A failed Epilog leaves the job as it ended.
//!
//! [`Command::CtldPrologDone`]: super::command::Command::CtldPrologDone

use std::time::Duration;

use super::command::{CtldScript, Effect, Output};
use super::core::Core;
use crate::config::Config;
use crate::exec::prolog::node_script_conf;
use crate::model::job::{JobRecord, JobState};
use crate::model::node::Reason;
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{KillCause, NodeCommand, NodeScript, ScriptFailure};

impl Core {
    /// Whether job `id` is CONFIGURING (its PrologSlurmctld runs).
    pub fn is_configuring(&self, id: u32) -> bool {
        self.jobs.get(id).is_some_and(|j| {
            j.configuring
                && matches!(j.state, JobState::Running | JobState::Suspended)
                && j.ending_as.is_none()
        })
    }

    /// Jobs that just started: with `PrologFlags=Alloc` their reason is
    /// `Prolog` until every node's Prolog has run; with a PrologSlurmctld
    /// each is CONFIGURING (its launch held) and the script is run for it.
    /// Called before the jobs are written, so all this is written with them.
    pub(super) fn begin_configuring(&mut self, started: &[u32], out: &mut Output) {
        let p = &self.conf.prolog;
        if p.alloc && !p.no_hold && p.prolog.is_some() {
            // Slurm's WAIT_PROLOG while the nodes' Prologs run.
            for &id in started {
                self.jobs.modify(id, |j| j.reason = JobReason::Prolog);
            }
        }
        if self.conf.prolog.prolog_slurmctld.is_none() {
            return;
        }
        for &id in started {
            self.jobs.modify(id, |j| j.configuring = true);
            tracing::info!(job_id = id, "job CONFIGURING: PrologSlurmctld running");
            self.rerun_prolog_slurmctld(id, out);
        }
    }

    /// Run job `id`'s PrologSlurmctld (again, after a controller restart).
    pub(super) fn rerun_prolog_slurmctld(&self, id: u32, out: &mut Output) {
        let (Some(pattern), Some(job)) = (&self.conf.prolog.prolog_slurmctld, self.jobs.get(id))
        else {
            return;
        };
        out.effect(Effect::RunCtldScript(Box::new(CtldScript {
            job_id: id,
            run: job.restarts,
            prolog: true,
            pattern: pattern.clone(),
            env: self.script_env(job, true),
            timeout: self.script_timeout(),
        })));
    }

    /// The PrologSlurmctld of run `run` (the job's restart count) of job
    /// `id` ended. A stale report (the job was cancelled or requeued
    /// meanwhile) changes nothing.
    pub(super) fn ctld_prolog_done(&mut self, id: u32, run: u32, ok: bool, out: &mut Output) {
        let current = self.is_configuring(id) && self.jobs.get(id).map(|j| j.restarts) == Some(run);
        if !current {
            return;
        }
        if ok {
            tracing::info!(job_id = id, "PrologSlurmctld done");
            self.launch_waiting.insert(id);
            self.release_ready_launches(out);
            return;
        }
        self.jobs.modify(id, |j| j.configuring = false);
        tracing::error!(job_id = id, "PrologSlurmctld failed");
        // Slurm's job_requeue here is a plain one: back to PENDING, not held.
        self.requeue_or_cancel(id, None, out);
    }

    /// Release the launch of each job whose PrologSlurmctld succeeded and
    /// whose nodes are all reachable (after a controller restart they may
    /// not have registered again yet: the launch waits for them, the job
    /// still CONFIGURING, rather than fail). Node changes bring a
    /// scheduling pass, which calls this.
    pub(super) fn release_ready_launches(&mut self, out: &mut Output) {
        let waiting: Vec<u32> = self.launch_waiting.iter().copied().collect();
        for id in waiting {
            if !self.is_configuring(id) {
                self.launch_waiting.remove(&id);
                continue;
            }
            let up = self
                .jobs
                .get(id)
                .and_then(|j| j.alloc.as_ref())
                .is_some_and(|a| {
                    a.ranks.iter().all(|&r| {
                        self.nodes.get(r as usize).is_some_and(|st| {
                            st.registered && st.responding && st.admin.down.is_none()
                        })
                    })
                });
            if !up {
                continue;
            }
            self.launch_waiting.remove(&id);
            self.jobs.modify(id, |j| j.configuring = false);
            tracing::info!(job_id = id, "launching after its PrologSlurmctld");
            // The release leaves once the record says so.
            self.put_jobs(&[id], out);
            out.effect(Effect::ReleaseLaunch { job_id: id });
        }
    }

    /// Every node's Prolog of run `run` of job `id` succeeded: its reason
    /// is no longer `Prolog`.
    pub(super) fn node_prologs_done(&mut self, id: u32, run: u32, out: &mut Output) {
        let current = self.jobs.get(id).is_some_and(|j| {
            j.restarts == run
                && j.reason == JobReason::Prolog
                && matches!(j.state, JobState::Running | JobState::Suspended)
        });
        if current {
            self.jobs.modify(id, |j| j.reason = JobReason::None);
            self.put_jobs(&[id], out);
        }
    }

    /// Job `id` is over (called before its final record is written):
    /// nothing of it is CONFIGURING any more, and the EpilogSlurmctld runs.
    pub(super) fn prolog_job_ended(&mut self, id: u32, out: &mut Output) {
        if self.jobs.get(id).is_some_and(|j| j.configuring) {
            self.jobs.modify(id, |j| j.configuring = false);
            // As slurmctld flushes a cancelled CONFIGURING job's scripts.
            out.effect(Effect::StopCtldPrologs { job_id: id });
        }
        let Some(pattern) = self.conf.prolog.epilog_slurmctld.clone() else {
            return;
        };
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        out.effect(Effect::RunCtldScript(Box::new(CtldScript {
            job_id: id,
            run: job.restarts,
            prolog: false,
            pattern,
            env: self.script_env(job, false),
            timeout: self.script_timeout(),
        })));
    }

    /// A node's Prolog or Epilog failed: drain the node, and requeue (or
    /// cancel) the job a Prolog was for.
    pub(super) fn node_script_failed(
        &mut self,
        f: &ScriptFailure,
        now: UnixTime,
        out: &mut Output,
    ) {
        let Some(rank) = self.conf.node_index(&f.node).map(|r| r as u32) else {
            tracing::warn!(node = %f.node, job_id = f.job_id, "script failure from an unknown node; ignored");
            return;
        };
        let text = match f.script {
            NodeScript::Prolog => "Prolog error",
            NodeScript::Epilog => "Epilog error",
        };
        tracing::error!(node = %f.node, job_id = f.job_id, detail = %f.detail, "{text}; draining the node");
        let user = self
            .conf
            .slurm_user
            .clone()
            .unwrap_or_else(|| "root".to_string());
        self.change_node(rank, now, false, out, |st| {
            // Slurm keeps an earlier drain (and its reason) as it is.
            if st.admin.drain.is_none() {
                st.admin.drain = Some(Reason {
                    text: text.to_string(),
                    user,
                    time: now,
                });
            }
        });
        out.effect(Effect::Reschedule);
        if f.script == NodeScript::Epilog {
            return;
        }
        let id = f.job_id;
        let live = self.jobs.get(id).is_some_and(|j| {
            matches!(j.state, JobState::Running | JobState::Suspended)
                && j.ending_as.is_none()
                && j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank))
        });
        if !live {
            return;
        }
        let hold =
            (!self.conf.prolog.nohold_on_fail).then_some(JobReason::LaunchFailedRequeuedHeld);
        self.requeue_or_cancel(id, hold, out);
    }

    /// Requeue job `id` (held with `hold`), or cancel it when it cannot be
    /// requeued: only batch jobs can, and not with `--no-requeue`.
    pub(super) fn requeue_or_cancel(&mut self, id: u32, hold: Option<JobReason>, out: &mut Output) {
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        if job.submit.interactive || job.submit.no_requeue {
            tracing::info!(job_id = id, "job cannot be requeued; cancelling it");
            self.end_job(
                id,
                JobState::Cancelled,
                JobReason::None,
                None,
                Some(KillCause::Cancelled),
                out,
            );
            return;
        }
        tracing::info!(job_id = id, held = hold.is_some(), "requeueing the job");
        self.jobs.modify(id, |j| j.requeue = Some(hold));
        self.end_job(
            id,
            JobState::Cancelled,
            JobReason::None,
            None,
            Some(KillCause::Requeue),
            out,
        );
    }

    /// `scontrol reconfigure` changed the node daemons' Prolog or Epilog:
    /// every node is told (a node that misses it reads the file when it
    /// restarts; the controller's own scripts follow `new` at once).
    pub(super) fn push_node_scripts(&self, new: &Config, out: &mut Output) {
        let scripts = node_script_conf(&new.prolog);
        if node_script_conf(&self.conf.prolog) == scripts || new.nodes.is_empty() {
            return;
        }
        out.effect(Effect::Fanout {
            targets: RankSet::from_range(0..new.nodes.len() as u32),
            cmd: NodeCommand::SetScripts(Box::new(scripts)),
            budget: Duration::from_secs(10),
        });
    }

    fn script_timeout(&self) -> Option<Duration> {
        self.conf
            .prolog
            .timeout_s
            .filter(|&t| t > 0)
            .map(|t| Duration::from_secs(u64::from(t)))
    }

    /// The environment of a PrologSlurmctld or EpilogSlurmctld, as
    /// slurmctld builds it (22.05's `job_common_env_vars` and
    /// `SLURM_SCRIPT_CONTEXT`).
    fn script_env(&self, j: &JobRecord, prolog: bool) -> Vec<(String, String)> {
        let s = &j.submit;
        let mut env: Vec<(String, String)> = Vec::new();
        let mut set = |k: &str, v: String| env.push((k.to_string(), v));
        if let Some(a) = &s.account {
            set("SLURM_JOB_ACCOUNT", a.clone());
        }
        if !prolog {
            let ws = crate::exec::prolog::wait_status(j.exit);
            set("SLURM_JOB_DERIVED_EC", ws.to_string());
            set(
                "SLURM_JOB_EXIT_CODE2",
                format!("{}:{}", j.exit.code, j.exit.signal),
            );
            set("SLURM_JOB_EXIT_CODE", ws.to_string());
        }
        if let Some(a) = &j.array {
            set("SLURM_ARRAY_JOB_ID", a.array_job_id.to_string());
            set("SLURM_ARRAY_TASK_ID", a.task_id.to_string());
            set("SLURM_ARRAY_TASK_COUNT", a.count.to_string());
            set("SLURM_ARRAY_TASK_MAX", a.max.to_string());
            set("SLURM_ARRAY_TASK_MIN", a.min.to_string());
            set("SLURM_ARRAY_TASK_STEP", a.step.to_string());
        }
        set("SLURM_CLUSTER_NAME", self.conf.cluster_name.clone());
        set("SLURM_JOB_GID", s.gid.to_string());
        let group = if s.group.is_empty() {
            s.gid.to_string()
        } else {
            s.group.clone()
        };
        set("SLURM_JOB_GROUP", group);
        set("SLURM_JOBID", j.job_id.to_string());
        set("SLURM_JOB_ID", j.job_id.to_string());
        set("SLURM_JOB_NAME", s.name.clone());
        if let Some(a) = &j.alloc {
            set("SLURM_JOB_NODELIST", self.nodelist(&a.ranks));
            set(
                "SLURM_JOB_CPUS_PER_NODE",
                crate::exec::env::compress_counts(&a.cpus),
            );
            set("SLURM_JOB_NUM_NODES", a.ranks.len().to_string());
        }
        if let Some(c) = &s.constraint {
            set("SLURM_JOB_CONSTRAINTS", c.clone());
        }
        set("SLURM_JOB_PARTITION", j.partition.clone());
        set("SLURM_JOB_RESTART_COUNT", j.restarts.to_string());
        set("SLURM_JOB_UID", s.uid.to_string());
        set("SLURM_JOB_USER", s.user.clone());
        let context = if prolog {
            "prolog_slurmctld"
        } else {
            "epilog_slurmctld"
        };
        set("SLURM_SCRIPT_CONTEXT", context.to_string());
        env
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::fixtures::running;
    use crate::ctld::{Command, Core, Effect, Output};
    use crate::model::job::JobState;
    use crate::model::reason::JobReason;
    use crate::wire::messages::{NodeScript, ScriptFailure};

    fn core(extra: &str, jobs: Vec<crate::model::job::JobRecord>) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2]\n{extra}"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        Core::recover(Arc::new(conf), jobs, None, &HashMap::new(), 1000).0
    }

    fn failed(core: &mut Core, job_id: u32, node: &str, script: NodeScript) -> Output {
        core.apply(
            1000,
            Command::NodeScriptFailed {
                failure: ScriptFailure {
                    job_id,
                    node: node.into(),
                    script,
                    detail: "exit 1".into(),
                },
            },
        )
    }

    fn drain_reason(core: &Core, rank: usize) -> Option<String> {
        core.nodes()[rank]
            .admin
            .drain
            .as_ref()
            .map(|r| r.text.clone())
    }

    fn ends(out: &Output) -> Vec<(u32, JobState)> {
        out.effects
            .iter()
            .filter_map(|e| match e {
                Effect::EndJob { job_id, state, .. } => Some((*job_id, *state)),
                _ => None,
            })
            .collect()
    }

    /// A failed Prolog drains its node with Slurm's reason and requeues
    /// the job held; the job's end then puts it back PENDING, held.
    #[test]
    fn a_failed_prolog_drains_the_node_and_requeues_the_job_held() {
        let mut c = core("", vec![running(5, 1)]);
        let out = failed(&mut c, 5, "n2", NodeScript::Prolog);
        assert_eq!(drain_reason(&c, 1).as_deref(), Some("Prolog error"));
        assert_eq!(drain_reason(&c, 0), None);
        assert_eq!(ends(&out), vec![(5, JobState::Cancelled)]);
        c.apply(
            1001,
            Command::JobEnded {
                job_id: 5,
                state: JobState::Cancelled,
                exit: Default::default(),
                reason: JobReason::None,
                usage: Default::default(),
            },
        );
        let j = c.jobs().get(5).unwrap();
        assert_eq!(j.state, JobState::Pending);
        assert_eq!(j.reason, JobReason::LaunchFailedRequeuedHeld);
        assert_eq!(j.priority, 0);
        assert_eq!(j.restarts, 1);
    }

    #[test]
    fn nohold_on_prolog_fail_requeues_without_the_hold_and_no_requeue_cancels() {
        let mut c = core(
            "SchedulerParameters=nohold_on_prolog_fail\n",
            vec![running(5, 0)],
        );
        failed(&mut c, 5, "n1", NodeScript::Prolog);
        assert_eq!(c.jobs().get(5).unwrap().requeue, Some(None));

        let mut job = running(6, 0);
        job.submit.no_requeue = true;
        let mut c = core("", vec![job]);
        let out = failed(&mut c, 6, "n1", NodeScript::Prolog);
        assert_eq!(ends(&out), vec![(6, JobState::Cancelled)]);
        assert_eq!(
            c.jobs().get(6).unwrap().requeue,
            None,
            "cancelled, not requeued"
        );
    }

    /// A failed Epilog drains the node and leaves the job alone; an
    /// earlier drain keeps its reason.
    #[test]
    fn a_failed_epilog_only_drains_and_keeps_an_earlier_reason() {
        let mut c = core("", vec![running(5, 0)]);
        let out = failed(&mut c, 5, "n1", NodeScript::Epilog);
        assert_eq!(drain_reason(&c, 0).as_deref(), Some("Epilog error"));
        assert!(ends(&out).is_empty());
        failed(&mut c, 5, "n1", NodeScript::Prolog);
        assert_eq!(drain_reason(&c, 0).as_deref(), Some("Epilog error"));
    }

    fn submit(c: &mut Core) -> u32 {
        // The nodes must be up for the job to start.
        for rank in 0..2 {
            c.apply(
                1000,
                Command::NodeRegistered {
                    hello: Box::new(crate::ctld::fixtures::hello(rank, &[])),
                    via: None,
                },
            );
        }
        c.apply(
            1000,
            Command::NodeReachability {
                added: vec![0, 1],
                removed: vec![],
            },
        );
        let out = c.apply(
            1000,
            Command::Submit {
                submit: Box::new(crate::model::job::JobSubmit {
                    name: "j".into(),
                    user: "u".into(),
                    script: "#!/bin/sh\n".into(),
                    ..Default::default()
                }),
                caller: crate::policy::authz::Caller::ROOT,
            },
        );
        match out.reply {
            Some(crate::ctld::Reply::Submit(Ok(r))) => r.job_id,
            other => panic!("{other:?}"),
        }
    }

    /// With a PrologSlurmctld, a started job is CONFIGURING, its launch
    /// held, until the script reports; success releases the launch.
    #[test]
    fn prolog_slurmctld_holds_the_launch_until_it_succeeds() {
        let mut c = core("PrologSlurmctld=/p\nEpilogSlurmctld=/e\n", vec![]);
        let id = submit(&mut c);
        let out = c.apply(1001, Command::Schedule);
        let held = out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::StartJob(s) if s.held && s.launch.is_some()));
        assert!(held, "{:?}", out.effects);
        let script = out.effects.iter().find_map(|e| match e {
            Effect::RunCtldScript(s) => Some(s.clone()),
            _ => None,
        });
        let script = script.expect("the PrologSlurmctld runs");
        assert!(script.prolog);
        let env: HashMap<_, _> = script.env.iter().cloned().collect();
        assert_eq!(
            env.get("SLURM_SCRIPT_CONTEXT").map(String::as_str),
            Some("prolog_slurmctld")
        );
        assert_eq!(env.get("SLURM_JOB_ID"), Some(&id.to_string()));
        assert_eq!(
            env.get("SLURM_JOB_NODELIST").map(String::as_str),
            Some("n1")
        );
        assert!(c.is_configuring(id));
        // A report for another run changes nothing.
        let stale = c.apply(
            1002,
            Command::CtldPrologDone {
                job_id: id,
                run: 9,
                ok: true,
            },
        );
        assert!(stale.effects.is_empty());
        let out = c.apply(
            1002,
            Command::CtldPrologDone {
                job_id: id,
                run: 0,
                ok: true,
            },
        );
        assert!(matches!(out.effects[..], [Effect::ReleaseLaunch { job_id }] if job_id == id));
        assert!(!c.is_configuring(id));
        assert!(!c.jobs().get(id).unwrap().configuring);
        // The job's end runs the EpilogSlurmctld with its exit status.
        let out = c.apply(
            1003,
            Command::JobEnded {
                job_id: id,
                state: JobState::Failed,
                exit: crate::model::job::ExitStatus { code: 3, signal: 0 },
                reason: JobReason::NonZeroExitCode,
                usage: Default::default(),
            },
        );
        let epi = out.effects.iter().find_map(|e| match e {
            Effect::RunCtldScript(s) if !s.prolog => Some(s.clone()),
            _ => None,
        });
        let env: HashMap<_, _> = epi.expect("EpilogSlurmctld").env.into_iter().collect();
        assert_eq!(
            env.get("SLURM_JOB_EXIT_CODE2").map(String::as_str),
            Some("3:0")
        );
        assert_eq!(
            env.get("SLURM_JOB_EXIT_CODE").map(String::as_str),
            Some("768")
        );
    }

    /// A controller that restarts while a job is CONFIGURING launches it
    /// held again and runs its PrologSlurmctld again (its launch never
    /// left), rather than adopting it as running.
    #[test]
    fn a_restart_runs_the_prolog_slurmctld_of_a_configuring_job_again() {
        let mut job = running(5, 0);
        job.configuring = true;
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2]\nPrologSlurmctld=/p\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let (mut c, out) = Core::recover(Arc::new(conf), vec![job], None, &HashMap::new(), 1000);
        let held = out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::StartJob(s) if s.held && s.launch.is_some()));
        assert!(held, "{:?}", out.effects);
        assert!(out
            .effects
            .iter()
            .any(|e| matches!(e, Effect::RunCtldScript(s) if s.prolog && s.job_id == 5)));
        assert!(c.is_configuring(5));
        // Its batch host does not know it: no NODE_FAIL for that.
        let out = c.apply(
            1000,
            Command::NodeRegistered {
                hello: Box::new(crate::ctld::fixtures::hello(0, &[])),
                via: None,
            },
        );
        assert!(crate::ctld::fixtures::node_failed(&out).is_empty());
        let out = c.apply(
            1001,
            Command::CtldPrologDone {
                job_id: 5,
                run: 0,
                ok: true,
            },
        );
        // Done while the node is not reachable yet: the launch waits for
        // it (still CONFIGURING) instead of failing.
        assert!(out.effects.is_empty(), "{:?}", out.effects);
        assert!(c.is_configuring(5));
        c.apply(
            1002,
            Command::NodeReachability {
                added: vec![0],
                removed: vec![],
            },
        );
        let out = c.apply(1002, Command::Schedule);
        let released = out
            .effects
            .iter()
            .filter(|e| matches!(e, Effect::ReleaseLaunch { job_id: 5 }))
            .count();
        assert_eq!(released, 1, "{:?}", out.effects);
        assert!(out
            .persist
            .iter()
            .any(|op| matches!(op, crate::state::store::Op::PutJob(j) if !j.configuring)));
        assert!(!c.is_configuring(5));
    }

    /// `scontrol reconfigure` tells every node daemon a changed Prolog or
    /// Epilog, and nothing when only the controller's scripts changed.
    #[test]
    fn reconfigure_pushes_changed_node_scripts() {
        let mut c = core("Prolog=/a\n", vec![]);
        let reconf = |c: &mut Core, extra: &str| {
            let text = format!(
                "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\nPartitionName=p Nodes=n[1-2]\n{extra}"
            );
            let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
            let out = c.apply(
                1000,
                Command::Reconfigure {
                    conf: Arc::new(conf),
                },
            );
            assert!(matches!(
                out.reply,
                Some(crate::ctld::Reply::Reconfigure(Ok(())))
            ));
            out.effects
                .into_iter()
                .filter_map(|e| match e {
                    Effect::Fanout {
                        targets,
                        cmd: crate::wire::messages::NodeCommand::SetScripts(s),
                        ..
                    } => Some((targets.len(), *s)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert!(reconf(&mut c, "Prolog=/a\nPrologSlurmctld=/x\n").is_empty());
        let pushed = reconf(&mut c, "Prolog=/b\nEpilog=/e\nPrologEpilogTimeout=5\n");
        assert_eq!(pushed.len(), 1);
        let (n, s) = &pushed[0];
        assert_eq!(*n, 2);
        assert_eq!(
            (s.prolog.as_deref(), s.epilog.as_deref(), s.timeout_s),
            (Some("/b"), Some("/e"), Some(5))
        );
    }

    /// PrologFlags=Alloc: the job's reason is `Prolog` until its step
    /// actor reports every node's Prolog done (for the current run only).
    #[test]
    fn alloc_prologs_show_as_the_prolog_reason() {
        let mut c = core("Prolog=/p\nPrologFlags=Alloc\n", vec![]);
        let id = submit(&mut c);
        c.apply(1001, Command::Schedule);
        assert_eq!(c.jobs().get(id).unwrap().reason, JobReason::Prolog);
        c.apply(1002, Command::NodePrologsDone { job_id: id, run: 7 });
        assert_eq!(c.jobs().get(id).unwrap().reason, JobReason::Prolog);
        let out = c.apply(1002, Command::NodePrologsDone { job_id: id, run: 0 });
        assert_eq!(c.jobs().get(id).unwrap().reason, JobReason::None);
        assert!(!out.persist.is_empty());
    }

    /// A failed PrologSlurmctld requeues a batch job (not held) and
    /// cancels one that cannot be requeued.
    #[test]
    fn a_failed_prolog_slurmctld_requeues_or_cancels() {
        let mut c = core("PrologSlurmctld=/p\n", vec![]);
        let id = submit(&mut c);
        c.apply(1001, Command::Schedule);
        let out = c.apply(
            1002,
            Command::CtldPrologDone {
                job_id: id,
                run: 0,
                ok: false,
            },
        );
        assert_eq!(ends(&out), vec![(id, JobState::Cancelled)]);
        assert_eq!(c.jobs().get(id).unwrap().requeue, Some(None));

        let mut c = core("PrologSlurmctld=/p\n", vec![]);
        let id = submit(&mut c);
        c.jobs.modify(id, |j| j.submit.interactive = true);
        c.apply(1001, Command::Schedule);
        let out = c.apply(
            1002,
            Command::CtldPrologDone {
                job_id: id,
                run: 0,
                ok: false,
            },
        );
        assert_eq!(ends(&out), vec![(id, JobState::Cancelled)]);
        assert_eq!(c.jobs().get(id).unwrap().requeue, None);
    }
}
