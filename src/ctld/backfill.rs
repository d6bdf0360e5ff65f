//! The controller's backfill pass (`Command::Backfill`, every
//! `bf_interval`): the quick pass first (time limits, dependencies, FIFO
//! starts), then [`crate::sched::pass::backfill`] over the whole queue; its
//! starts go the way the quick pass's do, its plans are kept for the views
//! (`squeue --start`, `scontrol show job`), and its counters feed `sdiag`.
//! The pass's duration is the shell's to measure: the core reads no clock.

use std::collections::HashMap;

use super::command::Output;
use super::core::Core;
use crate::model::time::UnixTime;
use crate::sched::gate::Gates;
use crate::sched::pass::backfill::{backfill, Input};
use crate::sched::table::PartitionView;

/// A pending job's planned start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub start: UnixTime,
    pub ranks: Vec<u32>,
}

/// Backfill counters, as `sdiag` reports them (the cycle times are the
/// shell's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillStats {
    /// Jobs started by backfill since the controller started.
    pub backfilled: u64,
    pub cycles: u64,
    pub last_cycle_when: Option<UnixTime>,
    pub last_depth: u32,
    pub last_depth_try: u32,
    pub depth_sum: u64,
    pub depth_try_sum: u64,
    pub last_queue_len: u32,
    pub queue_len_sum: u64,
    pub last_table_size: u32,
    pub table_size_sum: u64,
}

/// The last pass's plans and every pass's counters.
#[derive(Debug, Clone, Default)]
pub struct BackfillState {
    pub plans: HashMap<u32, Plan>,
    pub stats: BackfillStats,
}

impl Core {
    /// The quick pass, then (under `sched/backfill`) the backfill pass.
    pub(super) fn backfill(&mut self, now: UnixTime, out: &mut Output) {
        self.schedule(now, out);
        if !self.conf.sched.backfill {
            return;
        }
        let conf = self.conf.clone();
        let mut policy = self.pass_policy(now);
        let mut parts: Vec<PartitionView<'_>> = conf
            .partitions
            .iter()
            .zip(&self.part_ranks)
            .map(|(p, (_, ranks))| PartitionView {
                name: &p.name,
                state: p.state,
                ranks,
            })
            .collect();
        // Higher PriorityTier partitions first, as in the quick pass.
        parts.sort_by_key(|p| std::cmp::Reverse(conf.priority.partition(p.name).tier));
        let part_limits: Vec<(Option<u32>, Option<u32>)> = conf
            .partitions
            .iter()
            .map(|p| (p.default_time_min, p.max_time_min))
            .collect();
        let tiers: Vec<u16> = parts
            .iter()
            .map(|p| conf.priority.partition(p.name).tier)
            .collect();
        let input = Input {
            parts: &parts,
            part_limits: &part_limits,
            nodes: conf.as_ref(),
            params: &conf.sched,
            tiers: &tiers,
        };
        // The same policy as the quick pass: limits, reservations, licenses.
        let mut limits = super::pass_policy::limits(
            &policy.db,
            &conf,
            &self.prio.usage,
            now,
            self.jobs.running(),
        );
        let report = backfill(
            &mut self.jobs,
            &mut self.slots,
            now,
            &input,
            &mut Gates(vec![&mut limits, &mut policy.resv, &mut policy.license]),
        );
        drop(limits);
        self.end_pass_policy(policy);
        tracing::info!(
            started = report.started.len(),
            planned = report.planned.len(),
            depth = report.depth,
            queue = report.queue_len,
            "backfill pass"
        );
        let s = &mut self.backfill.stats;
        s.backfilled += report.started.len() as u64;
        s.cycles += 1;
        s.last_cycle_when = Some(now);
        s.last_depth = report.depth;
        s.last_depth_try = report.depth_try;
        s.depth_sum += u64::from(report.depth);
        s.depth_try_sum += u64::from(report.depth_try);
        s.last_queue_len = report.queue_len;
        s.queue_len_sum += u64::from(report.queue_len);
        s.last_table_size = report.table_size;
        s.table_size_sum += u64::from(report.table_size);
        self.backfill.plans = report
            .planned
            .into_iter()
            .map(|p| {
                (
                    p.job_id,
                    Plan {
                        start: p.start,
                        ranks: p.ranks,
                    },
                )
            })
            .collect();
        self.jobs_started(&report.started, out);
    }

    /// Job `id`'s planned start, while it is still pending.
    pub fn plan(&self, id: u32) -> Option<&Plan> {
        let pending = self
            .jobs
            .get(id)
            .is_some_and(|j| j.state == crate::model::job::JobState::Pending);
        self.backfill.plans.get(&id).filter(|_| pending)
    }

    pub fn backfill_stats(&self) -> &BackfillStats {
        &self.backfill.stats
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::fixtures::{reach, register};
    use crate::ctld::{Command, Core, Reply};
    use crate::model::job::{JobState, JobSubmit};
    use crate::policy::authz::Caller;

    fn core(extra: &str) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{extra}\
             NodeName=n[1-2] CPUs=2 RealMemory=1000\nPartitionName=p Nodes=n[1-2] Default=YES\n"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let (mut core, _) = Core::recover(Arc::new(conf), vec![], None, &HashMap::new(), 1000);
        for rank in 0..2 {
            register(&mut core, rank, 1000);
            reach(&mut core, rank, true, 1000);
        }
        core
    }

    fn submit(core: &mut Core, nodes: u32, limit_min: u32) -> u32 {
        let s = JobSubmit {
            name: "j".into(),
            uid: 1000,
            script: "#!/bin/sh\ntrue\n".into(),
            min_nodes: Some(nodes),
            ntasks: Some(nodes * 2),
            time_limit_min: Some(limit_min),
            ..Default::default()
        };
        let out = core.apply(
            1001,
            Command::Submit {
                submit: Box::new(s),
                caller: Caller {
                    uid: 1000,
                    operator: false,
                },
            },
        );
        match out.reply {
            Some(Reply::Submit(Ok(r))) => r.job_id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pass_starts_what_fits_before_the_plan_and_the_views_show_the_plan() {
        let mut c = core("");
        let long = submit(&mut c, 1, 100);
        c.apply(1002, Command::Schedule);
        let wide = submit(&mut c, 2, 60);
        let short = submit(&mut c, 1, 30);
        let late = submit(&mut c, 1, 200);
        // The quick pass stops at the wide job.
        c.apply(1003, Command::Schedule);
        assert_eq!(c.jobs().get(short).unwrap().state, JobState::Pending);
        c.apply(1004, Command::Backfill);
        assert_eq!(c.jobs().get(short).unwrap().state, JobState::Running);
        assert_eq!(c.jobs().get(late).unwrap().state, JobState::Pending);
        // The long job ends at 1002 + 6000, rounded up to the minute.
        let end = (1002 + 6000_i64).div_euclid(60) * 60 + 60;
        let plan = c.plan(wide).unwrap();
        assert_eq!((plan.start, plan.ranks.clone()), (end, vec![0, 1]));
        let info = c.job_info(c.jobs().get(wide).unwrap(), true, 1004);
        assert_eq!(info.sched_start, Some(end));
        assert_eq!(info.sched_nodes, "n[1-2]");
        assert_eq!(info.reason, "Resources");
        let stats = c.backfill_stats();
        assert_eq!((stats.backfilled, stats.cycles), (1, 1));
        assert_eq!((stats.last_queue_len, stats.last_depth), (3, 3));
        assert_eq!(stats.last_cycle_when, Some(1004));
        // A running job shows no plan.
        let _ = long;
        assert!(c.plan(short).is_none());
    }

    #[test]
    fn the_plan_goes_around_a_future_reservation_and_into_its_own() {
        let mut c = core("");
        // n2 reserved for alice from an hour on, for an hour.
        let out = c.apply(
            1001,
            Command::CreateResv {
                spec: crate::wire::resv::ResvSpec {
                    name: Some("r".into()),
                    start: Some(1001 + 3600),
                    duration_min: Some(Some(60)),
                    nodes: Some("n2".into()),
                    users: Some("alice".into()),
                    ..Default::default()
                },
                caller: Caller::ROOT,
            },
        );
        assert!(matches!(out.reply, Some(Reply::Resv(Ok(_)))), "{out:?}");
        let s = JobSubmit {
            name: "j".into(),
            uid: 1000,
            user: "alice".into(),
            script: "#!/bin/sh\ntrue\n".into(),
            min_nodes: Some(1),
            ntasks: Some(2),
            time_limit_min: Some(30),
            reservation: Some("r".into()),
            ..Default::default()
        };
        let out = c.apply(
            1002,
            Command::Submit {
                submit: Box::new(s),
                caller: Caller {
                    uid: 1000,
                    operator: false,
                },
            },
        );
        let mine = match out.reply {
            Some(Reply::Submit(Ok(r))) => r.job_id,
            other => panic!("{other:?}"),
        };
        // Both nodes for two hours: it would run into r, so it waits, and
        // its plan starts at r's end.
        let wide = submit(&mut c, 2, 120);
        c.apply(1003, Command::Backfill);
        assert_eq!(c.jobs().get(wide).unwrap().state, JobState::Pending);
        let r_end: i64 = 1001 + 2 * 3600;
        let end_rounded = r_end.div_euclid(60) * 60 + 60;
        let plan = c.plan(wide).unwrap();
        assert_eq!((plan.start, plan.ranks.clone()), (end_rounded, vec![0, 1]));
        // The reservation's job: on n2, at r's start; it waits with
        // reason Reservation meanwhile.
        let plan = c.plan(mine).unwrap();
        assert_eq!((plan.start, plan.ranks.clone()), (1001 + 3600, vec![1]));
        let info = c.job_info(c.jobs().get(mine).unwrap(), true, 1003);
        assert_eq!(info.reason, "Reservation");
        assert_eq!(info.sched_nodes, "n2");
        assert_eq!(info.sched_start, Some(1001 + 3600));
    }

    #[test]
    fn sched_builtin_keeps_the_quick_pass_only() {
        let mut c = core("SchedulerType=sched/builtin\n");
        submit(&mut c, 1, 100);
        c.apply(1002, Command::Schedule);
        let wide = submit(&mut c, 2, 60);
        let short = submit(&mut c, 1, 30);
        c.apply(1004, Command::Backfill);
        assert_eq!(c.jobs().get(short).unwrap().state, JobState::Pending);
        assert!(c.plan(wide).is_none());
        assert_eq!(c.backfill_stats().cycles, 0);
    }
}
