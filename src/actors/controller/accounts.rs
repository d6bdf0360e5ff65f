//! sacctmgr's requests to the controller: changes go through the core
//! (and the store, before the reply); queries read the database.

use actix::prelude::*;

use super::{ControllerActor, Reply};
use crate::ctld::Command;
use crate::model::assoc::edit::{Outcome, Refused};
use crate::model::assoc::request::AcctRequest;
use crate::model::assoc::AssocDb;
use crate::policy::authz::Caller;

/// sacctmgr add/modify/delete.
#[derive(Message)]
#[rtype(result = "Result<Outcome, Refused>")]
pub struct AccountsChange {
    pub req: AcctRequest,
    pub commit: bool,
    /// The caller's user name (its AdminLevel decides).
    pub user: String,
    pub caller: Caller,
}

/// sacctmgr show/list.
#[derive(Message)]
#[rtype(result = "AssocDb")]
pub struct GetAccounts;

impl Handler<AccountsChange> for ControllerActor {
    type Result = ResponseFuture<Result<Outcome, Refused>>;
    fn handle(&mut self, msg: AccountsChange, ctx: &mut Context<Self>) -> Self::Result {
        let cmd = Command::Accounts {
            req: Box::new(msg.req),
            commit: msg.commit,
            user: msg.user,
            caller: msg.caller,
        };
        let gone = Refused {
            lines: vec![" Error with request: controller is shutting down".into()],
        };
        let done = self.run(cmd, ctx);
        Box::pin(async move {
            match done.await {
                Some(Reply::Accounts(r)) => r,
                _ => Err(gone),
            }
        })
    }
}

impl Handler<GetAccounts> for ControllerActor {
    type Result = MessageResult<GetAccounts>;
    fn handle(&mut self, _msg: GetAccounts, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        MessageResult(self.core.accounts().clone())
    }
}
