//! The harness every scenario shares: a temp dir with a generated slurm.conf
//! and key, the production `canopy-ctld` as a child process (so its CPU and
//! memory can be read from /proc), N simulated node daemons on a dedicated
//! thread, and wire-protocol clients.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use canopy::config::Config;
use canopy::sim;
use canopy::wire::auth::{load_key, Authenticator};
use canopy::wire::connection::Connection;
use canopy::wire::messages::{Body, CtldStats, ErrorReply};
use canopy::wire::types::JobSubmit;

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
    /// Room (MaxNodeCount) for this many dynamic nodes beyond `nodes`, which join
    /// with `canopy-noded -Z` when the scenario calls `start_dynamic`.
    pub dynamic: u32,
}

/// What a scenario adds to the generated slurm.conf.
#[derive(Debug, Clone, Default)]
pub struct ConfExtra {
    /// Global lines (`{dir}` is the run's directory).
    pub globals: String,
    /// Appended to every node's line (`State=CLOUD`).
    pub node_attrs: String,
}

/// Nodes per simulation process: each node needs about three descriptors
/// (listener, upward link, children's links) and both ends of every loopback
/// link live on this machine, so the per-process fd limit caps a process.
const MAX_PER_PROCESS: u64 = 5000;

/// One `canopy-noded --simulate` process and the ranks it runs.
struct SimProc {
    child: Child,
    ranks: std::ops::Range<u32>,
    stdin: std::process::ChildStdin,
}

pub struct Harness {
    /// Kept on disk after the run when `CANOPY_KEEP_LOGS` is set.
    dir: Option<tempfile::TempDir>,
    pub path: PathBuf,
    pub conf: Arc<Config>,
    pub spec: ClusterSpec,
    ctld: Child,
    pub ctld_pid: i32,
    /// Behind a lock so scenarios can kill nodes through `&Harness`.
    sims: std::sync::Mutex<Vec<SimProc>>,
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

fn render_config(
    spec: &ClusterSpec,
    extra: &ConfExtra,
    dir: &Path,
    ctld_port: u16,
    node_port: u16,
) -> String {
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
    s.push_str(&extra.globals.replace("{dir}", &dir.display().to_string()));
    for r in 0..spec.nodes {
        s.push_str(&format!(
            "NodeName=s{:05} NodeAddr={} {}\n",
            r + 1,
            sim::node_addr(r),
            extra.node_attrs
        ));
    }
    if spec.dynamic > 0 {
        s.push_str(&format!("MaxNodeCount={}\n", spec.nodes + spec.dynamic));
    }
    s.push_str("PartitionName=sim Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
    s
}

impl Harness {
    /// Write the config, start the controller and (unless deferred) the nodes,
    /// and wait until every node is IDLE.
    pub fn start(spec: ClusterSpec, progress: &mut dyn FnMut(&str)) -> Result<Harness> {
        Self::start_with(spec, &ConfExtra::default(), progress)
    }

    /// As `start`, with `extra` in the slurm.conf.
    pub fn start_with(
        spec: ClusterSpec,
        extra: &ConfExtra,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Harness> {
        if spec.tree_width < 2 {
            bail!("--tree-width must be at least 2 (got {})", spec.tree_width);
        }
        // Every simulation process must fit its nodes' descriptors.
        let (soft, hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
        if hard < 3 * 64 + 1024 {
            bail!("the open-file limit ({soft}, hard {hard}) is too low to simulate nodes");
        }
        // ... and all of them together must fit the system's.
        if let Some(free) = system_fds_free() {
            let need = u64::from(spec.nodes) * 3;
            if need > free {
                bail!(
                    "{} simulated nodes need about {need} open files but the system has {free} left (fs.file-max)",
                    spec.nodes
                );
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("canopy-loadtest")
            .tempdir()?;
        let ctld_port = free_port("127.0.0.1")?;
        // One port number for every node: each has its own address.
        let node_port = free_port(&sim::node_addr(0).to_string())?;
        let conf_path = dir.path().join("slurm.conf");
        std::fs::write(
            &conf_path,
            render_config(&spec, extra, dir.path(), ctld_port, node_port),
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
            sims: std::sync::Mutex::new(Vec::new()),
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
        self.start_sims(false, progress)?;
        let n = self.spec.nodes;
        let limit = Duration::from_secs(60 + u64::from(n) / 200);
        let mut last_report = Instant::now();
        let mut seen = String::new();
        let r = self.wait(limit, "every node IDLE", |h| match h.try_stats() {
            Ok(s) => {
                seen = format!(
                    "idle={} unknown={} not_responding={} down={}",
                    s.nodes.idle, s.nodes.unknown, s.nodes.not_responding, s.nodes.down
                );
                if last_report.elapsed() > Duration::from_secs(5) {
                    last_report = Instant::now();
                    progress(&format!("waiting for IDLE: {seen}"));
                }
                s.nodes.idle == n && s.nodes.not_responding == 0
            }
            Err(_) => false,
        });
        r.with_context(|| format!("last seen: {seen}"))?;
        Ok(t0.elapsed())
    }

    /// Start the simulation processes; with `deferred` they run no node
    /// until told to (`send("start", ...)`: powered-down cloud nodes).
    pub fn start_sims(&mut self, deferred: bool, progress: &mut dyn FnMut(&str)) -> Result<()> {
        let t0 = Instant::now();
        let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
        let per = ((hard.saturating_sub(1024)) / 3).clamp(64, MAX_PER_PROCESS) as u32;
        let n = self.spec.nodes;
        let noded = bin_dir()?.join("canopy-noded");
        let mut first = 0;
        while first < n {
            let last = (first + per).min(n) - 1;
            let log = std::fs::File::create(self.path.join(format!("sim-{first}.log")))?;
            let mut child = Command::new(&noded)
                .args(["-f", &self.conf_path_str(), "--simulate"])
                .arg(format!("--ranks={first}-{last}"))
                .arg(format!(
                    "--job-runtime-ms={}",
                    self.spec.job_runtime.as_millis()
                ))
                .args(deferred.then_some("--deferred"))
                .env(
                    "CANOPY_LOG",
                    std::env::var("CANOPY_LOG").unwrap_or_else(|_| "warn".into()),
                )
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(log)
                .spawn()
                .context("cannot start canopy-noded --simulate")?;
            let stdin = await_ready(
                &mut child,
                &format!("simulation process for ranks {first}-{last}"),
                &self.path.join(format!("sim-{first}.log")),
            )?;
            self.sims
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(SimProc {
                    child,
                    ranks: first..last + 1,
                    stdin,
                });
            first = last + 1;
        }
        progress(&format!(
            "{n} node daemons {} in {} processes in {:.2} s",
            if deferred {
                "ready to start"
            } else {
                "started"
            },
            n.div_ceil(per),
            t0.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Start `spec.dynamic` simulated `canopy-noded -Z` nodes at once and wait until every
    /// node, listed and dynamic, is IDLE; returns the time taken.
    pub fn start_dynamic(&mut self, progress: &mut dyn FnMut(&str)) -> Result<Duration> {
        let t0 = Instant::now();
        let (n, first) = (self.spec.dynamic, self.spec.nodes);
        let port = self.conf.slurmd_port;
        let line = format!("CPUs={} RealMemory=64000 Port={port}", self.spec.cpus);
        let log = std::fs::File::create(self.path.join("sim-dynamic.log"))?;
        let mut child = Command::new(bin_dir()?.join("canopy-noded"))
            .args(["-f", &self.conf_path_str(), "--simulate", "-Z"])
            .arg(format!("--count={n}"))
            .arg(format!("--first={first}"))
            .arg(format!("--conf={line}"))
            .env(
                "CANOPY_LOG",
                std::env::var("CANOPY_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("cannot start canopy-noded --simulate -Z")?;
        let stdin = await_ready(
            &mut child,
            "dynamic simulation process",
            &self.path.join("sim-dynamic.log"),
        )?;
        let joined = t0.elapsed();
        self.sims
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(SimProc {
                child,
                ranks: first..first + n,
                stdin,
            });
        progress(&format!(
            "{n} dynamic nodes joined in {:.2} s; waiting for IDLE",
            joined.as_secs_f64()
        ));
        let all = first + n;
        let limit = Duration::from_secs(60 + u64::from(n) / 200);
        self.wait(limit, "every node IDLE", |h| {
            h.try_stats()
                .is_ok_and(|s| s.nodes.idle == all && s.nodes.not_responding == 0)
        })?;
        Ok(t0.elapsed())
    }

    fn conf_path_str(&self) -> String {
        self.path.join("slurm.conf").to_string_lossy().into_owned()
    }

    /// Stop simulated nodes (their sockets close, as when a process dies).
    pub fn kill(&self, ranks: Vec<u32>) -> Result<()> {
        self.send("kill", &ranks)
    }

    /// Tell the simulation processes holding `ranks` to `kill` or `start` them.
    pub fn send(&self, cmd: &str, ranks: &[u32]) -> Result<()> {
        use std::io::Write;
        let mut sims = self.sims.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        for p in sims.iter_mut() {
            let mine: Vec<String> = ranks
                .iter()
                .filter(|r| p.ranks.contains(r))
                .map(|r| r.to_string())
                .collect();
            if !mine.is_empty() {
                writeln!(p.stdin, "{cmd} {}", mine.join(","))?;
                p.stdin.flush()?;
            }
        }
        Ok(())
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
        let sims = self.sims.get_mut().map(std::mem::take).unwrap_or_default();
        for mut p in sims {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        if std::env::var_os("CANOPY_KEEP_LOGS").is_some() {
            if let Some(d) = self.dir.take() {
                eprintln!("loadtest: logs kept in {}", d.keep().display());
            }
        }
    }
}

/// Open files the system can still hand out (`/proc/sys/fs/file-nr`: used, 0, max).
fn system_fds_free() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/sys/fs/file-nr").ok()?;
    let v: Vec<u64> = t
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    Some(v.get(2)?.saturating_sub(*v.first()?))
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

/// A small batch job as the load generators submit it.
pub fn job(name: String, hold: bool, nodes: Option<u32>) -> JobSubmit {
    let uid = nix::unistd::getuid().as_raw();
    JobSubmit {
        name,
        hold,
        min_nodes: nodes,
        script: "#!/bin/sh\n#SBATCH -N 1\nsrun ./simulate --input data.h5\n".into(),
        workdir: "/tmp".into(),
        submit_dir: "/tmp".into(),
        uid,
        gid: uid,
        command: "/tmp/job.sh".into(),
        ..Default::default()
    }
}

impl Harness {
    /// Submit `jobs` jobs over `clients` concurrent connections (closed loop);
    /// `make(i)` builds job `i`. Returns the job ids.
    pub fn submit_many(
        &self,
        jobs: u32,
        clients: u32,
        make: impl Fn(u32) -> JobSubmit + Send + Sync + 'static,
    ) -> Result<Vec<u32>> {
        if clients == 0 {
            bail!("--clients must be at least 1");
        }
        let make = Arc::new(make);
        let per = jobs.div_ceil(clients);
        self.rt.block_on(async {
            let mut tasks = Vec::new();
            for c in 0..clients {
                let mut conn = self.connect().await?;
                let range = (c * per).min(jobs)..((c + 1) * per).min(jobs);
                let make = make.clone();
                tasks.push(tokio::spawn(async move {
                    let mut ids = Vec::with_capacity(range.len());
                    for i in range {
                        match conn
                            .request(&Body::SubmitJob(Box::new(make(i))))
                            .await?
                            .body
                        {
                            Body::SubmitReply(r) => ids.push(r.job_id),
                            other => bail!("submit failed: {other:?}"),
                        }
                    }
                    Ok::<_, anyhow::Error>(ids)
                }));
            }
            let mut ids = Vec::with_capacity(jobs as usize);
            for t in tasks {
                ids.extend(t.await??);
            }
            Ok(ids)
        })
    }
}

/// Wait for a `canopy-noded --simulate` process's `ready` line; its stdin
/// stays open for `start`/`kill` commands.
fn await_ready(child: &mut Child, what: &str, log: &Path) -> Result<ChildStdin> {
    use std::io::BufRead;
    let stdin = child
        .stdin
        .take()
        .context("no stdin for simulation process")?;
    let stdout = child
        .stdout
        .take()
        .context("no stdout for simulation process")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    if !line.starts_with("ready") {
        bail!("{what} failed to start (see {})", log.display());
    }
    Ok(stdin)
}
