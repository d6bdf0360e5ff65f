//! The two messages between a node daemon's relay and its node agent: the
//! relay hands the agent the commands addressed to this node, and the agent
//! hands the relay what it sends toward the controller.
//!
//! They live here, not in `relay.rs` or `agent.rs`, so that neither actor
//! names the other: each holds a `Recipient` of the message it sends.

use actix::prelude::*;

use crate::wire::messages::{Body, NodeCommand, NodeReply};

/// Run one fanned-out command on this node (handled by the node agent).
#[derive(Message)]
#[rtype(result = "Result<NodeReply, String>")]
pub struct RunCommand(pub NodeCommand);

/// Something the local node agent wants sent to the controller (handled by
/// the relay).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SendUp(pub Body);
