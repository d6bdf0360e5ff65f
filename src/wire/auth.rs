//! MUNGE-style credentials: every frame carries who sent it (uid, gid), when,
//! for how long it is valid and a nonce, signed with HMAC-SHA256 over a
//! cluster-wide shared key together with the frame's header and body bytes.
//!
//! This module owns the key file (loading, generating, permission checks),
//! signing, constant-time verification, freshness checks and the replay cache.
//! It does not know the frame layout (`frame.rs` decides which bytes are the
//! header and body) nor any policy about which uid may send what.

use std::collections::HashSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::OsRng;
use rand::RngCore;
use ring::{digest, hmac};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Shortest key accepted: 256 bits, the HMAC-SHA256 output size.
pub const MIN_KEY_LEN: usize = 32;
/// Credential lifetime used when signing, unless changed with `with_ttl`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Clock difference tolerated between sender and receiver.
pub const DEFAULT_SKEW: Duration = Duration::from_secs(5);
/// Most credentials the replay cache remembers at once (about 100 MiB at
/// worst). Enough for ~15,000 frames/s per daemon at the default TTL.
pub const DEFAULT_REPLAY_CAPACITY: usize = 1 << 22;

/// Bytes of random key material `generate_key_file` writes (hex-encoded).
const GENERATED_KEY_BYTES: usize = 64;
/// Separates canopy credentials from any other use of the same key.
const DOMAIN: &[u8] = b"canopy-credential-v1";
/// DOMAIN, uid, gid, issued_at_ms, ttl_s, nonce, SHA-256(header, body).
const SIGNED_LEN: usize = DOMAIN.len() + 4 + 4 + 8 + 4 + 8 + 32;

#[derive(Debug, Error)]
pub enum AuthError {
    #[error(
        "credential signature does not verify: the frame was forged or altered, \
         or the peer uses a different cluster key"
    )]
    BadSignature,

    #[error(
        "credential expired: issued at {issued_at_ms} ms with a {ttl_s} s lifetime, \
         now is {now_ms} ms (clock skew allowed: {skew_ms} ms)"
    )]
    Expired {
        issued_at_ms: u64,
        ttl_s: u32,
        now_ms: u64,
        skew_ms: u64,
    },

    #[error(
        "credential issued in the future: issued at {issued_at_ms} ms, now is {now_ms} ms \
         (clock skew allowed: {skew_ms} ms); check that the clocks are synchronised"
    )]
    FutureDated {
        issued_at_ms: u64,
        now_ms: u64,
        skew_ms: u64,
    },

    #[error("credential replayed: nonce {nonce:#018x} from uid {uid} was already accepted")]
    Replayed { nonce: u64, uid: u32 },

    #[error(
        "replay cache is full ({capacity} credentials still valid); refusing a credential \
         that could not be remembered"
    )]
    ReplayCacheFull { capacity: usize },

    #[error("shared key is {len} bytes; at least {min} are required")]
    KeyTooShort { len: usize, min: usize },

    #[error(
        "key file {} holds {len} bytes (after trimming a trailing newline); \
         at least {min} are required",
        .path.display()
    )]
    KeyFileTooShort {
        path: PathBuf,
        len: usize,
        min: usize,
    },

    #[error(
        "key file {} has mode {mode:04o}, so group or others may read or change it; \
         fix it with `chmod 600 {}`",
        .path.display(),
        .path.display()
    )]
    KeyFileMode { path: PathBuf, mode: u32 },

    #[error("cannot {action} key file {}: {source}", .path.display())]
    KeyFileIo {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// The shared cluster key.
#[derive(Clone)]
pub struct Key(hmac::Key);

impl Key {
    /// Uses `material` as the key; it must be at least [`MIN_KEY_LEN`] bytes.
    pub fn from_bytes(material: &[u8]) -> Result<Key, AuthError> {
        if material.len() < MIN_KEY_LEN {
            return Err(AuthError::KeyTooShort {
                len: material.len(),
                min: MIN_KEY_LEN,
            });
        }
        Ok(Key(hmac::Key::new(hmac::HMAC_SHA256, material)))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

/// Reads the cluster key from `path`. The file's bytes are the key material
/// (a trailing newline is ignored, so a hex key written by an editor works);
/// the file must not be accessible to group or others.
pub fn load_key(path: &Path) -> Result<Key, AuthError> {
    let io_error = |source| AuthError::KeyFileIo {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io_error)?;
    // fstat the open file, not the path, so the checked file is the read one.
    let mode = file.metadata().map_err(io_error)?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(AuthError::KeyFileMode {
            path: path.to_path_buf(),
            mode: mode & 0o7777,
        });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_error)?;
    let material = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    if material.len() < MIN_KEY_LEN {
        return Err(AuthError::KeyFileTooShort {
            path: path.to_path_buf(),
            len: material.len(),
            min: MIN_KEY_LEN,
        });
    }
    Key::from_bytes(material)
}

/// Creates a new key file at `path` holding 64 random bytes as hex text plus
/// a newline (printable, so it can be copied between hosts safely). The file
/// is created with mode 0600 in the same call that creates it, and an existing
/// file is never overwritten.
pub fn generate_key_file(path: &Path) -> Result<(), AuthError> {
    let io_error = |action| {
        move |source| AuthError::KeyFileIo {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error("create"))?;
    file.write_all(random_hex_key().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_error("write"))
}

fn random_hex_key() -> String {
    let mut raw = [0u8; GENERATED_KEY_BYTES];
    OsRng.fill_bytes(&mut raw);
    let mut text: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    text.push('\n');
    text
}

/// Who sent a frame, when, and the proof of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub uid: u32,
    pub gid: u32,
    /// Sender's wall clock, milliseconds since the Unix epoch.
    pub issued_at_ms: u64,
    pub ttl_s: u32,
    pub nonce: u64,
    #[serde(with = "serde_bytes")]
    pub sig: [u8; 32],
}

/// Signs outgoing frames and verifies incoming ones for one process. Share it
/// (in an `Arc`) between all connections of a daemon so that the replay cache
/// sees every frame the daemon receives.
pub struct Authenticator {
    key: Key,
    uid: u32,
    gid: u32,
    ttl_s: u32,
    skew_ms: u64,
    /// Nonces are a counter from a random start rather than an RNG draw:
    /// signing is lock-free, nonces never repeat within a process (2^64
    /// period), and two processes collide only if their random starts land
    /// within the frames they send of each other. Nonces need not be
    /// unpredictable: they are signed, and only uniqueness matters.
    next_nonce: AtomicU64,
    replay: Mutex<ReplayCache>,
}

impl Authenticator {
    /// Signs as `uid`/`gid`, with the default TTL, skew and replay capacity.
    pub fn new(key: Key, uid: u32, gid: u32) -> Self {
        Authenticator {
            key,
            uid,
            gid,
            ttl_s: duration_to_secs(DEFAULT_TTL),
            skew_ms: duration_to_ms(DEFAULT_SKEW),
            next_nonce: AtomicU64::new(OsRng.next_u64()),
            replay: Mutex::new(ReplayCache::new(DEFAULT_REPLAY_CAPACITY)),
        }
    }

    /// Signs as this process's real uid and gid.
    pub fn for_current_process(key: Key) -> Self {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        Authenticator::new(key, uid, gid)
    }

    /// Lifetime of credentials this side signs (whole seconds), and the most
    /// it honours on credentials it receives.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl_s = duration_to_secs(ttl);
        self
    }

    /// Clock difference tolerated in both directions when verifying.
    pub fn with_skew(mut self, skew: Duration) -> Self {
        self.skew_ms = duration_to_ms(skew);
        self
    }

    /// Most credentials remembered at once; beyond it, frames are refused.
    pub fn with_replay_capacity(mut self, capacity: usize) -> Self {
        self.replay = Mutex::new(ReplayCache::new(capacity));
        self
    }

    /// Signs a frame's header and body bytes as of `now`.
    pub fn sign(&self, header_bytes: &[u8], body_bytes: &[u8], now: SystemTime) -> Credential {
        let mut credential = Credential {
            uid: self.uid,
            gid: self.gid,
            issued_at_ms: unix_ms(now),
            ttl_s: self.ttl_s,
            nonce: self.next_nonce.fetch_add(1, Ordering::Relaxed),
            sig: [0; 32],
        };
        let message = signed_message(&credential, header_bytes, body_bytes);
        let tag = hmac::sign(&self.key.0, &message);
        credential.sig.copy_from_slice(tag.as_ref());
        credential
    }

    /// Checks signature, freshness and uniqueness (in that order, so that
    /// nothing unauthenticated reaches the replay cache) and returns the
    /// vouched-for `(uid, gid)`.
    pub fn verify(
        &self,
        credential: &Credential,
        header_bytes: &[u8],
        body_bytes: &[u8],
        now: SystemTime,
    ) -> Result<(u32, u32), AuthError> {
        let message = signed_message(credential, header_bytes, body_bytes);
        hmac::verify(&self.key.0, &message, &credential.sig)
            .map_err(|_| AuthError::BadSignature)?;
        let now_ms = unix_ms(now);
        self.check_fresh(credential, now_ms)?;
        self.replay
            .lock()
            // The cache holds plain data and every update is a single insert
            // or clear, so a panic elsewhere cannot leave it inconsistent.
            .unwrap_or_else(PoisonError::into_inner)
            .admit(credential.nonce, credential.uid, now_ms, self.window_ms())?;
        Ok((credential.uid, credential.gid))
    }

    fn check_fresh(&self, credential: &Credential, now_ms: u64) -> Result<(), AuthError> {
        let issued = credential.issued_at_ms;
        if issued > now_ms.saturating_add(self.skew_ms) {
            return Err(AuthError::FutureDated {
                issued_at_ms: issued,
                now_ms,
                skew_ms: self.skew_ms,
            });
        }
        // A sender cannot stretch its credentials past our own TTL: that keeps
        // the replay window, and so the cache, bounded by local configuration.
        let ttl_ms = u64::from(credential.ttl_s.min(self.ttl_s)) * 1000;
        if issued.saturating_add(ttl_ms) < now_ms.saturating_sub(self.skew_ms) {
            return Err(AuthError::Expired {
                issued_at_ms: issued,
                ttl_s: credential.ttl_s,
                now_ms,
                skew_ms: self.skew_ms,
            });
        }
        Ok(())
    }

    /// How long (receiver time) one credential can stay acceptable: from
    /// `issued - skew` to `issued + ttl + skew`, both ends inclusive.
    fn window_ms(&self) -> u64 {
        (u64::from(self.ttl_s) * 1000)
            .saturating_add(self.skew_ms.saturating_mul(2))
            .saturating_add(1)
    }
}

/// The fixed-size buffer the HMAC covers. Header and body enter through one
/// SHA-256 digest (their boundary fixed by the header length), so that
/// `hmac::verify` gets a contiguous message without copying the body.
fn signed_message(credential: &Credential, header: &[u8], body: &[u8]) -> [u8; SIGNED_LEN] {
    let mut content = digest::Context::new(&digest::SHA256);
    content.update(&(header.len() as u64).to_be_bytes());
    content.update(header);
    content.update(body);
    let content = content.finish();

    let mut message = [0u8; SIGNED_LEN];
    let fields: [&[u8]; 7] = [
        DOMAIN,
        &credential.uid.to_be_bytes(),
        &credential.gid.to_be_bytes(),
        &credential.issued_at_ms.to_be_bytes(),
        &credential.ttl_s.to_be_bytes(),
        &credential.nonce.to_be_bytes(),
        content.as_ref(),
    ];
    let mut at = 0;
    for field in fields {
        message[at..at + field.len()].copy_from_slice(field);
        at += field.len();
    }
    message
}

/// Recently accepted `(nonce, uid)` pairs, in two generations each spanning
/// one validity window. A pair stays at least one window after it was
/// admitted, which is as long as its credential can be accepted; pruning is a
/// swap and a `clear`, never a scan.
struct ReplayCache {
    current: HashSet<(u64, u32)>,
    previous: HashSet<(u64, u32)>,
    current_since_ms: u64,
    capacity: usize,
}

impl ReplayCache {
    fn new(capacity: usize) -> Self {
        ReplayCache {
            current: HashSet::new(),
            previous: HashSet::new(),
            current_since_ms: 0,
            capacity,
        }
    }

    fn admit(
        &mut self,
        nonce: u64,
        uid: u32,
        now_ms: u64,
        window_ms: u64,
    ) -> Result<(), AuthError> {
        self.rotate(now_ms, window_ms);
        let seen = (nonce, uid);
        if self.current.contains(&seen) || self.previous.contains(&seen) {
            return Err(AuthError::Replayed { nonce, uid });
        }
        if self.current.len() + self.previous.len() >= self.capacity {
            return Err(AuthError::ReplayCacheFull {
                capacity: self.capacity,
            });
        }
        self.current.insert(seen);
        Ok(())
    }

    /// Entries in `previous` were admitted before `current_since_ms`, entries
    /// in `current` before `current_since_ms + window` (or it would have
    /// rotated then); so after one window the old `previous` may go, and
    /// after two windows everything may.
    fn rotate(&mut self, now_ms: u64, window_ms: u64) {
        let age = now_ms.saturating_sub(self.current_since_ms);
        if age < window_ms {
            return;
        }
        if age >= window_ms.saturating_mul(2) {
            self.previous.clear();
        } else {
            std::mem::swap(&mut self.current, &mut self.previous);
        }
        // `clear` keeps the allocation, so a steady load does not re-grow it.
        self.current.clear();
        self.current_since_ms = now_ms;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

fn unix_ms(now: SystemTime) -> u64 {
    // A clock before 1970 reads as 0: such credentials simply look old.
    now.duration_since(UNIX_EPOCH).map_or(0, duration_to_ms)
}

fn duration_to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn duration_to_secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(1_700_000_000);

    fn at(offset_ms: i64) -> SystemTime {
        let base = UNIX_EPOCH + T0;
        if offset_ms >= 0 {
            base + Duration::from_millis(offset_ms as u64)
        } else {
            base - Duration::from_millis(offset_ms.unsigned_abs())
        }
    }

    fn key(byte: u8) -> Key {
        Key::from_bytes(&[byte; 32]).unwrap()
    }

    fn auth() -> Authenticator {
        Authenticator::new(key(7), 1000, 100)
    }

    #[test]
    fn signed_credential_verifies_and_vouches_for_uid_gid() {
        let sender = auth();
        let receiver = auth();
        let cred = sender.sign(b"head", b"body", at(0));
        assert_eq!(cred.uid, 1000);
        assert_eq!(cred.gid, 100);
        assert_eq!(cred.ttl_s, 60);
        assert_eq!(cred.issued_at_ms, T0.as_millis() as u64);
        assert_eq!(
            receiver.verify(&cred, b"head", b"body", at(10)).unwrap(),
            (1000, 100)
        );
    }

    #[test]
    fn any_altered_field_or_byte_breaks_the_signature() {
        let sender = auth();
        let cred = sender.sign(b"head", b"body", at(0));
        let mut variants = Vec::new();
        for change in 0..6 {
            let mut c = cred.clone();
            match change {
                0 => c.uid = 0,
                1 => c.gid = 0,
                2 => c.issued_at_ms += 1,
                3 => c.ttl_s += 1,
                4 => c.nonce ^= 1,
                _ => c.sig[31] ^= 1,
            }
            variants.push((c, &b"head"[..], &b"body"[..]));
        }
        variants.push((cred.clone(), b"heaD", b"body"));
        variants.push((cred.clone(), b"head", b"bodY"));
        // Moving a byte across the header/body boundary must not verify.
        variants.push((cred.clone(), b"hea", b"dbody"));
        for (c, head, body) in variants {
            let err = auth().verify(&c, head, body, at(0)).unwrap_err();
            assert!(matches!(err, AuthError::BadSignature), "{err}");
        }
    }

    #[test]
    fn a_different_key_is_a_bad_signature() {
        let cred = auth().sign(b"h", b"b", at(0));
        let other = Authenticator::new(key(8), 1000, 100);
        let err = other.verify(&cred, b"h", b"b", at(0)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature));
    }

    #[test]
    fn expiry_honours_ttl_plus_skew() {
        let sender = auth();
        // ttl 60 s + skew 5 s: the last accepted instant is 65 s after issue.
        let edge = sender.sign(b"h", b"b", at(0));
        assert!(auth().verify(&edge, b"h", b"b", at(65_000)).is_ok());
        let late = sender.sign(b"h", b"b", at(0));
        let err = auth().verify(&late, b"h", b"b", at(65_001)).unwrap_err();
        match err {
            AuthError::Expired {
                issued_at_ms,
                ttl_s,
                now_ms,
                skew_ms,
            } => {
                assert_eq!(issued_at_ms, T0.as_millis() as u64);
                assert_eq!(ttl_s, 60);
                assert_eq!(now_ms, issued_at_ms + 65_001);
                assert_eq!(skew_ms, 5_000);
            }
            other => panic!("expected Expired, got {other}"),
        }
    }

    #[test]
    fn future_dated_beyond_skew_is_rejected() {
        let sender = auth();
        let edge = sender.sign(b"h", b"b", at(5_000));
        assert!(auth().verify(&edge, b"h", b"b", at(0)).is_ok());
        let ahead = sender.sign(b"h", b"b", at(5_001));
        let err = auth().verify(&ahead, b"h", b"b", at(0)).unwrap_err();
        assert!(
            matches!(err, AuthError::FutureDated { skew_ms: 5_000, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("clocks"), "{err}");
    }

    #[test]
    fn skew_is_configurable() {
        let receiver = auth().with_skew(Duration::from_secs(30));
        let ahead = auth().sign(b"h", b"b", at(20_000));
        assert!(receiver.verify(&ahead, b"h", b"b", at(0)).is_ok());
    }

    #[test]
    fn receiver_caps_a_longer_sender_ttl_at_its_own() {
        let sender = auth().with_ttl(Duration::from_secs(3600));
        let cred = sender.sign(b"h", b"b", at(0));
        assert_eq!(cred.ttl_s, 3600);
        let lenient = auth().with_ttl(Duration::from_secs(3600));
        assert!(lenient.verify(&cred, b"h", b"b", at(600_000)).is_ok());
        let strict = auth();
        let err = strict.verify(&cred, b"h", b"b", at(600_000)).unwrap_err();
        assert!(matches!(err, AuthError::Expired { .. }), "{err}");
    }

    #[test]
    fn the_same_credential_twice_is_a_replay() {
        let receiver = auth();
        let cred = auth().sign(b"h", b"b", at(0));
        assert!(receiver.verify(&cred, b"h", b"b", at(0)).is_ok());
        let err = receiver.verify(&cred, b"h", b"b", at(64_000)).unwrap_err();
        match err {
            AuthError::Replayed { nonce, uid } => {
                assert_eq!((nonce, uid), (cred.nonce, 1000));
            }
            other => panic!("expected Replayed, got {other}"),
        }
    }

    #[test]
    fn forged_frames_do_not_poison_the_replay_cache() {
        let receiver = auth();
        let cred = auth().sign(b"h", b"b", at(0));
        let mut forged = cred.clone();
        forged.sig[0] ^= 1;
        assert!(receiver.verify(&forged, b"h", b"b", at(0)).is_err());
        assert!(receiver.verify(&cred, b"h", b"b", at(0)).is_ok());
    }

    #[test]
    fn nonces_are_distinct() {
        let sender = auth();
        let nonces: HashSet<u64> = (0..10_000)
            .map(|_| sender.sign(b"h", b"b", at(0)).nonce)
            .collect();
        assert_eq!(nonces.len(), 10_000);
        // Two authenticators start from independent random points.
        let a = auth().sign(b"h", b"b", at(0)).nonce;
        let b = auth().sign(b"h", b"b", at(0)).nonce;
        assert_ne!(a, b);
    }

    #[test]
    fn current_process_ids_are_used_when_signing() {
        let cred = Authenticator::for_current_process(key(1)).sign(b"h", b"b", at(0));
        assert_eq!(cred.uid, nix::unistd::getuid().as_raw());
        assert_eq!(cred.gid, nix::unistd::getgid().as_raw());
    }

    #[test]
    fn replay_cache_keeps_entries_one_window_and_prunes_after_two() {
        let mut cache = ReplayCache::new(100);
        let w = 1_000;
        cache.admit(1, 0, 10_000, w).unwrap();
        cache.admit(2, 0, 10_999, w).unwrap();
        // Rotation at 11_000: both move to `previous`, still remembered.
        cache.admit(3, 0, 11_000, w).unwrap();
        assert!(matches!(
            cache.admit(2, 0, 11_998, w),
            Err(AuthError::Replayed { nonce: 2, uid: 0 })
        ));
        // Rotation at 12_000 drops 1 and 2 (admitted over a window ago).
        cache.admit(4, 0, 12_000, w).unwrap();
        assert_eq!(cache.len(), 2);
        assert!(matches!(
            cache.admit(3, 0, 12_500, w),
            Err(AuthError::Replayed { .. })
        ));
        // A long silence clears everything at once.
        cache.admit(5, 0, 20_000, w).unwrap();
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn replay_cache_keys_on_nonce_and_uid() {
        let mut cache = ReplayCache::new(100);
        cache.admit(9, 0, 0, 1_000).unwrap();
        cache.admit(9, 1, 0, 1_000).unwrap();
        assert!(cache.admit(9, 1, 0, 1_000).is_err());
    }

    #[test]
    fn a_full_replay_cache_refuses_instead_of_forgetting() {
        let receiver = auth().with_replay_capacity(2);
        let sender = auth();
        for _ in 0..2 {
            let cred = sender.sign(b"h", b"b", at(0));
            receiver.verify(&cred, b"h", b"b", at(0)).unwrap();
        }
        let cred = sender.sign(b"h", b"b", at(0));
        let err = receiver.verify(&cred, b"h", b"b", at(0)).unwrap_err();
        assert!(matches!(err, AuthError::ReplayCacheFull { capacity: 2 }));
        // Two windows later the old entries are gone and room is back.
        let later = sender.sign(b"h", b"b", at(200_000));
        assert!(receiver.verify(&later, b"h", b"b", at(200_000)).is_ok());
    }

    #[test]
    fn short_keys_are_rejected() {
        let err = Key::from_bytes(&[1; 31]).unwrap_err();
        assert!(matches!(err, AuthError::KeyTooShort { len: 31, min: 32 }));
    }

    fn write_key_file(dir: &Path, contents: &[u8], mode: u32) -> PathBuf {
        let path = dir.join("key");
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn key_file_loads_and_ignores_a_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let material = [b'k'; 32];
        let mut contents = material.to_vec();
        contents.push(b'\n');
        let path = write_key_file(dir.path(), &contents, 0o600);
        let loaded = Authenticator::new(load_key(&path).unwrap(), 1, 1);
        let direct = Authenticator::new(Key::from_bytes(&material).unwrap(), 1, 1);
        let cred = direct.sign(b"h", b"b", at(0));
        assert!(loaded.verify(&cred, b"h", b"b", at(0)).is_ok());
    }

    #[test]
    fn key_file_readable_by_others_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            let path = write_key_file(dir.path(), &[b'k'; 64], mode);
            let err = load_key(&path).unwrap_err();
            match &err {
                AuthError::KeyFileMode { path: p, mode: m } => {
                    assert_eq!(p, &path);
                    assert_eq!(*m, mode);
                }
                other => panic!("expected KeyFileMode, got {other}"),
            }
            let text = err.to_string();
            assert!(text.contains(&format!("{mode:04o}")), "{text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("chmod 600"), "{text}");
        }
    }

    #[test]
    fn short_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut contents = vec![b'k'; 31];
        contents.push(b'\n');
        let path = write_key_file(dir.path(), &contents, 0o600);
        let err = load_key(&path).unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::KeyFileTooShort {
                    len: 31,
                    min: 32,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn missing_key_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent");
        let err = load_key(&path).unwrap_err();
        assert!(
            matches!(&err, AuthError::KeyFileIo { action: "read", source, .. }
                if source.kind() == io::ErrorKind::NotFound),
            "{err}"
        );
        assert!(err.to_string().contains("absent"), "{err}");
    }

    #[test]
    fn generated_key_file_is_private_loadable_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("canopy.key");
        generate_key_file(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 2 * GENERATED_KEY_BYTES + 1);
        assert!(text.trim_end().bytes().all(|b| b.is_ascii_hexdigit()));
        load_key(&path).unwrap();

        let err = generate_key_file(&path).unwrap_err();
        assert!(
            matches!(&err, AuthError::KeyFileIo { action: "create", source, .. }
                if source.kind() == io::ErrorKind::AlreadyExists),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

        let other = dir.path().join("other.key");
        generate_key_file(&other).unwrap();
        assert_ne!(std::fs::read_to_string(&other).unwrap(), text);
    }
}
