//! What `scontrol create|update|delete reservation`, `scontrol show
//! reservation|licenses` and `sinfo -T` send and get back.

use serde::{Deserialize, Serialize};

use super::types::UnixTime;

/// A reservation as asked for: every field as given on the command line
/// (`None`: not given). Times are absolute: the client reads the clock for
/// `now+1hour` as Slurm's scontrol does, so the controller replays the
/// same request the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResvSpec {
    pub name: Option<String>,
    pub start: Option<UnixTime>,
    pub end: Option<UnixTime>,
    /// `Duration=` in minutes; `Some(None)` is `UNLIMITED`.
    pub duration_min: Option<Option<u32>>,
    pub nodes: Option<String>,
    pub node_cnt: Option<u32>,
    pub partition: Option<String>,
    pub features: Option<String>,
    /// `Users=` as typed; `users_op` says `+=`/`-=`.
    pub users: Option<String>,
    pub users_op: ListOp,
    pub accounts: Option<String>,
    pub accounts_op: ListOp,
    pub flags: Option<String>,
    pub flags_op: ListOp,
    pub licenses: Option<String>,
    /// `TRES=` as typed.
    pub tres: Option<String>,
}

/// `Key=`, `Key+=` or `Key-=`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListOp {
    #[default]
    Set,
    Add,
    Remove,
}

/// One license as `scontrol show licenses` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LicenseInfo {
    pub name: String,
    pub total: u32,
    pub used: u32,
    /// Held by active reservations.
    pub reserved: u32,
}
