//! The operator console's pure cores: what `canopy tree`, `canopy events` (and the other console
//! views) compute from what the controller already holds. No I/O, no clock: `now` is passed in;
//! the controller and CLI shells feed them and print what they return.

pub mod events;
pub mod tree;
