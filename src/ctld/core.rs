//! The core's state, its recovery from the store, and the dispatch of
//! commands to the files that decide them.

use std::collections::HashMap;
use std::sync::Arc;

use super::command::{Command, Effect, Output, StartJob};
use crate::config::{hostlist, Config};
use crate::model::job::{JobRecord, JobState};
use crate::model::node::{AdminState, NodeStatus};
use crate::model::time::UnixTime;
use crate::sched::priority::BasicPriority;
use crate::sched::table::JobTable;
use crate::sched::{self, NodeSlot};
use crate::state::store::Op;
use crate::tree::rankset::RankSet;
use crate::tree::topology::Topology;
use crate::wire::messages::KillCause;

/// Lifetime counters (sdiag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub submitted: u64,
    pub started: u64,
    pub ended: HashMap<JobState, u64>,
}

/// The controller's whole decision state.
pub struct Core {
    pub(super) conf: Arc<Config>,
    pub(super) jobs: JobTable,
    /// What each node has free, for placement.
    pub(super) slots: Vec<NodeSlot>,
    /// Each node's health and admin state (see `nodes.rs`).
    pub(super) nodes: Vec<NodeStatus>,
    /// Each node's pending not-responding deadline, if it has one.
    pub(super) node_deadline: Vec<Option<UnixTime>>,
    /// The same deadlines in time order: (when, rank). An entry that no
    /// longer matches `node_deadline` is stale and ignored.
    pub(super) node_deadlines: std::collections::BTreeSet<(UnixTime, u32)>,
    /// Each partition's node ranks (in preference order).
    pub(super) part_ranks: Vec<(String, Vec<u32>)>,
    /// Node rank → the partitions it belongs to.
    pub(super) node_parts: Vec<Vec<String>>,
    pub(super) next_job_id: u32,
    /// priority/basic's count-down for newly eligible jobs.
    pub(super) priority: BasicPriority,
    /// Depth of the relay tree: fan-out deadlines grow with it.
    pub(super) tree_depth: u32,
    pub(super) counters: Counters,
    /// Batch host rank → jobs adopted at recovery that it has not yet
    /// confirmed by registering with them. A start can be on disk while
    /// its launch never left (the controller died in between): the batch
    /// host's first registration tells.
    pub(super) unconfirmed: std::collections::BTreeMap<u32, Vec<u32>>,
    /// Running jobs' time limits and `--signal` warnings: (when, job, the
    /// run's start time, what). Derived from the records (rebuilt on
    /// recovery); an entry for an earlier run of a requeued job is stale
    /// and ignored.
    pub(super) deadlines: std::collections::BTreeSet<(UnixTime, u32, UnixTime, Deadline)>,
    /// CONFIGURING jobs whose PrologSlurmctld succeeded, waiting for all
    /// their nodes to be reachable before their launch is released.
    pub(super) launch_waiting: std::collections::BTreeSet<u32>,
    /// priority/multifactor: usage and fair share (see `priority.rs`).
    pub(super) prio: super::priority::PrioState,
    /// Clusters, accounts, users, associations and QOS (`accounts.rs`).
    pub(super) accounts: crate::model::assoc::AssocDb,
    /// Advance reservations (see `reservations.rs`).
    pub(super) resv: super::reservations::Reservations,
    /// The last backfill pass's plans and the passes' counters.
    pub(super) backfill: super::backfill::BackfillState,
    /// Power saving's queues and timeouts (`power.rs`).
    pub(super) power: super::power::PowerSave,
}

/// What falls due at a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Deadline {
    /// `--signal`: the warning signal, that long before the limit.
    Warn,
    /// The time limit: the job ends TIMEOUT.
    TimeLimit,
    /// A preempted job's grace time is over: it is cancelled or requeued.
    Preempt,
}

impl Core {
    /// Rebuild the core from what the store holds, and the effects that
    /// resume its work: running jobs are adopted (their step actors made
    /// again, without launching), jobs that were being torn down are torn
    /// down again, and every pending `--begin` time gets a wake-up.
    pub fn recover(
        conf: Arc<Config>,
        jobs: Vec<JobRecord>,
        next_job_id: Option<u32>,
        node_admin: &HashMap<String, AdminState>,
        now: UnixTime,
    ) -> (Core, Output) {
        let (fixed, capacity) = conf.tree_ranks();
        let tree_depth = Topology::with_dynamic(fixed, capacity, conf.tree_width.max(2))
            .map(|t| t.max_depth())
            .unwrap_or(1);
        let nodes = super::nodes::initial_nodes(&conf, node_admin, now);
        let slots = conf
            .nodes
            .iter()
            .enumerate()
            .map(|(i, nc)| NodeSlot::for_node(nc, conf.node_gres(i)))
            .collect();
        let (part_ranks, node_parts) = partition_layout(&conf);
        let priority = BasicPriority::recover(jobs.iter().map(|j| (j.priority, j.priority_set)));
        let persisted = next_job_id;
        let next_job_id = super::admission::recovered_next_id(
            persisted,
            jobs.iter().map(|j| j.job_id),
            conf.first_job_id,
            conf.max_job_id,
        );
        let mut core = Core {
            jobs: JobTable::from_records(jobs),
            conf,
            slots,
            node_deadline: vec![None; nodes.len()],
            nodes,
            node_deadlines: Default::default(),
            part_ranks,
            node_parts,
            next_job_id,
            priority,
            tree_depth,
            counters: Counters::default(),
            unconfirmed: Default::default(),
            deadlines: Default::default(),
            launch_waiting: Default::default(),
            prio: Default::default(),
            accounts: Default::default(),
            resv: Default::default(),
            backfill: Default::default(),
            power: Default::default(),
        };
        core.accounts.ensure_cluster(&core.conf.cluster_name);
        let mut out = Output::default();
        if persisted.unwrap_or(core.conf.first_job_id) != next_job_id {
            // On disk before any purge can free the ids it skips.
            tracing::warn!(persisted = ?persisted, next_job_id, "next job id behind the recovered jobs; advanced");
            out.persist.push(Op::NextJobId(next_job_id));
        }
        core.power_recover(now, &mut out);
        core.arm_node_deadlines(now, &mut out);
        core.adopt_running(&mut out);
        // Recovered jobs still waiting for their `--begin` time: one wake-up
        // per distinct time (an array's tasks share theirs).
        let begins: std::collections::BTreeSet<UnixTime> = core
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .filter_map(|j| j.submit.begin_time)
            .filter(|&t| t > now)
            .collect();
        out.effects.extend(begins.into_iter().map(Effect::WakeAt));
        out.effect(Effect::Reschedule);
        (core, out)
    }

    /// Re-reserve what running jobs hold and re-create their step actors.
    fn adopt_running(&mut self, out: &mut Output) {
        let running: Vec<u32> = self.jobs.running().map(|j| j.job_id).collect();
        for id in running {
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            // A job suspended for a preemptor holds what it did not lend.
            if let Some(a) = job.held_alloc() {
                sched::apply(&a, &mut self.slots);
            }
            tracing::info!(job_id = id, "adopting running job after restart");
            let (ending, cause) = (
                job.ending_as,
                job.requeue.is_some().then_some(KillCause::Requeue),
            );
            if job.configuring {
                // Its launch never left: held again while its
                // PrologSlurmctld runs again, as slurmctld does.
                self.start_job_effect(id, true, out);
                if ending.is_none() {
                    self.rerun_prolog_slurmctld(id, out);
                }
            } else {
                if let (None, Some(&host)) =
                    (ending, job.alloc.as_ref().and_then(|a| a.ranks.first()))
                {
                    self.unconfirmed.entry(host).or_default().push(id);
                }
                self.start_job_effect(id, false, out);
            }
            if let Some(state) = ending {
                out.effect(Effect::EndJob {
                    job_id: id,
                    state,
                    reason: crate::model::reason::JobReason::None,
                    exit: None,
                    cause,
                });
            }
        }
    }

    /// Decide `cmd` at time `now`.
    pub fn apply(&mut self, now: UnixTime, cmd: Command) -> Output {
        let mut out = Output::default();
        match cmd {
            Command::Submit { submit, caller } => self.submit(*submit, caller, now, &mut out),
            Command::Cancel { req, caller } => self.cancel(req, caller, now, &mut out),
            Command::CancelStep { req, caller } => self.cancel_step(&req, caller, &mut out),
            Command::UpdateJobs { update, caller } => {
                self.update_jobs(&update, caller, now, &mut out)
            }
            Command::StartStep { req, caller } => self.start_step(&req, caller, now, &mut out),
            Command::StepLaunchFailed { job_id, step_id } => {
                self.step_launch_failed(job_id, step_id, now, &mut out)
            }
            Command::StepDone { done, caller } => self.step_done(&done, caller, now, &mut out),
            Command::StepUsage {
                job_id,
                step_id,
                usage,
            } => self.step_usage(job_id, step_id, &usage, &mut out),
            Command::Schedule => self.schedule(now, &mut out),
            Command::Backfill => self.backfill(now, &mut out),
            Command::JobEnded {
                job_id,
                state,
                exit,
                reason,
                usage,
            } => self.job_ended(job_id, state, exit, reason, usage, now, &mut out),
            Command::NodeRegistered { hello, via } => {
                self.node_registered(&hello, via, now, &mut out)
            }
            Command::NodeReachability { added, removed } => {
                self.node_reachability(&added, &removed, now, &mut out)
            }
            Command::UpdateNodes {
                update,
                user,
                caller,
            } => self.update_nodes(&update, &user, caller, now, &mut out),
            Command::Tick => self.tick(now, &mut out),
            Command::Reconfigure { conf } => self.reconfigure(conf, &mut out),
            Command::CreateNodes { line, caller } => {
                self.create_nodes(&line, caller, now, &mut out)
            }
            Command::JoinNode { line, peer } => {
                self.join_node(&line, peer.as_deref(), now, &mut out)
            }
            Command::DeleteNodes { names, caller } => self.delete_nodes(&names, caller, &mut out),
            Command::NodeScriptFailed { failure } => {
                self.node_script_failed(&failure, now, &mut out)
            }
            Command::CtldPrologDone { job_id, run, ok } => {
                self.ctld_prolog_done(job_id, run, ok, &mut out)
            }
            Command::NodePrologsDone { job_id, run } => {
                self.node_prologs_done(job_id, run, &mut out)
            }
            Command::Accounts {
                req,
                commit,
                user,
                caller,
            } => self.accounts_change(&req, commit, &user, caller, &mut out),
            Command::CreateResv { spec, caller } => {
                self.create_reservation(spec, caller, now, &mut out)
            }
            Command::UpdateResv { spec, caller } => {
                self.update_reservation(spec, caller, now, &mut out)
            }
            Command::DeleteResv { name, caller } => {
                self.delete_reservation(&name, caller, now, &mut out)
            }
            Command::PowerSave => self.power_pass(now, true, &mut out),
            Command::NodeAddress { node, addr } => self.node_address(&node, addr),
        }
        out
    }

    /// Jobs records to persist as they are now.
    pub(super) fn put_jobs(&self, ids: &[u32], out: &mut Output) {
        out.persist.extend(
            ids.iter()
                .filter_map(|&id| self.jobs.get(id))
                .map(|j| Op::PutJob(Box::new(j.clone()))),
        );
    }

    /// Create job `id`'s step actor: launching it (a new start) or
    /// adopting it (`launch == false`, after a restart).
    /// Its time limit and `--signal` warning become deadlines of the core,
    /// each with a wake-up.
    pub(super) fn start_job_effect(&mut self, id: u32, launch: bool, out: &mut Output) {
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        let Some(alloc) = &job.alloc else {
            return;
        };
        out.effect(Effect::StartJob(Box::new(StartJob {
            job_id: id,
            ranks: RankSet::from_ranks(alloc.ranks.iter().copied()),
            launch: launch.then(|| Box::new(self.launch_message(job))),
            held: launch && job.configuring,
        })));
        self.arm_deadlines(id, out);
    }

    /// When job `id`'s time limit, `--signal` warning and preemption grace
    /// fall due for its current run (none for an unlimited, unstarted,
    /// unpreempted job).
    pub(super) fn due_times(&self, id: u32) -> Vec<(UnixTime, Deadline)> {
        let Some(job) = self.jobs.get(id) else {
            return Vec::new();
        };
        // A preemption's grace time ends whatever the job's limit.
        let mut due: Vec<_> = self.preempt_due(id).into_iter().collect();
        let (Some(limit), Some(start)) = (job.time_limit_min, job.start_time) else {
            return due;
        };
        // Its clock stops while it is suspended, and the limit is pushed
        // back by the time it spent so (Slurm's `pre_sus_time`).
        if job.state == JobState::Suspended {
            return due;
        }
        let stopped = i64::try_from(job.suspend.total_secs).unwrap_or(i64::MAX);
        let kill_at = (start + i64::from(limit) * 60).saturating_add(stopped);
        due.push((kill_at, Deadline::TimeLimit));
        if let Some(w) = job.submit.signal {
            due.push((kill_at - i64::from(w.secs), Deadline::Warn));
        }
        due
    }

    /// Job `id`'s time limit and warning become deadlines, each with a
    /// wake-up (again after `scontrol update TimeLimit=`: the entries for
    /// the old limit are then stale and ignored).
    pub(super) fn arm_deadlines(&mut self, id: u32, out: &mut Output) {
        let Some(start) = self.jobs.get(id).and_then(|j| j.start_time) else {
            return;
        };
        for (at, what) in self.due_times(id) {
            out.effect(Effect::WakeAt(at));
            self.deadlines.insert((at, id, start, what));
        }
    }

    pub(super) fn node_name(&self, rank: u32) -> &str {
        self.conf
            .nodes
            .get(rank as usize)
            .map(|n| n.name.as_str())
            .unwrap_or("?")
    }

    pub(super) fn nodelist(&self, ranks: &[u32]) -> String {
        let names: Vec<&str> = ranks.iter().map(|&r| self.node_name(r)).collect();
        hostlist::compress(&names)
    }

    /// A partition's node ranks (empty for an unknown name).
    pub(super) fn partition_ranks(&self, name: &str) -> &[u32] {
        self.part_ranks
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[], |(_, r)| r.as_slice())
    }

    /// Requested ids with each array id standing for all of its tasks (as
    /// in Slurm, `A` names the whole array), without duplicates, in order.
    pub fn resolve_ids(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len());
        let mut seen = std::collections::HashSet::new();
        for &id in ids {
            let members: Vec<u32> = self.jobs.array_members(id).map(|j| j.job_id).collect();
            let expanded = if members.is_empty() {
                vec![id]
            } else {
                members
            };
            for m in expanded {
                if seen.insert(m) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// The job table (read-only), for views and tests.
    pub fn jobs(&self) -> &JobTable {
        &self.jobs
    }

    /// Each node's free and allocated resources, for tests and views.
    pub fn slots(&self) -> &[NodeSlot] {
        &self.slots
    }

    pub fn conf(&self) -> &Arc<Config> {
        &self.conf
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn next_job_id(&self) -> u32 {
        self.next_job_id
    }

    pub(super) fn count_end(&mut self, state: JobState) {
        *self.counters.ended.entry(state).or_default() += 1;
    }
}

/// Each partition's node ranks (in preference order), and each node's
/// partitions.
#[allow(clippy::type_complexity)]
pub(super) fn partition_layout(conf: &Config) -> (Vec<(String, Vec<u32>)>, Vec<Vec<String>>) {
    let mut part_ranks = Vec::with_capacity(conf.partitions.len());
    let mut node_parts = vec![Vec::new(); conf.nodes.len()];
    for pc in &conf.partitions {
        let ranks: Vec<u32> = pc
            .nodes
            .iter()
            .filter_map(|n| conf.node_index(n).map(|i| i as u32))
            .collect();
        for &r in &ranks {
            if let Some(v) = node_parts.get_mut(r as usize) {
                v.push(pc.name.clone());
            }
        }
        part_ranks.push((pc.name.clone(), ranks));
    }
    (part_ranks, node_parts)
}
