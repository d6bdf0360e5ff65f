//! One actor per configured node, in the controller: the node's health and
//! admin state machine (registration, not responding, DOWN after
//! SlurmdTimeout, DRAIN/RESUME by an operator).
//!
//! Its output is a [`NodeStatus`] pushed to the controller on every change, so
//! the scheduler and `sinfo` read a cache instead of asking 10,000 actors.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::stats::{ActorStats, Counted};
use crate::config::{ConfNodeState, NodeConf};
use crate::wire::messages::{Hello, NodeUpdateState};

pub use crate::model::node::{AdminState, NodeStatus, Reason};

const MAILBOX: usize = 256;

/// Pushed to the controller whenever a node's status changes.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct NodeChanged {
    pub status: NodeStatus,
    /// The node just went DOWN: its jobs have failed.
    pub lost: bool,
    /// Set on (re-)registration: the jobs the node reports, to reconcile.
    pub registration: Option<Hello>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Registered {
    pub hello: Hello,
    pub via: Option<u32>,
}

/// Reachability through the relay tree changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reachable(pub bool);

#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct AdminUpdate {
    pub state: NodeUpdateState,
    pub reason: Option<String>,
    pub user: String,
}

#[derive(Message)]
#[rtype(result = "NodeStatus")]
pub struct GetNodeStatus;

/// `scontrol reconfigure`: the node's configured attributes and the
/// cluster-wide settings a node actor applies. Its state (DOWN, DRAIN...)
/// is the running one and is kept.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetNodeConf {
    pub conf: Arc<NodeConf>,
    pub slurmd_timeout: Duration,
    pub return_to_service: u8,
}

pub struct NodeActor {
    conf: Arc<NodeConf>,
    status: NodeStatus,
    slurmd_timeout: Duration,
    return_to_service: u8,
    /// Bumped on every reachability change so stale timeout checks are ignored.
    epoch: u64,
    controller: Counted<NodeChanged>,
    stats: Arc<ActorStats>,
}

impl NodeActor {
    pub fn new(
        rank: u32,
        conf: Arc<NodeConf>,
        admin: AdminState,
        slurmd_timeout: Duration,
        return_to_service: u8,
        controller: Counted<NodeChanged>,
        stats: Arc<ActorStats>,
    ) -> Self {
        let mut admin = admin;
        let now = chrono::Utc::now().timestamp();
        let reason = |text: &str| Reason {
            text: conf.reason.clone().unwrap_or_else(|| text.to_string()),
            user: "root".into(),
            time: now,
        };
        match conf.state {
            ConfNodeState::Down | ConfNodeState::Fail if admin.down.is_none() => {
                admin.down = Some(reason("Configured DOWN"))
            }
            ConfNodeState::Drain if admin.drain.is_none() => {
                admin.drain = Some(reason("Configured DRAIN"))
            }
            _ => {}
        }
        NodeActor {
            status: NodeStatus {
                rank,
                registered: false,
                boot_id: 0,
                responding: false,
                admin,
                resources: None,
                boot_time: None,
                attached_to: None,
                future: conf.state == ConfNodeState::Future,
            },
            conf,
            slurmd_timeout,
            return_to_service,
            epoch: 0,
            controller,
            stats,
        }
    }

    fn push(&self, lost: bool, registration: Option<Hello>, ctx: &mut Context<Self>) {
        let msg = NodeChanged {
            status: self.status.clone(),
            lost,
            registration,
        };
        let c = self.controller.clone();
        ctx.wait(
            async move {
                let _ = c.send(msg).await;
            }
            .into_actor(self),
        );
    }

    /// ReturnToService: 1 revives nodes DOWN for not responding, 2 any DOWN.
    fn maybe_revive(&mut self) {
        let revive = match &self.status.admin.down {
            Some(r) if r.text == "Not responding" => self.return_to_service >= 1,
            Some(_) => self.return_to_service >= 2,
            None => false,
        };
        if revive {
            tracing::info!(node = %self.conf.name, "node responding again, returned to service");
            self.status.admin.down = None;
        }
    }

    fn check_timeout(&mut self, epoch: u64, ctx: &mut Context<Self>) {
        if epoch != self.epoch || self.status.responding || self.status.admin.down.is_some() {
            return;
        }
        tracing::warn!(node = %self.conf.name, "node not responding, setting DOWN");
        self.status.admin.down = Some(Reason {
            text: "Not responding".into(),
            user: "root".into(),
            time: chrono::Utc::now().timestamp(),
        });
        self.push(true, None, ctx);
    }
}

impl Actor for NodeActor {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX);
        // A node that never shows up goes DOWN like one that stopped answering.
        let epoch = self.epoch;
        if !self.slurmd_timeout.is_zero() && !self.status.future {
            ctx.run_later(self.slurmd_timeout, move |act, ctx| {
                act.check_timeout(epoch, ctx)
            });
        }
    }
}

impl Handler<Registered> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: Registered, ctx: &mut Context<Self>) {
        self.stats.handled();
        let h = &msg.hello;
        let rebooted = self.status.registered && self.status.boot_id != h.boot_id;
        // Reachability comes only from the relay tree's health deltas (see
        // `Reachable`): a registration and a death inside one flush interval
        // must not leave the node marked responding.
        self.status.registered = true;
        self.status.boot_id = h.boot_id;
        self.status.boot_time = Some(h.started);
        self.status.resources = Some(h.resources.clone());
        self.status.attached_to = msg.via;
        self.maybe_revive();
        if rebooted {
            tracing::info!(node = %self.conf.name, boot_id = h.boot_id, "node daemon restarted");
        }
        self.push(false, Some(msg.hello), ctx);
    }
}

impl Handler<Reachable> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: Reachable, ctx: &mut Context<Self>) {
        self.stats.handled();
        if self.status.responding == msg.0 {
            return;
        }
        self.epoch += 1;
        self.status.responding = msg.0;
        if msg.0 {
            tracing::info!(node = %self.conf.name, "node reachable again");
            // Registration and reachability arrive separately; either may be last.
            if self.status.registered {
                self.maybe_revive();
            }
        } else {
            tracing::info!(node = %self.conf.name, "node unreachable");
            if !self.slurmd_timeout.is_zero() {
                let epoch = self.epoch;
                ctx.run_later(self.slurmd_timeout, move |act, ctx| {
                    act.check_timeout(epoch, ctx)
                });
            }
        }
        self.push(false, None, ctx);
    }
}

impl Handler<SetNodeConf> for NodeActor {
    type Result = ();
    fn handle(&mut self, msg: SetNodeConf, _ctx: &mut Context<Self>) {
        self.stats.handled();
        self.conf = msg.conf;
        self.slurmd_timeout = msg.slurmd_timeout;
        self.return_to_service = msg.return_to_service;
    }
}

impl Handler<AdminUpdate> for NodeActor {
    type Result = ResponseActFuture<Self, Result<(), String>>;
    fn handle(&mut self, msg: AdminUpdate, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        let reason = |r: Option<String>| Reason {
            text: r.unwrap_or_default(),
            user: msg.user.clone(),
            time: chrono::Utc::now().timestamp(),
        };
        let mut lost = false;
        match msg.state {
            NodeUpdateState::Drain => self.status.admin.drain = Some(reason(msg.reason)),
            NodeUpdateState::Down => {
                lost = self.status.admin.down.is_none();
                self.status.admin.down = Some(reason(msg.reason));
            }
            NodeUpdateState::Resume | NodeUpdateState::Idle => {
                self.status.admin.drain = None;
                self.status.admin.down = None;
            }
            NodeUpdateState::Undrain => self.status.admin.drain = None,
        }
        // Answer only once the controller has the change (and has queued it
        // for the store), so the operator's command returns after it is durable.
        let change = NodeChanged {
            status: self.status.clone(),
            lost,
            registration: None,
        };
        let c = self.controller.clone();
        Box::pin(async move { c.send(change).await.map_err(|e| e.to_string()) }.into_actor(self))
    }
}

impl Handler<GetNodeStatus> for NodeActor {
    type Result = MessageResult<GetNodeStatus>;
    fn handle(&mut self, _msg: GetNodeStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.stats.handled();
        MessageResult(self.status.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::messages::Hello;

    /// Swallows the status pushes.
    struct Sink;
    impl Actor for Sink {
        type Context = Context<Self>;
    }
    impl Handler<NodeChanged> for Sink {
        type Result = ();
        fn handle(&mut self, _msg: NodeChanged, _ctx: &mut Context<Self>) {}
    }

    fn conf() -> Arc<NodeConf> {
        let c = crate::config::Config::parse_str(
            "SlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
            std::path::Path::new("/tmp/x.conf"),
        )
        .unwrap();
        Arc::new(c.nodes[0].clone())
    }

    fn hello() -> Hello {
        Hello {
            node: "n1".into(),
            rank: 0,
            boot_id: 7,
            started: 0,
            version: "t".into(),
            resources: Default::default(),
            jobs: vec![],
        }
    }

    #[test]
    fn silent_node_goes_down_and_returns_when_reachable_again() {
        actix::System::new().block_on(async {
            let sink = Counted::new(Sink.start().recipient(), ActorStats::new());
            let timeout = Duration::from_millis(100);
            let node = NodeActor::new(
                0,
                conf(),
                AdminState::default(),
                timeout,
                1,
                sink,
                ActorStats::new(),
            )
            .start();
            // Registered, but reachability never arrives before the timeout.
            node.send(Registered {
                hello: hello(),
                via: None,
            })
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(250)).await;
            let st = node.send(GetNodeStatus).await.unwrap();
            assert!(st.registered && !st.responding);
            assert_eq!(
                st.admin.down.as_ref().map(|r| r.text.as_str()),
                Some("Not responding")
            );
            // ReturnToService=1: becoming reachable revives it.
            node.send(Reachable(true)).await.unwrap();
            let st = node.send(GetNodeStatus).await.unwrap();
            assert!(st.responding && st.admin.down.is_none() && st.schedulable());
            // Losing reachability again starts a new timeout, not an instant DOWN.
            node.send(Reachable(false)).await.unwrap();
            assert!(node.send(GetNodeStatus).await.unwrap().admin.down.is_none());
            tokio::time::sleep(Duration::from_millis(250)).await;
            assert!(node.send(GetNodeStatus).await.unwrap().admin.down.is_some());
        });
    }

    #[test]
    fn return_to_service_zero_keeps_a_down_node_down() {
        actix::System::new().block_on(async {
            let sink = Counted::new(Sink.start().recipient(), ActorStats::new());
            let node = NodeActor::new(
                0,
                conf(),
                AdminState::default(),
                Duration::from_millis(50),
                0,
                sink,
                ActorStats::new(),
            )
            .start();
            tokio::time::sleep(Duration::from_millis(150)).await;
            node.send(Registered {
                hello: hello(),
                via: None,
            })
            .await
            .unwrap();
            node.send(Reachable(true)).await.unwrap();
            let st = node.send(GetNodeStatus).await.unwrap();
            assert!(st.responding && st.admin.down.is_some() && !st.schedulable());
            // An operator's RESUME brings it back.
            let r = node
                .send(AdminUpdate {
                    state: NodeUpdateState::Resume,
                    reason: None,
                    user: "root".into(),
                })
                .await
                .unwrap();
            assert!(r.is_ok());
            assert!(node.send(GetNodeStatus).await.unwrap().schedulable());
        });
    }
}
