//! A real controller fed raw bytes: garbage, oversized and truncated frames,
//! forged and replayed credentials. Each is refused with a clear error and
//! the controller keeps serving honest clients.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use canopy::wire::auth::{Authenticator, Key};
use canopy::wire::frame::{decode, encode};
use canopy::wire::messages::{Body, Header, PROTOCOL_VERSION};
use common::Cluster;

fn ctld_addr(c: &Cluster) -> String {
    let conf = canopy::config::Config::load(&c.conf).unwrap();
    format!("{}:{}", conf.control_addr, conf.slurmctld_port)
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Read one length-prefixed frame (or None if the peer closed).
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).ok()?;
    Some(buf)
}

fn ping(auth: &Authenticator) -> Vec<u8> {
    let h = Header {
        version: PROTOCOL_VERSION,
        kind: Body::Ping.kind().into(),
        corr: 7,
        boot_id: 1,
    };
    encode(auth, &h, &Body::Ping).unwrap().to_vec()
}

fn error_text(auth: &Authenticator, payload: &[u8]) -> String {
    match decode(auth, payload, std::time::SystemTime::now())
        .unwrap()
        .body
    {
        Body::Error(e) => e.message,
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[test]
fn bad_frames_are_refused_and_the_controller_keeps_serving() {
    let c = Cluster::start(1, 2, 30);
    let addr = ctld_addr(&c);
    let key = canopy::wire::auth::load_key(&c.dir.path().join("slurm.key")).unwrap();
    let me = nix::unistd::getuid().as_raw();
    let good = Authenticator::new(key, me, me);
    let timeout = Some(Duration::from_secs(5));

    // Garbage payload: an error naming the malformed part.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(&frame(b"\xc1\xc1 definitely not msgpack"))
        .unwrap();
    let reply = read_frame(&mut s).expect("error reply");
    assert!(error_text(&good, &reply).contains("rejected"));

    // Forged: signed with another key (whose id the controller does not know).
    let forger = Authenticator::new(Key::from_bytes(&[7u8; 32]).unwrap(), 0, 0);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(&frame(&ping(&forger))).unwrap();
    let msg = error_text(&good, &read_frame(&mut s).unwrap());
    assert!(msg.contains("does not hold"), "{msg}");

    // Replayed: the same honest frame twice; the first is answered, the second refused.
    let honest = frame(&ping(&good));
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(&honest).unwrap();
    let first = decode(
        &good,
        &read_frame(&mut s).unwrap(),
        std::time::SystemTime::now(),
    )
    .unwrap();
    assert!(matches!(first.body, Body::Pong(_)));
    assert_eq!(first.header.corr, 7);
    s.write_all(&honest).unwrap();
    let msg = error_text(&good, &read_frame(&mut s).unwrap());
    assert!(msg.to_lowercase().contains("replay"), "{msg}");

    // Oversized length prefix: the connection is dropped before any allocation.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);

    // Truncated frame, then hang up.
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut partial = frame(&ping(&good));
    partial.truncate(partial.len() / 2);
    s.write_all(&partial).unwrap();
    drop(s);

    // The controller is still healthy for honest clients.
    assert!(matches!(c.call(Body::Ping), Body::Pong(_)));
}
