//! Pure text formatting for `squeue`, `sinfo` and `scontrol show`: turns the
//! job, node and partition records the controller reports into exactly the
//! text Slurm prints. The field-table engine the column formatters share (letters,
//! names, `-o`/`-O`/`-S` parsing, justification and truncation) is [`fields`]; this
//! module owns the errors and warnings, memory sizes, TRES lists and name lookups.
//!
//! It does no I/O beyond passwd/group look-ups and reads no clock: callers pass
//! `now`. It does not parse command lines or talk to the controller; warnings
//! about bad format letters are returned for the caller to print on stderr.

pub(crate) mod fields;
pub mod resv;
pub mod sacct;
pub mod scontrol;
pub mod sinfo;
pub mod squeue;
pub mod squeue_steps;
/// Slurm's time formats live with the domain model (mail and the node
/// daemon print them too).
pub use crate::model::time;

use std::fmt;

use thiserror::Error;

use crate::wire::types::JobInfo;

/// Input Slurm refuses outright (it exits 1 without printing a table).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatError {
    /// A `squeue -t` entry that names no job state.
    #[error("Invalid job state specified: {state}")]
    InvalidJobState { state: String },
    /// A `sinfo -t` entry that names no node state.
    #[error("Bad state string: \"{state}\"")]
    InvalidNodeState { state: String },
    /// `now` is outside the calendar, so the `-l` date line cannot be printed.
    #[error("time {secs} is out of range for a local date")]
    TimeOutOfRange { secs: i64 },
}

/// A format problem Slurm reports on stderr and then carries on past: the bad
/// `%` token is echoed literally (or a bad `-O` name dropped) and the table is
/// printed anyway, exit 0. The CLI prints these, prefixed with the command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatWarning {
    /// squeue: an unknown `%` letter or `-O` field name.
    InvalidJobField { spec: String },
    /// sinfo: an unknown `%` letter or `-O` field name.
    InvalidNodeField { spec: String },
}

impl fmt::Display for FormatWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatWarning::InvalidJobField { spec } => {
                write!(f, "Invalid job format specification: {spec}")
            }
            FormatWarning::InvalidNodeField { spec } => {
                write!(f, "Invalid node format specification: {spec}")
            }
        }
    }
}

/// Empty text is Slurm's NULL.
pub(crate) fn or_null(text: &str) -> &str {
    if text.is_empty() {
        "(null)"
    } else {
        text
    }
}

/// A size in MiB as Slurm prints it: the largest binary unit that divides it
/// exactly (`1000M`, `16G`, `2T`), and a bare `0` for nothing.
pub fn fmt_mem_mb(mb: u64) -> String {
    if mb == 0 {
        return "0".to_string();
    }
    let mut value = mb;
    let mut units = ['M', 'G', 'T', 'P', 'E'].iter().peekable();
    let mut unit = 'M';
    while let Some(&u) = units.next() {
        unit = u;
        if value % 1024 != 0 || units.peek().is_none() {
            break;
        }
        value /= 1024;
    }
    format!("{value}{unit}")
}

/// `,gres/gpu=4` for each GRES name with units (TRES lists end with them).
pub(crate) fn gres_tres(gres: &[(String, u64)]) -> String {
    gres.iter()
        .filter(|(_, n)| *n > 0)
        .map(|(g, n)| format!(",gres/{g}={n}"))
        .collect()
}

/// A job's TRES list (`cpu=2,mem=2000M,node=2,billing=2,gres/gpu=1`) in
/// Slurm's TRES order; billing defaults to the CPU count and zero memory
/// is left out.
pub(crate) fn job_tres(j: &JobInfo, gres: &[(String, u64)]) -> String {
    let nodes = squeue::node_count(j);
    let mut parts = vec![format!("cpu={}", j.num_cpus)];
    let mem = j.mem_per_node_mb.saturating_mul(u64::from(nodes));
    if mem > 0 {
        parts.push(format!("mem={}", fmt_mem_mb(mem)));
    }
    parts.push(format!("node={nodes}"));
    parts.push(format!("billing={}", j.num_cpus));
    parts.join(",") + &gres_tres(gres)
}

/// The group name for `gid`, if the system knows one.
pub(crate) fn group_name(gid: u32) -> Option<String> {
    crate::exec::identity::group_name(gid)
}

/// The uid of user `name`, if the system knows one.
pub(crate) fn user_uid(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_uses_largest_exact_unit() {
        assert_eq!(fmt_mem_mb(0), "0");
        assert_eq!(fmt_mem_mb(100), "100M");
        assert_eq!(fmt_mem_mb(1000), "1000M");
        assert_eq!(fmt_mem_mb(1536), "1536M");
        assert_eq!(fmt_mem_mb(2048), "2G");
        assert_eq!(fmt_mem_mb(16 * 1024), "16G");
        assert_eq!(fmt_mem_mb(3 * 1024 * 1024), "3T");
        assert_eq!(fmt_mem_mb(15000), "15000M");
    }

    #[test]
    fn warnings_read_like_slurm() {
        let w = FormatWarning::InvalidJobField {
            spec: "_".to_string(),
        };
        assert_eq!(w.to_string(), "Invalid job format specification: _");
        let w = FormatWarning::InvalidNodeField {
            spec: "Q".to_string(),
        };
        assert_eq!(w.to_string(), "Invalid node format specification: Q");
        let e = FormatError::InvalidJobState {
            state: "foo".to_string(),
        };
        assert_eq!(e.to_string(), "Invalid job state specified: foo");
        let e = FormatError::InvalidNodeState {
            state: "foo".to_string(),
        };
        assert_eq!(e.to_string(), "Bad state string: \"foo\"");
    }

    #[test]
    fn name_lookups_resolve_root() {
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(user_uid("root"), Some(0));
        assert_eq!(user_uid("no-such-user-canopy-test"), None);
    }
}
