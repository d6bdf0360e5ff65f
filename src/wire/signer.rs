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
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
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
///
/// Requests are pipelined: any number may be in flight on the one
/// connection, and the signer answers them in order. srun verifies every
/// frame its node daemons send (a hello and an exit per node), and at 512
/// nodes one request at a time meant a thousand round trips through a busy
/// signer end to end; pipelined, they overlap.
pub struct SignerClient {
    path: PathBuf,
    /// The running link: a queue into the task that owns the connection.
    /// `None` until first used, and again after the link failed.
    link: std::sync::Mutex<Option<mpsc::UnboundedSender<Pending>>>,
    /// Held while a connection is opened, so a burst of first requests opens
    /// one connection, not one each (the signer bounds them per uid).
    opening: tokio::sync::Mutex<()>,
}

/// One request on its way, and where its answer goes.
struct Pending {
    frame: bytes::Bytes,
    reply: oneshot::Sender<bytes::Bytes>,
}

impl SignerClient {
    pub fn new(path: &Path) -> SignerClient {
        SignerClient {
            path: path.to_path_buf(),
            link: std::sync::Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// Connect now (so a command fails early, with the socket's name, when
    /// no signer runs).
    pub async fn connect(&self) -> Result<(), SignerError> {
        self.link().await.map(|_| ())
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

    /// The live link, opened (and its task started) if there is none.
    async fn link(&self) -> Result<mpsc::UnboundedSender<Pending>, SignerError> {
        if let Some(tx) = self.current() {
            return Ok(tx);
        }
        let _opening = self.opening.lock().await;
        // Another caller may have opened one while we waited.
        if let Some(tx) = self.current() {
            return Ok(tx);
        }
        let framed = self.open().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(framed, rx));
        *self.link.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx.clone());
        Ok(tx)
    }

    fn current(&self) -> Option<mpsc::UnboundedSender<Pending>> {
        let link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
        link.as_ref().filter(|tx| !tx.is_closed()).cloned()
    }

    /// Forget `used` (if it is still the current link) so the next request
    /// opens a fresh connection.
    fn drop_link(&self, used: &mpsc::UnboundedSender<Pending>) {
        let mut link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
        if link.as_ref().is_some_and(|tx| tx.same_channel(used)) {
            *link = None;
        }
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
        let frame = bytes::Bytes::from(rmp_serde::to_vec_named(req).map_err(|e| self.io(e))?);
        // A signer restarted since our last request closed our link: one
        // fresh connection, then give up.
        for attempt in 0..2 {
            let tx = self.link().await?;
            let (reply, answer) = oneshot::channel();
            let sent = tx.send(Pending {
                frame: frame.clone(),
                reply,
            });
            if sent.is_err() {
                self.drop_link(&tx);
                continue;
            }
            match tokio::time::timeout(SIGNER_TIMEOUT, answer).await {
                Err(_) => {
                    // A signer that stopped answering: the requests behind
                    // this one would wait as long, so the link is dropped.
                    self.drop_link(&tx);
                    return Err(SignerError::Timeout {
                        path: self.path.clone(),
                        after: SIGNER_TIMEOUT,
                    });
                }
                Ok(Ok(bytes)) => return rmp_serde::from_slice(&bytes).map_err(|e| self.io(e)),
                // The link closed before our answer came.
                Ok(Err(_)) => {
                    self.drop_link(&tx);
                    if attempt == 1 {
                        break;
                    }
                }
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

/// The task that owns a signer connection: writes requests as they come
/// (every one already queued, then one flush) and hands each answer to the
/// oldest waiting caller. Writing and reading run side by side, so a
/// signer blocked writing answers we have not read yet never waits on us
/// to finish writing. The reader takes a frame only for a caller already
/// waiting, so a frame the signer sends unasked (its refusal of the
/// connection) goes to the next caller, as it would one request at a time.
/// When the connection fails, every waiting caller's answer channel is
/// dropped, which tells it the link closed.
async fn drive(
    framed: Framed<UnixStream, LengthDelimitedCodec>,
    mut requests: mpsc::UnboundedReceiver<Pending>,
) {
    let (mut sink, mut stream) = framed.split();
    let (waiting, mut callers) = mpsc::unbounded_channel::<oneshot::Sender<bytes::Bytes>>();
    let writer = async move {
        while let Some(first) = requests.recv().await {
            let mut next = Some(first);
            while let Some(p) = next {
                // Queued before it is written, so its answer can never
                // arrive ahead of its place in the queue.
                if waiting.send(p.reply).is_err() || sink.feed(p.frame).await.is_err() {
                    return;
                }
                next = requests.try_recv().ok();
            }
            if sink.flush().await.is_err() {
                return;
            }
        }
    };
    let reader = async move {
        while let Some(caller) = callers.recv().await {
            match stream.next().await {
                // A caller that gave up (timed out) no longer listens.
                Some(Ok(frame)) => {
                    let _ = caller.send(frame.freeze());
                }
                _ => return,
            }
        }
    };
    tokio::pin!(reader);
    tokio::select! {
        _ = writer => {
            // Nothing more can be written (the signer closed its end, or
            // this link was dropped), but answers already on their way are
            // still read: a signer that refuses a connection says why
            // before it closes.
            let _ = tokio::time::timeout(SIGNER_TIMEOUT, reader).await;
        }
        _ = &mut reader => {}
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
