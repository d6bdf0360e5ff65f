//! A deliberately stuck actor, for testing `canopy top`'s stuck report on
//! real daemons. Started only when `CANOPY_TEST_STALL=NODE:MS` names this
//! node daemon: the actor blocks its own thread for MS milliseconds in its
//! first handler, with a second message queued behind it. It runs on an
//! arbiter (thread) of its own, so the rest of the daemon keeps answering,
//! which is the point: its state is read from its published counters, not
//! through its mailbox.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::registry::ActorRegistry;
use super::stats::ActorStats;

/// The environment variable that arms it.
pub const ENV: &str = "CANOPY_TEST_STALL";

#[derive(Message)]
#[rtype(result = "()")]
struct Block(Duration);

struct StallActor {
    stats: Arc<ActorStats>,
}

impl Actor for StallActor {
    type Context = Context<Self>;
}

impl Handler<Block> for StallActor {
    type Result = ();
    fn handle(&mut self, msg: Block, _ctx: &mut Context<Self>) {
        let _busy = self.stats.handled();
        // N.B. blocking on purpose: this actor exists to be stuck.
        std::thread::sleep(msg.0);
    }
}

/// `NODE:MS` → (node, duration); anything else is ignored with a warning.
fn parse(v: &str) -> Option<(&str, Duration)> {
    let (node, ms) = v.split_once(':')?;
    Some((node, Duration::from_millis(ms.parse().ok()?)))
}

/// Start the stuck actor if [`ENV`] names this daemon.
pub fn from_env(registry: &Arc<ActorRegistry>) {
    let Ok(v) = std::env::var(ENV) else {
        return;
    };
    let Some((node, block)) = parse(&v) else {
        tracing::warn!(value = %v, "{ENV} is not NODE:MS; ignored");
        return;
    };
    if node != registry.daemon() {
        return;
    }
    tracing::warn!(
        node,
        block_ms = block.as_millis() as u64,
        "test hook: starting a stuck actor"
    );
    let stats = ActorStats::new();
    registry.register("stall", "test", &stats);
    let arbiter = Arbiter::new();
    let st = stats.clone();
    let addr = StallActor::start_in_arbiter(&arbiter.handle(), move |_| StallActor { stats: st });
    for _ in 0..2 {
        stats.sent();
        addr.do_send(Block(block));
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::time::Duration;

    #[test]
    fn parses_node_and_milliseconds() {
        assert_eq!(parse("n3:250"), Some(("n3", Duration::from_millis(250))));
        assert_eq!(parse("n3"), None);
        assert_eq!(parse("n3:soon"), None);
    }
}
