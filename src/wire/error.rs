//! Errors of the wire layers: framing, envelope decoding and the connection.
//!
//! Credential failures have their own enum, [`AuthError`], in `auth.rs`, and
//! are carried here as [`WireError::Auth`]. This module only names what went
//! wrong; deciding what to do about it (reply, log, drop the link) is the
//! caller's business, helped by [`WireError::ends_connection`].

use std::fmt;
use std::io;

use thiserror::Error;

use super::auth::AuthError;

/// Which part of a frame a decoding or encoding problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramePart {
    /// The outer MessagePack array `[header, credential, body]`.
    Envelope,
    Header,
    Credential,
    Body,
}

impl fmt::Display for FramePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FramePart::Envelope => "envelope",
            FramePart::Header => "header",
            FramePart::Credential => "credential",
            FramePart::Body => "body",
        })
    }
}

#[derive(Debug, Error)]
pub enum WireError {
    #[error("i/o error on connection: {0}")]
    Io(#[from] io::Error),

    #[error("frame of {len} bytes exceeds the maximum frame size of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },

    /// An unauthenticated peer's frame needs more of the shared
    /// pre-authentication budget than is free (see `FrameCodec`).
    #[error("frame of {len} bytes sent before authenticating: the budget for unauthenticated data is in use; try again later")]
    PreAuthBudget { len: usize },

    #[error(
        "peer closed the connection in the middle of a frame ({buffered} bytes of it buffered)"
    )]
    Truncated { buffered: usize },

    #[error("malformed frame {part}: {detail}")]
    Malformed { part: FramePart, detail: String },

    #[error("cannot encode frame {part}: {detail}")]
    Encode { part: FramePart, detail: String },

    #[error("peer speaks protocol version {got}; this build accepts versions {min} to {max}")]
    UnsupportedVersion { got: u16, min: u16, max: u16 },

    #[error("frame rejected: {0}")]
    Auth(#[from] AuthError),

    /// The local signer could not sign or check a frame (commands only).
    #[error("{0}")]
    Signer(#[from] super::signer::SignerError),

    #[error("peer closed the connection before replying to {kind} (request {corr})")]
    PeerClosed { kind: &'static str, corr: u64 },

    #[error("no reply to {kind} (request {corr}) within {after_ms} ms")]
    Timeout {
        kind: &'static str,
        corr: u64,
        after_ms: u64,
    },

    #[error("expected the reply to request {expected}, got a {kind} frame for request {got}")]
    UnexpectedReply {
        expected: u64,
        got: u64,
        kind: String,
    },
}

impl WireError {
    /// Whether the byte stream can no longer be trusted to be at a frame
    /// boundary (or is gone), so the connection must be dropped.
    ///
    /// N.B. a frame that failed authentication or decoding was still read
    /// whole, so the stream stays in sync: a daemon may answer with an error
    /// and carry on, or drop the peer as a matter of policy.
    pub fn ends_connection(&self) -> bool {
        match self {
            WireError::Io(_)
            | WireError::FrameTooLarge { .. }
            | WireError::PreAuthBudget { .. }
            | WireError::Truncated { .. }
            | WireError::PeerClosed { .. }
            | WireError::Signer(_) => true,
            WireError::Malformed { .. }
            | WireError::Encode { .. }
            | WireError::UnsupportedVersion { .. }
            | WireError::Auth(_)
            | WireError::Timeout { .. }
            | WireError::UnexpectedReply { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_level_errors_end_the_connection() {
        let fatal = [
            WireError::Io(io::Error::from(io::ErrorKind::ConnectionReset)),
            WireError::FrameTooLarge { len: 10, max: 5 },
            WireError::Truncated { buffered: 3 },
            WireError::PeerClosed {
                kind: "Ping",
                corr: 1,
            },
        ];
        for err in fatal {
            assert!(err.ends_connection(), "{err}");
        }
    }

    #[test]
    fn frame_level_errors_leave_the_stream_in_sync() {
        let recoverable = [
            WireError::Malformed {
                part: FramePart::Body,
                detail: "x".into(),
            },
            WireError::Encode {
                part: FramePart::Header,
                detail: "x".into(),
            },
            WireError::UnsupportedVersion {
                got: 9,
                min: 1,
                max: 1,
            },
            WireError::Auth(AuthError::BadSignature),
            WireError::Timeout {
                kind: "Ping",
                corr: 1,
                after_ms: 5,
            },
            WireError::UnexpectedReply {
                expected: 1,
                got: 2,
                kind: "Pong".into(),
            },
        ];
        for err in recoverable {
            assert!(!err.ends_connection(), "{err}");
        }
    }

    #[test]
    fn messages_name_what_was_wrong() {
        let err = WireError::UnsupportedVersion {
            got: 7,
            min: 1,
            max: 2,
        };
        assert_eq!(
            err.to_string(),
            "peer speaks protocol version 7; this build accepts versions 1 to 2"
        );
        let err = WireError::Malformed {
            part: FramePart::Credential,
            detail: "missing field `nonce`".into(),
        };
        assert_eq!(
            err.to_string(),
            "malformed frame credential: missing field `nonce`"
        );
        let err = WireError::FrameTooLarge { len: 100, max: 10 };
        assert_eq!(
            err.to_string(),
            "frame of 100 bytes exceeds the maximum frame size of 10 bytes"
        );
    }
}
