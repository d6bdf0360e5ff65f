//! One actor per partition: its configuration and counters, as `canopy
//! status` shows them. Admission to the partition is decided by the one
//! policy check (`policy::admission`) in the controller core.

use std::sync::Arc;

use actix::prelude::*;
use serde::Serialize;

use super::stats::ActorStats;
use crate::config::PartitionConf;
use crate::model::partition::PartitionState;

const MAILBOX: usize = 1024;

/// The controller's count of this partition's jobs changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct JobCounts {
    pub pending: u32,
    pub running: u32,
}

#[derive(Message)]
#[rtype(result = "PartitionStatus")]
pub struct GetPartitionStatus;

/// `scontrol reconfigure`: the partition's new limits, state and nodes.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetPartitionConf(pub Arc<PartitionConf>);

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionStatus {
    pub name: String,
    pub state: PartitionState,
    pub nodes: usize,
    pub pending: u32,
    pub running: u32,
}

pub struct PartitionActor {
    conf: Arc<PartitionConf>,
    status: PartitionStatus,
    stats: Arc<ActorStats>,
}

impl PartitionActor {
    pub fn new(conf: Arc<PartitionConf>, stats: Arc<ActorStats>) -> Self {
        PartitionActor {
            status: PartitionStatus {
                name: conf.name.clone(),
                state: conf.state,
                nodes: conf.nodes.len(),
                pending: 0,
                running: 0,
            },
            conf,
            stats,
        }
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
    }
}

impl Handler<JobCounts> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: JobCounts, _ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        self.status.pending = msg.pending;
        self.status.running = msg.running;
    }
}

impl Handler<SetPartitionConf> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: SetPartitionConf, _ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        self.status.state = msg.0.state;
        self.status.nodes = msg.0.nodes.len();
        self.conf = msg.0;
    }
}

impl Handler<GetPartitionStatus> for PartitionActor {
    type Result = MessageResult<GetPartitionStatus>;
    fn handle(&mut self, _msg: GetPartitionStatus, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.status.clone())
    }
}
