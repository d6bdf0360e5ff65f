//! Power saving and cloud nodes, decided by the core (Slurm 22.05's
//! `power_save.c` semantics); running the programs is the shell's business
//! ([`Effect::RunPowerProgram`]).
//!
//! - A node idle for `SuspendTime` (not in `SuspendExcNodes` or a
//!   `SuspendExcParts` partition) is powered down: `SuspendProgram` runs with
//!   the node list (argv\[1\], a host list expression), the node is
//!   POWERING_DOWN (`idle%`) for `SuspendTimeout`, then POWERED_DOWN (`idle~`).
//! - A job placed on powered-down nodes powers them up: `ResumeProgram` runs
//!   with their list (and `SLURM_RESUME_FILE`, the JSON 22.05 writes), they
//!   are POWERING_UP (`alloc#`), the job is CONFIGURING (`CF`) with its launch
//!   held until every node registered. A node that has not registered after
//!   `ResumeTimeout` is set DOWN (`ResumeTimeout reached`), powered down
//!   (`down~`), `ResumeFailProgram` runs with it, and its jobs are requeued.
//! - `State=CLOUD` nodes start powered down.
//! - `ResumeRate`/`SuspendRate` bound the nodes per minute, counted as
//!   slurmctld counts them (a count that decays over the minute).
//! - The work runs in passes: on the shell's one-second timer
//!   ([`Command::PowerSave`]; idle nodes are looked for every
//!   `power_save_interval`) and after jobs start or an operator asks
//!   (`scontrol power`, `State=POWER_*`), no closer than
//!   `power_save_min_interval`.
//!
//! Cost: a pass looks only at powered-on nodes (the `watch` set) and at
//! timeouts that are due; a powered-down node costs nothing until a job or
//! an operator needs it. Its not-responding clock does not run.
//!
//! [`Command::PowerSave`]: super::command::Command::PowerSave

use std::collections::{BTreeMap, BTreeSet};

use super::command::{Effect, Output, PowerAction, PowerProgram};
use super::core::Core;
use crate::config::ConfNodeState;
use crate::model::job::JobState;
use crate::model::node::{Power, PowerDownMode, PowerState, Reason};
use crate::model::time::UnixTime;

/// The reason a node that did not come up in time is set DOWN with.
pub const RESUME_TIMEOUT_REASON: &str = "ResumeTimeout reached";
/// The drain reason of `State=POWER_DOWN_ASAP`.
pub const POWER_DOWN_ASAP_REASON: &str = "POWER_DOWN_ASAP";

/// Power saving's derived state (rebuilt at recovery from the nodes'
/// persisted power records).
#[derive(Debug, Clone, Default)]
pub struct PowerSave {
    /// Powered-on nodes power saving may suspend → when last seen busy.
    watch: BTreeMap<u32, UnixTime>,
    /// Nodes never suspended by idleness (SuspendExcNodes/Parts).
    excluded: BTreeSet<u32>,
    /// Powered-down nodes a job or an operator needs, waiting for the
    /// resume rate.
    resume_queue: BTreeSet<u32>,
    /// Nodes an operator asked to power down, waiting for their jobs.
    down_queue: BTreeSet<u32>,
    /// (due, rank): ResumeTimeout and SuspendTimeout. An entry that no
    /// longer matches the node's power record is stale.
    timeouts: BTreeSet<(UnixTime, u32)>,
    /// Jobs held CONFIGURING for nodes to power up.
    pub(super) jobs: BTreeSet<u32>,
    last_pass: Option<UnixTime>,
    /// When idle nodes were last looked for (every `power_save_interval`).
    last_idle_scan: Option<UnixTime>,
    /// slurmctld's decaying per-minute counts.
    resumed_f: f64,
    suspended_f: f64,
    last_scan: UnixTime,
    /// What the last pass did (for `canopy-loadtest` and tests).
    pub last: PassStats,
}

impl PowerSave {
    /// A deleted dynamic node's rank leaves every queue (the rank may be
    /// given to a new node).
    pub(super) fn forget(&mut self, rank: u32) {
        self.watch.remove(&rank);
        self.resume_queue.remove(&rank);
        self.down_queue.remove(&rank);
        self.excluded.remove(&rank);
        self.timeouts.retain(|&(_, r)| r != rank);
    }
}

/// What one pass looked at and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Nodes examined (powered-on ones, and due timeouts).
    pub examined: u64,
    pub resumed: u32,
    pub suspended: u32,
    pub failed: u32,
}

impl PowerSave {
    /// Whether a pass now would be too soon after the last one.
    fn too_soon(&self, now: UnixTime, min_interval: u64) -> bool {
        self.last_pass
            .is_some_and(|t| now.saturating_sub(t) < i64::try_from(min_interval).unwrap_or(0))
    }

    /// slurmctld's rate accounting: the counts of the last minute decay
    /// linearly; how many more fit under each rate (`u32::MAX`: no limit).
    fn budgets(&mut self, now: UnixTime, resume_rate: u32, suspend_rate: u32) -> (u32, u32) {
        let dt = now.saturating_sub(self.last_scan);
        if dt >= 60 {
            self.resumed_f = 0.0;
            self.suspended_f = 0.0;
        } else if dt > 0 {
            let keep = (60 - dt) as f64 / 60.0;
            self.resumed_f *= keep;
            self.suspended_f *= keep;
        }
        self.last_scan = now;
        let left = |rate: u32, done: f64| {
            if rate == 0 {
                u32::MAX
            } else {
                rate.saturating_sub((done + 0.5) as u32)
            }
        };
        (
            left(resume_rate, self.resumed_f),
            left(suspend_rate, self.suspended_f),
        )
    }
}

/// The JSON 22.05 writes to `SLURM_RESUME_FILE` for ResumeProgram.
#[derive(serde::Serialize)]
struct ResumeFile {
    all_nodes_resume: String,
    jobs: Vec<ResumeJob>,
}

#[derive(serde::Serialize)]
struct ResumeJob {
    #[serde(skip_serializing_if = "Option::is_none")]
    features: Option<String>,
    job_id: u32,
    nodes_alloc: String,
    nodes_resume: String,
    oversubscribe: &'static str,
    partition: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation: Option<String>,
}

impl Core {
    /// The power state a node starts with when the store has none: CLOUD
    /// nodes are powered down, as slurmctld starts them.
    pub(super) fn initial_power(state: ConfNodeState, now: UnixTime) -> Option<Power> {
        (state == ConfNodeState::Cloud).then_some(Power {
            state: PowerState::PoweredDown,
            since: now,
            down_requested: None,
        })
    }

    /// The nodes never suspended for being idle: SuspendExcNodes, and the
    /// nodes of the SuspendExcParts partitions.
    fn power_exclusions(&self) -> BTreeSet<u32> {
        let pc = &self.conf.power;
        let mut excluded: BTreeSet<u32> = pc
            .suspend_exc_nodes
            .iter()
            .filter_map(|n| self.conf.node_index(n).map(|r| r as u32))
            .collect();
        for part in &pc.suspend_exc_parts {
            excluded.extend(self.partition_ranks(part).iter().copied());
        }
        excluded
    }

    /// Rebuild the derived state after a restart: exclusions, the watch
    /// set, timeouts counted from the stored transition times, and
    /// CONFIGURING jobs whose nodes were powering up.
    pub(super) fn power_recover(&mut self, now: UnixTime, out: &mut Output) {
        let conf = self.conf.clone();
        let pc = &conf.power;
        let excluded = self.power_exclusions();
        self.power = PowerSave {
            excluded,
            last_scan: now,
            ..Default::default()
        };
        for rank in 0..self.nodes.len() as u32 {
            let st = &self.nodes[rank as usize];
            let p = st.admin.power;
            match p.map(|p| (p.state, p.since)) {
                None | Some((PowerState::On, _)) => {
                    let vacant = conf.nodes.get(rank as usize).is_some_and(|n| n.vacant);
                    if !self.power.excluded.contains(&rank) && !st.future && !vacant {
                        self.power.watch.insert(rank, now);
                    }
                }
                Some((PowerState::PoweringUp, since)) => {
                    self.power
                        .timeouts
                        .insert((since.saturating_add(secs(pc.resume_timeout_s)), rank));
                }
                Some((PowerState::PoweringDown, since)) => {
                    self.power
                        .timeouts
                        .insert((since.saturating_add(secs(pc.suspend_timeout_s)), rank));
                }
                Some((PowerState::PoweredDown, _)) => {}
            }
            if p.is_some_and(|p| p.down_requested.is_some()) {
                self.power.down_queue.insert(rank);
            }
            let ok = st.schedulable();
            if let Some(slot) = self.slots.get_mut(rank as usize) {
                slot.available = ok;
            }
        }
        // CONFIGURING jobs waiting for nodes. A record written before `power_up` existed
        // is CONFIGURING for its nodes exactly when no PrologSlurmctld could hold it.
        let no_prolog = conf.prolog.prolog_slurmctld.is_none();
        let waiting: Vec<(u32, bool, Vec<u32>)> = self
            .jobs
            .running()
            .filter(|j| j.configuring && j.ending_as.is_none())
            .filter_map(|j| {
                let a = j.alloc.as_ref()?;
                Some((j.job_id, j.power_up || no_prolog, a.ranks.clone()))
            })
            .collect();
        for (id, power_up, ranks) in waiting {
            let mut needs = false;
            for r in ranks {
                match self.nodes.get(r as usize).map(|s| s.power_state()) {
                    Some(PowerState::PoweredDown) => {
                        self.power.resume_queue.insert(r);
                        needs = true;
                    }
                    Some(PowerState::PoweringUp) => needs = true,
                    _ => {}
                }
            }
            // Nodes that came up just before the crash still owe the job its start-time
            // reset: the next pass gives it (`power_jobs_ready`).
            if needs || power_up {
                self.power.jobs.insert(id);
            }
            if no_prolog {
                self.launch_waiting.insert(id);
            }
        }
        if let Some(&(at, _)) = self.power.timeouts.first() {
            out.effect(Effect::WakeAt(at));
        }
    }

    /// Jobs that just started (called before their records are written):
    /// those placed on nodes that are not powered on are CONFIGURING, their
    /// launch held until the nodes register; the powered-down ones are
    /// queued for ResumeProgram.
    pub(super) fn power_jobs_started(&mut self, started: &[u32]) {
        for &id in started {
            let Some(ranks) = self
                .jobs
                .get(id)
                .and_then(|j| j.alloc.as_ref())
                .map(|a| a.ranks.clone())
            else {
                continue;
            };
            let mut needs = false;
            for r in ranks {
                match self.nodes.get(r as usize).map(|s| s.power_state()) {
                    Some(PowerState::PoweredDown) => {
                        self.power.resume_queue.insert(r);
                        needs = true;
                    }
                    Some(PowerState::PoweringUp) => needs = true,
                    _ => {}
                }
            }
            // Set either way: a requeued job's earlier run must not mark this one.
            self.jobs.modify(id, |j| j.power_up = needs);
            if !needs {
                continue;
            }
            self.power.jobs.insert(id);
            self.jobs.modify(id, |j| j.configuring = true);
            tracing::info!(
                job_id = id,
                "job CONFIGURING: waiting for its nodes to power up"
            );
            // With a PrologSlurmctld the launch waits for it as well; its
            // success puts the job in `launch_waiting`.
            if self.conf.prolog.prolog_slurmctld.is_none() {
                self.launch_waiting.insert(id);
            }
        }
    }

    /// After `scontrol reconfigure`: the exclusions follow the new file, and
    /// the transitions under way are timed by the new ResumeTimeout and
    /// SuspendTimeout (a due time computed from the old ones would never
    /// match again, and the node would stay POWERING_* for good). The rest
    /// of power saving reads the configuration as it goes.
    pub(super) fn power_reconfigured(&mut self) {
        let conf = self.conf.clone();
        let pc = &conf.power;
        let excluded = self.power_exclusions();
        let since = self.power.last_scan;
        self.power.timeouts.clear();
        for rank in 0..self.nodes.len() as u32 {
            let st = &self.nodes[rank as usize];
            // A deleted dynamic node's rank has nothing to power down.
            let vacant = conf.nodes.get(rank as usize).is_some_and(|n| n.vacant);
            if excluded.contains(&rank) || st.future || vacant || st.power_state() != PowerState::On
            {
                self.power.watch.remove(&rank);
            } else {
                self.power.watch.entry(rank).or_insert(since);
            }
            let timeout = match st.admin.power.map(|p| (p.state, p.since)) {
                Some((PowerState::PoweringUp, at)) => Some((at, pc.resume_timeout_s)),
                Some((PowerState::PoweringDown, at)) => Some((at, pc.suspend_timeout_s)),
                _ => None,
            };
            if let Some((at, after)) = timeout {
                self.power
                    .timeouts
                    .insert((at.saturating_add(secs(after)), rank));
            }
        }
        self.power.excluded = excluded;
    }

    /// Jobs whose nodes have all powered up and answer: their start time
    /// is now, so the boot does not eat into their time limit (slurmctld's
    /// "Resetting JobId=N start time for node power up").
    pub(super) fn power_jobs_ready(&mut self, now: UnixTime, out: &mut Output) {
        if self.power.jobs.is_empty() {
            return;
        }
        let ids: Vec<u32> = self.power.jobs.iter().copied().collect();
        for id in ids {
            let Some(j) = self.jobs.get(id) else {
                self.power.jobs.remove(&id);
                continue;
            };
            if !j.configuring || j.ending_as.is_some() {
                self.power.jobs.remove(&id);
                continue;
            }
            let up = j.alloc.as_ref().is_some_and(|a| {
                a.ranks.iter().all(|&r| {
                    self.nodes.get(r as usize).is_some_and(|st| {
                        st.power_state() == PowerState::On && st.registered && st.responding
                    })
                })
            });
            if !up {
                continue;
            }
            self.power.jobs.remove(&id);
            tracing::info!(
                job_id = id,
                "resetting the job's start time for node power up"
            );
            self.jobs.modify(id, |j| {
                j.start_time = Some(now);
                j.power_up = false;
            });
            self.arm_deadlines(id, out);
            self.put_jobs(&[id], out);
        }
    }

    /// A node registered: a node powering up (or one found running while
    /// thought powered down) is on. Returns false when the registration must
    /// be ignored: the node is being powered down.
    pub(super) fn power_registered(&mut self, rank: u32, now: UnixTime, out: &mut Output) -> bool {
        let Some(st) = self.nodes.get(rank as usize) else {
            return false;
        };
        match st.power_state() {
            PowerState::On => true,
            PowerState::PoweringDown => {
                tracing::info!(node = %self.node_name(rank), "registration while powering down; ignored");
                false
            }
            PowerState::PoweringUp | PowerState::PoweredDown => {
                tracing::info!(node = %self.node_name(rank), "node powered up");
                self.power.resume_queue.remove(&rank);
                let cloud = self.is_cloud(rank);
                self.change_node(rank, now, false, out, |st| {
                    let requested = st.admin.power.and_then(|p| p.down_requested);
                    st.admin.power = (cloud || requested.is_some()).then_some(Power {
                        state: PowerState::On,
                        since: now,
                        down_requested: requested,
                    });
                });
                if !self.power.excluded.contains(&rank) {
                    self.power.watch.insert(rank, now);
                }
                true
            }
        }
    }

    /// A node's link to the controller comes from `addr`: with
    /// `cloud_reg_addrs` (and not `cloud_dns`, where names resolve), a
    /// cloud node's NodeAddr is that address, as cloud plugins expect.
    pub(super) fn node_address(&mut self, node: &str, addr: String) {
        let pc = &self.conf.power;
        if !pc.cloud_reg_addrs || pc.cloud_dns {
            return;
        }
        let Some(rank) = self.conf.node_index(node).map(|r| r as u32) else {
            return;
        };
        if !self.is_cloud(rank) {
            return;
        }
        if let Some(st) = self.nodes.get_mut(rank as usize) {
            if st.reg_addr.as_deref() != Some(addr.as_str()) {
                tracing::info!(node, %addr, "cloud node registered from a new address; NodeAddr updated");
                st.reg_addr = Some(addr);
            }
        }
    }

    fn is_cloud(&self, rank: u32) -> bool {
        self.conf
            .nodes
            .get(rank as usize)
            .is_some_and(|n| n.state == ConfNodeState::Cloud)
    }

    /// `scontrol power up NODES` / `State=POWER_UP`.
    pub(super) fn power_up(&mut self, rank: u32) {
        let state = self.nodes.get(rank as usize).map(|s| s.power_state());
        if state == Some(PowerState::PoweredDown) {
            self.power.resume_queue.insert(rank);
        }
    }

    /// `scontrol power down [asap|force] NODES` / `State=POWER_DOWN*`: the
    /// node takes no new work and is powered down once idle (at once with
    /// `force`, its jobs requeued or cancelled; drained with `asap`).
    pub(super) fn power_down(
        &mut self,
        rank: u32,
        mode: PowerDownMode,
        user: &str,
        now: UnixTime,
        out: &mut Output,
    ) {
        let Some(st) = self.nodes.get(rank as usize) else {
            return;
        };
        if st.power_state() == PowerState::PoweringDown {
            return;
        }
        self.power.resume_queue.remove(&rank);
        self.change_node(rank, now, false, out, |st| {
            let p = st.admin.power.unwrap_or(Power {
                state: PowerState::On,
                since: now,
                down_requested: None,
            });
            st.admin.power = Some(Power {
                down_requested: Some(mode),
                ..p
            });
            if mode == PowerDownMode::Asap && st.admin.drain.is_none() {
                st.admin.drain = Some(Reason {
                    text: POWER_DOWN_ASAP_REASON.into(),
                    user: user.to_string(),
                    time: now,
                });
            }
        });
        if mode == PowerDownMode::Force {
            let victims: Vec<u32> = self
                .jobs
                .running()
                .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended))
                .filter(|j| j.ending_as.is_none())
                .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
                .map(|j| j.job_id)
                .collect();
            for id in victims {
                tracing::info!(job_id = id, node = %self.node_name(rank), "POWER_DOWN_FORCE: requeueing the job");
                self.requeue_or_cancel(id, None, out);
            }
        }
        self.power.down_queue.insert(rank);
    }

    /// `State=RESUME` also withdraws a power-down request.
    pub(super) fn power_cancel_down(&mut self, rank: u32, now: UnixTime, out: &mut Output) {
        if !self.power.down_queue.remove(&rank) {
            return;
        }
        self.change_node(rank, now, false, out, |st| {
            if let Some(p) = st.admin.power.as_mut() {
                p.down_requested = None;
            }
        });
    }

    /// One power-saving pass (see the module header). `timer`: the
    /// shell's interval timer, which also looks for idle nodes.
    pub(super) fn power_pass(&mut self, now: UnixTime, timer: bool, out: &mut Output) {
        // The scheduling pass calls this every time: nothing queued and no
        // timeout due costs nothing more.
        let p = &self.power;
        let due = p.timeouts.first().is_some_and(|&(at, _)| at <= now);
        // The shell's timer ticks every second (so a reconfigured
        // `power_save_interval` or `SuspendTime` needs no restart); idle
        // nodes are looked for every `power_save_interval`.
        let every = i64::try_from(self.conf.power.interval_s.max(1)).unwrap_or(i64::MAX);
        let timer = timer
            && self.conf.power.suspends()
            && p.last_idle_scan
                .is_none_or(|t| now.saturating_sub(t) >= every);
        if !timer && !due && p.resume_queue.is_empty() && p.down_queue.is_empty() {
            return;
        }
        let pc = self.conf.power.clone();
        if self.power.too_soon(now, pc.min_interval_s) {
            return;
        }
        self.power.last_pass = Some(now);
        let mut stats = PassStats::default();
        let (mut resume_left, mut suspend_left) =
            self.power.budgets(now, pc.resume_rate, pc.suspend_rate);

        // Timeouts that are due.
        let mut failed = Vec::new();
        while let Some(&(at, rank)) = self.power.timeouts.first() {
            if at > now {
                break;
            }
            self.power.timeouts.remove(&(at, rank));
            stats.examined += 1;
            let Some(p) = self.nodes.get(rank as usize).and_then(|s| s.admin.power) else {
                continue;
            };
            match p.state {
                PowerState::PoweringUp
                    if p.since.saturating_add(secs(pc.resume_timeout_s)) == at =>
                {
                    failed.push(rank)
                }
                PowerState::PoweringDown
                    if p.since.saturating_add(secs(pc.suspend_timeout_s)) == at =>
                {
                    self.powered_down(rank, now, out)
                }
                _ => {}
            }
        }
        if !failed.is_empty() {
            stats.failed = failed.len() as u32;
            self.resume_failed(&failed, now, out);
        }

        // Resumes, within ResumeRate.
        let mut resume = Vec::new();
        while resume_left > 0 {
            let Some(rank) = self.power.resume_queue.pop_first() else {
                break;
            };
            if self.nodes.get(rank as usize).map(|s| s.power_state())
                != Some(PowerState::PoweredDown)
            {
                continue;
            }
            resume.push(rank);
            resume_left -= 1;
        }
        if !resume.is_empty() {
            for &rank in &resume {
                self.set_power(rank, PowerState::PoweringUp, now, out);
                self.power
                    .timeouts
                    .insert((now.saturating_add(secs(pc.resume_timeout_s)), rank));
            }
            self.power.resumed_f += resume.len() as f64;
            stats.resumed = resume.len() as u32;
            out.effect(Effect::WakeAt(
                now.saturating_add(secs(pc.resume_timeout_s)),
            ));
            self.run_resume_program(&resume, out);
        }

        // Suspends: operators' requests first, then nodes idle too long.
        let mut suspend = Vec::new();
        let requested: Vec<u32> = self.power.down_queue.iter().copied().collect();
        for rank in requested {
            stats.examined += 1;
            let force = self
                .nodes
                .get(rank as usize)
                .and_then(|s| s.admin.power)
                .and_then(|p| p.down_requested)
                == Some(PowerDownMode::Force);
            if force || self.node_idle(rank) {
                self.power.down_queue.remove(&rank);
                suspend.push(rank);
            }
        }
        if let (true, Some(idle_for)) = (timer, pc.suspend_time_s) {
            self.power.last_idle_scan = Some(now);
            let cutoff = now.saturating_sub(secs(idle_for));
            let watched: Vec<(u32, UnixTime)> =
                self.power.watch.iter().map(|(&r, &t)| (r, t)).collect();
            for (rank, last_busy) in watched {
                stats.examined += 1;
                if !self.node_idle(rank) {
                    self.power.watch.insert(rank, now);
                    continue;
                }
                let down = self
                    .nodes
                    .get(rank as usize)
                    // An UNKNOWN node (never registered) is not idle.
                    .is_none_or(|s| s.admin.down.is_some() || s.future || !s.registered);
                if last_busy > cutoff || down || suspend_left == 0 || suspend.contains(&rank) {
                    continue;
                }
                suspend.push(rank);
                suspend_left -= 1;
            }
        }
        if !suspend.is_empty() {
            for &rank in &suspend {
                self.power.watch.remove(&rank);
                self.set_power(rank, PowerState::PoweringDown, now, out);
                if pc.idle_on_node_suspend {
                    self.change_node(rank, now, false, out, |st| {
                        st.admin.drain = None;
                        st.admin.down = None;
                    });
                }
                self.power
                    .timeouts
                    .insert((now.saturating_add(secs(pc.suspend_timeout_s)), rank));
            }
            self.power.suspended_f += suspend.len() as f64;
            stats.suspended = suspend.len() as u32;
            out.effect(Effect::WakeAt(
                now.saturating_add(secs(pc.suspend_timeout_s)),
            ));
            tracing::info!(nodes = %self.nodelist(&suspend), "powering down nodes");
            if let Some(prog) = &pc.suspend_program {
                out.effect(Effect::RunPowerProgram(Box::new(PowerProgram {
                    action: PowerAction::Suspend,
                    program: prog.clone(),
                    nodes: self.nodelist(&suspend),
                    resume_file: None,
                })));
            }
        }
        self.power.last = stats;
        if !resume.is_empty() || !suspend.is_empty() || stats.failed > 0 {
            out.effect(Effect::Reschedule);
        }
    }

    /// No job holds anything on the node.
    fn node_idle(&self, rank: u32) -> bool {
        self.slots
            .get(rank as usize)
            .is_some_and(|s| s.alloc_cpus == 0 && s.alloc_mem_mb == 0)
    }

    fn set_power(&mut self, rank: u32, state: PowerState, now: UnixTime, out: &mut Output) {
        self.change_node(rank, now, false, out, |st| {
            st.admin.power = Some(Power {
                state,
                since: now,
                down_requested: if state == PowerState::PoweringDown {
                    None
                } else {
                    st.admin.power.and_then(|p| p.down_requested)
                },
            });
            if state != PowerState::On {
                st.invalid_reg = false;
            }
        });
    }

    /// SuspendTimeout is over: the node is powered down. Its daemon is
    /// gone, so it is neither registered nor reachable, and nothing times
    /// it out.
    fn powered_down(&mut self, rank: u32, now: UnixTime, out: &mut Output) {
        tracing::info!(node = %self.node_name(rank), "node powered down");
        if let Some(d) = self.node_deadline.get_mut(rank as usize) {
            *d = None;
        }
        self.set_power(rank, PowerState::PoweredDown, now, out);
        self.change_node(rank, now, false, out, |st| {
            st.registered = false;
            st.responding = false;
            st.attached_to = None;
        });
    }

    /// Nodes that did not register within ResumeTimeout: DOWN and powered
    /// down, their jobs requeued (or cancelled), ResumeFailProgram run.
    fn resume_failed(&mut self, ranks: &[u32], now: UnixTime, out: &mut Output) {
        let list = self.nodelist(ranks);
        tracing::error!(nodes = %list, timeout = self.conf.power.resume_timeout_s, "nodes not resumed by ResumeTimeout; marking down and power_save");
        for &rank in ranks {
            let victims: Vec<u32> = self
                .jobs
                .running()
                .filter(|j| j.ending_as.is_none())
                .filter(|j| j.alloc.as_ref().is_some_and(|a| a.ranks.contains(&rank)))
                .map(|j| j.job_id)
                .collect();
            for id in victims {
                tracing::info!(job_id = id, node = %self.node_name(rank), "requeue job due to failure of node");
                self.requeue_or_cancel(id, None, out);
            }
            self.set_power(rank, PowerState::PoweredDown, now, out);
            self.change_node(rank, now, true, out, |st| {
                st.registered = false;
                st.responding = false;
                st.admin.down = Some(Reason {
                    text: RESUME_TIMEOUT_REASON.into(),
                    user: "root".into(),
                    time: now,
                });
            });
        }
        if let Some(prog) = &self.conf.power.resume_fail_program {
            out.effect(Effect::RunPowerProgram(Box::new(PowerProgram {
                action: PowerAction::ResumeFail,
                program: prog.clone(),
                nodes: list,
                resume_file: None,
            })));
        }
    }

    /// ResumeProgram with the nodes, and the jobs waiting for them in
    /// `SLURM_RESUME_FILE`.
    fn run_resume_program(&mut self, ranks: &[u32], out: &mut Output) {
        let list = self.nodelist(ranks);
        tracing::info!(nodes = %list, "powering up nodes");
        let Some(prog) = self.conf.power.resume_program.clone() else {
            tracing::warn!(nodes = %list, "no ResumeProgram; the nodes must be started by hand");
            return;
        };
        let resuming: BTreeSet<u32> = ranks.iter().copied().collect();
        let mut jobs = Vec::new();
        self.power.jobs.retain(|&id| {
            self.jobs
                .get(id)
                .is_some_and(|j| j.configuring && j.ending_as.is_none())
        });
        for &id in &self.power.jobs {
            let Some(j) = self.jobs.get(id) else { continue };
            let Some(a) = &j.alloc else { continue };
            let mine: Vec<u32> = a
                .ranks
                .iter()
                .copied()
                .filter(|r| resuming.contains(r))
                .collect();
            if mine.is_empty() {
                continue;
            }
            jobs.push(ResumeJob {
                features: j.submit.constraint.clone(),
                job_id: id,
                nodes_alloc: self.nodelist(&a.ranks),
                nodes_resume: self.nodelist(&mine),
                oversubscribe: if j.submit.exclusive.is_some() {
                    "NO"
                } else {
                    "OK"
                },
                partition: j.partition.clone(),
                reservation: j.submit.reservation.clone(),
            });
        }
        let file = ResumeFile {
            all_nodes_resume: list.clone(),
            jobs,
        };
        out.effect(Effect::RunPowerProgram(Box::new(PowerProgram {
            action: PowerAction::Resume,
            program: prog,
            nodes: list,
            resume_file: serde_json::to_string_pretty(&file).ok(),
        })));
    }

    /// Jobs a pass is holding for powering-up nodes (tests, views).
    pub fn power_state(&self) -> &PowerSave {
        &self.power
    }
}

fn secs(s: u64) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}
