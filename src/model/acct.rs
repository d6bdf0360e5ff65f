//! Accounting records: one job as `sacct` shows it, its steps, and what
//! their processes used. The controller keeps them for good.

use serde::{Deserialize, Serialize};

pub use super::job::AcctStep;
use super::job::{Allocation, ArrayTask, JobRecord, JobState, StepKind};
use super::time::UnixTime;

/// Resources a step's processes used, as the kernel reported at reaping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub max_rss_kb: u64,
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    /// Processes the kernel's OOM killer ended in the step's cgroup: the
    /// step (and a batch job) then ends OUT_OF_MEMORY, as in Slurm.
    #[serde(default)]
    pub oom_kills: u64,
}

/// What one node measured of one srun step's processes (its cgroup, and
/// one cgroup per task): sent up when the step ends there, and answered to
/// `sstat` while it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    pub node: String,
    /// The step's tasks on this node.
    pub tasks: u32,
    /// Peak resident memory of the whole step on this node, KiB.
    pub max_rss_kb: u64,
    /// The task (step-wide rank) with the highest peak, and that peak (KiB):
    /// sacct's MaxRSSTask and, over nodes, MaxRSS's node.
    pub max_rss_task: u32,
    pub max_rss_task_kb: u64,
    /// Sum of the tasks' peaks, KiB: AveRSS is this summed over nodes and
    /// divided by the step's tasks.
    pub rss_sum_kb: u64,
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    pub oom_kills: u64,
}

/// A step's usage over its nodes, as sacct and sstat show it: MaxRSS is the
/// highest node's (with that node and its task), CPU times are summed, and
/// AveRSS averages the tasks' peaks over all the step's tasks (Slurm's rules
/// for jobacct_gather's aggregates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTotals {
    pub max_rss_kb: u64,
    pub max_rss_node: String,
    pub max_rss_task: Option<u32>,
    pub rss_sum_kb: u64,
    pub tasks: u32,
    pub nodes: u32,
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    pub oom_kills: u64,
}

impl StepTotals {
    /// Fold one node's report in.
    pub fn add(&mut self, u: &NodeUsage) {
        // The node's peak: its highest task's when tasks are tracked, else
        // the whole step's on that node.
        let peak = if u.max_rss_task_kb > 0 {
            u.max_rss_task_kb
        } else {
            u.max_rss_kb
        };
        if self.nodes == 0 || peak > self.max_rss_kb {
            self.max_rss_kb = peak;
            self.max_rss_node = u.node.clone();
            self.max_rss_task = Some(u.max_rss_task);
        }
        self.rss_sum_kb = self.rss_sum_kb.saturating_add(if u.rss_sum_kb > 0 {
            u.rss_sum_kb
        } else {
            u.max_rss_kb
        });
        self.tasks = self.tasks.saturating_add(u.tasks);
        self.nodes += 1;
        self.user_cpu_ms = self.user_cpu_ms.saturating_add(u.user_cpu_ms);
        self.system_cpu_ms = self.system_cpu_ms.saturating_add(u.system_cpu_ms);
        self.oom_kills = self.oom_kills.saturating_add(u.oom_kills);
    }

    /// AveRSS, KiB: the tasks' peaks averaged over the tasks reported.
    pub fn ave_rss_kb(&self) -> u64 {
        self.rss_sum_kb / u64::from(self.tasks.max(1))
    }
}

/// One job as `sacct` shows it: the allocation plus its steps. Kept by the
/// controller for good (unlike squeue's view, which forgets after MinJobAge).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcctJob {
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub partition: String,
    /// Empty when no account was given.
    pub account: String,
    pub qos: String,
    pub cluster: String,
    pub state: JobState,
    /// Pending or terminal reason (`None`, `NonZeroExitCode`, ...).
    pub reason: String,
    pub exit_code: (i32, i32),
    /// Highest exit code of any step (`code:signal`).
    pub derived_exit_code: (i32, i32),
    pub submit_time: UnixTime,
    pub eligible_time: Option<UnixTime>,
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
    /// Compressed hostlist; empty while pending.
    pub nodes: String,
    pub num_nodes: u32,
    pub req_nodes: u32,
    pub alloc_cpus: u32,
    pub req_cpus: u32,
    pub num_tasks: u32,
    /// Requested memory: MiB per node, or per CPU when `mem_per_cpu`.
    pub req_mem_mb: u64,
    pub mem_per_cpu: bool,
    pub workdir: String,
    pub submit_line: String,
    pub priority: u32,
    pub restarts: u32,
    pub comment: String,
    pub steps: Vec<AcctStep>,
    /// Set for array tasks.
    #[serde(default)]
    pub array: Option<ArrayTask>,
    /// `--constraint` as shown ("" = none).
    #[serde(default)]
    pub constraints: String,
    /// GRES asked for and held, by name (`gres/gpu=` in ReqTRES/AllocTRES).
    #[serde(default)]
    pub req_gres: Vec<(String, u64)>,
    #[serde(default)]
    pub alloc_gres: Vec<(String, u64)>,
    /// The job's runs before each requeue, oldest first, each its own
    /// record (sacct `-D` lists them; the server flattens them out).
    #[serde(default)]
    pub earlier_runs: Vec<AcctJob>,
    /// Seconds the job spent suspended in its run (sacct's `Suspended`).
    #[serde(default)]
    pub suspended_secs: u64,
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
            let host = batch_host.unwrap_or_default();
            steps.push(AcctStep {
                kind: StepKind::Batch,
                name: "batch".into(),
                state: batch_state,
                exit_code: (self.exit.code, self.exit.signal),
                start_time: Some(start),
                end_time: self.end_time,
                nodes: host.clone(),
                num_nodes: 1,
                num_tasks: 1,
                alloc_cpus: alloc.cpus.first().copied().unwrap_or(0),
                max_rss_kb: usage.max_rss_kb,
                max_vmsize_kb: 0,
                user_cpu_ms: usage.user_cpu_ms,
                system_cpu_ms: usage.system_cpu_ms,
                srun_host: String::new(),
                srun_pid: 0,
                // The batch step is one task on one node: its cgroup's
                // numbers are the task's.
                usage: StepTotals {
                    max_rss_kb: usage.max_rss_kb,
                    max_rss_node: host,
                    max_rss_task: (usage.max_rss_kb > 0).then_some(0),
                    rss_sum_kb: usage.max_rss_kb,
                    tasks: 1,
                    nodes: u32::from(usage.max_rss_kb > 0),
                    user_cpu_ms: usage.user_cpu_ms,
                    system_cpu_ms: usage.system_cpu_ms,
                    oom_kills: usage.oom_kills,
                },
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
            qos: s.qos.clone().unwrap_or_else(|| "normal".into()),
            cluster: cluster.to_string(),
            state,
            reason: self.reason.to_string(),
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
            suspended_secs: self.suspend.total_secs,
            comment: s.comment.clone().unwrap_or_default(),
            constraints: s.constraint.clone().unwrap_or_default(),
            req_gres: crate::model::tres::gres_requested(
                &s.resources,
                s.min_nodes.unwrap_or(1).max(1),
                req_tasks,
            ),
            alloc_gres: self
                .alloc
                .as_ref()
                .map(|a| crate::model::tres::gres_totals(&a.gres))
                .unwrap_or_default(),
            steps: steps
                .into_iter()
                .chain(self.steps.iter().cloned())
                .collect(),
            array: self.array,
            earlier_runs: self.earlier_runs.clone(),
        }
    }
}
