//! The actors. Controller side: [`controller`], [`partition`],
//! [`step`]. Every daemon: [`relay`]. Node daemons: [`agent`]. Each file holds
//! one actor and the messages it handles; [`agent_link`] holds the two that
//! pass between a node's relay and agent (so neither imports the other);
//! [`stats`] counts mailbox traffic.

pub mod agent;
pub mod agent_link;
pub mod controller;
pub mod partition;
pub mod registry;
pub mod relay;
pub mod stall;
pub mod stats;
pub mod step;
