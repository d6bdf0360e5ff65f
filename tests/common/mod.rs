//! Test harness: a real canopy cluster (controller + node daemons as separate
//! processes) on 127.0.0.1 with ephemeral ports in a temp dir, plus helpers to
//! run CLI commands against it and query the controller over the wire.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use canopy::cli::client::Client;
use canopy::wire::messages::{Body, JobQuery, NodeQuery};
use canopy::wire::types::{JobInfo, NodeInfo};

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
    pub nodes: u32,
    pub ctld: Option<Child>,
    pub noded: HashMap<String, Child>,
    /// The local signer every command of the test gets credentials from.
    pub authd: Option<Child>,
    rt: tokio::runtime::Runtime,
}

/// `n` free loopback ports, all different: every listener is held until the
/// last is bound, or the kernel may hand the same port out twice.
fn ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

pub fn bin(name: &str) -> PathBuf {
    // Cargo builds every binary of the package for integration tests.
    let me = std::env::current_exe().unwrap();
    me.parent().unwrap().parent().unwrap().join(name)
}

impl Cluster {
    /// Write a config for `nodes` nodes with the given TreeWidth and SlurmdTimeout,
    /// start every daemon and wait until all nodes are IDLE.
    pub fn start(nodes: u32, tree_width: u32, slurmd_timeout: u32) -> Cluster {
        Self::start_with(nodes, tree_width, slurmd_timeout, "")
    }

    /// As `start`, with extra global slurm.conf lines (later keys win).
    pub fn start_with(nodes: u32, tree_width: u32, slurmd_timeout: u32, extra: &str) -> Cluster {
        Self::start_with_nodes(nodes, tree_width, slurmd_timeout, extra, &[])
    }

    /// As `start_with`, with `node_extra[i]` appended to node n{i+1}'s line
    /// (`Features=a,b`, ...).
    pub fn start_with_nodes(
        nodes: u32,
        tree_width: u32,
        slurmd_timeout: u32,
        extra: &str,
        node_extra: &[&str],
    ) -> Cluster {
        Self::start_with_files(nodes, tree_width, slurmd_timeout, extra, node_extra, &[])
    }

    /// As `start_with_nodes`, with `files` (name, text) written beside
    /// slurm.conf first (`gres.conf`, `cgroup.conf`); `{dir}` in their text
    /// is the cluster's directory.
    pub fn start_with_files(
        nodes: u32,
        tree_width: u32,
        slurmd_timeout: u32,
        extra: &str,
        node_extra: &[&str],
        files: &[(&str, &str)],
    ) -> Cluster {
        let mut c =
            Self::configure_with_files(nodes, tree_width, slurmd_timeout, extra, node_extra, files);
        c.start_authd();
        c.start_ctld();
        for i in 1..=nodes {
            c.start_node(&format!("n{i}"));
        }
        c.wait_for(Duration::from_secs(60), "all nodes IDLE", |c| {
            c.nodes_info()
                .iter()
                .filter(|n| n.scontrol_state() == "IDLE")
                .count()
                == nodes as usize
        });
        c.wait_for(
            Duration::from_secs(30),
            "every node on its natural parent",
            |c| {
                c.nodes_info()
                    .iter()
                    .all(|n| n.attached_to == c.natural_parent(&n.name))
            },
        );
        c
    }

    /// As `start_with_nodes`, but only writes the config and directories:
    /// the test starts the daemons it wants, as it wants them.
    pub fn configure(
        nodes: u32,
        tree_width: u32,
        slurmd_timeout: u32,
        extra: &str,
        node_extra: &[&str],
    ) -> Cluster {
        Self::configure_with_files(nodes, tree_width, slurmd_timeout, extra, node_extra, &[])
    }

    /// As `configure`, with `files` written beside slurm.conf.
    pub fn configure_with_files(
        nodes: u32,
        tree_width: u32,
        slurmd_timeout: u32,
        extra: &str,
        node_extra: &[&str],
        files: &[(&str, &str)],
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let text = text.replace("{dir}", &dir.path().display().to_string());
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let conf = dir.path().join("slurm.conf");
        let ports = ports(nodes as usize + 1);
        let mut text = format!(
            "ClusterName=test\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={}\n\
             SlurmdTimeout={slurmd_timeout}\nTreeWidth={tree_width}\nStateSaveLocation={}/state\n\
             SlurmdSpoolDir={}/spool/%n\nReturnToService=1\nKillWait=2\nMinJobAge=600\n\
             AuthInfo=socket={}/authd.sock\nNodeName=DEFAULT CPUs=2 RealMemory=1000\n",
            ports[0],
            dir.path().display(),
            dir.path().display(),
            dir.path().display()
        );
        // The nodes are all this machine, which may have fewer CPUs than a
        // test configures: no registration check, unless the test sets
        // SlurmdParameters itself (an empty value leaves it out).
        if !extra.contains("SlurmdParameters") {
            text.push_str("SlurmdParameters=config_overrides\n");
        }
        text.push_str(extra);
        for i in 1..=nodes {
            let more = node_extra.get(i as usize - 1).copied().unwrap_or("");
            text.push_str(&format!(
                "NodeName=n{i} NodeAddr=127.0.0.1 Port={} {more}\n",
                ports[i as usize]
            ));
        }
        text.push_str("PartitionName=debug Nodes=ALL Default=YES MaxTime=60 State=UP\n");
        let short = if nodes >= 2 { "n[1-2]" } else { "n1" };
        // A file with no node lines (dynamic nodes only) has no `short`.
        if nodes > 0 {
            text.push_str(&format!(
                "PartitionName=short Nodes={short} MaxTime=5 MaxNodes=2 State=UP\n"
            ));
        }
        std::fs::write(&conf, text).unwrap();
        canopy::wire::auth::generate_key_file(&dir.path().join("slurm.key")).unwrap();
        // Like `canopy cluster up`: the Slurm command names, linked to canopy,
        // first on PATH (so `srun` inside a batch script is canopy's).
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        for cmd in canopy::cli::SLURM_COMMANDS {
            std::os::unix::fs::symlink(bin("canopy"), dir.path().join("bin").join(cmd)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("log")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Cluster {
            dir,
            conf,
            nodes,
            ctld: None,
            noded: HashMap::new(),
            authd: None,
            rt,
        }
    }

    /// The node `name` hangs under in the relay tree's arithmetic (`None` = controller).
    pub fn natural_parent(&self, name: &str) -> Option<String> {
        let conf = canopy::config::Config::load(&self.conf).unwrap();
        let topo = canopy::tree::topology::Topology::new(self.nodes, conf.tree_width).unwrap();
        let rank = conf.node_index(name).unwrap() as u32;
        topo.parent(rank)
            .map(|p| conf.nodes[p as usize].name.clone())
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("log").join(format!("{name}.log")))
            .unwrap()
    }

    /// Start daemon `exe` with this cluster's config and `args`, logging
    /// to `log/<log>.log`.
    fn spawn_daemon(&self, exe: &str, args: &[&str], log: &str) -> Child {
        self.spawn_daemon_env(exe, args, log, &[])
    }

    /// As `spawn_daemon`, with extra environment variables.
    fn spawn_daemon_env(&self, exe: &str, args: &[&str], log: &str, env: &[(&str, &str)]) -> Child {
        Command::new(bin(exe))
            .args(["-f", self.conf.to_str().unwrap()])
            .args(args)
            .env("CANOPY_LOG", "debug,sled=info")
            .envs(env.iter().copied())
            .stdout(self.log(log))
            .stderr(self.log(log))
            .spawn()
            .unwrap()
    }

    /// Start the local signer and wait until its socket answers.
    pub fn start_authd(&mut self) {
        self.authd = Some(self.spawn_daemon("canopy-authd", &[], "authd"));
        let socket = self.dir.path().join("authd.sock");
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "canopy-authd did not start: {}",
                self.log_text("authd")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn start_ctld(&mut self) {
        self.ctld = Some(self.spawn_daemon("canopy-ctld", &[], "ctld"));
    }

    pub fn start_node(&mut self, name: &str) {
        self.start_node_env(name, &[]);
    }

    /// Start a node daemon with extra environment variables
    /// (`CANOPY_TOPOLOGY` to give it other hardware).
    pub fn start_node_env(&mut self, name: &str, env: &[(&str, &str)]) {
        let child = self.spawn_daemon_env("canopy-noded", &["-N", name], name, env);
        self.noded.insert(name.to_string(), child);
    }

    /// Start a node daemon for `name` with extra arguments (`-Z --conf ...`).
    pub fn start_node_args(&mut self, name: &str, args: &[&str]) {
        let mut all = vec!["-N", name];
        all.extend_from_slice(args);
        let child = self.spawn_daemon("canopy-noded", &all, name);
        self.noded.insert(name.to_string(), child);
    }

    /// SIGKILL the controller.
    pub fn kill_ctld(&mut self) {
        if let Some(mut c) = self.ctld.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGKILL one node daemon.
    pub fn kill_node(&mut self, name: &str) {
        let mut c = self.noded.remove(name).unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// SIGTERM the controller and wait up to `limit` for it to exit: its
    /// exit status, or `None` if it was still running (then it is killed).
    pub fn terminate_ctld(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.ctld.take()?;
        terminate(&mut c, limit)
    }

    /// Wait for a controller the test already signalled to exit by itself.
    pub fn wait_ctld_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.ctld.take()?;
        wait_exit(&mut c, limit)
    }

    /// As `terminate_ctld`, for one node daemon.
    pub fn terminate_node(
        &mut self,
        name: &str,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        let mut c = self.noded.remove(name)?;
        terminate(&mut c, limit)
    }

    /// The text of a daemon's log (`ctld`, `n1`, ...).
    pub fn log_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("log").join(format!("{name}.log")))
            .unwrap_or_default()
    }

    /// Run a canopy CLI command (`sbatch`, `squeue`, ... or `status`) in `cwd`.
    pub fn cli(&self, cwd: &Path, cmd: &str, args: &[&str]) -> Output {
        self.command(cwd, cmd, args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// A canopy CLI command aimed at this cluster, not yet started.
    fn command(&self, cwd: &Path, cmd: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin("canopy"));
        c.arg(cmd)
            .args(args)
            .current_dir(cwd)
            .env("CANOPY_CONF", &self.conf)
            .env("PATH", self.path_env())
            // The caller's own layout preferences must not change what is compared.
            .env_remove("SQUEUE_FORMAT")
            .env_remove("SQUEUE_FORMAT2")
            .env_remove("SQUEUE_SORT")
            .env_remove("SINFO_FORMAT")
            .env_remove("SINFO_SORT");
        c
    }

    /// A CLI command with piped stdin, stdout and stderr, left running.
    #[allow(dead_code)] // not every test binary uses every helper
    pub fn spawn_cli(&self, cwd: &Path, cmd: &str, args: &[&str]) -> Child {
        self.command(cwd, cmd, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// A CLI command fed `input` on its stdin; its output once it exits.
    #[allow(dead_code)]
    pub fn cli_with_input(&self, cwd: &Path, cmd: &str, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self.spawn_cli(cwd, cmd, args);
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// PATH with this cluster's command links first.
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `sbatch --parsable` a script file; returns the job id.
    pub fn sbatch(&self, cwd: &Path, args: &[&str]) -> u32 {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        let out = self.cli(cwd, "sbatch", &all);
        assert!(
            out.status.success(),
            "sbatch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    pub fn call(&self, body: Body) -> Body {
        self.rt.block_on(async {
            let mut c = Client::connect(Some(&self.conf)).await.unwrap();
            c.call(body).await.unwrap()
        })
    }

    pub fn try_call(&self, body: Body) -> Option<Body> {
        self.rt.block_on(async {
            let mut c = Client::connect(Some(&self.conf)).await.ok()?;
            c.call(body).await.ok()
        })
    }

    pub fn nodes_info(&self) -> Vec<NodeInfo> {
        match self.try_call(Body::QueryNodes(NodeQuery::default())) {
            Some(Body::Nodes(n)) => n,
            _ => Vec::new(),
        }
    }

    pub fn node(&self, name: &str) -> NodeInfo {
        self.nodes_info()
            .into_iter()
            .find(|n| n.name == name)
            .unwrap()
    }

    pub fn job(&self, id: u32) -> Option<JobInfo> {
        match self.try_call(Body::QueryJobs(JobQuery {
            job_ids: vec![id],
            include_finished: true,
            brief: false,
        })) {
            Some(Body::Jobs(j)) => j.into_rows().into_iter().next(),
            _ => None,
        }
    }

    /// Poll `cond` every 100 ms; panic with `what` and the controller log's tail on timeout.
    pub fn wait_for(&self, limit: Duration, what: &str, mut cond: impl FnMut(&Cluster) -> bool) {
        let t = Instant::now();
        while t.elapsed() < limit {
            if cond(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let ctld =
            std::fs::read_to_string(self.dir.path().join("log/ctld.log")).unwrap_or_default();
        let tail: Vec<&str> = ctld.lines().rev().take(40).collect();
        // A daemon that refused to start says why in its log's first lines.
        let mut refused = String::new();
        for i in 1..=self.nodes {
            let log = std::fs::read_to_string(self.dir.path().join(format!("log/n{i}.log")))
                .unwrap_or_default();
            if log.starts_with("Error:") {
                let head: Vec<&str> = log.lines().take(4).collect();
                refused.push_str(&format!("n{i} log:\n{}\n", head.join("\n")));
            }
        }
        panic!(
            "timed out after {limit:?} waiting for {what}\n{refused}ctld log tail:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    /// Wait until job `id` reaches a finished state and return it.
    pub fn wait_done(&self, id: u32, limit: Duration) -> JobInfo {
        self.wait_for(limit, &format!("job {id} to finish"), |c| {
            c.job(id).is_some_and(|j| j.state.is_finished())
        });
        self.job(id).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        keep_logs(self);
        for (_, mut c) in self.noded.drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut c) = self.ctld.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut c) = self.authd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run `canopy CMD ARGS` as `uid`/`gid` in `home`, with configuration
/// `conf` and the cluster's command links first on PATH.
pub fn run_as(
    c: &Cluster,
    (uid, gid): (u32, u32),
    home: &Path,
    conf: &Path,
    cmd: &str,
    args: &[&str],
) -> Output {
    use std::os::unix::process::CommandExt;
    Command::new(bin("canopy"))
        .arg(cmd)
        .args(args)
        .current_dir(home)
        .env("CANOPY_CONF", conf)
        .env("PATH", c.path_env())
        .uid(uid)
        .gid(gid)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
/// The uid of user `name`, made (without a home) if missing: tests that act as ordinary
/// users make real ones.
pub fn user(name: &str) -> u32 {
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        // Another test binary may be adding it at the same moment.
        let _ = Command::new("useradd")
            .args(["-M", "-N", "-s", "/bin/sh", name])
            .status();
    }
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("cannot create user {name}"))
        .uid
        .as_raw()
}

/// The primary group of `uid` (its own number if it has no passwd entry).
pub fn gid_of(uid: u32) -> u32 {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or(uid, |u| u.gid.as_raw())
}

/// A directory `uid` owns, to work in.
pub fn home_for(uid: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    nix::unistd::chown(
        d.path(),
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid_of(uid))),
    )
    .unwrap();
    d
}

/// Run `canopy CMD ARGS` as `uid` (with its primary group) in `home`.
pub fn as_user(c: &Cluster, uid: u32, home: &Path, cmd: &str, args: &[&str]) -> Output {
    run_as(c, (uid, gid_of(uid)), home, &c.conf, cmd, args)
}

/// SIGTERM `child` and wait up to `limit` for it to exit: its exit status,
/// or `None` if it did not (it is then killed, so no daemon outlives a test).
pub fn terminate(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    wait_exit(child, limit)
}

/// Wait up to `limit` for `child` to exit on its own; past it, kill it and
/// return `None`. Sends no signal first: for a test that signalled the
/// daemon itself (a second SIGTERM means "exit at once", status 1).
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

pub fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// True if a process with this pid exists and has not died: a zombie (dead,
/// waiting for its new parent to reap it) does not count.
pub fn alive(pid: i32) -> bool {
    let exists = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    exists && !zombie
}

/// Keep the cluster's logs when CANOPY_KEEP_LOGS is set (for debugging a failure).
pub fn keep_logs(c: &Cluster) {
    if let Ok(dest) = std::env::var("CANOPY_KEEP_LOGS") {
        // One folder per cluster: tests run side by side.
        let name = c.dir.path().file_name().unwrap_or_default();
        let dest = Path::new(&dest).join(name);
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(c.dir.path().join("log"))
            .arg(&dest)
            .status();
    }
}

/// Whether CI is running these tests (`CI` set and non-empty, as `.ci/run` and
/// hosted CI services set it): there every prerequisite must be present.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Like [`require`], for material that lives outside this repository (the
/// shared client smoke scripts, `../shared/smoke` or `CANOPY_SMOKE_DIR`):
/// no install step can fetch it, so a checkout without it skips the test
/// with a `SKIPPED:` line even under CI, instead of failing every CI run
/// of such a checkout.
#[track_caller]
pub fn outside_material(present: bool, what: &str) -> bool {
    if !present {
        let here = std::panic::Location::caller();
        let test = std::thread::current()
            .name()
            .filter(|n| *n != "main")
            .map_or_else(
                || format!("{}:{}", here.file(), here.line()),
                str::to_string,
            );
        eprintln!("SKIPPED: {test}: {what} is missing (outside this repository)");
    }
    present
}

/// A test's prerequisite `what` (e.g. "python3 with submitit"): true if
/// `present`. If not, under CI the test fails naming it, since a test that
/// skips there proves nothing; elsewhere it prints `SKIPPED: <test>: <why>` on
/// stderr and returns false, and the caller returns.
#[track_caller]
pub fn require(present: bool, what: &str) -> bool {
    if present {
        return true;
    }
    // libtest names each test's thread after the test; where it does not (one
    // test thread may run on `main`), the caller's location names it instead.
    let here = std::panic::Location::caller();
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map_or_else(
            || format!("{}:{}", here.file(), here.line()),
            str::to_string,
        );
    assert!(!in_ci(), "{test}: missing prerequisite under CI: {what}");
    eprintln!("SKIPPED: {test}: {what} is missing");
    false
}
