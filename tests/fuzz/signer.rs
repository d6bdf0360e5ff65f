//! The local signer's request parser (`wire::signer::answer`, what
//! canopy-authd runs on every message a local user sends): arbitrary bytes,
//! and mutations of valid requests, never panic; garbage is answered with
//! an error, never a credential; a credential is only ever for the caller
//! the kernel named, over the digest asked.

use canopy::wire::auth::{Authenticator, Key};
use canopy::wire::signer::{answer, SignerReply, SignerRequest};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::frame::KEY;
use crate::support::{self, edit, mutate};

fn signer() -> Authenticator {
    Authenticator::new(Key::from_bytes(&KEY).expect("fixed key"), 0, 0)
}

#[test]
fn fuzz_signer_requests() {
    let valid = prop_oneof![
        any::<[u8; 32]>().prop_map(|digest| SignerRequest::Sign { digest }),
        any::<[u8; 32]>().prop_map(|digest| {
            let credential = signer().sign_digest(&digest, 1000, 100, std::time::SystemTime::now());
            SignerRequest::Verify { credential, digest }
        }),
    ]
    .prop_map(|r| rmp_serde::to_vec_named(&r).expect("requests encode"));
    let bytes = prop_oneof![
        vec(any::<u8>(), 0..600),
        (valid.clone(), vec(edit(), 0..4)).prop_map(|(mut b, edits)| {
            mutate(&mut b, &edits);
            b
        }),
    ];
    let input = (bytes, any::<u32>(), any::<u32>());
    support::run("signer_requests", 1000, input, |(bytes, uid, gid)| {
        let s = signer();
        let reply = answer(&s, uid, gid, &bytes);
        match (rmp_serde::from_slice::<SignerRequest>(&bytes), &reply) {
            // A credential only for a request that parses as Sign, for the
            // kernel-named caller and the digest asked.
            (Ok(SignerRequest::Sign { digest }), SignerReply::Signed(c)) => {
                prop_assert_eq!((c.uid, c.gid), (uid, gid));
                prop_assert_eq!(c.digest, digest);
            }
            (_, SignerReply::Signed(_)) => prop_assert!(false, "signed garbage: {:?}", bytes),
            (Err(_), r) => prop_assert!(matches!(r, SignerReply::Error(_)), "{:?}", r),
            _ => {}
        }
        Ok(())
    });
}
