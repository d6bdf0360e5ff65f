//! The harness every scenario shares: a temp dir with a generated slurm.conf
//! and key, the production `canopy-ctld` as a child process (so its CPU and
//! memory can be read from /proc), N simulated node daemons on a dedicated
//! thread, and wire-protocol clients.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use canopy::config::Config;
use canopy::sim;
use canopy::wire::auth::{load_key, Authenticator};
use canopy::wire::connection::Connection;
use canopy::wire::messages::{Body, CtldStats, ErrorReply};
use tokio::sync::mpsc;

/// How a scenario wants its cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub nodes: u32,
    pub tree_width: u32,
    /// SlurmdTimeout; the heartbeat interval is a third of it (0.2–10 s).
    pub slurmd_timeout: u32,
    /// CPUs per simulated node.
    pub cpus: u32,
    /// How long a simulated job "runs".
    pub job_runtime: Duration,
    /// Start the simulated nodes now (false: the scenario calls `start_nodes`).
    pub start_nodes: bool,
}

enum SimCmd {
    Start,
    Kill(Vec<u32>),
}

pub struct Harness {
    /// Kept on disk after the run when `CANOPY_KEEP_LOGS` is set.
    dir: Option<tempfile::TempDir>,
    pub path: PathBuf,
    pub conf: Arc<Config>,
    pub spec: ClusterSpec,
    ctld: Child,
    pub ctld_pid: i32,
    sim_tx: mpsc::UnboundedSender<SimCmd>,
    sim_ready: std::sync::mpsc::Receiver<Result<(), String>>,
    pub auth: Arc<Authenticator>,
    pub rt: tokio::runtime::Runtime,
}

/// The directory holding this binary and its sibling canopy binaries.
pub fn bin_dir() -> Result<PathBuf> {
    let me = std::env::current_exe().context("cannot find own binary")?;
    Ok(me
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".")))
}

fn free_port(addr: &str) -> Result<u16> {
    Ok(std::net::TcpListener::bind((addr, 0))?.local_addr()?.port())
}

fn render_config(spec: &ClusterSpec, dir: &Path, ctld_port: u16, node_port: u16) -> String {
    let mut s = format!(
        "ClusterName=loadtest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld_port}\n\
         SlurmdTimeout={}\nTreeWidth={}\nStateSaveLocation={}/state\nSlurmdSpoolDir={}/spool/%n\n\
         ReturnToService=1\nKillWait=5\nMinJobAge=600\nMaxJobCount=1000000\n\
         NodeName=DEFAULT CPUs={} RealMemory=64000 Port={node_port}\n",
        spec.slurmd_timeout,
        spec.tree_width,
        dir.display(),
        dir.display(),
        spec.cpus,
    );
    for r in 0..spec.nodes {
        s.push_str(&format!(
            "NodeName=s{:05} NodeAddr={}\n",
            r + 1,
            sim::node_addr(r)
        ));
    }
    s.push_str("PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
    s
}

impl Harness {
    /// Write the config, start the controller and (unless deferred) the nodes,
    /// and wait until every node is IDLE.
    pub fn start(spec: ClusterSpec, progress: &mut dyn FnMut(&str)) -> Result<Harness> {
        if spec.tree_width < 2 {
            bail!("--tree-width must be at least 2 (got {})", spec.tree_width);
        }
        // Each simulated node holds a listener, its upward link and its children's links.
        let wanted = u64::from(spec.nodes) * 3 + 4096;
        sim::raise_fd_limit(wanted).map_err(|e| {
            anyhow::anyhow!(
                "{e}: {} simulated nodes need about {wanted} descriptors",
                spec.nodes
            )
        })?;
        let dir = tempfile::Builder::new()
            .prefix("canopy-loadtest")
            .tempdir()?;
        let ctld_port = free_port("127.0.0.1")?;
        // One port number for every node: each has its own address.
        let node_port = free_port(&sim::node_addr(0).to_string())?;
        let conf_path = dir.path().join("slurm.conf");
        std::fs::write(
            &conf_path,
            render_config(&spec, dir.path(), ctld_port, node_port),
        )?;
        let key_path = dir.path().join("slurm.key");
        canopy::wire::auth::generate_key_file(&key_path)?;
        let conf = Arc::new(Config::load(&conf_path)?);
        let me = nix::unistd::getuid().as_raw();
        let auth = Arc::new(
            Authenticator::new(load_key(&key_path)?, me, me).with_replay_capacity(1 << 23),
        );
        let log = std::fs::File::create(dir.path().join("ctld.log"))?;
        let ctld = Command::new(bin_dir()?.join("canopy-ctld"))
            .args(["-f", &conf_path.to_string_lossy()])
            .env(
                "CANOPY_LOG",
                std::env::var("CANOPY_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("cannot start canopy-ctld (build it next to canopy-loadtest)")?;
        let ctld_pid = ctld.id() as i32;
        let (sim_tx, sim_rx) = mpsc::unbounded_channel();
        let (ready_tx, sim_ready) = std::sync::mpsc::channel();
        let (c2, a2, run_for) = (conf.clone(), auth.clone(), spec.job_runtime);
        std::thread::Builder::new()
            .name("sim-nodes".into())
            .spawn(move || sim_thread(c2, a2, run_for, sim_rx, ready_tx))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let mut h = Harness {
            path: dir.path().to_path_buf(),
            dir: Some(dir),

            conf,
            spec,
            ctld,
            ctld_pid,
            sim_tx,
            sim_ready,
            auth,
            rt,
        };
        h.wait(Duration::from_secs(30), "controller up", |h| {
            h.try_stats().is_ok()
        })?;
        if h.spec.start_nodes {
            let t = h.start_nodes(progress)?;
            progress(&format!(
                "{} nodes IDLE after {:.2} s",
                h.spec.nodes,
                t.as_secs_f64()
            ));
        }
        Ok(h)
    }

    /// Start every simulated node and wait until all are IDLE; returns the time taken.
    pub fn start_nodes(&mut self, progress: &mut dyn FnMut(&str)) -> Result<Duration> {
        let t0 = Instant::now();
        self.sim_tx
            .send(SimCmd::Start)
            .map_err(|_| anyhow::anyhow!("simulation thread is gone"))?;
        match self.sim_ready.recv_timeout(Duration::from_secs(600)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("simulated nodes failed to start: {e}"),
            Err(_) => bail!("simulated nodes did not start within 600 s"),
        }
        progress(&format!(
            "{} node daemons started in {:.2} s; waiting for IDLE",
            self.spec.nodes,
            t0.elapsed().as_secs_f64()
        ));
        let n = self.spec.nodes;
        let limit = Duration::from_secs(60 + u64::from(n) / 200);
        self.wait(limit, "every node IDLE", |h| {
            h.try_stats()
                .is_ok_and(|s| s.nodes.idle == n && s.nodes.not_responding == 0)
        })?;
        Ok(t0.elapsed())
    }

    /// Stop simulated nodes (their sockets close, as when a process dies).
    pub fn kill(&self, ranks: Vec<u32>) -> Result<()> {
        self.sim_tx
            .send(SimCmd::Kill(ranks))
            .map_err(|_| anyhow::anyhow!("simulation thread is gone"))
    }

    /// Poll `cond` every 50 ms until it holds or `limit` passes.
    pub fn wait(
        &self,
        limit: Duration,
        what: &str,
        mut cond: impl FnMut(&Harness) -> bool,
    ) -> Result<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if cond(self) {
                return Ok(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "timed out after {:?} waiting for {what} (controller log: {})",
            limit,
            self.path.join("ctld.log").display()
        )
    }

    pub fn ctld_addr(&self) -> String {
        format!("{}:{}", self.conf.control_addr, self.conf.slurmctld_port)
    }

    /// A fresh client connection (call inside `self.rt`).
    pub async fn connect(&self) -> Result<Connection> {
        Ok(
            Connection::connect(self.ctld_addr().as_str(), self.auth.clone(), rand::random())
                .await?,
        )
    }

    /// One request on a fresh connection.
    pub fn call(&self, body: Body) -> Result<Body> {
        self.rt.block_on(async {
            let mut c = self.connect().await?;
            let env = tokio::time::timeout(Duration::from_secs(120), c.request(&body))
                .await
                .context("request timed out")??;
            match env.body {
                Body::Error(ErrorReply { message, .. }) => bail!("controller refused: {message}"),
                b => Ok(b),
            }
        })
    }

    pub fn try_stats(&self) -> Result<CtldStats> {
        match self.call(Body::QueryStats)? {
            Body::Stats(s) => Ok(*s),
            other => bail!("unexpected reply {}", other.kind()),
        }
    }

    /// Controller CPU time (user+system) so far.
    pub fn ctld_cpu(&self) -> Result<Duration> {
        proc_cpu(self.ctld_pid)
    }

    /// Controller resident memory, MiB.
    pub fn ctld_rss_mb(&self) -> Result<f64> {
        proc_rss_mb(self.ctld_pid)
    }

    pub fn heartbeat(&self) -> Duration {
        self.conf.heartbeat_interval()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.ctld.kill();
        let _ = self.ctld.wait();
        // The simulation thread ends when its command channel closes; the
        // process exits soon after a scenario anyway.
        if std::env::var_os("CANOPY_KEEP_LOGS").is_some() {
            if let Some(d) = self.dir.take() {
                eprintln!("loadtest: logs kept in {}", d.keep().display());
            }
        }
    }
}

/// The simulation thread: one actix System running every simulated node.
fn sim_thread(
    conf: Arc<Config>,
    auth: Arc<Authenticator>,
    run_for: Duration,
    mut rx: mpsc::UnboundedReceiver<SimCmd>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let system = actix::System::new();
    system.block_on(async move {
        let mut nodes = Vec::new();
        while let Some(cmd) = rx.recv().await {
            match cmd {
                SimCmd::Start => {
                    let n = conf.nodes.len() as u32;
                    match sim::start_nodes(conf.clone(), auth.clone(), 0..n, run_for).await {
                        Ok(v) => {
                            nodes = v;
                            let _ = ready.send(Ok(()));
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e.to_string()));
                        }
                    }
                }
                SimCmd::Kill(ranks) => {
                    for node in nodes.iter().filter(|n| ranks.contains(&n.rank)) {
                        node.shutdown.cancel();
                    }
                }
            }
        }
        for n in &nodes {
            n.shutdown.cancel();
        }
    });
}

fn proc_cpu(pid: i32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may contain spaces) start at ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15; after ')' they are at 11 and 12.
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&v| v > 0)
        .unwrap_or(100) as u64;
    Ok(Duration::from_millis((ticks(11) + ticks(12)) * 1000 / hz))
}

fn proc_rss_mb(pid: i32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok(kb / 1024.0)
}
