//! Admission: one check that resolves what a job asks for against its
//! partition and the site's configuration, or refuses it with Slurm's words.
//!
//! Used alike by `sbatch`, by the allocations `srun` and `salloc` make (they
//! are submissions too), and by `scontrol update JobId=...`, so a limit a
//! submission cannot break cannot be broken by an update either. What
//! depends on the controller's live state (MaxJobCount, whether the nodes
//! could ever hold the job, dependencies) is checked by the controller core
//! after this.

use crate::config::{hostlist, Config, PartitionConf};
use crate::model::job::JobSubmit;
use crate::model::partition::PartitionState;
use crate::wire::messages::{ErrorCode, ErrorReply};

use super::authz::{self, Action, Caller};

/// A submission resolved against its partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub partition: String,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit_min: Option<u32>,
}

/// A time limit as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeAsk {
    /// Not given: the partition's default (or the job's current limit).
    Default,
    /// `0` or `UNLIMITED`.
    Unlimited,
    Minutes(u32),
}

impl TimeAsk {
    /// From the CLI's encoding: `None` not given, `Some(0)` unlimited.
    pub fn from_minutes(m: Option<u32>) -> TimeAsk {
        match m {
            None => TimeAsk::Default,
            Some(0) => TimeAsk::Unlimited,
            Some(m) => TimeAsk::Minutes(m),
        }
    }
}

/// The partition-bound shape of a job: what the limits apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub time: TimeAsk,
    /// What a `Default` time resolves to before the partition's default:
    /// the job's current limit, on update.
    pub current_limit: Option<Option<u32>>,
    pub nodes: u32,
}

fn refused(code: ErrorCode, message: &str) -> ErrorReply {
    ErrorReply {
        code,
        message: message.to_string(),
    }
}

/// The partition a job without `-p` goes to: the `Default=YES` one, else
/// the first.
pub fn default_partition(conf: &Config) -> Option<&PartitionConf> {
    conf.default_partition().or_else(|| conf.partitions.first())
}

/// Check `shape` against `part`; the resolved time limit on success.
/// `new_to_partition`: the job is entering it (submission, or an update
/// that moves it), so a DRAIN or INACTIVE partition refuses it.
/// `operator_exempt`: an operator's update may exceed MaxTime.
pub fn check_partition(
    part: &PartitionConf,
    shape: Shape,
    new_to_partition: bool,
    operator_exempt: bool,
) -> Result<Option<u32>, ErrorReply> {
    if new_to_partition && matches!(part.state, PartitionState::Drain | PartitionState::Inactive) {
        return Err(refused(
            ErrorCode::InvalidPartition,
            "Partition in DRAIN or INACTIVE state, no new jobs accepted",
        ));
    }
    let limit = match shape.time {
        TimeAsk::Unlimited => None,
        TimeAsk::Minutes(m) => Some(m),
        TimeAsk::Default => shape
            .current_limit
            .unwrap_or(part.default_time_min.or(part.max_time_min)),
    };
    let over = match (limit, part.max_time_min) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(l), Some(max)) => l > max,
    };
    if over && !operator_exempt {
        return Err(refused(
            ErrorCode::InvalidTimeLimit,
            "Requested time limit is invalid (missing or exceeds some limit)",
        ));
    }
    if shape.nodes as usize > part.nodes.len() {
        return Err(refused(
            ErrorCode::NodeConfigUnavailable,
            "Requested node configuration is not available",
        ));
    }
    if part.max_nodes.is_some_and(|max| shape.nodes > max) || shape.nodes < part.min_nodes {
        return Err(refused(
            ErrorCode::InvalidNodeCount,
            "Node count specification invalid",
        ));
    }
    Ok(limit)
}

/// Admit a submission as far as policy goes: who may submit it, what a
/// user may not ask for, Slurm's normal forms of its fields, reservations
/// and licenses, and its partition's limits. `s` is normalised in place.
/// GRES asked for must be ones the cluster has (`GresTypes`), and the
/// per-socket GPU count needs a socket count, as Slurm's controller says.
pub fn check_gres(
    r: &crate::model::tres::ResourceRequest,
    conf: &Config,
) -> Result<(), ErrorReply> {
    let invalid = || {
        refused(
            ErrorCode::InvalidRequest,
            "Invalid generic resource (gres) specification",
        )
    };
    let names = r
        .gres
        .iter()
        .map(|g| g.name.as_str())
        .chain(r.wants_gpus().then_some("gpu"));
    for name in names {
        if !conf.gres_types.iter().any(|t| t == name) {
            return Err(invalid());
        }
    }
    if r.gpus_per_socket.is_some() && r.sockets_per_node.is_none() {
        return Err(refused(
            ErrorCode::InvalidRequest,
            "--gpus-per-socket option requires --sockets-per-node specification",
        ));
    }
    if r.cpus_per_gpu.is_some() && !r.wants_gpus() {
        return Err(invalid());
    }
    Ok(())
}

pub fn admit(s: &mut JobSubmit, caller: Caller, conf: &Config) -> Result<Admitted, ErrorReply> {
    // The credential, not the request body, says who is submitting (an
    // operator may submit on behalf of another uid).
    authz::check(caller, Action::SubmitAs { uid: s.uid }, None)
        .map_err(|d| refused(ErrorCode::PermissionDenied, d.0))?;
    // Bounded before anything else looks at them: every string is kept
    // for the job's life and shown to every user's squeue.
    super::limits::check_submit(s, conf.max_script_size)?;
    // Only operators may raise a job's priority; a user's `--priority` is
    // ignored and a negative `--nice` refused, as in Slurm.
    if !caller.operator {
        s.priority = None;
        if s.nice < 0 {
            return Err(refused(ErrorCode::InvalidRequest, "Invalid --nice value"));
        }
    }
    // Slurm stores accounts lower-cased, and shows `a,b` constraints as `a&b`.
    let non_empty = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    s.account = non_empty(s.account.take()).map(|a| a.to_lowercase());
    s.constraint = non_empty(s.constraint.take()).map(|c| crate::sched::features::normalise(&c));
    // `-w`/`-x` are kept in Slurm's form: sorted and compressed.
    for list in [&mut s.req_nodes, &mut s.exc_nodes].into_iter().flatten() {
        match hostlist::expand(list) {
            Ok(names) => *list = hostlist::compress_sorted(&names),
            Err(_) => {
                return Err(refused(
                    ErrorCode::InvalidNodeName,
                    "Invalid node name specified",
                ))
            }
        }
    }
    check_gres(&s.resources, conf)?;
    // The reservation is the core's to check (it knows them). Licenses:
    // each configured, and never more than exist (the job could never run).
    s.reservation = non_empty(s.reservation.take());
    s.licenses = non_empty(s.licenses.take());
    if let Some(asked) = &s.licenses {
        let fits = crate::model::reservation::parse_licenses(asked).is_ok_and(|l| {
            l.iter().all(|(name, n)| {
                conf.license_counts
                    .iter()
                    .any(|(have, total)| have == name && n <= total)
            })
        });
        if !fits {
            return Err(refused(
                ErrorCode::InvalidRequest,
                "Invalid license specification",
            ));
        }
    }
    let part = match &s.partition {
        Some(name) => conf
            .partitions
            .iter()
            .find(|p| &p.name == name)
            .ok_or_else(|| {
                refused(
                    ErrorCode::InvalidPartition,
                    "Invalid partition name specified",
                )
            })?,
        None => default_partition(conf).ok_or_else(|| {
            refused(
                ErrorCode::NoDefaultPartition,
                "No partition specified or system default partition",
            )
        })?,
    };
    // A partition that takes no submissions hands them to its Alternate.
    let part = super::partition::with_alternate(conf, part).unwrap_or(part);
    super::partition::check_access(part, s, caller)?;
    let shape = Shape {
        time: TimeAsk::from_minutes(s.time_limit_min),
        current_limit: None,
        nodes: s.min_nodes.unwrap_or(1),
    };
    let time_limit_min = check_partition(part, shape, true, false)?;
    super::partition::apply_sharing(part, s);
    super::partition::apply_memory(part, conf, s)?;
    // Kept with the job: placement reads the partition's settings by it.
    s.partition = Some(part.name.clone());
    Ok(Admitted {
        partition: part.name.clone(),
        time_limit_min,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(max_time: Option<u32>, default_time: Option<u32>) -> PartitionConf {
        PartitionConf {
            name: "debug".into(),
            nodes: vec!["n1".into(), "n2".into()],
            default: true,
            max_time_min: max_time,
            default_time_min: default_time,
            max_nodes: Some(2),
            min_nodes: 0,
            state: PartitionState::Up,
            preempt: Default::default(),
            access: Default::default(),
            opts: Default::default(),
            dynamic_join: Default::default(),
        }
    }

    fn shape(t: Option<u32>, nodes: u32) -> Shape {
        Shape {
            time: TimeAsk::from_minutes(t),
            current_limit: None,
            nodes,
        }
    }

    fn check(p: &PartitionConf, s: Shape) -> Result<Option<u32>, ErrorCode> {
        check_partition(p, s, true, false).map_err(|e| e.code)
    }

    #[test]
    fn time_limits_resolve_and_are_enforced() {
        let p = part(Some(60), Some(10));
        assert_eq!(check(&p, shape(None, 1)), Ok(Some(10)));
        assert_eq!(check(&p, shape(Some(30), 1)), Ok(Some(30)));
        assert_eq!(
            check(&p, shape(Some(61), 1)),
            Err(ErrorCode::InvalidTimeLimit)
        );
        // Asking for no limit on a limited partition exceeds it.
        assert_eq!(
            check(&p, shape(Some(0), 1)),
            Err(ErrorCode::InvalidTimeLimit)
        );
        let open = part(None, None);
        assert_eq!(check(&open, shape(None, 1)), Ok(None));
        assert_eq!(check(&open, shape(Some(0), 1)), Ok(None));
        assert_eq!(check(&part(Some(60), None), shape(None, 1)), Ok(Some(60)));
        // An operator's update may exceed MaxTime.
        assert_eq!(
            check_partition(&p, shape(Some(600), 1), false, true),
            Ok(Some(600))
        );
    }

    #[test]
    fn an_update_keeps_the_current_limit_unless_asked() {
        let p = part(Some(60), Some(10));
        let keep = Shape {
            time: TimeAsk::Default,
            current_limit: Some(Some(45)),
            nodes: 1,
        };
        assert_eq!(check(&p, keep), Ok(Some(45)));
        // Moving an unlimited job into a limited partition breaks its limit.
        let unlimited = Shape {
            current_limit: Some(None),
            ..keep
        };
        assert_eq!(check(&p, unlimited), Err(ErrorCode::InvalidTimeLimit));
    }

    #[test]
    fn node_counts_and_partition_states_are_checked() {
        let mut p = part(None, None);
        assert_eq!(
            check(&p, shape(None, 3)),
            Err(ErrorCode::NodeConfigUnavailable)
        );
        assert!(check(&p, shape(None, 2)).is_ok());
        p.min_nodes = 2;
        assert_eq!(check(&p, shape(None, 1)), Err(ErrorCode::InvalidNodeCount));
        p.min_nodes = 0;
        p.max_nodes = Some(1);
        assert_eq!(check(&p, shape(None, 2)), Err(ErrorCode::InvalidNodeCount));
        for (state, refused) in [
            (PartitionState::Up, false),
            (PartitionState::Down, false),
            (PartitionState::Drain, true),
            (PartitionState::Inactive, true),
        ] {
            p.state = state;
            assert_eq!(
                check(&p, shape(None, 1)) == Err(ErrorCode::InvalidPartition),
                refused,
                "{state:?}"
            );
            // A job already in the partition is not refused for its state.
            assert!(check_partition(&p, shape(None, 1), false, false).is_ok());
        }
    }
}
