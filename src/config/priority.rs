//! The priority/multifactor keys of slurm.conf: decay and calculation
//! periods, the weights, `PriorityFlags`, `TRESBillingWeights` (global and
//! per partition) and the partitions' `PriorityJobFactor`/`PriorityTier`.
//! What they mean for a job's priority lives in `sched::priority`; this
//! file only reads and checks them, with an error naming the bad value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::build::{bad_value, int_in, require_set, Builder};
use super::parse::{Item, Loc};
use super::types::ConfigError;
use super::units;

/// `PriorityUsageResetPeriod`: when all usage is cleared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResetPeriod {
    #[default]
    None,
    /// Once, at the controller's start.
    Now,
    Daily,
    Weekly,
    Monthly,
    Quarterly,
    Yearly,
}

impl ResetPeriod {
    pub fn name(self) -> &'static str {
        match self {
            ResetPeriod::None => "NONE",
            ResetPeriod::Now => "NOW",
            ResetPeriod::Daily => "DAILY",
            ResetPeriod::Weekly => "WEEKLY",
            ResetPeriod::Monthly => "MONTHLY",
            ResetPeriod::Quarterly => "QUARTERLY",
            ResetPeriod::Yearly => "YEARLY",
        }
    }
}

/// `PriorityFlags`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityFlags {
    /// Age counts from submission, held or not.
    pub accrue_always: bool,
    /// Running jobs' priorities are recalculated too.
    pub calculate_running: bool,
    /// Asked for, but not supported (a warning says so): classic fair share
    /// is computed as without it.
    pub depth_oblivious: bool,
    /// Classic fair share instead of Fair Tree.
    pub no_fair_tree: bool,
    pub incr_only: bool,
    pub max_tres: bool,
    pub no_normal_assoc: bool,
    pub no_normal_part: bool,
    pub no_normal_qos: bool,
    pub no_normal_tres: bool,
    pub small_relative_to_time: bool,
}

impl PriorityFlags {
    /// As `scontrol show config` lists them (Slurm's order).
    pub fn text(&self) -> String {
        let mut v = Vec::new();
        let on = [
            (self.accrue_always, "ACCRUE_ALWAYS"),
            (self.small_relative_to_time, "SMALL_RELATIVE_TO_TIME"),
            (self.calculate_running, "CALCULATE_RUNNING"),
            (self.depth_oblivious, "DEPTH_OBLIVIOUS"),
            (self.no_fair_tree, "NO_FAIR_TREE"),
            (self.incr_only, "INCR_ONLY"),
            (self.max_tres, "MAX_TRES"),
            (self.no_normal_assoc, "NO_NORMAL_ASSOC"),
            (self.no_normal_part, "NO_NORMAL_PART"),
            (self.no_normal_qos, "NO_NORMAL_QOS"),
            (self.no_normal_tres, "NO_NORMAL_TRES"),
        ];
        for (set, name) in on {
            if set {
                v.push(name);
            }
        }
        v.join(",")
    }
}

/// A partition's priority settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartPriority {
    /// `PriorityJobFactor` [1].
    pub job_factor: u16,
    /// `PriorityTier` [1]: orders partitions' jobs before priority does.
    pub tier: u16,
    /// `TRESBillingWeights` of the partition (overrides the global ones).
    pub billing: Option<Vec<(String, f64)>>,
}

impl Default for PartPriority {
    fn default() -> Self {
        PartPriority {
            job_factor: 1,
            tier: 1,
            billing: None,
        }
    }
}

/// Everything priority/multifactor reads from slurm.conf.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityConf {
    /// `PriorityDecayHalfLife` [7-0]; 0 = no decay.
    pub decay_half_life_s: u64,
    /// `PriorityCalcPeriod` [5 minutes].
    pub calc_period_s: u64,
    /// `PriorityMaxAge` [7-0].
    pub max_age_s: u64,
    pub usage_reset: ResetPeriod,
    pub favor_small: bool,
    pub flags: PriorityFlags,
    pub weight_age: u32,
    pub weight_assoc: u32,
    pub weight_fairshare: u32,
    pub weight_job_size: u32,
    pub weight_partition: u32,
    pub weight_qos: u32,
    /// `PriorityWeightTRES`: (TRES name as Slurm spells it, weight).
    pub weight_tres: Vec<(String, f64)>,
    /// Global `TRESBillingWeights`: (TRES name, weight per unit; memory
    /// per MB whatever suffix was written).
    pub billing: Vec<(String, f64)>,
    /// Per partition (by name): `PriorityJobFactor`, `PriorityTier`,
    /// `TRESBillingWeights`. A partition not here has the defaults.
    pub partitions: BTreeMap<String, PartPriority>,
    /// `PartitionName=DEFAULT`'s values, for the lines after it.
    #[serde(skip)]
    pub part_default: PartPriority,
}

impl Default for PriorityConf {
    fn default() -> Self {
        PriorityConf {
            decay_half_life_s: 7 * 86_400,
            calc_period_s: 300,
            max_age_s: 7 * 86_400,
            usage_reset: ResetPeriod::None,
            favor_small: false,
            flags: PriorityFlags::default(),
            weight_age: 0,
            weight_assoc: 0,
            weight_fairshare: 0,
            weight_job_size: 0,
            weight_partition: 0,
            weight_qos: 0,
            weight_tres: Vec::new(),
            billing: Vec::new(),
            partitions: BTreeMap::new(),
            part_default: PartPriority::default(),
        }
    }
}

impl PriorityConf {
    /// Partition `name`'s settings (the defaults for one not configured).
    pub fn partition(&self, name: &str) -> PartPriority {
        self.partitions.get(name).cloned().unwrap_or_default()
    }

    /// The billing weights that apply in partition `name`.
    pub fn billing_for(&self, name: &str) -> &[(String, f64)] {
        self.partitions
            .get(name)
            .and_then(|p| p.billing.as_deref())
            .unwrap_or(&self.billing)
    }
}

const GLOBAL: &[&str] = &[
    "PriorityDecayHalfLife",
    "PriorityCalcPeriod",
    "PriorityMaxAge",
    "PriorityUsageResetPeriod",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
    "TRESBillingWeights",
];

/// A duration key (`days-hh:mm:ss`, or minutes); `INFINITE` is refused.
fn duration(loc: &Loc, item: &Item) -> Result<u64, ConfigError> {
    match units::parse_duration_secs(&item.value) {
        Ok(Some(s)) => Ok(s),
        _ => Err(bad_value(
            loc,
            item,
            "a time (minutes, or days-hours:minutes:seconds)",
        )),
    }
}

/// `NAME=weight,...`: TRES names as Slurm writes them (`CPU`, `Mem`,
/// `Node`, `GRES/gpu`, `License/x`); a memory weight may carry a unit
/// suffix (`Mem=0.25G` is 0.25 per GB), kept per MB.
pub fn tres_weights(text: &str) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not NAME=weight"))?;
        let name = canonical_tres(name.trim()).ok_or_else(|| {
            format!("'{name}' is not a TRES (CPU, Mem, Node, GRES/name, License/name)")
        })?;
        let value = value.trim();
        let (number, per_mb) = match value.char_indices().last() {
            Some((i, c)) if name == "Mem" && c.is_ascii_alphabetic() => {
                let scale = match c.to_ascii_uppercase() {
                    'K' => 1.0 / 1024.0,
                    'M' => 1.0,
                    'G' => 1024.0,
                    'T' => 1024.0 * 1024.0,
                    'P' => 1024.0 * 1024.0 * 1024.0,
                    _ => return Err(format!("'{value}': unknown memory unit '{c}'")),
                };
                (&value[..i], scale)
            }
            _ => (value, 1.0),
        };
        let w: f64 = number
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| format!("'{value}' is not a weight (a number, 0 or more)"))?;
        out.push((name, w / per_mb));
    }
    Ok(out)
}

/// Slurm's spelling of a TRES name given in any case.
fn canonical_tres(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "cpu" => Some("CPU".into()),
        "mem" => Some("Mem".into()),
        "node" => Some("Node".into()),
        "energy" => Some("Energy".into()),
        _ => {
            let (kind, _) = lower.split_once('/')?;
            // The name after the slash keeps its case (`GRES/gpu`).
            let rest = &name[kind.len() + 1..];
            if rest.is_empty() {
                return None;
            }
            match kind {
                "gres" => Some(format!("GRES/{rest}")),
                "license" => Some(format!("License/{rest}")),
                "fs" => Some(format!("FS/{rest}")),
                "bb" => Some(format!("BB/{rest}")),
                _ => None,
            }
        }
    }
}

impl Builder {
    /// A priority key of the global section: `None` if `item` is not one.
    pub(super) fn priority_key(
        &mut self,
        loc: &Loc,
        item: &Item,
    ) -> Option<Result<(), ConfigError>> {
        let name = GLOBAL.iter().find(|k| k.eq_ignore_ascii_case(&item.key))?;
        Some(self.priority_value(loc, item, name))
    }

    fn priority_value(&mut self, loc: &Loc, item: &Item, name: &str) -> Result<(), ConfigError> {
        require_set(loc, item)?;
        let p = &mut self.cfg.priority;
        let weight = |item| int_in::<u32>(loc, item, 0, u32::MAX.into());
        match name {
            "PriorityDecayHalfLife" => p.decay_half_life_s = duration(loc, item)?,
            "PriorityCalcPeriod" => {
                let s = duration(loc, item)?;
                if s == 0 {
                    return Err(bad_value(loc, item, "a period of at least one minute"));
                }
                p.calc_period_s = s
            }
            "PriorityMaxAge" => p.max_age_s = duration(loc, item)?,
            "PriorityUsageResetPeriod" => {
                p.usage_reset = match item.value.trim().to_ascii_uppercase().as_str() {
                    "NONE" => ResetPeriod::None,
                    "NOW" => ResetPeriod::Now,
                    "DAILY" => ResetPeriod::Daily,
                    "WEEKLY" => ResetPeriod::Weekly,
                    "MONTHLY" => ResetPeriod::Monthly,
                    "QUARTERLY" => ResetPeriod::Quarterly,
                    "YEARLY" => ResetPeriod::Yearly,
                    _ => {
                        return Err(bad_value(
                            loc,
                            item,
                            "NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY or YEARLY",
                        ))
                    }
                }
            }
            "PriorityFavorSmall" => {
                p.favor_small = super::build::yes_no(loc, item)?;
            }
            "PriorityFlags" => {
                let mut f = PriorityFlags::default();
                for flag in item
                    .value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    match flag.to_ascii_uppercase().as_str() {
                        "ACCRUE_ALWAYS" => f.accrue_always = true,
                        "CALCULATE_RUNNING" => f.calculate_running = true,
                        "DEPTH_OBLIVIOUS" => f.depth_oblivious = true,
                        "NO_FAIR_TREE" => f.no_fair_tree = true,
                        "FAIR_TREE" => {}
                        "INCR_ONLY" => f.incr_only = true,
                        "MAX_TRES" => f.max_tres = true,
                        "NO_NORMAL_ALL" => {
                            f.no_normal_assoc = true;
                            f.no_normal_part = true;
                            f.no_normal_qos = true;
                            f.no_normal_tres = true;
                        }
                        "NO_NORMAL_ASSOC" => f.no_normal_assoc = true,
                        "NO_NORMAL_PART" => f.no_normal_part = true,
                        "NO_NORMAL_QOS" => f.no_normal_qos = true,
                        "NO_NORMAL_TRES" => f.no_normal_tres = true,
                        "SMALL_RELATIVE_TO_TIME" => f.small_relative_to_time = true,
                        _ => {
                            return Err(loc.error(
                                &item.key,
                                format!(
                                "PriorityFlags={}: unknown flag '{flag}' (expected ACCRUE_ALWAYS, \
                                     CALCULATE_RUNNING, DEPTH_OBLIVIOUS, NO_FAIR_TREE, INCR_ONLY, \
                                     MAX_TRES, NO_NORMAL_ALL, NO_NORMAL_ASSOC, NO_NORMAL_PART, \
                                     NO_NORMAL_QOS, NO_NORMAL_TRES, SMALL_RELATIVE_TO_TIME)",
                                item.value
                            ),
                            ))
                        }
                    }
                }
                p.flags = f;
                if f.depth_oblivious {
                    self.warn(
                        loc,
                        "PriorityFlags=DEPTH_OBLIVIOUS is not supported by canopy; \
                         classic fair share is computed without it",
                    );
                }
            }
            "PriorityWeightAge" => p.weight_age = weight(item)?,
            "PriorityWeightAssoc" => p.weight_assoc = weight(item)?,
            "PriorityWeightFairshare" => p.weight_fairshare = weight(item)?,
            "PriorityWeightJobSize" => p.weight_job_size = weight(item)?,
            "PriorityWeightPartition" => p.weight_partition = weight(item)?,
            "PriorityWeightQOS" => p.weight_qos = weight(item)?,
            "PriorityWeightTRES" => {
                p.weight_tres = tres_weights(&item.value).map_err(|e| {
                    loc.error(&item.key, format!("{}={}: {e}", item.key, item.value))
                })?
            }
            "TRESBillingWeights" => {
                p.billing = tres_weights(&item.value).map_err(|e| {
                    loc.error(&item.key, format!("{}={}: {e}", item.key, item.value))
                })?
            }
            _ => {}
        }
        Ok(())
    }

    /// A priority attribute of a partition line (`Priority`,
    /// `PriorityJobFactor`, `PriorityTier`, `TRESBillingWeights`): `None`
    /// if `item` is not one. `partition` is the line's name (`DEFAULT`
    /// sets the values of the lines after it).
    pub(super) fn partition_priority(
        &mut self,
        loc: &Loc,
        partition: &str,
        item: &Item,
    ) -> Option<Result<(), ConfigError>> {
        const KEYS: &[&str] = &[
            "Priority",
            "PriorityJobFactor",
            "PriorityTier",
            "TRESBillingWeights",
        ];
        let key = KEYS.iter().find(|k| k.eq_ignore_ascii_case(&item.key))?;
        let r = (|| {
            require_set(loc, item)?;
            let name = partition.trim();
            let default = name.eq_ignore_ascii_case("DEFAULT");
            let p = &mut self.cfg.priority;
            let base = p.part_default.clone();
            let entry = if default {
                &mut p.part_default
            } else {
                p.partitions.entry(name.to_string()).or_insert(base)
            };
            match *key {
                "TRESBillingWeights" => {
                    entry.billing = Some(tres_weights(&item.value).map_err(|e| {
                        loc.error(&item.key, format!("{}={}: {e}", item.key, item.value))
                    })?)
                }
                k => {
                    let v = int_in::<u16>(loc, item, 0, u16::MAX.into())?;
                    // The legacy `Priority=` sets both, as in Slurm.
                    if k != "PriorityTier" {
                        entry.job_factor = v;
                    }
                    if k != "PriorityJobFactor" {
                        entry.tier = v;
                    }
                }
            }
            Ok(())
        })();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    const HEAD: &str = "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nNodeName=n1 CPUs=2\n";

    fn parse(extra: &str) -> Result<Config, ConfigError> {
        Config::parse_str(&format!("{HEAD}{extra}"), Path::new("/x/slurm.conf"))
    }

    #[test]
    fn priority_keys_are_read_with_slurms_defaults() {
        let c = parse("PartitionName=p Nodes=n1\n").unwrap();
        assert_eq!(c.priority.decay_half_life_s, 604_800);
        assert_eq!(c.priority.calc_period_s, 300);
        assert_eq!(c.priority.weight_fairshare, 0);
        let c = parse(
            "PriorityDecayHalfLife=1-0\nPriorityCalcPeriod=2\nPriorityMaxAge=0:30:00\n\
             PriorityUsageResetPeriod=weekly\nPriorityFavorSmall=YES\n\
             PriorityFlags=NO_FAIR_TREE,CALCULATE_RUNNING,NO_NORMAL_ALL\n\
             PriorityWeightFairshare=10000\nPriorityWeightAge=1000\n\
             PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000\n\
             TRESBillingWeights=CPU=1.0,Mem=0.25G\n\
             PartitionName=DEFAULT PriorityTier=3\n\
             PartitionName=p Nodes=n1 PriorityJobFactor=10 TRESBillingWeights=CPU=2\n\
             PartitionName=q Nodes=n1 Priority=7\n",
        )
        .unwrap();
        let p = &c.priority;
        assert_eq!(
            (p.decay_half_life_s, p.calc_period_s, p.max_age_s),
            (86_400, 120, 1800)
        );
        assert_eq!(p.usage_reset, ResetPeriod::Weekly);
        assert!(p.favor_small && p.flags.no_fair_tree && p.flags.no_normal_tres);
        assert_eq!(p.flags.text(), "CALCULATE_RUNNING,NO_FAIR_TREE,NO_NORMAL_ASSOC,NO_NORMAL_PART,NO_NORMAL_QOS,NO_NORMAL_TRES");
        assert_eq!((p.weight_fairshare, p.weight_age), (10_000, 1000));
        assert_eq!(p.weight_tres[2], ("GRES/gpu".to_string(), 3000.0));
        assert_eq!(p.billing[1], ("Mem".to_string(), 0.25 / 1024.0));
        let part = p.partition("p");
        assert_eq!((part.job_factor, part.tier), (10, 3));
        assert_eq!(p.billing_for("p"), &[("CPU".to_string(), 2.0)]);
        assert_eq!(p.billing_for("q"), p.billing.as_slice());
        assert_eq!((p.partition("q").job_factor, p.partition("q").tier), (7, 7));
    }

    #[test]
    fn bad_priority_values_name_what_was_wrong() {
        let e = parse("PriorityFlags=FAST\n").unwrap_err();
        assert!(e.message.contains("unknown flag 'FAST'"), "{}", e.message);
        let e = parse("PriorityUsageResetPeriod=HOURLY\n").unwrap_err();
        assert!(e.message.contains("NONE, NOW, DAILY"), "{}", e.message);
        let e = parse("PriorityWeightAge=-1\n").unwrap_err();
        assert!(
            e.message.contains("an integer between 0 and 4294967295"),
            "{}",
            e.message
        );
        let e = parse("PriorityWeightTRES=CPU=x\n").unwrap_err();
        assert!(e.message.contains("'x' is not a weight"), "{}", e.message);
        let e = parse("TRESBillingWeights=Cores=1\n").unwrap_err();
        assert!(e.message.contains("'Cores' is not a TRES"), "{}", e.message);
        let e = parse("PriorityCalcPeriod=0\n").unwrap_err();
        assert!(e.message.contains("at least one minute"), "{}", e.message);
        let e = parse("PriorityDecayHalfLife=soon\n").unwrap_err();
        assert!(e.message.contains("expected a time"), "{}", e.message);
        let c = parse("PriorityFlags=DEPTH_OBLIVIOUS\nPartitionName=p Nodes=n1\n").unwrap();
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("DEPTH_OBLIVIOUS is not supported")));
    }
}
