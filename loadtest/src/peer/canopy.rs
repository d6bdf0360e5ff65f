//! The canopy side: `canopy cluster up` with K node daemons in their own directory,
//! reading back the configuration it wrote, and `canopy cluster down` with a wait until
//! every recorded process is gone.
//!
//! Does not: measure anything (`measure` does).

use super::*;

/// A canopy cluster started by `canopy cluster up` in its own directory.
pub(super) struct CanopyCluster {
    exe: PathBuf,
    dir: PathBuf,
    conf: PathBuf,
    pids: Vec<i32>,
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
        Ok(cluster)
    }
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
