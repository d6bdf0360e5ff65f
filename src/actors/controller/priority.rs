//! sprio's and sshare's questions to the controller: read-only views the
//! core computes (`ctld/priority.rs`) at the time they are asked.

use actix::prelude::*;

use super::ControllerActor;
use crate::policy::authz::Caller;
use crate::wire::priority::{PriorityQuery, PriorityReport, ShareQuery, ShareReport};

/// sprio: pending jobs' priority factors.
#[derive(Message)]
#[rtype(result = "PriorityReport")]
pub struct GetPriority {
    pub query: PriorityQuery,
    /// `PrivateData=jobs` hides others' jobs, as in squeue.
    pub caller: Caller,
}

/// sshare: associations' shares and usage.
#[derive(Message)]
#[rtype(result = "ShareReport")]
pub struct GetShares {
    pub query: ShareQuery,
}

impl Handler<GetPriority> for ControllerActor {
    type Result = MessageResult<GetPriority>;
    fn handle(&mut self, msg: GetPriority, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let now = chrono::Utc::now().timestamp();
        MessageResult(self.core.priority_report(&msg.query, msg.caller, now))
    }
}

impl Handler<GetShares> for ControllerActor {
    type Result = MessageResult<GetShares>;
    fn handle(&mut self, msg: GetShares, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.core.share_report(&msg.query, None))
    }
}
