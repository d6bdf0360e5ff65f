//! `canopy cluster up|down`: a whole cluster on loopback in one command.
//!
//! `up` writes a slurm.conf and a cluster key (readable by its owner only)
//! into DIR, starts the local signer, the controller and N node daemons
//! (detached, logs under DIR/log, pids under DIR/pids), makes DIR/bin with
//! `sbatch`/`squeue`/... links to this binary, and waits until every node
//! is IDLE. Commands get their credentials from the signer's socket
//! (DIR/authd.sock), so other users can use a cluster root started without
//! holding its key. `down` stops exactly the processes whose pid files are
//! in DIR.
//!
//! DIR and its subdirectories must be ours and writable by nobody else
//! (another user could otherwise plant a key, or a symlink in `log/` that
//! our logs would overwrite): `up` refuses anything else, and creates its
//! files without following symlinks.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::client::Client;
use crate::wire::messages::{Body, NodeQuery};
use crate::wire::types::NodeBaseState;

#[derive(Parser, Debug)]
#[command(name = "canopy cluster", about = "a local canopy cluster on loopback")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write a config for N nodes, start the controller and N node daemons, wait until IDLE.
    Up {
        #[arg(long, default_value_t = 8)]
        nodes: u32,
        /// Relay fan-out; small enough by default that relays are really used.
        #[arg(long = "tree-width", default_value_t = 3)]
        tree_width: u32,
        #[arg(long)]
        dir: Option<PathBuf>,
        /// CPUs each node offers (default: this machine's).
        #[arg(long)]
        cpus: Option<u32>,
        /// Memory each node offers, MiB.
        #[arg(long = "mem", default_value_t = 4096)]
        mem_mb: u64,
        /// Seconds of silence before a node is marked DOWN.
        #[arg(long = "slurmd-timeout", default_value_t = 30)]
        slurmd_timeout: u32,
        /// Seconds to wait for every node to be IDLE.
        #[arg(long = "wait", default_value_t = 60)]
        wait_s: u64,
    },
    /// Stop the processes started by `up` in DIR.
    Down {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn default_dir() -> PathBuf {
    let user = std::env::var("USER").unwrap_or_else(|_| nix::unistd::getuid().to_string());
    std::env::temp_dir().join(format!("canopy-{user}"))
}

pub fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("canopy cluster".to_string()).chain(args.iter().cloned());
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let r = match a.cmd {
        Cmd::Up {
            nodes,
            tree_width,
            dir,
            cpus,
            mem_mb,
            slurmd_timeout,
            wait_s,
        } => {
            let spec = Spec {
                nodes,
                tree_width,
                dir: dir.unwrap_or_else(default_dir),
                cpus: cpus.unwrap_or_else(|| {
                    std::thread::available_parallelism()
                        .map(|n| n.get() as u32)
                        .unwrap_or(1)
                }),
                mem_mb,
                slurmd_timeout,
            };
            up(&spec, Duration::from_secs(wait_s))
        }
        Cmd::Down { dir } => down(&dir.unwrap_or_else(default_dir)),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("canopy cluster: error: {e}");
            1
        }
    }
}

/// What `up` builds.
#[derive(Debug, Clone)]
pub struct Spec {
    pub nodes: u32,
    pub tree_width: u32,
    pub dir: PathBuf,
    pub cpus: u32,
    pub mem_mb: u64,
    pub slurmd_timeout: u32,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The slurm.conf for a loopback cluster described by `spec`.
pub fn render_config(spec: &Spec, ctld_port: u16, node_ports: &[u16]) -> String {
    let dir = spec.dir.display();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Written by `canopy cluster up`: a local cluster on loopback."
    );
    let _ = writeln!(s, "ClusterName=canopy");
    let _ = writeln!(s, "SlurmctldHost=localhost(127.0.0.1)");
    let _ = writeln!(s, "SlurmctldPort={ctld_port}");
    let _ = writeln!(s, "SlurmdTimeout={}", spec.slurmd_timeout);
    let _ = writeln!(s, "TreeWidth={}", spec.tree_width);
    let _ = writeln!(s, "StateSaveLocation={dir}/state");
    let _ = writeln!(s, "SlurmdSpoolDir={dir}/spool/%n");
    let _ = writeln!(s, "ReturnToService=1");
    let _ = writeln!(s, "KillWait=5");
    let _ = writeln!(s, "MinJobAge=300");
    let _ = writeln!(s, "AuthInfo=socket={dir}/authd.sock");
    // Every node of a local cluster is this one machine, whatever --cpus
    // and --mem say: the nodes are taken to have what is configured.
    let _ = writeln!(s, "SlurmdParameters=config_overrides");
    let _ = writeln!(
        s,
        "NodeName=DEFAULT CPUs={} RealMemory={} State=UNKNOWN",
        spec.cpus, spec.mem_mb
    );
    for (i, port) in node_ports.iter().enumerate() {
        let _ = writeln!(s, "NodeName=n{} NodeAddr=127.0.0.1 Port={port}", i + 1);
    }
    let _ = writeln!(
        s,
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    );
    s
}

fn pid_alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
        && fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .map(|c| c.contains("canopy"))
            .unwrap_or(false)
}

fn running_pids(dir: &Path) -> Vec<(PathBuf, i32)> {
    let Ok(rd) = fs::read_dir(dir.join("pids")) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid = fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
            Some((e.path(), pid))
        })
        .collect()
}

/// Make sure `dir` is a directory we own that nobody else may write,
/// creating it (mode 0755) if missing. A symlink, another user's directory
/// or a group/world-writable one is refused.
pub fn secure_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    let refuse = |why: String| {
        Err(format!(
            "refusing to use {}: {why}; remove it or choose another --dir",
            dir.display()
        ))
    };
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return refuse("it is not a plain directory".into());
    }
    if meta.uid() != me {
        return refuse(format!(
            "it belongs to uid {}, not to you (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "others may write into it (mode {:04o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Create (or truncate) `path` for writing without following a symlink
/// planted there.
fn create_nofollow(path: &Path, mode: u32) -> Result<fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

fn spawn_daemon(exe: &Path, args: &[&str], dir: &Path, name: &str) -> Result<(), String> {
    let log = dir.join("log").join(format!("{name}.log"));
    let out = create_nofollow(&log, 0o644)?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let pidfile = dir.join("pids").join(format!("{name}.pid"));
    create_nofollow(&pidfile, 0o644)?
        .write_all(child.id().to_string().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", pidfile.display()))?;
    Ok(())
}

fn sibling(name: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let p = me.with_file_name(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(format!("{} not found next to {}", name, me.display()))
    }
}

/// Start the cluster and wait until every node is IDLE.
pub fn up(spec: &Spec, wait: Duration) -> Result<(), String> {
    if spec.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    if spec.tree_width < 2 {
        return Err("--tree-width must be at least 2".into());
    }
    let dir = &spec.dir;
    if running_pids(dir).iter().any(|(_, p)| pid_alive(*p)) {
        return Err(format!(
            "a cluster is already running in {0}; run `canopy cluster down --dir {0}` first",
            dir.display()
        ));
    }
    secure_dir(dir)?;
    for sub in ["log", "pids", "bin", "state", "spool"] {
        secure_dir(&dir.join(sub))?;
    }
    for (p, _) in running_pids(dir) {
        let _ = fs::remove_file(p);
    }
    let ctld_port = free_port().map_err(|e| e.to_string())?;
    let mut ports = Vec::with_capacity(spec.nodes as usize);
    while ports.len() < spec.nodes as usize {
        let p = free_port().map_err(|e| e.to_string())?;
        if p != ctld_port && !ports.contains(&p) {
            ports.push(p);
        }
    }
    let conf_path = dir.join("slurm.conf");
    create_nofollow(&conf_path, 0o644)?
        .write_all(render_config(spec, ctld_port, &ports).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", conf_path.display()))?;
    let key = dir.join("slurm.key");
    if fs::symlink_metadata(&key).is_err() {
        crate::wire::auth::generate_key_file(&key).map_err(|e| e.to_string())?;
    }
    // An existing key must be ours and private (load_key checks the mode).
    crate::wire::auth::load_key(&key).map_err(|e| e.to_string())?;
    let canopy = std::env::current_exe().map_err(|e| e.to_string())?;
    for cmd in crate::cli::SLURM_COMMANDS.iter().copied().chain(["canopy"]) {
        let link = dir.join("bin").join(cmd);
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&canopy, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    let conf_s = conf_path.display().to_string();
    spawn_daemon(&sibling("canopy-authd")?, &["-f", &conf_s], dir, "authd")?;
    spawn_daemon(&sibling("canopy-ctld")?, &["-f", &conf_s], dir, "ctld")?;
    let noded = sibling("canopy-noded")?;
    for i in 1..=spec.nodes {
        let name = format!("n{i}");
        spawn_daemon(&noded, &["-f", &conf_s, "-N", &name], dir, &name)?;
    }
    wait_idle(&conf_path, spec.nodes as usize, wait)?;
    println!(
        "export CANOPY_CONF={} PATH={}:$PATH",
        conf_path.display(),
        dir.join("bin").display()
    );
    Ok(())
}

fn wait_idle(conf: &Path, n: usize, wait: Duration) -> Result<(), String> {
    let deadline = Instant::now() + wait;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut last = String::from("controller not reachable yet");
    while Instant::now() < deadline {
        let r = rt.block_on(async {
            let mut c = Client::connect(Some(conf)).await?;
            c.call(Body::QueryNodes(NodeQuery::default())).await
        });
        match r {
            Ok(Body::Nodes(nodes)) => {
                let idle = nodes
                    .iter()
                    .filter(|n| n.base == NodeBaseState::Idle && !n.not_responding)
                    .count();
                if idle == n {
                    return Ok(());
                }
                last = format!("{idle} of {n} nodes IDLE");
            }
            Ok(_) => {}
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "cluster not ready after {:?} ({last}); see logs in {}",
        wait,
        conf.parent()
            .unwrap_or(Path::new("."))
            .join("log")
            .display()
    ))
}

/// Stop every daemon recorded in DIR/pids: SIGTERM, then SIGKILL after 5 s.
pub fn down(dir: &Path) -> Result<(), String> {
    let pids = running_pids(dir);
    if pids.is_empty() {
        return Err(format!(
            "no cluster processes recorded in {}",
            dir.display()
        ));
    }
    for (_, pid) in &pids {
        if pid_alive(*pid) {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && pids.iter().any(|(_, p)| pid_alive(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (file, pid) in &pids {
        if pid_alive(*pid) {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let _ = fs::remove_file(file);
    }
    println!(
        "stopped {} canopy processes in {}",
        pids.len(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Every node of a local cluster is this machine: whatever `--cpus` says,
    /// the written config takes the nodes to have it.
    #[test]
    fn the_config_takes_nodes_to_have_what_it_says() {
        let spec = Spec {
            nodes: 2,
            tree_width: 2,
            dir: PathBuf::from("/tmp/x"),
            cpus: 64,
            mem_mb: 1_000_000,
            slurmd_timeout: 30,
        };
        let text = render_config(&spec, 7000, &[7001, 7002]);
        let conf =
            crate::config::Config::parse_str(&text, std::path::Path::new("/tmp/x/slurm.conf"))
                .unwrap();
        assert!(conf.config_overrides);
        assert_eq!(conf.nodes[1].cpus, 64);
    }

    /// `up` works only in a directory that is ours and nobody else's to
    /// write: another user could plant a key or a symlink in `log/`.
    #[test]
    fn a_directory_others_can_write_or_a_symlink_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let fresh = t.path().join("fresh");
        secure_dir(&fresh).unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o022, 0, "created {mode:o}");
        let open = t.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = secure_dir(&open).unwrap_err();
        assert!(e.contains("others may write"), "{e}");
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let e = secure_dir(&link).unwrap_err();
        assert!(e.contains("not a plain directory"), "{e}");
        // Someone else's directory (needs root to make one).
        if nix::unistd::geteuid().is_root() {
            let theirs = t.path().join("theirs");
            fs::create_dir(&theirs).unwrap();
            fs::set_permissions(&theirs, fs::Permissions::from_mode(0o755)).unwrap();
            nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            let e = secure_dir(&theirs).unwrap_err();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
    }

    /// A symlink planted where a log or pid file goes is not followed.
    #[test]
    fn files_are_created_without_following_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let planted = t.path().join("ctld.log");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        assert!(create_nofollow(&planted, 0o644).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    }
}
