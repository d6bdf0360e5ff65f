//! `srun --pty`: task 0 on a pseudo-terminal of the user's terminal size,
//! keys passed through raw, resizes followed, and the terminal given back
//! as it was. The terminal side is played by a pty this test opens.

mod common;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use canopy::exec::pty;
use canopy::wire::messages::WindowSize;
use common::{bin, Cluster};
use nix::sys::termios::{tcgetattr, LocalFlags};

fn run_with_input(c: &Cluster, w: &Path, args: &[&str], input: &str) -> std::process::Output {
    c.cli_with_input(w, "srun", args, input)
}

/// Everything the "terminal" shows, read on a thread so waits can time out.
struct Screen {
    rx: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl Screen {
    fn new(master: &OwnedFd) -> Screen {
        let mut f = std::fs::File::from(master.try_clone().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once srun (the last holder of the slave) has exited.
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Screen {
            rx,
            seen: String::new(),
        }
    }

    fn wait_for(&mut self, what: &str) {
        let t = Instant::now();
        while !self.seen.contains(what) {
            let left = Duration::from_secs(20).saturating_sub(t.elapsed());
            match self.rx.recv_timeout(left) {
                Ok(b) => self.seen.push_str(&String::from_utf8_lossy(&b)),
                Err(_) => panic!("no {what:?} on the terminal; it shows:\n{}", self.seen),
            }
        }
    }
}

#[test]
fn pty_runs_task_zero_on_a_terminal() {
    let c = Cluster::start(2, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();

    // Without a terminal here, task 0 still gets one, 24x80.
    let o = c.cli(
        w,
        "srun",
        &[
            "--pty",
            "bash",
            "-c",
            "tty; [ -t 0 ] && [ -t 1 ] && echo on-a-tty; stty size",
        ],
    );
    let so = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(so.starts_with("/dev/pts/"), "{so}");
    assert!(so.contains("on-a-tty\r\n24 80\r\n"), "{so}");

    // Piped input is typed into it; end of input is Ctrl-D.
    let o = run_with_input(
        &c,
        w,
        &["--pty", "bash", "--norc", "-i"],
        "echo $((6 * 7))\nexit 3\n",
    );
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\r42\r\n"),
        "{o:?}"
    );
    let o = run_with_input(&c, w, &["--pty", "cat"], "typed\n");
    assert!(o.status.success(), "{o:?}");
    // A last line without its newline still ends (two Ctrl-Ds).
    let o = run_with_input(&c, w, &["--pty", "cat"], "partial");
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("partial"),
        "{o:?}"
    );

    // Only task 0's output is shown.
    let o = c.cli(
        w,
        "srun",
        &["-n2", "--pty", "bash", "-c", "echo task $SLURM_PROCID"],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "task 0\r\n");
}

#[test]
fn pty_passes_keys_and_resizes_and_gives_the_terminal_back() {
    let c = Cluster::start(1, 2, 30);
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let term = nix::pty::openpty(
        Some(&nix::pty::Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        }),
        None,
    )
    .unwrap();
    let cooked = tcgetattr(&term.slave).unwrap();
    assert!(cooked.local_flags.contains(LocalFlags::ICANON));
    let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut srun = Command::new(bin("canopy"));
    // srun in a session of its own with this terminal as its controlling
    // one, as a login shell's child would be.
    // SAFETY: setsid and one ioctl, both async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        srun.pre_exec(|| {
            nix::unistd::setsid()?;
            pty::take_as_controlling_in_child()
        });
    }
    let mut child = srun
        .args(["srun", "--pty", "bash", "--norc"])
        .current_dir(w)
        .env("CANOPY_CONF", &c.conf)
        .env("PATH", c.path_env())
        .env("PS1", "prompt$ ")
        .stdin(io(&term.slave))
        .stdout(io(&term.slave))
        .stderr(io(&term.slave))
        .spawn()
        .unwrap();
    let mut screen = Screen::new(&term.master);
    let mut keys = std::fs::File::from(term.master.try_clone().unwrap());
    screen.wait_for("prompt$ ");
    // srun has put the terminal in raw mode: no local echo or line editing.
    let raw = tcgetattr(&term.slave).unwrap();
    assert!(!raw.local_flags.contains(LocalFlags::ICANON));
    assert!(!raw.local_flags.contains(LocalFlags::ECHO));

    keys.write_all(b"stty size\r").unwrap();
    screen.wait_for("40 120");

    // A resize reaches the task's terminal: the kernel tells srun (SIGWINCH),
    // srun tells the node.
    pty::resize(
        &term.master,
        WindowSize {
            rows: 50,
            cols: 132,
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    keys.write_all(b"stty size\r").unwrap();
    screen.wait_for("50 132");

    // Ctrl-C is a key: it interrupts the remote command, not srun.
    keys.write_all(b"sleep 60\r").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    keys.write_all(b"\x03").unwrap();
    keys.write_all(b"echo interrupted=$?\r").unwrap();
    screen.wait_for("interrupted=130");

    keys.write_all(b"exit 5\r").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(5), "{}", screen.seen);
    screen.wait_for("srun: error: n1: task 0: Exited with exit code 5");
    let after = tcgetattr(&term.slave).unwrap();
    assert_eq!(after.local_flags, cooked.local_flags);
}
