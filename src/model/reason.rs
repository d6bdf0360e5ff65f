//! Why a job is in the state it is in: Slurm's `Reason` field. Pending jobs
//! say what holds them (`Priority`, `Resources`, `Dependency`, ...); ended
//! ones say why they ended (`NonZeroExitCode`, `TimeLimit`, ...).
//!
//! An enum, not a string, so that the scheduler and the controller compare
//! variants; it prints (and is stored as) exactly Slurm's word, which keeps
//! records written as plain strings by earlier versions readable.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::signal::signal_name;

/// A job's reason, as squeue's `%r`, scontrol's `Reason=` and sacct print it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum JobReason {
    #[default]
    None,
    /// Waiting behind a higher-priority job that is waiting for resources.
    Priority,
    /// First in line, waiting for nodes to free up.
    Resources,
    Dependency,
    DependencyNeverSatisfied,
    /// `--begin` lies in the future.
    BeginTime,
    JobHeldUser,
    JobHeldAdmin,
    /// An array's `%N` throttle is reached.
    JobArrayTaskLimit,
    PartitionDown,
    PartitionInactive,
    /// Ended: the batch script exited non-zero.
    NonZeroExitCode,
    /// Ended: the batch script was killed by this signal.
    RaisedSignal(i32),
    /// Ended: killed at its time limit.
    TimeLimit,
    /// Ended: one of its nodes failed.
    NodeDown,
    /// Ended for a reason the controller could not tell.
    SystemFailure,
    /// Ended: the launch did not reach every node.
    JobLaunchFailure,
    /// Ended: the kernel's OOM killer ended a process of the job.
    OutOfMemory,
    /// Pending, held: a node's Prolog failed and the job was requeued
    /// (Slurm's `WAIT_HELD_USER` with this description, which is what its
    /// squeue and scontrol show; the owner may release it).
    LaunchFailedRequeuedHeld,
    /// Running, its nodes' Prologs still running (`PrologFlags=Alloc`).
    Prolog,
    /// Pending: an association or QOS limit holds it (`AssocGrpCpuLimit`, ...).
    Limit(super::assoc::reason::LimitReason),
    /// `--reservation` names one that has not started yet.
    Reservation,
    /// The reservation the job asked for ended or was deleted.
    ReservationDeleted,
    /// `-L`: not enough of a license is free.
    Licenses,
    /// The nodes it could use are in a MAINT reservation.
    ReqNodeNotAvailMaint,
}

impl JobReason {
    /// Every reason without a parameter, for parsing.
    const PLAIN: [JobReason; 23] = [
        JobReason::None,
        JobReason::Priority,
        JobReason::Resources,
        JobReason::Dependency,
        JobReason::DependencyNeverSatisfied,
        JobReason::BeginTime,
        JobReason::JobHeldUser,
        JobReason::JobHeldAdmin,
        JobReason::JobArrayTaskLimit,
        JobReason::PartitionDown,
        JobReason::PartitionInactive,
        JobReason::NonZeroExitCode,
        JobReason::TimeLimit,
        JobReason::NodeDown,
        JobReason::SystemFailure,
        JobReason::JobLaunchFailure,
        JobReason::OutOfMemory,
        JobReason::LaunchFailedRequeuedHeld,
        JobReason::Prolog,
        JobReason::Reservation,
        JobReason::ReservationDeleted,
        JobReason::Licenses,
        JobReason::ReqNodeNotAvailMaint,
    ];

    /// Slurm's word for a reason without a parameter.
    fn word(self) -> &'static str {
        match self {
            JobReason::None => "None",
            JobReason::Priority => "Priority",
            JobReason::Resources => "Resources",
            JobReason::Dependency => "Dependency",
            JobReason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            JobReason::BeginTime => "BeginTime",
            JobReason::JobHeldUser => "JobHeldUser",
            JobReason::JobHeldAdmin => "JobHeldAdmin",
            JobReason::JobArrayTaskLimit => "JobArrayTaskLimit",
            JobReason::PartitionDown => "PartitionDown",
            JobReason::PartitionInactive => "PartitionInactive",
            JobReason::NonZeroExitCode => "NonZeroExitCode",
            JobReason::RaisedSignal(_) => "RaisedSignal",
            JobReason::TimeLimit => "TimeLimit",
            JobReason::NodeDown => "NodeDown",
            JobReason::SystemFailure => "SystemFailure",
            JobReason::JobLaunchFailure => "JobLaunchFailure",
            JobReason::OutOfMemory => "OutOfMemory",
            JobReason::LaunchFailedRequeuedHeld => "launch failed requeued held",
            JobReason::Prolog => "Prolog",
            JobReason::Limit(r) => r.word(),
            JobReason::Reservation => "Reservation",
            JobReason::ReservationDeleted => "ReservationDeleted",
            JobReason::Licenses => "Licenses",
            JobReason::ReqNodeNotAvailMaint => "ReqNodeNotAvail, Reserved for maintenance",
        }
    }
}

impl fmt::Display for JobReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobReason::RaisedSignal(sig) => write!(f, "RaisedSignal:{sig}({})", signal_name(*sig)),
            other => f.write_str(other.word()),
        }
    }
}

/// A word that is not one of Slurm's reasons canopy uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job reason '{0}'")]
pub struct UnknownReason(pub String);

impl FromStr for JobReason {
    type Err = UnknownReason;
    fn from_str(s: &str) -> Result<JobReason, UnknownReason> {
        if let Some(rest) = s.strip_prefix("RaisedSignal:") {
            let num = rest.split('(').next().unwrap_or_default();
            return num
                .parse()
                .map(JobReason::RaisedSignal)
                .map_err(|_| UnknownReason(s.to_string()));
        }
        if let Ok(r) = s.parse() {
            return Ok(JobReason::Limit(r));
        }
        JobReason::PLAIN
            .into_iter()
            .find(|r| r.word() == s)
            .ok_or_else(|| UnknownReason(s.to_string()))
    }
}

impl Serialize for JobReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for JobReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JobReason, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_slurm_word() {
        let all = JobReason::PLAIN
            .into_iter()
            .chain([JobReason::RaisedSignal(9), JobReason::RaisedSignal(11)]);
        for r in all {
            let word = r.to_string();
            assert_eq!(word.parse::<JobReason>(), Ok(r), "{word}");
            let bytes = rmp_serde::to_vec_named(&r).unwrap();
            // Stored as the plain string earlier versions wrote.
            let as_str: String = rmp_serde::from_slice(&bytes).unwrap();
            assert_eq!(as_str, word);
            assert_eq!(rmp_serde::from_slice::<JobReason>(&bytes).unwrap(), r);
        }
        assert_eq!(
            JobReason::RaisedSignal(9).to_string(),
            "RaisedSignal:9(Killed)"
        );
        assert!("Whatever".parse::<JobReason>().is_err());
    }
}
