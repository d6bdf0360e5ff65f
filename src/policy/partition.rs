//! A partition's own rules for the jobs that enter it, beyond its limits
//! (those are `admission::check_partition`'s): who may use it (`ReqResv`,
//! `RootOnly`, `AllowGroups`, in slurmctld's `_part_access_check` order),
//! where a job goes when it does not take submissions (`Alternate`), and
//! the memory and GPU defaults and limits a job gets there (slurmctld's
//! `_valid_pn_min_mem` and job defaults), applied to the request in place
//! so `scontrol show job` shows them and the scheduler places by them. Also
//! the whole-node forms of sharing (`OverSubscribe=EXCLUSIVE`,
//! `ExclusiveUser`). Pure: the caller resolves the user's groups.

use crate::config::{Config, PartitionConf};
use crate::model::job::{Exclusive, JobSubmit};
use crate::model::part_opts::{MemPer, OverSubscribe};
use crate::model::partition::PartitionState;
use crate::wire::messages::{ErrorCode, ErrorReply};

use super::authz::Caller;

fn refused(code: ErrorCode, message: &str) -> ErrorReply {
    ErrorReply {
        code,
        message: message.to_string(),
    }
}

/// Slurm's ESLURM_ACCESS_DENIED.
pub const ACCESS_DENIED: &str = "Access/permission denied";
/// Slurm's ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP.
pub const GROUP_DENIED: &str = "User's group not permitted to use this partition";
/// Slurm's ESLURM_INVALID_TASK_MEMORY.
pub const TASK_MEMORY: &str = "Memory required by task is not available";
/// Slurm's ESLURM_PARTITION_NOT_AVAIL.
pub const NOT_AVAIL: &str = "Required partition not available (inactive or drain)";

/// Whether a job of `s` may run in `part` as far as its access settings
/// go. `caller` is who submits (RootOnly looks at them, as slurmctld looks
/// at the submitting uid); AllowGroups looks at the job's user and the
/// groups resolved for them (`s.groups`), root passing always.
pub fn check_access(part: &PartitionConf, s: &JobSubmit, caller: Caller) -> Result<(), ErrorReply> {
    let o = &part.opts;
    if o.req_resv && s.reservation.as_deref().is_none_or(str::is_empty) {
        return Err(refused(ErrorCode::PermissionDenied, ACCESS_DENIED));
    }
    if o.root_only && !(caller.uid == 0 || caller.operator) {
        return Err(refused(ErrorCode::PermissionDenied, ACCESS_DENIED));
    }
    if !group_allowed(part, s) {
        return Err(refused(ErrorCode::PermissionDenied, GROUP_DENIED));
    }
    Ok(())
}

/// AllowGroups: the job's user is root, or one of their groups (primary
/// or supplementary, by name) is listed.
pub fn group_allowed(part: &PartitionConf, s: &JobSubmit) -> bool {
    match &part.opts.allow_groups {
        None => true,
        Some(allowed) => {
            s.uid == 0
                || allowed
                    .iter()
                    .any(|g| s.groups.iter().any(|h| h == g) || *g == s.group)
        }
    }
}

/// The partition a submission to `part` lands in: `part` itself, or, when
/// it takes no submissions (DRAIN, INACTIVE), its `Alternate` chain's
/// first that does. `None` when `part` takes none and no alternate does.
pub fn with_alternate<'a>(conf: &'a Config, part: &'a PartitionConf) -> Option<&'a PartitionConf> {
    let takes =
        |p: &PartitionConf| !matches!(p.state, PartitionState::Drain | PartitionState::Inactive);
    let mut p = part;
    // Each partition once: a cycle of alternates ends the search.
    for _ in 0..=conf.partitions.len() {
        if takes(p) {
            return Some(p);
        }
        let alt = p.opts.alternate.as_deref()?;
        p = conf.partitions.iter().find(|q| q.name == alt)?;
    }
    None
}

/// CPUs one node of the job holds at least, as slurmctld estimates it for
/// comparing per-CPU with per-node memory.
fn cpus_per_node(s: &JobSubmit) -> u64 {
    let cpt = u64::from(s.cpus_per_task.unwrap_or(1).max(1));
    let nodes = u64::from(s.min_nodes.unwrap_or(1).max(1));
    let tasks = match (s.ntasks_per_node, s.ntasks) {
        (Some(n), _) => u64::from(n.max(1)),
        (None, Some(n)) => u64::from(n.max(1)).div_ceil(nodes),
        (None, None) => 1,
    };
    cpt * tasks
}

/// Apply `part`'s (else slurm.conf's) memory and GPU defaults to a job
/// that asked for none, then hold it to the maximum: a per-CPU request
/// over `MaxMemPerCPU` gets more CPUs per task and less memory per CPU (as
/// slurmctld does), any other excess is refused.
pub fn apply_memory(
    part: &PartitionConf,
    conf: &Config,
    s: &mut JobSubmit,
) -> Result<(), ErrorReply> {
    let eff = part.opts.mem.over(&conf.mem);
    let r = &mut s.resources;
    if r.wants_gpus() {
        if r.cpus_per_gpu.is_none() && s.cpus_per_task.is_none() {
            r.cpus_per_gpu = eff.def_cpu_per_gpu;
        }
        if s.mem_per_node_mb.is_none() && s.mem_per_cpu_mb.is_none() && r.mem_per_gpu_mb.is_none() {
            r.mem_per_gpu_mb = eff.def_mem_per_gpu;
        }
    }
    if s.mem_per_node_mb.is_none() && s.mem_per_cpu_mb.is_none() && r.mem_per_gpu_mb.is_none() {
        match eff.def_mem {
            Some(MemPer::Cpu(mb)) => s.mem_per_cpu_mb = Some(mb),
            Some(MemPer::Node(mb)) => s.mem_per_node_mb = Some(mb),
            None => {}
        }
    }
    let Some(max) = eff.max_mem else {
        return Ok(());
    };
    let too_much = || refused(ErrorCode::InvalidRequest, TASK_MEMORY);
    match (s.mem_per_node_mb, s.mem_per_cpu_mb, max) {
        // `--mem=0` (all of each node) is within any limit.
        (Some(0), _, _) => Ok(()),
        (Some(job), _, MemPer::Node(sys)) => {
            if job > sys {
                Err(too_much())
            } else {
                Ok(())
            }
        }
        (Some(job), _, MemPer::Cpu(sys)) => {
            if job > sys.saturating_mul(cpus_per_node(s)) {
                Err(too_much())
            } else {
                Ok(())
            }
        }
        (None, Some(job), MemPer::Cpu(sys)) if job > sys => {
            // More CPUs per task, each with its share of the memory.
            let ratio = job.div_ceil(sys);
            let ratio32 = u32::try_from(ratio).map_err(|_| too_much())?;
            let cpt = s.cpus_per_task.unwrap_or(1).max(1);
            s.cpus_per_task = Some(cpt.checked_mul(ratio32).ok_or_else(too_much)?);
            s.mem_per_cpu_mb = Some(job.div_ceil(ratio));
            Ok(())
        }
        (None, Some(job), MemPer::Node(sys)) => {
            if job.saturating_mul(cpus_per_node(s)) > sys {
                Err(too_much())
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// Whole nodes where the partition says so: `OverSubscribe=EXCLUSIVE`
/// gives every job its nodes, `ExclusiveUser=YES` gives them to one user
/// at a time (canopy gives `--exclusive=user` jobs whole nodes).
pub fn apply_sharing(part: &PartitionConf, s: &mut JobSubmit) {
    if part.opts.oversubscribe == OverSubscribe::Exclusive {
        s.exclusive = Some(Exclusive::Node);
    } else if part.opts.exclusive_user && s.exclusive.is_none() {
        s.exclusive = Some(Exclusive::User);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::part_opts::MemDefaults;

    fn conf(text: &str) -> Config {
        let base = "ClusterName=c\nSlurmctldHost=h\nNodeName=n[1-4] CPUs=8 RealMemory=8000\n";
        Config::parse_str_with_gres(
            &format!("{base}{text}"),
            std::path::Path::new("/x/slurm.conf"),
            None,
        )
        .unwrap()
    }

    const USER: Caller = Caller {
        uid: 1000,
        operator: false,
    };

    fn job() -> JobSubmit {
        JobSubmit {
            uid: 1000,
            gid: 1000,
            group: "alice".into(),
            groups: vec!["alice".into(), "chem".into()],
            ..Default::default()
        }
    }

    #[test]
    fn access_is_checked_in_slurms_order_with_its_words() {
        let c = conf(
            "PartitionName=p Nodes=ALL ReqResv=YES RootOnly=YES AllowGroups=bio\n\
             PartitionName=g Nodes=ALL AllowGroups=bio,chem\n\
             PartitionName=o Nodes=ALL AllowGroups=bio\n",
        );
        let (p, g, o) = (&c.partitions[0], &c.partitions[1], &c.partitions[2]);
        let e = check_access(p, &job(), USER).unwrap_err();
        assert_eq!(e.message, ACCESS_DENIED);
        let mut with_resv = job();
        with_resv.reservation = Some("r".into());
        assert_eq!(
            check_access(p, &with_resv, USER).unwrap_err().message,
            ACCESS_DENIED
        );
        // Root passes RootOnly, and then AllowGroups (its uid passes).
        let mut as_root = with_resv.clone();
        as_root.uid = 0;
        assert!(check_access(p, &as_root, Caller::ROOT).is_ok());
        // An operator submitting for alice passes RootOnly, not her groups.
        assert_eq!(
            check_access(p, &with_resv, Caller::ROOT)
                .unwrap_err()
                .message,
            GROUP_DENIED
        );
        // A supplementary group counts; so does the primary one.
        assert!(check_access(g, &job(), USER).is_ok());
        assert_eq!(
            check_access(o, &job(), USER).unwrap_err().message,
            GROUP_DENIED
        );
        let mut primary = job();
        primary.groups.clear();
        primary.group = "bio".into();
        assert!(check_access(o, &primary, USER).is_ok());
    }

    #[test]
    fn a_draining_partition_sends_jobs_to_its_alternate() {
        let c = conf(
            "PartitionName=a Nodes=ALL State=DRAIN Alternate=b\n\
             PartitionName=b Nodes=ALL State=INACTIVE Alternate=c\n\
             PartitionName=c Nodes=ALL\n\
             PartitionName=x Nodes=ALL State=DRAIN Alternate=y\n\
             PartitionName=y Nodes=ALL State=DRAIN Alternate=x\n\
             PartitionName=z Nodes=ALL State=DOWN Alternate=c\n",
        );
        let p = |n: &str| c.partitions.iter().find(|p| p.name == n).unwrap();
        assert_eq!(
            with_alternate(&c, p("a")).map(|p| p.name.as_str()),
            Some("c")
        );
        assert_eq!(with_alternate(&c, p("x")).map(|p| p.name.as_str()), None);
        // DOWN still takes submissions (they wait).
        assert_eq!(
            with_alternate(&c, p("z")).map(|p| p.name.as_str()),
            Some("z")
        );
    }

    #[test]
    fn memory_defaults_come_from_the_partition_else_the_cluster() {
        let c = conf(
            "DefMemPerCPU=100\n\
             PartitionName=own Nodes=ALL DefMemPerNode=700\n\
             PartitionName=plain Nodes=ALL\n",
        );
        let mut s = job();
        apply_memory(&c.partitions[0], &c, &mut s).unwrap();
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (Some(700), None));
        let mut s = job();
        apply_memory(&c.partitions[1], &c, &mut s).unwrap();
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (None, Some(100)));
        // What a job asks for is kept.
        let mut s = job();
        s.mem_per_node_mb = Some(50);
        apply_memory(&c.partitions[1], &c, &mut s).unwrap();
        assert_eq!((s.mem_per_node_mb, s.mem_per_cpu_mb), (Some(50), None));
    }

    #[test]
    fn max_mem_per_cpu_raises_cpus_and_other_excess_is_refused() {
        let c = conf(
            "PartitionName=cpu Nodes=ALL MaxMemPerCPU=1000\n\
             PartitionName=node Nodes=ALL MaxMemPerNode=2000\n",
        );
        let (cpu, node) = (&c.partitions[0], &c.partitions[1]);
        let mut s = job();
        s.mem_per_cpu_mb = Some(2500);
        s.cpus_per_task = Some(2);
        apply_memory(cpu, &c, &mut s).unwrap();
        assert_eq!((s.cpus_per_task, s.mem_per_cpu_mb), (Some(6), Some(834)));
        // Per node against per CPU: the node's share of CPUs decides.
        let mut s = job();
        s.mem_per_node_mb = Some(4000);
        s.ntasks = Some(4);
        assert!(apply_memory(cpu, &c, &mut s).is_ok());
        s.ntasks = Some(3);
        assert_eq!(
            apply_memory(cpu, &c, &mut s).unwrap_err().message,
            TASK_MEMORY
        );
        let mut s = job();
        s.mem_per_node_mb = Some(2001);
        assert_eq!(
            apply_memory(node, &c, &mut s).unwrap_err().message,
            TASK_MEMORY
        );
        s.mem_per_node_mb = Some(0);
        assert!(apply_memory(node, &c, &mut s).is_ok());
        let mut s = job();
        s.mem_per_cpu_mb = Some(1000);
        s.ntasks = Some(3);
        assert_eq!(
            apply_memory(node, &c, &mut s).unwrap_err().message,
            TASK_MEMORY
        );
        s.ntasks = Some(2);
        assert!(apply_memory(node, &c, &mut s).is_ok());
    }

    #[test]
    fn gpu_jobs_get_the_gpu_defaults() {
        let mut c = conf("GresTypes=gpu\nPartitionName=p Nodes=ALL\n");
        c.mem = MemDefaults {
            def_cpu_per_gpu: Some(4),
            def_mem_per_gpu: Some(2048),
            def_mem: Some(MemPer::Cpu(10)),
            max_mem: None,
        };
        let mut s = job();
        s.resources.gpus_per_node = Some(crate::model::tres::GresRequest {
            name: "gpu".into(),
            type_: None,
            count: 1,
        });
        apply_memory(&c.partitions[0], &c, &mut s).unwrap();
        assert_eq!(s.resources.cpus_per_gpu, Some(4));
        assert_eq!(s.resources.mem_per_gpu_mb, Some(2048));
        assert_eq!(s.mem_per_cpu_mb, None, "DefMemPerGPU came first");
        // A job without GPUs gets neither.
        let mut s = job();
        apply_memory(&c.partitions[0], &c, &mut s).unwrap();
        assert_eq!(s.resources.cpus_per_gpu, None);
        assert_eq!(s.mem_per_cpu_mb, Some(10));
    }

    #[test]
    fn exclusive_partitions_give_whole_nodes() {
        let c = conf(
            "PartitionName=x Nodes=ALL OverSubscribe=EXCLUSIVE\n\
             PartitionName=u Nodes=ALL ExclusiveUser=YES\n\
             PartitionName=n Nodes=ALL\n",
        );
        let mut s = job();
        apply_sharing(&c.partitions[0], &mut s);
        assert_eq!(s.exclusive, Some(Exclusive::Node));
        let mut s = job();
        apply_sharing(&c.partitions[1], &mut s);
        assert_eq!(s.exclusive, Some(Exclusive::User));
        let mut s = job();
        apply_sharing(&c.partitions[2], &mut s);
        assert_eq!(s.exclusive, None);
    }
}
