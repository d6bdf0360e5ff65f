//! Pseudo-terminals for `srun --pty`: task 0 runs on the slave side as its
//! controlling terminal; the node daemon reads and writes the master side.
//!
//! nix already wraps `openpty`; the two ioctls it has no function for
//! (TIOCSCTTY, TIOCSWINSZ) are declared here with nix's own macros.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::pty::{openpty, Winsize};

use crate::wire::messages::WindowSize;

nix::ioctl_write_int_bad!(set_controlling_tty, nix::libc::TIOCSCTTY);
nix::ioctl_write_ptr_bad!(set_window_size, nix::libc::TIOCSWINSZ, Winsize);
nix::ioctl_read_bad!(get_window_size, nix::libc::TIOCGWINSZ, Winsize);

fn winsize(size: WindowSize) -> Winsize {
    Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Both ends of a new pseudo-terminal.
pub struct Pty {
    /// The node daemon's end, non-blocking (it is polled by tokio).
    pub master: OwnedFd,
    /// The task's end: its stdin, stdout and stderr.
    pub slave: OwnedFd,
}

/// Open a pty of `size`, its slave owned by the task's user (as a login
/// terminal is, so `mesg`, `write` and `tty` checks behave).
pub fn open(size: WindowSize, uid: u32, gid: u32) -> std::io::Result<Pty> {
    let p = openpty(Some(&winsize(size)), None)?;
    nix::unistd::fchown(
        p.slave.as_raw_fd(),
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    )?;
    use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
    // openpty leaves both ends inheritable: every process the (root) node
    // daemon starts while the step runs would get a handle on the user's
    // terminal. The task gets its own copies of the slave as 0, 1 and 2.
    for fd in [&p.master, &p.slave] {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    let flags = OFlag::from_bits_truncate(fcntl(p.master.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(
        p.master.as_raw_fd(),
        FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK),
    )?;
    Ok(Pty {
        master: p.master,
        slave: p.slave,
    })
}

/// In the child, after `setsid`: make its stdin (the slave) its
/// controlling terminal, so Ctrl-C typed at srun reaches it as SIGINT.
/// Async-signal-safe (one ioctl).
pub fn take_as_controlling_in_child() -> std::io::Result<()> {
    // SAFETY: fd 0 is open (the pty slave); the argument is a plain int.
    unsafe { set_controlling_tty(0, 0) }
        .map(drop)
        .map_err(std::io::Error::from)
}

/// Tell the pty its terminal was resized (srun's SIGWINCH); the kernel
/// then sends SIGWINCH to the task's foreground process group.
pub fn resize(master: &OwnedFd, size: WindowSize) -> std::io::Result<()> {
    let ws = winsize(size);
    // SAFETY: the fd is an open pty master and `ws` outlives the call.
    unsafe { set_window_size(master.as_raw_fd(), &ws) }
        .map(drop)
        .map_err(std::io::Error::from)
}

/// The size of the terminal on `fd`, if it is one.
pub fn size_of(fd: &impl AsRawFd) -> Option<WindowSize> {
    let mut ws = winsize(WindowSize::default());
    // SAFETY: `ws` is a valid Winsize for the kernel to fill in.
    unsafe { get_window_size(fd.as_raw_fd(), &mut ws) }.ok()?;
    Some(WindowSize {
        rows: ws.ws_row,
        cols: ws.ws_col,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_pty_has_the_size_asked_and_can_be_resized() {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let p = open(
            WindowSize {
                rows: 30,
                cols: 100,
            },
            uid,
            gid,
        )
        .unwrap();
        assert_eq!(
            size_of(&p.slave),
            Some(WindowSize {
                rows: 30,
                cols: 100
            })
        );
        resize(
            &p.master,
            WindowSize {
                rows: 50,
                cols: 132,
            },
        )
        .unwrap();
        assert_eq!(
            size_of(&p.slave),
            Some(WindowSize {
                rows: 50,
                cols: 132
            })
        );
        // Neither end leaks into processes started meanwhile.
        for fd in [&p.master, &p.slave] {
            let flags = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFD).unwrap();
            assert_ne!(flags & nix::libc::FD_CLOEXEC, 0);
        }
        // A regular file is not a terminal.
        let f = tempfile::tempfile().unwrap();
        assert_eq!(size_of(&f), None);
    }
}
