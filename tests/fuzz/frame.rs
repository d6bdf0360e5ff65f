//! The frame decoder (`frame::decode`) and the stream codec (`FrameCodec`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use canopy::tree::rankset::RankSet;
use canopy::wire::auth::{Authenticator, Credential, Key};
use canopy::wire::error::WireError;
use canopy::wire::frame::{decode, encode_at, FrameCodec};
use canopy::wire::joblist::JobList;
use canopy::wire::messages::{
    Body, CancelRequest, Forward, Header, HealthDelta, NodeCommand, PongReply, PROTOCOL_VERSION,
};
use canopy::wire::types::{JobInfo, JobSubmit};
use proptest::collection::vec;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

use crate::support::{self, edit, mutate};

pub const KEY: [u8; 32] = [0x5a; 32];

pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

/// A fresh receiver per case: a rejection must never depend on the replay cache.
pub fn receiver() -> Authenticator {
    Authenticator::new(Key::from_bytes(&KEY).expect("fixed 32-byte key"), 0, 0)
}

/// Bodies of several shapes: empty, flat, nested, with a rank set and a job list.
pub fn sample_bodies() -> Vec<Body> {
    let mut ranks = RankSet::new();
    ranks.insert_range(3..40);
    ranks.insert(100);
    vec![
        Body::Ping,
        Body::Pong(PongReply {
            host: "ctl".into(),
            boot_id: 77,
            started: 1_700_000_000,
            version: "0.1.0".into(),
        }),
        Body::SubmitJob(Box::new(JobSubmit {
            name: "fuzz".into(),
            ntasks: Some(4),
            ..JobSubmit::default()
        })),
        Body::CancelJobs(CancelRequest {
            job_ids: vec![1, 200, 70_000],
            signal: Some(9),
            batch_only: false,
            exact: true,
        }),
        Body::Forward(Box::new(Forward {
            id: 3,
            targets: ranks.clone(),
            budget_ms: 5_000,
            cmd: NodeCommand::Noop,
            origin: 0,
        })),
        Body::Health(HealthDelta {
            added: ranks,
            removed: RankSet::default(),
        }),
        Body::Jobs(JobList(vec![
            JobInfo {
                job_id: 12,
                name: "a".into(),
                ..JobInfo::default()
            },
            JobInfo::default(),
        ])),
    ]
}

fn header_for(body: &Body, corr: u64) -> Header {
    Header {
        version: PROTOCOL_VERSION,
        kind: body.kind().to_owned(),
        corr,
        boot_id: 0xb007,
    }
}

/// A valid frame of sample body `which`, signed by `uid`/`gid` at `now() + offset_ms`.
/// Ids and times vary so that every MessagePack integer width appears in credentials.
pub fn valid_frame(which: usize, uid: u32, gid: u32, corr: u64, offset_ms: u64) -> Bytes {
    let bodies = sample_bodies();
    let body = &bodies[which % bodies.len()];
    let sender = Authenticator::new(Key::from_bytes(&KEY).expect("fixed key"), uid, gid);
    // Within the receiver's skew, so the unmutated frame is accepted.
    let at = now() - Duration::from_millis(offset_ms % 4_000);
    encode_at(&sender, &header_for(body, corr), body, at).expect("sample bodies encode")
}

fn put_bin(out: &mut Vec<u8>, marker: u8, bytes: &[u8]) {
    match marker % 3 {
        0 if bytes.len() <= 0xff => {
            out.push(0xc4);
            out.push(bytes.len() as u8);
        }
        1 if bytes.len() <= 0xffff => {
            out.push(0xc5);
            out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        }
        _ => {
            out.push(0xc6);
            out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(bytes);
}

/// `[header, credential, body]` with a real signature over arbitrary header and body
/// bytes: gets past the envelope and the verifier into the header and body decoders.
fn signed_payload(header: &[u8], body: &[u8], markers: (u8, u8)) -> Vec<u8> {
    let sender = Authenticator::new(Key::from_bytes(&KEY).expect("fixed key"), 1000, 1000);
    let credential = sender.sign(header, body, now());
    let mut out = vec![0x93];
    put_bin(&mut out, markers.0, header);
    rmp_serde::encode::write_named(&mut out, &credential).expect("credential encodes");
    put_bin(&mut out, markers.1, body);
    out
}

#[test]
fn fuzz_frame_decode_arbitrary_bytes() {
    // Raw bytes, and bytes behind a plausible start (the outer array, a bin marker).
    let payload = prop_oneof![
        vec(any::<u8>(), 0..600),
        (vec(any::<u8>(), 0..600), 0u8..3).prop_map(|(mut rest, lead)| {
            let mut out = vec![0x93, [0xc4, 0xc5, 0xc6][lead as usize]];
            out.append(&mut rest);
            out
        }),
    ];
    support::run("frame_decode_arbitrary_bytes", 600, payload, |payload| {
        prop_assert!(decode(&receiver(), &payload, now()).is_err());
        Ok(())
    });
}

#[test]
fn fuzz_frame_decode_signed_garbage() {
    // Correctly signed frames whose header or body bytes are mutated encodings: an
    // authenticated peer's bad bytes must still only ever produce an error.
    let input = (
        any::<usize>(),
        vec(edit(), 0..8),
        vec(edit(), 0..8),
        any::<(u8, u8)>(),
    );
    support::run(
        "frame_decode_signed_garbage",
        600,
        input,
        |(which, header_edits, body_edits, markers)| {
            let bodies = sample_bodies();
            let body = &bodies[which % bodies.len()];
            let mut header = rmp_serde::to_vec_named(&header_for(body, 5)).expect("header encodes");
            let mut body_bytes = rmp_serde::to_vec_named(body).expect("body encodes");
            mutate(&mut header, &header_edits);
            mutate(&mut body_bytes, &body_edits);
            let payload = signed_payload(&header, &body_bytes, markers);
            if let Ok(envelope) = decode(&receiver(), &payload, now()) {
                // Accepted: then it is self-consistent and was signed by our sender.
                prop_assert_eq!(envelope.body.kind(), envelope.header.kind.as_str());
                prop_assert_eq!((envelope.uid, envelope.gid), (1000, 1000));
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_frame_mutations_are_rejected() {
    // Every change to a valid frame (bit flips, overwrites, insertions, deletions,
    // truncations, anywhere: envelope, header, credential, body) must be refused.
    let input = (
        any::<usize>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        vec(edit(), 1..5),
        any::<bool>(),
    );
    support::run(
        "frame_mutations_are_rejected",
        600,
        input,
        |(which, uid, gid, corr, offset, edits, focus)| {
            let original = valid_frame(which, uid, gid, corr, offset);
            prop_assert!(decode(&receiver(), &original, now()).is_ok());
            let mut changed = original.to_vec();
            if focus {
                // Half the cases edit only the envelope, header and credential, which are
                // a small part of a frame with a large body.
                let header_len =
                    u32::from_be_bytes([original[2], original[3], original[4], original[5]])
                        as usize;
                let mut front = changed.split_off(0);
                let keep = front.split_off((6 + header_len + 120).min(front.len()));
                mutate(&mut front, &edits);
                front.extend_from_slice(&keep);
                changed = front;
            } else {
                mutate(&mut changed, &edits);
            }
            if changed[..] != original[..] {
                let result = decode(&receiver(), &changed, now());
                // The one change allowed through: header and body re-wrapped in another
                // bin length form (bin8/16/32, which other encoders choose), every signed
                // byte and the credential's bytes the same.
                prop_assert!(
                    result.is_err() || same_parts(&original, &changed),
                    "accepted a changed frame: {:?}",
                    result
                );
            }
            Ok(())
        },
    );
}

/// Reads a bin item of any width from the front of `rest`.
fn take_bin<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (&marker, tail) = rest.split_first()?;
    let width = match marker {
        0xc4 => 1,
        0xc5 => 2,
        0xc6 => 4,
        _ => return None,
    };
    let len = tail
        .get(..width)?
        .iter()
        .fold(0usize, |n, &b| (n << 8) | usize::from(b));
    let bytes = tail.get(width..width + len)?;
    *rest = &tail[width + len..];
    Some(bytes)
}

/// A frame's header, credential bytes and body; the credential is `credential_len`
/// bytes, or as long as the credential it decodes to.
type Parts<'a> = (&'a [u8], &'a [u8], &'a [u8]);

fn parts(frame: &[u8], credential_len: Option<usize>) -> Option<Parts<'_>> {
    let mut rest = frame.strip_prefix(&[0x93])?;
    let header = take_bin(&mut rest)?;
    let credential_len = match credential_len {
        Some(len) => len,
        None => {
            let mut after = rest;
            rmp_serde::from_read::<_, Credential>(&mut after).ok()?;
            rest.len() - after.len()
        }
    };
    let credential = rest.get(..credential_len)?;
    let mut tail = &rest[credential_len..];
    let body = take_bin(&mut tail)?;
    tail.is_empty().then_some((header, credential, body))
}

/// True when `changed` holds the same header, credential bytes and body as `original`,
/// whatever bin length forms wrap them.
fn same_parts(original: &[u8], changed: &[u8]) -> bool {
    match parts(original, None) {
        Some(want) => parts(changed, Some(want.1.len())) == Some(want),
        None => false,
    }
}

/// Feeds `stream` to `codec` in chunks of the given sizes (cycled), then signals EOF.
fn feed(
    codec: &mut FrameCodec,
    stream: &[u8],
    chunks: &[usize],
) -> (Vec<BytesMut>, Result<(), WireError>) {
    let mut src = BytesMut::new();
    let mut frames = Vec::new();
    let mut fed = 0;
    // Empty chunks are kept (a read that returns nothing new), but something must arrive.
    let stuck = chunks.iter().all(|&c| c == 0);
    let mut sizes = chunks.iter().cycle();
    while fed < stream.len() {
        let size = match sizes.next() {
            Some(&size) if !stuck => size,
            _ => 1,
        };
        let end = (fed + size).min(stream.len());
        src.extend_from_slice(&stream[fed..end]);
        fed = end;
        loop {
            match codec.decode(&mut src) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(err) => return (frames, Err(err)),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut src) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, Ok(())),
            Err(err) => return (frames, Err(err)),
        }
    }
}

#[test]
fn fuzz_codec_arbitrary_streams() {
    // Arbitrary bytes in arbitrary chunkings, with small limits so that lengths are
    // often over them. Nothing may panic, no frame may exceed the limit, and frames
    // cannot hold more bytes than arrived.
    let input = (
        vec(any::<u8>(), 0..2048),
        vec(0usize..97, 1..16),
        0usize..4096,
    );
    support::run(
        "codec_arbitrary_streams",
        600,
        input,
        |(stream, chunks, max)| {
            let mut codec = FrameCodec::new(max);
            let (frames, _) = feed(&mut codec, &stream, &chunks);
            let mut used = 0;
            for frame in &frames {
                prop_assert!(frame.len() <= max);
                used += 4 + frame.len();
            }
            prop_assert!(used <= stream.len());
            Ok(())
        },
    );
}

#[test]
fn fuzz_codec_reassembles_any_chunking() {
    // Valid streams come back frame for frame however they are cut; cut short, they
    // end in `Truncated` unless the cut falls between frames.
    let input = (
        vec(vec(any::<u8>(), 0..300), 0..8),
        vec(0usize..64, 1..16),
        any::<usize>(),
    );
    support::run(
        "codec_reassembles_any_chunking",
        600,
        input,
        |(payloads, chunks, cut)| {
            let mut stream = BytesMut::new();
            let mut boundaries = vec![0];
            let mut encoder = FrameCodec::new(4096);
            for p in &payloads {
                encoder
                    .encode(Bytes::from(p.clone()), &mut stream)
                    .expect("payload under the limit");
                boundaries.push(stream.len());
            }
            let (frames, end) = feed(&mut FrameCodec::new(4096), &stream, &chunks);
            prop_assert!(end.is_ok(), "{:?}", end);
            prop_assert_eq!(frames.len(), payloads.len());
            for (got, want) in frames.iter().zip(&payloads) {
                prop_assert_eq!(&got[..], &want[..]);
            }

            let cut = cut % (stream.len() + 1);
            let (frames, end) = feed(&mut FrameCodec::new(4096), &stream[..cut], &chunks);
            let whole = boundaries.iter().filter(|&&b| b <= cut).count() - 1;
            prop_assert_eq!(frames.len(), whole);
            if boundaries.contains(&cut) {
                prop_assert!(end.is_ok(), "{:?}", end);
            } else {
                prop_assert!(matches!(end, Err(WireError::Truncated { .. })), "{:?}", end);
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_codec_length_prefix_reserves_at_most_the_limit() {
    // Any length prefix, followed by a few bytes. tokio-util reserves room for an
    // announced frame once its prefix is read (the N.B. on `MAX_FRAME_LEN`), so the
    // bound is the configured limit: a prefix over it must fail before reserving.
    const LIMIT: usize = 1 << 20;
    let input = (any::<u32>(), vec(any::<u8>(), 0..64));
    support::run(
        "codec_length_prefix_reserves_at_most_the_limit",
        600,
        input,
        |(len, tail)| {
            let mut codec = FrameCodec::new(LIMIT);
            let mut src = BytesMut::with_capacity(128);
            src.put_u32(len);
            src.extend_from_slice(&tail);
            let result = codec.decode(&mut src);
            prop_assert!(src.capacity() <= LIMIT + 128, "capacity {}", src.capacity());
            if len as usize > LIMIT {
                prop_assert!(
                    matches!(result, Err(WireError::FrameTooLarge { .. })),
                    "{:?}",
                    result
                );
                prop_assert!(src.capacity() <= 128, "capacity {}", src.capacity());
            }
            Ok(())
        },
    );
}
