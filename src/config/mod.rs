//! canopy's configuration: the slurm.conf-syntax file every daemon and command reads, turned
//! into a validated [`Config`] whose errors and warnings name `file:line`.
//!
//! This module owns the meaning of keys: which ones canopy uses, which real Slurm keys it
//! accepts but ignores (kept with their values, so a site's existing file still loads,
//! `scontrol show` prints what it says, and `ignored` names each one that changes what
//! Slurm would do), how Slurm's reader ranks two spellings of one value, node and
//! partition lines (DEFAULT accumulation, hostlists, per-node address and port lists,
//! DownNodes, NodeSet) and cross-line validation. The lexical rules (comments, quotes,
//! continuations, `Include`) live in `parse`; hostlists and unit formats in [`hostlist`]
//! and [`units`]. It does not resolve host names, open sockets, expand `%n`/`%h` in
//! SlurmdSpoolDir (the node daemon does), or read cgroup.conf. gres.conf, beside slurm.conf,
//! is read with it and merged with the nodes' `Gres=` in [`gres`].
//!
//! Layout: `types` (the [`Config`] API), `keys` (the used and ignored key tables), `ignored`
//! (which ignored keys change behaviour, and the summary of them), `build` (lines into a
//! `Config`, value by value), `topology` (a node line's CPUs and sockets, by Slurm's rules),
//! `resolve` (defaults and checks that need the whole file), `check` (what
//! `canopy-ctld --check` reports), `tests`.

mod build;
pub mod cgroup;
pub mod dynamic;
pub mod gres;
pub mod hostlist;
pub mod ignored;
mod keys;
mod parse;
mod partopts;
pub mod power;
mod precedence;
pub mod preempt;
pub mod priority;
mod resolve;
pub mod sched;
mod topology;
mod types;
pub mod units;

#[cfg(test)]
mod reader_tests;
#[cfg(test)]
mod tests;

pub use gres::{AutoDetect, GresConfig, GresDevice, GresPool, NodeGres, NodeGresItem};
pub use ignored::{IgnoredSetting, Impact, Notice, Summary};
pub use sched::SchedConf;
pub use types::{
    AcctEnforce, ConfNodeState, Config, ConfigError, NodeConf, PartitionAccess, PartitionConf,
    PrivateData, PrologConf, RateLimitConf, DEFAULT_CONF_PATH, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SCRIPT_SIZE, MAX_JOB_ID,
};
