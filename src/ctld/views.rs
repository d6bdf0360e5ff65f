//! What clients are shown: jobs (squeue, scontrol), nodes (sinfo),
//! partitions, accounting rows (sacct), counters (sdiag). Read-only views
//! of the core's state; `now` decides time-dependent reasons.

use super::core::Core;
use super::steps::default_stdout;
use crate::config::hostlist;
use crate::model::acct::{AcctJob, Usage};
use crate::model::job::{Allocation, JobRecord, JobState};
use crate::model::node::NodeBaseState;
use crate::model::node::PowerState;
use crate::model::time::UnixTime;
use crate::model::tres::GresAlloc;
use crate::policy::authz::Caller;
use crate::sched::{GresKind, GresSlot, Request};
use crate::wire::messages::NodeCounts;
use crate::wire::types::{JobInfo, JobNodeDetail, NodeInfo, NodePower, PartitionInfo};

impl Core {
    /// A job as clients see it; `brief` leaves the paths, command and submit
    /// line empty (a listing does not show them, so they are not copied).
    pub fn job_info(&self, j: &JobRecord, brief: bool, now: UnixTime) -> JobInfo {
        let s = &j.submit;
        let (nodes, num_nodes, num_cpus, num_tasks, mem) = match &j.alloc {
            Some(a) => (
                self.nodelist(&a.ranks),
                a.ranks.len() as u32,
                a.total_cpus(),
                a.tasks.iter().sum(),
                a.mem_mb,
            ),
            None => {
                let req = Request::from_submit(s);
                (
                    String::new(),
                    req.min_nodes(),
                    req.ntasks * req.cpus_per_task,
                    req.ntasks,
                    s.mem_per_node_mb.or(s.mem_per_cpu_mb).unwrap_or(0),
                )
            }
        };
        let state = if j.ending_as.is_some() {
            JobState::Completing
        } else if self.is_configuring(j.job_id) {
            JobState::Configuring
        } else {
            j.state
        };
        let mut info = JobInfo {
            job_id: j.job_id,
            name: s.name.clone(),
            user: s.user.clone(),
            uid: s.uid,
            gid: s.gid,
            partition: j.partition.clone(),
            state,
            reason: self.jobs.reason(j, now).to_string(),
            priority: j.priority,
            submit_time: j.submit_time,
            eligible_time: Some(s.begin_time.unwrap_or(j.submit_time).max(j.submit_time)),
            start_time: j.start_time,
            end_time: j.end_time,
            time_limit_min: j.time_limit_min,
            nodes,
            num_nodes,
            num_cpus,
            num_tasks,
            cpus_per_task: s.cpus_per_task.unwrap_or(1),
            mem_per_node_mb: mem,
            exit_code: (j.exit.code, j.exit.signal),
            // Filled in below unless the query is brief.
            workdir: String::new(),
            stdout: String::new(),
            stderr: String::new(),
            stdin: String::new(),
            command: String::new(),
            submit_line: String::new(),
            batch_host: j
                .alloc
                .as_ref()
                .and_then(|a| a.ranks.first())
                .map(|&r| self.node_name(r).to_string()),
            restarts: j.restarts,
            req_nodes: s.min_nodes.unwrap_or(1),
            array: j.array,
            dependency: j
                .dependency
                .as_ref()
                .map(ToString::to_string)
                .filter(|d| d != "(null)")
                .unwrap_or_default(),
            array_pending: None,
            req_node_list: s.req_nodes.clone().unwrap_or_default(),
            exc_node_list: s.exc_nodes.clone().unwrap_or_default(),
            account: s.account.clone().unwrap_or_default(),
            qos: s.qos.clone().unwrap_or_default(),
            comment: s.comment.clone().unwrap_or_default(),
            features: s.constraint.clone().unwrap_or_default(),
            exclusive: s.exclusive,
            over_subscribe: crate::model::job::Exclusive::oversubscribe(
                s.exclusive,
                s.oversubscribe,
                self.conf
                    .partitions
                    .iter()
                    .find(|p| p.name == j.partition)
                    .map(|p| p.opts.oversubscribe),
            )
            .to_string(),
            no_requeue: s.no_requeue,
            nice: s.nice,
            tres_per_node: s.resources.tres_per_node().unwrap_or_default(),
            req_gres: crate::model::tres::gres_requested(&s.resources, num_nodes, num_tasks),
            alloc_gres: j
                .alloc
                .as_ref()
                .map(|a| crate::model::tres::gres_totals(&a.gres))
                .unwrap_or_default(),
            // Only `scontrol show job` prints these; listings skip the work.
            node_detail: match (&j.alloc, brief) {
                (Some(a), false) => self.node_detail(a),
                _ => Vec::new(),
            },
            reservation: s.reservation.clone().unwrap_or_default(),
            licenses: s
                .licenses
                .as_deref()
                .and_then(|l| crate::model::reservation::parse_licenses(l).ok())
                .map(|l| crate::model::reservation::fmt_licenses(&l))
                .unwrap_or_default(),
            sched_start: None,
            sched_nodes: String::new(),
            suspend_time: j.suspend.last,
            secs_pre_suspend: j.suspend.pre_secs,
            mem_per_cpu_mb: s
                .mem_per_node_mb
                .is_none()
                .then_some(s.mem_per_cpu_mb)
                .flatten(),
            hidden: false,
            suspended_secs: j
                .suspend
                .suspended_secs(j.state == JobState::Suspended, now),
        };
        if let Some(plan) = self.plan(j.job_id) {
            info.sched_start = Some(plan.start);
            info.sched_nodes = self.nodelist(&plan.ranks);
        }
        if !brief {
            // Shown as the batch script's files are named: the job's own
            // fields expanded and placed under its working directory.
            use crate::exec::pattern::{expand, resolve, PatternContext};
            let ctx = PatternContext {
                job_id: j.job_id,
                array_job_id: j.array.map(|a| a.array_job_id),
                array_task_id: j.array.map(|a| a.task_id),
                job_name: s.name.clone(),
                user: s.user.clone(),
                first_node: info.batch_host.clone().unwrap_or_default(),
                restart: j.restarts,
                ..PatternContext::default()
            };
            let shown = |pattern: &str| {
                resolve(&expand(pattern, &ctx), std::path::Path::new(&s.workdir))
                    .to_string_lossy()
                    .into_owned()
            };
            let out = s.stdout.as_deref().unwrap_or(default_stdout(j));
            info.workdir = s.workdir.clone();
            info.stdout = shown(out);
            info.stderr = shown(s.stderr.as_deref().unwrap_or(out));
            info.stdin = shown(s.stdin.as_deref().unwrap_or("/dev/null"));
            info.command = s.command.clone();
            info.submit_line = s.submit_line.clone();
        }
        info
    }

    pub fn node_info(&self, rank: usize) -> Option<NodeInfo> {
        // A deleted dynamic node's vacant rank is no node.
        let c = self.conf.nodes.get(rank).filter(|c| !c.vacant)?;
        let st = self.nodes.get(rank)?;
        let slot = self.slots.get(rank)?;
        let power = st.power_state();
        let base = if st.future {
            NodeBaseState::Future
        } else if st.admin.down.is_some() {
            NodeBaseState::Down
        } else if !st.registered && power == PowerState::On {
            NodeBaseState::Unknown
        } else if slot.alloc_cpus == 0 {
            NodeBaseState::Idle
        } else if slot.alloc_cpus >= slot.cpus {
            NodeBaseState::Allocated
        } else {
            NodeBaseState::Mixed
        };
        let reason = st.admin.down.as_ref().or(st.admin.drain.as_ref());
        let res = st.resources.clone().unwrap_or_default();
        Some(NodeInfo {
            name: c.name.clone(),
            addr: st.reg_addr.clone().unwrap_or_else(|| c.addr.clone()),
            hostname: c.hostname.clone(),
            port: c.port,
            base,
            drain: st.admin.drain.is_some(),
            // Slurm flags a node powering up as not responding; one powered
            // down (or on its way) is not expected to answer.
            not_responding: match power {
                PowerState::On => !st.responding && !st.future,
                PowerState::PoweringUp => true,
                PowerState::PoweredDown | PowerState::PoweringDown => false,
            },
            rank: rank as u32,
            attached_to: st.attached_to.map(|r| self.node_name(r).to_string()),
            cpus: c.cpus,
            sockets: c.sockets,
            cores_per_socket: c.cores_per_socket,
            threads_per_core: c.threads_per_core,
            real_memory_mb: c.real_memory_mb,
            alloc_cpus: slot.alloc_cpus,
            alloc_mem_mb: slot.alloc_mem_mb,
            features: c.features.clone(),
            gres: c.gres.clone(),
            weight: c.weight,
            partitions: self.node_parts.get(rank).cloned().unwrap_or_default(),
            reason: reason.map(|r| r.text.clone()),
            reason_user: reason.map(|r| r.user.clone()),
            reason_time: reason.map(|r| r.time),
            boot_time: st.boot_time,
            slurmd_start_time: st.boot_time,
            last_busy: None,
            version: if res.cpus > 0 {
                env!("CARGO_PKG_VERSION").to_string()
            } else {
                "(null)".into()
            },
            cfg_gres: gres_by_name(&slot.gres, GresSlot::total),
            alloc_gres: gres_by_name(&slot.gres, GresSlot::used)
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .collect(),
            gres_used: gres_used(&slot.gres),
            invalid_reg: st.invalid_reg,
            reserved: false,
            maint: false,
            boards: c.boards,
            tmp_disk_mb: c.tmp_disk_mb,
            ignored_attrs: self.conf.node_ignored_attrs(rank).to_vec(),
            power: NodePower {
                cloud: c.state == crate::config::ConfNodeState::Cloud,
                power_down: st.admin.power.is_some_and(|p| p.down_requested.is_some()),
                powered_down: power == PowerState::PoweredDown,
                powering_up: power == PowerState::PoweringUp,
                powering_down: power == PowerState::PoweringDown,
            },
            dynamic: c.dynamic,
        })
    }

    /// `scontrol show job -d`'s per-node lines: consecutive nodes with the
    /// same CPU ids, memory and GRES share one line, as in Slurm.
    fn node_detail(&self, a: &Allocation) -> Vec<JobNodeDetail> {
        let mut out: Vec<(Vec<u32>, JobNodeDetail)> = Vec::new();
        for (i, &rank) in a.ranks.iter().enumerate() {
            let cpu_ids = a
                .cpu_ids
                .get(i)
                .map(|ids| crate::model::tres::ranges(ids))
                .unwrap_or_default();
            let gres = a
                .gres
                .get(i)
                .map(|g| {
                    g.iter()
                        .map(GresAlloc::detail)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            match out.last_mut() {
                Some((ranks, d)) if d.cpu_ids == cpu_ids && d.gres == gres => ranks.push(rank),
                _ => out.push((
                    vec![rank],
                    JobNodeDetail {
                        nodes: String::new(),
                        cpu_ids,
                        mem_mb: a.mem_mb,
                        gres,
                    },
                )),
            }
        }
        out.into_iter()
            .map(|(ranks, mut d)| {
                d.nodes = self.nodelist(&ranks);
                d
            })
            .collect()
    }

    /// A job's accounting view, with node names resolved.
    pub fn acct_of(&self, j: &JobRecord, usage: Usage) -> AcctJob {
        let (nodes, batch_host) = match &j.alloc {
            Some(a) => (
                self.nodelist(&a.ranks),
                a.ranks.first().map(|&r| self.node_name(r).to_string()),
            ),
            None => (String::new(), None),
        };
        j.to_acct(nodes, batch_host, &self.conf.cluster_name, usage)
    }

    /// Whether `viewer` may see job `j`: with `PrivateData=jobs`, a user
    /// sees only their own jobs (operators see every job), as in Slurm.
    pub fn may_see_job(&self, viewer: Caller, j: &JobRecord) -> bool {
        !self.conf.private_data.jobs || viewer.operator || j.submit.uid == viewer.uid
    }

    /// Whether `part` is listed for `viewer` (of `groups`) without `-a`:
    /// slurmctld's `part_is_visible`, operators seeing every partition, and
    /// others neither a Hidden one nor one whose AllowGroups leaves them out.
    fn visible_to(
        &self,
        part: &crate::config::PartitionConf,
        viewer: Caller,
        groups: &[String],
    ) -> bool {
        viewer.operator
            || (!part.opts.hidden
                && part
                    .opts
                    .allow_groups
                    .as_ref()
                    .is_none_or(|allowed| allowed.iter().any(|g| groups.contains(g))))
    }

    /// Every partition as scontrol and sinfo show it to `viewer` (whose
    /// groups are `groups`): none to a user under `PrivateData=partitions`.
    pub fn partition_infos(&self, viewer: Caller, groups: &[String]) -> Vec<PartitionInfo> {
        if self.conf.private_data.partitions && !viewer.operator {
            return Vec::new();
        }
        self.conf
            .partitions
            .iter()
            .map(|p| {
                let configured = || {
                    p.nodes
                        .iter()
                        .filter_map(|n| self.conf.node_index(n))
                        .filter_map(|i| self.conf.nodes.get(i))
                };
                let total_cpus = configured().map(|n| n.cpus).sum();
                let total_mem_mb = configured().map(|n| n.real_memory_mb).sum();
                PartitionInfo {
                    name: p.name.clone(),
                    default: p.default,
                    state: p.state,
                    max_time_min: p.max_time_min,
                    default_time_min: p.default_time_min,
                    max_nodes: p.max_nodes,
                    min_nodes: p.min_nodes,
                    nodes: hostlist::compress(&p.nodes),
                    node_names: p.nodes.clone(),
                    total_cpus,
                    total_nodes: p.nodes.len() as u32,
                    total_mem_mb,
                    preempt: p.preempt.clone(),
                    preempt_mode: p.preempt.mode.unwrap_or(self.conf.preempt.mode).name(),
                    priority_job_factor: self.conf.priority.partition(&p.name).job_factor,
                    priority_tier: self.conf.priority.partition(&p.name).tier,
                    access: p.access.clone(),
                    opts: p.opts.clone(),
                    hidden: !self.visible_to(p, viewer, groups),
                }
            })
            .collect()
    }

    /// Jobs by id (array ids standing for their tasks), or every job, that
    /// `viewer` may see. A job hidden by `PrivateData=jobs` is left out as
    /// if it did not exist (Slurm answers `Invalid job id specified`).
    pub fn job_infos(
        &self,
        ids: &[u32],
        brief: bool,
        now: UnixTime,
        viewer: Caller,
        groups: &[String],
    ) -> Vec<JobInfo> {
        // A job in a partition hidden from the viewer is marked so that
        // squeue leaves it out unless asked with `-a` or `-j`, as
        // slurmctld's `_all_parts_hidden` does (operators see them all).
        let info = |j: &JobRecord| {
            let mut i = self.job_info(j, brief, now);
            i.hidden = self
                .conf
                .partitions
                .iter()
                .any(|p| p.name == j.partition && !self.visible_to(p, viewer, groups));
            i
        };
        if ids.is_empty() {
            self.jobs
                .values()
                .filter(|j| self.may_see_job(viewer, j))
                .map(info)
                .collect()
        } else {
            self.resolve_ids(ids)
                .into_iter()
                .filter_map(|id| self.jobs.get(id))
                .filter(|j| self.may_see_job(viewer, j))
                .map(info)
                .collect()
        }
    }

    /// Nodes by name, or every node, as `viewer` may see them: none to a
    /// user under `PrivateData=nodes`.
    pub fn node_infos(&self, names: &[String], viewer: Caller) -> Vec<NodeInfo> {
        if self.conf.private_data.nodes && !viewer.operator {
            return Vec::new();
        }
        // Powered-down cloud nodes are hidden unless `PrivateData=cloud`,
        // as in Slurm (named ones too: "Node cl1 not found").
        let shown =
            |i: &NodeInfo| self.conf.private_data.cloud || !(i.power.cloud && i.power.powered_down);
        if names.is_empty() {
            (0..self.conf.nodes.len())
                .filter_map(|r| self.node_info(r))
                .filter(shown)
                .collect()
        } else {
            names
                .iter()
                .filter_map(|n| self.conf.node_index(n))
                .filter_map(|r| self.node_info(r))
                .filter(shown)
                .collect()
        }
    }

    /// Node counters by state, and pending/running job counts (sdiag).
    pub fn node_counts(&self) -> (NodeCounts, u32, u32) {
        let mut n = NodeCounts {
            total: self.nodes.len() as u32,
            ..Default::default()
        };
        for (st, slot) in self.nodes.iter().zip(&self.slots) {
            // As `node_info` shows them: a powered-down node is idle, and
            // not "not responding".
            let power = st.power_state();
            let silent = match power {
                PowerState::On => !st.responding && !st.future,
                PowerState::PoweringUp => true,
                PowerState::PoweredDown | PowerState::PoweringDown => false,
            };
            if silent {
                n.not_responding += 1;
            }
            if st.admin.drain.is_some() {
                n.drain += 1;
            }
            if st.admin.down.is_some() {
                n.down += 1;
            } else if !st.registered && power == PowerState::On {
                n.unknown += 1;
            } else if slot.alloc_cpus == 0 {
                n.idle += 1;
            } else if slot.alloc_cpus >= slot.cpus {
                n.allocated += 1;
            } else {
                n.mixed += 1;
            }
        }
        let (pending, running) = self
            .conf
            .partitions
            .iter()
            .map(|p| self.jobs.counts(&p.name))
            .fold((0, 0), |(pd, r), c| (pd + c.pending, r + c.running));
        (n, pending, running)
    }
}

/// Units per GRES name on a node (`gres/gpu=4`).
fn gres_by_name(slots: &[GresSlot], count: fn(&GresSlot) -> u64) -> Vec<(String, u64)> {
    let mut out: std::collections::BTreeMap<String, u64> = Default::default();
    for s in slots {
        *out.entry(s.name.clone()).or_default() += count(s);
    }
    out.into_iter().collect()
}

/// `GresUsed=gpu:a100:2(IDX:0-1),bw:40`: every configured GRES with how
/// many are held, indices for devices (`IDX:N/A` when none are).
fn gres_used(slots: &[GresSlot]) -> String {
    slots
        .iter()
        .map(|s| {
            let head = match &s.type_ {
                Some(t) => format!("{}:{}:{}", s.name, t, s.used()),
                None => format!("{}:{}", s.name, s.used()),
            };
            match &s.kind {
                GresKind::Devices(devs) => {
                    let held: Vec<u32> = devs.iter().filter(|d| d.used).map(|d| d.index).collect();
                    if held.is_empty() {
                        format!("{head}(IDX:N/A)")
                    } else {
                        format!("{head}(IDX:{})", crate::model::tres::ranges(&held))
                    }
                }
                GresKind::Count { .. } => head,
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::Core;
    use crate::policy::authz::Caller;

    fn core(private: &str) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n[1-2] CPUs=2\n\
             PartitionName=p Nodes=n[1-2] Default=YES\n{private}"
        );
        let conf = Config::parse_str(&text, std::path::Path::new("/x/slurm.conf")).unwrap();
        let mut alice = crate::ctld::fixtures::running(5, 0);
        alice.submit.uid = 1000;
        let mut bob = crate::ctld::fixtures::running(6, 1);
        bob.submit.uid = 1001;
        Core::recover(Arc::new(conf), vec![alice, bob], None, &HashMap::new(), 20).0
    }

    const ALICE: Caller = Caller {
        uid: 1000,
        operator: false,
    };

    fn ids(c: &Core, asked: &[u32], viewer: Caller) -> Vec<u32> {
        c.job_infos(asked, true, 30, viewer, &[])
            .iter()
            .map(|j| j.job_id)
            .collect()
    }

    #[test]
    fn hidden_and_group_only_partitions_are_marked_for_users_not_operators() {
        let c = core(
            "PartitionName=h Nodes=n1 Hidden=YES\n\
             PartitionName=g Nodes=n2 AllowGroups=chem,bio\n",
        );
        let hidden = |viewer: Caller, groups: &[String]| {
            c.partition_infos(viewer, groups)
                .into_iter()
                .map(|p| (p.name, p.hidden))
                .collect::<Vec<_>>()
        };
        let marks = |v: [bool; 3]| {
            ["p", "h", "g"]
                .into_iter()
                .map(String::from)
                .zip(v)
                .collect::<Vec<_>>()
        };
        assert_eq!(hidden(ALICE, &[]), marks([false, true, true]));
        assert_eq!(hidden(ALICE, &["bio".into()]), marks([false, true, false]));
        assert_eq!(hidden(Caller::ROOT, &[]), marks([false, false, false]));
    }

    #[test]
    fn private_data_hides_others_jobs_nodes_and_partitions_from_users() {
        let open = core("");
        assert_eq!(ids(&open, &[], ALICE), [5, 6]);
        assert_eq!(open.node_infos(&[], ALICE).len(), 2);
        assert_eq!(open.partition_infos(ALICE, &[]).len(), 1);

        let private = core("PrivateData=jobs,nodes,partitions\n");
        assert_eq!(ids(&private, &[], ALICE), [5]);
        // Asked for by id, bob's job is as if it did not exist.
        assert_eq!(ids(&private, &[6], ALICE), Vec::<u32>::new());
        assert_eq!(ids(&private, &[5, 6], ALICE), [5]);
        assert!(private.node_infos(&[], ALICE).is_empty());
        assert!(private.node_infos(&["n1".into()], ALICE).is_empty());
        assert!(private.partition_infos(ALICE, &[]).is_empty());
        // Operators see everything.
        assert_eq!(ids(&private, &[], Caller::ROOT), [5, 6]);
        assert_eq!(private.node_infos(&[], Caller::ROOT).len(), 2);
        assert_eq!(private.partition_infos(Caller::ROOT, &[]).len(), 1);

        let jobs_only = core("PrivateData=jobs\n");
        assert_eq!(jobs_only.node_infos(&[], ALICE).len(), 2);
    }
}
