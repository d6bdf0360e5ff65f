//! The local signer (`canopy-authd`, like MUNGE's munged or Slurm's sackd):
//! users' commands never hold the cluster key; they send a message digest
//! to this daemon over a Unix socket, and it signs a credential for the uid
//! and gid the kernel reports for the caller (`SO_PEERCRED`). Node daemons
//! serve the same socket on compute nodes (see [`serve_if_free`]), so jobs
//! that call `srun` or `squeue` work there.
//!
//! The protocol is in `wire::signer`. A caller cannot name an identity, a
//! host or a lifetime: only the digest. Each uid may hold a bounded number
//! of connections, and every message is bounded in size, so one local user
//! cannot starve the others or make the daemon buffer much.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use thiserror::Error;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use crate::wire::auth::Authenticator;
use crate::wire::signer::{answer, signer_codec, SignerReply};

/// Most connections one uid may hold open at once (a command uses one;
/// srun with many tasks a few).
pub const MAX_CONNECTIONS_PER_UID: usize = 64;
/// A connection that sends nothing this long is closed (its command
/// reconnects if it ever needs another credential).
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Error)]
pub enum AuthdError {
    #[error("cannot create the signer's directory {}: {source}", .path.display())]
    Dir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("another signer already answers on {}", .0.display())]
    InUse(std::path::PathBuf),
    #[error(
        "refusing to listen in {}: other users may write there (mode {mode:04o}) and could \
         put a signer of their own in its place; use a directory only root or this user may write",
        .path.display()
    )]
    OpenDir { path: std::path::PathBuf, mode: u32 },
    #[error("cannot listen on {}: {source}", .path.display())]
    Bind {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// What the signer did, for its log and `canopy status`.
#[derive(Debug, Default)]
pub struct SignerStats {
    pub signed: AtomicU64,
    pub verified: AtomicU64,
    pub refused: AtomicU64,
    pub bad_requests: AtomicU64,
    pub over_limit: AtomicU64,
}

/// Bind the signer's socket at `path`: its directory is created (0755) if
/// missing; a socket file nobody answers on (a signer that died) is
/// replaced; one a live signer answers on is left alone ([`AuthdError::InUse`]).
/// The socket is open to every local user (0666): who they are comes from
/// the kernel, not from the file's mode.
pub async fn bind(path: &Path) -> Result<UnixListener, AuthdError> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|source| AuthdError::Dir {
                path: dir.to_path_buf(),
                source,
            })?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        }
    }
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(dir) {
            let me = nix::unistd::geteuid().as_raw();
            let writable_by_others = m.mode() & 0o022 != 0 || (m.uid() != me && m.uid() != 0);
            if writable_by_others {
                return Err(AuthdError::OpenDir {
                    path: dir.to_path_buf(),
                    mode: m.mode() & 0o7777,
                });
            }
        }
    }
    if std::fs::symlink_metadata(path).is_ok() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(AuthdError::InUse(path.to_path_buf()));
        }
        // Stale: its signer is gone.
        let _ = std::fs::remove_file(path);
    }
    let bind_err = |source| AuthdError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(bind_err)?;
    Ok(listener)
}

/// Serve signer requests until `stop` is cancelled.
pub async fn serve(
    listener: UnixListener,
    auth: Arc<Authenticator>,
    stats: Arc<SignerStats>,
    stop: CancellationToken,
) {
    let per_uid: Arc<Mutex<HashMap<u32, usize>>> = Arc::default();
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather
                    // than spin.
                    tracing::warn!(error = %e, "signer accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(cred) = stream.peer_cred() else {
            stats.bad_requests.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let (uid, gid) = (cred.uid(), cred.gid());
        let admitted = {
            let mut m = per_uid.lock().unwrap_or_else(PoisonError::into_inner);
            let n = m.entry(uid).or_default();
            if *n >= MAX_CONNECTIONS_PER_UID {
                false
            } else {
                *n += 1;
                true
            }
        };
        if !admitted {
            stats.over_limit.fetch_add(1, Ordering::Relaxed);
            let mut framed = Framed::new(stream, signer_codec());
            let msg = SignerReply::Error(format!(
                "uid {uid} already holds {MAX_CONNECTIONS_PER_UID} signer connections"
            ));
            if let Ok(b) = rmp_serde::to_vec_named(&msg) {
                let _ = framed.send(bytes::Bytes::from(b)).await;
            }
            continue;
        }
        let (auth, stats, per_uid, stop) =
            (auth.clone(), stats.clone(), per_uid.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = serve_one(stream, uid, gid, &auth, &stats) => {}
            }
            let mut m = per_uid.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = m.get_mut(&uid) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    m.remove(&uid);
                }
            }
        });
    }
}

async fn serve_one(
    stream: UnixStream,
    uid: u32,
    gid: u32,
    auth: &Authenticator,
    stats: &SignerStats,
) {
    use futures::FutureExt;
    let mut framed = Framed::new(stream, signer_codec());
    let mut ready = None;
    loop {
        // A client may send several requests before reading (srun's
        // streams, a benchmark): answer every one already buffered, then
        // flush once.
        let next = match ready.take() {
            Some(f) => Some(f),
            None => {
                if SinkExt::<bytes::Bytes>::flush(&mut framed).await.is_err() {
                    return;
                }
                match tokio::time::timeout(IDLE_TIMEOUT, framed.next()).await {
                    Ok(f) => f,
                    Err(_) => return,
                }
            }
        };
        let frame = match next {
            Some(Ok(f)) => f,
            // Closed, or a frame over the size limit: the stream is no
            // longer at a message boundary, so the connection ends.
            Some(Err(_)) => {
                stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                return;
            }
            None => return,
        };
        // HMAC over a fixed-size message: microseconds, fine on the loop.
        let reply = answer(auth, uid, gid, &frame);
        let counter = match &reply {
            SignerReply::Signed(_) => &stats.signed,
            SignerReply::Verified { .. } => &stats.verified,
            SignerReply::Refused(_) => &stats.refused,
            SignerReply::Error(_) => &stats.bad_requests,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let Ok(bytes) = rmp_serde::to_vec_named(&reply) else {
            return;
        };
        if framed.feed(bytes::Bytes::from(bytes)).await.is_err() {
            return;
        }
        ready = framed.next().now_or_never().flatten();
    }
}

/// On a compute node: serve the signer socket from the node daemon unless
/// a signer already answers there (a login node's canopy-authd, or another
/// node daemon on the same host). Returns whether this process serves it.
pub async fn serve_if_free(path: &Path, auth: Arc<Authenticator>, stop: CancellationToken) -> bool {
    match bind(path).await {
        Ok(listener) => {
            tracing::info!(socket = %path.display(), "serving the local signer socket");
            tokio::spawn(serve(listener, auth, Arc::default(), stop));
            true
        }
        Err(AuthdError::InUse(_)) => {
            tracing::info!(socket = %path.display(), "a local signer already serves this host");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot serve the local signer socket; commands on this host need canopy-authd");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::auth::{content_digest, Key};
    use crate::wire::signer::{SignerClient, SignerError};

    fn auth() -> Arc<Authenticator> {
        Arc::new(Authenticator::new(Key::from_bytes(&[5; 32]).unwrap(), 0, 0))
    }

    async fn started(dir: &Path) -> (std::path::PathBuf, Arc<SignerStats>, CancellationToken) {
        let path = dir.join("s.sock");
        let listener = bind(&path).await.unwrap();
        let stats = Arc::new(SignerStats::default());
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, auth(), stats.clone(), stop.clone()));
        (path, stats, stop)
    }

    /// A credential names the caller the kernel reports, for the digest
    /// asked; the signer verifies one for a client, once.
    #[tokio::test]
    async fn signs_as_the_kernel_named_caller_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let (path, stats, _stop) = started(dir.path()).await;
        let me = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let client = SignerClient::new(&path);
        let d = content_digest(b"h", b"b");
        let cred = client.sign(d).await.unwrap();
        assert_eq!((cred.uid, cred.gid), me);
        assert_eq!(cred.digest, d);
        // The daemons' key verifies it; so does the signer, once.
        assert_eq!(
            auth()
                .verify(&cred, b"h", b"b", std::time::SystemTime::now())
                .unwrap(),
            me
        );
        assert_eq!(client.verify(&cred, d).await.unwrap(), me);
        let again = client.verify(&cred, d).await.unwrap_err();
        assert!(
            matches!(&again, SignerError::Refused(r) if r.contains("replayed")),
            "{again}"
        );
        assert_eq!(stats.signed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.refused.load(Ordering::Relaxed), 1);
    }

    /// Garbage gets an error reply; a frame over the limit ends the
    /// connection without being buffered; a live signer's socket is not
    /// taken over, a dead one's is.
    #[tokio::test]
    async fn bad_requests_and_a_second_signer() {
        let dir = tempfile::tempdir().unwrap();
        let (path, stats, stop) = started(dir.path()).await;
        let mut raw = Framed::new(UnixStream::connect(&path).await.unwrap(), signer_codec());
        raw.send(bytes::Bytes::from_static(b"\x93garbage"))
            .await
            .unwrap();
        let reply: SignerReply =
            rmp_serde::from_slice(&raw.next().await.unwrap().unwrap()).unwrap();
        assert!(matches!(reply, SignerReply::Error(e) if e.contains("malformed")));
        let mut s = UnixStream::connect(&path).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            s.read(&mut buf).await.unwrap(),
            0,
            "closed, not buffering 1 GiB"
        );
        assert!(stats.bad_requests.load(Ordering::Relaxed) >= 2);
        assert!(matches!(bind(&path).await, Err(AuthdError::InUse(_))));
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The listener is gone, its file stale: a new signer takes it.
        drop(raw);
        let again = bind(&path).await;
        assert!(again.is_ok(), "{:?}", again.err());
    }

    /// A socket in a directory others may write could be replaced by a
    /// signer of theirs: refused.
    #[tokio::test]
    async fn a_directory_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let r = bind(&open.join("s.sock")).await;
        assert!(
            matches!(r, Err(AuthdError::OpenDir { .. })),
            "{:?}",
            r.err()
        );
    }

    /// Many requests in flight on one client's link at once: each caller
    /// gets the answer to its own request (answers come back in order, and
    /// a mix-up would hand a caller a credential over another digest), and
    /// they all share one connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pipelined_requests_each_get_their_own_answer() {
        let dir = tempfile::tempdir().unwrap();
        let (path, stats, _stop) = started(dir.path()).await;
        let client = Arc::new(SignerClient::new(&path));
        let mut calls = Vec::new();
        for i in 0..200u32 {
            let client = client.clone();
            calls.push(tokio::spawn(async move {
                let d = content_digest(&i.to_be_bytes(), b"pipelined");
                let cred = client.sign(d).await.unwrap();
                assert_eq!(cred.digest, d, "request {i} got another's answer");
                // Every second one is verified back through the same link.
                if i % 2 == 0 {
                    client.verify(&cred, d).await.unwrap();
                }
            }));
        }
        for c in calls {
            c.await.unwrap();
        }
        assert_eq!(stats.signed.load(Ordering::Relaxed), 200);
        assert_eq!(stats.verified.load(Ordering::Relaxed), 100);
        // One uid may hold only a few connections: had each call opened
        // its own, the signer would have refused most of them.
        assert_eq!(stats.over_limit.load(Ordering::Relaxed), 0);
    }

    /// The client really keeps requests in flight together: a signer that
    /// answers only once it holds ten requests (one at a time would wait
    /// for ever) answers all ten, each to its own caller.
    #[tokio::test]
    async fn requests_are_in_flight_together() {
        use crate::wire::signer::{signer_codec, SignerReply, SignerRequest};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut framed = Framed::new(stream, signer_codec());
            let mut held = Vec::new();
            while held.len() < 10 {
                let frame = framed.next().await.unwrap().unwrap();
                match rmp_serde::from_slice(&frame).unwrap() {
                    SignerRequest::Sign { digest } => held.push(digest[0]),
                    other => panic!("unexpected {other:?}"),
                }
            }
            // Answered in order; the text names the request's digest.
            for tag in held {
                let reply = SignerReply::Error(format!("tag {tag}"));
                let b = rmp_serde::to_vec_named(&reply).unwrap();
                framed.send(bytes::Bytes::from(b)).await.unwrap();
            }
        });
        let client = Arc::new(SignerClient::new(&path));
        let calls: Vec<_> = (0..10u8)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move { (i, client.sign([i; 32]).await) })
            })
            .collect();
        for c in calls {
            let (i, r) = c.await.unwrap();
            match r {
                Err(SignerError::Error(e)) => assert_eq!(e, format!("tag {i}")),
                other => panic!("request {i}: {other:?}"),
            }
        }
    }

    /// One uid cannot hold more than its share of connections.
    #[tokio::test]
    async fn connections_per_uid_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (path, stats, _stop) = started(dir.path()).await;
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS_PER_UID {
            let c = SignerClient::new(&path);
            c.sign([1; 32]).await.unwrap();
            held.push(c);
        }
        let extra = SignerClient::new(&path);
        let err = extra.sign([1; 32]).await.unwrap_err();
        assert!(err.to_string().contains("signer connections"), "{err}");
        assert_eq!(stats.over_limit.load(Ordering::Relaxed), 1);
        // One closes: room again.
        held.pop();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(SignerClient::new(&path).sign([1; 32]).await.is_ok());
    }
}
