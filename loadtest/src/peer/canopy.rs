//! The canopy side: `canopy cluster up` with K node daemons in their own directory,
//! reading back the configuration it wrote, and `canopy cluster down` with a wait until
//! every recorded process is gone.
//!
//! `cluster up` writes a slurm.conf without ProctrackType or TaskPlugin (canopy's
//! defaults then apply); to state the peer's choice on canopy's side too, the cluster is
//! stopped once it is up, the lines (and cgroup.conf) added to the config it wrote, and
//! the same daemons started again with the same arguments, logs and pid files. `up`
//! has no option for extra lines, and this keeps its ports, key and links.
//!
//! Does not: measure anything (`measure` does).

use super::*;

/// A canopy cluster started by `canopy cluster up` in its own directory.
pub(super) struct CanopyCluster {
    exe: PathBuf,
    dir: PathBuf,
    conf: PathBuf,
    pids: Vec<i32>,
    /// Daemons this process started itself (after the restart), reaped at stop.
    children: Vec<(String, Child)>,
    stopped: bool,
}

impl CanopyCluster {
    pub(super) fn start(ctx: &Ctx, dir: PathBuf, nodes: u32) -> Result<CanopyCluster, PeerError> {
        create_dir(&dir)?;
        // The guard exists before `up` runs: if `up` fails half way, Drop still stops
        // whatever it had started.
        let mut cluster = CanopyCluster {
            exe: ctx.canopy_exe.clone(),
            dir,
            conf: PathBuf::new(),
            pids: Vec::new(),
            children: Vec::new(),
            stopped: false,
        };
        let wait = idle_wait(nodes);
        let mut cmd = Command::new(&cluster.exe);
        strip_cluster_env(&mut cmd);
        cmd.arg("cluster")
            .arg("up")
            .args(["--nodes", &nodes.to_string()])
            .args(["--tree-width", &ctx.tree_width.to_string()])
            .arg("--dir")
            .arg(&cluster.dir)
            .args(["--slurmd-timeout", "300", "--cpus", "2", "--mem", "1000"])
            .args(["--wait", &wait.as_secs().to_string()])
            .stdin(Stdio::null());
        let out = run_ok(&mut cmd, wait + Duration::from_secs(60));
        cluster.pids = recorded_pids(&cluster.dir);
        let out = out?;
        cluster.conf = canopy_conf_from(&describe(&cmd), &String::from_utf8_lossy(&out.stdout))?;
        cluster.restart_with(ctx.leaves, nodes, wait)?;
        Ok(cluster)
    }

    /// Stop the daemons `up` started, add `leaves`' lines to the config, start them
    /// again as `up` does, and wait until all `nodes` are idle.
    fn restart_with(
        &mut self,
        leaves: Leaves,
        nodes: u32,
        wait: Duration,
    ) -> Result<(), PeerError> {
        let mut old = recorded_pids(&self.dir);
        old.extend(self.pids.iter().copied());
        self.stop(false)?;
        self.stopped = false;
        self.pids.clear();
        // `stop` stops looking once a command line no longer says "canopy", which it
        // stops saying before an exiting process has closed its files: the controller
        // may still hold its state store's lock. Wait until each is really gone.
        if !wait_until(STOP_GRACE, || !old.iter().any(|&p| alive(p, None))) {
            return Err(PeerError::Timeout {
                what: format!("restarting canopy in {}", self.dir.display()),
                limit_s: STOP_GRACE.as_secs(),
                last: "the first daemons are still exiting".into(),
            });
        }
        let mut text = fs::read_to_string(&self.conf).map_err(|source| PeerError::Io {
            action: "read",
            path: self.conf.clone(),
            source,
        })?;
        text.push_str(leaves.slurm_conf_lines());
        write_file(&self.conf, &text)?;
        if let Some(cg) = leaves.cgroup_conf() {
            write_file(&self.dir.join("cgroup.conf"), cg)?;
        }
        let bin = self.exe.parent().unwrap_or(Path::new(".")).to_path_buf();
        let conf = self.conf.display().to_string();
        let mut daemons = vec![
            (
                "authd".to_string(),
                "canopy-authd",
                vec!["-f".to_string(), conf.clone()],
            ),
            (
                "ctld".to_string(),
                "canopy-ctld",
                vec!["-f".to_string(), conf.clone()],
            ),
        ];
        for i in 1..=nodes {
            let name = format!("n{i}");
            let args = vec![
                "-f".to_string(),
                conf.clone(),
                "-N".to_string(),
                name.clone(),
            ];
            daemons.push((name, "canopy-noded", args));
        }
        for (name, exe, args) in daemons {
            let child = spawn_logged(&bin.join(exe), &args, &self.dir, &name)?;
            self.pids.push(child.id() as i32);
            self.children.push((name, child));
        }
        self.wait_idle(nodes, wait)
    }

    /// Poll `sinfo` until `nodes` nodes are idle; a daemon that exits fails it at once.
    fn wait_idle(&mut self, nodes: u32, limit: Duration) -> Result<(), PeerError> {
        let deadline = Instant::now() + limit;
        let client = self.client();
        loop {
            for (name, child) in &mut self.children {
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
                    if idle == nodes {
                        // Nodes whose parent was not up yet attach to the controller and
                        // move to their own parent a second later; a launch sent during
                        // the move fails with "link to rank N was lost". Let the tree settle.
                        thread::sleep(settle(nodes));
                        return Ok(());
                    }
                    format!("{idle} of {nodes} nodes idle")
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

/// How long a freshly started tree of `nodes` gets to settle once every node is idle.
pub(super) fn settle(nodes: u32) -> Duration {
    Duration::from_millis(2000 + 1000 * u64::from(nodes) / 128)
}

/// Start a daemon detached in its own process group, its output in DIR/log/NAME.log and
/// its pid in DIR/pids/NAME.pid, as `canopy cluster up` does (so `down` stops it).
fn spawn_logged(exe: &Path, args: &[String], dir: &Path, name: &str) -> Result<Child, PeerError> {
    let log_path = dir.join("log").join(format!("{name}.log"));
    let log = fs::File::create(&log_path).map_err(|source| PeerError::Io {
        action: "create",
        path: log_path.clone(),
        source,
    })?;
    let err = log.try_clone().map_err(|source| PeerError::Io {
        action: "duplicate",
        path: log_path,
        source,
    })?;
    let mut cmd = Command::new(exe);
    strip_cluster_env(&mut cmd);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0);
    let child = cmd.spawn().map_err(|source| PeerError::Spawn {
        command: describe(&cmd),
        source,
    })?;
    write_file(
        &dir.join("pids").join(format!("{name}.pid")),
        &child.id().to_string(),
    )?;
    Ok(child)
}

impl Running for CanopyCluster {
    fn client(&self) -> Client {
        Client::Canopy {
            exe: self.exe.clone(),
            conf: self.conf.clone(),
            dir: self.dir.clone(),
        }
    }

    fn stop(&mut self, remove_dir: bool) -> Result<(), PeerError> {
        if self.stopped {
            return Ok(());
        }
        // `down` deletes the pid files, so collect them first.
        let mut pids = recorded_pids(&self.dir);
        pids.extend(self.pids.iter().copied());
        pids.sort_unstable();
        pids.dedup();
        let mut cmd = Command::new(&self.exe);
        cmd.arg("cluster")
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null());
        let down = run_ok(&mut cmd, Duration::from_secs(60));
        if !wait_gone(&pids, STOP_GRACE) {
            for &pid in pids.iter().filter(|&&p| alive(p, Some("canopy"))) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            if !wait_gone(&pids, Duration::from_secs(10)) {
                return Err(PeerError::Timeout {
                    what: format!("stopping canopy in {}", self.dir.display()),
                    limit_s: STOP_GRACE.as_secs() + 10,
                    last: match down {
                        Ok(_) => "processes survived SIGKILL".into(),
                        Err(e) => e.to_string(),
                    },
                });
            }
        }
        self.stopped = true;
        // They are gone; collect their exit statuses so no zombies pile up.
        for (_, mut child) in self.children.drain(..) {
            let _ = child.try_wait();
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

impl Drop for CanopyCluster {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}

/// Pids in DIR/pids/*.pid, as `canopy cluster up` records them.
pub(super) fn recorded_pids(dir: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(dir.join("pids")) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| fs::read_to_string(e.ok()?.path()).ok()?.trim().parse().ok())
        .collect()
}

/// Whether every canopy process in `pids` is gone within `limit`.
pub(super) fn wait_gone(pids: &[i32], limit: Duration) -> bool {
    wait_until(limit, || !pids.iter().any(|&p| alive(p, Some("canopy"))))
}

/// The CANOPY_CONF path from `canopy cluster up`'s `export CANOPY_CONF=... PATH=...` line.
pub(super) fn parse_canopy_conf(stdout: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .flat_map(str::split_whitespace)
        .find_map(|word| word.strip_prefix("CANOPY_CONF="))
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

pub(super) fn canopy_conf_from(command: &str, stdout: &str) -> Result<PathBuf, PeerError> {
    parse_canopy_conf(stdout).ok_or_else(|| PeerError::Parse {
        command: command.to_string(),
        output: stdout.to_string(),
    })
}
