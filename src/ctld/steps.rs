//! srun steps inside a running job: the request checked and laid out over
//! the job's allocation, and the step's end recorded; and the launch
//! message a new job's nodes receive.

use super::admission::refused;
use super::command::{Effect, Output, Reply};
use super::core::Core;
use crate::model::acct::AcctStep;
use crate::model::job::{ExitStatus, JobRecord, JobState, StepKind};
use crate::model::reason::JobReason;
use crate::model::time::UnixTime;
use crate::policy::authz::{self, Action, Caller};
use crate::sched;
use crate::tree::collect::root_budget;
use crate::tree::rankset::RankSet;
use crate::wire::messages::{
    ErrorCode, ErrorReply, JobLaunch, NodeShare, StepComplete, StepLaunch, StepLaunched,
    StepRequest,
};

/// Tasks per node for `ntasks` over `nodes` nodes, block-distributed
/// (earlier nodes take the remainder). Fewer tasks than nodes use fewer nodes.
pub fn step_layout(ntasks: u32, nodes: u32) -> Vec<u32> {
    let nodes = nodes.min(ntasks).max(1);
    let (base, extra) = (ntasks / nodes, ntasks % nodes);
    (0..nodes).map(|i| base + u32::from(i < extra)).collect()
}

/// `slurm-%j.out`, or `slurm-%A_%a.out` for an array task.
pub(super) fn default_stdout(j: &JobRecord) -> &'static str {
    if j.array.is_some() {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

impl Core {
    pub(super) fn start_step(
        &mut self,
        req: &StepRequest,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let reply = self.plan_step(req, caller, now).map(|(launch, targets)| {
            let (job_id, step_id) = (launch.job_id, launch.step_id);
            tracing::info!(job_id, step_id, nodes = %launch.nodelist, "launching step");
            let reply = StepLaunched {
                job_id,
                step_id,
                nodelist: launch.nodelist.clone(),
                tasks_per_node: launch.tasks_per_node.clone(),
            };
            self.put_jobs(&[job_id], out);
            out.effect(Effect::LaunchStep {
                targets,
                launch: Box::new(launch),
                budget: root_budget(std::time::Duration::from_secs(10), self.tree_depth),
            });
            reply
        });
        out.reply = Some(Reply::Step(reply));
    }

    /// Configured node ranks of a hostlist (`-w`/`-x` of a step).
    fn ranks_of(&self, list: &str) -> Result<Vec<u32>, ErrorReply> {
        sched::node_ranks(list, &|n| self.conf.node_index(n))
            .map_err(|_| refused(ErrorCode::InvalidNodeName, "Invalid node name specified"))
    }

    /// Validate a step request and lay it out over the job's allocation.
    fn plan_step(
        &mut self,
        r: &StepRequest,
        caller: Caller,
        now: UnixTime,
    ) -> Result<(StepLaunch, RankSet), ErrorReply> {
        let job = self
            .jobs
            .get(r.job_id)
            .ok_or_else(|| refused(ErrorCode::InvalidJobId, "Invalid job id specified"))?;
        authz::check(caller, Action::Step, Some(job.submit.uid))
            .map_err(|d| refused(ErrorCode::PermissionDenied, d.0))?;
        crate::policy::limits::check_step(r)?;
        let alloc = match (&job.alloc, job.state, job.ending_as) {
            (Some(a), JobState::Running, None) => a.clone(),
            (_, JobState::Pending, _) => {
                return Err(refused(ErrorCode::InvalidJobId, "Job is pending execution"))
            }
            _ => {
                return Err(refused(
                    ErrorCode::AlreadyDone,
                    "Job/step already completing or completed",
                ))
            }
        };
        // The allocation's nodes this step may use, in allocation order:
        // `-w` ones first (they must all be used), then the rest unless `-x`.
        let unavailable = || {
            refused(
                ErrorCode::NodeConfigUnavailable,
                "Requested node configuration is not available",
            )
        };
        let required = match &r.nodelist {
            Some(l) => self.ranks_of(l)?,
            None => Vec::new(),
        };
        let excluded = match &r.exclude {
            Some(l) => self.ranks_of(l)?,
            None => Vec::new(),
        };
        if required
            .iter()
            .any(|n| !alloc.ranks.contains(n) || excluded.contains(n))
        {
            return Err(unavailable());
        }
        let mut pool: Vec<(u32, u32)> = alloc
            .ranks
            .iter()
            .zip(&alloc.tasks)
            .filter(|(n, _)| required.contains(n))
            .map(|(&n, &t)| (n, t))
            .collect();
        pool.extend(
            alloc
                .ranks
                .iter()
                .zip(&alloc.tasks)
                .filter(|(n, _)| !required.contains(n) && !excluded.contains(n))
                .map(|(&n, &t)| (n, t)),
        );
        let have = pool.len() as u32;
        let nodes = match r.nodes {
            Some(n) => n.max(required.len() as u32),
            None if required.is_empty() => have,
            None => required.len() as u32,
        };
        if nodes == 0 || nodes > have {
            return Err(unavailable());
        }
        let default_tasks: u32 = pool.iter().take(nodes as usize).map(|p| p.1).sum();
        let ntasks = r
            .ntasks
            .or(r.ntasks_per_node.map(|p| p * nodes))
            .unwrap_or(default_tasks.max(nodes))
            .max(1);
        if let Some(m) = &r.multi_prog {
            crate::exec::multiprog::check(m, ntasks)
                .map_err(|lines| refused(ErrorCode::InvalidRequest, lines.join("\n")))?;
        }
        let tasks_per_node = step_layout(ntasks, nodes);
        if tasks_per_node.len() < required.len() {
            // Fewer tasks than named nodes: some named node would go unused.
            return Err(unavailable());
        }
        // Tasks are laid out in the allocation's node order.
        let mut ranks: Vec<u32> = pool
            .iter()
            .take(tasks_per_node.len())
            .map(|p| p.0)
            .collect();
        ranks.sort_by_key(|n| alloc.ranks.iter().position(|a| a == n));
        let step_id = job.next_step;
        let nodelist = self.nodelist(&ranks);
        let launch = StepLaunch {
            job_id: r.job_id,
            step_id,
            name: r.name.clone(),
            user: job.submit.user.clone(),
            uid: job.submit.uid,
            gid: job.submit.gid,
            argv: r.argv.clone(),
            env: r.env.clone(),
            cwd: r.cwd.clone(),
            nodelist: nodelist.clone(),
            tasks_per_node: tasks_per_node.clone(),
            cpus_per_task: r.cpus_per_task,
            job_nodelist: self.nodelist(&alloc.ranks),
            partition: job.partition.clone(),
            cluster: self.conf.cluster_name.clone(),
            io_addr: r.io_addr.clone(),
            io_token: r.io_token,
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            array: job.array,
            stdin: r.stdin,
            stdin_pattern: r.stdin_pattern.clone(),
            pty: r.pty,
            multi_prog: r.multi_prog.clone(),
            open_append: r.open_append,
            held: ranks
                .iter()
                .zip(&tasks_per_node)
                .map(|(&rank, &tasks)| {
                    let i = alloc.ranks.iter().position(|&a| a == rank).unwrap_or(0);
                    let layout = self.slots.get(rank as usize).map(|s| s.layout);
                    step_share(
                        &alloc,
                        i,
                        tasks,
                        r.cpus_per_task.unwrap_or(1),
                        layout,
                        &r.resources,
                    )
                })
                .collect(),
            resources: r.resources.clone(),
        };
        let step = AcctStep {
            kind: StepKind::Numbered(step_id),
            name: r.name.clone(),
            state: JobState::Running,
            exit_code: (0, 0),
            start_time: Some(now),
            end_time: None,
            nodes: nodelist,
            num_nodes: ranks.len() as u32,
            num_tasks: ntasks,
            alloc_cpus: ntasks * r.cpus_per_task.unwrap_or(1).max(1),
            max_rss_kb: 0,
            max_vmsize_kb: 0,
            user_cpu_ms: 0,
            system_cpu_ms: 0,
            srun_host: r.srun_host.clone(),
            srun_pid: r.srun_pid,
            usage: Default::default(),
        };
        self.jobs.modify(r.job_id, |j| {
            j.next_step += 1;
            j.steps.push(step);
        });
        Ok((launch, RankSet::from_ranks(ranks)))
    }

    pub(super) fn set_step_end(
        &mut self,
        job_id: u32,
        step_id: u32,
        exit: ExitStatus,
        now: UnixTime,
    ) {
        self.jobs.modify(job_id, |j| {
            if let Some(s) = j
                .steps
                .iter_mut()
                .find(|s| s.kind == StepKind::Numbered(step_id))
            {
                s.state = if s.usage.oom_kills > 0 {
                    // Slurm's state for a step its cgroup's OOM killer hit,
                    // whatever signal or code it died with.
                    JobState::OutOfMemory
                } else if exit.signal != 0 {
                    JobState::Cancelled
                } else if exit.code != 0 {
                    JobState::Failed
                } else {
                    JobState::Completed
                };
                s.exit_code = (exit.code, exit.signal);
                s.end_time = Some(now);
            }
        });
    }

    /// One node's measurement of a step as it ended there: folded into the
    /// step's record (MaxRSS the highest, CPU times summed, AveRSS over all
    /// tasks). Reports may come before or after srun's StepComplete; an
    /// OOM kill makes an ended step OUT_OF_MEMORY either way. A job already
    /// finished has its stored accounting record patched too.
    pub(super) fn step_usage(
        &mut self,
        job_id: u32,
        step_id: u32,
        usage: &crate::model::acct::NodeUsage,
        out: &mut Output,
    ) {
        let mut found = None;
        self.jobs.modify(job_id, |j| {
            let Some(s) = j
                .steps
                .iter_mut()
                .find(|s| s.kind == StepKind::Numbered(step_id))
            else {
                return;
            };
            s.usage.add(usage);
            s.max_rss_kb = s.usage.max_rss_kb;
            s.user_cpu_ms = s.usage.user_cpu_ms;
            s.system_cpu_ms = s.usage.system_cpu_ms;
            if s.usage.oom_kills > 0 && s.state.is_finished() {
                s.state = JobState::OutOfMemory;
            }
            found = Some((s.clone(), j.state.is_finished()));
        });
        let Some((step, job_finished)) = found else {
            tracing::debug!(job_id, step_id, node = %usage.node, "usage of an unknown step ignored");
            return;
        };
        tracing::debug!(
            job_id,
            step_id,
            node = %usage.node,
            max_rss_kb = usage.max_rss_kb,
            "step usage recorded"
        );
        self.put_jobs(&[job_id], out);
        if job_finished {
            out.persist.push(crate::state::store::Op::PutAcctStep {
                job_id,
                step: Box::new(step),
            });
        }
    }

    /// `sstat`: which of a job's running srun steps to ask, and their
    /// nodes. As Slurm's sstat picks them: the named step; else with `all`
    /// every running step; else the first. An empty answer is "nothing
    /// running" (the CLI words it); an unknown job is `InvalidJobId`.
    /// Read-only: the fan-out to the nodes is the shell's.
    pub fn stat_targets(
        &self,
        req: &crate::wire::messages::StepStatRequest,
        caller: Caller,
    ) -> Result<Vec<(crate::wire::messages::StatStep, RankSet)>, ErrorReply> {
        use crate::wire::messages::StatStep;
        let job = self
            .jobs
            .get(req.job_id)
            .ok_or_else(|| refused(ErrorCode::InvalidJobId, "Invalid job id specified"))?;
        authz::check(caller, Action::Step, Some(job.submit.uid))
            .map_err(|d| refused(ErrorCode::PermissionDenied, d.0))?;
        if job.state != JobState::Running {
            return Ok(Vec::new());
        }
        // The batch step runs on the allocation's first node while the
        // script does (a batch job that is running).
        let batch = job
            .alloc
            .as_ref()
            .and_then(|a| a.ranks.first())
            .filter(|_| !job.submit.interactive)
            .map(|&r| (StatStep::Batch, RankSet::from_ranks([r])));
        let mut running = job.steps.iter().filter_map(|s| match s.kind {
            StepKind::Numbered(id) if s.state == JobState::Running => {
                let ranks = RankSet::from_ranks(
                    crate::config::hostlist::expand(&s.nodes)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|n| self.conf.node_index(n).map(|r| r as u32)),
                );
                Some((StatStep::Numbered(id), ranks))
            }
            _ => None,
        });
        Ok(match req.step {
            Some(StatStep::Numbered(want)) => running
                .filter(|(s, _)| *s == StatStep::Numbered(want))
                .collect(),
            Some(StatStep::Batch) => batch.into_iter().collect(),
            // `-a`: the batch step too, listed first.
            None if req.all => batch.into_iter().chain(running).collect(),
            // Slurm skips the special steps when none is named.
            None => running.next().into_iter().collect(),
        })
    }

    /// A step's launch did not reach every node: it ends failed, and the
    /// nodes it did reach (a reply lost on the way up) kill it.
    pub(super) fn step_launch_failed(
        &mut self,
        job_id: u32,
        step_id: u32,
        now: UnixTime,
        out: &mut Output,
    ) {
        let nodes = self.jobs.get(job_id).and_then(|j| {
            j.steps
                .iter()
                .find(|s| s.kind == StepKind::Numbered(step_id))
                .map(|s| s.nodes.clone())
        });
        self.set_step_end(job_id, step_id, ExitStatus { code: 1, signal: 0 }, now);
        self.put_jobs(&[job_id], out);
        let Some(nodes) = nodes else {
            return;
        };
        let targets = RankSet::from_ranks(
            crate::config::hostlist::expand(&nodes)
                .unwrap_or_default()
                .iter()
                .filter_map(|n| self.conf.node_index(n).map(|r| r as u32)),
        );
        out.effect(Effect::Fanout {
            targets,
            cmd: crate::wire::messages::NodeCommand::KillStep {
                job_id,
                step_id,
                kill_wait_s: None,
            },
            budget: root_budget(std::time::Duration::from_secs(10), self.tree_depth),
        });
    }

    pub(super) fn step_done(
        &mut self,
        d: &StepComplete,
        caller: Caller,
        now: UnixTime,
        out: &mut Output,
    ) {
        let owner = self.jobs.get(d.job_id).map(|j| j.submit.uid);
        let allowed = match owner {
            None => Err(refused(ErrorCode::InvalidJobId, "Invalid job id specified")),
            Some(uid) => authz::check(caller, Action::Step, Some(uid))
                .map_err(|e| refused(ErrorCode::PermissionDenied, e.0)),
        };
        if let Err(e) = allowed {
            out.reply = Some(Reply::Done(Err(e)));
            return;
        }
        self.set_step_end(d.job_id, d.step_id, d.exit, now);
        let interactive = self
            .jobs
            .get(d.job_id)
            .is_some_and(|j| j.submit.interactive);
        if d.release && interactive {
            // srun made this allocation for one step: the job ends as the step did.
            let ok = d.exit.code == 0 && d.exit.signal == 0;
            let (state, reason) = if ok {
                (JobState::Completed, JobReason::None)
            } else {
                (JobState::Failed, JobReason::NonZeroExitCode)
            };
            self.end_job(d.job_id, state, reason, Some(d.exit), None, out);
        }
        self.put_jobs(&[d.job_id], out);
        out.reply = Some(Reply::Done(Ok(())));
    }

    /// What a new job's nodes are sent.
    pub(super) fn launch_message(&self, j: &JobRecord) -> JobLaunch {
        let alloc = j.alloc.clone().unwrap_or_default();
        let s = &j.submit;
        JobLaunch {
            job_id: j.job_id,
            name: s.name.clone(),
            user: s.user.clone(),
            uid: s.uid,
            gid: s.gid,
            partition: j.partition.clone(),
            cluster: self.conf.cluster_name.clone(),
            batch_host: alloc
                .ranks
                .first()
                .map(|&r| self.node_name(r).to_string())
                .unwrap_or_default(),
            nodelist: self.nodelist(&alloc.ranks),
            num_nodes: alloc.ranks.len() as u32,
            cpus_per_node: alloc.cpus.clone(),
            tasks_per_node: alloc.tasks.clone(),
            ntasks: alloc.tasks.iter().sum(),
            ntasks_set: s.ntasks.is_some() || s.ntasks_per_node.is_some(),
            cpus_per_task: s.cpus_per_task,
            mem_per_node_mb: s
                .mem_per_node_mb
                .map(|m| if m == 0 { alloc.mem_mb } else { m }),
            mem_per_cpu_mb: s.mem_per_cpu_mb,
            time_limit_min: j.time_limit_min,
            script: s.script.clone(),
            script_args: s.script_args.clone(),
            env: s.env.clone(),
            workdir: s.workdir.clone(),
            submit_dir: s.submit_dir.clone(),
            submit_host: s.submit_host.clone(),
            stdout: s.stdout.clone().unwrap_or_else(|| default_stdout(j).into()),
            stderr: s.stderr.clone(),
            stdin: s.stdin.clone(),
            start_time: j.start_time.unwrap_or(0),
            restarts: j.restarts,
            interactive: s.interactive,
            array: j.array,
            open_append: s.open_append || j.restarts > 0,
            account: s.account.clone(),
            held: (0..alloc.ranks.len())
                .map(|i| NodeShare {
                    cpu_ids: alloc.cpu_ids.get(i).cloned().unwrap_or_default(),
                    mem_mb: alloc.mem_mb,
                    gres: alloc.gres.get(i).cloned().unwrap_or_default(),
                })
                .collect(),
            resources: s.resources.clone(),
        }
    }
}

/// What a step gets on the job's `i`-th node: enough of the job's CPUs
/// for its tasks (whole cores, lowest first), the job's memory limit, and
/// the GRES it asks for from the job's (all of them when it asks for none,
/// as Slurm gives a step without `--gres`).
fn step_share(
    alloc: &crate::model::job::Allocation,
    i: usize,
    tasks: u32,
    cpus_per_task: u32,
    layout: Option<crate::sched::Layout>,
    res: &crate::model::tres::ResourceRequest,
) -> NodeShare {
    let job_ids = alloc.cpu_ids.get(i).map_or(&[][..], Vec::as_slice);
    let threads = layout.map_or(1, |l| l.threads.max(1)) as usize;
    let want = (u64::from(tasks.max(1)) * u64::from(cpus_per_task.max(1))) as usize;
    let cpu_ids = job_ids
        .iter()
        .copied()
        .take(want.div_ceil(threads) * threads)
        .collect();
    let job_gres = alloc.gres.get(i).cloned().unwrap_or_default();
    let asked = crate::sched::placement::node_gres_need(&res.gres, tasks, res, None);
    let gres = if asked.is_empty() && res.gres_none {
        Vec::new()
    } else if asked.is_empty() {
        job_gres
    } else {
        asked
            .iter()
            .filter_map(|want| {
                let have = job_gres.iter().find(|g| {
                    g.name == want.name && (want.type_.is_none() || want.type_ == g.type_)
                })?;
                let indices: Vec<u32> = have
                    .indices
                    .iter()
                    .copied()
                    .take(want.count as usize)
                    .collect();
                Some(crate::model::tres::GresAlloc {
                    count: if indices.is_empty() {
                        want.count.min(have.count)
                    } else {
                        indices.len() as u64
                    },
                    indices,
                    ..have.clone()
                })
            })
            .collect()
    };
    NodeShare {
        cpu_ids,
        mem_mb: alloc.mem_mb,
        gres,
    }
}

#[cfg(test)]
mod tests {
    use super::{step_layout, step_share};
    use crate::config::Config;
    use crate::ctld::fixtures::running;
    use crate::ctld::{Command, Core};
    use crate::model::acct::NodeUsage;
    use crate::model::job::{Allocation, ExitStatus, JobState, StepKind};
    use crate::model::tres::{parse_gres, GresAlloc, ResourceRequest};
    use crate::policy::authz::Caller;
    use crate::state::store::Op;
    use crate::wire::messages::{StatStep, StepComplete, StepRequest, StepStatRequest};
    use std::collections::HashMap;
    use std::sync::Arc;

    /// A step's share of its job's node: CPUs for its tasks (whole cores),
    /// and all, none or some of the job's GPUs.
    #[test]
    fn steps_take_their_share_of_the_jobs_node() {
        let alloc = Allocation {
            ranks: vec![0],
            cpus: vec![8],
            tasks: vec![4],
            mem_mb: 100,
            cpu_ids: vec![vec![4, 5, 6, 7, 8, 9, 10, 11]],
            gres: vec![vec![GresAlloc {
                name: "gpu".into(),
                type_: None,
                indices: vec![2, 3],
                count: 2,
            }]],
            share: None,
            cap_part: None,
        };
        let layout = Some(crate::sched::Layout::of(16, 2, 4, 2));
        let all = step_share(&alloc, 0, 1, 1, layout, &ResourceRequest::default());
        assert_eq!((all.cpu_ids, all.mem_mb), (vec![4, 5], 100));
        assert_eq!(all.gres[0].indices, vec![2, 3]);
        let one = ResourceRequest {
            gres: parse_gres("gpu:1").unwrap(),
            ..Default::default()
        };
        let s = step_share(&alloc, 0, 3, 1, layout, &one);
        assert_eq!(s.cpu_ids, vec![4, 5, 6, 7]);
        assert_eq!((s.gres[0].indices.clone(), s.gres[0].count), (vec![2], 1));
        let none = ResourceRequest {
            gres_none: true,
            ..Default::default()
        };
        assert!(step_share(&alloc, 0, 1, 1, layout, &none).gres.is_empty());
    }

    /// Job 5 on n1 and n2 (two tasks each) with step 5.0 of three tasks
    /// running (two on n1, one on n2).
    fn core_with_step() -> Core {
        let text = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=n[1-2]\n";
        let conf = Config::parse_str(text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let mut job = running(5, 0);
        job.alloc = Some(Allocation {
            ranks: vec![0, 1],
            cpus: vec![2, 2],
            tasks: vec![2, 2],
            ..Default::default()
        });
        let (mut core, _) = Core::recover(Arc::new(conf), vec![job], None, &HashMap::new(), 20);
        let req = StepRequest {
            job_id: 5,
            ntasks: Some(3),
            argv: vec!["true".into()],
            ..Default::default()
        };
        core.apply(
            30,
            Command::StartStep {
                req: Box::new(req),
                caller: Caller::ROOT,
            },
        );
        core
    }

    fn report(
        node: &str,
        tasks: u32,
        first: u32,
        peak_kb: u64,
        cpu_ms: u64,
        oom: u64,
    ) -> NodeUsage {
        NodeUsage {
            node: node.into(),
            tasks,
            max_rss_kb: peak_kb + 10,
            max_rss_task: first,
            max_rss_task_kb: peak_kb,
            rss_sum_kb: peak_kb * u64::from(tasks),
            user_cpu_ms: cpu_ms,
            system_cpu_ms: cpu_ms / 10,
            oom_kills: oom,
        }
    }

    fn usage(core: &mut Core, u: NodeUsage) -> crate::ctld::Output {
        core.apply(
            40,
            Command::StepUsage {
                job_id: 5,
                step_id: 0,
                usage: u,
            },
        )
    }

    fn step0(core: &Core) -> crate::model::acct::AcctStep {
        core.jobs().get(5).unwrap().steps[0].clone()
    }

    #[test]
    fn node_reports_fold_into_the_step_max_sum_and_average() {
        let mut core = core_with_step();
        assert_eq!(step0(&core).kind, StepKind::Numbered(0));
        let out = usage(&mut core, report("n1", 2, 0, 1000, 2000, 0));
        assert!(
            out.persist.iter().any(|op| matches!(op, Op::PutJob(_))),
            "the step record is persisted"
        );
        usage(&mut core, report("n2", 1, 2, 3000, 500, 0));
        let s = step0(&core);
        // MaxRSS: the highest task anywhere, with its node and task.
        assert_eq!(s.max_rss_kb, 3000);
        assert_eq!(s.usage.max_rss_node, "n2");
        assert_eq!(s.usage.max_rss_task, Some(2));
        // CPU times: summed over nodes.
        assert_eq!(s.user_cpu_ms, 2500);
        assert_eq!(s.system_cpu_ms, 250);
        // AveRSS: the tasks' peaks averaged over all three tasks.
        assert_eq!(s.usage.tasks, 3);
        assert_eq!(s.usage.ave_rss_kb(), (2 * 1000 + 3000) / 3);
        assert_eq!(s.state, JobState::Running);
    }

    #[test]
    fn an_oom_kill_ends_the_step_out_of_memory_whichever_comes_first() {
        // The report before srun's end...
        let mut core = core_with_step();
        usage(&mut core, report("n1", 2, 0, 1000, 10, 1));
        let done = StepComplete {
            job_id: 5,
            step_id: 0,
            exit: ExitStatus { code: 0, signal: 9 },
            start_time: 30,
            release: false,
        };
        core.apply(
            50,
            Command::StepDone {
                done: done.clone(),
                caller: Caller::ROOT,
            },
        );
        assert_eq!(step0(&core).state, JobState::OutOfMemory);
        // ...or after it.
        let mut core = core_with_step();
        core.apply(
            50,
            Command::StepDone {
                done,
                caller: Caller::ROOT,
            },
        );
        assert_eq!(step0(&core).state, JobState::Cancelled);
        usage(&mut core, report("n2", 1, 2, 1000, 10, 1));
        assert_eq!(step0(&core).state, JobState::OutOfMemory);
    }

    #[test]
    fn a_report_for_an_unknown_step_changes_nothing() {
        let mut core = core_with_step();
        let out = core.apply(
            40,
            Command::StepUsage {
                job_id: 5,
                step_id: 9,
                usage: report("n1", 1, 0, 1, 1, 0),
            },
        );
        assert!(out.persist.is_empty());
        assert_eq!(step0(&core).max_rss_kb, 0);
    }

    #[test]
    fn sstat_asks_the_running_steps_nodes() {
        let mut core = core_with_step();
        let ask = |core: &Core, step, all| {
            core.stat_targets(
                &StepStatRequest {
                    job_id: 5,
                    step,
                    all,
                },
                Caller::ROOT,
            )
        };
        let t = ask(&core, None, false).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, StatStep::Numbered(0));
        assert_eq!(t[0].1.iter().collect::<Vec<_>>(), vec![0, 1]);
        assert!(ask(&core, Some(StatStep::Numbered(1)), false)
            .unwrap()
            .is_empty());
        // `-a` adds the batch step, on the batch host, first.
        let all = ask(&core, None, true).unwrap();
        let steps: Vec<StatStep> = all.iter().map(|t| t.0).collect();
        assert_eq!(steps, vec![StatStep::Batch, StatStep::Numbered(0)]);
        assert_eq!(all[0].1.iter().collect::<Vec<_>>(), vec![0]);
        // Another user may not look.
        let other = Caller {
            uid: 4242,
            operator: false,
        };
        let req = StepStatRequest {
            job_id: 5,
            step: None,
            all: false,
        };
        assert!(core.stat_targets(&req, other).is_err());
        // Unknown job: an error (sstat: "couldn't get steps").
        let unknown = StepStatRequest { job_id: 99, ..req };
        assert!(core.stat_targets(&unknown, Caller::ROOT).is_err());
        // Ended step: nothing running but the script.
        core.apply(
            50,
            Command::StepDone {
                done: StepComplete {
                    job_id: 5,
                    step_id: 0,
                    exit: ExitStatus::default(),
                    start_time: 30,
                    release: false,
                },
                caller: Caller::ROOT,
            },
        );
        assert!(ask(&core, None, false).unwrap().is_empty());
        let all = ask(&core, None, true).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, StatStep::Batch);
    }

    #[test]
    fn layout_blocks_tasks_over_nodes() {
        assert_eq!(step_layout(5, 2), vec![3, 2]);
        assert_eq!(step_layout(2, 4), vec![1, 1]);
        assert_eq!(step_layout(4, 4), vec![1, 1, 1, 1]);
    }
}
