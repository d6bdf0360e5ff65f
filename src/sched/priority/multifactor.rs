//! priority/multifactor: a job's priority is the weighted sum of nine
//! factors, as Slurm computes it:
//!
//! `priority = site + Wage·age + Wassoc·assoc + Wfs·fairshare + Wjs·jobsize
//!  + Wpart·partition + Wqos·qos + Σ Wtres·tres − nice`, at least 1 (0 is
//! held) and at most 2³²−1. Each factor is in [0, 1] unless a `NO_NORMAL_*`
//! flag keeps it raw. Pure: the caller passes the job's shape, the
//! cluster's, the fair-share factor and `now`.

use serde::{Deserialize, Serialize};

use crate::config::priority::PriorityConf;
use crate::model::time::UnixTime;

/// One job, as far as its priority is concerned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobShape {
    pub submit_time: UnixTime,
    /// When the job became eligible (age counts from here unless
    /// `ACCRUE_ALWAYS`); `None`: not eligible, no age.
    pub accrue_time: Option<UnixTime>,
    pub min_nodes: u32,
    /// Allocated CPUs once started, requested before.
    pub cpus: u32,
    /// Minutes; `None`: the partition's limit applies.
    pub time_limit_min: Option<u32>,
    pub nice: i32,
    /// TRES counts by Slurm name (`CPU`, `Mem` in MB, `Node`, `GRES/gpu`).
    pub tres: Vec<(String, f64)>,
    /// The partition's `PriorityJobFactor`.
    pub part_job_factor: u16,
    /// The QOS's and the association's `Priority` (0 when none).
    pub qos_priority: u32,
    pub assoc_priority: u32,
}

/// What the job's factors are normalised against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterShape {
    pub nodes: u32,
    pub cpus: u32,
    /// The highest `PriorityJobFactor` of any partition.
    pub max_part_job_factor: u16,
    /// The highest QOS and association `Priority`.
    pub max_qos_priority: u32,
    pub max_assoc_priority: u32,
    /// The job's partition's `MaxTime` in minutes (`None`: unlimited).
    pub part_max_time_min: Option<u32>,
    /// The job's partition's TRES totals, by Slurm name.
    pub part_tres: Vec<(String, f64)>,
}

/// A job's factors, each normalised (before weights).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
    /// Per TRES with a weight: (lower-case name as sprio prints it, factor).
    pub tres: Vec<(String, f64)>,
    pub nice: i32,
    pub site: u32,
}

impl Factors {
    /// The factors times their weights.
    pub fn weighted(&self, conf: &PriorityConf) -> Factors {
        Factors {
            age: self.age * f64::from(conf.weight_age),
            assoc: self.assoc * f64::from(conf.weight_assoc),
            fairshare: self.fairshare * f64::from(conf.weight_fairshare),
            job_size: self.job_size * f64::from(conf.weight_job_size),
            partition: self.partition * f64::from(conf.weight_partition),
            qos: self.qos * f64::from(conf.weight_qos),
            tres: self
                .tres
                .iter()
                .map(|(n, f)| (n.clone(), f * tres_weight(conf, n)))
                .collect(),
            nice: self.nice,
            site: self.site,
        }
    }

    /// The priority: the weighted sum, clamped to [1, 2³²−1].
    pub fn priority(&self, conf: &PriorityConf) -> u32 {
        let w = self.weighted(conf);
        let sum = f64::from(w.site)
            + w.age
            + w.assoc
            + w.fairshare
            + w.job_size
            + w.partition
            + w.qos
            + w.tres.iter().map(|(_, v)| v).sum::<f64>()
            - f64::from(w.nice);
        if sum < 1.0 || sum.is_nan() {
            1
        } else if sum >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            sum as u32
        }
    }
}

fn tres_weight(conf: &PriorityConf, lower: &str) -> f64 {
    conf.weight_tres
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(lower))
        .map_or(0.0, |(_, w)| *w)
}

fn count(tres: &[(String, f64)], name: &str) -> f64 {
    tres.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or(0.0, |(_, c)| *c)
}

/// Age: time eligible over `PriorityMaxAge`, at most 1.
pub fn age_factor(conf: &PriorityConf, job: &JobShape, now: UnixTime) -> f64 {
    let from = if conf.flags.accrue_always {
        Some(job.submit_time)
    } else {
        job.accrue_time
    };
    let Some(from) = from else {
        return 0.0;
    };
    let waited = (now - from).max(0) as f64;
    if conf.max_age_s == 0 || waited >= conf.max_age_s as f64 {
        1.0
    } else {
        waited / conf.max_age_s as f64
    }
}

/// Job size: by default larger is better, `(nodes/N + cpus/C)/2`;
/// `PriorityFavorSmall` inverts each part; `SMALL_RELATIVE_TO_TIME` uses
/// CPUs per minute of time limit over the cluster's CPUs.
pub fn job_size_factor(conf: &PriorityConf, job: &JobShape, cluster: &ClusterShape) -> f64 {
    let nodes = f64::from(cluster.nodes.max(1));
    let cpus = f64::from(cluster.cpus.max(1));
    let min_nodes = f64::from(job.min_nodes.max(1));
    let cpu_cnt = f64::from(job.cpus);
    let f = if conf.flags.small_relative_to_time {
        // CPUs: at least the job's nodes' share of the cluster's.
        let size = (min_nodes * cpus / nodes).max(cpu_cnt);
        let limit = job
            .time_limit_min
            .or(cluster.part_max_time_min)
            .unwrap_or(1)
            .max(1);
        let f = size / f64::from(limit) / cpus;
        if conf.favor_small {
            1.0 - f
        } else {
            f
        }
    } else if conf.favor_small {
        let mut f = (nodes - min_nodes) / nodes;
        if cpu_cnt > 0.0 {
            f = (f + (cpus - cpu_cnt) / cpus) / 2.0;
        }
        f
    } else {
        let mut f = min_nodes / nodes;
        if cpu_cnt > 0.0 {
            f = (f + cpu_cnt / cpus) / 2.0;
        }
        f
    };
    f.clamp(0.0, 1.0)
}

/// `value / max`, or `value` itself when `raw` (a `NO_NORMAL_*` flag).
fn normal(value: f64, max: f64, raw: bool) -> f64 {
    if raw {
        value
    } else if max > 0.0 {
        value / max
    } else {
        0.0
    }
}

/// Every factor of one job.
pub fn factors(
    conf: &PriorityConf,
    job: &JobShape,
    cluster: &ClusterShape,
    fairshare: f64,
    now: UnixTime,
) -> Factors {
    let fl = &conf.flags;
    let tres = conf
        .weight_tres
        .iter()
        .map(|(name, _)| {
            let have = count(&job.tres, name);
            let f = normal(have, count(&cluster.part_tres, name), fl.no_normal_tres);
            (name.to_ascii_lowercase(), f)
        })
        .collect();
    Factors {
        age: age_factor(conf, job, now),
        assoc: normal(
            f64::from(job.assoc_priority),
            f64::from(cluster.max_assoc_priority),
            fl.no_normal_assoc,
        ),
        fairshare,
        job_size: job_size_factor(conf, job, cluster),
        partition: normal(
            f64::from(job.part_job_factor),
            f64::from(cluster.max_part_job_factor),
            fl.no_normal_part,
        ),
        qos: normal(
            f64::from(job.qos_priority),
            f64::from(cluster.max_qos_priority),
            fl.no_normal_qos,
        ),
        tres,
        nice: job.nice,
        site: 0,
    }
}

/// Billing, what usage is counted in: `Σ weight × count` over
/// `TRESBillingWeights`; with `MAX_TRES`, the largest weighted node TRES
/// (CPU, memory, nodes, GRES) plus the others summed; with no weights,
/// the job's CPUs (Slurm's default).
pub fn billing(weights: &[(String, f64)], tres: &[(String, f64)], max_tres: bool) -> f64 {
    if weights.is_empty() {
        return count(tres, "CPU");
    }
    let (mut node_max, mut sum) = (0f64, 0f64);
    for (name, w) in weights {
        let v = w * count(tres, name);
        let per_node = matches!(name.as_str(), "CPU" | "Mem" | "Node") || name.starts_with("GRES/");
        if max_tres && per_node {
            node_max = node_max.max(v);
        } else {
            sum += v;
        }
    }
    node_max + sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::priority::PriorityConf;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn cluster() -> ClusterShape {
        ClusterShape {
            nodes: 10,
            cpus: 80,
            max_part_job_factor: 4,
            max_qos_priority: 0,
            max_assoc_priority: 0,
            part_max_time_min: Some(600),
            part_tres: vec![
                ("CPU".into(), 80.0),
                ("Mem".into(), 10_000.0),
                ("GRES/gpu".into(), 8.0),
            ],
        }
    }

    fn job() -> JobShape {
        JobShape {
            submit_time: 1000,
            accrue_time: Some(1000),
            min_nodes: 2,
            cpus: 16,
            time_limit_min: Some(60),
            nice: 0,
            tres: vec![
                ("CPU".into(), 16.0),
                ("Mem".into(), 2000.0),
                ("GRES/gpu".into(), 2.0),
            ],
            part_job_factor: 1,
            qos_priority: 0,
            assoc_priority: 0,
        }
    }

    #[test]
    fn age_is_eligible_time_over_max_age() {
        let mut c = PriorityConf {
            max_age_s: 1000,
            ..Default::default()
        };
        let mut j = job();
        assert!(close(age_factor(&c, &j, 1250), 0.25));
        assert!(close(age_factor(&c, &j, 5000), 1.0));
        // Not eligible (held): no age, unless ACCRUE_ALWAYS.
        j.accrue_time = None;
        assert_eq!(age_factor(&c, &j, 1250), 0.0);
        c.flags.accrue_always = true;
        assert!(close(age_factor(&c, &j, 1500), 0.5));
    }

    #[test]
    fn job_size_by_slurms_three_formulas() {
        let mut c = PriorityConf::default();
        let (j, cl) = (job(), cluster());
        // Favor large: (2/10 + 16/80)/2 = 0.2.
        assert!(close(job_size_factor(&c, &j, &cl), 0.2));
        // Favor small: ((10-2)/10 + (80-16)/80)/2 = 0.8.
        c.favor_small = true;
        assert!(close(job_size_factor(&c, &j, &cl), 0.8));
        // Relative to time: max(2*80/10, 16) = 16 CPUs / 60 min / 80.
        c.favor_small = false;
        c.flags.small_relative_to_time = true;
        assert!(close(job_size_factor(&c, &j, &cl), 16.0 / 60.0 / 80.0));
        c.favor_small = true;
        assert!(close(
            job_size_factor(&c, &j, &cl),
            1.0 - 16.0 / 60.0 / 80.0
        ));
    }

    #[test]
    fn weighted_sum_partition_tres_nice_and_clamps() {
        let c = PriorityConf {
            max_age_s: 1000,
            weight_age: 1000,
            weight_fairshare: 10_000,
            weight_job_size: 100,
            weight_partition: 1000,
            weight_tres: vec![("CPU".into(), 1000.0), ("GRES/gpu".into(), 4000.0)],
            ..Default::default()
        };
        let mut j = job();
        j.nice = 50;
        let f = factors(&c, &j, &cluster(), 0.5, 1500);
        assert!(close(f.partition, 0.25));
        assert_eq!(
            f.tres,
            vec![("cpu".to_string(), 0.2), ("gres/gpu".to_string(), 0.25)]
        );
        // 500 + 5000 + 20 + 250 + (200 + 1000) - 50.
        assert_eq!(f.priority(&c), 6920);
        // NO_NORMAL_PART: the raw PriorityJobFactor.
        let mut raw = c.clone();
        raw.flags.no_normal_part = true;
        assert!(close(
            factors(&raw, &j, &cluster(), 0.5, 1500).partition,
            1.0
        ));
        // Never below 1 (0 is held).
        j.nice = 1_000_000;
        assert_eq!(factors(&c, &j, &cluster(), 0.5, 1500).priority(&c), 1);
    }

    #[test]
    fn qos_and_association_priorities_are_normalised_to_the_largest() {
        let mut c = PriorityConf {
            weight_qos: 1000,
            weight_assoc: 500,
            ..Default::default()
        };
        let mut j = job();
        j.qos_priority = 25;
        j.assoc_priority = 10;
        let mut cl = cluster();
        cl.max_qos_priority = 100;
        cl.max_assoc_priority = 40;
        let f = factors(&c, &j, &cl, 0.0, 1000);
        assert!(close(f.qos, 0.25) && close(f.assoc, 0.25));
        // 250 + 125.
        assert_eq!(f.priority(&c), 375);
        // NO_NORMAL_QOS / NO_NORMAL_ASSOC: the raw values.
        c.flags.no_normal_qos = true;
        c.flags.no_normal_assoc = true;
        let f = factors(&c, &j, &cl, 0.0, 1000);
        assert!(close(f.qos, 25.0) && close(f.assoc, 10.0));
        // No QOS has a priority: the factor is 0, not a division by zero.
        c.flags = Default::default();
        cl.max_qos_priority = 0;
        assert_eq!(factors(&c, &j, &cl, 0.0, 1000).qos, 0.0);
    }

    #[test]
    fn billing_defaults_to_cpus_and_max_tres_takes_the_largest() {
        let t = vec![
            ("CPU".to_string(), 4.0),
            ("Mem".to_string(), 8192.0),
            ("GRES/gpu".into(), 1.0),
        ];
        assert_eq!(billing(&[], &t, false), 4.0);
        let w = vec![
            ("CPU".to_string(), 1.0),
            ("Mem".to_string(), 0.25 / 1024.0),
            ("GRES/gpu".to_string(), 2.0),
        ];
        assert!(close(billing(&w, &t, false), 4.0 + 2.0 + 2.0));
        assert!(close(billing(&w, &t, true), 4.0));
    }
}
