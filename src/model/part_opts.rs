//! A partition's sharing, memory, visibility and access settings (the
//! PartitionName attributes beyond its limits and state): what they are and
//! how Slurm prints them. The checks they drive live in `policy::partition`,
//! the placement they shape in `sched`.

use serde::{Deserialize, Serialize};

/// The default count of jobs that may share a resource under `YES` or
/// `FORCE` without `:N` (slurmctld's).
pub const DEFAULT_SHARE: u16 = 4;
/// The largest `:N` (Slurm keeps it in 15 bits beside the FORCE flag).
pub const MAX_SHARE: u16 = 0x7fff;

/// `OverSubscribe=` (or the old `Shared=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OverSubscribe {
    /// Jobs never share cores; `--oversubscribe` is ignored (the default).
    #[default]
    No,
    /// Every job gets whole nodes.
    Exclusive,
    /// Jobs that ask `--oversubscribe` share each core with up to N jobs.
    Yes(u16),
    /// Every job shares each core with up to N jobs.
    Force(u16),
}

impl OverSubscribe {
    /// Read `NO`, `EXCLUSIVE`, `YES[:N]`, `FORCE[:N]` (any case).
    pub fn parse(text: &str) -> Result<OverSubscribe, String> {
        let up = text.trim().to_ascii_uppercase();
        let (word, given) = match up.split_once(':') {
            Some((w, n)) => (w, Some(n)),
            None => (up.as_str(), None),
        };
        let count = || -> Result<u16, String> {
            match given {
                None => Ok(DEFAULT_SHARE),
                Some(n) => n
                    .parse::<u16>()
                    .ok()
                    .filter(|n| (1..=MAX_SHARE).contains(n))
                    .ok_or_else(|| format!("a job count from 1 to {MAX_SHARE} after ':'")),
            }
        };
        match word {
            "NO" if given.is_none() => Ok(OverSubscribe::No),
            "EXCLUSIVE" if given.is_none() => Ok(OverSubscribe::Exclusive),
            "YES" => Ok(OverSubscribe::Yes(count()?)),
            "FORCE" => Ok(OverSubscribe::Force(count()?)),
            _ => Err("NO, EXCLUSIVE, YES[:N] or FORCE[:N]".to_string()),
        }
    }

    /// As `scontrol show partition` and sinfo's `%h` print it.
    pub fn name(self) -> String {
        match self {
            OverSubscribe::No => "NO".to_string(),
            OverSubscribe::Exclusive => "EXCLUSIVE".to_string(),
            OverSubscribe::Yes(n) => format!("YES:{n}"),
            OverSubscribe::Force(n) => format!("FORCE:{n}"),
        }
    }

    /// How many jobs may hold one CPU at once for a job that did
    /// (`asked`) or did not ask `--oversubscribe`: 1 means no sharing.
    pub fn share_limit(self, asked: bool) -> u16 {
        match self {
            OverSubscribe::No | OverSubscribe::Exclusive => 1,
            OverSubscribe::Yes(n) if asked => n,
            OverSubscribe::Yes(_) => 1,
            OverSubscribe::Force(n) => n,
        }
    }
}

/// A memory amount per CPU or per node (`DefMemPerCPU`/`DefMemPerNode`,
/// `MaxMemPerCPU`/`MaxMemPerNode`), in MiB. Slurm keeps one of each pair:
/// the later key replaces the earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemPer {
    Cpu(u64),
    Node(u64),
}

/// `scontrol show partition`'s `DefMemPer...=` or `MaxMemPer...=` word
/// (`prefix` is `Def` or `Max`): `UNLIMITED` when not set, as Slurm prints 0.
pub fn mem_per_text(prefix: &str, m: Option<MemPer>) -> String {
    match m {
        Some(MemPer::Cpu(mb)) => format!("{prefix}MemPerCPU={mb}"),
        Some(MemPer::Node(mb)) => format!("{prefix}MemPerNode={mb}"),
        None => format!("{prefix}MemPerNode=UNLIMITED"),
    }
}

/// The memory and GPU defaults that apply to jobs: slurm.conf's global
/// keys, or a partition's own (which win over them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemDefaults {
    /// `DefMemPerCPU` / `DefMemPerNode`.
    pub def_mem: Option<MemPer>,
    /// `MaxMemPerCPU` / `MaxMemPerNode`.
    pub max_mem: Option<MemPer>,
    /// `DefCpuPerGPU`.
    pub def_cpu_per_gpu: Option<u32>,
    /// `DefMemPerGPU`, MiB.
    pub def_mem_per_gpu: Option<u64>,
}

impl MemDefaults {
    /// Each value of `self` (a partition's), else `global`'s.
    pub fn over(&self, global: &MemDefaults) -> MemDefaults {
        MemDefaults {
            def_mem: self.def_mem.or(global.def_mem),
            max_mem: self.max_mem.or(global.max_mem),
            def_cpu_per_gpu: self.def_cpu_per_gpu.or(global.def_cpu_per_gpu),
            def_mem_per_gpu: self.def_mem_per_gpu.or(global.def_mem_per_gpu),
        }
    }

    /// `JobDefaults=` of `scontrol show partition`.
    pub fn job_defaults_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.def_cpu_per_gpu {
            parts.push(format!("DefCpuPerGPU={n}"));
        }
        if let Some(mb) = self.def_mem_per_gpu {
            parts.push(format!("DefMemPerGPU={mb}"));
        }
        if parts.is_empty() {
            "(null)".to_string()
        } else {
            parts.join(",")
        }
    }
}

/// A partition's settings beyond its limits, state, access lists and
/// preemption. Each default is Slurm's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartOpts {
    /// `Hidden=YES`: left out of sinfo, squeue and `scontrol show
    /// partition` for users unless they pass `-a`.
    pub hidden: bool,
    /// `AllowGroups`: the groups whose members may use it; `None` = ALL.
    pub allow_groups: Option<Vec<String>>,
    pub oversubscribe: OverSubscribe,
    /// The partition's own memory and GPU defaults and limits.
    pub mem: MemDefaults,
    /// `MaxCPUsPerNode`: CPUs of each node its jobs may hold together.
    pub max_cpus_per_node: Option<u32>,
    /// `ExclusiveUser=YES`: a node runs jobs of one user at a time.
    pub exclusive_user: bool,
    /// `LLN=YES`: jobs go to the least loaded nodes first.
    pub lln: bool,
    /// `RootOnly=YES`: only root (and SlurmUser) may submit.
    pub root_only: bool,
    /// `ReqResv=YES`: jobs must name a reservation.
    pub req_resv: bool,
    /// `Alternate`: where jobs submitted while it is DRAIN or INACTIVE go.
    pub alternate: Option<String>,
}

/// `YES`/`NO` as scontrol prints flags.
pub fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversubscribe_reads_and_prints_slurms_forms() {
        for (text, want, shown) in [
            ("NO", OverSubscribe::No, "NO"),
            ("exclusive", OverSubscribe::Exclusive, "EXCLUSIVE"),
            ("YES", OverSubscribe::Yes(4), "YES:4"),
            ("yes:2", OverSubscribe::Yes(2), "YES:2"),
            ("FORCE", OverSubscribe::Force(4), "FORCE:4"),
            ("Force:1", OverSubscribe::Force(1), "FORCE:1"),
        ] {
            assert_eq!(OverSubscribe::parse(text), Ok(want), "{text}");
            assert_eq!(want.name(), shown);
        }
        for bad in ["", "maybe", "NO:2", "YES:0", "FORCE:x", "YES:40000"] {
            assert!(OverSubscribe::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_yes_with_the_flag_and_force_share() {
        assert_eq!(OverSubscribe::No.share_limit(true), 1);
        assert_eq!(OverSubscribe::Exclusive.share_limit(true), 1);
        assert_eq!(OverSubscribe::Yes(3).share_limit(false), 1);
        assert_eq!(OverSubscribe::Yes(3).share_limit(true), 3);
        assert_eq!(OverSubscribe::Force(2).share_limit(false), 2);
    }

    #[test]
    fn partition_values_win_over_global_ones() {
        let global = MemDefaults {
            def_mem: Some(MemPer::Cpu(100)),
            max_mem: Some(MemPer::Node(4000)),
            def_cpu_per_gpu: Some(2),
            def_mem_per_gpu: None,
        };
        let part = MemDefaults {
            def_mem: Some(MemPer::Node(500)),
            def_mem_per_gpu: Some(1024),
            ..Default::default()
        };
        let eff = part.over(&global);
        assert_eq!(eff.def_mem, Some(MemPer::Node(500)));
        assert_eq!(eff.max_mem, Some(MemPer::Node(4000)));
        assert_eq!(eff.def_cpu_per_gpu, Some(2));
        assert_eq!(eff.def_mem_per_gpu, Some(1024));
        assert_eq!(eff.job_defaults_text(), "DefCpuPerGPU=2,DefMemPerGPU=1024");
        assert_eq!(MemDefaults::default().job_defaults_text(), "(null)");
        assert_eq!(mem_per_text("Def", None), "DefMemPerNode=UNLIMITED");
        assert_eq!(
            mem_per_text("Max", Some(MemPer::Cpu(2048))),
            "MaxMemPerCPU=2048"
        );
    }
}
