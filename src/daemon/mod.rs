//! Daemon entry points and their network plumbing: accepting connections,
//! telling node links from CLI clients, and moving frames between sockets and
//! actors, and stopping all of it cleanly (`shutdown.rs`) with a bounded
//! number of connections per listener (`limit.rs`, `listen.rs`). The
//! binaries in `src/bin/` only parse arguments, wait for a stop signal and
//! call in here.

pub mod check;
pub mod ctld;
pub mod debuglog;
pub mod event_log;
pub mod guard;
pub mod hardware;
pub mod limit;
pub mod link;
pub mod listen;
pub mod noded;
pub mod noded_join;
pub mod rpc;
pub mod rpc_console;
pub mod rpc_exec;
pub mod rpc_nodes;
pub mod rpc_trace;
pub mod rpc_tree;
pub mod shutdown;
pub mod stats;

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::wire::auth::{load_keyring, Authenticator};

/// A fresh random id for this daemon start (or CLI connection).
///
/// Straight from the OS (one getrandom call): `rand::random` would first
/// seed a ChaCha generator whose CPU feature probe (CPUID, which traps on a
/// VM) costs more than the rest of a short-lived `sbatch` does in user space.
pub fn new_boot_id() -> u64 {
    use rand::RngCore;
    rand::rngs::OsRng.next_u64() | 1
}

/// The authenticator every daemon (and the local signer) signs and
/// verifies with: the signing key and its alternate, if any.
pub fn authenticator(conf: &Config) -> Result<Arc<Authenticator>, crate::wire::auth::AuthError> {
    let keys = load_keyring(&conf.auth_key_path)?;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    // The daemons' identities are exempt from the replay cache's per-user
    // quota: a user's flood must not get a daemon's frames refused. (A
    // passwd lookup, once, at start-up.)
    let slurm_uid = conf
        .slurm_user
        .as_deref()
        .and_then(|n| nix::unistd::User::from_name(n).ok().flatten())
        .map(|u| u.uid.as_raw());
    let exempt: Vec<u32> = slurm_uid.into_iter().collect();
    Ok(Arc::new(
        Authenticator::with_keyring(keys, uid, gid)
            .with_replay_quota(crate::wire::auth::DEFAULT_REPLAY_PER_UID, &exempt),
    ))
}

/// Expand `%n` (node name) and `%h` (host name) in a spool directory pattern.
pub fn spool_dir(pattern: &str, node: &str, host: &str) -> std::path::PathBuf {
    Path::new(&pattern.replace("%n", node).replace("%h", host)).to_path_buf()
}
