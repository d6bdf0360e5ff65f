//! Traffic counters of the controller: frames and bytes received per message
//! kind from node links and from clients, and time spent answering clients.
//! Read by `canopy stats`, the load harness, and (later) sdiag.
//!
//! The controller runs on one thread, so the lock is never contended; it is
//! a `Mutex` only so the counters can sit behind an `Arc` shared by tasks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::wire::messages::KindStat;

#[derive(Default)]
struct Inner {
    node_frames: u64,
    node_bytes: u64,
    client_frames: u64,
    client_bytes: u64,
    kinds: HashMap<&'static str, KindStat>,
}

/// The counters at one moment; `kinds` sorted by name.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub node_frames: u64,
    pub node_bytes: u64,
    pub client_frames: u64,
    pub client_bytes: u64,
    pub kinds: Vec<KindStat>,
}

#[derive(Default)]
pub struct Traffic {
    inner: Mutex<Inner>,
}

/// Where a frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Node,
    Client,
}

impl Traffic {
    pub fn record(&self, source: Source, kind: &'static str, bytes: usize, took: Duration) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        match source {
            Source::Node => {
                g.node_frames += 1;
                g.node_bytes += bytes as u64;
            }
            Source::Client => {
                g.client_frames += 1;
                g.client_bytes += bytes as u64;
            }
        }
        let k = g.kinds.entry(kind).or_insert_with(|| KindStat {
            kind: kind.to_string(),
            ..Default::default()
        });
        k.count += 1;
        k.bytes += bytes as u64;
        k.total_us += took.as_micros() as u64;
    }

    pub fn snapshot(&self) -> Snapshot {
        let Ok(g) = self.inner.lock() else {
            return Snapshot::default();
        };
        let mut kinds: Vec<KindStat> = g.kinds.values().cloned().collect();
        kinds.sort_by(|a, b| a.kind.cmp(&b.kind));
        Snapshot {
            node_frames: g.node_frames,
            node_bytes: g.node_bytes,
            client_frames: g.client_frames,
            client_bytes: g.client_bytes,
            kinds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_source_and_kind() {
        let t = Traffic::default();
        t.record(Source::Node, "Keepalive", 100, Duration::ZERO);
        t.record(Source::Node, "Keepalive", 100, Duration::ZERO);
        t.record(Source::Client, "Ping", 50, Duration::from_micros(30));
        let s = t.snapshot();
        assert_eq!(
            (s.node_frames, s.node_bytes, s.client_frames, s.client_bytes),
            (2, 200, 1, 50)
        );
        let kinds = s.kinds;
        assert_eq!(kinds[0].kind, "Keepalive");
        assert_eq!(kinds[0].count, 2);
        assert_eq!(kinds[1].kind, "Ping");
        assert_eq!(kinds[1].total_us, 30);
    }
}
