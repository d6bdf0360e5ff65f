//! The domain model, at the bottom of the crate: jobs, their states,
//! pending reasons, dependencies and accounting records; nodes and
//! partitions; signals and time.
//!
//! Plain data and the rules that belong to the data itself (naming a state,
//! parsing a dependency). It depends on nothing else in canopy: the wire
//! protocol carries these types, the store persists them, the scheduler and
//! the controller core decide with them, and the node daemon runs them.

pub mod acct;
pub mod assoc;
pub mod binding;
pub mod dependency;
pub mod job;
pub mod node;
pub mod part_opts;
pub mod partition;
pub mod reason;
pub mod reservation;
pub mod signal;
pub mod state;
pub mod time;
pub mod tres;
