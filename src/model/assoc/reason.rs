//! The pending reasons association and QOS limits give, in Slurm 22.05's
//! words (`AssocGrpCpuLimit`, `QOSMaxJobsPerUserLimit`, ...): the scope
//! (association or QOS), the kind of limit, and the TRES it concerns.

use std::fmt;
use std::str::FromStr;

/// Which record's limit holds the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Assoc,
    Qos,
}

/// Which of a record's TRES limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TresLimit {
    Grp,
    MaxPerJob,
    MaxPerNode,
    /// QOS only.
    MaxPerUser,
}

/// The TRES a limit concerns, as Slurm groups them for reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TresKind {
    Cpu,
    Mem,
    Node,
    Gres,
    Billing,
    License,
    Other,
}

impl TresKind {
    pub fn of(name: &str) -> TresKind {
        match name {
            "cpu" => TresKind::Cpu,
            "mem" => TresKind::Mem,
            "node" => TresKind::Node,
            "billing" => TresKind::Billing,
            n if n.starts_with("gres/") => TresKind::Gres,
            n if n.starts_with("license/") => TresKind::License,
            _ => TresKind::Other,
        }
    }
}

/// Why a job waits on an association or QOS limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitReason {
    Tres(Scope, TresLimit, TresKind),
    /// `GrpJobs`.
    GrpJobs(Scope),
    /// An association's `MaxJobs`.
    AssocMaxJobs,
    /// A QOS's `MaxJobsPerUser`.
    QosMaxJobsPerUser,
    GrpSubmit(Scope),
    AssocMaxSubmit,
    QosMaxSubmitPerUser,
    /// `MaxWall` (per job).
    MaxWall(Scope),
    GrpWall(Scope),
    /// `GrpTRESMins` spent (cpu shown as Slurm's `CPUMinutes`).
    GrpTresMins(Scope, TresKind),
}

fn tres_word(scope: Scope, limit: TresLimit, kind: TresKind) -> &'static str {
    use Scope::*;
    use TresKind::*;
    use TresLimit::*;
    match (scope, limit, kind) {
        (Assoc, Grp, Cpu) => "AssocGrpCpuLimit",
        (Assoc, Grp, Mem) => "AssocGrpMemLimit",
        (Assoc, Grp, Node) => "AssocGrpNodeLimit",
        (Assoc, Grp, Gres) => "AssocGrpGRES",
        (Assoc, Grp, Billing) => "AssocGrpBilling",
        (Assoc, Grp, License) => "AssocGrpLicense",
        (Assoc, Grp, Other) => "AssocGrpUnknown",
        (Assoc, MaxPerJob, Cpu) => "AssocMaxCpuPerJobLimit",
        (Assoc, MaxPerJob, Mem) => "AssocMaxMemPerJob",
        (Assoc, MaxPerJob, Node) => "AssocMaxNodePerJobLimit",
        (Assoc, MaxPerJob, Gres) => "AssocMaxGRESPerJob",
        (Assoc, MaxPerJob, Billing) => "AssocMaxBillingPerJob",
        (Assoc, MaxPerJob, License) => "AssocMaxLicensePerJob",
        (Assoc, MaxPerJob, Other) => "AssocMaxUnknownPerJob",
        (Assoc, MaxPerNode, Cpu) => "AssocMaxCpuPerNode",
        (Assoc, MaxPerNode, Mem) => "AssocMaxMemPerNode",
        (Assoc, MaxPerNode, Gres) => "AssocMaxGRESPerNode",
        (Assoc, MaxPerNode, Billing) => "AssocMaxBillingPerNode",
        (Assoc, MaxPerNode, _) => "AssocMaxUnknownPerNode",
        // Associations have no per-user TRES limit; never produced.
        (Assoc, MaxPerUser, _) => "AssocMaxUnknownPerJob",
        (Qos, Grp, Cpu) => "QOSGrpCpuLimit",
        (Qos, Grp, Mem) => "QOSGrpMemLimit",
        (Qos, Grp, Node) => "QOSGrpNodeLimit",
        (Qos, Grp, Gres) => "QOSGrpGRES",
        (Qos, Grp, Billing) => "QOSGrpBilling",
        (Qos, Grp, License) => "QOSGrpLicense",
        (Qos, Grp, Other) => "QOSGrpUnknown",
        (Qos, MaxPerJob, Cpu) => "QOSMaxCpuPerJobLimit",
        (Qos, MaxPerJob, Mem) => "QOSMaxMemoryPerJob",
        (Qos, MaxPerJob, Node) => "QOSMaxNodePerJobLimit",
        (Qos, MaxPerJob, Gres) => "QOSMaxGRESPerJob",
        (Qos, MaxPerJob, Billing) => "QOSMaxBillingPerJob",
        (Qos, MaxPerJob, _) => "QOSMaxUnknownPerJob",
        (Qos, MaxPerNode, Cpu) => "QOSMaxCpuPerNode",
        (Qos, MaxPerNode, Mem) => "QOSMaxMemoryPerNode",
        (Qos, MaxPerNode, Gres) => "QOSMaxGRESPerNode",
        (Qos, MaxPerNode, Billing) => "QOSMaxBillingPerNode",
        (Qos, MaxPerNode, _) => "QOSMaxUnknownPerNode",
        (Qos, MaxPerUser, Cpu) => "QOSMaxCpuPerUserLimit",
        (Qos, MaxPerUser, Mem) => "QOSMaxMemoryPerUser",
        (Qos, MaxPerUser, Node) => "QOSMaxNodePerUserLimit",
        (Qos, MaxPerUser, Gres) => "QOSMaxGRESPerUser",
        (Qos, MaxPerUser, Billing) => "QOSMaxBillingPerUser",
        (Qos, MaxPerUser, _) => "QOSMaxUnknownPerUser",
    }
}

impl LimitReason {
    /// Slurm's word for the reason.
    pub fn word(self) -> &'static str {
        match self {
            LimitReason::Tres(s, l, k) => tres_word(s, l, k),
            LimitReason::GrpJobs(Scope::Assoc) => "AssocGrpJobsLimit",
            LimitReason::GrpJobs(Scope::Qos) => "QOSGrpJobsLimit",
            LimitReason::AssocMaxJobs => "AssocMaxJobsLimit",
            LimitReason::QosMaxJobsPerUser => "QOSMaxJobsPerUserLimit",
            LimitReason::GrpSubmit(Scope::Assoc) => "AssocGrpSubmitJobsLimit",
            LimitReason::GrpSubmit(Scope::Qos) => "QOSGrpSubmitJobsLimit",
            LimitReason::AssocMaxSubmit => "AssocMaxSubmitJobLimit",
            LimitReason::QosMaxSubmitPerUser => "QOSMaxSubmitJobPerUserLimit",
            LimitReason::MaxWall(Scope::Assoc) => "AssocMaxWallDurationPerJobLimit",
            LimitReason::MaxWall(Scope::Qos) => "QOSMaxWallDurationPerJobLimit",
            LimitReason::GrpWall(Scope::Assoc) => "AssocGrpWallLimit",
            LimitReason::GrpWall(Scope::Qos) => "QOSGrpWallLimit",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::Cpu) => "AssocGrpCPUMinutesLimit",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::Mem) => "AssocGrpMemMinutes",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::Node) => "AssocGrpNodeMinutes",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::Gres) => "AssocGrpGRESMinutes",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::Billing) => "AssocGrpBillingMinutes",
            LimitReason::GrpTresMins(Scope::Assoc, TresKind::License) => "AssocGrpLicenseMinutes",
            LimitReason::GrpTresMins(Scope::Assoc, _) => "AssocGrpUnknownMinutes",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::Cpu) => "QOSGrpCPUMinutesLimit",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::Mem) => "QOSGrpMemoryMinutes",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::Node) => "QOSGrpNodeMinutes",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::Gres) => "QOSGrpGRESMinutes",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::Billing) => "QOSGrpBillingMinutes",
            LimitReason::GrpTresMins(Scope::Qos, TresKind::License) => "QOSGrpLicenseMinutes",
            LimitReason::GrpTresMins(Scope::Qos, _) => "QOSGrpUnknownMinutes",
        }
    }

    /// Every reason (for parsing stored words back).
    pub fn all() -> Vec<LimitReason> {
        let scopes = [Scope::Assoc, Scope::Qos];
        let kinds = [
            TresKind::Cpu,
            TresKind::Mem,
            TresKind::Node,
            TresKind::Gres,
            TresKind::Billing,
            TresKind::License,
            TresKind::Other,
        ];
        let limits = [
            TresLimit::Grp,
            TresLimit::MaxPerJob,
            TresLimit::MaxPerNode,
            TresLimit::MaxPerUser,
        ];
        let mut v = vec![
            LimitReason::AssocMaxJobs,
            LimitReason::QosMaxJobsPerUser,
            LimitReason::AssocMaxSubmit,
            LimitReason::QosMaxSubmitPerUser,
        ];
        for s in scopes {
            v.extend([
                LimitReason::GrpJobs(s),
                LimitReason::GrpSubmit(s),
                LimitReason::MaxWall(s),
                LimitReason::GrpWall(s),
            ]);
            for k in kinds {
                v.push(LimitReason::GrpTresMins(s, k));
                for l in limits {
                    if !(s == Scope::Assoc && l == TresLimit::MaxPerUser) {
                        v.push(LimitReason::Tres(s, l, k));
                    }
                }
            }
        }
        v
    }
}

impl fmt::Display for LimitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

impl FromStr for LimitReason {
    type Err = ();
    fn from_str(s: &str) -> Result<LimitReason, ()> {
        LimitReason::all()
            .into_iter()
            .find(|r| r.word() == s)
            .ok_or(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_slurms_and_parse_back() {
        let r = LimitReason::Tres(Scope::Assoc, TresLimit::Grp, TresKind::Cpu);
        assert_eq!(r.to_string(), "AssocGrpCpuLimit");
        assert_eq!(
            LimitReason::GrpJobs(Scope::Assoc).to_string(),
            "AssocGrpJobsLimit"
        );
        assert_eq!(
            LimitReason::QosMaxJobsPerUser.to_string(),
            "QOSMaxJobsPerUserLimit"
        );
        assert_eq!(
            LimitReason::MaxWall(Scope::Assoc).to_string(),
            "AssocMaxWallDurationPerJobLimit"
        );
        // Words that stand for one reason each parse back to it.
        for r in LimitReason::all() {
            let back: LimitReason = r.word().parse().unwrap();
            assert_eq!(back.word(), r.word());
        }
    }
}
