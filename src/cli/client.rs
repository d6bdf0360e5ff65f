//! The CLI's connection to the controller: locate the config, get each
//! frame's credential from the local signer (the CLI never opens the
//! cluster key), send one request, turn error replies into `CliError`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::config::{Config, ConfigError};
use crate::wire::connection::Connection;
use crate::wire::error::WireError;
use crate::wire::messages::{Body, ErrorCode, ErrorReply};
use crate::wire::signer::{Signer, SignerClient};

/// How long the CLI waits for the controller to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("Unable to contact slurm controller (connect failure): {0}")]
    Connect(String),
    #[error("{0}")]
    Wire(#[from] WireError),
    /// The controller refused the request.
    #[error("{}", .0.message)]
    Refused(ErrorReply),
    #[error("unexpected reply {0} from the controller")]
    Unexpected(&'static str),
    #[error("{0}")]
    Usage(String),
    /// Anyone may get a credential from the signer now; a reply counts
    /// only if the daemons' identity signed it.
    #[error(
        "a reply signed by uid {0}, not by the controller's identity (root, SlurmUser): refused"
    )]
    Untrusted(u32),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub struct Client {
    pub conf: Arc<Config>,
    pub conf_path: PathBuf,
    conn: Connection,
    signer: Arc<SignerClient>,
    /// The uids whose signatures a reply may carry: root, SlurmUser, and
    /// this user (whose own controller it may be, on a private cluster).
    trusted: Vec<u32>,
    /// When the connection last carried a request (see [`Client::call`]).
    last_used: Instant,
}

impl Client {
    /// Load the configuration (`-f`, `$CANOPY_CONF`, `$SLURM_CONF`, default) and connect.
    pub async fn connect(explicit: Option<&std::path::Path>) -> Result<Client, CliError> {
        let conf_path = Config::locate(explicit);
        let conf = Arc::new(Config::load(&conf_path)?);
        let signer = Arc::new(SignerClient::new(&conf.auth_socket));
        // Fail early, naming the socket, when no signer runs here.
        signer.connect().await.map_err(WireError::from)?;
        let conn = open(&conf, &signer).await?;
        let trusted = trusted_uids(conf.slurm_user.clone()).await;
        Ok(Client {
            conf,
            conf_path,
            conn,
            signer,
            last_used: Instant::now(),
            trusted,
        })
    }

    /// Only load the configuration (for commands that need it without a connection).
    pub fn connect_config(explicit: Option<&std::path::Path>) -> Result<Arc<Config>, CliError> {
        Ok(Arc::new(Config::load(&Config::locate(explicit))?))
    }

    /// The local address of the link to the controller: an interface the
    /// cluster can reach this client on (srun listens there for task I/O).
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.conn.local_addr().map(|a| a.ip())
    }

    /// The uids a daemon's frames may be signed by (srun checks its task
    /// I/O links against them too).
    pub fn trusted(&self) -> &[u32] {
        &self.trusted
    }

    /// The signer this client's frames go through (srun's task I/O
    /// connections use it too).
    pub fn signer(&self) -> Signer {
        Signer::Local(self.signer.clone())
    }

    /// Send one request and return the reply body; an `Error` reply is a `CliError::Refused`.
    ///
    /// Told to back off (the user's RPC rate limit), it waits and sends the
    /// request again, as Slurm's clients do: one second more each time
    /// (capped at ten). The controller closes connections idle past its
    /// read timeout (`conmgr_read_timeout`, default MessageTimeout), so a
    /// connection idle for most of that (srun and salloc keep theirs for a
    /// whole step) is replaced before the request rather than lose it.
    pub async fn call(&mut self, body: Body) -> Result<Body, CliError> {
        let mut limited: u64 = 0;
        loop {
            if self.last_used.elapsed() >= self.conf.read_timeout() * 3 / 4 {
                self.conn = open(&self.conf, &self.signer).await?;
            }
            let env = self.conn.request(&body).await?;
            self.last_used = Instant::now();
            if !self.trusted.contains(&env.uid) {
                return Err(CliError::Untrusted(env.uid));
            }
            match env.body {
                Body::Error(e) if e.code == ErrorCode::Backoff => {
                    limited += 1;
                    tokio::time::sleep(Duration::from_secs(limited.min(MAX_BACKOFF_S))).await;
                }
                Body::Error(e) => return Err(CliError::Refused(e)),
                other => return Ok(other),
            }
        }
    }
}

/// Longest wait between tries of a rate-limited request, in seconds.
const MAX_BACKOFF_S: u64 = 10;

/// A connection to the controller `conf` names.
async fn open(conf: &Config, signer: &Arc<SignerClient>) -> Result<Connection, CliError> {
    let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
    let fut = Connection::connect(addr.as_str(), signer.clone(), crate::daemon::new_boot_id());
    match tokio::time::timeout(CONNECT_TIMEOUT, fut).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(CliError::Connect(e.to_string())),
        Err(_) => Err(CliError::Connect(format!("timed out connecting to {addr}"))),
    }
}

/// Root, SlurmUser (looked up off the event loop: a passwd lookup may wait
/// on LDAP) and this user.
async fn trusted_uids(slurm_user: Option<String>) -> Vec<u32> {
    let me = nix::unistd::getuid().as_raw();
    let slurm = match slurm_user {
        Some(name) => tokio::task::spawn_blocking(move || {
            nix::unistd::User::from_name(&name)
                .ok()
                .flatten()
                .map(|u| u.uid.as_raw())
        })
        .await
        .ok()
        .flatten(),
        None => None,
    };
    let mut v: Vec<u32> = [0, me].into_iter().chain(slurm).collect();
    v.sort_unstable();
    v.dedup();
    v
}
