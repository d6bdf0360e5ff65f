//! Domain vocabulary at the bottom of the crate: small facts about Slurm's world
//! (for now, signal names) that the actors and the commands both print. It depends on
//! nothing else in canopy, so any module may use it without creating a cycle; it holds
//! no state and does no I/O.

pub mod signal;
