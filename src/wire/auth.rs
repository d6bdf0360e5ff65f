//! MUNGE-style credentials: every frame carries who sent it (uid, gid), from
//! which host, when, for how long it is valid and a nonce, signed with
//! HMAC-SHA256 under a cluster-wide shared key (named by its key id)
//! together with a digest of the frame's header and body bytes.
//!
//! This module owns the key files (loading, generating, permission checks,
//! the signing key and one alternate for rotation), signing, constant-time
//! verification, freshness checks and the replay cache. It does not know the
//! frame layout (`frame.rs` decides which bytes are the header and body) nor
//! any policy about which uid may send what. Users never hold the key: they
//! get credentials from the local signer (`crate::authd`), which signs a
//! digest with [`Authenticator::sign_digest`] as the uid the kernel reports.

use std::collections::HashSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
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
/// Most of the replay cache one (non-exempt) uid may hold: about 1,900
/// credentials a second, sustained, at the default TTL; sixteen users
/// flooding at once are needed to fill the whole cache.
pub const DEFAULT_REPLAY_PER_UID: usize = 1 << 18;

/// Bytes of random key material `generate_key_file` writes (hex-encoded).
const GENERATED_KEY_BYTES: usize = 64;
/// Separates canopy credentials from any other use of the same key (v2:
/// with key id and host).
const DOMAIN: &[u8] = b"canopy-credential-v2";
/// DOMAIN, key_id, uid, gid, issued_at_ms, ttl_s, nonce, SHA-256(host),
/// the content digest.
const SIGNED_LEN: usize = DOMAIN.len() + 4 + 4 + 4 + 8 + 4 + 8 + 32 + 32;
/// Longest host name a credential may carry (a DNS name is at most 253).
pub const MAX_HOST_LEN: usize = 255;

/// SHA-256 over a frame's header and body (their boundary fixed by the
/// header's length): what a credential binds a message by. The local signer
/// is sent only this digest, so a credential it issues signs one message.
pub type ContentDigest = [u8; 32];

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

    #[error(
        "uid {uid} already holds {quota} credentials still valid in the replay cache; \
         refusing more from it until they expire"
    )]
    ReplayQuota { uid: u32, quota: usize },

    #[error(
        "credential was issued for another message (its body digest does not match): \
         lifted from one request onto another"
    )]
    WrongMessage,

    #[error(
        "credential signed with key id {key_id:#010x}, which this daemon does not hold \
         (a retired key, or another cluster's)"
    )]
    UnknownKey { key_id: u32 },

    #[error(
        "credential issued at {issued_at_ms} ms, before this daemon started at \
         {not_before_ms} ms: it may have been seen already"
    )]
    BeforeStart {
        issued_at_ms: u64,
        not_before_ms: u64,
    },

    #[error("credential host name is {len} bytes; at most {max} are allowed")]
    HostTooLong { len: usize, max: usize },

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

/// A shared cluster key and its id.
#[derive(Clone)]
pub struct Key {
    hmac: hmac::Key,
    id: u32,
}

impl Key {
    /// Uses `material` as the key; it must be at least [`MIN_KEY_LEN`] bytes.
    /// Its id is derived from the material (a hash prefix), so every host
    /// holding the same key agrees on the id without configuring one.
    pub fn from_bytes(material: &[u8]) -> Result<Key, AuthError> {
        if material.len() < MIN_KEY_LEN {
            return Err(AuthError::KeyTooShort {
                len: material.len(),
                min: MIN_KEY_LEN,
            });
        }
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(b"canopy-key-id");
        ctx.update(material);
        let d = ctx.finish();
        let id = u32::from_be_bytes([d.as_ref()[0], d.as_ref()[1], d.as_ref()[2], d.as_ref()[3]]);
        Ok(Key {
            hmac: hmac::Key::new(hmac::HMAC_SHA256, material),
            id,
        })
    }

    /// The key's id, carried in every credential it signs.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(id {:#010x}, <redacted>)", self.id)
    }
}

/// The keys a process holds: the one it signs with, and at most one
/// alternate it also accepts (two keys live at once is what a rotation
/// needs: every host first learns the new key as the alternate, then signs
/// with it while still accepting the old).
#[derive(Debug, Clone)]
pub struct Keyring {
    pub signing: Key,
    pub alternate: Option<Key>,
}

impl Keyring {
    pub fn single(key: Key) -> Keyring {
        Keyring {
            signing: key,
            alternate: None,
        }
    }

    fn find(&self, id: u32) -> Option<&Key> {
        std::iter::once(&self.signing)
            .chain(self.alternate.as_ref())
            .find(|k| k.id == id)
    }
}

/// The alternate key file beside `signing`: `slurm.key` → `slurm.key.alt`.
pub fn alternate_key_path(signing: &Path) -> PathBuf {
    let mut name = signing.as_os_str().to_owned();
    name.push(".alt");
    PathBuf::from(name)
}

/// Loads the signing key from `path` and, when it exists, the alternate
/// key from [`alternate_key_path`]. Both must be private to their owner.
pub fn load_keyring(path: &Path) -> Result<Keyring, AuthError> {
    let signing = load_key(path)?;
    let alt = alternate_key_path(path);
    let alternate = match std::fs::symlink_metadata(&alt) {
        Ok(_) => Some(load_key(&alt)?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(AuthError::KeyFileIo {
                action: "read",
                path: alt,
                source,
            })
        }
    };
    Ok(Keyring { signing, alternate })
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

/// Who sent a frame, from where, when, and the proof of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// Which key signed it (see [`Key::id`]).
    pub key_id: u32,
    pub uid: u32,
    pub gid: u32,
    /// The host whose signer issued it (for the logs; it is signed).
    pub host: String,
    /// Sender's wall clock, milliseconds since the Unix epoch.
    pub issued_at_ms: u64,
    pub ttl_s: u32,
    pub nonce: u64,
    /// The content digest of the one message it vouches for; a credential
    /// lifted onto another message is refused as such.
    #[serde(with = "serde_bytes")]
    pub digest: ContentDigest,
    #[serde(with = "serde_bytes")]
    pub sig: [u8; 32],
}

/// Signs outgoing frames and verifies incoming ones for one process. Share it
/// (in an `Arc`) between all connections of a daemon so that the replay cache
/// sees every frame the daemon receives.
pub struct Authenticator {
    keys: RwLock<Arc<Keyring>>,
    uid: u32,
    gid: u32,
    host: String,
    ttl_s: u32,
    skew_ms: u64,
    /// Credentials issued before this (sender clock) are refused: the
    /// replay cache does not survive a restart, so a daemon refuses what
    /// it may have accepted before it.
    not_before_ms: AtomicU64,
    /// Rejections by kind, for sdiag.
    rejected: Rejections,
    /// Nonces are a counter from a random start rather than an RNG draw:
    /// signing is lock-free, nonces never repeat within a process (2^64
    /// period), and two processes collide only if their random starts land
    /// within the frames they send of each other. Nonces need not be
    /// unpredictable: they are signed, and only uniqueness matters.
    next_nonce: AtomicU64,
    replay: Mutex<ReplayCache>,
}

/// How many credentials were refused, by reason.
#[derive(Debug, Default)]
pub struct Rejections {
    pub bad_signature: AtomicU64,
    pub unknown_key: AtomicU64,
    pub wrong_message: AtomicU64,
    pub expired: AtomicU64,
    pub future_dated: AtomicU64,
    pub before_start: AtomicU64,
    pub replayed: AtomicU64,
    pub replay_cache_full: AtomicU64,
}

impl Rejections {
    fn count(&self, e: &AuthError) {
        let c = match e {
            AuthError::BadSignature | AuthError::HostTooLong { .. } => &self.bad_signature,
            AuthError::UnknownKey { .. } => &self.unknown_key,
            AuthError::WrongMessage => &self.wrong_message,
            AuthError::Expired { .. } => &self.expired,
            AuthError::FutureDated { .. } => &self.future_dated,
            AuthError::BeforeStart { .. } => &self.before_start,
            AuthError::Replayed { .. } => &self.replayed,
            AuthError::ReplayCacheFull { .. } | AuthError::ReplayQuota { .. } => {
                &self.replay_cache_full
            }
            _ => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `(reason, count)` pairs, in a fixed order (sdiag prints them).
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("bad_signature", get(&self.bad_signature)),
            ("unknown_key", get(&self.unknown_key)),
            ("wrong_message", get(&self.wrong_message)),
            ("expired", get(&self.expired)),
            ("future_dated", get(&self.future_dated)),
            ("before_start", get(&self.before_start)),
            ("replayed", get(&self.replayed)),
            ("replay_cache_full", get(&self.replay_cache_full)),
        ]
    }
}

impl Authenticator {
    /// Signs as `uid`/`gid`, with the default TTL, skew and replay capacity.
    pub fn new(key: Key, uid: u32, gid: u32) -> Self {
        Self::with_keyring(Keyring::single(key), uid, gid)
    }

    /// Signs with `keys.signing`, accepts both keys.
    pub fn with_keyring(keys: Keyring, uid: u32, gid: u32) -> Self {
        Authenticator {
            keys: RwLock::new(Arc::new(keys)),
            uid,
            gid,
            host: local_host_name(),
            ttl_s: duration_to_secs(DEFAULT_TTL),
            skew_ms: duration_to_ms(DEFAULT_SKEW),
            not_before_ms: AtomicU64::new(0),
            rejected: Rejections::default(),
            next_nonce: AtomicU64::new(OsRng.next_u64()),
            replay: Mutex::new(ReplayCache::new(DEFAULT_REPLAY_CAPACITY).exempting(uid)),
        }
    }

    /// Replace the keys (a rotation picked up by `scontrol reconfigure` or
    /// SIGHUP); credentials in flight under a key still held keep verifying.
    pub fn set_keys(&self, keys: Keyring) {
        let mut k = self.keys.write().unwrap_or_else(PoisonError::into_inner);
        *k = Arc::new(keys);
    }

    /// The ids of the keys held: (signing, alternate).
    pub fn key_ids(&self) -> (u32, Option<u32>) {
        let k = self.keyring();
        (k.signing.id, k.alternate.as_ref().map(|a| a.id))
    }

    fn keyring(&self) -> Arc<Keyring> {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Refuse credentials issued before `at` (this daemon's start).
    pub fn refuse_issued_before(&self, at: SystemTime) {
        self.not_before_ms.store(unix_ms(at), Ordering::Relaxed);
    }

    /// Rejections so far, by reason.
    pub fn rejections(&self) -> &Rejections {
        &self.rejected
    }

    /// The host name credentials signed here carry.
    pub fn host(&self) -> &str {
        &self.host
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

    /// Most of the replay cache one uid may hold (default
    /// [`DEFAULT_REPLAY_PER_UID`]), and more uids exempt from that quota
    /// (root and this process's own uid always are; add SlurmUser's).
    pub fn with_replay_quota(self, per_uid: usize, exempt: &[u32]) -> Self {
        {
            let mut r = self.replay.lock().unwrap_or_else(PoisonError::into_inner);
            r.per_uid = per_uid;
            for &uid in exempt {
                if !r.exempt.contains(&uid) {
                    r.exempt.push(uid);
                }
            }
        }
        self
    }

    /// Signs a frame's header and body bytes as of `now`.
    pub fn sign(&self, header_bytes: &[u8], body_bytes: &[u8], now: SystemTime) -> Credential {
        self.sign_digest(
            &content_digest(header_bytes, body_bytes),
            self.uid,
            self.gid,
            now,
        )
    }

    /// Signs a content digest as this process's own uid and gid.
    pub fn sign_own(&self, digest: &ContentDigest, now: SystemTime) -> Credential {
        self.sign_digest(digest, self.uid, self.gid, now)
    }

    /// Signs a content digest for `uid`/`gid`: the local signer's job,
    /// with the ids the kernel reported for its caller.
    pub fn sign_digest(
        &self,
        digest: &ContentDigest,
        uid: u32,
        gid: u32,
        now: SystemTime,
    ) -> Credential {
        let keys = self.keyring();
        let mut credential = Credential {
            key_id: keys.signing.id,
            uid,
            gid,
            host: self.host.clone(),
            issued_at_ms: unix_ms(now),
            ttl_s: self.ttl_s,
            nonce: self.next_nonce.fetch_add(1, Ordering::Relaxed),
            digest: *digest,
            sig: [0; 32],
        };
        let message = signed_message(&credential);
        let tag = hmac::sign(&keys.signing.hmac, &message);
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
        self.verify_digest(credential, &content_digest(header_bytes, body_bytes), now)
    }

    /// [`Authenticator::verify`] against a content digest (the signer
    /// verifies for clients that hold no key).
    pub fn verify_digest(
        &self,
        credential: &Credential,
        digest: &ContentDigest,
        now: SystemTime,
    ) -> Result<(u32, u32), AuthError> {
        let r = self.check(credential, digest, now);
        if let Err(e) = &r {
            self.rejected.count(e);
        }
        r
    }

    fn check(
        &self,
        credential: &Credential,
        digest: &ContentDigest,
        now: SystemTime,
    ) -> Result<(u32, u32), AuthError> {
        if credential.host.len() > MAX_HOST_LEN {
            return Err(AuthError::HostTooLong {
                len: credential.host.len(),
                max: MAX_HOST_LEN,
            });
        }
        let keys = self.keyring();
        let key = keys.find(credential.key_id).ok_or(AuthError::UnknownKey {
            key_id: credential.key_id,
        })?;
        let message = signed_message(credential);
        hmac::verify(&key.hmac, &message, &credential.sig).map_err(|_| AuthError::BadSignature)?;
        // Signed, so the digest is the signer's: does it name this message?
        if credential.digest != *digest {
            return Err(AuthError::WrongMessage);
        }
        let now_ms = unix_ms(now);
        self.check_fresh(credential, now_ms)?;
        let not_before_ms = self.not_before_ms.load(Ordering::Relaxed);
        if credential.issued_at_ms < not_before_ms {
            return Err(AuthError::BeforeStart {
                issued_at_ms: credential.issued_at_ms,
                not_before_ms,
            });
        }
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

/// The content digest of a frame: header and body through one SHA-256
/// (their boundary fixed by the header length), so the HMAC covers a
/// fixed-size message and a signer need see only 32 bytes.
pub fn content_digest(header: &[u8], body: &[u8]) -> ContentDigest {
    let mut content = digest::Context::new(&digest::SHA256);
    content.update(&(header.len() as u64).to_be_bytes());
    content.update(header);
    content.update(body);
    let mut out = [0u8; 32];
    out.copy_from_slice(content.finish().as_ref());
    out
}

/// The fixed-size buffer the HMAC covers.
fn signed_message(credential: &Credential) -> [u8; SIGNED_LEN] {
    let host = digest::digest(&digest::SHA256, credential.host.as_bytes());
    let mut message = [0u8; SIGNED_LEN];
    let fields: [&[u8]; 9] = [
        DOMAIN,
        &credential.key_id.to_be_bytes(),
        &credential.uid.to_be_bytes(),
        &credential.gid.to_be_bytes(),
        &credential.issued_at_ms.to_be_bytes(),
        &credential.ttl_s.to_be_bytes(),
        &credential.nonce.to_be_bytes(),
        host.as_ref(),
        &credential.digest,
    ];
    let mut at = 0;
    for field in fields {
        message[at..at + field.len()].copy_from_slice(field);
        at += field.len();
    }
    message
}

/// This host's name (what credentials signed here say), or "" if unknown.
fn local_host_name() -> String {
    let mut name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    while name.len() > MAX_HOST_LEN {
        name.pop();
    }
    name
}

/// Recently accepted `(nonce, uid)` pairs, in two generations each spanning
/// one validity window. A pair stays at least one window after it was
/// admitted, which is as long as its credential can be accepted; pruning is a
/// swap and a `clear`, never a scan.
struct ReplayCache {
    current: HashSet<(u64, u32)>,
    previous: HashSet<(u64, u32)>,
    /// Entries per uid in each generation: one user may hold at most
    /// `per_uid` of the cache, so no user can fill it for everyone else.
    current_by_uid: std::collections::HashMap<u32, usize>,
    previous_by_uid: std::collections::HashMap<u32, usize>,
    current_since_ms: u64,
    capacity: usize,
    per_uid: usize,
    /// Uids the quota does not apply to (root, the daemons' user): what
    /// daemons sign must never be refused because a user flooded.
    exempt: Vec<u32>,
}

impl ReplayCache {
    fn new(capacity: usize) -> Self {
        ReplayCache {
            current: HashSet::new(),
            previous: HashSet::new(),
            current_by_uid: Default::default(),
            previous_by_uid: Default::default(),
            per_uid: DEFAULT_REPLAY_PER_UID.min(capacity),
            exempt: vec![0],
            current_since_ms: 0,
            capacity,
        }
    }

    /// Also exempt `uid` (the daemon's own) from the per-uid quota.
    fn exempting(mut self, uid: u32) -> Self {
        if !self.exempt.contains(&uid) {
            self.exempt.push(uid);
        }
        self
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
        let exempt = self.exempt.contains(&uid);
        let held = self.current_by_uid.get(&uid).copied().unwrap_or(0)
            + self.previous_by_uid.get(&uid).copied().unwrap_or(0);
        if !exempt && held >= self.per_uid {
            return Err(AuthError::ReplayQuota {
                uid,
                quota: self.per_uid,
            });
        }
        // The daemons' own credentials may use the part of the cache users'
        // quotas leave; users' stop short of the whole.
        if self.current.len() + self.previous.len() >= self.capacity {
            return Err(AuthError::ReplayCacheFull {
                capacity: self.capacity,
            });
        }
        self.current.insert(seen);
        *self.current_by_uid.entry(uid).or_default() += 1;
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
            self.previous_by_uid.clear();
        } else {
            std::mem::swap(&mut self.current, &mut self.previous);
            std::mem::swap(&mut self.current_by_uid, &mut self.previous_by_uid);
        }
        // `clear` keeps the allocation, so a steady load does not re-grow it.
        self.current.clear();
        self.current_by_uid.clear();
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
        for change in 0..8 {
            let mut c = cred.clone();
            match change {
                0 => c.uid = 0,
                1 => c.gid = 0,
                2 => c.issued_at_ms += 1,
                3 => c.ttl_s += 1,
                4 => c.nonce ^= 1,
                5 => c.host.push('x'),
                6 => c.digest[0] ^= 1,
                _ => c.sig[31] ^= 1,
            }
            let err = auth().verify(&c, b"head", b"body", at(0)).unwrap_err();
            assert!(matches!(err, AuthError::BadSignature), "{err}");
        }
        // The credential intact on another message: named as such.
        let others: [(&[u8], &[u8]); 3] = [
            (b"heaD", b"body"),
            (b"head", b"bodY"),
            // Moving a byte across the header/body boundary must not verify.
            (b"hea", b"dbody"),
        ];
        for (head, body) in others {
            let err = auth().verify(&cred, head, body, at(0)).unwrap_err();
            assert!(matches!(err, AuthError::WrongMessage), "{err}");
        }
    }

    #[test]
    fn a_different_key_is_an_unknown_key() {
        let cred = auth().sign(b"h", b"b", at(0));
        let other = Authenticator::new(key(8), 1000, 100);
        let err = other.verify(&cred, b"h", b"b", at(0)).unwrap_err();
        assert!(matches!(err, AuthError::UnknownKey { .. }));
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
        // Room for 4, at most 2 per user; root is exempt from the quota.
        let receiver = auth().with_replay_capacity(4).with_replay_quota(2, &[]);
        let as_uid = |uid| Authenticator::new(key(7), uid, 100);
        let (alice, bob, root) = (as_uid(1000), as_uid(1001), as_uid(0));
        for _ in 0..2 {
            let cred = alice.sign(b"h", b"b", at(0));
            receiver.verify(&cred, b"h", b"b", at(0)).unwrap();
        }
        // Alice's quota is spent; bob still gets in.
        let cred = alice.sign(b"h", b"b", at(0));
        let err = receiver.verify(&cred, b"h", b"b", at(0)).unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::ReplayQuota {
                    uid: 1000,
                    quota: 2
                }
            ),
            "{err}"
        );
        for _ in 0..2 {
            let cred = bob.sign(b"h", b"b", at(0));
            receiver.verify(&cred, b"h", b"b", at(0)).unwrap();
        }
        // Now the cache itself is full: even root is refused, not forgotten.
        let cred = root.sign(b"h", b"b", at(0));
        let err = receiver.verify(&cred, b"h", b"b", at(0)).unwrap_err();
        assert!(
            matches!(err, AuthError::ReplayCacheFull { capacity: 4 }),
            "{err}"
        );
        // Two windows later the old entries are gone and room is back.
        let later = alice.sign(b"h", b"b", at(200_000));
        assert!(receiver.verify(&later, b"h", b"b", at(200_000)).is_ok());
    }

    /// The daemons' own uid is exempt from the quota by default.
    #[test]
    fn the_daemons_uid_is_not_held_to_a_users_quota() {
        let receiver = Authenticator::new(key(7), 0, 0)
            .with_replay_capacity(10)
            .with_replay_quota(1, &[4242]);
        let daemon = Authenticator::new(key(7), 4242, 4242);
        for _ in 0..3 {
            let cred = daemon.sign(b"h", b"b", at(0));
            receiver.verify(&cred, b"h", b"b", at(0)).unwrap();
        }
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

    /// Rotation: a credential names its key; the alternate key verifies,
    /// a retired one is refused as unknown (not as a bad signature), and
    /// each refusal is counted by reason.
    #[test]
    fn key_ids_select_the_key_and_retired_keys_are_refused() {
        let old = Authenticator::new(key(7), 1000, 100);
        let new = Authenticator::new(key(9), 1000, 100);
        assert_ne!(key(7).id(), key(9).id());
        assert_eq!(
            key(7).id(),
            Key::from_bytes(&[7; 32]).unwrap().id(),
            "ids are stable"
        );
        // Mid-rotation: signs with the new key, still accepts the old.
        let both = Authenticator::with_keyring(
            Keyring {
                signing: key(9),
                alternate: Some(key(7)),
            },
            0,
            0,
        );
        let by_old = old.sign(b"h", b"b", at(0));
        let by_new = new.sign(b"h", b"b", at(0));
        assert_eq!(by_old.key_id, key(7).id());
        assert!(both.verify(&by_old, b"h", b"b", at(1)).is_ok());
        assert!(both.verify(&by_new, b"h", b"b", at(1)).is_ok());
        assert_eq!(both.sign(b"h", b"b", at(0)).key_id, key(9).id());
        // The old key retired.
        both.set_keys(Keyring::single(key(9)));
        let again = old.sign(b"h", b"b", at(2));
        let err = both.verify(&again, b"h", b"b", at(3)).unwrap_err();
        assert!(
            matches!(err, AuthError::UnknownKey { key_id } if key_id == key(7).id()),
            "{err}"
        );
        // A credential claiming the new key's id but signed with the old.
        let mut forged = old.sign(b"h", b"b", at(2));
        forged.key_id = key(9).id();
        let err = both.verify(&forged, b"h", b"b", at(3)).unwrap_err();
        assert!(matches!(err, AuthError::BadSignature), "{err}");
        let counts: std::collections::HashMap<_, _> =
            both.rejections().snapshot().into_iter().collect();
        assert_eq!((counts["unknown_key"], counts["bad_signature"]), (1, 1));
    }

    /// After a restart the replay cache is empty: what was issued before
    /// the daemon started is refused rather than possibly accepted twice.
    #[test]
    fn credentials_from_before_the_start_are_refused() {
        let receiver = auth();
        receiver.refuse_issued_before(at(1_000));
        let before = auth().sign(b"h", b"b", at(999));
        let err = receiver.verify(&before, b"h", b"b", at(1_500)).unwrap_err();
        assert!(matches!(err, AuthError::BeforeStart { .. }), "{err}");
        let after = auth().sign(b"h", b"b", at(1_000));
        assert!(receiver.verify(&after, b"h", b"b", at(1_500)).is_ok());
    }

    /// The signer signs a digest for the caller the kernel named; the
    /// credential verifies for that message only.
    #[test]
    fn a_digest_credential_binds_one_message_and_the_callers_ids() {
        let signer = auth();
        let d = content_digest(b"head", b"body");
        let cred = signer.sign_digest(&d, 1234, 55, at(0));
        assert_eq!((cred.uid, cred.gid), (1234, 55));
        assert_eq!(cred.host, signer.host());
        assert_eq!(
            auth().verify(&cred, b"head", b"body", at(1)).unwrap(),
            (1234, 55)
        );
        let err = auth().verify(&cred, b"head", b"other", at(1)).unwrap_err();
        assert!(matches!(err, AuthError::WrongMessage));
        let mut long = cred.clone();
        long.host = "h".repeat(MAX_HOST_LEN + 1);
        let err = auth().verify(&long, b"head", b"body", at(1)).unwrap_err();
        assert!(matches!(err, AuthError::HostTooLong { .. }));
    }

    #[test]
    fn the_alternate_key_file_is_loaded_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("slurm.key");
        generate_key_file(&main).unwrap();
        let ring = load_keyring(&main).unwrap();
        assert!(ring.alternate.is_none());
        generate_key_file(&alternate_key_path(&main)).unwrap();
        let ring = load_keyring(&main).unwrap();
        assert!(ring.alternate.is_some());
        assert_ne!(ring.alternate.unwrap().id(), ring.signing.id());
    }
}
