//! Job priorities: `basic` (priority/basic's count-down, the default),
//! `multifactor` (priority/multifactor's weighted factors) and `fairshare`
//! (Fair Tree and classic fair share over an association tree). All pure:
//! the controller core passes `now` and the inputs.

pub mod basic;
pub mod fairshare;
pub mod multifactor;

pub use basic::{BasicPriority, TOP_PRIORITY};
