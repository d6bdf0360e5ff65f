//! How a node runs a job: real processes, the Slurm environment, and output
//! file patterns; the per-job supervisors that start them off the event
//! loop, and the spool records a restarted daemon finds them by. Nothing
//! here talks to the network.

pub mod abort;
pub mod bind;
pub mod contain;
pub mod env;
pub mod hw;
pub mod identity;
pub mod leaf;
pub mod multiprog;
pub mod pattern;
pub mod process;
pub mod prolog;
pub mod pty;
pub mod record;
pub mod remote;
pub mod supervisor;
pub mod tasks;
