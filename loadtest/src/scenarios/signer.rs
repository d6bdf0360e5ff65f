//! `signer`: credentials per second from canopy's local signer
//! (`canopy-authd`) and from MUNGE (`munged`, measured with its own
//! `remunge` benchmark), on the same machine in the same run.
//!
//! canopy is measured three ways: a connection per credential (what
//! MUNGE's client library does, so the like-for-like figure), a persistent
//! connection per client (what a canopy command does: one connection for
//! all its frames), and a persistent connection with 16 requests in flight
//! (the signer's capacity, as a client streaming frames would use it). MUNGE runs with its default thread count (2) and
//! canopy-authd with its default (one worker per core), each driven by
//! `threads` client threads.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::harness::bin_dir;
use crate::report::Row;
use canopy::wire::signer::{SignerReply, SignerRequest};

pub struct Opts {
    pub duration: Duration,
    pub threads: Vec<u32>,
}

pub fn run(o: &Opts, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let authd = start_authd(dir.path())?;
    let munge = start_munged(dir.path());
    let mut rows = Vec::new();
    for &t in &o.threads {
        for (persistent, depth, label) in [
            (false, 1, "per credential"),
            (true, 1, "persistent"),
            (true, PIPELINE, "persistent, 16 in flight"),
        ] {
            let rate = canopy_rate(&authd.socket, t, o.duration, persistent, depth)?;
            let row = Row::new("signer")
                .set("signer", "canopy-authd")
                .set("client_threads", t)
                .set("connection", label)
                .num("creds_per_s", rate);
            progress(&row.json());
            rows.push(row);
        }
        match &munge {
            Ok(m) => {
                let rate = remunge_rate(&m.socket, t, o.duration)?;
                let row = Row::new("signer")
                    .set("signer", "munged")
                    .set("client_threads", t)
                    .set("connection", "per credential")
                    .num("creds_per_s", rate);
                progress(&row.json());
                rows.push(row);
            }
            Err(e) => progress(&format!("signer: munged not measured: {e:#}")),
        }
    }
    Ok(rows)
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_socket(path: &Path, child: &mut Child, what: &str) -> Result<()> {
    let t0 = Instant::now();
    while UnixStream::connect(path).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            bail!("{what} exited: {st}");
        }
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("{what} did not open {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn start_authd(dir: &Path) -> Result<Daemon> {
    let socket = dir.join("authd.sock");
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=bench\nSlurmctldHost=localhost(127.0.0.1)\nAuthInfo=socket={}\n\
             NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
            socket.display()
        ),
    )?;
    canopy::wire::auth::generate_key_file(&dir.join("slurm.key"))?;
    let mut child = Command::new(bin_dir()?.join("canopy-authd"))
        .args(["-f", &conf.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start canopy-authd (build it next to canopy-loadtest)")?;
    wait_socket(&socket, &mut child, "canopy-authd")?;
    Ok(Daemon { child, socket })
}

/// munged on a private socket, key and files (its defaults need root-owned
/// system paths).
fn start_munged(dir: &Path) -> Result<Daemon> {
    let mdir = dir.join("munge");
    std::fs::create_dir_all(&mdir)?;
    let key = mdir.join("munge.key");
    let mut k = std::fs::File::create(&key)?;
    let mut raw = [0u8; 1024];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    k.write_all(&raw)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400))?;
    std::fs::set_permissions(&mdir, std::fs::Permissions::from_mode(0o700))?;
    let socket = mdir.join("munge.sock");
    let mut child = Command::new("munged")
        .arg("-F")
        .arg("--force")
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--key-file={}", key.display()))
        .arg(format!("--log-file={}", mdir.join("munged.log").display()))
        .arg(format!("--pid-file={}", mdir.join("munged.pid").display()))
        .arg(format!(
            "--seed-file={}",
            mdir.join("munged.seed").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start munged (Debian package munge)")?;
    wait_socket(&socket, &mut child, "munged")?;
    Ok(Daemon { child, socket })
}

/// `remunge`'s own count: "N credentials in T seconds (R creds/sec)".
fn remunge_rate(socket: &Path, threads: u32, d: Duration) -> Result<f64> {
    let out = Command::new("remunge")
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--num-threads={threads}"))
        .arg(format!("--duration={}", d.as_secs().max(1)))
        .output()
        .context("cannot run remunge")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rate = text
        .split('(')
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok());
    rate.with_context(|| format!("cannot read remunge's output: {text}"))
}

/// Requests a pipelining client keeps in flight.
const PIPELINE: usize = 16;

fn canopy_rate(
    socket: &Path,
    threads: u32,
    d: Duration,
    persistent: bool,
    depth: usize,
) -> Result<f64> {
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let req = rmp_serde::to_vec_named(&SignerRequest::Sign { digest: [7; 32] })?;
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (count, stop, req, socket) = (
                count.clone(),
                stop.clone(),
                req.clone(),
                socket.to_path_buf(),
            );
            std::thread::spawn(move || -> Result<()> {
                let mut conn = None;
                while !stop.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        conn = Some(UnixStream::connect(&socket)?);
                    }
                    let Some(s) = conn.as_mut() else { continue };
                    sign_many(s, &req, depth)?;
                    count.fetch_add(depth as u64, Ordering::Relaxed);
                    if !persistent {
                        conn = None;
                    }
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(d);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    Ok(count.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64())
}

/// Send `depth` requests in one write, then read their answers.
fn sign_many(s: &mut UnixStream, req: &[u8], depth: usize) -> Result<()> {
    let mut out = Vec::with_capacity(depth * (req.len() + 4));
    for _ in 0..depth {
        out.extend_from_slice(&(req.len() as u32).to_be_bytes());
        out.extend_from_slice(req);
    }
    s.write_all(&out)?;
    for _ in 0..depth {
        let mut len = [0u8; 4];
        s.read_exact(&mut len)?;
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut buf)?;
        match rmp_serde::from_slice::<SignerReply>(&buf)? {
            SignerReply::Signed(_) => {}
            other => bail!("signer answered {other:?}"),
        }
    }
    Ok(())
}
