//! canopy: a Slurm-compatible cluster workload manager built as an actor runtime.
//!
//! # Layout
//! - [`config`]: slurm.conf-syntax parsing, hostlists, durations and sizes.
//! - [`wire`]: frames, HMAC credentials, the typed envelope, the one `Connection`.
//! - [`tree`]: pure relay-tree arithmetic: topology, target splitting, outcome
//!   collection, subtree health. No I/O.
//! - [`sched`]: pure placement of jobs on nodes with consumable CPUs and memory.
//! - [`state`]: the sled store with group commit, and the persisted job record.
//! - [`actors`]: controller, partition, node and step actors (controller side),
//!   the relay shared by every daemon, and the node agent that runs jobs.
//! - [`exec`]: running batch scripts as real processes, their environment and
//!   output file names.
//! - [`daemon`]: the controller and node daemon entry points and their links.
//! - [`cli`]: the Slurm-compatible commands and `canopy` operator commands
//!   (`cli::cluster`: `canopy cluster up/down`, a local cluster on loopback).
//! - [`model`]: domain vocabulary shared by actors and commands (signal names).
//! - [`sim`]: many production node daemons in one process, for load tests.

pub mod actors;
pub mod authd;
pub mod cli;
pub mod config;
pub mod console;
pub mod ctld;
pub mod daemon;
pub mod exec;
pub mod mail;
pub mod model;
pub mod policy;
pub mod sched;
pub mod sim;
pub mod state;
pub mod tree;
pub mod wire;
