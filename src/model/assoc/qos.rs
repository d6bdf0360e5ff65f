//! Quality of service records: priority, usage factor, preemption and
//! the QOS's own limits, as `sacctmgr add|modify qos` sets them.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::limits::{edit_line, tres_line, wall_line, Edit};
use super::tres::{Tres, TresEdit};

/// `Flags=` of a QOS, in Slurm's print order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum QosFlag {
    DenyOnLimit,
    EnforceUsageThreshold,
    NoReserve,
    PartitionMaxNodes,
    PartitionMinNodes,
    OverPartQOS,
    PartitionTimeLimit,
    RequiresReservation,
    NoDecay,
    UsageFactorSafe,
}

impl QosFlag {
    pub const ALL: [QosFlag; 10] = [
        QosFlag::DenyOnLimit,
        QosFlag::EnforceUsageThreshold,
        QosFlag::NoReserve,
        QosFlag::PartitionMaxNodes,
        QosFlag::PartitionMinNodes,
        QosFlag::OverPartQOS,
        QosFlag::PartitionTimeLimit,
        QosFlag::RequiresReservation,
        QosFlag::NoDecay,
        QosFlag::UsageFactorSafe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QosFlag::DenyOnLimit => "DenyOnLimit",
            QosFlag::EnforceUsageThreshold => "EnforceUsageThreshold",
            QosFlag::NoReserve => "NoReserve",
            QosFlag::PartitionMaxNodes => "PartitionMaxNodes",
            QosFlag::PartitionMinNodes => "PartitionMinNodes",
            QosFlag::OverPartQOS => "OverPartQOS",
            QosFlag::PartitionTimeLimit => "PartitionTimeLimit",
            QosFlag::RequiresReservation => "RequiresReservation",
            QosFlag::NoDecay => "NoDecay",
            QosFlag::UsageFactorSafe => "UsageFactorSafe",
        }
    }

    /// Case-insensitive, as sacctmgr reads them.
    pub fn parse(s: &str) -> Option<QosFlag> {
        QosFlag::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// `PreemptMode=` of a QOS; `Cluster` defers to slurm.conf's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptMode {
    #[default]
    Cluster,
    Off,
    Cancel,
    Requeue,
    Suspend,
}

impl PreemptMode {
    pub fn parse(s: &str) -> Option<PreemptMode> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "cluster" => PreemptMode::Cluster,
            "off" => PreemptMode::Off,
            "cancel" => PreemptMode::Cancel,
            "requeue" => PreemptMode::Requeue,
            "suspend" => PreemptMode::Suspend,
            _ => return None,
        })
    }
}

impl fmt::Display for PreemptMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PreemptMode::Cluster => "cluster",
            PreemptMode::Off => "OFF",
            PreemptMode::Cancel => "CANCEL",
            PreemptMode::Requeue => "REQUEUE",
            PreemptMode::Suspend => "SUSPEND",
        })
    }
}

/// One QOS. Times: `max_wall`/`grp_wall` in minutes, `grace_time` and
/// `preempt_exempt_time` in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qos {
    pub id: u32,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub priority: u32,
    #[serde(default = "one")]
    pub usage_factor: f64,
    #[serde(default)]
    pub grace_time: u32,
    #[serde(default)]
    pub preempt: BTreeSet<String>,
    #[serde(default)]
    pub preempt_mode: PreemptMode,
    /// `PreemptExemptTime`: its jobs are not preempted before they have
    /// run this long (it overrides slurm.conf's). `None`: not set.
    #[serde(default)]
    pub preempt_exempt_time: Option<u32>,
    #[serde(default)]
    pub flags: BTreeSet<QosFlag>,
    #[serde(default)]
    pub grp_tres: Tres,
    #[serde(default)]
    pub grp_jobs: Option<u32>,
    #[serde(default)]
    pub grp_submit_jobs: Option<u32>,
    #[serde(default)]
    pub grp_wall: Option<u32>,
    /// `GrpTRESMins`: TRES-minutes the QOS's jobs may use (decayed).
    #[serde(default)]
    pub grp_tres_mins: Tres,
    #[serde(default)]
    pub max_tres_per_job: Tres,
    #[serde(default)]
    pub max_tres_per_node: Tres,
    #[serde(default)]
    pub max_tres_per_user: Tres,
    #[serde(default)]
    pub max_jobs_per_user: Option<u32>,
    #[serde(default)]
    pub max_submit_jobs_per_user: Option<u32>,
    #[serde(default)]
    pub max_wall: Option<u32>,
}

fn one() -> f64 {
    1.0
}

impl Qos {
    pub fn new(id: u32, name: &str) -> Qos {
        Qos {
            id,
            name: name.to_string(),
            description: String::new(),
            priority: 0,
            usage_factor: 1.0,
            grace_time: 0,
            preempt: BTreeSet::new(),
            preempt_mode: PreemptMode::Cluster,
            preempt_exempt_time: None,
            flags: BTreeSet::new(),
            grp_tres: Tres::default(),
            grp_jobs: None,
            grp_submit_jobs: None,
            grp_wall: None,
            grp_tres_mins: Tres::default(),
            max_tres_per_job: Tres::default(),
            max_tres_per_node: Tres::default(),
            max_tres_per_user: Tres::default(),
            max_jobs_per_user: None,
            max_submit_jobs_per_user: None,
            max_wall: None,
        }
    }

    pub fn has(&self, f: QosFlag) -> bool {
        self.flags.contains(&f)
    }

    /// `Flags` as sacctmgr prints them (empty when none).
    pub fn flags_text(&self) -> String {
        let v: Vec<&str> = self.flags.iter().map(|f| f.name()).collect();
        v.join(",")
    }
}

/// `=` replaces a list, `+=` adds to it, `-=` takes from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListEdit {
    Set(Vec<String>),
    Add(Vec<String>),
    Remove(Vec<String>),
}

impl ListEdit {
    pub fn apply(&self, list: &mut BTreeSet<String>) {
        match self {
            ListEdit::Set(v) => *list = v.iter().cloned().collect(),
            ListEdit::Add(v) => list.extend(v.iter().cloned()),
            ListEdit::Remove(v) => {
                for x in v {
                    list.remove(x);
                }
            }
        }
    }

    pub fn names(&self) -> &[String] {
        match self {
            ListEdit::Set(v) | ListEdit::Add(v) | ListEdit::Remove(v) => v,
        }
    }

    pub fn text(&self) -> String {
        let (op, v) = match self {
            ListEdit::Set(v) => ("", v),
            ListEdit::Add(v) => ("+", v),
            ListEdit::Remove(v) => ("-", v),
        };
        v.iter()
            .map(|n| format!("{op}{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An edit to a [`Qos`] (`sacctmgr add|modify qos ... set ...`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QosEdit {
    pub description: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub priority: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub usage_factor: Edit<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub grace_time: Edit<u32>,
    pub preempt: Option<ListEdit>,
    pub preempt_mode: Option<PreemptMode>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub preempt_exempt_time: Edit<u32>,
    /// Flags: `Set` replaces, `Add`/`Remove` edit (names already checked).
    pub flags: Option<(ListEdit, Vec<QosFlag>)>,
    pub grp_tres: Option<TresEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub grp_jobs: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub grp_submit_jobs: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub grp_wall: Edit<u32>,
    #[serde(default)]
    pub grp_tres_mins: Option<TresEdit>,
    pub max_tres_per_job: Option<TresEdit>,
    pub max_tres_per_node: Option<TresEdit>,
    pub max_tres_per_user: Option<TresEdit>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub max_jobs_per_user: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub max_submit_jobs_per_user: Edit<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::limits::double_option"
    )]
    pub max_wall: Edit<u32>,
}

impl QosEdit {
    pub fn is_empty(&self) -> bool {
        *self == QosEdit::default()
    }

    pub fn apply(&self, q: &mut Qos) {
        fn set<T: Clone>(slot: &mut Option<T>, e: &Edit<T>) {
            if let Some(v) = e {
                *slot = v.clone();
            }
        }
        fn tres(slot: &mut Tres, e: &Option<TresEdit>) {
            if let Some(e) = e {
                e.apply(slot)
            }
        }
        if let Some(d) = &self.description {
            q.description = d.clone();
        }
        if let Some(p) = self.priority {
            q.priority = p.unwrap_or(0);
        }
        if let Some(u) = self.usage_factor {
            q.usage_factor = u.unwrap_or(1.0);
        }
        if let Some(g) = self.grace_time {
            q.grace_time = g.unwrap_or(0);
        }
        if let Some(p) = &self.preempt {
            p.apply(&mut q.preempt);
        }
        if let Some(m) = self.preempt_mode {
            q.preempt_mode = m;
        }
        set(&mut q.preempt_exempt_time, &self.preempt_exempt_time);
        if let Some((how, flags)) = &self.flags {
            match how {
                ListEdit::Set(_) => q.flags = flags.iter().copied().collect(),
                ListEdit::Add(_) => q.flags.extend(flags.iter().copied()),
                ListEdit::Remove(_) => {
                    for f in flags {
                        q.flags.remove(f);
                    }
                }
            }
        }
        tres(&mut q.grp_tres, &self.grp_tres);
        set(&mut q.grp_jobs, &self.grp_jobs);
        set(&mut q.grp_submit_jobs, &self.grp_submit_jobs);
        set(&mut q.grp_wall, &self.grp_wall);
        tres(&mut q.grp_tres_mins, &self.grp_tres_mins);
        tres(&mut q.max_tres_per_job, &self.max_tres_per_job);
        tres(&mut q.max_tres_per_node, &self.max_tres_per_node);
        tres(&mut q.max_tres_per_user, &self.max_tres_per_user);
        set(&mut q.max_jobs_per_user, &self.max_jobs_per_user);
        set(
            &mut q.max_submit_jobs_per_user,
            &self.max_submit_jobs_per_user,
        );
        set(&mut q.max_wall, &self.max_wall);
    }

    /// The settings lines sacctmgr prints for this edit.
    pub fn lines(&self, out: &mut Vec<String>) {
        if let Some(d) = &self.description {
            out.push(format!("  Description    = {d}"));
        }
        if let Some((how, _)) = &self.flags {
            out.push(format!("  Flags          = {}", how.text()));
        }
        if let Some(g) = self.grace_time {
            out.push(format!("  GraceTime      = {}", g.unwrap_or(0)));
        }
        edit_line(out, "GrpJobs        ", &self.grp_jobs);
        edit_line(out, "GrpSubmitJobs  ", &self.grp_submit_jobs);
        tres_line(out, "GrpTRES        ", &self.grp_tres);
        tres_line(out, "GrpTRESMins    ", &self.grp_tres_mins);
        wall_line(out, "GrpWall        ", &self.grp_wall);
        edit_line(out, "MaxJobsPU      ", &self.max_jobs_per_user);
        edit_line(out, "MaxSubmitJobsPU", &self.max_submit_jobs_per_user);
        tres_line(out, "MaxTRES        ", &self.max_tres_per_job);
        tres_line(out, "MaxTRESPerNode ", &self.max_tres_per_node);
        tres_line(out, "MaxTRESPU      ", &self.max_tres_per_user);
        wall_line(out, "MaxWall        ", &self.max_wall);
        if let Some(p) = &self.preempt {
            out.push(format!("  Preempt        = {}", p.text()));
        }
        if let Some(m) = self.preempt_mode {
            out.push(format!("  PreemptMode    = {m}"));
        }
        if let Some(e) = self.preempt_exempt_time {
            let t = e.map_or("NONE".to_string(), |s| {
                crate::model::time::fmt_duration_long(u64::from(s))
            });
            out.push(format!("  PreemptExemptTime = {t}"));
        }
        edit_line(out, "Priority       ", &self.priority);
        if let Some(u) = self.usage_factor {
            out.push(format!("  UsageFactor    = {}", u.unwrap_or(1.0)));
        }
    }
}
