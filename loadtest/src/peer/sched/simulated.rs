//! The canopy side of the backfill comparison: the production canopy-authd and
//! canopy-ctld, and N node daemons run as `canopy-noded --simulate` ranks (the
//! production node daemon with a sleeping executor, a few thousand per process, each
//! on its own loopback address), so that N can be as large as the controller's
//! users want, not as large as this host can run real daemons. Jobs "run" until
//! their time limit. Its own directory, key, ports and slurm.conf; the client
//! commands are canopy's, pointed at it by CANOPY_CONF.
//!
//! Does not: measure anything, or start real node daemons (`canopy` does that for
//! the launch rows).

use std::io::BufRead as _;
use std::process::ChildStdin;

use super::super::*;

/// Ranks per simulation process: each node holds about three descriptors (listener,
/// upward link, children's links), so a process stays well inside its open-file limit.
const RANKS_PER_PROCESS: u32 = 4000;
/// How long a simulated job runs: longer than any time limit here, so jobs end at
/// their limits as Slurm's `sleep`s do.
const SIM_RUNTIME_MS: u64 = 3 * 86_400_000;

/// What the controller's slurm.conf says.
pub(in crate::peer) struct SimSpec<'a> {
    pub(in crate::peer) dir: &'a Path,
    pub(in crate::peer) ctld_port: u16,
    pub(in crate::peer) node_port: u16,
    pub(in crate::peer) nodes: u32,
    pub(in crate::peer) tree_width: u32,
    /// Scheduling lines, the same text Slurm's config gets.
    pub(in crate::peer) extra: &'a str,
}

/// Node names n1..nN as on the Slurm side, each at its simulated address.
pub(in crate::peer) fn sim_conf(spec: &SimSpec) -> String {
    let d = spec.dir.display();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Written by canopy-loadtest (peer-sched, simulated nodes)."
    );
    let _ = writeln!(s, "ClusterName=peer");
    let _ = writeln!(s, "SlurmctldHost=localhost(127.0.0.1)");
    let _ = writeln!(s, "SlurmctldPort={}", spec.ctld_port);
    let _ = writeln!(s, "StateSaveLocation={d}/state");
    let _ = writeln!(s, "SlurmdSpoolDir={d}/spool/%n");
    let _ = writeln!(s, "AuthInfo=socket={d}/authd.sock");
    let _ = writeln!(s, "SlurmdTimeout=300");
    let _ = writeln!(s, "ReturnToService=2");
    let _ = writeln!(s, "MaxJobCount=200000");
    let _ = writeln!(s, "TreeWidth={}", spec.tree_width);
    // As in Slurm's config (canopy's default too, stated for the comparison).
    let _ = writeln!(s, "SchedulerType=sched/backfill");
    s.push_str(spec.extra);
    let _ = writeln!(
        s,
        "NodeName=DEFAULT CPUs=2 RealMemory=1000 Port={} State=UNKNOWN",
        spec.node_port
    );
    for rank in 0..spec.nodes {
        let _ = writeln!(
            s,
            "NodeName=n{} NodeAddr={}",
            rank + 1,
            ::canopy::sim::node_addr(rank)
        );
    }
    let _ = writeln!(
        s,
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    );
    s
}

/// A canopy controller with simulated nodes, all children of this process.
pub(in crate::peer) struct SimCanopy {
    exe: PathBuf,
    dir: PathBuf,
    conf: PathBuf,
    /// authd and ctld.
    daemons: Vec<(String, Child)>,
    /// Simulation processes; each exits when its stdin closes.
    sims: Vec<(Child, ChildStdin)>,
    /// How many simulation processes ran the nodes.
    pub(in crate::peer) processes: u32,
}

impl SimCanopy {
    pub(in crate::peer) fn start(
        ctx: &Ctx,
        dir: PathBuf,
        nodes: u32,
    ) -> Result<SimCanopy, PeerError> {
        for sub in ["state", "spool", "log"] {
            create_dir(&dir.join(sub))?;
        }
        let io = |action, path: PathBuf| {
            move |source| PeerError::Io {
                action,
                path,
                source,
            }
        };
        let ctld_port = TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .map_err(io("bind a port on", PathBuf::from("127.0.0.1")))?
            .port();
        // Every simulated node listens on the same port number at its own address.
        let first = ::canopy::sim::node_addr(0);
        let node_port = TcpListener::bind((first, 0))
            .and_then(|l| l.local_addr())
            .map_err(io("bind a port on", PathBuf::from(first.to_string())))?
            .port();
        let conf = dir.join("slurm.conf");
        write_file(
            &conf,
            &sim_conf(&SimSpec {
                dir: &dir,
                ctld_port,
                node_port,
                nodes,
                tree_width: ctx.tree_width,
                extra: &ctx.extra_conf,
            }),
        )?;
        let key = dir.join("slurm.key");
        ::canopy::wire::auth::generate_key_file(&key)
            .map_err(|e| io("create", key.clone())(std::io::Error::other(e.to_string())))?;
        let bin = ctx
            .canopy_exe
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let mut cluster = SimCanopy {
            exe: ctx.canopy_exe.clone(),
            dir,
            conf,
            daemons: Vec::new(),
            sims: Vec::new(),
            processes: 0,
        };
        cluster.spawn_daemon(&bin, "authd", "canopy-authd")?;
        cluster.spawn_daemon(&bin, "ctld", "canopy-ctld")?;
        cluster.wait_idle(None, Duration::from_secs(60))?;
        let mut from = 0;
        while from < nodes {
            let to = (from + RANKS_PER_PROCESS).min(nodes) - 1;
            cluster.spawn_sim(&bin, from, to)?;
            from = to + 1;
        }
        cluster.wait_idle(Some(nodes), idle_wait(nodes))?;
        Ok(cluster)
    }

    /// The controller's pid, for its memory.
    pub(in crate::peer) fn ctld_pid(&self) -> Option<i32> {
        self.daemons
            .iter()
            .find(|(n, _)| n == "ctld")
            .map(|(_, c)| c.id() as i32)
    }

    fn spawn_daemon(&mut self, bin: &Path, name: &str, exe: &str) -> Result<(), PeerError> {
        let log_path = self.dir.join("log").join(format!("{name}.log"));
        let (out, err) = log_pair(&log_path)?;
        let mut cmd = Command::new(bin.join(exe));
        strip_cluster_env(&mut cmd);
        cmd.arg("-f")
            .arg(&self.conf)
            .env("CANOPY_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd.spawn().map_err(|source| PeerError::Spawn {
            command: describe(&cmd),
            source,
        })?;
        self.daemons.push((name.to_string(), child));
        Ok(())
    }

    /// Ranks `from..=to` in one process; returns once it says they all listen.
    fn spawn_sim(&mut self, bin: &Path, from: u32, to: u32) -> Result<(), PeerError> {
        let log_path = self.dir.join("log").join(format!("sim-{from}.log"));
        let (_, err) = log_pair(&log_path)?;
        let mut cmd = Command::new(bin.join("canopy-noded"));
        strip_cluster_env(&mut cmd);
        cmd.arg("-f")
            .arg(&self.conf)
            .args(["--simulate", &format!("--ranks={from}-{to}")])
            .arg(format!("--job-runtime-ms={SIM_RUNTIME_MS}"))
            .env("CANOPY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err);
        let what = describe(&cmd);
        let mut child = cmd.spawn().map_err(|source| PeerError::Spawn {
            command: what.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(PeerError::Parse {
                command: what,
                output: "no stdin or stdout pipe".into(),
            });
        };
        // Kept before the wait, so that a failure below still stops it.
        self.sims.push((child, stdin));
        self.processes += 1;
        let mut line = String::new();
        // A process that fails closes stdout: the read ends with nothing.
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        if !line.starts_with("ready") {
            return Err(PeerError::Died {
                what: format!("simulated nodes {from}-{to}"),
                status: format!("said {:?}", line.trim()),
                log: log_tail(&log_path),
            });
        }
        Ok(())
    }

    /// Until the controller answers (`want` None) or `want` nodes are idle; a daemon
    /// that exits fails it at once.
    fn wait_idle(&mut self, want: Option<u32>, limit: Duration) -> Result<(), PeerError> {
        let deadline = Instant::now() + limit;
        let client = self.client();
        loop {
            for (name, child) in &mut self.daemons {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(PeerError::Died {
                        what: format!("canopy {name} in {}", self.dir.display()),
                        status: status.to_string(),
                        log: log_tail(&self.dir.join("log").join(format!("{name}.log"))),
                    });
                }
            }
            let mut cmd = client.command("sinfo");
            cmd.args(["-h", "-o", "%D %t"]);
            let last = match run_ok(&mut cmd, Duration::from_secs(30)) {
                Ok(out) => {
                    let idle = idle_nodes(&String::from_utf8_lossy(&out.stdout));
                    match want {
                        None => return Ok(()),
                        Some(n) if idle == n => return Ok(()),
                        Some(n) => format!("{idle} of {n} nodes idle"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(PeerError::Timeout {
                    what: format!("canopy in {}", self.dir.display()),
                    limit_s: limit.as_secs(),
                    last,
                });
            }
            thread::sleep(Duration::from_millis(250));
        }
    }
}

/// A log file opened twice, for a child's stdout and stderr.
fn log_pair(path: &Path) -> Result<(fs::File, fs::File), PeerError> {
    let io = |action| {
        move |source| PeerError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let out = fs::File::create(path).map_err(io("create"))?;
    let err = out.try_clone().map_err(io("duplicate"))?;
    Ok((out, err))
}

impl Running for SimCanopy {
    fn client(&self) -> Client {
        Client::Canopy {
            exe: self.exe.clone(),
            conf: self.conf.clone(),
            dir: self.dir.clone(),
        }
    }

    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError> {
        // Closing stdin ends a simulation process; the daemons get SIGTERM.
        let mut left: Vec<Child> = self.sims.drain(..).map(|(c, _)| c).collect();
        for (_, child) in &self.daemons {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        left.extend(self.daemons.drain(..).map(|(_, c)| c));
        let deadline = Instant::now() + STOP_GRACE;
        while !left.is_empty() && Instant::now() < deadline {
            left.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
            thread::sleep(Duration::from_millis(50));
        }
        for child in &mut left {
            let _ = child.kill();
            let _ = child.wait();
        }
        if remove_dir {
            fs::remove_dir_all(&self.dir).map_err(|source| PeerError::Io {
                action: "remove",
                path: self.dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl Drop for SimCanopy {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}
