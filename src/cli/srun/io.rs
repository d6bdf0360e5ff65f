//! The step's standard streams below the session: reading `--multi-prog` files, whether
//! and how standard input is read, and the per-node links that carry forwarded signals,
//! terminal resizes and input down to the node daemons.
//!
//! Does not: decide which signals to forward or when the step ends (`session` and
//! `signals` do), or print task output.

use super::*;

/// Read and parse a `--multi-prog` file; errors are srun's lines.
/// With `-n`, it is also checked against that many tasks (without, the
/// controller checks it once it has laid the step out).
pub(super) fn read_multi_prog(
    file: &str,
    ntasks: Option<u32>,
) -> Result<crate::wire::messages::MultiProg, Vec<String>> {
    let text = std::fs::read_to_string(file)
        .map_err(|_| vec![format!("Could not open multi_prog config file {file}")])?;
    let m = crate::exec::multiprog::parse(file, &text)?;
    if let Some(n) = ntasks {
        crate::exec::multiprog::check(&m, n)?;
    }
    Ok(m)
}

/// srun's stdin is /dev/null.
pub(super) fn stdin_is_null() -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (Ok(me), Ok(null)) = (
        std::fs::metadata("/proc/self/fd/0"),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    me.file_type().is_char_device() && me.rdev() == null.rdev()
}

/// False when reading stdin would stop srun: it is a terminal and srun runs
/// in the background (the read would raise SIGTTIN).
pub(super) fn stdin_readable() -> bool {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return true;
    }
    nix::unistd::tcgetpgrp(&stdin).is_ok_and(|fg| fg == nix::unistd::getpgrp())
}

/// Read `source` on a thread of its own (a blocking read of a terminal can
/// not be cancelled, and must not hold up srun's exit). An empty chunk marks
/// the end.
pub(super) fn read_input(mut source: Box<dyn Read + Send>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match source.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.blocking_send(Vec::new());
    });
    rx
}

/// What srun sends down every node link, besides input.
#[derive(Debug, Clone, Copy)]
pub(super) enum Down {
    Signal(i32),
    /// `--pty`: the terminal's new size.
    Resize(crate::wire::messages::WindowSize),
}

/// Where forwarded signals go: one queue per node link. Signals that come
/// before every node has linked up are kept and replayed to late links.
pub(super) struct Links {
    pub(super) queues: Vec<mpsc::UnboundedSender<Down>>,
    pub(super) expected: usize,
    pub(super) early: Vec<Down>,
}

impl Links {
    pub(super) fn forward(&mut self, signal: i32) {
        self.send(Down::Signal(signal));
    }

    pub(super) fn send(&mut self, msg: Down) {
        for q in &self.queues {
            let _ = q.send(msg);
        }
        if self.queues.len() < self.expected {
            self.early.push(msg);
        }
    }

    pub(super) fn add(&mut self, queue: mpsc::UnboundedSender<Down>) {
        for &s in &self.early {
            let _ = queue.send(s);
        }
        self.queues.push(queue);
        if self.queues.len() == self.expected {
            self.early.clear();
        }
    }

    pub(super) fn all_linked(&self) -> bool {
        self.queues.len() == self.expected
    }
}

/// Send what srun has for one node: signals first, then input.
pub(super) async fn link_writer(
    mut w: ConnWriter,
    mut signals: mpsc::UnboundedReceiver<Down>,
    mut input: Option<mpsc::Receiver<Vec<u8>>>,
) {
    loop {
        let next_input = async {
            match input.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let body = tokio::select! {
            biased;
            s = signals.recv() => match s {
                Some(Down::Signal(signal)) => Body::SignalTasks { signal },
                Some(Down::Resize(size)) => Body::WindowChange(size),
                None => return,
            },
            d = next_input => match d {
                Some(data) => Body::StepStdin(StepStdin { data }),
                None => {
                    input = None;
                    continue;
                }
            },
        };
        if w.send(0, &body).await.is_err() {
            return;
        }
    }
}

/// Copy the input to every node that runs a task reading it, once all
/// nodes have linked up (so none misses the start).
pub(super) async fn forward_input(
    mut source: mpsc::Receiver<Vec<u8>>,
    links: oneshot::Receiver<Vec<mpsc::Sender<Vec<u8>>>>,
) {
    let Ok(links) = links.await else { return };
    loop {
        let chunk = source.recv().await.unwrap_or_default();
        let end = chunk.is_empty();
        for l in &links {
            let _ = l.send(chunk.clone()).await;
        }
        if end {
            return;
        }
    }
}
