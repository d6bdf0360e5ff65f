//! The operator console's pure cores: what `canopy ping`, `canopy trace` and
//! `canopy debug` compute from the stamps and records the relays keep. No I/O
//! and no clock here (`now` is passed in); the relay, the controller's RPC
//! layer and the CLI are the shells around them.

pub mod debug;
pub mod trace;
