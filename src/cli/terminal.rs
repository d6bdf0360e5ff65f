//! srun's side of `--pty`: while the step runs, the user's terminal is in
//! raw mode, so every key (Ctrl-C included) goes to the task's pty and the
//! remote terminal does the echoing and line editing.

use std::os::fd::AsFd;
use std::sync::Mutex;

use nix::sys::termios::{self, SetArg, Termios};

/// The settings raw mode replaced, while it is on. Process-wide, as the
/// terminal is: srun's own messages need it back before they print.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// Raw mode for as long as this lives (or until [`restore`]).
pub struct RawMode(());

impl RawMode {
    /// Put stdin's terminal in raw mode; `None` if stdin is not a terminal.
    pub fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let saved = termios::tcgetattr(fd).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(fd, SetArg::TCSADRAIN, &raw).ok()?;
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
        Some(RawMode(()))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}

/// Put the terminal back as it was, if raw mode is on.
pub fn restore() {
    let saved = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(saved) = saved {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, &saved);
    }
}
