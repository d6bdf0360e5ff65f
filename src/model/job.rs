//! A job: its states, what a submission asks for, array membership, exit
//! status, where it runs, and the record the controller keeps for it.

use serde::{Deserialize, Serialize};

use super::dependency::{Dependency, Outcome};
use super::reason::JobReason;
use super::time::UnixTime;

pub use super::state::JobState;

/// `--array`: which indices to run and how many may run at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArraySpec {
    /// Sorted, unique.
    pub indices: Vec<u32>,
    /// The `:N` of the spec (SLURM_ARRAY_TASK_STEP); 1 when not one step.
    pub step: u32,
    /// `%N`: at most N tasks running at once.
    pub throttle: Option<u32>,
}

/// One array task's place in its array: its `A_T` name and the
/// `SLURM_ARRAY_*` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The id the array was submitted as (`A`); one task's own id.
    pub array_job_id: u32,
    pub task_id: u32,
    pub min: u32,
    pub max: u32,
    pub count: u32,
    pub step: u32,
    pub throttle: Option<u32>,
}

/// How a submitted job's batch script is run; everything `sbatch` can ask for
/// in this release. Produced by the CLI, validated by the controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSubmit {
    /// `-J`; the CLI fills in the script's basename (or `wrap`/`sbatch`).
    pub name: String,
    /// `-p`; `None` means the default partition.
    pub partition: Option<String>,
    /// `-N min[-max]`; `None` means "derive from tasks" (at least 1).
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    /// `-n`
    pub ntasks: Option<u32>,
    /// `-c`
    pub cpus_per_task: Option<u32>,
    /// `--ntasks-per-node`
    pub ntasks_per_node: Option<u32>,
    /// `--mem` in MiB (0 = all of each node's memory).
    pub mem_per_node_mb: Option<u64>,
    /// `--mem-per-cpu` in MiB.
    pub mem_per_cpu_mb: Option<u64>,
    /// `-t` in minutes; `Some(0)` or `None` with `time_unlimited` = no limit.
    /// `None` = partition DefaultTime (or MaxTime).
    pub time_limit_min: Option<u32>,
    /// `-o` pattern (unexpanded); `None` = `slurm-%j.out`.
    pub stdout: Option<String>,
    /// `-e` pattern; `None` = same file as stdout.
    pub stderr: Option<String>,
    /// `-i` pattern; `None` = /dev/null.
    pub stdin: Option<String>,
    /// `-D`, absolute; defaults to the submit directory.
    pub workdir: String,
    /// The submit directory (SLURM_SUBMIT_DIR).
    pub submit_dir: String,
    pub submit_host: String,
    /// The batch script text (starts with `#!`).
    pub script: String,
    /// The environment the script runs with, already filtered by `--export`.
    pub env: Vec<(String, String)>,
    /// `--hold`
    pub hold: bool,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// The gid's group name, resolved by the controller at submission
    /// (empty in records from before it was kept).
    #[serde(default)]
    pub group: String,
    /// Every group of the user (primary and supplementary, by name),
    /// resolved by the controller at submission: a partition's
    /// `AllowGroups` is checked against them.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The command line as typed (sacct SubmitLine).
    pub submit_line: String,
    /// `Command=` in scontrol: the script path, or `(null)` for stdin/--wrap.
    pub command: String,
    /// Arguments given after the script path.
    #[serde(default)]
    pub script_args: Vec<String>,
    /// An allocation for srun/salloc: no batch script runs; the job ends
    /// when its client releases it.
    #[serde(default)]
    pub interactive: bool,
    /// `-a/--array`.
    #[serde(default)]
    pub array: Option<ArraySpec>,
    /// `-d/--dependency`, as typed (the controller parses and checks it).
    #[serde(default)]
    pub dependency: Option<String>,
    /// `--kill-on-invalid-dep`; `None` = the cluster default (no).
    #[serde(default)]
    pub kill_on_invalid_dep: Option<bool>,
    /// `--signal=[B:]SIG[@secs]`.
    #[serde(default)]
    pub signal: Option<SignalSpec>,
    /// `--open-mode=append` (default: truncate).
    #[serde(default)]
    pub open_append: bool,
    /// `--begin`: not eligible to start before this time.
    #[serde(default)]
    pub begin_time: Option<UnixTime>,
    /// `-w/--nodelist`: nodes the job must be given (hostlist).
    #[serde(default)]
    pub req_nodes: Option<String>,
    /// `-x/--exclude`: nodes the job must not be given (hostlist).
    #[serde(default)]
    pub exc_nodes: Option<String>,
    /// `--test-only`: say when and where the job would start; queue nothing.
    #[serde(default)]
    pub test_only: bool,
    /// `-A/--account`, lower-cased as Slurm stores it.
    #[serde(default)]
    pub account: Option<String>,
    /// `-q/--qos` as asked; once admitted, the QOS the job runs under
    /// (`None`: no accounting database to say).
    #[serde(default)]
    pub qos: Option<String>,
    /// `--comment`.
    #[serde(default)]
    pub comment: Option<String>,
    /// `-C/--constraint`, in Slurm's spelling (`a,b` shown as `a&b`).
    #[serde(default)]
    pub constraint: Option<String>,
    /// `--exclusive[=user|mcs]`.
    #[serde(default)]
    pub exclusive: Option<Exclusive>,
    /// `-s`/`--oversubscribe`: the job may share its CPUs with other jobs
    /// that allow it, in an `OverSubscribe=YES` partition (Slurm's
    /// `share_res`). `--exclusive` and `-s` replace each other.
    #[serde(default)]
    pub oversubscribe: bool,
    /// `--no-requeue`: the job may not be requeued (`Requeue=0`).
    #[serde(default)]
    pub no_requeue: bool,
    /// `--nice`: subtracted from the job's priority.
    #[serde(default)]
    pub nice: i32,
    /// `--priority`: a fixed priority, honoured for operators only.
    #[serde(default)]
    pub priority: Option<u32>,
    /// `--mail-type`, as the mail module's flag bits (0: no mail).
    #[serde(default)]
    pub mail_type: u32,
    /// `--mail-user` (default: the job's user).
    #[serde(default)]
    pub mail_user: Option<String>,
    /// `--reservation`: the job runs only in it (`ctld::reservations`).
    #[serde(default)]
    pub reservation: Option<String>,
    /// `-L/--licenses`: `name[:count],...`, each of slurm.conf's `Licenses`;
    /// the job waits (reason `Licenses`) until they are free.
    #[serde(default)]
    pub licenses: Option<String>,
    /// GRES, GPUs, socket/core/thread shape and binding (`model::tres`).
    #[serde(default)]
    pub resources: crate::model::tres::ResourceRequest,
}

/// `--exclusive`'s forms. canopy gives every form whole nodes; `User` and
/// `Mcs` are kept so they are shown as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exclusive {
    Node,
    User,
    Mcs,
}

impl Exclusive {
    /// squeue's `%h` and scontrol's `OverSubscribe=`, as slurmctld packs a
    /// job's `shared`: `YES` for `-s`, else from `--exclusive`, else from
    /// the partition (`FORCE:N>1` says `YES`, `EXCLUSIVE` says `NO`), else
    /// `OK` (`YES`/`NO` partitions leave it to the job).
    pub fn oversubscribe(
        e: Option<Exclusive>,
        asked: bool,
        part: Option<crate::model::part_opts::OverSubscribe>,
    ) -> &'static str {
        use crate::model::part_opts::OverSubscribe as O;
        if asked {
            return "YES";
        }
        match (e, part) {
            (Some(Exclusive::Node), _) => "NO",
            (Some(Exclusive::User), _) => "USER",
            (Some(Exclusive::Mcs), _) => "MCS",
            (None, Some(O::Force(n))) if n > 1 => "YES",
            (None, Some(O::Exclusive)) => "NO",
            (None, _) => "OK",
        }
    }

    /// scontrol's `Exclusive=` (the newer spelling of the same).
    pub fn exclusive(e: Option<Exclusive>) -> &'static str {
        match e {
            None => "NO",
            Some(Exclusive::Node) => "NODE",
            Some(Exclusive::User) => "USER",
            Some(Exclusive::Mcs) => "MCS",
        }
    }
}

/// `--signal`: send `signal` `secs` before the time limit, to the steps'
/// tasks or (with `B:`) only to the batch shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalSpec {
    pub signal: i32,
    pub secs: u32,
    pub batch_only: bool,
}

/// Which step of a job an accounting row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepKind {
    /// The batch script (`N.batch`).
    Batch,
    /// The external step created with PrologFlags=Contain (`N.extern`).
    Extern,
    /// An srun step (`N.0`, `N.1`, ...).
    Numbered(u32),
}

/// Exit status of a process: `(code, signal)`, Slurm's `ExitCode=code:signal`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    pub code: i32,
    pub signal: i32,
}

/// Where a started job runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Node ranks in allocation order (the batch host first).
    pub ranks: Vec<u32>,
    /// CPUs allocated on each node, same order.
    pub cpus: Vec<u32>,
    /// Tasks placed on each node, same order.
    pub tasks: Vec<u32>,
    /// Memory allocated on every node, MiB.
    pub mem_mb: u64,
    /// Slurm's abstract CPU ids held on each node, same order (empty for a
    /// record written before CPUs were allocated by identity).
    #[serde(default)]
    pub cpu_ids: Vec<Vec<u32>>,
    /// GRES held on each node, same order.
    #[serde(default)]
    pub gres: Vec<Vec<crate::model::tres::GresAlloc>>,
    /// Set for a job of an `OverSubscribe=YES` or `FORCE` partition: which
    /// partition, and how many jobs may hold each of its CPUs (1: the job
    /// does not share). Kept with the allocation so a restarted controller
    /// rebuilds the same shares.
    #[serde(default)]
    pub share: Option<ShareTag>,
    /// The partition, when it sets `MaxCPUsPerNode`: the CPUs its jobs hold on a node are
    /// counted together against it.
    #[serde(default)]
    pub cap_part: Option<String>,
}

/// How a job of a sharing partition holds its CPUs (select/cons_tres's
/// per-partition rows, counted per CPU).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareTag {
    pub part: String,
    /// Jobs per CPU at most (the partition's `:N`); 1 = not shared.
    pub limit: u16,
}

impl ShareTag {
    /// The job places its CPUs as shareable.
    pub fn shares(&self) -> bool {
        self.limit > 1
    }
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
    pub reason: JobReason,
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
    pub requeue: Option<Option<JobReason>>,
    /// The priority was set by an operator (`scontrol update Priority=`):
    /// it sticks, and it does not count when the next submission's
    /// priority is worked out after a restart.
    #[serde(default)]
    pub priority_set: bool,
    /// Time-limit mails already sent for this run (`mail::TIME_LIMIT*`
    /// bits), so each goes once, a restart included.
    #[serde(default)]
    pub mail_sent: u32,
    /// Running but CONFIGURING: its PrologSlurmctld has not ended yet (or
    /// its nodes are not all back), so its launch has not left; a
    /// restarted controller runs the script again.
    #[serde(default)]
    pub configuring: bool,
    /// CONFIGURING because nodes it was given were powered down (Slurm's
    /// JOB_POWER_UP_NODE): its start time is reset once they answer, a
    /// restart in between included.
    #[serde(default)]
    pub power_up: bool,
    /// Preempted and in its grace time: when it will be killed or
    /// requeued (a restart keeps the deadline).
    #[serde(default)]
    pub preempted: Option<Preemption>,
    /// Accounting records of the runs before each requeue (sacct `-D`),
    /// oldest first, each ended REQUEUED, PREEMPTED or NODE_FAIL.
    #[serde(default)]
    pub earlier_runs: Vec<crate::model::acct::AcctJob>,
    /// This run's suspensions (`scontrol suspend` or preemption), so its
    /// time limit stops while it is stopped.
    #[serde(default)]
    pub suspend: SuspendClock,
    /// Suspended by preemption (`PreemptMode=SUSPEND,GANG`): for whom, and
    /// the CPUs it lent; it resumes when they are free again.
    #[serde(default)]
    pub preempt_suspended: Option<PreemptSuspend>,
}

/// Slurm's `suspend_time`, `pre_sus_time` and `tot_sus_time` for one run:
/// the time limit counts running time only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuspendClock {
    /// When it was last suspended or resumed (`SuspendTime=`).
    pub last: Option<UnixTime>,
    /// Seconds it ran before its latest suspension (`SecsPreSuspend=`).
    pub pre_secs: u64,
    /// Seconds it has spent suspended, the current suspension excluded
    /// (sacct's `Suspended`).
    pub total_secs: u64,
}

impl SuspendClock {
    /// It stops at `now` (started at `start`).
    pub fn suspend(&mut self, start: UnixTime, now: UnixTime) {
        let from = self.last.unwrap_or(start);
        self.pre_secs += u64::try_from(now - from).unwrap_or(0);
        self.last = Some(now);
    }

    /// It goes on at `now`.
    pub fn resume(&mut self, now: UnixTime) {
        let from = self.last.unwrap_or(now);
        self.total_secs += u64::try_from(now - from).unwrap_or(0);
        self.last = Some(now);
    }

    /// Seconds suspended up to `now`, the current suspension included
    /// when `suspended`.
    pub fn suspended_secs(&self, suspended: bool, now: UnixTime) -> u64 {
        let current = match (suspended, self.last) {
            (true, Some(t)) => u64::try_from(now - t).unwrap_or(0),
            _ => 0,
        };
        self.total_secs + current
    }
}

/// A job suspended to make room for a preemptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptSuspend {
    /// When it was suspended.
    pub at: UnixTime,
    /// The job it makes room for.
    pub by: u32,
    /// The CPUs the preemptor took from it, by node (empty until the
    /// preemptor starts): the job holds the rest of its CPUs, and all of
    /// its memory and GRES, while it waits.
    pub lent: Vec<LentCpus>,
}

impl JobRecord {
    /// The part of its allocation the job holds now: all of it, less the
    /// CPUs it lent while suspended for a preemptor.
    pub fn held_alloc(&self) -> Option<Allocation> {
        let mut a = self.alloc.clone()?;
        let Some(s) = &self.preempt_suspended else {
            return Some(a);
        };
        for lent in &s.lent {
            let Some(i) = a.ranks.iter().position(|&r| r == lent.rank) else {
                continue;
            };
            if let Some(c) = a.cpus.get_mut(i) {
                *c = c.saturating_sub(lent.count);
            }
            if let Some(ids) = a.cpu_ids.get_mut(i) {
                ids.retain(|x| !lent.ids.contains(x));
            }
        }
        Some(a)
    }
}

/// CPUs a suspended job lent on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LentCpus {
    pub rank: u32,
    /// Slurm's abstract CPU ids (empty for an allocation made before CPUs
    /// were held by identity).
    pub ids: Vec<u32>,
    pub count: u32,
}

/// A running job's preemption in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    /// When it was preempted (slurmctld's PreemptTime).
    pub at: UnixTime,
    /// When its grace time ends and it is torn down.
    pub until: UnixTime,
    /// Requeued at the end rather than cancelled.
    pub requeue: bool,
    /// The job it makes room for.
    pub by: u32,
}

impl JobRecord {
    /// Where the job's dependency stands (`Satisfied` when it has none).
    pub fn dependency_outcome(&self) -> Outcome {
        self.dependency
            .as_ref()
            .map_or(Outcome::Satisfied, Dependency::outcome)
    }
}

/// Resources and outcome of one step, as `sacct` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcctStep {
    pub kind: StepKind,
    /// `batch`, `extern`, or the srun command name.
    pub name: String,
    pub state: JobState,
    pub exit_code: (i32, i32),
    pub start_time: Option<UnixTime>,
    pub end_time: Option<UnixTime>,
    /// Compressed hostlist.
    pub nodes: String,
    pub num_nodes: u32,
    pub num_tasks: u32,
    pub alloc_cpus: u32,
    /// Peak resident memory of the step's processes, KiB (0 = not measured).
    pub max_rss_kb: u64,
    /// Peak virtual memory, KiB (0 = not measured).
    pub max_vmsize_kb: u64,
    /// CPU time used, milliseconds.
    pub user_cpu_ms: u64,
    pub system_cpu_ms: u64,
    /// Where the step's srun runs (empty for batch steps).
    #[serde(default)]
    pub srun_host: String,
    #[serde(default)]
    pub srun_pid: u32,
    /// What the step's nodes measured, folded together (empty until a node
    /// reports; `max_rss_kb`, `user_cpu_ms` and `system_cpu_ms` above
    /// mirror it).
    #[serde(default)]
    pub usage: super::acct::StepTotals,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_subscribe_is_shown_as_slurmctld_packs_it() {
        use crate::model::part_opts::OverSubscribe as O;
        let o = Exclusive::oversubscribe;
        assert_eq!(o(None, true, Some(O::Yes(4))), "YES");
        assert_eq!(o(None, true, Some(O::No)), "YES", "-s wherever it is asked");
        assert_eq!(o(None, false, Some(O::Yes(4))), "OK");
        assert_eq!(o(None, false, Some(O::No)), "OK");
        assert_eq!(o(None, false, Some(O::Force(2))), "YES");
        assert_eq!(o(None, false, Some(O::Force(1))), "OK");
        assert_eq!(o(None, false, Some(O::Exclusive)), "NO");
        assert_eq!(o(Some(Exclusive::Node), false, Some(O::Force(4))), "NO");
        assert_eq!(o(Some(Exclusive::User), false, None), "USER");
        assert_eq!(o(Some(Exclusive::Mcs), false, None), "MCS");
        assert_eq!(o(None, false, None), "OK");
    }
}
