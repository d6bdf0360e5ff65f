//! The controller's handlers for reservations and licenses: `scontrol
//! create|update|delete reservation` go through the core; `scontrol show
//! reservation|licenses` and `sinfo -T` read it.

use actix::prelude::*;

use super::ControllerActor;
use crate::ctld::{Command, Reply};
use crate::model::reservation::Reservation;
use crate::policy::authz::Caller;
use crate::wire::messages::{ErrorCode, ErrorReply};
use crate::wire::resv::{LicenseInfo, ResvSpec};

/// `scontrol create reservation`: the new reservation's name.
#[derive(Message)]
#[rtype(result = "Result<String, ErrorReply>")]
pub struct CreateResv {
    pub spec: ResvSpec,
    pub caller: Caller,
}

/// `scontrol update reservation`.
#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct UpdateResv {
    pub spec: ResvSpec,
    pub caller: Caller,
}

/// `scontrol delete reservation`.
#[derive(Message)]
#[rtype(result = "Result<(), ErrorReply>")]
pub struct DeleteResv {
    pub name: String,
    pub caller: Caller,
}

/// Every reservation; with `PrivateData=reservations`, a user other than
/// an operator sees only those that admit them.
#[derive(Message)]
#[rtype(result = "Vec<Reservation>")]
pub struct GetReservations {
    pub caller: Caller,
    /// The caller's user name.
    pub user: String,
}

#[derive(Message)]
#[rtype(result = "Vec<LicenseInfo>")]
pub struct GetLicenses;

fn gone() -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message: "could not save the reservation".into(),
    }
}

impl Handler<CreateResv> for ControllerActor {
    type Result = ResponseFuture<Result<String, ErrorReply>>;
    fn handle(&mut self, msg: CreateResv, ctx: &mut Context<Self>) -> Self::Result {
        let done = self.run(
            Command::CreateResv {
                spec: msg.spec,
                caller: msg.caller,
            },
            ctx,
        );
        Box::pin(async move {
            match done.await {
                Some(Reply::Resv(r)) => r,
                _ => Err(gone()),
            }
        })
    }
}

impl Handler<UpdateResv> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: UpdateResv, ctx: &mut Context<Self>) -> Self::Result {
        let done = self.run(
            Command::UpdateResv {
                spec: msg.spec,
                caller: msg.caller,
            },
            ctx,
        );
        Box::pin(async move {
            match done.await {
                Some(Reply::Done(r)) => r,
                _ => Err(gone()),
            }
        })
    }
}

impl Handler<DeleteResv> for ControllerActor {
    type Result = ResponseFuture<Result<(), ErrorReply>>;
    fn handle(&mut self, msg: DeleteResv, ctx: &mut Context<Self>) -> Self::Result {
        let done = self.run(
            Command::DeleteResv {
                name: msg.name,
                caller: msg.caller,
            },
            ctx,
        );
        Box::pin(async move {
            match done.await {
                Some(Reply::Done(r)) => r,
                _ => Err(gone()),
            }
        })
    }
}

impl Handler<GetReservations> for ControllerActor {
    type Result = MessageResult<GetReservations>;
    fn handle(&mut self, msg: GetReservations, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let mut all = self.core.reservations();
        if self.core.conf().private_data.reservations && !msg.caller.operator {
            all.retain(|r| r.users.admits(&msg.user));
        }
        MessageResult(all)
    }
}

impl Handler<GetLicenses> for ControllerActor {
    type Result = MessageResult<GetLicenses>;
    fn handle(&mut self, _msg: GetLicenses, _ctx: &mut Context<Self>) -> Self::Result {
        let _busy = self.stats.handled();
        let now = chrono::Utc::now().timestamp();
        MessageResult(self.core.license_infos(now))
    }
}
