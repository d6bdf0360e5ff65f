//! The operator console's pure cores: what the `canopy` operator views
//! compute, without I/O or a clock, so they are tested on their own. The
//! actors and the CLI are thin shells around them.

pub mod exec_access;
pub mod fold;
