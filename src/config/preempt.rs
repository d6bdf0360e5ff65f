//! Preemption settings: `PreemptType`, `PreemptMode` (global and per
//! partition), `PreemptExemptTime`, `PreemptParameters`, and a partition's
//! `PriorityTier` and `GraceTime`, read with slurmctld's grammar and
//! refusals (`read_config.c`).

use serde::{Deserialize, Serialize};

pub use crate::model::partition::{PartPreempt, PreemptAction, PreemptMode};

use super::build::{bad_value, digits, Builder};
use super::parse::{Item, Loc};
use super::types::ConfigError;

/// `PreemptType`: which jobs may displace which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreemptKind {
    /// `preempt/none` (Slurm's default): no preemption.
    #[default]
    None,
    /// `preempt/partition_prio`: a job in a partition of higher
    /// `PriorityTier` preempts jobs of lower tiers on shared nodes.
    PartitionPrio,
    /// `preempt/qos`: by the QOS `Preempt=` lists.
    Qos,
}

impl PreemptKind {
    pub fn name(self) -> &'static str {
        match self {
            PreemptKind::None => "preempt/none",
            PreemptKind::PartitionPrio => "preempt/partition_prio",
            PreemptKind::Qos => "preempt/qos",
        }
    }
}

/// Parse a `PreemptMode` value as slurmctld does: comma-separated words,
/// case-insensitive; `ON` is `SUSPEND` and `CLUSTER` is `OFF`; exactly one
/// action at most; `GANG` and `WITHIN` not together.
pub fn parse_mode(value: &str) -> Option<PreemptMode> {
    let mut mode = PreemptMode::default();
    let mut actions = 0;
    for tok in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match tok.to_ascii_lowercase().as_str() {
            "gang" => mode.gang = true,
            "within" => mode.within = true,
            "off" | "cluster" => actions += 1,
            "cancel" => {
                mode.action = PreemptAction::Cancel;
                actions += 1
            }
            "requeue" => {
                mode.action = PreemptAction::Requeue;
                actions += 1
            }
            "on" | "suspend" => {
                mode.action = PreemptAction::Suspend;
                actions += 1
            }
            _ => return None,
        }
    }
    (actions <= 1 && !(mode.gang && mode.within)).then_some(mode)
}

/// The cluster-wide preemption settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptConf {
    pub kind: PreemptKind,
    pub mode: PreemptMode,
    /// `PreemptExemptTime`: a job that has run less than this is not a
    /// candidate. `None`: not set.
    pub exempt_time_s: Option<u64>,
    /// `PreemptParameters=youngest_first`: candidates by start time, the
    /// youngest first, instead of by tier and size.
    pub youngest_first: bool,
    /// `PreemptParameters=strict_order`: keep the candidates' order when
    /// looking for a smaller set.
    pub strict_order: bool,
    /// `PreemptParameters=reorder_count=N` (Slurm's default 1): rounds of
    /// looking for a smaller set of victims.
    pub reorder_count: u32,
}

impl Default for PreemptConf {
    fn default() -> Self {
        PreemptConf {
            kind: PreemptKind::None,
            mode: PreemptMode::default(),
            exempt_time_s: None,
            youngest_first: false,
            strict_order: false,
            reorder_count: 1,
        }
    }
}

impl PreemptConf {
    pub fn enabled(&self) -> bool {
        self.kind != PreemptKind::None && self.mode.action != PreemptAction::Off
    }
}

/// Check the settings together, as slurmctld does at start: the words are
/// Slurm's.
pub fn validate(conf: &PreemptConf) -> Result<(), String> {
    let base = conf.mode.action;
    if base == PreemptAction::Suspend && !conf.mode.gang {
        return Err("PreemptMode=SUSPEND requires GANG too".into());
    }
    match conf.kind {
        PreemptKind::None if base != PreemptAction::Off => {
            return Err("PreemptType and PreemptMode values incompatible".into())
        }
        PreemptKind::PartitionPrio | PreemptKind::Qos if base == PreemptAction::Off => {
            return Err("PreemptType and PreemptMode values incompatible".into())
        }
        _ => {}
    }
    // A partition's SUSPEND without the cluster's GANG is accepted, as
    // slurmctld does: such a victim is killed instead (`_preempt_jobs`).
    // GANG alone (preempt/none) asks for time-slicing of jobs that share
    // nodes in OverSubscribe=FORCE partitions; canopy shares those CPUs
    // without time-slicing (named at start-up), so it changes nothing.
    Ok(())
}

/// Slurm 22.05's spelling of the search's parameters, as
/// `SchedulerParameters` words: `preempt_youngest_first`,
/// `preempt_strict_order`, `preempt_reorder_count=N` (newer Slurm moved
/// them to `PreemptParameters` without the prefix; canopy reads both).
/// `None`: not one of them.
pub fn scheduler_param(p: &mut PreemptConf, name: &str, value: &str) -> Option<Result<(), String>> {
    match name.to_ascii_lowercase().as_str() {
        "preempt_youngest_first" => p.youngest_first = true,
        "preempt_strict_order" => p.strict_order = true,
        "preempt_reorder_count" => match digits(value.trim()).filter(|n| *n <= 5) {
            Some(n) => p.reorder_count = n as u32,
            None => {
                return Some(Err(format!(
                    "SchedulerParameters {name}={value}: expected an integer between 0 and 5"
                )))
            }
        },
        _ => return None,
    }
    Some(Ok(()))
}

/// A `PreemptMode` value (global or a partition's).
pub(super) fn preempt_mode(loc: &Loc, item: &Item) -> Result<PreemptMode, ConfigError> {
    parse_mode(&item.value).ok_or_else(|| {
        bad_value(
            loc,
            item,
            "one of OFF, CANCEL, REQUEUE or SUSPEND, optionally with GANG or WITHIN",
        )
    })
}

impl Builder {
    /// `PreemptParameters`: youngest_first, strict_order, reorder_count=N;
    /// other (newer) words are named in one warning.
    pub(super) fn preempt_parameters(&mut self, loc: &Loc, item: &Item) -> Result<(), ConfigError> {
        let p = &mut self.cfg.preempt;
        p.youngest_first = false;
        p.strict_order = false;
        p.reorder_count = 1;
        let mut ignored = Vec::new();
        for word in item
            .value
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            let (name, value) = word.split_once('=').unwrap_or((word, ""));
            match name.to_ascii_lowercase().as_str() {
                "youngest_first" => p.youngest_first = true,
                "strict_order" => p.strict_order = true,
                "reorder_count" => {
                    p.reorder_count = digits(value.trim())
                        .filter(|n| *n <= 5)
                        .map(|n| n as u32)
                        .ok_or_else(|| {
                            loc.error(
                                &item.key,
                                format!(
                                    "PreemptParameters {word}: expected an integer between 0 and 5"
                                ),
                            )
                        })?
                }
                _ => ignored.push(word.to_string()),
            }
        }
        if !ignored.is_empty() {
            let w = format!(
                "{loc}: PreemptParameters {} not used by canopy; ignored",
                ignored.join(",")
            );
            self.cfg.warnings.push(w);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_22_05_reads_the_search_parameters_from_scheduler_parameters() {
        let mut p = PreemptConf::default();
        assert_eq!(scheduler_param(&mut p, "bf_window", "10"), None);
        assert_eq!(
            scheduler_param(&mut p, "preempt_youngest_first", ""),
            Some(Ok(()))
        );
        assert_eq!(
            scheduler_param(&mut p, "preempt_strict_order", ""),
            Some(Ok(()))
        );
        assert_eq!(
            scheduler_param(&mut p, "preempt_reorder_count", "3"),
            Some(Ok(()))
        );
        assert!((p.youngest_first, p.strict_order, p.reorder_count) == (true, true, 3));
        assert!(scheduler_param(&mut p, "preempt_reorder_count", "9").is_some_and(|r| r.is_err()));
    }

    #[test]
    fn modes_parse_as_slurmctld_reads_them() {
        let m = |s| parse_mode(s).map(PreemptMode::name);
        assert_eq!(m("REQUEUE").as_deref(), Some("REQUEUE"));
        assert_eq!(m("suspend,gang").as_deref(), Some("GANG,SUSPEND"));
        assert_eq!(m("on").as_deref(), Some("SUSPEND"));
        assert_eq!(m("cluster").as_deref(), Some("OFF"));
        assert_eq!(m("gang").as_deref(), Some("GANG"));
        assert_eq!(m("cancel,within").as_deref(), Some("WITHIN,CANCEL"));
        // Two actions, GANG with WITHIN, an unknown word: refused.
        assert_eq!(m("cancel,requeue"), None);
        assert_eq!(m("gang,within"), None);
        assert_eq!(m("kill"), None);
    }

    #[test]
    fn incompatible_settings_are_refused_with_slurms_words() {
        let conf = |kind, mode: &str| PreemptConf {
            kind,
            mode: parse_mode(mode).unwrap(),
            ..Default::default()
        };
        assert_eq!(
            validate(&conf(PreemptKind::PartitionPrio, "OFF")),
            Err("PreemptType and PreemptMode values incompatible".into())
        );
        assert_eq!(
            validate(&conf(PreemptKind::None, "REQUEUE")),
            Err("PreemptType and PreemptMode values incompatible".into())
        );
        assert_eq!(
            validate(&conf(PreemptKind::PartitionPrio, "SUSPEND")),
            Err("PreemptMode=SUSPEND requires GANG too".into())
        );
        assert_eq!(
            validate(&conf(PreemptKind::Qos, "OFF")),
            Err("PreemptType and PreemptMode values incompatible".into())
        );
        assert_eq!(
            validate(&conf(PreemptKind::Qos, "SUSPEND")),
            Err("PreemptMode=SUSPEND requires GANG too".into())
        );
        // Suspending with gang scheduling, by tier or by QOS.
        assert!(validate(&conf(PreemptKind::PartitionPrio, "SUSPEND,GANG")).is_ok());
        assert!(validate(&conf(PreemptKind::Qos, "SUSPEND,GANG")).is_ok());
        assert!(validate(&conf(PreemptKind::Qos, "REQUEUE")).is_ok());
        assert!(validate(&conf(PreemptKind::PartitionPrio, "REQUEUE")).is_ok());
        // GANG alone (time-slicing without preemption) is the default's twin.
        assert!(validate(&conf(PreemptKind::None, "GANG")).is_ok());
    }
}
