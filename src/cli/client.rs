//! The CLI's connection to the controller: locate the config, get each
//! frame's credential from the local signer (the CLI never opens the
//! cluster key), send one request, turn error replies into `CliError`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::config::{Config, ConfigError};
use crate::wire::connection::Connection;
use crate::wire::error::WireError;
use crate::wire::messages::{Body, ErrorReply};
use crate::wire::signer::{Signer, SignerClient};

/// How long the CLI waits for the controller to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Auth(#[from] crate::wire::auth::AuthError),
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
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub struct Client {
    pub conf: Arc<Config>,
    pub conf_path: PathBuf,
    conn: Connection,
    signer: Arc<SignerClient>,
}

impl Client {
    /// Load the configuration (`-f`, `$CANOPY_CONF`, `$SLURM_CONF`, default) and connect.
    pub async fn connect(explicit: Option<&std::path::Path>) -> Result<Client, CliError> {
        let conf_path = Config::locate(explicit);
        let conf = Arc::new(Config::load(&conf_path)?);
        let signer = Arc::new(SignerClient::new(&conf.auth_socket));
        // Fail early, naming the socket, when no signer runs here.
        signer.connect().await.map_err(WireError::from)?;
        let addr = format!("{}:{}", conf.control_addr, conf.slurmctld_port);
        let fut = Connection::connect(addr.as_str(), signer.clone(), crate::daemon::new_boot_id());
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, fut).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(CliError::Connect(e.to_string())),
            Err(_) => return Err(CliError::Connect(format!("timed out connecting to {addr}"))),
        };
        Ok(Client {
            conf,
            conf_path,
            conn,
            signer,
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

    /// The signer this client's frames go through (srun's task I/O
    /// connections use it too).
    pub fn signer(&self) -> Signer {
        Signer::Local(self.signer.clone())
    }

    /// Send one request and return the reply body; an `Error` reply is a `CliError::Refused`.
    pub async fn call(&mut self, body: Body) -> Result<Body, CliError> {
        let env = self.conn.request(&body).await?;
        match env.body {
            Body::Error(e) => Err(CliError::Refused(e)),
            other => Ok(other),
        }
    }
}
