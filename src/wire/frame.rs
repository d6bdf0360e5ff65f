//! Bytes ↔ frames, with no I/O: the length-delimited stream codec and the
//! pure `encode`/`decode` of one frame's payload.
//!
//! On the stream, a frame is a 4-byte big-endian length and a payload. The
//! payload is a MessagePack array `[header (bin), credential (map), body
//! (bin)]`, where header and body are the named-field MessagePack encodings
//! of [`Header`] and [`Body`]. Keeping them as opaque `bin` items lets the
//! credential sign the exact bytes, and lets a receiver check the version and
//! the signature before it spends any effort decoding the body. Signing rules
//! live in `auth.rs`, the message types in `messages.rs`, sockets in
//! `connection.rs`.

use std::ops::Range;
use std::time::SystemTime;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use super::auth::{content_digest, Authenticator, ContentDigest, Credential};
use super::error::{FramePart, WireError};
use super::messages::{Body, Envelope, Header, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

/// Largest payload accepted or sent unless a connection is configured
/// otherwise. What an unauthenticated peer can make a receiver hold is
/// bounded separately (see [`FrameCodec`]).
pub const MAX_FRAME_LEN: usize = 64 << 20;

const LEN_PREFIX: usize = 4;
/// Most frames are small (heartbeats, health deltas, fan-out commands).
const INITIAL_CAPACITY: usize = 256;

/// Container nesting allowed while decoding. rmp_serde's default (1024
/// levels) overflows a 2 MiB thread stack on hostile input; canopy's bodies
/// nest a handful of levels, and header and credential are flat maps (the
/// slack is for fields a newer peer may add).
const MAX_BODY_DEPTH: usize = 32;
const MAX_FLAT_DEPTH: usize = 8;

const FIXARRAY_3: u8 = 0x93;
const FIXARRAY_FIRST: u8 = 0x90;
const FIXARRAY_LAST: u8 = 0x9f;
const ARRAY16: u8 = 0xdc;
const ARRAY32: u8 = 0xdd;
const BIN8: u8 = 0xc4;
const BIN16: u8 = 0xc5;
const BIN32: u8 = 0xc6;

/// Encodes and signs one frame's payload as of the current time.
pub fn encode(auth: &Authenticator, header: &Header, body: &Body) -> Result<Bytes, WireError> {
    encode_at(auth, header, body, SystemTime::now())
}

/// [`encode`] with the signing time given (for tests and simulations).
pub fn encode_at(
    auth: &Authenticator,
    header: &Header,
    body: &Body,
    now: SystemTime,
) -> Result<Bytes, WireError> {
    let unsigned = encode_unsigned(header, body)?;
    let credential = auth.sign_own(&unsigned.digest, now);
    unsigned.sign(&credential)
}

/// A frame serialized but not yet signed: the digest a credential must
/// cover, and the bytes it goes between.
pub struct Unsigned {
    buf: BytesMut,
    body_marker: usize,
    pub digest: ContentDigest,
}

/// Serialize a frame's header and body and compute their digest, so that
/// whoever signs (the key here, or the local signer) sees 32 bytes.
///
/// Everything is written into one buffer: header and body are serialized in
/// place (behind `bin32` markers patched afterwards); [`Unsigned::sign`]
/// appends the credential and rotates it in front of the body. That costs a
/// move of the body bytes but no intermediate allocation.
pub fn encode_unsigned(header: &Header, body: &Body) -> Result<Unsigned, WireError> {
    let mut buf = BytesMut::with_capacity(INITIAL_CAPACITY);
    buf.put_u8(FIXARRAY_3);
    let header_range = write_bin(&mut buf, FramePart::Header, header)?;
    let body_marker = buf.len();
    let body_range = write_bin(&mut buf, FramePart::Body, body)?;
    let digest = content_digest(&buf[header_range], &buf[body_range]);
    Ok(Unsigned {
        buf,
        body_marker,
        digest,
    })
}

impl Unsigned {
    /// The finished payload with `credential` in place.
    pub fn sign(mut self, credential: &Credential) -> Result<Bytes, WireError> {
        let end = self.buf.len();
        write_named(&mut self.buf, FramePart::Credential, credential)?;
        let credential_len = self.buf.len() - end;
        self.buf[self.body_marker..].rotate_right(credential_len);
        Ok(self.buf.freeze())
    }
}

/// Writes `value` as a `bin32` item and returns where its bytes are.
fn write_bin<T: Serialize>(
    buf: &mut BytesMut,
    part: FramePart,
    value: &T,
) -> Result<Range<usize>, WireError> {
    buf.put_u8(BIN32);
    let len_at = buf.len();
    buf.put_u32(0);
    let start = buf.len();
    write_named(buf, part, value)?;
    let len = buf.len() - start;
    let len32 = u32::try_from(len).map_err(|_| WireError::FrameTooLarge {
        len,
        max: u32::MAX as usize,
    })?;
    buf[len_at..start].copy_from_slice(&len32.to_be_bytes());
    Ok(start..buf.len())
}

fn write_named<T: Serialize>(
    buf: &mut BytesMut,
    part: FramePart,
    value: &T,
) -> Result<(), WireError> {
    rmp_serde::encode::write_named(&mut buf.writer(), value).map_err(|err| WireError::Encode {
        part,
        detail: err.to_string(),
    })
}

/// Decodes one frame's payload: the outer array, then the header (rejecting
/// unsupported versions), then the credential is verified as of `now`, and
/// only then is the body decoded.
pub fn decode(
    auth: &Authenticator,
    payload: &[u8],
    now: SystemTime,
) -> Result<Envelope, WireError> {
    let opened = open(payload)?;
    let (uid, gid) = auth.verify_digest(&opened.credential, &opened.digest, now)?;
    opened.trust(uid, gid)
}

/// A frame taken apart, its header checked, its credential not yet.
pub struct Opened<'a> {
    header: Header,
    pub credential: Credential,
    pub digest: ContentDigest,
    body: &'a [u8],
}

/// Split a payload and check its header; the caller verifies
/// `credential` over `digest` (with its key, or through the local signer)
/// before calling [`Opened::trust`].
pub fn open(payload: &[u8]) -> Result<Opened<'_>, WireError> {
    let raw = split(payload)?;
    let header = decode_header(raw.header)?;
    Ok(Opened {
        header,
        digest: content_digest(raw.header, raw.body),
        credential: raw.credential,
        body: raw.body,
    })
}

impl Opened<'_> {
    /// Decode the body of a frame whose credential verified as `uid`/`gid`.
    pub fn trust(self, uid: u32, gid: u32) -> Result<Envelope, WireError> {
        let header = self.header;
        let body: Body = from_slice_limited(self.body, MAX_BODY_DEPTH, FramePart::Body)?;
        if body.kind() != header.kind {
            return Err(malformed(
                FramePart::Header,
                format!(
                    "header says kind {} but the body is {}",
                    header.kind,
                    body.kind()
                ),
            ));
        }
        Ok(Envelope {
            header,
            uid,
            gid,
            body,
        })
    }
}

/// A payload taken apart but not yet trusted.
struct RawFrame<'a> {
    header: &'a [u8],
    credential: Credential,
    body: &'a [u8],
}

fn split(payload: &[u8]) -> Result<RawFrame<'_>, WireError> {
    let mut rest = payload;
    let items = read_array_len(&mut rest)?;
    if items != 3 {
        return Err(malformed(
            FramePart::Envelope,
            format!("expected an array of 3 items, found {items}"),
        ));
    }
    let header = read_bin(&mut rest, FramePart::Header)?;
    let credential = read_credential(&mut rest)?;
    let body = read_bin(&mut rest, FramePart::Body)?;
    if !rest.is_empty() {
        return Err(malformed(
            FramePart::Envelope,
            format!("{} trailing bytes after the body", rest.len()),
        ));
    }
    Ok(RawFrame {
        header,
        credential,
        body,
    })
}

/// Only the field every header version must keep, so that a peer whose
/// header changed shape still gets "unsupported version", not "malformed".
#[derive(Deserialize)]
struct VersionOnly {
    version: u16,
}

fn decode_header(bytes: &[u8]) -> Result<Header, WireError> {
    let part = FramePart::Header;
    match from_slice_limited::<Header>(bytes, MAX_FLAT_DEPTH, part) {
        Ok(header) => {
            check_version(header.version)?;
            Ok(header)
        }
        Err(err) => {
            if let Ok(VersionOnly { version }) = from_slice_limited(bytes, MAX_FLAT_DEPTH, part) {
                check_version(version)?;
            }
            Err(err)
        }
    }
}

fn check_version(version: u16) -> Result<(), WireError> {
    if (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(WireError::UnsupportedVersion {
            got: version,
            min: MIN_PROTOCOL_VERSION,
            max: PROTOCOL_VERSION,
        })
    }
}

fn read_credential(rest: &mut &[u8]) -> Result<Credential, WireError> {
    let part = FramePart::Credential;
    let start = *rest;
    let credential = {
        // Reading through `&mut &[u8]` advances `rest` past the credential.
        let mut deserializer = rmp_serde::Deserializer::new(&mut *rest);
        deserializer.set_max_depth(MAX_FLAT_DEPTH);
        Credential::deserialize(&mut deserializer).map_err(|err| malformed(part, err))?
    };
    // The signature covers the credential's values, not its bytes, and MessagePack has
    // several spellings of one value (500 as uint16 or int16, keys in another order).
    // Only the spelling canopy writes is accepted, so that no changed byte of a frame
    // can still verify (the fuzz targets in tests/fuzz found a flipped marker accepted).
    let used = &start[..start.len() - rest.len()];
    let mut canonical = Vec::with_capacity(used.len());
    rmp_serde::encode::write_named(&mut canonical, &credential).map_err(|err| {
        WireError::Encode {
            part,
            detail: err.to_string(),
        }
    })?;
    if canonical != used {
        return Err(malformed(
            part,
            "not in canonical encoding (a value in a wider or signed marker, or fields \
             out of order)",
        ));
    }
    Ok(credential)
}

fn from_slice_limited<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    max_depth: usize,
    part: FramePart,
) -> Result<T, WireError> {
    let mut deserializer = rmp_serde::Deserializer::from_read_ref(bytes);
    deserializer.set_max_depth(max_depth);
    T::deserialize(&mut deserializer).map_err(|err| malformed(part, err))
}

fn read_array_len(rest: &mut &[u8]) -> Result<usize, WireError> {
    let part = FramePart::Envelope;
    match read_u8(rest, part)? {
        marker @ FIXARRAY_FIRST..=FIXARRAY_LAST => Ok(usize::from(marker - FIXARRAY_FIRST)),
        ARRAY16 => read_uint(rest, 2, part),
        ARRAY32 => read_uint(rest, 4, part),
        other => Err(malformed(
            part,
            format!("expected an array, found marker {other:#04x}"),
        )),
    }
}

fn read_bin<'a>(rest: &mut &'a [u8], part: FramePart) -> Result<&'a [u8], WireError> {
    let len = match read_u8(rest, part)? {
        BIN8 => read_uint(rest, 1, part)?,
        BIN16 => read_uint(rest, 2, part)?,
        BIN32 => read_uint(rest, 4, part)?,
        other => {
            return Err(malformed(
                part,
                format!("expected binary data, found marker {other:#04x}"),
            ))
        }
    };
    take(rest, len, part)
}

fn read_u8(rest: &mut &[u8], part: FramePart) -> Result<u8, WireError> {
    let (&byte, tail) = rest
        .split_first()
        .ok_or_else(|| malformed(part, "ends where a type marker was expected"))?;
    *rest = tail;
    Ok(byte)
}

fn read_uint(rest: &mut &[u8], width: usize, part: FramePart) -> Result<usize, WireError> {
    let bytes = take(rest, width, part)?;
    Ok(bytes
        .iter()
        .fold(0usize, |acc, &byte| (acc << 8) | usize::from(byte)))
}

fn take<'a>(rest: &mut &'a [u8], len: usize, part: FramePart) -> Result<&'a [u8], WireError> {
    if rest.len() < len {
        return Err(malformed(
            part,
            format!("needs {len} more bytes but only {} remain", rest.len()),
        ));
    }
    let (head, tail) = rest.split_at(len);
    *rest = tail;
    Ok(head)
}

fn malformed(part: FramePart, detail: impl ToString) -> WireError {
    WireError::Malformed {
        part,
        detail: detail.to_string(),
    }
}

/// Largest frame an unauthenticated connection may send without drawing on
/// [`PREAUTH_BUDGET`]: room for any ordinary first frame (a query, a
/// `Hello`, a submission with a usual script and environment).
pub const PREAUTH_FREE: usize = 64 << 10;
/// Bytes all unauthenticated connections of a process may hold together in
/// first frames larger than [`PREAUTH_FREE`] (an sbatch with a big script
/// as the first frame of its connection).
pub const PREAUTH_BUDGET: usize = 24 << 20;

/// What the budget has lent out, process-wide.
static PREAUTH_HELD: AtomicUsize = AtomicUsize::new(0);
/// First frames refused because the budget was in use.
static PREAUTH_REFUSED: AtomicU64 = AtomicU64::new(0);

/// The pre-authentication budget's state: (bytes held now, frames refused so far).
pub fn preauth_budget() -> (usize, u64) {
    (
        PREAUTH_HELD.load(Ordering::Relaxed),
        PREAUTH_REFUSED.load(Ordering::Relaxed),
    )
}

/// Takes `n` bytes from the budget if that many are free.
fn preauth_take(n: usize) -> bool {
    PREAUTH_HELD
        .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |held| {
            held.checked_add(n).filter(|&t| t <= PREAUTH_BUDGET)
        })
        .is_ok()
}

fn preauth_give(n: usize) {
    if n > 0 {
        PREAUTH_HELD.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The stream codec: a 4-byte big-endian length and the payload, with the
/// size limit reported as [`WireError::FrameTooLarge`] and EOF inside a
/// frame (even right after a complete length prefix) reported as
/// [`WireError::Truncated`]. The buffer is sized for the whole frame once its
/// prefix is accepted (one allocation, no regrowth copies).
///
/// A codec in pre-authentication mode ([`FrameCodec::set_unauthenticated`],
/// for accepted connections until their first frame verifies) bounds what
/// an unauthenticated peer can make it hold. The HMAC covers the body, so
/// the credential cannot be checked before the body is buffered; instead
/// the length prefix is judged: a frame up to [`PREAUTH_FREE`] (64 KiB) is
/// accepted, and a larger one only if its whole length can be taken from a
/// budget shared by every unauthenticated connection of the process
/// ([`PREAUTH_BUDGET`], 24 MiB), given back when the frame is complete or
/// the codec dropped; otherwise it is refused at once
/// ([`WireError::PreAuthBudget`]) and nothing is reserved. So N
/// unauthenticated peers hold at most N × 64 KiB plus 24 MiB, a legitimate
/// large first frame (a big sbatch) passes whenever nobody is abusing the
/// budget, and the daemons' short authentication deadline bounds how long
/// anyone can. Once a frame verifies, only the frame limit applies.
#[derive(Debug)]
pub struct FrameCodec {
    inner: LengthDelimitedCodec,
    max_frame_len: usize,
    /// The length of the frame being read, once its prefix is consumed.
    pending: Option<usize>,
    /// `Some(bytes charged to the budget)` until the connection authenticates.
    preauth: Option<usize>,
}

impl FrameCodec {
    pub fn new(max_frame_len: usize) -> Self {
        let inner = LengthDelimitedCodec::builder()
            .length_field_length(LEN_PREFIX)
            .max_frame_length(max_frame_len)
            .new_codec();
        FrameCodec {
            inner,
            max_frame_len,
            pending: None,
            preauth: None,
        }
    }

    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    pub fn set_max_frame_len(&mut self, max_frame_len: usize) {
        self.inner.set_max_frame_length(max_frame_len);
        self.max_frame_len = max_frame_len;
    }

    /// Bound what the peer may make this codec hold until
    /// [`FrameCodec::set_authenticated`] (see the type's documentation).
    pub fn set_unauthenticated(&mut self) {
        if self.preauth.is_none() {
            self.preauth = Some(0);
        }
    }

    /// The peer has authenticated: lift the pre-authentication bound.
    pub fn set_authenticated(&mut self) {
        if let Some(charged) = self.preauth.take() {
            preauth_give(charged);
        }
    }

    pub fn is_authenticated(&self) -> bool {
        self.preauth.is_none()
    }

    /// Take a large unauthenticated frame's length from the budget (a
    /// small one, or any frame once authenticated, needs nothing).
    fn charge(&mut self, len: usize) -> Result<(), WireError> {
        let Some(charged) = self.preauth else {
            return Ok(());
        };
        if len <= PREAUTH_FREE {
            return Ok(());
        }
        if !preauth_take(len) {
            PREAUTH_REFUSED.fetch_add(1, Ordering::Relaxed);
            return Err(WireError::PreAuthBudget { len });
        }
        self.preauth = Some(charged + len);
        Ok(())
    }

    fn uncharge(&mut self) {
        if let Some(charged) = self.preauth.as_mut() {
            preauth_give(std::mem::take(charged));
        }
    }
}

impl Drop for FrameCodec {
    fn drop(&mut self) {
        self.uncharge();
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(MAX_FRAME_LEN)
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, WireError> {
        let len = match self.pending {
            Some(len) => len,
            None => {
                let Some(prefix) = src.get(..LEN_PREFIX) else {
                    return Ok(None);
                };
                let mut be = [0u8; LEN_PREFIX];
                be.copy_from_slice(prefix);
                let len = u32::from_be_bytes(be) as usize;
                if len > self.max_frame_len {
                    // The prefix stays in `src`: nothing was consumed.
                    return Err(WireError::FrameTooLarge {
                        len,
                        max: self.max_frame_len,
                    });
                }
                self.charge(len)?;
                src.advance(LEN_PREFIX);
                // Room for the whole frame at once: what an unauthenticated
                // peer can make us reserve is bounded by `charge`.
                src.reserve(len.saturating_sub(src.len()));
                self.pending = Some(len);
                len
            }
        };
        if src.len() < len {
            return Ok(None);
        }
        self.pending = None;
        self.uncharge();
        Ok(Some(src.split_to(len)))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, WireError> {
        if let Some(frame) = self.decode(src)? {
            return Ok(Some(frame));
        }
        if src.is_empty() && self.pending.is_none() {
            Ok(None)
        } else {
            Err(WireError::Truncated {
                buffered: src.len(),
            })
        }
    }
}

impl Encoder<Bytes> for FrameCodec {
    type Error = WireError;

    fn encode(&mut self, payload: Bytes, dst: &mut BytesMut) -> Result<(), WireError> {
        if payload.len() > self.max_frame_len {
            return Err(WireError::FrameTooLarge {
                len: payload.len(),
                max: self.max_frame_len,
            });
        }
        self.inner.encode(payload, dst).map_err(WireError::Io)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::tree::rankset::RankSet;
    use crate::wire::auth::{AuthError, Key};
    use crate::wire::joblist::JobList;
    use crate::wire::messages::{
        CancelRequest, ErrorCode, ErrorReply, Forward, ForwardReply, HealthDelta, JobLaunch,
        NodeCommand, NodeReply, Outcome, PongReply,
    };
    use crate::wire::types::JobSubmit;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn auth() -> Authenticator {
        Authenticator::new(Key::from_bytes(&[3; 32]).unwrap(), 500, 50)
    }

    fn header_for(body: &Body) -> Header {
        Header {
            version: PROTOCOL_VERSION,
            kind: body.kind().to_owned(),
            corr: 42,
            boot_id: 0xfeed,
        }
    }

    fn frame(body: &Body) -> Bytes {
        encode_at(&auth(), &header_for(body), body, now()).unwrap()
    }

    fn sample_bodies() -> Vec<Body> {
        vec![
            Body::Ping,
            Body::Keepalive,
            Body::Pong(PongReply {
                host: "ctl".into(),
                boot_id: 9,
                started: 1_700_000_000,
                version: "0.1.0".into(),
            }),
            Body::SubmitJob(Box::new(JobSubmit {
                name: "job".into(),
                ntasks: Some(4),
                ..JobSubmit::default()
            })),
            Body::CancelJobs(CancelRequest {
                job_ids: vec![1, 2, 3],
                signal: Some(15),
                batch_only: false,
                exact: false,
            }),
            Body::CancelStep(crate::wire::messages::StepCancel {
                job_id: 4,
                step_id: 1,
                signal: None,
                terminate: true,
            }),
            Body::StepAborted,
            Body::WindowChange(crate::wire::messages::WindowSize {
                rows: 50,
                cols: 132,
            }),
            Body::Forward(Box::new(Forward {
                id: 8,
                targets: RankSet::default(),
                budget_ms: 5_000,
                cmd: NodeCommand::KillStep {
                    job_id: 4,
                    step_id: 1,
                    kill_wait_s: Some(30),
                },
                origin: 0,
            })),
            Body::Error(ErrorReply {
                code: ErrorCode::InvalidPartition,
                message: "no such partition".into(),
            }),
            Body::Health(HealthDelta::default()),
            Body::Forward(Box::new(Forward {
                id: 7,
                targets: RankSet::default(),
                budget_ms: 5_000,
                cmd: NodeCommand::Signal {
                    job_id: 3,
                    signal: 9,
                    batch_only: true,
                    steps_only: false,
                    step: None,
                },
                origin: 0,
            })),
            Body::ForwardReply(ForwardReply {
                id: 7,
                outcomes: vec![
                    Outcome {
                        ranks: RankSet::default(),
                        result: Ok(NodeReply::Signalled { processes: 2 }),
                    },
                    Outcome {
                        ranks: RankSet::default(),
                        result: Err("node unreachable".into()),
                    },
                ],
            }),
            Body::Jobs(JobList::default()),
            // One of the most deeply nested messages: must pass the depth limit.
            Body::Forward(Box::new(Forward {
                id: 8,
                targets: RankSet::default(),
                budget_ms: 1_000,
                cmd: NodeCommand::Launch(Box::new(launch())),
                origin: 0,
            })),
        ]
    }

    fn launch() -> JobLaunch {
        JobLaunch {
            job_id: 12,
            name: "train".into(),
            user: "alice".into(),
            uid: 1001,
            gid: 1001,
            partition: "gpu".into(),
            cluster: "c".into(),
            batch_host: "n001".into(),
            nodelist: "n[001-002]".into(),
            num_nodes: 2,
            cpus_per_node: vec![4, 4],
            tasks_per_node: vec![1, 1],
            ntasks: 2,
            ntasks_set: true,
            cpus_per_task: Some(4),
            mem_per_node_mb: None,
            mem_per_cpu_mb: Some(1024),
            time_limit_min: Some(60),
            script: "#!/bin/sh\nhostname\n".into(),
            script_args: vec!["--epochs".into(), "3".into()],
            env: vec![("PATH".into(), "/bin".into()), ("HOME".into(), "/h".into())],
            workdir: "/h".into(),
            submit_dir: "/h".into(),
            submit_host: "login".into(),
            stdout: "slurm-12.out".into(),
            stderr: None,
            stdin: Some("/dev/null".into()),
            start_time: 1_700_000_000,
            restarts: 0,
            interactive: false,
            array: None,
            open_append: false,
            account: None,
            held: Default::default(),
            resources: Default::default(),
        }
    }

    #[test]
    fn bodies_round_trip_with_verified_ids() {
        let receiver = auth();
        for body in sample_bodies() {
            let envelope = decode(&receiver, &frame(&body), now()).unwrap();
            assert_eq!(envelope.header, header_for(&body));
            assert_eq!((envelope.uid, envelope.gid), (500, 50));
            assert_eq!(envelope.body, body);
        }
    }

    #[test]
    fn payload_is_a_three_item_array_of_bin_map_bin() {
        let body = Body::Ping;
        let payload = frame(&body);
        let mut rest = &payload[..];
        assert_eq!(read_array_len(&mut rest).unwrap(), 3);
        let header = read_bin(&mut rest, FramePart::Header).unwrap();
        assert_eq!(header, rmp_serde::to_vec_named(&header_for(&body)).unwrap());
        // The credential is a map with named fields.
        assert_eq!(rest.first().map(|m| m & 0xf0), Some(0x80));
        let credential = read_credential(&mut rest).unwrap();
        assert_eq!(credential.uid, 500);
        let body_bytes = read_bin(&mut rest, FramePart::Body).unwrap();
        assert_eq!(body_bytes, rmp_serde::to_vec_named(&body).unwrap());
        assert!(rest.is_empty());
    }

    /// Appends `bytes` as a bin item with the shortest marker, as a
    /// canonical MessagePack encoder would (`encode` always uses `bin32`).
    fn put_bin(out: &mut Vec<u8>, bytes: &[u8]) {
        match bytes.len() {
            len @ 0..=0xff => out.extend_from_slice(&[BIN8, len as u8]),
            len @ 0x100..=0xffff => {
                out.push(BIN16);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                out.push(BIN32);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
        }
        out.extend_from_slice(bytes);
    }

    /// Lays out a payload from its three parts.
    fn assemble(header_bytes: &[u8], credential_bytes: &[u8], body_bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![FIXARRAY_3];
        put_bin(&mut out, header_bytes);
        out.extend_from_slice(credential_bytes);
        put_bin(&mut out, body_bytes);
        out
    }

    /// A payload built by hand, validly signed over whatever bytes it is given.
    fn signed_payload(header_bytes: &[u8], body_bytes: &[u8]) -> Vec<u8> {
        let credential = auth().sign(header_bytes, body_bytes, now());
        let credential_bytes = rmp_serde::to_vec_named(&credential).unwrap();
        assemble(header_bytes, &credential_bytes, body_bytes)
    }

    fn payload_with_header(header_bytes: &[u8], body: &Body) -> Vec<u8> {
        signed_payload(header_bytes, &rmp_serde::to_vec_named(body).unwrap())
    }

    #[test]
    fn short_bin_markers_from_other_encoders_are_accepted() {
        let mut big = launch();
        big.script = "x".repeat(1_000); // body needs bin16
        let body = Body::Forward(Box::new(Forward {
            id: 1,
            targets: RankSet::default(),
            budget_ms: 1,
            cmd: NodeCommand::Launch(Box::new(big)),
            origin: 0,
        }));
        for body in [Body::Ping, body] {
            let header = rmp_serde::to_vec_named(&header_for(&body)).unwrap();
            let payload = payload_with_header(&header, &body);
            assert_eq!(decode(&auth(), &payload, now()).unwrap().body, body);
        }
    }

    #[test]
    fn unsupported_version_is_named() {
        let mut header = header_for(&Body::Ping);
        header.version = PROTOCOL_VERSION + 1;
        let payload = encode_at(&auth(), &header, &Body::Ping, now()).unwrap();
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(err, WireError::UnsupportedVersion { got, min, max }
                if got == PROTOCOL_VERSION + 1
                    && min == MIN_PROTOCOL_VERSION
                    && max == PROTOCOL_VERSION),
            "{err}"
        );
        header.version = 0;
        let payload = encode_at(&auth(), &header, &Body::Ping, now()).unwrap();
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { got: 0, .. }));
    }

    #[derive(Serialize)]
    struct FutureHeader {
        version: u16,
        route: Vec<u32>,
    }

    #[test]
    fn reshaped_header_of_a_newer_version_is_unsupported_not_malformed() {
        let header = rmp_serde::to_vec_named(&FutureHeader {
            version: 9,
            route: vec![1, 2],
        })
        .unwrap();
        let payload = payload_with_header(&header, &Body::Ping);
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(err, WireError::UnsupportedVersion { got: 9, .. }),
            "{err}"
        );
        // The same shape claiming the current version is just malformed.
        let header = rmp_serde::to_vec_named(&FutureHeader {
            version: PROTOCOL_VERSION,
            route: vec![],
        })
        .unwrap();
        let payload = payload_with_header(&header, &Body::Ping);
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(
                err,
                WireError::Malformed {
                    part: FramePart::Header,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn version_is_checked_before_the_signature() {
        let mut header = header_for(&Body::Ping);
        header.version = 99;
        let wrong_key = Authenticator::new(Key::from_bytes(&[4; 32]).unwrap(), 1, 1);
        let payload = encode_at(&wrong_key, &header, &Body::Ping, now()).unwrap();
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(matches!(err, WireError::UnsupportedVersion { got: 99, .. }));
    }

    #[test]
    fn tampered_body_byte_is_another_message() {
        let body = Body::CancelJobs(CancelRequest {
            job_ids: vec![10],
            signal: None,
            batch_only: false,
            exact: false,
        });
        let mut payload = frame(&body).to_vec();
        // The body is the last item, so the last 10 in the payload is the job id.
        let at = payload.iter().rposition(|&b| b == 10).unwrap();
        payload[at] = 11;
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(err, WireError::Auth(AuthError::WrongMessage)),
            "{err}"
        );
    }

    #[test]
    fn credential_values_respelled_are_rejected() {
        // Found by tests/fuzz: uid 500 is uint16 (0xcd); as int16 (0xd1) it decoded to the
        // same value, so a frame with that byte flipped verified.
        let respell = |frame: &[u8], key: &[u8], marker: u8| {
            let mut changed = frame.to_vec();
            let at = changed
                .windows(key.len())
                .position(|w| w == key)
                .expect("key present")
                + key.len();
            changed[at] = marker;
            changed
        };
        let payload = frame(&Body::Ping);
        assert!(decode(&auth(), &payload, now()).is_ok());
        for (key, marker) in [
            (&b"\xa3uid"[..], 0xd1),          // uint16 -> int16
            (&b"\xacissued_at_ms"[..], 0xd3), // uint64 -> int64
        ] {
            let changed = respell(&payload, key, marker);
            let err = decode(&auth(), &changed, now()).unwrap_err();
            assert!(
                matches!(&err, WireError::Malformed { part: FramePart::Credential, detail }
                    if detail.contains("canonical")),
                "{err}"
            );
        }
        // The fuzz target's own find: a uint8 marker inserted before ttl_s's fixint.
        let mut changed = payload.to_vec();
        let at = changed
            .windows(6)
            .position(|w| w == b"\xa5ttl_s")
            .expect("ttl_s present")
            + 6;
        changed.insert(at, 0xcc);
        assert!(matches!(
            decode(&auth(), &changed, now()),
            Err(WireError::Malformed {
                part: FramePart::Credential,
                ..
            })
        ));
    }

    #[test]
    fn credentials_cannot_be_moved_between_frames() {
        let ping = frame(&Body::Ping);
        let keepalive = frame(&Body::Keepalive);
        let mut a = &ping[..];
        read_array_len(&mut a).unwrap();
        let ping_header = read_bin(&mut a, FramePart::Header).unwrap();
        let mut b = &keepalive[..];
        read_array_len(&mut b).unwrap();
        read_bin(&mut b, FramePart::Header).unwrap();
        let keepalive_credential = read_credential(&mut b).unwrap();
        let keepalive_body = read_bin(&mut b, FramePart::Body).unwrap();
        // Keepalive's credential and body under Ping's header: kinds differ,
        // but the credential check comes first: it was issued for another
        // message.
        let keepalive_credential = rmp_serde::to_vec_named(&keepalive_credential).unwrap();
        let spliced = assemble(ping_header, &keepalive_credential, keepalive_body);
        let err = decode(&auth(), &spliced, now()).unwrap_err();
        assert!(matches!(err, WireError::Auth(AuthError::WrongMessage)));
    }

    #[test]
    fn wrong_key_is_an_unknown_key() {
        let other = Authenticator::new(Key::from_bytes(&[4; 32]).unwrap(), 500, 50);
        let err = decode(&other, &frame(&Body::Ping), now()).unwrap_err();
        assert!(matches!(err, WireError::Auth(AuthError::UnknownKey { .. })));
    }

    #[test]
    fn expired_future_and_replayed_frames_are_told_apart() {
        let payload = frame(&Body::Ping);
        let late = now() + Duration::from_secs(66);
        let err = decode(&auth(), &payload, late).unwrap_err();
        assert!(matches!(err, WireError::Auth(AuthError::Expired { .. })));
        let early = now() - Duration::from_secs(6);
        let err = decode(&auth(), &payload, early).unwrap_err();
        assert!(matches!(
            err,
            WireError::Auth(AuthError::FutureDated { .. })
        ));
        let receiver = auth();
        decode(&receiver, &payload, now()).unwrap();
        let err = decode(&receiver, &payload, now()).unwrap_err();
        assert!(matches!(err, WireError::Auth(AuthError::Replayed { .. })));
    }

    #[test]
    fn header_kind_must_match_the_body() {
        let mut header = header_for(&Body::Ping);
        header.kind = "Keepalive".into();
        let payload = encode_at(&auth(), &header, &Body::Ping, now()).unwrap();
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(&err, WireError::Malformed { part: FramePart::Header, detail }
                if detail.contains("Keepalive") && detail.contains("Ping")),
            "{err}"
        );
    }

    #[test]
    fn signed_garbage_body_is_malformed_body() {
        let header_bytes = rmp_serde::to_vec_named(&header_for(&Body::Ping)).unwrap();
        let payload = signed_payload(&header_bytes, &[0xc1]); // "never used" marker
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(matches!(
            err,
            WireError::Malformed {
                part: FramePart::Body,
                ..
            }
        ));
    }

    #[test]
    fn structural_garbage_names_the_part() {
        let cases: [(&[u8], FramePart); 8] = [
            (&[], FramePart::Envelope),
            (&[0xa3, b'a', b'b', b'c'], FramePart::Envelope),
            (&[0x92, BIN8, 0], FramePart::Envelope),
            (&[ARRAY16, 0], FramePart::Envelope),
            (&[FIXARRAY_3, 0x01], FramePart::Header),
            (&[FIXARRAY_3, BIN8, 5, 1], FramePart::Header),
            (&[FIXARRAY_3, BIN8, 0, 0x80], FramePart::Credential),
            (&[FIXARRAY_3, BIN8, 1, 0xc0], FramePart::Credential),
        ];
        for (payload, part) in cases {
            let err = decode(&auth(), payload, now()).unwrap_err();
            assert!(
                matches!(&err, WireError::Malformed { part: p, .. } if *p == part),
                "{payload:x?}: {err}"
            );
        }
    }

    #[test]
    fn trailing_bytes_are_malformed() {
        let mut payload = frame(&Body::Ping).to_vec();
        payload.push(0);
        let err = decode(&auth(), &payload, now()).unwrap_err();
        assert!(
            matches!(&err, WireError::Malformed { part: FramePart::Envelope, detail }
                if detail.contains("1 trailing")),
            "{err}"
        );
    }

    #[test]
    fn deep_nesting_is_refused_without_exhausting_the_stack() {
        let mut nested = vec![0x91; 200_000];
        nested.push(0xc0);
        let header_bytes = rmp_serde::to_vec_named(&header_for(&Body::Ping)).unwrap();
        let body_bytes = rmp_serde::to_vec_named(&Body::Ping).unwrap();
        // As an unknown field (which serde would skip) of the header and of
        // the credential; and as a signed body, authentic but still refused.
        assert_eq!(header_bytes[0], 0x84, "header is a 4-entry map");
        let mut bad_header = header_bytes.clone();
        bad_header[0] = 0x85;
        bad_header.extend_from_slice(&[0xa1, b'x']);
        bad_header.extend_from_slice(&nested);
        let as_header = signed_payload(&bad_header, &body_bytes);
        let mut bad_credential = vec![0x81, 0xa1, b'x'];
        bad_credential.extend_from_slice(&nested);
        let as_credential = assemble(&header_bytes, &bad_credential, &body_bytes);
        let mut bad_body = vec![0x81, 0xaa];
        bad_body.extend_from_slice(b"CancelJobs");
        bad_body.extend_from_slice(&[0x81, 0xa1, b'x']);
        bad_body.extend_from_slice(&nested);
        let as_body = signed_payload(&header_bytes, &bad_body);
        let parts = [FramePart::Header, FramePart::Credential, FramePart::Body];
        for (payload, part) in [as_header, as_credential, as_body].iter().zip(parts) {
            let err = decode(&auth(), payload, now()).unwrap_err();
            assert!(
                matches!(&err, WireError::Malformed { part: p, detail }
                    if *p == part && detail.contains("depth")),
                "{err}"
            );
        }
    }

    #[derive(Debug)]
    struct Unencodable;

    impl Serialize for Unencodable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("refuses to serialize"))
        }
    }

    #[test]
    fn serialization_failure_is_an_encode_error() {
        let mut buf = BytesMut::new();
        let err = write_bin(&mut buf, FramePart::Body, &Unencodable).unwrap_err();
        assert!(
            matches!(&err, WireError::Encode { part: FramePart::Body, detail }
                if detail.contains("refuses")),
            "{err}"
        );
    }

    #[test]
    fn random_bytes_never_decode_or_panic() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let receiver = auth();
        for _ in 0..20_000 {
            let len = rng.gen_range(0..300);
            let mut payload: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            // Half the time, start like a real frame to get past the outer array.
            if rng.gen_bool(0.5) {
                if let Some(first) = payload.first_mut() {
                    *first = FIXARRAY_3;
                }
            }
            assert!(decode(&receiver, &payload, now()).is_err());
        }
    }

    #[test]
    fn every_truncation_of_a_valid_frame_is_an_error() {
        for body in sample_bodies() {
            let payload = frame(&body);
            for len in 0..payload.len() {
                assert!(decode(&auth(), &payload[..len], now()).is_err(), "{len}");
            }
            assert!(decode(&auth(), &payload, now()).is_ok());
        }
    }

    #[test]
    fn every_single_byte_change_to_a_valid_frame_is_rejected() {
        let mut rng = StdRng::seed_from_u64(7);
        for body in sample_bodies() {
            let payload = frame(&body);
            for at in 0..payload.len() {
                let mut changed = payload.to_vec();
                changed[at] ^= rng.gen_range(1..=255u8);
                // A fresh receiver: rejection must not rely on the replay cache.
                assert!(decode(&auth(), &changed, now()).is_err(), "byte {at}");
            }
        }
    }

    fn stream_of(payloads: &[Bytes]) -> BytesMut {
        let mut codec = FrameCodec::default();
        let mut stream = BytesMut::new();
        for payload in payloads {
            codec.encode(payload.clone(), &mut stream).unwrap();
        }
        stream
    }

    /// Feeds `stream` to a fresh codec in chunks, then signals EOF.
    fn decode_stream(
        codec: &mut FrameCodec,
        stream: &[u8],
        chunk: impl Fn(usize) -> usize,
    ) -> Result<Vec<BytesMut>, WireError> {
        let mut src = BytesMut::new();
        let mut frames = Vec::new();
        let mut fed = 0;
        while fed < stream.len() {
            let end = (fed + chunk(fed)).min(stream.len());
            src.extend_from_slice(&stream[fed..end]);
            fed = end;
            while let Some(frame) = codec.decode(&mut src)? {
                frames.push(frame);
            }
        }
        while let Some(frame) = codec.decode_eof(&mut src)? {
            frames.push(frame);
        }
        Ok(frames)
    }

    #[test]
    fn codec_reassembles_frames_split_anywhere() {
        let payloads: Vec<Bytes> = sample_bodies().iter().map(frame).collect();
        let stream = stream_of(&payloads);
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..200 {
            let cuts: Vec<usize> = (0..stream.len()).map(|_| rng.gen_range(1..40)).collect();
            let frames = decode_stream(&mut FrameCodec::default(), &stream, |at| cuts[at]).unwrap();
            assert_eq!(frames.len(), payloads.len());
            for (got, want) in frames.iter().zip(&payloads) {
                assert_eq!(&got[..], &want[..]);
            }
        }
    }

    #[test]
    fn codec_survives_random_streams() {
        let mut rng = StdRng::seed_from_u64(13);
        for _ in 0..5_000 {
            let len = rng.gen_range(0..64);
            let stream: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let mut codec = FrameCodec::new(1024);
            // Any outcome but a panic is acceptable; a frame must respect the max.
            if let Ok(frames) = decode_stream(&mut codec, &stream, |_| 7) {
                assert!(frames.iter().all(|f| f.len() <= 1024));
            }
        }
    }

    #[test]
    fn oversized_length_prefix_fails_before_allocating() {
        let mut codec = FrameCodec::new(1 << 20);
        let mut src = BytesMut::with_capacity(16);
        src.put_u32(u32::MAX);
        let err = codec.decode(&mut src).unwrap_err();
        assert!(
            matches!(err, WireError::FrameTooLarge { len, max: 1_048_576 }
                if len == u32::MAX as usize),
            "{err}"
        );
        assert!(src.capacity() < 1 << 20);
        // Exactly at the limit is fine.
        let mut src = BytesMut::new();
        src.put_u32(1 << 20);
        assert!(codec.decode(&mut src).unwrap().is_none());
    }

    #[test]
    fn limit_is_adjustable() {
        let mut codec = FrameCodec::default();
        codec.set_max_frame_len(8);
        assert_eq!(codec.max_frame_len(), 8);
        let mut src = BytesMut::new();
        src.put_u32(9);
        assert!(matches!(
            codec.decode(&mut src),
            Err(WireError::FrameTooLarge { len: 9, max: 8 })
        ));
        let err = codec
            .encode(Bytes::from_static(&[0; 9]), &mut BytesMut::new())
            .unwrap_err();
        assert!(matches!(err, WireError::FrameTooLarge { len: 9, max: 8 }));
    }

    #[test]
    fn eof_between_frames_is_clean_and_inside_one_is_truncated() {
        let stream = stream_of(&[frame(&Body::Ping)]);
        let frames = decode_stream(&mut FrameCodec::default(), &stream, |_| 5).unwrap();
        assert_eq!(frames.len(), 1);
        assert!(decode_stream(&mut FrameCodec::default(), &[], |_| 1)
            .unwrap()
            .is_empty());

        // Inside the prefix, right after it, and inside the payload.
        let payload_len = stream.len() - LEN_PREFIX;
        for (cut, buffered) in [(2, 2), (LEN_PREFIX, 0), (stream.len() - 1, payload_len - 1)] {
            let err =
                decode_stream(&mut FrameCodec::default(), &stream[..cut], |_| 1000).unwrap_err();
            assert!(
                matches!(err, WireError::Truncated { buffered: b } if b == buffered),
                "cut {cut}: {err}"
            );
        }
    }

    /// The only test that spends the process-wide budget (others would see
    /// its charges).
    #[test]
    fn unauthenticated_frames_draw_on_a_shared_budget() {
        assert_eq!(preauth_budget().0, 0);
        let mut a = FrameCodec::default();
        a.set_unauthenticated();
        assert!(!a.is_authenticated());
        // An ordinary frame is free.
        let mut src = stream_of(&[frame(&Body::Ping)]);
        assert!(a.decode(&mut src).unwrap().is_some());
        assert_eq!(preauth_budget().0, 0);

        // A large one takes its length from the budget as its prefix is
        // read, and gives it back when it is complete.
        let len = PREAUTH_FREE + (1 << 20);
        let mut src = BytesMut::new();
        src.put_u32(len as u32);
        src.put_slice(&vec![7; 1000]);
        assert!(a.decode(&mut src).unwrap().is_none());
        assert_eq!(preauth_budget().0, len);
        src.put_slice(&vec![7; len - 1000]);
        assert_eq!(a.decode(&mut src).unwrap().unwrap().len(), len);
        assert_eq!(preauth_budget().0, 0);

        // Announcing more than the budget holds is refused at the prefix,
        // with nothing reserved.
        let mut b = FrameCodec::default();
        b.set_unauthenticated();
        let mut src_b = BytesMut::with_capacity(16);
        src_b.put_u32((60 << 20) as u32);
        let refused_before = preauth_budget().1;
        let err = b.decode(&mut src_b).unwrap_err();
        assert!(matches!(err, WireError::PreAuthBudget { .. }), "{err}");
        assert!(err.ends_connection());
        assert!(src_b.capacity() < 1 << 10, "{}", src_b.capacity());
        assert_eq!(preauth_budget().1, refused_before + 1);

        // Two peers together cannot hold more than the budget.
        let mut c = FrameCodec::default();
        c.set_unauthenticated();
        let mut src_c = BytesMut::new();
        src_c.put_u32((PREAUTH_BUDGET - 10) as u32);
        assert!(c.decode(&mut src_c).unwrap().is_none());
        let mut d = FrameCodec::default();
        d.set_unauthenticated();
        let mut src_d = BytesMut::new();
        src_d.put_u32((PREAUTH_FREE + 1) as u32);
        assert!(matches!(
            d.decode(&mut src_d),
            Err(WireError::PreAuthBudget { .. })
        ));
        // Small frames still pass meanwhile.
        let mut src = stream_of(&[frame(&Body::Ping)]);
        assert!(d.decode(&mut src).unwrap().is_some());
        // A peer that goes away mid-frame gives its charge back.
        drop(c);
        assert_eq!(preauth_budget().0, 0);

        // Once authenticated, only the frame limit holds.
        let mut e = FrameCodec::default();
        e.set_unauthenticated();
        e.set_authenticated();
        let mut src_e = BytesMut::new();
        let big = PREAUTH_BUDGET + 1;
        src_e.put_u32(big as u32);
        src_e.put_slice(&vec![0; big]);
        assert_eq!(e.decode(&mut src_e).unwrap().unwrap().len(), big);
        assert_eq!(preauth_budget().0, 0);
    }
}
