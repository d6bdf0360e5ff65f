//! The operator console's pure cores (issue 18): what `canopy top`,
//! `canopy stats` and the other console views compute, without I/O or
//! clocks, so that they are tested against oracles. The daemons and the CLI
//! carry their inputs and outputs.

pub mod latency;
pub mod top;
