//! The messages of `canopy exec`: the client's request, the command each node
//! runs, what one node's run gives back, and the folded report.
//!
//! A node's result is one [`ExecOutput`]; relays fold equal results into one
//! `(RankSet, result)` pair (`tree::collect`), so what climbs the tree grows
//! with the number of *distinct* outputs, not with the number of nodes. The
//! report's pure handling (merging, grouping exit codes, diffs) lives in
//! `console::fold`.

use serde::{Deserialize, Serialize};

/// Default bound on what one node captures (stdout and stderr together).
pub const DEFAULT_MAX_OUTPUT: u32 = 16 << 10;
/// Ceiling a client may ask for: a reply of many distinct maximal outputs
/// must still fit a frame (`wire::frame::MAX_FRAME_LEN`).
pub const MAX_OUTPUT_LIMIT: u32 = 1 << 20;
/// Default and largest command timeouts, seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 60;
pub const MAX_TIMEOUT_S: u64 = 24 * 3600;

/// `canopy exec -w NODES -- ARGV`: client → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// Hostlist expression of the nodes to run on.
    pub nodes: String,
    pub argv: Vec<String>,
    /// The command's time limit on each node, milliseconds.
    pub timeout_ms: u64,
    /// Bytes of output each node keeps; the rest is counted and cut.
    pub max_output: u32,
    /// Chosen by the client at random; names this run in an [`ExecInterrupt`].
    pub token: u64,
}

/// Ctrl-C on the client: stop the run `token` on `nodes` (its own, unless an
/// operator asks); the nodes answer the run itself with what they captured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecInterrupt {
    pub nodes: String,
    pub token: u64,
}

/// What one node runs (controller → nodes, inside `NodeCommand::Exec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    /// The caller as the controller authenticated them.
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub timeout_ms: u64,
    pub max_output: u32,
    pub token: u64,
    /// An ordinary user's running jobs on the nodes named: each node runs
    /// the command inside one of these that it holds (its cgroup). Empty
    /// for root and operators, who are not adopted.
    #[serde(default)]
    pub jobs: Vec<u32>,
}

/// How a node's command ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExecEnd {
    /// It exited by itself; `ExecOutput::code` is its exit status.
    Exited,
    /// Killed by this signal (not by canopy); `code` is 128 + signal.
    Signalled(i32),
    /// Killed by canopy at the time limit.
    TimedOut,
    /// Killed by canopy because the client was interrupted (Ctrl-C).
    Interrupted,
    /// It never ran (no such program, identity refused); the reason is
    /// the output.
    NotStarted,
}

impl ExecEnd {
    /// Whether the command ran to its own end (not cut short by canopy).
    pub fn finished(&self) -> bool {
        matches!(self, ExecEnd::Exited | ExecEnd::Signalled(_))
    }
}

/// One node's result. Equal results fold, so nothing node-specific (time
/// taken, pid) is kept here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExecOutput {
    /// stdout and stderr through one pipe, in the order written, up to the
    /// request's `max_output` bytes.
    #[serde(with = "serde_bytes")]
    pub output: Vec<u8>,
    /// Exit status (128 + signal when killed; 127 when it could not start).
    pub code: i32,
    pub end: ExecEnd,
    /// Bytes written beyond `max_output` and dropped (0: nothing cut).
    pub cut: u64,
}

/// Nodes that gave the same result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecGroup {
    /// Compressed hostlist.
    pub nodes: String,
    pub count: u64,
    pub result: ExecOutput,
    /// Its output was left out to keep the reply bounded (the exit code
    /// and the nodes are still right).
    #[serde(default)]
    pub output_dropped: bool,
}

/// The folded result of one `canopy exec`: controller → client.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecReport {
    pub targets: u64,
    /// Largest group first.
    pub groups: Vec<ExecGroup>,
    /// Nodes with no result, as (hostlist, reason): unreachable, no
    /// answer in time.
    pub missing: Vec<(String, String)>,
    /// Groups whose output was left out to keep the reply bounded (their
    /// nodes and exit codes are still listed).
    pub outputs_dropped: u64,
    pub elapsed_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::messages::{Body, NodeCommand, NodeReply};

    fn roundtrip(body: &Body) {
        let bytes = rmp_serde::to_vec_named(body).unwrap();
        let back: Body = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(&back, body);
    }

    #[test]
    fn exec_messages_survive_the_wire() {
        let out = ExecOutput {
            output: vec![0, 159, 146, 150, b'\n'],
            code: 137,
            end: ExecEnd::Signalled(9),
            cut: 12,
        };
        roundtrip(&Body::Exec(ExecRequest {
            nodes: "n[1-4]".into(),
            argv: vec!["sh".into(), "-c".into(), "echo hi".into()],
            timeout_ms: 1500,
            max_output: DEFAULT_MAX_OUTPUT,
            token: u64::MAX,
        }));
        roundtrip(&Body::ExecInterrupt(ExecInterrupt {
            nodes: "n1".into(),
            token: 7,
        }));
        roundtrip(&Body::ExecReply(Box::new(ExecReport {
            targets: 5,
            groups: vec![ExecGroup {
                nodes: "n[1-4]".into(),
                count: 4,
                result: out.clone(),
                output_dropped: true,
            }],
            missing: vec![("n5".into(), "timed out".into())],
            outputs_dropped: 1,
            elapsed_ms: 3,
        })));
        let spec = ExecSpec {
            argv: vec!["true".into()],
            uid: 1000,
            gid: 1000,
            user: "alice".into(),
            timeout_ms: 1,
            max_output: 0,
            token: 3,
            jobs: vec![7],
        };
        let fwd = crate::wire::messages::Forward {
            id: 1,
            targets: crate::tree::rankset::RankSet::from_range(0..4),
            budget_ms: 10,
            cmd: NodeCommand::Exec(Box::new(spec)),
            origin: 0,
        };
        roundtrip(&Body::Forward(Box::new(fwd)));
        roundtrip(&Body::ForwardReply(crate::wire::messages::ForwardReply {
            id: 1,
            outcomes: vec![crate::wire::messages::Outcome {
                ranks: crate::tree::rankset::RankSet::from_range(0..4),
                result: Ok(NodeReply::Exec(out)),
            }],
        }));
    }
}
