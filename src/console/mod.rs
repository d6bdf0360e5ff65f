//! The operator console's pure cores (issue 18): what `canopy tree`, `canopy events`,
//! `canopy top`, `canopy stats`, `canopy exec`, `canopy ping`, `canopy trace` and
//! `canopy debug` compute, without I/O or clocks (`now` is passed in), so that they are tested
//! on their own. The relays, the daemons and the CLI carry their inputs and outputs.

pub mod debug;
pub mod events;
pub mod exec_access;
pub mod fold;
pub mod latency;
pub mod top;
pub mod trace;
pub mod tree;
