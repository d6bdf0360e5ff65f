//! One shutdown tree per daemon (house habit 14): a root `CancellationToken`
//! with a child token and a `TaskTracker` per subsystem (listeners,
//! connections and links, the upward link, ...), and the stop signals that
//! start a shutdown.
//!
//! This module owns the mechanics only: which subsystems a daemon has, the
//! order they stop in and what it flushes afterwards are the daemon's
//! (`ctld.rs`, `noded.rs`). Every task of a daemon is spawned through a
//! [`Part`], and every loop selects on its token.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a daemon waits for its tasks to end after cancelling them.
pub const TASK_GRACE: Duration = Duration::from_secs(5);
/// From the first stop signal to a forced exit, whatever is still running.
/// Longer than [`TASK_GRACE`] so the controller's final flush still fits.
pub const HARD_DEADLINE: Duration = Duration::from_secs(15);

/// One subsystem: its token (a child of the daemon's root) and the tasks
/// spawned for it.
#[derive(Clone)]
pub struct Part {
    pub name: &'static str,
    pub token: CancellationToken,
    tracker: TaskTracker,
}

impl Part {
    /// Run `fut` on the current (actix) thread as one of this part's tasks.
    /// Local rather than `tokio::spawn`: the actor handles in daemon tasks
    /// are not all `Send`.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + 'static,
    {
        actix::spawn(self.tracker.track_future(fut));
    }

    /// Tasks of this part still running.
    pub fn running(&self) -> usize {
        self.tracker.len()
    }
}

/// The shutdown tree of one daemon.
pub struct Tree {
    root: CancellationToken,
    parts: Vec<Part>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new(CancellationToken::new())
    }
}

impl Tree {
    /// A tree under `root` (cancelling `root` from outside stops every part
    /// too, as the load harness does per simulated node).
    pub fn new(root: CancellationToken) -> Tree {
        Tree {
            root,
            parts: Vec::new(),
        }
    }

    pub fn root(&self) -> &CancellationToken {
        &self.root
    }

    /// A new subsystem; [`Tree::stop`] cancels parts in the order they were
    /// added (listeners first, so nothing new arrives while the rest stop).
    pub fn part(&mut self, name: &'static str) -> Part {
        let p = Part {
            name,
            token: self.root.child_token(),
            tracker: TaskTracker::new(),
        };
        self.parts.push(p.clone());
        p
    }

    /// Cancel every part in order, waiting for each part's tasks, all within
    /// `grace`. Returns the parts whose tasks did not all end, with how many
    /// are left (logged here too).
    pub async fn stop(&self, grace: Duration) -> Vec<(&'static str, usize)> {
        let until = tokio::time::Instant::now() + grace;
        let mut left = Vec::new();
        for p in &self.parts {
            p.token.cancel();
            p.tracker.close();
            if tokio::time::timeout_at(until, p.tracker.wait())
                .await
                .is_err()
            {
                left.push((p.name, p.tracker.len()));
            }
        }
        // Anything not under a part (a caller's own token) ends now too.
        self.root.cancel();
        for (part, tasks) in &left {
            tracing::warn!(
                part,
                tasks,
                grace_ms = grace.as_millis() as u64,
                "tasks did not stop in time"
            );
        }
        left
    }
}

/// SIGTERM and SIGINT, registered as soon as the daemon starts so that an
/// early signal is not met by the default action (death without a flush).
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Must be called inside the runtime.
    pub fn new() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next stop signal's name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }

    /// After the first signal: a second one, or `deadline` passing, ends the
    /// process at once (exit status 1) with a message.
    pub fn arm_hard_stop(mut self, daemon: &'static str, deadline: Duration) {
        actix::spawn(async move {
            let sig = self.recv().await;
            tracing::error!(signal = sig, "second stop signal; exiting at once");
            eprintln!("{daemon}: second stop signal ({sig}); exiting at once");
            std::process::exit(1);
        });
        // A thread, not a task: it must fire even if the event loop is stuck.
        let started = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("canopy-hard-stop".into())
            .spawn(move || {
                std::thread::sleep(deadline);
                tracing::error!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "shutdown deadline passed; exiting at once"
                );
                eprintln!(
                    "{daemon}: shutdown did not finish within {}s; exiting at once",
                    deadline.as_secs()
                );
                std::process::exit(1);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the shutdown deadline thread");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix::test]
    async fn stop_cancels_every_part_and_waits_for_its_tasks() {
        let mut tree = Tree::default();
        let listener = tree.part("listener");
        let conns = tree.part("connections");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for p in [&listener, &conns] {
            for _ in 0..3 {
                let (token, tx) = (p.token.clone(), tx.clone());
                let name = p.name;
                p.spawn(async move {
                    token.cancelled().await;
                    // Work done after cancellation still finishes before stop returns.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = tx.send(name);
                });
            }
        }
        drop(tx);
        let left = tree.stop(Duration::from_secs(5)).await;
        assert!(left.is_empty(), "{left:?}");
        let mut ended = Vec::new();
        while let Some(n) = rx.recv().await {
            ended.push(n);
        }
        // Listeners first: nothing new arrives while the rest stop.
        assert_eq!(
            ended,
            [
                "listener",
                "listener",
                "listener",
                "connections",
                "connections",
                "connections"
            ]
        );
        assert!(tree.root().is_cancelled());
        assert_eq!(conns.running(), 0);
    }

    #[actix::test]
    async fn a_task_that_ignores_cancellation_is_reported_not_waited_for() {
        let mut tree = Tree::default();
        let stuck = tree.part("stuck");
        stuck.spawn(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let t0 = Instant::now();
        let left = tree.stop(Duration::from_millis(100)).await;
        assert_eq!(left, [("stuck", 1)]);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
