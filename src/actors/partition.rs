//! One actor per partition: admission rules for new jobs (state, time and
//! node-count limits) and the partition's own counters.
//!
//! The controller asks the partition to validate a submission before it
//! assigns a job id, so a job a partition would refuse is never created.

use std::sync::Arc;

use actix::prelude::*;
use serde::Serialize;

use super::stats::ActorStats;
use crate::config::PartitionConf;
use crate::wire::messages::{ErrorCode, ErrorReply};
use crate::wire::types::{JobSubmit, PartitionState};

const MAILBOX: usize = 1024;

/// Check a submission against this partition's limits; on success the
/// resolved time limit (minutes, `None` = UNLIMITED).
#[derive(Message)]
#[rtype(result = "Result<Option<u32>, ErrorReply>")]
pub struct ValidateSubmit(pub Arc<JobSubmit>);

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
    pub accepted: u64,
    pub rejected: u64,
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
                accepted: 0,
                rejected: 0,
            },
            conf,
            stats,
        }
    }

    fn validate(&self, s: &JobSubmit) -> Result<Option<u32>, ErrorReply> {
        let err = |code, message: &str| ErrorReply {
            code,
            message: message.to_string(),
        };
        if matches!(
            self.status.state,
            PartitionState::Drain | PartitionState::Inactive
        ) {
            return Err(err(
                ErrorCode::InvalidPartition,
                "Partition in DRAIN or INACTIVE state, no new jobs accepted",
            ));
        }
        // Minutes; Some(0) from the CLI means "no limit".
        let asked = match s.time_limit_min {
            Some(0) => None,
            Some(m) => Some(m),
            None => self.conf.default_time_min.or(self.conf.max_time_min),
        };
        let over = match (asked, self.conf.max_time_min) {
            (_, None) => false,
            (None, Some(_)) => s.time_limit_min.is_some(),
            (Some(a), Some(max)) => a > max,
        };
        if over {
            return Err(err(
                ErrorCode::InvalidTimeLimit,
                "Requested time limit is invalid (missing or exceeds some limit)",
            ));
        }
        let nodes = s.min_nodes.unwrap_or(1);
        if nodes as usize > self.conf.nodes.len() {
            return Err(err(
                ErrorCode::NodeConfigUnavailable,
                "Requested node configuration is not available",
            ));
        }
        if self.conf.max_nodes.is_some_and(|max| nodes > max) || nodes < self.conf.min_nodes {
            return Err(err(
                ErrorCode::InvalidNodeCount,
                "Node count specification invalid",
            ));
        }
        Ok(asked)
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
    }
}

impl Handler<ValidateSubmit> for PartitionActor {
    type Result = Result<Option<u32>, ErrorReply>;
    fn handle(&mut self, msg: ValidateSubmit, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let r = self.validate(&msg.0);
        match r {
            Ok(_) => self.status.accepted += 1,
            Err(_) => self.status.rejected += 1,
        }
        r
    }
}

impl Handler<JobCounts> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: JobCounts, _ctx: &mut Context<Self>) {
        self.stats.handled();
        self.status.pending = msg.pending;
        self.status.running = msg.running;
    }
}

impl Handler<SetPartitionConf> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: SetPartitionConf, _ctx: &mut Context<Self>) {
        self.stats.handled();
        self.status.state = msg.0.state;
        self.status.nodes = msg.0.nodes.len();
        self.conf = msg.0;
    }
}

impl Handler<GetPartitionStatus> for PartitionActor {
    type Result = MessageResult<GetPartitionStatus>;
    fn handle(&mut self, _msg: GetPartitionStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        MessageResult(self.status.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(max_time: Option<u32>, default_time: Option<u32>) -> PartitionActor {
        let conf = PartitionConf {
            name: "debug".into(),
            nodes: vec!["n1".into(), "n2".into()],
            default: true,
            max_time_min: max_time,
            default_time_min: default_time,
            max_nodes: Some(2),
            min_nodes: 0,
            state: PartitionState::Up,
        };
        PartitionActor::new(Arc::new(conf), ActorStats::new())
    }

    fn job(t: Option<u32>, nodes: Option<u32>) -> JobSubmit {
        JobSubmit {
            time_limit_min: t,
            min_nodes: nodes,
            ..Default::default()
        }
    }

    #[test]
    fn time_limits_resolve_and_are_enforced() {
        let p = part(Some(60), Some(10));
        assert_eq!(p.validate(&job(None, None)), Ok(Some(10)));
        assert_eq!(p.validate(&job(Some(30), None)), Ok(Some(30)));
        let e = p.validate(&job(Some(61), None)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidTimeLimit);
        // Asking for no limit on a limited partition exceeds it.
        assert!(p.validate(&job(Some(0), None)).is_err());
        let open = part(None, None);
        assert_eq!(open.validate(&job(None, None)), Ok(None));
        assert_eq!(open.validate(&job(Some(0), None)), Ok(None));
        assert_eq!(
            part(Some(60), None).validate(&job(None, None)),
            Ok(Some(60))
        );
    }

    #[test]
    fn node_counts_are_checked() {
        let p = part(None, None);
        assert_eq!(
            p.validate(&job(None, Some(3))).unwrap_err().code,
            ErrorCode::NodeConfigUnavailable
        );
        assert!(p.validate(&job(None, Some(2))).is_ok());
    }
}
