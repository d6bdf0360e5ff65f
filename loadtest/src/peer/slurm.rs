//! The Slurm side: finding or installing Slurm, starting munged and its key, writing a
//! private slurm.conf (nodes, ports, tree width), and starting slurmctld plus K slurmd
//! processes in their own directory, waiting for the nodes to go idle, and stopping every
//! process it started (slurmstepds included), even on error.
//!
//! Does not: measure anything (`measure` does) or touch /etc/slurm.

use super::*;

pub(super) fn missing_files<'a>(files: &[&'a str]) -> Vec<&'a str> {
    files
        .iter()
        .copied()
        .filter(|f| !Path::new(f).exists())
        .collect()
}

/// Slurm is there, or installed now with apt-get; quick mode never installs, so a CI
/// run without Slurm ends at once.
pub(super) fn ensure_slurm_installed(
    files: &[&str],
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(), PeerError> {
    let missing = missing_files(files);
    if missing.is_empty() {
        return Ok(());
    }
    if quick {
        return Err(PeerError::SlurmUnavailable(format!(
            "missing {} (quick mode does not install packages)",
            missing.join(", ")
        )));
    }
    progress(&format!(
        "slurm: missing {}; trying apt-get install",
        missing.join(", ")
    ));
    let apt = |args: &[&str], limit_s: u64| {
        let mut cmd = Command::new("apt-get");
        cmd.args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        run_ok(&mut cmd, Duration::from_secs(limit_s))
    };
    let mut install = vec!["install", "-y", "-q"];
    install.extend_from_slice(SLURM_PACKAGES);
    apt(&["update", "-q"], 180)
        .and_then(|_| apt(&install, 300))
        .map_err(|e| PeerError::SlurmUnavailable(format!("apt-get failed: {e}")))?;
    let missing = missing_files(files);
    if !missing.is_empty() {
        return Err(PeerError::SlurmUnavailable(format!(
            "still missing after apt-get install: {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// munged is system-wide: start it (as the munge user, with a key) only if it is not
/// already running, and leave it running afterwards for whoever else uses it.
pub(super) fn ensure_munged(progress: &mut dyn FnMut(&str)) -> Result<(), PeerError> {
    if !pids_named("munged").is_empty() && Path::new(MUNGE_SOCKET).exists() {
        return Ok(());
    }
    let unavailable = |why: String| PeerError::SlurmUnavailable(why);
    let user = User::from_name("munge")
        .map_err(|e| unavailable(format!("cannot look up the munge user: {e}")))?
        .ok_or_else(|| unavailable("there is no munge user".into()))?;
    let owned_dir = |path: &str, mode: u32| -> Result<(), PeerError> {
        let p = Path::new(path);
        create_dir(p)?;
        chown(p, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| unavailable(format!("cannot chown {path}: {e}")))?;
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(|source| PeerError::Io {
            action: "set permissions on",
            path: p.to_path_buf(),
            source,
        })
    };
    if !Path::new(MUNGE_KEY).exists() {
        progress("munge: creating /etc/munge/munge.key");
        owned_dir("/etc/munge", 0o700)?;
        create_munge_key(Path::new(MUNGE_KEY))?;
        chown(MUNGE_KEY, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| unavailable(format!("cannot chown {MUNGE_KEY}: {e}")))?;
    }
    owned_dir(MUNGE_RUN_DIR, 0o755)?;
    progress("munge: starting munged");
    let mut cmd = Command::new(MUNGED);
    cmd.uid(user.uid.as_raw())
        .gid(user.gid.as_raw())
        .stdin(Stdio::null());
    run_ok(&mut cmd, Duration::from_secs(15))
        .map_err(|e| unavailable(format!("munged did not start: {e}")))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(MUNGE_SOCKET).exists() {
        if Instant::now() > deadline {
            return Err(unavailable(format!(
                "munged started but {MUNGE_SOCKET} did not appear within 10 s"
            )));
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// 1 KiB of kernel randomness, readable by its owner only (munged refuses anything
/// looser).
pub(super) fn create_munge_key(path: &Path) -> Result<(), PeerError> {
    let mut key = vec![0u8; 1024];
    let urandom = Path::new("/dev/urandom");
    fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|source| PeerError::Io {
            action: "read",
            path: urandom.to_path_buf(),
            source,
        })?;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &key))
        .map_err(|source| PeerError::Io {
            action: "create",
            path: path.to_path_buf(),
            source,
        })
}

/// What one private Slurm's slurm.conf says.
pub(super) struct SlurmSpec<'a> {
    pub(super) dir: &'a Path,
    pub(super) hostname: &'a str,
    pub(super) ctld_port: u16,
    pub(super) node_base_port: u16,
    pub(super) nodes: u32,
    pub(super) tree_width: u32,
    pub(super) leaves: Leaves,
    /// Lines appended as they are (a scenario's own settings).
    pub(super) extra: &'a str,
}

/// `n1`, or `n[1-K]` for several nodes.
pub(super) fn node_list(k: u32) -> String {
    if k == 1 {
        "n1".to_string()
    } else {
        format!("n[1-{k}]")
    }
}

/// `P`, or `[P-Q]` for several consecutive ports.
pub(super) fn port_list(base: u16, k: u32) -> String {
    if k == 1 {
        base.to_string()
    } else {
        format!("[{base}-{}]", u32::from(base) + k - 1)
    }
}

/// A self-contained slurm.conf: every path lives under the spec's directory, the
/// controller listens on its own port, and the K nodes are K slurmd processes on this
/// host (one port each), as in Debian's packages with no accounting.
pub(super) fn slurm_conf(spec: &SlurmSpec) -> String {
    let d = spec.dir.display();
    let nodes = node_list(spec.nodes);
    let mut s = String::new();
    let _ = writeln!(s, "# Written by canopy-loadtest (peer scenario).");
    let _ = writeln!(s, "ClusterName=peer");
    let _ = writeln!(s, "SlurmctldHost={}(127.0.0.1)", spec.hostname);
    let _ = writeln!(s, "SlurmctldPort={}", spec.ctld_port);
    // Root owns everything in the private directory, so no chown dance is needed.
    let _ = writeln!(s, "SlurmUser=root");
    let _ = writeln!(s, "AuthType=auth/munge");
    let _ = writeln!(s, "StateSaveLocation={d}/state");
    let _ = writeln!(s, "SlurmdSpoolDir={d}/spool/%n");
    let _ = writeln!(s, "SlurmctldLogFile={d}/log/slurmctld.log");
    let _ = writeln!(s, "SlurmdLogFile={d}/log/slurmd-%n.log");
    let _ = writeln!(s, "SlurmctldPidFile={d}/run/slurmctld.pid");
    let _ = writeln!(s, "SlurmdPidFile={d}/run/slurmd-%n.pid");
    let _ = writeln!(s, "SchedulerType=sched/backfill");
    let _ = writeln!(s, "SelectType=select/cons_tres");
    let _ = writeln!(s, "SelectTypeParameters=CR_Core_Memory");
    s.push_str(spec.leaves.slurm_conf_lines());
    let _ = writeln!(s, "JobAcctGatherType=jobacct_gather/none");
    let _ = writeln!(s, "AccountingStorageType=accounting_storage/none");
    let _ = writeln!(s, "MpiDefault=none");
    let _ = writeln!(s, "MaxJobCount=200000");
    let _ = writeln!(s, "SlurmdTimeout=300");
    let _ = writeln!(s, "ReturnToService=2");
    let _ = writeln!(s, "TreeWidth={}", spec.tree_width);
    let _ = writeln!(
        s,
        "NodeName={nodes} NodeHostname={} NodeAddr=127.0.0.1 Port={} CPUs=2 RealMemory=1000 State=UNKNOWN",
        spec.hostname,
        port_list(spec.node_base_port, spec.nodes)
    );
    let _ = writeln!(
        s,
        "PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
    );
    s.push_str(spec.extra);
    s
}

/// The first run of `count` consecutive ports in [lo, hi] that `is_free` accepts.
pub(super) fn find_port_block(
    count: u32,
    lo: u16,
    hi: u16,
    is_free: &dyn Fn(u16) -> bool,
) -> Option<u16> {
    let mut base = u32::from(lo);
    while base + count - 1 <= u32::from(hi) {
        match (base..base + count).find(|&p| !is_free(p as u16)) {
            None => return Some(base as u16),
            Some(busy) => base = busy + 1,
        }
    }
    None
}

pub(super) fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// Seconds to wait for K slurmd (or canopy-noded) to register: hundreds of daemons
/// starting at once on two cores take a while.
pub(super) fn idle_wait(k: u32) -> Duration {
    Duration::from_secs(120 + u64::from(k) / 2)
}

/// Where the next Slurm cluster's port search begins (0: this process has started none).
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A private slurmctld and K slurmd, all children of this process.
pub(super) struct SlurmCluster {
    pub(super) dir: PathBuf,
    pub(super) conf: PathBuf,
    pub(super) daemons: Vec<(String, Child)>,
}

impl SlurmCluster {
    pub(super) fn start(ctx: &Ctx, dir: PathBuf, nodes: u32) -> Result<SlurmCluster, PeerError> {
        // Each cluster starts looking past the last one's block: a slurmd killed a
        // moment ago can leave its port unbindable for slurmd (seen at K = 512 right
        // after K = 128: "Unable to bind listen port (24001)"), though our test bind
        // (SO_REUSEADDR) calls it free.
        // The first cluster of this process starts at an offset of its own: two
        // harness processes at once (the smoke tests run side by side) would
        // otherwise both check the same block free and race to bind it.
        let from = match NEXT_PORT.load(Ordering::Relaxed) {
            0 => {
                let span = u32::from(PORT_HI - PORT_LO) / 2;
                let offset = (std::process::id().wrapping_mul(2_654_435_761) >> 8) % span;
                PORT_LO + u16::try_from(offset).unwrap_or(0)
            }
            next => next.clamp(PORT_LO, PORT_HI),
        };
        let base = find_port_block(nodes + 1, from, PORT_HI, &port_is_free)
            .or_else(|| find_port_block(nodes + 1, PORT_LO, PORT_HI, &port_is_free))
            .ok_or(PeerError::NoPorts {
                count: nodes + 1,
                lo: PORT_LO,
                hi: PORT_HI,
            })?;
        let after = u32::from(base) + nodes + 1;
        NEXT_PORT.store(u16::try_from(after).unwrap_or(PORT_LO), Ordering::Relaxed);
        for sub in ["state", "log", "run", "spool"] {
            create_dir(&dir.join(sub))?;
        }
        for i in 1..=nodes {
            create_dir(&dir.join("spool").join(format!("n{i}")))?;
        }
        let conf = dir.join("slurm.conf");
        write_file(
            &conf,
            &slurm_conf(&SlurmSpec {
                dir: &dir,
                hostname: &ctx.hostname,
                ctld_port: base,
                node_base_port: base + 1,
                nodes,
                tree_width: ctx.tree_width,
                leaves: ctx.leaves,
                extra: &ctx.extra_conf,
            }),
        )?;
        // Read from beside slurm.conf.
        if let Some(text) = ctx.leaves.cgroup_conf() {
            write_file(&dir.join("cgroup.conf"), text)?;
        }
        let mut cluster = SlurmCluster {
            dir,
            conf,
            daemons: Vec::new(),
        };
        let conf_s = cluster.conf.display().to_string();
        cluster.spawn("slurmctld", SLURMCTLD, &["-D", "-f", &conf_s])?;
        // slurmd backs off between registration attempts; starting them only once the
        // controller answers keeps start-up times comparable across K.
        cluster.wait_nodes(None, Duration::from_secs(60))?;
        for i in 1..=nodes {
            let name = format!("n{i}");
            cluster.spawn(&name, SLURMD, &["-D", "-f", &conf_s, "-N", &name])?;
        }
        cluster.wait_nodes(Some(nodes), idle_wait(nodes))?;
        Ok(cluster)
    }

    fn spawn(&mut self, name: &str, exe: &str, args: &[&str]) -> Result<(), PeerError> {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().map_err(|source| PeerError::Spawn {
            command: describe(&cmd),
            source,
        })?;
        self.daemons.push((name.to_string(), child));
        Ok(())
    }

    fn log_of(&self, name: &str) -> PathBuf {
        let file = if name == "slurmctld" {
            "slurmctld.log".to_string()
        } else {
            format!("slurmd-{name}.log")
        };
        self.dir.join("log").join(file)
    }

    /// Wait until the controller answers (`want` None) or `want` nodes are idle.
    fn wait_nodes(&mut self, want: Option<u32>, limit: Duration) -> Result<(), PeerError> {
        let deadline = Instant::now() + limit;
        let client = self.client();
        loop {
            self.check_daemons()?;
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
                    what: format!("slurm in {}", self.dir.display()),
                    limit_s: limit.as_secs(),
                    last: format!("{last}; {}", log_tail(&self.log_of("slurmctld"))),
                });
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// A daemon that exited during start-up (a port taken, a bad config) fails fast.
    pub(super) fn check_daemons(&mut self) -> Result<(), PeerError> {
        for i in 0..self.daemons.len() {
            let Some((name, child)) = self.daemons.get_mut(i) else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                let name = name.clone();
                self.daemons.remove(i);
                return Err(PeerError::Died {
                    log: log_tail(&self.log_of(&name)),
                    what: name,
                    status: status.to_string(),
                });
            }
        }
        Ok(())
    }
}

impl Running for SlurmCluster {
    fn client(&self) -> Client {
        Client::Slurm {
            conf: self.conf.clone(),
            dir: self.dir.clone(),
        }
    }

    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError> {
        if !self.daemons.is_empty() {
            // Steps that have just ended still report to their slurmd over the tree;
            // give them a moment before the daemons go.
            wait_until(STOP_GRACE, || our_stepds(&self.conf).is_empty());
        }
        let mut left: Vec<Child> = self.daemons.drain(..).map(|(_, c)| c).collect();
        for child in &left {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while !left.is_empty() && Instant::now() < deadline {
            left.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
            thread::sleep(Duration::from_millis(50));
        }
        for child in &mut left {
            // SIGKILL cannot be ignored, so the wait below ends.
            let _ = child.kill();
            let _ = child.wait();
        }
        // A step whose slurmd is gone retries for minutes; it was started for this
        // run's jobs, so it goes too.
        for pid in our_stepds(&self.conf) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        if !wait_until(STOP_GRACE, || our_stepds(&self.conf).is_empty()) {
            return Err(PeerError::Timeout {
                what: format!("stopping the slurmstepd of {}", self.conf.display()),
                limit_s: STOP_GRACE.as_secs(),
                last: format!("{} still running", our_stepds(&self.conf).len()),
            });
        }
        // A batch script whose step was killed lives on, reparented (a `sleep` of
        // hours); it carries this cluster's SLURM_CONF, so it goes too.
        for pid in our_job_processes(&self.conf) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
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

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}

/// Live slurmstepd processes of the cluster configured by `conf` (slurmd puts
/// SLURM_CONF into their environment).
pub(super) fn our_stepds(conf: &Path) -> Vec<i32> {
    let mut entry = b"SLURM_CONF=".to_vec();
    entry.extend_from_slice(conf.as_os_str().as_bytes());
    pids_named("slurmstepd")
        .into_iter()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| environ_has(&env, &entry))
        })
        .collect()
}

/// Every other live process that carries SLURM_CONF for the cluster configured by
/// `conf`: once its daemons are gone, what is left of its jobs (the client
/// commands, which carry it too, have all returned by then).
pub(super) fn our_job_processes(conf: &Path) -> Vec<i32> {
    let mut entry = b"SLURM_CONF=".to_vec();
    entry.extend_from_slice(conf.as_os_str().as_bytes());
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me && alive(pid, None))
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| environ_has(&env, &entry))
        })
        .collect()
}

/// Whether a NUL-separated environment block holds exactly `entry` (NAME=value).
pub(super) fn environ_has(environ: &[u8], entry: &[u8]) -> bool {
    environ.split(|&b| b == 0).any(|v| v == entry)
}

/// Idle nodes in `sinfo -h -o '%D %t'` output; `idle*` (not responding) does not count.
pub(super) fn idle_nodes(stdout: &str) -> u32 {
    stdout
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let count = f.next()?.parse::<u32>().ok()?;
            (f.next()? == "idle").then_some(count)
        })
        .sum()
}

// --------------------------------------------------------------- canopy setup
