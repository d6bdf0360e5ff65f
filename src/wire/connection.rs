//! The one framed, authenticated TCP connection used by every daemon and by
//! the CLI: send a `Body`, receive a verified `Envelope`, or do both as a
//! request matched to its reply by correlation id.
//!
//! This module owns the socket plumbing only: framing is `frame.rs`, signing
//! and replay protection `auth.rs`. It has no notion of roles, retries,
//! reconnection or policy; daemons build those on top, usually after
//! [`Connection::into_split`] so that reading and writing run concurrently.
//! After an error for which [`WireError::ends_connection`] holds, drop the
//! connection: further reads report a clean end.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncRead;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio_util::codec::{Framed, FramedParts, FramedWrite};

use super::error::WireError;
use super::frame::{self, FrameCodec};
use super::messages::{Body, Envelope, Header, PROTOCOL_VERSION};
use super::signer::Signer;

pub struct Connection {
    framed: Framed<TcpStream, FrameCodec>,
    auth: Signer,
    boot_id: u64,
    peer: Option<SocketAddr>,
    /// Last correlation id `request` used; ids start at 1 (0 = unsolicited).
    last_corr: u64,
}

impl Connection {
    /// Connects to `addr`; frames sent carry `boot_id` in their header.
    pub async fn connect(
        addr: impl ToSocketAddrs,
        auth: impl Into<Signer>,
        boot_id: u64,
    ) -> Result<Self, WireError> {
        let stream = TcpStream::connect(addr).await?;
        Ok(Connection::new(stream, auth, boot_id))
    }

    /// Wraps an accepted or connected stream.
    pub fn new(stream: TcpStream, auth: impl Into<Signer>, boot_id: u64) -> Self {
        // Frames are small and latency-bound (requests, heartbeats, fan-out),
        // so Nagle's delay only hurts. If setting it fails the socket is
        // already broken and the first read or write will say so.
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().ok();
        Connection {
            framed: Framed::new(stream, FrameCodec::default()),
            auth: auth.into(),
            boot_id,
            peer,
            last_corr: 0,
        }
    }

    /// Largest frame this connection sends or accepts (default
    /// [`frame::MAX_FRAME_LEN`]).
    pub fn with_max_frame_len(mut self, max_frame_len: usize) -> Self {
        self.framed.codec_mut().set_max_frame_len(max_frame_len);
        self
    }

    /// Treat the peer as unauthenticated until a frame from it verifies:
    /// until then, what it can make this end buffer is bounded (see
    /// [`FrameCodec`]). For accepted connections; a connection we opened
    /// trusts the peer it chose.
    pub fn untrusted(mut self) -> Self {
        self.framed.codec_mut().set_unauthenticated();
        self
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// This end's address (the interface that reaches the peer).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.framed.get_ref().local_addr().ok()
    }

    /// Sends one frame and flushes it.
    pub async fn send(&mut self, corr: u64, body: &Body) -> Result<(), WireError> {
        let payload = encode_frame(&self.auth, self.boot_id, corr, body).await?;
        self.framed.send(payload).await
    }

    /// The next verified frame; `Ok(None)` when the peer closed the
    /// connection between frames.
    pub async fn recv(&mut self) -> Result<Option<Envelope>, WireError> {
        read_envelope(&mut self.framed, &self.auth).await
    }

    /// As [`Connection::recv`], with the frame's size in bytes (for traffic statistics).
    pub async fn recv_sized(&mut self) -> Result<Option<(Envelope, usize)>, WireError> {
        read_sized(&mut self.framed, &self.auth).await
    }

    /// Sends `body` under a fresh correlation id and waits for the frame that
    /// answers it. Late replies to earlier requests (abandoned after a
    /// timeout) are skipped; any other frame is an error.
    pub async fn request(&mut self, body: &Body) -> Result<Envelope, WireError> {
        let corr = self.next_corr();
        self.exchange(corr, body).await
    }

    /// [`Connection::request`] bounded by `limit`. After a timeout the
    /// connection stays usable: the late reply is skipped by the next request.
    pub async fn request_timeout(
        &mut self,
        body: &Body,
        limit: Duration,
    ) -> Result<Envelope, WireError> {
        let corr = self.next_corr();
        tokio::time::timeout(limit, self.exchange(corr, body))
            .await
            .map_err(|_| WireError::Timeout {
                kind: body.kind(),
                corr,
                after_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            })?
    }

    /// Owned halves, for tasks that read and write concurrently. Bytes the
    /// connection had already read (or not yet written) move with them.
    pub fn into_split(self) -> (ConnReader, ConnWriter) {
        let parts = self.framed.into_parts();
        let max_frame_len = parts.codec.max_frame_len();
        let (read_half, write_half) = parts.io.into_split();
        // N.B. the reader stays a `Framed` because only `Framed::from_parts`
        // marks already-buffered bytes as ready to decode; a `FramedRead`
        // given them would wait for the socket first and could stall on
        // frames it already holds. The reader also keeps the codec, which
        // may be part-way through a frame.
        let mut reader_parts = FramedParts::new::<Bytes>(read_half, parts.codec);
        reader_parts.read_buf = parts.read_buf;
        let mut writer = FramedWrite::new(write_half, FrameCodec::new(max_frame_len));
        *writer.write_buffer_mut() = parts.write_buf;
        let reader = ConnReader {
            framed: Framed::from_parts(reader_parts),
            auth: self.auth.clone(),
            peer: self.peer,
        };
        let writer = ConnWriter {
            framed: writer,
            auth: self.auth,
            boot_id: self.boot_id,
            peer: self.peer,
        };
        (reader, writer)
    }

    fn next_corr(&mut self) -> u64 {
        self.last_corr = self.last_corr.wrapping_add(1).max(1);
        self.last_corr
    }

    async fn exchange(&mut self, corr: u64, body: &Body) -> Result<Envelope, WireError> {
        self.send(corr, body).await?;
        let kind = body.kind();
        loop {
            let envelope = self
                .recv()
                .await?
                .ok_or(WireError::PeerClosed { kind, corr })?;
            let got = envelope.header.corr;
            if got == corr {
                return Ok(envelope);
            }
            // A peer that could not read our frame cannot know its id: it
            // answers with an error under id 0, which is the answer to this request.
            if got == 0 && matches!(envelope.body, Body::Error(_)) {
                return Ok(envelope);
            }
            if got == 0 || got > corr {
                return Err(WireError::UnexpectedReply {
                    expected: corr,
                    got,
                    kind: envelope.header.kind,
                });
            }
        }
    }
}

/// The receiving half of a split [`Connection`].
pub struct ConnReader {
    /// Write side unused; see [`Connection::into_split`] for why `Framed`.
    framed: Framed<OwnedReadHalf, FrameCodec>,
    auth: Signer,
    peer: Option<SocketAddr>,
}

impl ConnReader {
    /// As [`Connection::recv`].
    pub async fn recv(&mut self) -> Result<Option<Envelope>, WireError> {
        read_envelope(&mut self.framed, &self.auth).await
    }

    /// As [`ConnReader::recv`], with the frame's size in bytes (for traffic statistics).
    pub async fn recv_sized(&mut self) -> Result<Option<(Envelope, usize)>, WireError> {
        read_sized(&mut self.framed, &self.auth).await
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

/// The sending half of a split [`Connection`]. Dropping it closes the
/// sending direction (the peer sees a clean end of stream).
pub struct ConnWriter {
    framed: FramedWrite<OwnedWriteHalf, FrameCodec>,
    auth: Signer,
    boot_id: u64,
    peer: Option<SocketAddr>,
}

impl ConnWriter {
    /// Sends one frame and flushes it.
    pub async fn send(&mut self, corr: u64, body: &Body) -> Result<(), WireError> {
        self.feed(corr, body).await?;
        self.flush().await
    }

    /// Queues one frame without flushing (the buffer is written out when it
    /// grows large); call [`ConnWriter::flush`] after the batch.
    pub async fn feed(&mut self, corr: u64, body: &Body) -> Result<(), WireError> {
        let payload = encode_frame(&self.auth, self.boot_id, corr, body).await?;
        self.framed.feed(payload).await
    }

    pub async fn flush(&mut self) -> Result<(), WireError> {
        self.framed.flush().await
    }

    /// Sends a batch of `(corr, body)` frames with a single flush.
    pub async fn send_many<'a>(
        &mut self,
        frames: impl IntoIterator<Item = (u64, &'a Body)>,
    ) -> Result<(), WireError> {
        for (corr, body) in frames {
            self.feed(corr, body).await?;
        }
        self.flush().await
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

async fn encode_frame(
    auth: &Signer,
    boot_id: u64,
    corr: u64,
    body: &Body,
) -> Result<Bytes, WireError> {
    let header = Header {
        version: PROTOCOL_VERSION,
        kind: body.kind().to_owned(),
        corr,
        boot_id,
    };
    match auth {
        Signer::Key(a) => frame::encode(a, &header, body),
        Signer::Local(c) => {
            let unsigned = frame::encode_unsigned(&header, body)?;
            let credential = c.sign(unsigned.digest).await?;
            unsigned.sign(&credential)
        }
    }
}

async fn read_envelope<T>(
    frames: &mut Framed<T, FrameCodec>,
    auth: &Signer,
) -> Result<Option<Envelope>, WireError>
where
    T: AsyncRead + Unpin,
{
    Ok(read_sized(frames, auth).await?.map(|(env, _)| env))
}

/// As `read_envelope`, also returning the frame's size on the wire. The
/// first frame that verifies lifts the codec's pre-authentication bound.
async fn read_sized<T>(
    frames: &mut Framed<T, FrameCodec>,
    auth: &Signer,
) -> Result<Option<(Envelope, usize)>, WireError>
where
    T: AsyncRead + Unpin,
{
    match frames.next().await {
        None => Ok(None),
        Some(payload) => {
            let payload: BytesMut = payload?;
            // 4 bytes of length prefix plus the payload.
            let len = payload.len() + 4;
            let env = match auth {
                Signer::Key(a) => frame::decode(a, &payload, SystemTime::now())?,
                Signer::Local(c) => {
                    let opened = frame::open(&payload)?;
                    let (uid, gid) = c.verify(&opened.credential, opened.digest).await?;
                    opened.trust(uid, gid)?
                }
            };
            frames.codec_mut().set_authenticated();
            Ok(Some((env, len)))
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;
    use tokio_util::codec::Encoder;

    use super::*;
    use crate::wire::auth::{AuthError, Authenticator, Key};
    use crate::wire::error::FramePart;
    use crate::wire::frame::MAX_FRAME_LEN;
    use crate::wire::messages::{CancelRequest, JobQuery, PongReply, SubmitReply};
    use std::sync::Arc;

    fn auth_with(key_byte: u8) -> Arc<Authenticator> {
        let key = Key::from_bytes(&[key_byte; 32]).unwrap();
        Arc::new(Authenticator::new(key, 1000, 100))
    }

    fn auth() -> Arc<Authenticator> {
        auth_with(1)
    }

    /// A connected (client, server) pair on loopback, each with its own
    /// authenticator as separate processes would have.
    async fn pair() -> (Connection, Connection) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            tokio::join!(Connection::connect(addr, auth(), 11), listener.accept());
        (
            client.unwrap(),
            Connection::new(accepted.unwrap().0, auth(), 22),
        )
    }

    /// A raw socket speaking to a `Connection`, for hand-made bytes.
    async fn raw_pair() -> (TcpStream, Connection) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (raw, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (
            raw.unwrap(),
            Connection::new(accepted.unwrap().0, auth(), 22),
        )
    }

    /// A whole length-prefixed frame as the wire carries it.
    fn wire_bytes(auth: &Authenticator, corr: u64, body: &Body) -> BytesMut {
        let header = Header {
            version: PROTOCOL_VERSION,
            kind: body.kind().to_owned(),
            corr,
            boot_id: 11,
        };
        let payload = frame::encode(auth, &header, body).unwrap();
        let mut out = BytesMut::new();
        FrameCodec::default().encode(payload, &mut out).unwrap();
        out
    }

    fn bodies() -> Vec<Body> {
        vec![
            Body::Ping,
            Body::QueryJobs(JobQuery {
                job_ids: vec![4, 5],
                include_finished: true,
                brief: false,
            }),
            Body::SubmitReply(SubmitReply {
                job_id: 77,
                will_run: None,
            }),
            Body::CancelJobs(CancelRequest {
                job_ids: vec![1],
                signal: None,
                batch_only: true,
                exact: false,
            }),
            Body::Keepalive,
        ]
    }

    #[tokio::test]
    async fn frames_round_trip_both_ways() {
        let (mut client, mut server) = pair().await;
        for (corr, body) in bodies().iter().enumerate() {
            client.send(corr as u64, body).await.unwrap();
            let got = server.recv().await.unwrap().unwrap();
            assert_eq!(&got.body, body);
            assert_eq!(got.header.corr, corr as u64);
            assert_eq!(got.header.boot_id, 11);
            assert_eq!(got.header.kind, body.kind());
            assert_eq!((got.uid, got.gid), (1000, 100));

            server.send(corr as u64, body).await.unwrap();
            let back = client.recv().await.unwrap().unwrap();
            assert_eq!(&back.body, body);
            assert_eq!(back.header.boot_id, 22);
        }
    }

    #[tokio::test]
    async fn new_sets_nodelay_and_records_the_peer() {
        let (client, server) = pair().await;
        assert!(client.framed.get_ref().nodelay().unwrap());
        assert!(server.framed.get_ref().nodelay().unwrap());
        let client_local = client.framed.get_ref().local_addr().unwrap();
        assert_eq!(server.peer_addr(), Some(client_local));
    }

    #[tokio::test]
    async fn request_gets_the_reply_with_its_correlation_id() {
        let (mut client, mut server) = pair().await;
        let serve = tokio::spawn(async move {
            for _ in 0..2 {
                let req = server.recv().await.unwrap().unwrap();
                let pong = Body::Pong(PongReply {
                    host: "ctl".into(),
                    boot_id: 22,
                    started: 0,
                    version: "x".into(),
                });
                server.send(req.header.corr, &pong).await.unwrap();
            }
        });
        let first = client.request(&Body::Ping).await.unwrap();
        let second = client.request(&Body::Ping).await.unwrap();
        assert!(matches!(first.body, Body::Pong(_)));
        assert_eq!((first.header.corr, second.header.corr), (1, 2));
        serve.await.unwrap();
    }

    #[tokio::test]
    async fn clean_close_between_frames_is_none() {
        let (mut client, mut server) = pair().await;
        client.send(1, &Body::Ping).await.unwrap();
        drop(client);
        assert!(server.recv().await.unwrap().is_some());
        assert!(server.recv().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn close_in_the_middle_of_a_frame_is_truncated() {
        let (mut raw, mut server) = raw_pair().await;
        let bytes = wire_bytes(&auth(), 1, &Body::Ping);
        raw.write_all(&bytes[..bytes.len() - 3]).await.unwrap();
        raw.shutdown().await.unwrap();
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::Truncated { buffered } if buffered == bytes.len() - 7),
            "{err}"
        );
        assert!(err.ends_connection());
    }

    #[tokio::test]
    async fn oversized_length_prefix_is_refused() {
        let (mut raw, mut server) = raw_pair().await;
        raw.write_all(&((MAX_FRAME_LEN + 1) as u32).to_be_bytes())
            .await
            .unwrap();
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::FrameTooLarge { len, max }
                if len == MAX_FRAME_LEN + 1 && max == MAX_FRAME_LEN),
            "{err}"
        );
    }

    #[tokio::test]
    async fn frame_limit_is_per_connection_on_both_sides() {
        // Sending: refused before anything reaches the socket.
        let (client, _server) = pair().await;
        let mut client = client.with_max_frame_len(16);
        let err = client.send(1, &Body::Ping).await.unwrap_err();
        assert!(
            matches!(err, WireError::FrameTooLarge { max: 16, .. }),
            "{err}"
        );
        // The limit carries over to a split writer.
        let (_rx, mut tx) = client.into_split();
        let err = tx.send(1, &Body::Ping).await.unwrap_err();
        assert!(
            matches!(err, WireError::FrameTooLarge { max: 16, .. }),
            "{err}"
        );

        // Receiving: refused from the length prefix.
        let (mut raw, server) = raw_pair().await;
        let mut server = server.with_max_frame_len(16);
        raw.write_all(&wire_bytes(&auth(), 1, &Body::Ping))
            .await
            .unwrap();
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::FrameTooLarge { max: 16, .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn garbage_payload_is_malformed_and_the_stream_stays_in_sync() {
        let (mut raw, mut server) = raw_pair().await;
        let mut bytes = BytesMut::new();
        FrameCodec::default()
            .encode(Bytes::from_static(b"not msgpack at all"), &mut bytes)
            .unwrap();
        bytes.extend_from_slice(&wire_bytes(&auth(), 5, &Body::Keepalive));
        raw.write_all(&bytes).await.unwrap();
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(
                err,
                WireError::Malformed {
                    part: FramePart::Envelope,
                    ..
                }
            ),
            "{err}"
        );
        assert!(!err.ends_connection());
        let next = server.recv().await.unwrap().unwrap();
        assert_eq!((next.header.corr, next.body), (5, Body::Keepalive));
    }

    #[tokio::test]
    async fn the_same_frame_sent_twice_is_a_replay() {
        let (mut raw, mut server) = raw_pair().await;
        let bytes = wire_bytes(&auth(), 1, &Body::Ping);
        raw.write_all(&bytes).await.unwrap();
        raw.write_all(&bytes).await.unwrap();
        assert!(server.recv().await.unwrap().is_some());
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::Auth(AuthError::Replayed { uid: 1000, .. })),
            "{err}"
        );
    }

    #[tokio::test]
    async fn replay_on_a_second_connection_is_caught_by_the_shared_cache() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let daemon_auth = auth();
        let bytes = wire_bytes(&auth(), 1, &Body::Ping);
        let mut results = Vec::new();
        for _ in 0..2 {
            let (raw, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
            let mut raw = raw.unwrap();
            let mut conn = Connection::new(accepted.unwrap().0, Arc::clone(&daemon_auth), 22);
            raw.write_all(&bytes).await.unwrap();
            results.push(conn.recv().await);
        }
        assert!(results[0].as_ref().unwrap().is_some());
        assert!(matches!(
            results[1],
            Err(WireError::Auth(AuthError::Replayed { .. }))
        ));
    }

    #[tokio::test]
    async fn a_peer_with_another_key_is_rejected() {
        let (mut raw, mut server) = raw_pair().await;
        raw.write_all(&wire_bytes(&auth_with(2), 1, &Body::Ping))
            .await
            .unwrap();
        let err = server.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::Auth(AuthError::UnknownKey { .. })),
            "{err}"
        );
    }

    #[tokio::test]
    async fn request_fails_when_the_peer_closes_without_replying() {
        let (mut client, mut server) = pair().await;
        let serve = tokio::spawn(async move {
            server.recv().await.unwrap().unwrap();
        });
        let err = client.request(&Body::QueryPartitions).await.unwrap_err();
        assert!(
            matches!(
                err,
                WireError::PeerClosed {
                    kind: "QueryPartitions",
                    corr: 1
                }
            ),
            "{err}"
        );
        serve.await.unwrap();
    }

    #[tokio::test]
    async fn timed_out_request_leaves_the_connection_usable() {
        let (mut client, mut server) = pair().await;
        let (timed_out_tx, timed_out_rx) = oneshot::channel();
        let serve = tokio::spawn(async move {
            let first = server.recv().await.unwrap().unwrap();
            timed_out_rx.await.unwrap();
            let second = server.recv().await.unwrap().unwrap();
            // The late reply to the first request arrives before the second's.
            server.send(first.header.corr, &Body::Ok).await.unwrap();
            server
                .send(second.header.corr, &Body::Keepalive)
                .await
                .unwrap();
        });
        let err = client
            .request_timeout(&Body::Ping, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                WireError::Timeout {
                    kind: "Ping",
                    corr: 1,
                    after_ms: 50
                }
            ),
            "{err}"
        );
        timed_out_tx.send(()).unwrap();
        let reply = client
            .request_timeout(&Body::Ping, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((reply.header.corr, reply.body), (2, Body::Keepalive));
        serve.await.unwrap();
    }

    #[tokio::test]
    async fn a_reply_to_another_request_is_unexpected() {
        let (mut client, mut server) = pair().await;
        let serve = tokio::spawn(async move {
            server.recv().await.unwrap().unwrap();
            server.send(999, &Body::Ok).await.unwrap();
            server.recv().await.unwrap().unwrap();
            server.send(0, &Body::Keepalive).await.unwrap();
        });
        let err = client.request(&Body::Ping).await.unwrap_err();
        assert!(
            matches!(&err, WireError::UnexpectedReply { expected: 1, got: 999, kind }
                if kind == "Ok"),
            "{err}"
        );
        let err = client.request(&Body::Ping).await.unwrap_err();
        assert!(
            matches!(
                err,
                WireError::UnexpectedReply {
                    expected: 2,
                    got: 0,
                    ..
                }
            ),
            "{err}"
        );
        serve.await.unwrap();
    }

    #[tokio::test]
    async fn connect_to_a_closed_port_is_an_io_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = Connection::connect(addr, auth(), 1).await.err().unwrap();
        assert!(matches!(err, WireError::Io(_)), "{err}");
    }

    #[tokio::test]
    async fn split_halves_read_and_write_concurrently_in_batches() {
        let (client, server) = pair().await;
        // The server echoes every frame back with its correlation id.
        let (mut server_rx, mut server_tx) = server.into_split();
        let echo = tokio::spawn(async move {
            while let Some(env) = server_rx.recv().await.unwrap() {
                server_tx.send(env.header.corr, &env.body).await.unwrap();
            }
        });
        let (mut rx, mut tx) = client.into_split();
        assert_eq!(rx.peer_addr(), tx.peer_addr());
        const N: u64 = 500;
        let collect = tokio::spawn(async move {
            let mut corrs = Vec::new();
            while corrs.len() < N as usize {
                corrs.push(rx.recv().await.unwrap().unwrap().header.corr);
            }
            corrs
        });
        let batch: Vec<(u64, Body)> = (1..=N).map(|c| (c, Body::Keepalive)).collect();
        tx.send_many(batch.iter().map(|(c, b)| (*c, b)))
            .await
            .unwrap();
        let corrs = collect.await.unwrap();
        assert_eq!(corrs, (1..=N).collect::<Vec<_>>());
        drop(tx);
        echo.await.unwrap();
    }

    #[tokio::test]
    async fn frames_already_buffered_survive_the_split() {
        let (mut client, server) = pair().await;
        let (_server_rx, mut server_tx) = server.into_split();
        server_tx.feed(1, &Body::Ok).await.unwrap();
        server_tx.feed(2, &Body::Keepalive).await.unwrap();
        server_tx.flush().await.unwrap();
        // Let both frames land before the first read, so one read takes both.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(client.recv().await.unwrap().unwrap().header.corr, 1);
        assert!(!client.framed.read_buffer().is_empty());
        let (mut rx, _tx) = client.into_split();
        let second = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .expect("buffered frame must be decoded without new data")
            .unwrap()
            .unwrap();
        assert_eq!((second.header.corr, second.body), (2, Body::Keepalive));
    }

    #[tokio::test]
    async fn split_reader_reports_clean_close_and_truncation() {
        let (client, mut server) = pair().await;
        let (mut rx, mut tx) = client.into_split();
        server.send(3, &Body::Ok).await.unwrap();
        drop(server);
        assert_eq!(rx.recv().await.unwrap().unwrap().header.corr, 3);
        assert!(rx.recv().await.unwrap().is_none());
        // Writing to a closed peer eventually fails with an i/o error.
        let mut failed = None;
        for corr in 0..100 {
            if let Err(err) = tx.send(corr, &Body::Ok).await {
                failed = Some(err);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(matches!(failed, Some(WireError::Io(_))), "{failed:?}");

        let (mut raw, server) = raw_pair().await;
        let (mut rx, _tx) = server.into_split();
        let mut partial = BytesMut::new();
        partial.put_u32(100);
        partial.put_slice(&[0; 10]);
        raw.write_all(&partial).await.unwrap();
        raw.shutdown().await.unwrap();
        let err = rx.recv().await.unwrap_err();
        assert!(
            matches!(err, WireError::Truncated { buffered: 10 }),
            "{err}"
        );
    }
}
