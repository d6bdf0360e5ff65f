//! The actors. Controller side: [`controller`], [`partition`], [`node`],
//! [`step`]. Every daemon: [`relay`]. Node daemons: [`agent`]. Each file holds
//! one actor and the messages it handles; [`stats`] counts mailbox traffic.

pub mod agent;
pub mod controller;
pub mod node;
pub mod partition;
pub mod relay;
pub mod stats;
pub mod step;
