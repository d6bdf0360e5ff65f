//! Power saving and cloud nodes: `SuspendProgram`, `ResumeProgram`,
//! `ResumeFailProgram`, `SuspendTime`, `SuspendTimeout`, `ResumeTimeout`,
//! `SuspendRate`, `ResumeRate`, `SuspendExcNodes`, `SuspendExcParts`, and
//! the `SlurmctldParameters` that shape them (`idle_on_node_suspend`,
//! `cloud_dns`, `cloud_reg_addrs`, `power_save_interval`,
//! `power_save_min_interval`). Values and defaults are Slurm 22.05's.
//!
//! This module only reads the keys; what they make the controller do is
//! `ctld::power`'s business, and running the programs the controller
//! shell's (`actors::controller::power`).

use serde::{Deserialize, Serialize};

use super::build::{bad_value, digits, non_empty, require_set, Builder};
use super::hostlist;
use super::parse::{Item, Loc};
use super::types::ConfigError;

/// Global keys read here (case-insensitive).
pub(super) const KEYS: &[&str] = &[
    "SuspendProgram",
    "ResumeProgram",
    "ResumeFailProgram",
    "SuspendTime",
    "SuspendTimeout",
    "ResumeTimeout",
    "SuspendRate",
    "ResumeRate",
    "SuspendExcNodes",
    "SuspendExcParts",
];

/// The power-saving configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerConf {
    pub suspend_program: Option<String>,
    pub resume_program: Option<String>,
    /// Run with the nodes that did not register within ResumeTimeout.
    pub resume_fail_program: Option<String>,
    /// Seconds a node stays idle before it is powered down; `None`
    /// (`NONE`, `INFINITE`, `-1`, Slurm's default): never.
    pub suspend_time_s: Option<u64>,
    /// Default 30.
    pub suspend_timeout_s: u64,
    /// Default 60.
    pub resume_timeout_s: u64,
    /// Nodes powered down per minute; 0 = no limit. Default 60.
    pub suspend_rate: u32,
    /// Nodes powered up per minute; 0 = no limit. Default 300.
    pub resume_rate: u32,
    /// Node names never powered down (expanded).
    pub suspend_exc_nodes: Vec<String>,
    /// Partitions whose nodes are never powered down.
    pub suspend_exc_parts: Vec<String>,
    /// `idle_on_node_suspend`: a node powered down loses its DRAIN and
    /// DOWN, so that it can be powered up again for work.
    pub idle_on_node_suspend: bool,
    /// `cloud_dns`: cloud nodes are found by name (their NodeAddr is not
    /// taken from their registration).
    pub cloud_dns: bool,
    /// `cloud_reg_addrs`: a cloud node's NodeAddr and NodeHostname come
    /// from its registration.
    pub cloud_reg_addrs: bool,
    /// `power_save_interval` (default 10 s): how often nodes are checked
    /// for power-saving work.
    pub interval_s: u64,
    /// `power_save_min_interval` (default 0 s): the least time between
    /// two power-saving passes.
    pub min_interval_s: u64,
}

impl Default for PowerConf {
    fn default() -> Self {
        PowerConf {
            suspend_program: None,
            resume_program: None,
            resume_fail_program: None,
            suspend_time_s: None,
            suspend_timeout_s: 30,
            resume_timeout_s: 60,
            suspend_rate: 60,
            resume_rate: 300,
            suspend_exc_nodes: Vec::new(),
            suspend_exc_parts: Vec::new(),
            idle_on_node_suspend: false,
            cloud_dns: false,
            cloud_reg_addrs: false,
            interval_s: 10,
            min_interval_s: 0,
        }
    }
}

impl PowerConf {
    /// Whether idle nodes are ever powered down.
    pub fn suspends(&self) -> bool {
        self.suspend_time_s.is_some()
    }

    /// The `SlurmctldParameters` read here, back to their defaults (a
    /// `SlurmctldParameters=` line replaces the earlier ones).
    pub(super) fn reset_ctld_params(&mut self) {
        let d = PowerConf::default();
        self.idle_on_node_suspend = d.idle_on_node_suspend;
        self.cloud_dns = d.cloud_dns;
        self.cloud_reg_addrs = d.cloud_reg_addrs;
        self.interval_s = d.interval_s;
        self.min_interval_s = d.min_interval_s;
    }
}

impl Builder {
    /// One of the power-saving global keys: `Some` with the outcome, `None`
    /// when `item` is another key.
    pub(super) fn power_key(&mut self, loc: &Loc, item: &Item) -> Option<Result<(), ConfigError>> {
        let name = KEYS.iter().find(|k| k.eq_ignore_ascii_case(&item.key))?;
        Some(self.power_value(loc, item, name))
    }

    fn power_value(&mut self, loc: &Loc, item: &Item, name: &str) -> Result<(), ConfigError> {
        require_set(loc, item)?;
        let p = &mut self.cfg.power;
        let secs = |item: &Item| {
            digits(item.value.trim()).ok_or_else(|| bad_value(loc, item, "a number of seconds"))
        };
        let rate = |item: &Item| {
            digits(item.value.trim())
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad_value(loc, item, "a number of nodes per minute (0: no limit)"))
        };
        match name {
            "SuspendProgram" => p.suspend_program = Some(non_empty(loc, item, "a program")?),
            "ResumeProgram" => p.resume_program = Some(non_empty(loc, item, "a program")?),
            "ResumeFailProgram" => p.resume_fail_program = Some(non_empty(loc, item, "a program")?),
            "SuspendTime" => {
                p.suspend_time_s = match item.value.trim().to_ascii_uppercase().as_str() {
                    "NONE" | "INFINITE" | "UNLIMITED" | "-1" => None,
                    _ => Some(secs(item).map_err(|_| {
                        bad_value(loc, item, "a number of seconds, NONE or INFINITE")
                    })?),
                }
            }
            "SuspendTimeout" => p.suspend_timeout_s = secs(item)?,
            "ResumeTimeout" => p.resume_timeout_s = secs(item)?,
            "SuspendRate" => p.suspend_rate = rate(item)?,
            "ResumeRate" => p.resume_rate = rate(item)?,
            "SuspendExcNodes" => {
                p.suspend_exc_nodes = hostlist::expand(item.value.trim())
                    .map_err(|e| bad_value(loc, item, format_args!("a host list ({e})")))?
            }
            "SuspendExcParts" => {
                p.suspend_exc_parts = item
                    .value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            _ => {}
        }
        Ok(())
    }

    /// One `SlurmctldParameters` entry power saving reads; `Ok(false)` when
    /// `name` is none of them.
    pub(super) fn power_parameter(
        &mut self,
        loc: &Loc,
        item: &Item,
        p: &str,
        name: &str,
        value: &str,
    ) -> Result<bool, ConfigError> {
        let conf = &mut self.cfg.power;
        let secs = || {
            digits(value.trim()).ok_or_else(|| {
                loc.error(
                    &item.key,
                    format!("SlurmctldParameters {p}: expected a number of seconds"),
                )
            })
        };
        match name.to_ascii_lowercase().as_str() {
            "idle_on_node_suspend" => conf.idle_on_node_suspend = true,
            "cloud_dns" => conf.cloud_dns = true,
            "cloud_reg_addrs" => conf.cloud_reg_addrs = true,
            "power_save_interval" => conf.interval_s = secs()?.max(1),
            "power_save_min_interval" => conf.min_interval_s = secs()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn parse(text: &str) -> Result<Config, crate::config::ConfigError> {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\n{text}NodeName=n[1-4] CPUs=2\n\
             NodeName=cl[1-2] CPUs=2 State=CLOUD\nPartitionName=p Nodes=ALL\n"
        );
        Config::parse_str(&text, std::path::Path::new("/x/slurm.conf"))
    }

    /// Slurm 22.05's defaults: no power saving until SuspendTime is set.
    #[test]
    fn defaults_are_slurms() {
        let c = parse("").unwrap();
        let p = &c.power;
        assert_eq!(p.suspend_time_s, None);
        assert!(!p.suspends());
        assert_eq!((p.suspend_timeout_s, p.resume_timeout_s), (30, 60));
        assert_eq!((p.suspend_rate, p.resume_rate), (60, 300));
        assert_eq!((p.interval_s, p.min_interval_s), (10, 0));
        assert!(c.warnings.iter().all(|w| !w.contains("Suspend")));
    }

    /// Every key is read, not warned about as ignored.
    #[test]
    fn keys_and_parameters_are_read() {
        let c = parse(
            "SuspendProgram=/s.sh\nResumeProgram=/r.sh\nResumeFailProgram=/f.sh\n\
             SuspendTime=600\nSuspendTimeout=120\nResumeTimeout=1600\nSuspendRate=0\n\
             ResumeRate=20\nSuspendExcNodes=n[1-2],cl1\nSuspendExcParts=login,debug\n\
             SlurmctldParameters=cloud_dns,idle_on_node_suspend,power_save_interval=2\n\
             SlurmctldParameters+=power_save_min_interval=1,cloud_reg_addrs\n",
        )
        .unwrap();
        let p = &c.power;
        assert_eq!(p.suspend_program.as_deref(), Some("/s.sh"));
        assert_eq!(p.resume_program.as_deref(), Some("/r.sh"));
        assert_eq!(p.resume_fail_program.as_deref(), Some("/f.sh"));
        assert_eq!(p.suspend_time_s, Some(600));
        assert_eq!((p.suspend_timeout_s, p.resume_timeout_s), (120, 1600));
        assert_eq!((p.suspend_rate, p.resume_rate), (0, 20));
        assert_eq!(p.suspend_exc_nodes, vec!["n1", "n2", "cl1"]);
        assert_eq!(p.suspend_exc_parts, vec!["login", "debug"]);
        assert!(p.idle_on_node_suspend && p.cloud_dns && p.cloud_reg_addrs);
        assert_eq!((p.interval_s, p.min_interval_s), (2, 1));
        assert!(
            c.warnings
                .iter()
                .all(|w| !w.contains("Suspend") && !w.contains("Resume") && !w.contains("cloud")),
            "{:?}",
            c.warnings
        );
        // `=` replaces what earlier lines set.
        let c = parse("SlurmctldParameters=idle_on_node_suspend\nSlurmctldParameters=cloud_dns\n")
            .unwrap();
        assert!(!c.power.idle_on_node_suspend && c.power.cloud_dns);
    }

    #[test]
    fn suspend_time_none_and_bad_values() {
        for v in ["NONE", "infinite", "-1"] {
            let c = parse(&format!("SuspendTime={v}\n")).unwrap();
            assert_eq!(c.power.suspend_time_s, None, "{v}");
        }
        let e = parse("SuspendTime=soon\n").unwrap_err();
        assert!(e.to_string().contains("SuspendTime"), "{e}");
        let e = parse("ResumeRate=-3\n").unwrap_err();
        assert!(e.to_string().contains("ResumeRate"), "{e}");
        let e = parse("SuspendExcNodes=n[1-\n").unwrap_err();
        assert!(e.to_string().contains("SuspendExcNodes"), "{e}");
        let e = parse("SlurmctldParameters=power_save_interval=often\n").unwrap_err();
        assert!(e.to_string().contains("power_save_interval"), "{e}");
    }
}
