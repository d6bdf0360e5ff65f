//! Who signs and verifies a connection's frames: a daemon holding the
//! cluster key ([`Authenticator`]), or a user's command, which holds no key
//! and asks the local signer (`canopy-authd`, or a node daemon on compute
//! nodes) over a Unix socket.
//!
//! The signer protocol: each message is a 4-byte big-endian length and a
//! MessagePack [`SignerRequest`] or [`SignerReply`]. A request names only a
//! 32-byte content digest (and, to verify, the credential): the signer
//! learns the caller's uid and gid from the kernel (`SO_PEERCRED`), never
//! from the request, so a credential it issues binds one message to the
//! caller's real identity. One connection carries any number of requests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::auth::{Authenticator, ContentDigest, Credential};

/// Largest signer message either way: a request is a digest or a
/// credential and a digest (a few hundred bytes), so anything bigger is
/// garbage and is refused before it is buffered.
pub const MAX_SIGNER_FRAME: usize = 2048;
/// How long a command waits for the signer's answer.
const SIGNER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a command asks the signer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignerRequest {
    /// A credential for the caller over this content digest.
    Sign {
        #[serde(with = "serde_bytes")]
        digest: ContentDigest,
    },
    /// Check a credential a peer sent over this digest (commands hold no
    /// key to check their replies with).
    Verify {
        credential: Credential,
        #[serde(with = "serde_bytes")]
        digest: ContentDigest,
    },
}

/// The signer's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignerReply {
    Signed(Credential),
    Verified {
        uid: u32,
        gid: u32,
    },
    /// The credential was refused; the text says why (as [`AuthError`]).
    Refused(String),
    /// The request itself was bad or not allowed.
    Error(String),
}

#[derive(Debug, Error)]
pub enum SignerError {
    #[error(
        "cannot reach the local signer at {}: {source} (is canopy-authd running? \
         AuthInfo=socket= in slurm.conf names the socket)",
        .path.display()
    )]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("local signer at {}: {detail}", .path.display())]
    Io { path: PathBuf, detail: String },
    #[error("local signer at {} did not answer within {} s", .path.display(), .after.as_secs())]
    Timeout { path: PathBuf, after: Duration },
    #[error("credential refused: {0}")]
    Refused(String),
    #[error("local signer refused the request: {0}")]
    Error(String),
}

/// A command's link to its host's signer; reconnects once if the signer
/// restarted since the last request.
pub struct SignerClient {
    path: PathBuf,
    conn: tokio::sync::Mutex<Option<Framed<UnixStream, LengthDelimitedCodec>>>,
}

impl SignerClient {
    pub fn new(path: &Path) -> SignerClient {
        SignerClient {
            path: path.to_path_buf(),
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Connect now (so a command fails early, with the socket's name, when
    /// no signer runs).
    pub async fn connect(&self) -> Result<(), SignerError> {
        let mut conn = self.conn.lock().await;
        if conn.is_none() {
            *conn = Some(self.open().await?);
        }
        Ok(())
    }

    async fn open(&self) -> Result<Framed<UnixStream, LengthDelimitedCodec>, SignerError> {
        let stream =
            UnixStream::connect(&self.path)
                .await
                .map_err(|source| SignerError::Connect {
                    path: self.path.clone(),
                    source,
                })?;
        Ok(Framed::new(stream, signer_codec()))
    }

    pub async fn sign(&self, digest: ContentDigest) -> Result<Credential, SignerError> {
        match self.call(&SignerRequest::Sign { digest }).await? {
            SignerReply::Signed(c) => Ok(c),
            other => Err(self.unexpected(other)),
        }
    }

    pub async fn verify(
        &self,
        credential: &Credential,
        digest: ContentDigest,
    ) -> Result<(u32, u32), SignerError> {
        let req = SignerRequest::Verify {
            credential: credential.clone(),
            digest,
        };
        match self.call(&req).await? {
            SignerReply::Verified { uid, gid } => Ok((uid, gid)),
            other => Err(self.unexpected(other)),
        }
    }

    fn unexpected(&self, reply: SignerReply) -> SignerError {
        match reply {
            SignerReply::Refused(r) => SignerError::Refused(r),
            SignerReply::Error(e) => SignerError::Error(e),
            other => SignerError::Io {
                path: self.path.clone(),
                detail: format!("unexpected reply {other:?}"),
            },
        }
    }

    async fn call(&self, req: &SignerRequest) -> Result<SignerReply, SignerError> {
        let bytes = rmp_serde::to_vec_named(req).map_err(|e| self.io(e))?;
        let mut conn = self.conn.lock().await;
        // A signer restarted since our last request closed our link: one
        // fresh connection, then give up.
        for attempt in 0..2 {
            if conn.is_none() {
                *conn = Some(self.open().await?);
            }
            let Some(c) = conn.as_mut() else {
                continue;
            };
            let exchange = async {
                c.send(bytes::Bytes::from(bytes.clone())).await?;
                c.next().await.transpose()
            };
            match tokio::time::timeout(SIGNER_TIMEOUT, exchange).await {
                Err(_) => {
                    *conn = None;
                    return Err(SignerError::Timeout {
                        path: self.path.clone(),
                        after: SIGNER_TIMEOUT,
                    });
                }
                Ok(Ok(Some(frame))) => {
                    return rmp_serde::from_slice(&frame).map_err(|e| self.io(e));
                }
                Ok(Ok(None)) | Ok(Err(_)) if attempt == 0 => *conn = None,
                Ok(Ok(None)) => return Err(self.io("the signer closed the connection")),
                Ok(Err(e)) => return Err(self.io(e)),
            }
        }
        Err(self.io("the signer closed the connection"))
    }

    fn io(&self, detail: impl ToString) -> SignerError {
        SignerError::Io {
            path: self.path.clone(),
            detail: detail.to_string(),
        }
    }
}

/// The framing both ends of the signer protocol use.
pub fn signer_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_SIGNER_FRAME)
        .new_codec()
}

/// Answer one signer request for a caller the kernel identified.
pub fn answer(auth: &Authenticator, uid: u32, gid: u32, frame: &[u8]) -> SignerReply {
    let req: SignerRequest = match rmp_serde::from_slice(frame) {
        Ok(r) => r,
        Err(e) => return SignerReply::Error(format!("malformed request: {e}")),
    };
    let now = SystemTime::now();
    match req {
        SignerRequest::Sign { digest } => {
            SignerReply::Signed(auth.sign_digest(&digest, uid, gid, now))
        }
        SignerRequest::Verify { credential, digest } => {
            match auth.verify_digest(&credential, &digest, now) {
                Ok((uid, gid)) => SignerReply::Verified { uid, gid },
                Err(e) => SignerReply::Refused(e.to_string()),
            }
        }
    }
}

/// How a connection signs what it sends and checks what it receives.
#[derive(Clone)]
pub enum Signer {
    /// A daemon (or a test) holding the key.
    Key(Arc<Authenticator>),
    /// A user's command: through the local signer.
    Local(Arc<SignerClient>),
}

impl From<Arc<Authenticator>> for Signer {
    fn from(a: Arc<Authenticator>) -> Signer {
        Signer::Key(a)
    }
}

impl From<Arc<SignerClient>> for Signer {
    fn from(c: Arc<SignerClient>) -> Signer {
        Signer::Local(c)
    }
}
