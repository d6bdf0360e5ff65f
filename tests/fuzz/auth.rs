//! The credential verifier (`Authenticator::verify`) on its own: forged credentials,
//! and genuine ones with any field or signed byte changed.

use std::time::Duration;

use canopy::wire::auth::{AuthError, Authenticator, Credential, Key};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::frame::{now, receiver, KEY};
use crate::support::{self, edit, mutate, Edit};

fn unix_ms_now() -> u64 {
    now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[test]
fn fuzz_auth_random_credentials_are_forgeries() {
    // Without the key, no credential verifies: fields random, or fresh and plausible
    // (the receiver's key id, the message's own digest: so that only the signature can
    // refuse them).
    let key_id = Key::from_bytes(&KEY).expect("fixed key").id();
    let credential = (
        prop_oneof![any::<u32>(), Just(key_id)],
        (any::<u32>(), any::<u32>()),
        prop_oneof![".{0,300}", Just(String::new())],
        prop_oneof![any::<u64>(), Just(unix_ms_now())],
        (any::<u32>(), any::<u64>()),
        any::<[u8; 32]>(),
        any::<[u8; 32]>(),
    )
        .prop_map(
            |(key_id, (uid, gid), host, issued_at_ms, (ttl_s, nonce), digest, sig)| Credential {
                key_id,
                uid,
                gid,
                host,
                issued_at_ms,
                ttl_s,
                nonce,
                digest,
                sig,
            },
        );
    let input = (
        credential,
        vec(any::<u8>(), 0..200),
        vec(any::<u8>(), 0..200),
    );
    support::run(
        "auth_random_credentials_are_forgeries",
        1000,
        input,
        |(mut credential, header, body)| {
            // Half the time name this very message, so the digest check passes.
            if credential.nonce % 2 == 0 {
                credential.digest = canopy::wire::auth::content_digest(&header, &body);
            }
            let result = receiver().verify(&credential, &header, &body, now());
            prop_assert!(
                matches!(
                    result,
                    Err(AuthError::BadSignature
                        | AuthError::UnknownKey { .. }
                        | AuthError::HostTooLong { .. })
                ),
                "{:?}",
                result
            );
            Ok(())
        },
    );
}

/// What to change in a genuine credential or the bytes it signs.
#[derive(Debug, Clone)]
enum Change {
    Uid(u32),
    Gid(u32),
    IssuedAt(u64),
    Ttl(u32),
    Nonce(u64),
    KeyId(u32),
    Host(String),
    DigestBit(usize),
    SigBit(usize),
    Header(Vec<Edit>),
    Body(Vec<Edit>),
    /// Moves the header/body boundary by `n` bytes (the concatenation is unchanged).
    Boundary(usize, bool),
    OtherKey([u8; 32]),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        any::<u32>().prop_map(Change::Uid),
        any::<u32>().prop_map(Change::Gid),
        any::<u64>().prop_map(Change::IssuedAt),
        any::<u32>().prop_map(Change::Ttl),
        any::<u64>().prop_map(Change::Nonce),
        any::<u32>().prop_map(Change::KeyId),
        ".{0,40}".prop_map(Change::Host),
        (0usize..256).prop_map(Change::DigestBit),
        (0usize..256).prop_map(Change::SigBit),
        vec(edit(), 1..4).prop_map(Change::Header),
        vec(edit(), 1..4).prop_map(Change::Body),
        (1usize..8, any::<bool>()).prop_map(|(n, left)| Change::Boundary(n, left)),
        any::<[u8; 32]>().prop_map(Change::OtherKey),
    ]
}

#[test]
fn fuzz_auth_any_change_is_rejected() {
    let input = (
        any::<u32>(),
        any::<u32>(),
        vec(any::<u8>(), 0..120),
        vec(any::<u8>(), 0..120),
        change(),
    );
    support::run(
        "auth_any_change_is_rejected",
        1000,
        input,
        |(uid, gid, mut header, mut body, change)| {
            let sender = Authenticator::new(Key::from_bytes(&KEY).expect("fixed key"), uid, gid)
                .with_ttl(Duration::from_secs(60));
            let mut credential = sender.sign(&header, &body, now());
            prop_assert_eq!(
                receiver()
                    .verify(&credential, &header, &body, now())
                    .map_err(|e| e.to_string()),
                Ok((uid, gid))
            );
            let before = (credential.clone(), header.clone(), body.clone());
            // The refusal each change must get.
            let want = match &change {
                Change::KeyId(_) | Change::OtherKey(_) => "unknown key",
                Change::Header(_) | Change::Body(_) | Change::Boundary(..) => "another message",
                _ => "bad signature",
            };
            match change {
                Change::Uid(v) => credential.uid = v,
                Change::Gid(v) => credential.gid = v,
                Change::IssuedAt(v) => credential.issued_at_ms = v,
                Change::Ttl(v) => credential.ttl_s = v,
                Change::Nonce(v) => credential.nonce = v,
                Change::KeyId(v) => credential.key_id = v,
                Change::Host(v) => credential.host = v,
                Change::DigestBit(bit) => credential.digest[bit / 8] ^= 1 << (bit % 8),
                Change::SigBit(bit) => credential.sig[bit / 8] ^= 1 << (bit % 8),
                Change::Header(edits) => mutate(&mut header, &edits),
                Change::Body(edits) => mutate(&mut body, &edits),
                Change::Boundary(n, true) => {
                    let n = n.min(header.len());
                    let moved = header.split_off(header.len() - n);
                    body.splice(0..0, moved);
                }
                Change::Boundary(n, false) => {
                    let n = n.min(body.len());
                    header.extend(body.drain(..n));
                }
                Change::OtherKey(key) => {
                    if key == KEY {
                        return Ok(());
                    }
                    let forger = Authenticator::new(
                        Key::from_bytes(&key).expect("32 bytes is a valid key"),
                        uid,
                        gid,
                    );
                    credential = forger.sign(&header, &body, now());
                }
            }
            if (credential.clone(), header.clone(), body.clone()) == before {
                return Ok(());
            }
            // Each change has its own refusal: the credential's fields fail the
            // signature (a changed key id names a key not held), the signed bytes
            // moved under an intact credential are another message.
            let result = receiver().verify(&credential, &header, &body, now());
            let got = match &result {
                Err(AuthError::BadSignature) => "bad signature",
                Err(AuthError::UnknownKey { .. }) => "unknown key",
                Err(AuthError::WrongMessage) => "another message",
                _ => "something else",
            };
            // A changed key id that happens to equal the key's own is a signature
            // failure: the key is held, the values differ.
            let key_id_kept = credential.key_id == before.0.key_id;
            prop_assert!(
                got == want || (want == "unknown key" && key_id_kept && got == "bad signature"),
                "{} wanted, got {:?}",
                want,
                result
            );
            Ok(())
        },
    );
}
