//! The accept loop every daemon listener shares: stop at cancellation, admit
//! at most the configured number of concurrent connections, and tell the
//! others why they are turned away.
//!
//! What an admitted connection is for (a CLI client, a node link) is the
//! caller's `serve`; this module only decides whether it gets served.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use super::limit::ConnLimiter;
use super::shutdown::Part;
use crate::wire::auth::Authenticator;
use crate::wire::connection::Connection;
use crate::wire::messages::{Body, ErrorCode, ErrorReply};

/// Longest a refused peer is kept to read its refusal: long enough for the
/// frame to arrive before the close, short enough that a flood of refused
/// connections costs little.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// Refusals being written at once; beyond this a refused connection is
/// closed without a word (a flood must not grow a second unbounded set).
const MAX_REFUSING: usize = 64;

/// Connections the kernel may hold completed but not yet accepted. tokio's
/// own `bind` asks for 128 (std's figure); 512 node daemons dialling one
/// srun at once overflowed that, and every SYN dropped on overflow is
/// retried only after TCP's 1 s initial timeout, so the last nodes' task
/// exits came a second late. The kernel caps this at `net.core.somaxconn`.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Bind a listening TCP socket on `addr` (a host or address and a port, as
/// `TcpListener::bind` takes it) with [`LISTEN_BACKLOG`]; the first
/// address the name resolves to that binds is used.
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        match bind_one(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr} names no address"),
        )
    }))
}

fn bind_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As tokio's bind does: a restarted daemon gets its port back at once
    // rather than after TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// One listening socket and its limit.
pub struct Listen {
    pub listener: TcpListener,
    pub limiter: Arc<ConnLimiter>,
    pub auth: Arc<Authenticator>,
    pub boot_id: u64,
    /// Names the daemon in the refusal (`canopy-ctld`, `canopy-noded n3`).
    pub who: String,
}

/// Accept until `listener_part` is cancelled; serve each admitted connection
/// as a task of `conns`. The listening socket closes when this returns.
pub async fn accept_loop<F, Fut>(l: Listen, listener_part: Part, conns: Part, serve: F)
where
    F: Fn(Connection, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let refusing = ConnLimiter::new(MAX_REFUSING);
    loop {
        let accepted = tokio::select! {
            _ = listener_part.token.cancelled() => return,
            a = l.listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Typically EMFILE: back off rather than spin (still stoppable).
                tracing::error!(error = %e, "accept failed");
                tokio::select! {
                    _ = listener_part.token.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        match l.limiter.try_acquire() {
            Some(permit) => {
                let conn = Connection::new(stream, l.auth.clone(), l.boot_id).untrusted();
                let fut = serve(conn, peer);
                conns.spawn(async move {
                    // Held for the connection's whole life.
                    let _permit = permit;
                    fut.await;
                });
            }
            None => {
                let counts = l.limiter.counts();
                // One warning per hundred refusals: a flood must not flood the log.
                if counts.refused % 100 == 1 {
                    tracing::warn!(%peer, max = counts.max, refused = counts.refused, "connection limit reached; refusing connections");
                } else {
                    tracing::debug!(%peer, "connection refused: at the limit");
                }
                let Some(slot) = refusing.try_acquire() else {
                    drop(stream);
                    continue;
                };
                let why = format!(
                    "{} is at its connection limit ({} connections); try again later",
                    l.who, counts.max
                );
                let (auth, boot_id, token) = (l.auth.clone(), l.boot_id, conns.token.clone());
                conns.spawn(async move {
                    let _slot = slot;
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = refuse(stream, auth, boot_id, why) => {}
                    }
                });
            }
        }
    }
}

/// The refusal frame for a connection over the limit.
fn refusal(why: String) -> Body {
    // QueueFull: the code of "temporarily unable, try again" refusals, which
    // older clients already decode.
    Body::Error(ErrorReply {
        code: ErrorCode::QueueFull,
        message: why,
    })
}

/// Send one error frame (answering whatever the peer asks first), then read
/// and drop what the peer sends until it closes or the linger ends: closing
/// with its request unread would reset the connection, and a reset can
/// discard the refusal before the peer reads it.
async fn refuse(stream: TcpStream, auth: Arc<Authenticator>, boot_id: u64, why: String) {
    let mut conn = Connection::new(stream, auth, boot_id).untrusted();
    let linger = async {
        if conn.send(0, &refusal(why)).await.is_err() {
            return;
        }
        while let Ok(Some(_)) = conn.recv().await {}
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, linger).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Far more peers than tokio's default backlog (128) dial at once while
    /// nobody accepts, as 512 node daemons dial one srun: every connection
    /// completes. With the small backlog the kernel drops the extra SYNs and
    /// each of those peers waits for TCP's 1 s retry, so the short deadline
    /// here (a loopback handshake takes microseconds) tells the two apart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_peers_fits_in_the_accept_queue() {
        let listener = bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dials: Vec<_> = (0..400)
            .map(|_| {
                tokio::spawn(async move {
                    tokio::time::timeout(Duration::from_millis(900), TcpStream::connect(addr)).await
                })
            })
            .collect();
        let mut held = Vec::new();
        let mut late = 0;
        for d in dials {
            match d.await.unwrap() {
                Ok(Ok(s)) => held.push(s),
                Ok(Err(e)) => panic!("connect failed: {e}"),
                Err(_) => late += 1,
            }
        }
        assert_eq!(late, 0, "{late} of 400 peers waited for a SYN retry");
        drop(listener);
    }

    /// A name that resolves binds; a bad one says what was wrong.
    #[tokio::test]
    async fn binds_by_name_and_refuses_garbage() {
        let l = bind("localhost:0").await.unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
        assert!(bind("no port here").await.is_err());
    }
}
