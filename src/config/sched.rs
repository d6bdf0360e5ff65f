//! `SchedulerType` and the scheduling loops' `SchedulerParameters`
//! (`bf_*`, `default_queue_depth`, `sched_interval`): their values, Slurm's
//! defaults and ranges (slurm.conf(5), 22.05). The builder hands each
//! `name=value` here first; what this file does not know goes back to it.

use serde::{Deserialize, Serialize};

/// How the controller schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedConf {
    /// `SchedulerType=sched/backfill` (the default); `sched/builtin` keeps
    /// the FIFO passes only.
    pub backfill: bool,
    /// `bf_interval` seconds between backfill passes (default 30; Slurm's
    /// `-1` turns backfill off, kept as `None`).
    pub bf_interval_s: Option<u32>,
    /// `bf_window` minutes ahead that reservations are planned (1440).
    pub bf_window_min: u32,
    /// `bf_resolution` seconds: the timeline's granularity (60).
    pub bf_resolution_s: u32,
    /// `bf_max_job_test`: jobs tried per pass (500).
    pub bf_max_job_test: u32,
    /// `bf_max_job_user` / `bf_max_job_part`: jobs tried per user / per
    /// partition in one pass (0 = no limit).
    pub bf_max_job_user: u32,
    pub bf_max_job_part: u32,
    /// `bf_continue`: canopy's pass never lets go of the core part way
    /// through, so there is nothing to continue; accepted for slurm.conf
    /// compatibility and shown by `scontrol show config`.
    pub bf_continue: bool,
    /// `bf_busy_nodes`: reservations prefer nodes already in use.
    pub bf_busy_nodes: bool,
    /// `bf_min_prio_reserve`: jobs below this priority may start now but
    /// get no reservation (0 = every job may reserve).
    pub bf_min_prio_reserve: u32,
    /// `default_queue_depth`: jobs the quick (event) pass looks at (100).
    pub default_queue_depth: u32,
    /// `sched_interval` seconds between full quick passes (60; 0 never).
    pub sched_interval_s: u32,
}

impl Default for SchedConf {
    fn default() -> Self {
        SchedConf {
            backfill: true,
            bf_interval_s: Some(30),
            bf_window_min: 1440,
            bf_resolution_s: 60,
            bf_max_job_test: 500,
            bf_max_job_user: 0,
            bf_max_job_part: 0,
            bf_continue: false,
            bf_busy_nodes: false,
            bf_min_prio_reserve: 0,
            default_queue_depth: 100,
            sched_interval_s: 60,
        }
    }
}

impl SchedConf {
    /// Read one `SchedulerParameters` item. `None`: not one of these (the
    /// caller deals with it); `Some(Err)`: one of these with a bad value,
    /// the message naming the item and the range.
    pub fn param(&mut self, name: &str, value: &str) -> Option<Result<(), String>> {
        let int = |min: i64, max: i64| -> Result<i64, String> {
            value
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    format!("SchedulerParameters {name}={value}: expected an integer between {min} and {max}")
                })
        };
        let as_u32 = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        let r = match name.to_ascii_lowercase().as_str() {
            "bf_interval" => int(-1, 10_800).map(|n| {
                // Slurm: -1 disables backfill; 0 is taken as the default.
                self.bf_interval_s = match n {
                    -1 => None,
                    0 => Some(30),
                    n => Some(as_u32(n)),
                }
            }),
            "bf_window" => int(1, 43_200).map(|n| self.bf_window_min = as_u32(n)),
            "bf_resolution" => int(1, 3_600).map(|n| self.bf_resolution_s = as_u32(n)),
            "bf_max_job_test" => int(1, 1_000_000).map(|n| self.bf_max_job_test = as_u32(n)),
            "bf_max_job_user" => int(0, 10_000).map(|n| self.bf_max_job_user = as_u32(n)),
            "bf_max_job_part" => int(0, 10_000).map(|n| self.bf_max_job_part = as_u32(n)),
            "bf_min_prio_reserve" => {
                int(0, i64::from(u32::MAX)).map(|n| self.bf_min_prio_reserve = as_u32(n))
            }
            "bf_continue" => {
                self.bf_continue = true;
                Ok(())
            }
            "bf_busy_nodes" => {
                self.bf_busy_nodes = true;
                Ok(())
            }
            "default_queue_depth" => {
                int(0, 1_000_000).map(|n| self.default_queue_depth = as_u32(n))
            }
            "sched_interval" => int(0, 86_400).map(|n| self.sched_interval_s = as_u32(n)),
            _ => return None,
        };
        Some(r)
    }

    /// `SchedulerType`: `sched/backfill` or `sched/builtin`.
    pub fn scheduler_type(&mut self, value: &str) -> Result<(), String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "sched/backfill" => self.backfill = true,
            "sched/builtin" => self.backfill = false,
            other => {
                return Err(format!(
                    "SchedulerType={other}: expected sched/backfill or sched/builtin"
                ))
            }
        }
        Ok(())
    }

    /// Seconds between backfill passes, if backfill runs at all.
    pub fn backfill_every(&self) -> Option<u32> {
        self.bf_interval_s.filter(|_| self.backfill)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_take_slurms_ranges_and_defaults() {
        let mut c = SchedConf::default();
        assert_eq!(c.param("bf_window", "2880"), Some(Ok(())));
        assert_eq!(c.bf_window_min, 2880);
        assert_eq!(c.param("BF_Resolution", "300"), Some(Ok(())));
        assert_eq!(c.bf_resolution_s, 300);
        assert_eq!(c.param("bf_continue", ""), Some(Ok(())));
        assert!(c.bf_continue);
        assert_eq!(c.param("bf_interval", "-1"), Some(Ok(())));
        assert_eq!(c.backfill_every(), None);
        assert_eq!(c.param("bf_interval", "0"), Some(Ok(())));
        assert_eq!(c.backfill_every(), Some(30));
        assert_eq!(
            c.param("bf_max_job_test", "0"),
            Some(Err(
                "SchedulerParameters bf_max_job_test=0: expected an integer between 1 and 1000000"
                    .into()
            ))
        );
        assert_eq!(c.param("defer", ""), None);
        assert!(c.scheduler_type("sched/builtin").is_ok());
        assert_eq!(c.backfill_every(), None);
        assert!(c.scheduler_type("sched/hold").is_err());
    }
}
