//! What the controller does with the hardware a node daemon reports when it
//! registers, as Slurm 22.05's slurmctld does in `validate_node_specs`
//! (`src/slurmctld/node_mgr.c`) and `gres_node_config_validate`
//! (`src/common/gres.c`):
//!
//! - a node offering less than slurm.conf says is INVALID_REG and, unless
//!   it is DOWN or drained already, DRAINED with Slurm's reason text: one
//!   GRES reason first (a gres.conf problem, or fewer autodetected GPUs
//!   than configured), then `Low socket*core*thread count`, `Low CPUs` and
//!   `Low RealMemory (...)`, joined by `, `;
//! - `SlurmdParameters=config_overrides` skips the CPU and memory checks
//!   (the configured values stand), but not the GRES count, as in Slurm;
//! - a node offering more is fine: the configured values are used;
//! - on a node whose gres.conf says `AutoDetect=`, the GPUs it reports fill
//!   in its GRES slots, leaving what running jobs hold held.
//!
//! A later registration that is fine again clears INVALID_REG but not the
//! drain: Slurm 22.05 leaves that to an operator's RESUME.
//!
//! Does not: detect anything (the node daemon does, `daemon/hardware.rs`),
//! check TmpDisk (nodes do not report it yet), or change CPU slots (the
//! configured layout is what placement uses, as in Slurm).

use std::collections::HashSet;

use super::command::Output;
use super::core::Core;
use crate::config::{ConfNodeState, NodeConf, NodeGres};
use crate::model::node::{NodeResources, Reason, ReportedGpu};
use crate::model::time::UnixTime;
use crate::sched::{GresDev, GresKind, GresSlot};

/// Slurm's DEFAULT_NODE_REG_MEM_PERCENT and DEFAULT_CLOUD_REG_MEM_PERCENT:
/// the share of RealMemory a node must report.
const REG_MEM_PERCENT: f64 = 100.0;
const CLOUD_REG_MEM_PERCENT: f64 = 90.0;

/// Why a registration is invalid, in Slurm's words, or `None` when the node
/// has at least what slurm.conf says. `gres_reason` is the one GRES reason
/// (it comes first, as slurmctld validates GRES before CPUs).
pub(crate) fn invalid_reason(
    nc: &NodeConf,
    reported: &NodeResources,
    gres_reason: Option<String>,
    config_overrides: bool,
) -> Option<String> {
    let mut reasons: Vec<String> = gres_reason.into_iter().collect();
    if !config_overrides {
        let threads = |s: u32, c: u32, t: u32| u64::from(s) * u64::from(c) * u64::from(t);
        let have = threads(
            reported.sockets,
            reported.cores_per_socket,
            reported.threads_per_core,
        );
        let want = threads(nc.sockets, nc.cores_per_socket, nc.threads_per_core);
        if have < want {
            reasons.push("Low socket*core*thread count".into());
        }
        if reported.cpus < nc.cpus {
            reasons.push("Low CPUs".into());
        }
        let percent = if nc.state == ConfNodeState::Cloud {
            CLOUD_REG_MEM_PERCENT
        } else {
            REG_MEM_PERCENT
        };
        // Slurm compares the ratio, so a cloud node may come in 10% short.
        if nc.real_memory_mb > 0
            && (reported.real_memory_mb as f64 / nc.real_memory_mb as f64) * 100.0 < percent
        {
            reasons.push(format!(
                "Low RealMemory (reported:{} < {percent:.2}% of configured:{})",
                reported.real_memory_mb, nc.real_memory_mb
            ));
        }
    }
    (!reasons.is_empty()).then(|| reasons.join(", "))
}

/// A detecting node's GPU slots: gres.conf's GPU devices, then the reported
/// GPUs no gres.conf line names, taken in NVML order for each slurm.conf
/// `gpu` item (a typed item takes GPUs whose type name contains its type,
/// as Slurm matches `Type=a100` against `nvidia_a100-sxm4-80gb`), up to
/// its count; more than configured are ignored. Returns the slots, how
/// many GPUs were found and how many slurm.conf configures.
pub(crate) fn detected_gpu_slots(
    gres: &NodeGres,
    reported: &[ReportedGpu],
) -> (Vec<GresSlot>, u64, u64) {
    let is_gpu = |n: &str| n.eq_ignore_ascii_case("gpu");
    let mut slots: Vec<GresSlot> = Vec::new();
    let add =
        |slots: &mut Vec<GresSlot>, name: &str, type_: &Option<String>, dev: GresDev| match slots
            .iter_mut()
            .find(|s| s.name == name && s.type_ == *type_)
        {
            Some(GresSlot {
                kind: GresKind::Devices(devs),
                ..
            }) => devs.push(dev),
            _ => slots.push(GresSlot {
                name: name.to_string(),
                type_: type_.clone(),
                kind: GresKind::Devices(vec![dev]),
            }),
        };
    let mut claimed: HashSet<&str> = HashSet::new();
    let mut next = 0u32;
    for d in gres.devices.iter().filter(|d| is_gpu(&d.name)) {
        if let Some(f) = &d.file {
            claimed.insert(f.as_str());
        }
        next = next.max(d.index.saturating_add(1));
        let dev = GresDev {
            index: d.index,
            cores: d.cores.clone(),
            used: false,
        };
        add(&mut slots, &d.name, &d.type_, dev);
    }
    let mut configured = 0u64;
    for item in gres.configured.iter().filter(|i| is_gpu(&i.name)) {
        configured = configured.saturating_add(item.count);
        let have = gres
            .devices
            .iter()
            .filter(|d| is_gpu(&d.name) && d.type_ == item.type_)
            .count() as u64;
        let mut need = item.count.saturating_sub(have);
        let wanted_type = item.type_.as_ref().map(|t| t.to_ascii_lowercase());
        for g in reported {
            if need == 0 {
                break;
            }
            let fits = wanted_type
                .as_deref()
                .is_none_or(|t| g.type_name.to_ascii_lowercase().contains(t));
            if !fits || claimed.contains(g.file.as_str()) {
                continue;
            }
            claimed.insert(g.file.as_str());
            let dev = GresDev {
                index: next,
                cores: (!g.cores.is_empty()).then(|| g.cores.clone()),
                used: false,
            };
            add(&mut slots, &item.name, &item.type_, dev);
            next += 1;
            need -= 1;
        }
    }
    let found = slots.iter().map(GresSlot::total).sum();
    (slots, found, configured)
}

impl Core {
    /// Check a registering node's hardware and, on a detecting node, take
    /// its GPUs into its slots. Returns the reason it is invalid, if it is.
    pub(super) fn validate_registration(
        &mut self,
        rank: u32,
        reported: &NodeResources,
    ) -> Option<String> {
        let conf = self.conf.clone();
        let nc = conf.nodes.get(rank as usize)?;
        let gres = conf.node_gres(rank as usize);
        // Slurm keeps only the first GRES reason.
        let mut gres_reason = gres.and_then(|g| g.problems.first().cloned());
        if let Some(g) = gres.filter(|g| g.detects()) {
            let (gpus, found, configured) = detected_gpu_slots(g, &reported.gpus);
            self.set_gpu_slots(rank, gpus);
            if found < configured && gres_reason.is_none() {
                gres_reason = Some(format!(
                    "gres/gpu count reported lower than configured ({found} < {configured})"
                ));
            }
        }
        invalid_reason(nc, reported, gres_reason, conf.config_overrides)
    }

    /// Replace node `rank`'s GPU device slots, then mark held again every
    /// GPU a running job holds there, keeping a held one the node no
    /// longer reports, so that it is neither given out twice nor lost to
    /// the job's release.
    fn set_gpu_slots(&mut self, rank: u32, gpus: Vec<GresSlot>) {
        let held: Vec<(String, Option<String>, u32)> = self
            .jobs
            .running()
            .filter_map(|j| {
                let a = j.alloc.as_ref()?;
                let i = a.ranks.iter().position(|&r| r == rank)?;
                a.gres.get(i).cloned()
            })
            .flatten()
            .filter(|g| g.name.eq_ignore_ascii_case("gpu"))
            .flat_map(|g| {
                g.indices
                    .iter()
                    .map(move |&ix| (g.name.clone(), g.type_.clone(), ix))
                    .collect::<Vec<_>>()
            })
            .collect();
        let Some(slot) = self.slots.get_mut(rank as usize) else {
            return;
        };
        slot.gres.retain(|s| {
            !(s.name.eq_ignore_ascii_case("gpu") && matches!(s.kind, GresKind::Devices(_)))
        });
        slot.gres.extend(gpus);
        for (name, type_, index) in held {
            let pos = match slot
                .gres
                .iter()
                .position(|s| s.name == name && s.type_ == type_)
            {
                Some(p) => p,
                None => {
                    slot.gres.push(GresSlot {
                        name,
                        type_,
                        kind: GresKind::Devices(Vec::new()),
                    });
                    slot.gres.len() - 1
                }
            };
            if let GresKind::Devices(devs) = &mut slot.gres[pos].kind {
                match devs.iter_mut().find(|d| d.index == index) {
                    Some(d) => d.used = true,
                    None => devs.push(GresDev {
                        index,
                        cores: None,
                        used: true,
                    }),
                }
                devs.sort_by_key(|d| d.index);
            }
        }
    }

    /// An invalid registration: INVALID_REG, logged once as it starts, and
    /// DRAIN with the reason unless the node is DOWN or drained already
    /// (an operator's reason is kept, as slurmctld 22.05 keeps it).
    pub(super) fn drain_invalid(
        &mut self,
        rank: u32,
        reason: String,
        now: UnixTime,
        out: &mut Output,
    ) {
        let user = self
            .conf
            .slurm_user
            .clone()
            .unwrap_or_else(|| "root".into());
        let name = self.node_name(rank).to_string();
        let was_invalid = self
            .nodes
            .get(rank as usize)
            .is_some_and(|st| st.invalid_reg);
        if !was_invalid {
            tracing::error!(node = %name, reason = %reason, "registration reports less than configured; node INVALID_REG");
        }
        self.change_node(rank, now, false, out, |st| {
            st.invalid_reg = true;
            if st.admin.down.is_none() && st.admin.drain.is_none() {
                st.admin.drain = Some(Reason {
                    text: reason,
                    user,
                    time: now,
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::ctld::fixtures::{hello, running};
    use crate::ctld::{Command, Core, Output, Reply};
    use crate::model::job::JobRecord;
    use crate::model::node::{NodeResources, ReportedGpu};
    use crate::model::tres::GresAlloc;
    use crate::policy::authz::Caller;
    use crate::sched::GresKind;
    use crate::state::store::Op;
    use crate::wire::messages::{NodeUpdate, NodeUpdateState};

    const T0: i64 = 1000;

    /// n1 of 2 sockets × 4 cores (8 CPUs), 1000 MiB, and `node_extra`;
    /// `global` goes before the node line, `gres` is gres.conf.
    fn core(global: &str, node_extra: &str, gres: Option<&str>, jobs: Vec<JobRecord>) -> Core {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=60\nReturnToService=1\n\
             GresTypes=gpu\n{global}NodeName=n1 Sockets=2 CoresPerSocket=4 RealMemory=1000 {node_extra}\n\
             PartitionName=p Nodes=ALL\n"
        );
        let conf = Config::parse_str_with_gres(
            &text,
            Path::new("/x/slurm.conf"),
            gres.map(|g| (g, Path::new("/x/gres.conf"))),
        )
        .unwrap();
        Core::recover(Arc::new(conf), jobs, None, &HashMap::new(), T0).0
    }

    fn small() -> NodeResources {
        NodeResources {
            cpus: 1,
            sockets: 1,
            cores_per_socket: 1,
            threads_per_core: 1,
            real_memory_mb: 500,
            boards: 1,
            gpus: Vec::new(),
        }
    }

    fn exact() -> NodeResources {
        NodeResources {
            cpus: 8,
            sockets: 2,
            cores_per_socket: 4,
            threads_per_core: 1,
            real_memory_mb: 1000,
            ..small()
        }
    }

    fn gpu(index: u32, cores: &[u32]) -> ReportedGpu {
        ReportedGpu {
            index,
            type_name: "nvidia_a100-sxm4-80gb".into(),
            file: format!("/dev/nvidia{index}"),
            cores: cores.to_vec(),
        }
    }

    /// n1 registers with `resources` and the jobs the core placed there.
    fn register(core: &mut Core, resources: NodeResources, now: i64) -> Output {
        let jobs: Vec<u32> = core.jobs().running().map(|j| j.job_id).collect();
        let mut h = hello(0, &jobs);
        h.resources = resources;
        core.apply(
            now,
            Command::NodeRegistered {
                hello: Box::new(h),
                via: None,
            },
        )
    }

    fn drain(core: &Core) -> Option<String> {
        core.nodes()[0].admin.drain.as_ref().map(|r| r.text.clone())
    }

    fn update(core: &mut Core, state: NodeUpdateState, now: i64) -> Output {
        core.apply(
            now,
            Command::UpdateNodes {
                update: NodeUpdate {
                    nodes: "n1".into(),
                    state: Some(state),
                    reason: Some("fan".into()),
                },
                user: "admin".into(),
                caller: Caller::ROOT,
            },
        )
    }

    /// Less than configured: INVALID_REG and DRAIN with Slurm 22.05's
    /// reasons in its order, by the SlurmUser, persisted. A registration
    /// that is fine again clears INVALID_REG but leaves the drain (as
    /// slurmctld 22.05) until an operator resumes the node.
    #[test]
    fn low_hardware_drains_with_slurms_reason_until_resumed() {
        let mut core = core("SlurmUser=slurm\n", "", None, vec![]);
        let out = register(&mut core, small(), T0 + 1);
        assert_eq!(
            drain(&core).as_deref(),
            Some(
                "Low socket*core*thread count, Low CPUs, \
                 Low RealMemory (reported:500 < 100.00% of configured:1000)"
            )
        );
        let st = &core.nodes()[0];
        assert!(st.invalid_reg);
        assert_eq!(st.admin.drain.as_ref().unwrap().user, "slurm");
        assert_eq!(st.admin.drain.as_ref().unwrap().time, T0 + 1);
        assert!(out
            .persist
            .iter()
            .any(|op| matches!(op, Op::NodeAdmin { name, state: Some(_) } if name == "n1")));
        // The same again: nothing new to persist.
        let out = register(&mut core, small(), T0 + 2);
        assert!(out.persist.is_empty());
        // Only memory short: that reason alone.
        let mut c2 = core_plain();
        register(
            &mut c2,
            NodeResources {
                real_memory_mb: 999,
                ..exact()
            },
            T0,
        );
        assert_eq!(
            drain(&c2).as_deref(),
            Some("Low RealMemory (reported:999 < 100.00% of configured:1000)")
        );
        // Fixed hardware: valid again, still drained.
        register(&mut core, exact(), T0 + 3);
        assert!(!core.nodes()[0].invalid_reg);
        assert!(drain(&core).is_some());
        let out = update(&mut core, NodeUpdateState::Resume, T0 + 4);
        assert!(matches!(out.reply, Some(Reply::Done(Ok(())))));
        assert!(drain(&core).is_none());
    }

    fn core_plain() -> Core {
        core("", "", None, vec![])
    }

    /// More than configured is fine; so is exactly what is configured.
    #[test]
    fn more_than_configured_is_fine() {
        let mut c = core_plain();
        register(&mut c, exact(), T0);
        assert!(drain(&c).is_none() && !c.nodes()[0].invalid_reg);
        let mut c = core_plain();
        let big = NodeResources {
            cpus: 64,
            sockets: 4,
            cores_per_socket: 8,
            threads_per_core: 2,
            real_memory_mb: 64_000,
            ..small()
        };
        register(&mut c, big, T0);
        assert!(drain(&c).is_none());
        // The configured layout is what placement uses.
        assert_eq!(c.slots()[0].cpus, 8);
    }

    /// `SlurmdParameters=config_overrides`: no CPU or memory check.
    #[test]
    fn config_overrides_skips_the_check() {
        let mut c = core("SlurmdParameters=config_overrides\n", "", None, vec![]);
        register(&mut c, small(), T0);
        assert!(drain(&c).is_none() && !c.nodes()[0].invalid_reg);
    }

    /// An operator's drain keeps its reason; a DOWN node stays DOWN (an
    /// invalid registration revives nothing) and gets no drain.
    #[test]
    fn an_existing_drain_or_down_is_kept() {
        let mut c = core_plain();
        update(&mut c, NodeUpdateState::Drain, T0);
        register(&mut c, small(), T0 + 1);
        assert_eq!(drain(&c).as_deref(), Some("fan"));
        assert!(c.nodes()[0].invalid_reg);
        // Never answered: DOWN (Not responding); ReturnToService=1 would
        // revive it on a valid registration, but not on this one.
        let mut c = core_plain();
        c.apply(T0 + 60, Command::Schedule);
        assert!(c.nodes()[0].admin.down.is_some());
        register(&mut c, small(), T0 + 61);
        c.apply(
            T0 + 61,
            Command::NodeReachability {
                added: vec![0],
                removed: vec![],
            },
        );
        assert!(c.nodes()[0].admin.down.is_some());
        assert!(drain(&c).is_none());
        register(&mut c, exact(), T0 + 62);
        assert!(c.nodes()[0].admin.down.is_none(), "valid again: revived");
    }

    /// gres.conf problems drain the node, config_overrides or not, and
    /// come first in the reason.
    #[test]
    fn gres_problems_drain_first() {
        let gres = "Name=gpu File=/dev/nvidia0\n";
        let mut c = core("", "Gres=gpu:2", Some(gres), vec![]);
        register(&mut c, exact(), T0);
        assert_eq!(
            drain(&c).as_deref(),
            Some("gres/gpu count reported lower than configured (1 < 2)")
        );
        let mut c = core("", "Gres=gpu:2", Some(gres), vec![]);
        register(&mut c, NodeResources { cpus: 4, ..exact() }, T0);
        assert_eq!(
            drain(&c).as_deref(),
            Some("gres/gpu count reported lower than configured (1 < 2), Low CPUs")
        );
        let mut c = core(
            "SlurmdParameters=config_overrides\n",
            "Gres=gpu:2",
            Some(gres),
            vec![],
        );
        register(&mut c, small(), T0);
        assert_eq!(
            drain(&c).as_deref(),
            Some("gres/gpu count reported lower than configured (1 < 2)")
        );
    }

    /// One GPU device slot: type, index, cores, held.
    type Dev = (Option<String>, u32, Option<Vec<u32>>, bool);

    fn gpu_devices(c: &Core) -> Vec<Dev> {
        c.slots()[0]
            .gres
            .iter()
            .filter(|s| s.name == "gpu")
            .flat_map(|s| match &s.kind {
                GresKind::Devices(d) => d
                    .iter()
                    .map(|d| (s.type_.clone(), d.index, d.cores.clone(), d.used))
                    .collect(),
                GresKind::Count { .. } => vec![],
            })
            .collect()
    }

    /// AutoDetect=nvml: the GPUs the node reports become its slots (by
    /// type, with their cores; extra ones ignored); a GPU a running job
    /// holds stays held across re-registration; fewer than configured
    /// drains with Slurm's GRES reason.
    #[test]
    fn autodetected_gpus_fill_the_slots() {
        let mut c = core("", "Gres=gpu:a100:2", Some("AutoDetect=nvml\n"), vec![]);
        assert!(gpu_devices(&c).is_empty(), "nothing before registration");
        let with = |gpus| NodeResources { gpus, ..exact() };
        register(
            &mut c,
            with(vec![gpu(0, &[0, 1]), gpu(1, &[4, 5]), gpu(2, &[])]),
            T0,
        );
        let a100 = Some("a100".to_string());
        assert_eq!(
            gpu_devices(&c),
            vec![
                (a100.clone(), 0, Some(vec![0, 1]), false),
                (a100.clone(), 1, Some(vec![4, 5]), false)
            ]
        );
        assert!(drain(&c).is_none());
        // A job holds GPU 1 across a controller restart: the recovered core
        // has no GPU slots until the node registers, then GPU 1 is held.
        let mut job = running(5, 0);
        if let Some(a) = job.alloc.as_mut() {
            a.gres = vec![vec![GresAlloc {
                name: "gpu".into(),
                type_: a100.clone(),
                indices: vec![1],
                count: 1,
            }]];
        }
        let mut c = core("", "Gres=gpu:a100:2", Some("AutoDetect=nvml\n"), vec![job]);
        register(&mut c, with(vec![gpu(0, &[0]), gpu(1, &[4])]), T0);
        assert_eq!(
            gpu_devices(&c),
            vec![
                (a100.clone(), 0, Some(vec![0]), false),
                (a100.clone(), 1, Some(vec![4]), true)
            ]
        );
        // One GPU gone: drained, and the held one is kept held.
        register(&mut c, with(vec![gpu(0, &[0])]), T0 + 1);
        assert_eq!(
            drain(&c).as_deref(),
            Some("gres/gpu count reported lower than configured (1 < 2)")
        );
        assert_eq!(
            gpu_devices(&c),
            vec![
                (a100.clone(), 0, Some(vec![0]), false),
                (a100, 1, None, true)
            ]
        );
    }

    /// A node daemon one version older sends no boards and no GPUs: its
    /// registration still decodes.
    #[test]
    fn an_older_peers_resources_decode() {
        #[derive(serde::Serialize)]
        struct Old {
            cpus: u32,
            sockets: u32,
            cores_per_socket: u32,
            threads_per_core: u32,
            real_memory_mb: u64,
        }
        let old = Old {
            cpus: 8,
            sockets: 2,
            cores_per_socket: 4,
            threads_per_core: 1,
            real_memory_mb: 1000,
        };
        let bytes = rmp_serde::to_vec_named(&old).unwrap();
        let new: NodeResources = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(
            new,
            NodeResources {
                boards: 0,
                ..exact()
            }
        );
    }

    /// A typed item takes only GPUs whose type name contains its type.
    #[test]
    fn typed_items_take_matching_gpus() {
        let mut c = core("", "Gres=gpu:h100:1", Some("AutoDetect=nvml\n"), vec![]);
        register(
            &mut c,
            NodeResources {
                gpus: vec![gpu(0, &[])],
                ..exact()
            },
            T0,
        );
        assert!(gpu_devices(&c).is_empty());
        assert_eq!(
            drain(&c).as_deref(),
            Some("gres/gpu count reported lower than configured (0 < 1)")
        );
    }
}
