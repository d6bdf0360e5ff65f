//! The persisted form of a job: the submission plus everything the controller
//! decided about it. One record per job id, rewritten on every state change.

use serde::{Deserialize, Serialize};

use crate::sched::depend::{Dependency, Outcome};
use crate::wire::messages::{ExitStatus, Usage};
use crate::wire::types::{AcctJob, AcctStep, ArrayTask, JobState, JobSubmit, StepKind, UnixTime};

/// Where a started job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Node ranks in allocation order (the batch host first).
    pub ranks: Vec<u32>,
    /// CPUs allocated on each node, same order.
    pub cpus: Vec<u32>,
    /// Tasks placed on each node, same order.
    pub tasks: Vec<u32>,
    /// Memory allocated on every node, MiB.
    pub mem_mb: u64,
}

impl Allocation {
    pub fn total_cpus(&self) -> u32 {
        self.cpus.iter().sum()
    }
}

/// A job as the controller keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u32,
    pub submit: JobSubmit,
    /// The resolved partition name.
    pub partition: String,
    /// Resolved limit in minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    pub state: JobState,
    pub reason: String,
    pub priority: u32,
    pub submit_time: UnixTime,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    pub alloc: Option<Allocation>,
    pub exit: ExitStatus,
    pub restarts: u32,
    /// Set while the job is being torn down: the state it ends in once every
    /// node has confirmed.
    #[serde(default)]
    pub ending_as: Option<JobState>,
    /// The next srun step id.
    #[serde(default)]
    pub next_step: u32,
    /// srun steps, for accounting.
    #[serde(default)]
    pub steps: Vec<AcctStep>,
    /// Set for array tasks.
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// `--dependency`, with each term's status as last evaluated.
    #[serde(default)]
    pub dependency: Option<Dependency>,
    /// A requeue waiting for the running job's teardown; `Some(reason)`
    /// holds the job again with that reason.
    #[serde(default)]
    pub requeue: Option<Option<String>>,
    /// The priority was set by an operator (`scontrol update Priority=`):
    /// it sticks, and it does not count when the next submission's
    /// priority is worked out after a restart.
    #[serde(default)]
    pub priority_set: bool,
    /// Time-limit mails already sent for this run (`mail::TIME_LIMIT*`
    /// bits), so each goes once, a restart included.
    #[serde(default)]
    pub mail_sent: u32,
}

impl JobRecord {
    /// Where the job's dependency stands (`Satisfied` when it has none).
    pub fn dependency_outcome(&self) -> Outcome {
        self.dependency
            .as_ref()
            .map_or(Outcome::Satisfied, Dependency::outcome)
    }
}

impl JobRecord {
    /// The accounting view of this job (`sacct`): the allocation row plus its
    /// batch step once it has started. `nodes`/`batch_host` are names, which
    /// only the controller can resolve from ranks.
    pub fn to_acct(
        &self,
        nodes: String,
        batch_host: Option<String>,
        cluster: &str,
        usage: Usage,
    ) -> AcctJob {
        let s = &self.submit;
        let cpt = s.cpus_per_task.unwrap_or(1).max(1);
        let req_tasks = s.ntasks.unwrap_or(1).max(1);
        let alloc_cpus = self.alloc.as_ref().map(Allocation::total_cpus).unwrap_or(0);
        let num_nodes = self
            .alloc
            .as_ref()
            .map(|a| a.ranks.len() as u32)
            .unwrap_or(0);
        let state = self
            .ending_as
            .map(|_| JobState::Completing)
            .unwrap_or(self.state);
        let mut steps = Vec::new();
        let batch = !s.interactive;
        if let (true, Some(start), Some(alloc)) = (batch, self.start_time, &self.alloc) {
            let batch_state = match self.state {
                // The script itself was killed by the cancel/timeout/failure.
                JobState::Cancelled | JobState::Timeout | JobState::NodeFail => JobState::Cancelled,
                other => other,
            };
            steps.push(AcctStep {
                kind: StepKind::Batch,
                name: "batch".into(),
                state: batch_state,
                exit_code: (self.exit.code, self.exit.signal),
                start_time: Some(start),
                end_time: self.end_time,
                nodes: batch_host.unwrap_or_default(),
                num_nodes: 1,
                num_tasks: 1,
                alloc_cpus: alloc.cpus.first().copied().unwrap_or(0),
                max_rss_kb: usage.max_rss_kb,
                max_vmsize_kb: 0,
                user_cpu_ms: usage.user_cpu_ms,
                system_cpu_ms: usage.system_cpu_ms,
                srun_host: String::new(),
                srun_pid: 0,
            });
        }
        AcctJob {
            job_id: self.job_id,
            name: s.name.clone(),
            user: s.user.clone(),
            uid: s.uid,
            gid: s.gid,
            partition: self.partition.clone(),
            account: s.account.clone().unwrap_or_default(),
            qos: "normal".into(),
            cluster: cluster.to_string(),
            state,
            reason: self.reason.clone(),
            exit_code: (self.exit.code, self.exit.signal),
            derived_exit_code: (self.exit.code, self.exit.signal),
            submit_time: self.submit_time,
            eligible_time: Some(self.submit_time),
            start_time: self.start_time,
            end_time: self.end_time,
            time_limit_min: self.time_limit_min,
            nodes,
            num_nodes,
            req_nodes: s.min_nodes.unwrap_or(1),
            alloc_cpus,
            req_cpus: req_tasks * cpt,
            num_tasks: self
                .alloc
                .as_ref()
                .map(|a| a.tasks.iter().sum())
                .unwrap_or(req_tasks),
            req_mem_mb: s.mem_per_node_mb.or(s.mem_per_cpu_mb).unwrap_or(0),
            mem_per_cpu: s.mem_per_node_mb.is_none() && s.mem_per_cpu_mb.is_some(),
            workdir: s.workdir.clone(),
            submit_line: s.submit_line.clone(),
            priority: self.priority,
            restarts: self.restarts,
            comment: s.comment.clone().unwrap_or_default(),
            constraints: s.constraint.clone().unwrap_or_default(),
            steps: steps
                .into_iter()
                .chain(self.steps.iter().cloned())
                .collect(),
            array: self.array,
        }
    }
}
