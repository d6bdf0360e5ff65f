//! What sprio and sshare ask the controller, and what it answers: each
//! pending job's priority factors, and each association's shares and
//! usage. The clients lay them out; the controller computes them.

use serde::{Deserialize, Serialize};

/// `sprio`'s question; empty lists mean all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityQuery {
    pub job_ids: Vec<u32>,
    pub users: Vec<String>,
    pub partitions: Vec<String>,
}

/// One pending job's factors: normalised (`sprio -n`) and its priority.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobFactors {
    pub job_id: u32,
    pub partition: String,
    pub user: String,
    pub account: String,
    pub qos: String,
    pub priority: u32,
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition_factor: f64,
    pub qos_factor: f64,
    pub nice: i32,
    pub site: u32,
    /// (lower-case TRES name, normalised factor).
    pub tres: Vec<(String, f64)>,
}

/// The weights, for `sprio -w` and for weighting the factors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityWeights {
    pub age: u32,
    pub assoc: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub partition: u32,
    pub qos: u32,
    /// (lower-case TRES name, weight).
    pub tres: Vec<(String, f64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityReport {
    /// `false` under priority/basic: sprio refuses, as Slurm's does.
    pub multifactor: bool,
    pub priority_type: String,
    pub weights: PriorityWeights,
    pub jobs: Vec<JobFactors>,
}

/// `sshare`'s question.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShareQuery {
    pub accounts: Vec<String>,
    pub users: Vec<String>,
    /// `-a`: every user's rows (otherwise only `users`, or the caller's).
    pub all_users: bool,
}

/// One association, in sshare's listing order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShareRow {
    /// 0 for root; sshare indents the account name by it.
    pub depth: u32,
    pub account: String,
    /// Empty for an account's own row.
    pub user: String,
    /// `None` for root.
    pub raw_shares: Option<u32>,
    pub norm_shares: f64,
    pub raw_usage: f64,
    pub norm_usage: f64,
    pub effective_usage: f64,
    /// `None` where Slurm leaves it blank (accounts under Fair Tree, root).
    pub fairshare: Option<f64>,
    /// `None` for root and under classic fair share.
    pub level_fs: Option<f64>,
    /// Running jobs' remaining TRES-minutes (`cpu=N,mem=N,...`), for
    /// `TRESRunMins`.
    pub tres_run_mins: String,
    /// The association's `GrpTRESMins` (`cpu=100`; empty when unset).
    #[serde(default)]
    pub grp_tres_mins: String,
    /// Its decayed usage in TRES-minutes, for `GrpTRESRaw`.
    #[serde(default)]
    pub grp_tres_raw: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShareReport {
    pub multifactor: bool,
    pub rows: Vec<ShareRow>,
}
