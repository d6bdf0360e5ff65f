//! The controller's job table: every job record plus the indexes that keep
//! scheduling and queries independent of how many jobs are queued.
//!
//! - one FIFO queue of *schedulable* pending jobs per partition (held jobs
//!   are not in it), so a pass starts jobs until each partition is blocked
//!   and then stops: O(started + partitions), not O(pending);
//! - the set of running jobs, for node failures and reconciliation;
//! - per-partition counters and a "blocked at job N" marker, from which the
//!   `Priority` reason of every job behind the blocked one is derived instead
//!   of being rewritten on each pass;
//! - array membership and running counts, so a `%N` throttle is checked in
//!   O(1) and a throttled array is skipped in one jump, not task by task.
//!
//! Queue order is priority (highest first), then submission order, with an
//! array's tasks in index order at the place of the array (its tasks' ids
//! are not in index order: the array id goes to the highest index, as in
//! Slurm). Under priority/basic each submission gets a priority one below
//! the last, so this is FIFO until an operator or `scontrol top` moves a job.
//!
//! Pure: no clock (callers pass `now`), no I/O, no actors.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::gate::StartGate;
use super::{apply, place, NodeSlot, Request};
use crate::model::dependency::{Outcome, Target, TargetJob};
use crate::model::job::{Allocation, JobRecord};

use crate::model::job::{ArrayTask, ExitStatus, JobState};
use crate::model::partition::PartitionState;
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;

/// Why a partition's queue stopped at `head` in the last pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub head: QueueKey,
    pub reason: JobReason,
    /// The pass that set it (a partition a pass did not reach, its
    /// `default_queue_depth` spent, keeps its last block).
    pub pass: u64,
}

/// A job's place in its partition's queue: (priority counted down from
/// the top, array id or job id, array index or 0, job id).
pub type QueueKey = (u32, u32, u32, u32);

fn queue_key(j: &JobRecord) -> QueueKey {
    let (first, index, id) = submit_key(j);
    (u32::MAX - j.priority, first, index, id)
}

/// Submission order: (array id or job id, array index or 0, job id).
fn submit_key(j: &JobRecord) -> (u32, u32, u32) {
    match &j.array {
        Some(a) => (a.array_job_id, a.task_id, j.job_id),
        None => (j.job_id, 0, j.job_id),
    }
}

/// What a scheduling pass needs to know about one partition.
pub struct PartitionView<'a> {
    pub name: &'a str,
    pub state: PartitionState,
    /// Node ranks in preference order.
    pub ranks: &'a [u32],
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub pending: u32,
    pub running: u32,
}

#[derive(Debug, Default)]
pub struct JobTable {
    jobs: BTreeMap<u32, JobRecord>,
    queues: HashMap<String, BTreeSet<QueueKey>>,
    running: BTreeSet<u32>,
    /// Array id → its tasks' job ids (while any is in the table).
    arrays: HashMap<u32, BTreeSet<u32>>,
    /// Array id → how many of its tasks are running (throttle).
    array_running: HashMap<u32, u32>,
    /// Job (or array) id → pending jobs whose dependency names it. Entries
    /// may be stale; they are checked when used.
    dependents: HashMap<u32, Vec<u32>>,
    /// Pending jobs waiting on a `singleton` term.
    singletons: BTreeSet<u32>,
    /// Job and array ids whose state changed since the last resolution.
    touched: Vec<u32>,
    counts: HashMap<String, Counts>,
    blocked: HashMap<String, Block>,
    /// Jobs a gate held in the last pass (a limit, a license), with its
    /// reason: they wait without holding up the jobs behind them.
    held: HashMap<u32, JobReason>,
    /// Quick passes run so far (which pass set each block).
    passes: u64,
    finished: usize,
    /// uid → that user's jobs not finished (each array task counted), for
    /// the per-user submission cap.
    active_by_uid: HashMap<u32, usize>,
    /// `default_queue_depth`: jobs one quick pass tries at most (`None`:
    /// no bound). The rest wait for the next pass, which every start asks for.
    queue_depth: Option<u32>,
}

fn schedulable(j: &JobRecord) -> bool {
    j.state == JobState::Pending
        && !j.submit.hold
        && j.priority > 0
        && j.dependency_outcome() == Outcome::Satisfied
}

/// A pending job whose dependency is not yet decided.
fn waits_on_dependency(j: &JobRecord) -> bool {
    j.state == JobState::Pending && j.dependency_outcome() == Outcome::Waiting
}

/// What resolving dependencies changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Jobs whose dependency terms changed (to persist).
    pub changed: Vec<u32>,
    /// Jobs cancelled because their dependency can never be satisfied and
    /// they asked for that (`--kill-on-invalid-dep=yes`).
    pub killed: Vec<u32>,
    /// Jobs whose dependency has just become impossible (killed or not):
    /// each is reported once, for INVALID_DEPEND mail.
    pub never: Vec<u32>,
}

impl JobTable {
    /// Rebuild the table and its indexes from stored records.
    pub fn from_records(records: impl IntoIterator<Item = JobRecord>) -> JobTable {
        let mut t = JobTable::default();
        for r in records {
            t.add(r);
        }
        t
    }

    /// Change a job through `f`, keeping every index right: the job leaves its
    /// queue and counters, `f` edits it (hold, partition, size...), and it is
    /// re-indexed from what it has become. False if there is no such job.
    pub fn modify(&mut self, id: u32, f: impl FnOnce(&mut JobRecord)) -> bool {
        let Some(mut r) = self.jobs.remove(&id) else {
            return false;
        };
        if let Some(q) = self.queues.get_mut(&r.partition) {
            q.remove(&queue_key(&r));
        }
        let c = self.counts.entry(r.partition.clone()).or_default();
        match r.state {
            JobState::Pending => c.pending = c.pending.saturating_sub(1),
            JobState::Running | JobState::Completing | JobState::Suspended => {
                c.running = c.running.saturating_sub(1);
                self.running.remove(&id);
                self.array_stopped(r.array);
            }
            _ => self.finished -= 1,
        }
        if !r.state.is_finished() {
            self.user_job_ended(r.submit.uid);
        }
        self.leave_array(&r);
        f(&mut r);
        self.add(r);
        true
    }

    fn add(&mut self, r: JobRecord) {
        if !r.state.is_finished() {
            *self.active_by_uid.entry(r.submit.uid).or_default() += 1;
        }
        let c = self.counts.entry(r.partition.clone()).or_default();
        match r.state {
            JobState::Pending => c.pending += 1,
            JobState::Running | JobState::Completing | JobState::Suspended => {
                c.running += 1;
                self.running.insert(r.job_id);
                if let Some(a) = &r.array {
                    *self.array_running.entry(a.array_job_id).or_default() += 1;
                }
            }
            _ => self.finished += 1,
        }
        if let Some(a) = &r.array {
            self.arrays
                .entry(a.array_job_id)
                .or_default()
                .insert(r.job_id);
        }
        if schedulable(&r) {
            self.queues
                .entry(r.partition.clone())
                .or_default()
                .insert(queue_key(&r));
        }
        if let Some(d) = r.dependency.as_ref().filter(|_| waits_on_dependency(&r)) {
            for t in d.target_ids() {
                self.dependents.entry(t).or_default().push(r.job_id);
            }
            if d.has_singleton() {
                self.singletons.insert(r.job_id);
            }
        }
        self.touch(r.job_id, r.array);
        self.jobs.insert(r.job_id, r);
    }

    /// Note a state change of job `id` (and of its array, which dependency
    /// targets may name) for [`Self::resolve_dependencies`].
    fn touch(&mut self, id: u32, array: Option<ArrayTask>) {
        self.touched.push(id);
        if let Some(a) = array {
            self.touched.push(a.array_job_id);
        }
    }

    /// Re-evaluate the dependencies of jobs that wait on anything touched
    /// since the last call (every waiting job after a restart: `from_records`
    /// touches them all). Newly satisfied jobs join their queues.
    pub fn resolve_dependencies(&mut self, now: UnixTime) -> Resolved {
        let mut out = Resolved::default();
        if self.touched.is_empty() {
            return out;
        }
        let touched = std::mem::take(&mut self.touched);
        let mut candidates: BTreeSet<u32> = BTreeSet::new();
        for t in &touched {
            if let Some(list) = self.dependents.remove(t) {
                candidates.extend(list);
            }
            // A job just admitted (or changed, or requeued) is looked at
            // itself: what it waits on may have ended long ago and never be
            // touched again.
            if self.jobs.get(t).is_some_and(|j| {
                j.state == JobState::Pending && j.dependency_outcome() != Outcome::Satisfied
            }) {
                candidates.insert(*t);
            }
        }
        candidates.extend(self.singletons.iter().copied());
        for id in candidates {
            let Some(j) = self.jobs.get(&id) else {
                continue;
            };
            // Already impossible (a job requeued after its dependency
            // failed): with --kill-on-invalid-dep it goes now.
            let never = j.state == JobState::Pending && j.dependency_outcome() == Outcome::Never;
            if never && j.submit.kill_on_invalid_dep == Some(true) {
                if self.cancel_pending(id, now) {
                    out.killed.push(id);
                }
                continue;
            }
            if !waits_on_dependency(j) {
                self.singletons.remove(&id);
                continue;
            }
            let Some(mut dep) = j.dependency.clone() else {
                continue;
            };
            let singleton_clear = !dep.has_singleton() || self.singleton_clear(j);
            let self_task = j.array.map(|a| a.task_id);
            let was_never = j.dependency_outcome() == Outcome::Never;
            let before = dep.clone();
            let outcome = dep.evaluate(|t| self.target_jobs(t), self_task, singleton_clear, now);
            if outcome == Outcome::Waiting {
                // Still waiting: listen again on whatever it names.
                for t in dep.target_ids() {
                    let list = self.dependents.entry(t).or_default();
                    if !list.contains(&id) {
                        list.push(id);
                    }
                }
            } else {
                self.singletons.remove(&id);
            }
            if dep == before {
                continue;
            }
            if outcome == Outcome::Never && !was_never {
                out.never.push(id);
            }
            let kill = outcome == Outcome::Never && j.submit.kill_on_invalid_dep == Some(true);
            self.modify(id, |j| j.dependency = Some(dep));
            if kill && self.cancel_pending(id, now) {
                out.killed.push(id);
            } else {
                out.changed.push(id);
            }
        }
        out
    }

    /// The jobs a dependency target names, as the evaluator needs them.
    fn target_jobs(&self, t: &Target) -> Vec<TargetJob> {
        let view = |j: &JobRecord| TargetJob {
            state: j.state,
            start_time: j.start_time,
            end_time: j.end_time,
            array_task: j.array.map(|a| a.task_id),
        };
        match t.task {
            Some(task) => self
                .array_task(t.job_id, task)
                .map(view)
                .into_iter()
                .collect(),
            None => {
                let members: Vec<TargetJob> = self.array_members(t.job_id).map(view).collect();
                if members.is_empty() {
                    self.jobs.get(&t.job_id).map(view).into_iter().collect()
                } else {
                    members
                }
            }
        }
    }

    /// True if a target names a job the table knows.
    pub fn target_exists(&self, t: &Target) -> bool {
        !self.target_jobs(t).is_empty()
    }

    /// `singleton`: no other job of the same name and user is running, and
    /// none submitted before this one is still pending.
    fn singleton_clear(&self, j: &JobRecord) -> bool {
        let key = submit_key(j);
        !self.jobs.values().any(|o| {
            o.job_id != j.job_id
                && o.submit.uid == j.submit.uid
                && o.submit.name == j.submit.name
                && match o.state {
                    JobState::Running | JobState::Completing | JobState::Suspended => true,
                    JobState::Pending => submit_key(o) < key,
                    _ => false,
                }
        })
    }

    /// A running array task stopped running.
    fn array_stopped(&mut self, array: Option<ArrayTask>) {
        if let Some(a) = array {
            if let Some(n) = self.array_running.get_mut(&a.array_job_id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.array_running.remove(&a.array_job_id);
                }
            }
        }
    }

    fn leave_array(&mut self, r: &JobRecord) {
        if let Some(a) = &r.array {
            if let Some(m) = self.arrays.get_mut(&a.array_job_id) {
                m.remove(&r.job_id);
                if m.is_empty() {
                    self.arrays.remove(&a.array_job_id);
                }
            }
        }
    }

    /// Job ids of array `array_id`'s tasks still in the table, in id order.
    pub fn array_members(&self, array_id: u32) -> impl Iterator<Item = &JobRecord> {
        self.arrays
            .get(&array_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.jobs.get(id))
    }

    /// The task of array `array_id` with index `task`.
    pub fn array_task(&self, array_id: u32, task: u32) -> Option<&JobRecord> {
        self.array_members(array_id)
            .find(|j| j.array.is_some_and(|a| a.task_id == task))
    }

    /// True when `j` is an array task whose array already runs its `%N`.
    fn throttled(&self, j: &JobRecord) -> bool {
        j.array.is_some_and(|a| {
            a.throttle.is_some_and(|max| {
                self.array_running
                    .get(&a.array_job_id)
                    .is_some_and(|&n| n >= max)
            })
        })
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Jobs that are not finished.
    pub fn active(&self) -> usize {
        self.jobs.len() - self.finished
    }

    pub fn contains(&self, id: u32) -> bool {
        self.jobs.contains_key(&id)
    }

    pub fn get(&self, id: u32) -> Option<&JobRecord> {
        self.jobs.get(&id)
    }

    pub fn values(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values()
    }

    pub fn running(&self) -> impl Iterator<Item = &JobRecord> {
        self.running.iter().filter_map(|id| self.jobs.get(id))
    }

    pub fn counts(&self, partition: &str) -> Counts {
        self.counts.get(partition).copied().unwrap_or_default()
    }

    /// Admit a new pending job.
    pub fn admit(&mut self, r: JobRecord) {
        self.add(r);
    }

    /// The reason squeue shows for `j`: derived for jobs behind a blocked head.
    pub fn reason(&self, j: &JobRecord, now: UnixTime) -> JobReason {
        if j.state == JobState::Pending && !j.submit.hold && j.priority > 0 {
            match j.dependency_outcome() {
                Outcome::Waiting => return JobReason::Dependency,
                Outcome::Never => return JobReason::DependencyNeverSatisfied,
                Outcome::Satisfied => {}
            }
        }
        if !schedulable(j) {
            return j.reason;
        }
        if j.submit.begin_time.is_some_and(|t| t > now) {
            return JobReason::BeginTime;
        }
        if self.throttled(j) {
            return JobReason::JobArrayTaskLimit;
        }
        if let Some(r) = self.held.get(&j.job_id) {
            return *r;
        }
        let key = queue_key(j);
        match self.blocked.get(&j.partition) {
            Some(b) if key == b.head => b.reason,
            Some(b) if key > b.head && b.reason == JobReason::Resources => JobReason::Priority,
            Some(b) if key > b.head => b.reason,
            _ => j.reason,
        }
    }

    /// One pass: start jobs in queue order per partition until one does not
    /// fit. Returns the started ids; their records are Running with `alloc`.
    /// `nodes` resolves the node names of `-w`/`-x` (a job naming an
    /// unknown node waits) and the features `--constraint` asks for.
    /// `gate` is policy: a job it blocks waits with its reason while the
    /// jobs behind it are still considered (as Slurm skips a job held by
    /// a limit); a job its nodes cannot hold stops its partition's walk
    /// (FIFO within a partition); the nodes it allows are the job's
    /// candidates.
    pub fn schedule(
        &mut self,
        parts: &[PartitionView<'_>],
        slots: &mut [NodeSlot],
        now: UnixTime,
        nodes: &dyn super::NodeDirectory,
        gate: &mut dyn StartGate,
    ) -> Vec<u32> {
        let mut started = Vec::new();
        self.held.clear();
        self.passes += 1;
        let mut tried = 0u32;
        for p in parts {
            if self.queue_depth.is_some_and(|d| tried >= d) {
                break;
            }
            self.blocked.remove(p.name);
            let Some(queue) = self.queues.get(p.name) else {
                continue;
            };
            let Some(&head) = queue.first() else {
                continue;
            };
            if p.state != PartitionState::Up {
                let reason = if p.state == PartitionState::Down {
                    JobReason::PartitionDown
                } else {
                    JobReason::PartitionInactive
                };
                self.blocked.insert(
                    p.name.to_string(),
                    Block {
                        head,
                        reason,
                        pass: self.passes,
                    },
                );
                continue;
            }
            // Walk with a cursor: starting a job edits the queue, and a
            // throttled array is skipped past in one step.
            let mut cursor = head;
            let mut first = true;
            loop {
                let next = self.queues.get(p.name).and_then(|q| {
                    if first {
                        q.range(cursor..).next().copied()
                    } else {
                        q.range((
                            std::ops::Bound::Excluded(cursor),
                            std::ops::Bound::Unbounded,
                        ))
                        .next()
                        .copied()
                    }
                });
                first = false;
                let Some(key) = next else {
                    break;
                };
                cursor = key;
                let id = key.3;
                let Some(job) = self.jobs.get(&id) else {
                    continue;
                };
                if self.throttled(job) {
                    // Every later task of this array is throttled too.
                    cursor = (key.0, key.1, u32::MAX, u32::MAX);
                    continue;
                }
                // Not yet eligible (`--begin`): it holds no place in line.
                if job.submit.begin_time.is_some_and(|t| t > now) {
                    continue;
                }
                // A job held by policy (a limit) waits with its reason;
                // jobs behind it are still considered, as in Slurm.
                if let Some(reason) = gate.blocked(job, now) {
                    self.held.insert(id, reason);
                    continue;
                }
                // Asked over the partition's own list: a rule may share
                // one answer among the partition's jobs.
                let allowed = match gate.restrict_in(job, p, now) {
                    None => Ok(None),
                    Some(Ok(v)) => Ok(Some(v)),
                    Some(Err(reason)) => Err(reason),
                };
                if self.queue_depth.is_some_and(|d| tried >= d) {
                    break;
                }
                tried += 1;
                let placed = allowed.and_then(|shared| {
                    let ranks = shared.as_deref().unwrap_or(p.ranks);
                    Request::for_job(&job.submit, nodes)
                        .ok()
                        .and_then(|req| place(&req, ranks, slots))
                        .ok_or(JobReason::Resources)
                });
                match placed {
                    Ok(alloc) => {
                        apply(&alloc, slots);
                        gate.started(job, &alloc, now);
                        self.start(id, alloc, now);
                        started.push(id);
                    }
                    // Waiting for its reservation or a license holds no
                    // place in line (as in Slurm): the walk goes on.
                    Err(reason @ (JobReason::Reservation | JobReason::Licenses)) => {
                        self.held.insert(id, reason);
                    }
                    Err(reason) => {
                        self.blocked.insert(
                            p.name.to_string(),
                            Block {
                                head: key,
                                reason,
                                pass: self.passes,
                            },
                        );
                        break;
                    }
                }
            }
        }
        started
    }

    fn start(&mut self, id: u32, alloc: Allocation, now: UnixTime) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(&j.partition) {
            q.remove(&queue_key(j));
        }
        if let Some(a) = &j.array {
            *self.array_running.entry(a.array_job_id).or_default() += 1;
        }
        let c = self.counts.entry(j.partition.clone()).or_default();
        c.pending = c.pending.saturating_sub(1);
        c.running += 1;
        j.state = JobState::Running;
        j.reason = JobReason::None;
        j.start_time = Some(now);
        j.alloc = Some(alloc);
        // A new run: no suspensions yet.
        j.suspend = Default::default();
        j.preempt_suspended = None;
        self.running.insert(id);
        let array = j.array;
        self.touch(id, array);
    }

    /// The job the last pass stopped at in a partition, and why it could
    /// not start (`None`: nothing waits there, the pass went through, or
    /// the pass did not reach the partition).
    pub fn blocked_head(&self, partition: &str) -> Option<(u32, JobReason)> {
        self.blocked
            .get(partition)
            .filter(|b| b.pass == self.passes)
            .map(|b| (b.head.3, b.reason))
    }

    /// Cancel a pending job. False if it is not pending.
    pub fn cancel_pending(&mut self, id: u32, now: UnixTime) -> bool {
        let Some(j) = self.jobs.get_mut(&id) else {
            return false;
        };
        if j.state != JobState::Pending {
            return false;
        }
        if let Some(q) = self.queues.get_mut(&j.partition) {
            q.remove(&queue_key(j));
        }
        let c = self.counts.entry(j.partition.clone()).or_default();
        c.pending = c.pending.saturating_sub(1);
        j.state = JobState::Cancelled;
        j.reason = JobReason::None;
        j.end_time = Some(now);
        let (array, uid) = (j.array, j.submit.uid);
        self.finished += 1;
        self.user_job_ended(uid);
        self.touch(id, array);
        true
    }

    /// One of `uid`'s jobs is finished (or leaves the table).
    fn user_job_ended(&mut self, uid: u32) {
        if let Some(n) = self.active_by_uid.get_mut(&uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.active_by_uid.remove(&uid);
            }
        }
    }

    /// How many of `uid`'s jobs are pending, running or suspended (each
    /// array task counted, as Slurm counts them against MaxSubmitJobs).
    pub fn active_of(&self, uid: u32) -> usize {
        self.active_by_uid.get(&uid).copied().unwrap_or(0)
    }

    /// Record how a running job will end while its teardown is in flight.
    /// False if it is not running (or already ending).
    pub fn mark_ending(&mut self, id: u32, state: JobState) -> bool {
        match self.jobs.get_mut(&id) {
            Some(j) if self.running.contains(&id) && j.ending_as.is_none() => {
                j.ending_as = Some(state);
                true
            }
            _ => false,
        }
    }

    /// A running job ended; returns its allocation to release.
    pub fn finish(
        &mut self,
        id: u32,
        state: JobState,
        exit: ExitStatus,
        reason: JobReason,
        now: UnixTime,
    ) -> Option<Allocation> {
        if !self.running.remove(&id) {
            return None;
        }
        let array = self.jobs.get(&id).and_then(|j| j.array);
        self.array_stopped(array);
        let j = self.jobs.get_mut(&id)?;
        let c = self.counts.entry(j.partition.clone()).or_default();
        c.running = c.running.saturating_sub(1);
        j.state = state;
        j.ending_as = None;
        j.exit = exit;
        j.reason = reason;
        j.end_time = Some(now);
        self.finished += 1;
        let (alloc, uid) = (j.alloc.clone(), j.submit.uid);
        self.user_job_ended(uid);
        self.touch(id, array);
        alloc
    }

    /// Put a finished job back in its queue under the same id (`scontrol
    /// requeue`): a fresh pending job with one more restart, held when
    /// `hold` names the hold reason. False if the job is not finished.
    pub fn requeue(&mut self, id: u32, hold: Option<JobReason>) -> bool {
        if !self.jobs.get(&id).is_some_and(|j| j.state.is_finished()) {
            return false;
        }
        self.modify(id, |j| {
            j.state = JobState::Pending;
            j.reason = JobReason::None;
            j.start_time = None;
            j.end_time = None;
            j.alloc = None;
            j.ending_as = None;
            j.requeue = None;
            j.preempted = None;
            j.mail_sent = 0;
            j.exit = ExitStatus::default();
            j.restarts += 1;
            j.steps.clear();
            j.next_step = 0;
            if let Some(reason) = hold {
                j.submit.hold = true;
                j.priority = 0;
                j.reason = reason;
            } else if j.submit.hold || j.priority == 0 {
                // A job cancelled while held comes back held; which hold
                // it was is not kept, so its owner may release it.
                j.submit.hold = true;
                j.priority = 0;
                j.reason = JobReason::JobHeldUser;
            }
        })
    }

    /// `scontrol top`: put the pending jobs `ids` (in this order) ahead of
    /// their owner's other pending jobs in the same partition. It hands out
    /// the priorities those jobs already hold, the highest to the listed
    /// jobs and the rest, in their old order, to the others; so no job of
    /// another user or partition changes place relative to any of them.
    /// Returns the jobs whose priority changed.
    pub fn top(&mut self, ids: &[u32]) -> Vec<u32> {
        let mut groups: Vec<((u32, String), Vec<u32>)> = Vec::new();
        for &id in ids {
            let Some(j) = self.jobs.get(&id) else {
                continue;
            };
            let owner = (j.submit.uid, j.partition.clone());
            match groups.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, listed)) if !listed.contains(&id) => listed.push(id),
                Some(_) => {}
                None => groups.push((owner, vec![id])),
            }
        }
        let mut changed = Vec::new();
        for ((uid, partition), listed) in groups {
            let mut others: Vec<&JobRecord> = self
                .jobs
                .values()
                .filter(|o| {
                    o.state == JobState::Pending
                        && o.priority > 0
                        && o.submit.uid == uid
                        && o.partition == partition
                        && !listed.contains(&o.job_id)
                })
                .collect();
            others.sort_by_key(|o| queue_key(o));
            let order: Vec<u32> = listed
                .iter()
                .copied()
                .chain(others.iter().map(|o| o.job_id))
                .collect();
            let mut prios: Vec<u32> = order
                .iter()
                .filter_map(|id| self.jobs.get(id).map(|j| j.priority))
                .collect();
            prios.sort_unstable_by(|a, b| b.cmp(a));
            for (id, p) in order.into_iter().zip(prios) {
                if self.jobs.get(&id).is_some_and(|j| j.priority != p) {
                    self.modify(id, |j| j.priority = p);
                    changed.push(id);
                }
            }
        }
        changed
    }

    /// Suspend (true) or resume (false) a running job's record.
    pub fn set_suspended(&mut self, id: u32, suspend: bool) -> bool {
        let (from, to) = if suspend {
            (JobState::Running, JobState::Suspended)
        } else {
            (JobState::Suspended, JobState::Running)
        };
        if !self
            .jobs
            .get(&id)
            .is_some_and(|j| j.state == from && j.ending_as.is_none())
        {
            return false;
        }
        self.modify(id, |j| j.state = to)
    }

    /// Bound the jobs one [`Self::schedule`] pass tries (0: no bound).
    pub fn set_queue_depth(&mut self, depth: u32) {
        self.queue_depth = (depth > 0).then_some(depth);
    }

    /// Every queued (schedulable) pending job as the backfill pass walks
    /// them: higher PriorityTier partitions first (`tier` of a partition's
    /// name), then highest priority first across partitions.
    pub fn queue_order(&self, tier: impl Fn(&str) -> u16) -> Vec<u32> {
        let mut keys: Vec<(std::cmp::Reverse<u16>, QueueKey)> = self
            .queues
            .iter()
            .flat_map(|(part, q)| {
                let t = std::cmp::Reverse(tier(part));
                q.iter().map(move |k| (t, *k))
            })
            .collect();
        keys.sort_unstable();
        keys.into_iter().map(|(_, k)| k.3).collect()
    }

    /// Whether job `id` is an array task whose array already runs its `%N`.
    pub fn is_throttled(&self, id: u32) -> bool {
        self.jobs.get(&id).is_some_and(|j| self.throttled(j))
    }

    /// A partition's queued jobs in queue order, the first `limit`.
    pub fn queued_in(&self, partition: &str, limit: usize) -> Vec<u32> {
        self.queues
            .get(partition)
            .map(|q| q.iter().take(limit).map(|k| k.3).collect())
            .unwrap_or_default()
    }

    /// Whether job `id` is pending and may start (not held, no open
    /// dependency).
    pub fn is_queued(&self, id: u32) -> bool {
        self.jobs.get(&id).is_some_and(schedulable)
    }

    /// Start pending job `id` on `alloc` (a pass other than [`Self::schedule`]
    /// placed it); its record becomes Running. False if it is not queued.
    pub fn start_job(&mut self, id: u32, alloc: Allocation, now: UnixTime) -> bool {
        if !self.jobs.get(&id).is_some_and(schedulable) {
            return false;
        }
        self.start(id, alloc, now);
        true
    }

    /// Forget finished jobs that ended before `cutoff`; returns their ids.
    pub fn purge_finished_before(&mut self, cutoff: UnixTime) -> Vec<u32> {
        let old: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state.is_finished() && j.end_time.is_some_and(|t| t < cutoff))
            .map(|j| j.job_id)
            .collect();
        for id in &old {
            if let Some(r) = self.jobs.remove(id) {
                self.leave_array(&r);
            }
        }
        self.finished -= old.len();
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::JobSubmit;
    use crate::sched::gate::{Gates, NoGate};

    fn job(id: u32, part: &str, nodes: u32, hold: bool) -> JobRecord {
        JobRecord {
            earlier_runs: Vec::new(),
            job_id: id,
            submit: JobSubmit {
                min_nodes: Some(nodes),
                hold,
                ..Default::default()
            },
            partition: part.into(),
            time_limit_min: None,
            state: JobState::Pending,
            reason: JobReason::None,
            priority: if hold { 0 } else { 1 },
            submit_time: 0,
            start_time: None,
            end_time: None,
            alloc: None,
            exit: ExitStatus::default(),
            restarts: 0,
            ending_as: None,
            next_step: 0,
            steps: vec![],
            array: None,
            dependency: None,
            requeue: None,
            priority_set: false,
            mail_sent: 0,
            configuring: false,
            power_up: false,
            preempted: None,
            suspend: Default::default(),
            preempt_suspended: None,
        }
    }

    fn slots(n: usize) -> Vec<NodeSlot> {
        (0..n).map(|_| NodeSlot::plain(1, 100)).collect()
    }

    /// Blocks job 1 and lets every other job use rank 1 only, counting
    /// the starts it is told of.
    struct Rule {
        starts: Vec<u32>,
    }

    impl StartGate for Rule {
        fn blocked(&self, job: &JobRecord, _: UnixTime) -> Option<JobReason> {
            (job.job_id == 1).then_some(JobReason::Dependency)
        }
        fn restrict(
            &self,
            _: &JobRecord,
            candidates: &[u32],
            _: UnixTime,
        ) -> Option<Result<Vec<u32>, JobReason>> {
            Some(Ok(candidates.iter().copied().filter(|&r| r == 1).collect()))
        }
        fn started(&mut self, job: &JobRecord, alloc: &Allocation, _: UnixTime) {
            assert_eq!(alloc.ranks, [1]);
            self.starts.push(job.job_id);
        }
    }

    /// A job the gate holds (a limit) does not hold up the jobs behind it.
    #[test]
    fn a_job_held_by_the_gate_lets_the_next_one_start() {
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1],
        }];
        let mut t = JobTable::default();
        t.admit(job(1, "p", 1, false));
        t.admit(job(2, "p", 1, false));
        let mut s = slots(2);
        let mut rule = Rule { starts: vec![] };
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut rule),
            vec![2]
        );
        assert_eq!(t.reason(t.get(1).unwrap(), 0), JobReason::Dependency);
    }

    #[test]
    fn a_gate_holds_a_job_with_its_reason_and_narrows_the_nodes_of_others() {
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1],
        }];
        let mut t = JobTable::default();
        t.admit(job(1, "p", 1, false));
        let mut s = slots(2);
        let mut rule = Rule { starts: vec![] };
        assert!(t
            .schedule(&parts, &mut s, 0, &|_: &str| None, &mut rule)
            .is_empty());
        assert_eq!(t.reason(t.get(1).unwrap(), 0), JobReason::Dependency);

        // Two one-node jobs, one allowed node: the first takes it, the
        // second waits for resources.
        let mut t = JobTable::default();
        t.admit(job(2, "p", 1, false));
        t.admit(job(3, "p", 1, false));
        let mut s = slots(2);
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut rule),
            vec![2]
        );
        assert_eq!(rule.starts, [2]);
        assert_eq!(t.reason(t.get(3).unwrap(), 0), JobReason::Resources);
        // Composed, the same rule twice narrows twice and hears each start.
        let (mut a, mut b) = (Rule { starts: vec![] }, Rule { starts: vec![] });
        let mut t = JobTable::default();
        t.admit(job(4, "p", 1, false));
        let mut s = slots(2);
        let mut both = Gates(vec![&mut a, &mut b]);
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut both),
            vec![4]
        );
        assert_eq!((a.starts, b.starts), (vec![4], vec![4]));
    }

    #[test]
    fn fifo_stops_at_the_first_blocked_job_and_derives_reasons() {
        let mut t = JobTable::default();
        t.admit(job(1, "p", 1, false));
        t.admit(job(2, "p", 2, false));
        t.admit(job(3, "p", 1, false));
        t.admit(job(4, "p", 1, true));
        let mut s = slots(2);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1],
        }];
        assert_eq!(
            t.schedule(&parts, &mut s, 10, &|_: &str| None, &mut NoGate),
            vec![1]
        );
        // Job 2 needs both nodes: it blocks; job 3 (would fit) waits behind it.
        assert_eq!(t.reason(t.get(2).unwrap(), 0).to_string(), "Resources");
        assert_eq!(t.reason(t.get(3).unwrap(), 0).to_string(), "Priority");
        assert_eq!(t.reason(t.get(4).unwrap(), 0).to_string(), "None");
        assert_eq!(
            t.counts("p"),
            Counts {
                pending: 3,
                running: 1
            }
        );
        assert_eq!(t.active(), 4);
        let alloc = t
            .finish(
                1,
                JobState::Completed,
                ExitStatus::default(),
                crate::model::reason::JobReason::None,
                20,
            )
            .unwrap();
        super::super::release(&alloc, &mut s);
        assert_eq!(
            t.schedule(&parts, &mut s, 21, &|_: &str| None, &mut NoGate),
            vec![2]
        );
        assert_eq!(
            t.counts("p"),
            Counts {
                pending: 2,
                running: 1
            }
        );
        assert_eq!(t.active(), 3);
        assert!(t.cancel_pending(4, 22));
        assert!(!t.cancel_pending(4, 22));
        assert_eq!(t.purge_finished_before(21), vec![1]);
        assert_eq!(t.purge_finished_before(100), vec![4]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn modify_reindexes_holds_and_partition_moves() {
        let mut t = JobTable::default();
        t.admit(job(1, "a", 1, false));
        t.admit(job(2, "a", 1, true));
        assert!(t.modify(2, |j| {
            j.submit.hold = false;
            j.priority = 1;
            j.partition = "b".into();
        }));
        assert_eq!(
            t.counts("a"),
            Counts {
                pending: 1,
                running: 0
            }
        );
        assert_eq!(
            t.counts("b"),
            Counts {
                pending: 1,
                running: 0
            }
        );
        assert!(t.modify(1, |j| j.submit.hold = true));
        let mut s = slots(2);
        let parts = [
            PartitionView {
                name: "a",
                state: PartitionState::Up,
                ranks: &[0],
            },
            PartitionView {
                name: "b",
                state: PartitionState::Up,
                ranks: &[1],
            },
        ];
        // Held job 1 is skipped; released job 2 runs in its new partition.
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate),
            vec![2]
        );
        assert!(!t.modify(99, |_| {}));
        assert_eq!(t.active(), 2);
    }

    #[test]
    fn down_partition_blocks_with_its_reason() {
        let mut t = JobTable::default();
        t.admit(job(1, "p", 1, false));
        t.admit(job(2, "p", 1, false));
        let mut s = slots(2);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Down,
            ranks: &[0, 1],
        }];
        assert!(t
            .schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate)
            .is_empty());
        assert_eq!(t.reason(t.get(1).unwrap(), 0).to_string(), "PartitionDown");
        assert_eq!(t.reason(t.get(2).unwrap(), 0).to_string(), "PartitionDown");
    }

    #[test]
    fn rebuild_from_records_restores_indexes() {
        let mut running = job(1, "p", 1, false);
        running.state = JobState::Running;
        let mut done = job(2, "p", 1, false);
        done.state = JobState::Completed;
        let t = JobTable::from_records([running, done, job(3, "p", 1, false)]);
        assert_eq!(t.running().map(|j| j.job_id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(t.active(), 2);
        assert_eq!(
            t.counts("p"),
            Counts {
                pending: 1,
                running: 1
            }
        );
    }

    #[test]
    fn priority_orders_the_queue_and_top_reorders_only_the_owners_jobs() {
        let mut t = JobTable::default();
        // Priorities counting down by submission, as under priority/basic.
        for (id, uid) in [(1, 100), (2, 200), (3, 100), (4, 100)] {
            let mut j = job(id, "p", 1, false);
            j.priority = 1000 - id;
            j.submit.uid = uid;
            t.admit(j);
        }
        // Job 4 takes user 100's best priority (job 1's); jobs 1 and 3
        // follow in their old order; user 200's job 2 keeps its own.
        assert_eq!(t.top(&[4]), vec![4, 1, 3]);
        let prio = |t: &JobTable, id| t.get(id).unwrap().priority;
        assert_eq!([1, 2, 3, 4].map(|id| prio(&t, id)), [997, 998, 996, 999]);
        // Already on top: nothing changes.
        assert!(t.top(&[4]).is_empty());
        // Two listed jobs keep the order given.
        assert_eq!(t.top(&[3, 1]), vec![3, 4]);
        assert_eq!([1, 2, 3, 4].map(|id| prio(&t, id)), [997, 998, 999, 996]);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1],
        }];
        let mut s = slots(2);
        assert_eq!(
            t.schedule(&parts, &mut s, 10, &|_: &str| None, &mut NoGate),
            vec![3, 2]
        );
        assert_eq!(t.reason(t.get(1).unwrap(), 0).to_string(), "Resources");
        assert_eq!(t.reason(t.get(4).unwrap(), 0).to_string(), "Priority");
    }

    fn task(id: u32, array: u32, index: u32, throttle: Option<u32>) -> JobRecord {
        JobRecord {
            array: Some(ArrayTask {
                array_job_id: array,
                task_id: index,
                min: 0,
                max: 3,
                count: 4,
                step: 1,
                throttle,
            }),
            ..job(id, "p", 1, false)
        }
    }

    #[test]
    fn arrays_run_in_index_order_within_their_throttle() {
        let mut t = JobTable::default();
        // Slurm's ids: the array id (10) is the highest index.
        for (id, index) in [(11, 0), (12, 1), (13, 2), (10, 3)] {
            t.admit(task(id, 10, index, Some(2)));
        }
        t.admit(job(14, "p", 1, false));
        let mut s = slots(4);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1, 2, 3],
        }];
        // Two tasks (the throttle), then the plain job behind the array.
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate),
            vec![11, 12, 14]
        );
        assert_eq!(
            t.reason(t.get(13).unwrap(), 0).to_string(),
            "JobArrayTaskLimit"
        );
        assert_eq!(t.array_members(10).count(), 4);
        assert_eq!(t.array_task(10, 3).map(|j| j.job_id), Some(10));
        let alloc = t
            .finish(
                11,
                JobState::Completed,
                ExitStatus::default(),
                crate::model::reason::JobReason::None,
                1,
            )
            .unwrap();
        super::super::release(&alloc, &mut s);
        assert_eq!(
            t.schedule(&parts, &mut s, 2, &|_: &str| None, &mut NoGate),
            vec![13]
        );
        // Requeue: back in the queue under the same id, one restart more.
        assert!(t.requeue(11, None));
        let j = t.get(11).unwrap();
        assert_eq!(
            (j.state, j.restarts, j.alloc.is_none()),
            (JobState::Pending, 1, true)
        );
        assert!(!t.requeue(11, None));
        assert!(!t.requeue(13, Some(JobReason::JobHeldUser)));
        assert!(t.set_suspended(12, true) && !t.set_suspended(12, true));
        assert_eq!(t.get(12).unwrap().state, JobState::Suspended);
        assert!(t.set_suspended(12, false));
    }

    #[test]
    fn dependencies_gate_the_queue_until_resolved() {
        use crate::model::dependency::Dependency;
        let mut t = JobTable::default();
        t.admit(job(1, "p", 1, false));
        let mut waiting = job(2, "p", 1, false);
        waiting.dependency = Some(Dependency::parse("afterok:1").unwrap());
        t.admit(waiting);
        let mut doomed = job(3, "p", 1, false);
        doomed.dependency = Some(Dependency::parse("afternotok:1").unwrap());
        doomed.submit.kill_on_invalid_dep = Some(true);
        t.admit(doomed);
        assert_eq!(t.resolve_dependencies(0), Resolved::default());
        assert_eq!(t.reason(t.get(2).unwrap(), 0).to_string(), "Dependency");
        let mut s = slots(2);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1],
        }];
        assert_eq!(
            t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate),
            vec![1]
        );
        t.finish(
            1,
            JobState::Completed,
            ExitStatus::default(),
            crate::model::reason::JobReason::None,
            5,
        );
        let r = t.resolve_dependencies(5);
        assert_eq!((r.changed, r.killed), (vec![2], vec![3]));
        assert_eq!(t.get(3).unwrap().state, JobState::Cancelled);
        assert_eq!(
            t.schedule(&parts, &mut s, 6, &|_: &str| None, &mut NoGate),
            vec![2]
        );
    }

    #[test]
    fn default_queue_depth_bounds_one_quick_pass() {
        let mut t = JobTable::default();
        for id in 1..=3 {
            t.admit(job(id, "p", 1, false));
        }
        t.set_queue_depth(2);
        let mut s = slots(3);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0, 1, 2],
        }];
        let mut pass =
            |t: &mut JobTable| t.schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate);
        assert_eq!(pass(&mut t), vec![1, 2]);
        assert_eq!(pass(&mut t), vec![3]);
        // The backfill pass walks every queued job, in priority order.
        let mut t = JobTable::default();
        for (id, prio) in [(1, 5), (2, 9), (3, 7)] {
            let mut j = job(id, if id == 3 { "q" } else { "p" }, 1, false);
            j.priority = prio;
            t.admit(j);
        }
        assert_eq!(t.queue_order(|_| 1), vec![2, 3, 1]);
        // A higher tier's jobs first, whatever their priority.
        assert_eq!(
            t.queue_order(|p| if p == "q" { 2 } else { 1 }),
            vec![3, 2, 1]
        );
    }

    #[test]
    fn a_pass_costs_nothing_for_held_jobs() {
        let mut t = JobTable::default();
        for id in 1..=50_000 {
            t.admit(job(id, "p", 1, true));
        }
        assert!(t.queues.get("p").is_none_or(|q| q.is_empty()));
        let mut s = slots(1);
        let parts = [PartitionView {
            name: "p",
            state: PartitionState::Up,
            ranks: &[0],
        }];
        assert!(t
            .schedule(&parts, &mut s, 0, &|_: &str| None, &mut NoGate)
            .is_empty());
    }
}
