//! Acting as a job's user.
//!
//! A node daemon runs as root so that it can start jobs as their users. Every
//! path a user names (`-o`, `-e`, `-i`, the working directory) must be opened
//! with *their* rights, not root's: otherwise `sbatch -o /etc/passwd` would
//! have root truncate it. Slurm's slurmstepd does the same.
//!
//! Two ways, both keeping the user's supplementary groups (group-granted
//! access to a shared project directory must work):
//! - [`JobUser::run`] runs a closure on a short-lived thread that takes the
//!   user's uid, gid and groups. Linux credentials belong to a thread; the raw
//!   syscalls change only that thread (glibc's wrappers would change every
//!   thread of the daemon), and the thread ends with the closure, so no
//!   daemon thread is ever left with a user's identity. Files it opens are
//!   ordinary descriptors of the daemon, handed to the job's processes.
//! - [`JobUser::become_in_child`] is for `pre_exec`: the forked child, single
//!   threaded, gives up root for good before it runs the job's program.
//!
//! When the daemon is not root (a personal test cluster) there is nobody else
//! to become: both run as the daemon's user.

use std::ffi::CString;
use std::io;

use nix::libc;
use nix::unistd::{Gid, Uid};

/// Who a job runs as on this node.
#[derive(Debug, Clone)]
pub struct JobUser {
    uid: u32,
    gid: u32,
    /// Supplementary groups, as `initgroups` would set them.
    groups: Vec<libc::gid_t>,
    /// False when the daemon is not root: nothing to switch.
    switch: bool,
}

impl JobUser {
    /// The job's user `name` (`uid`, primary group `gid`), with the
    /// supplementary groups this node's group database gives the account
    /// that owns `uid` here (as slurmstepd's `initgroups`). The groups are
    /// looked up by this node's name for the uid, never the name alone: a
    /// name that means another uid here must not lend its groups. A uid
    /// this node does not know gets just its primary group.
    pub fn new(name: &str, uid: u32, gid: u32) -> JobUser {
        let switch = Uid::effective().is_root();
        let groups = if switch {
            match nix::unistd::User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
            {
                Some(local) => {
                    if local.name != name {
                        tracing::warn!(uid, job_user = name, local_user = %local.name, "job's user name differs on this node; using this node's");
                    }
                    supplementary_groups(&local.name, gid)
                }
                None => vec![gid],
            }
        } else {
            Vec::new()
        };
        JobUser {
            uid,
            gid,
            groups,
            switch,
        }
    }

    /// Run `f` with the user's file-access rights and return what it returns.
    /// Fails only if the identity cannot be taken (then `f` does not run).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> io::Result<R> {
        if !self.switch {
            return Ok(f());
        }
        std::thread::scope(|s| {
            s.spawn(|| -> io::Result<R> {
                self.become_on_this_thread()?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("acting as the job's user panicked")))
        })
    }

    /// The raw syscalls, so that only the calling thread changes. The thread
    /// must end afterwards: with every uid set to the user it cannot go back.
    fn become_on_this_thread(&self) -> io::Result<()> {
        let check = |r: libc::c_long| {
            if r == -1 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: plain syscalls with a valid pointer and length; they change
        // only this thread's credentials.
        unsafe {
            check(libc::syscall(
                libc::SYS_setgroups,
                self.groups.len(),
                self.groups.as_ptr(),
            ))?;
            check(libc::syscall(
                libc::SYS_setresgid,
                self.gid,
                self.gid,
                self.gid,
            ))?;
            check(libc::syscall(
                libc::SYS_setresuid,
                self.uid,
                self.uid,
                self.uid,
            ))?;
        }
        Ok(())
    }

    /// Give up root for good in a forked child, before exec. Only
    /// async-signal-safe calls, on memory prepared before the fork.
    pub fn become_in_child(&self) -> io::Result<()> {
        if !self.switch {
            return Ok(());
        }
        // SAFETY: setgroups reads `groups` (allocated before the fork) and
        // is async-signal-safe, as are setgid and setuid.
        let r = unsafe { libc::setgroups(self.groups.len(), self.groups.as_ptr()) };
        if r == -1 {
            return Err(io::Error::last_os_error());
        }
        nix::unistd::setgid(Gid::from_raw(self.gid))?;
        nix::unistd::setuid(Uid::from_raw(self.uid))?;
        Ok(())
    }
}

/// `initgroups`' list for `name`: its primary group first, then every group
/// that lists it as a member.
fn supplementary_groups(name: &str, gid: u32) -> Vec<libc::gid_t> {
    let looked_up = CString::new(name)
        .ok()
        .and_then(|c| nix::unistd::getgrouplist(&c, Gid::from_raw(gid)).ok());
    match looked_up {
        Some(groups) if !groups.is_empty() => groups.into_iter().map(Gid::as_raw).collect(),
        _ => vec![gid],
    }
}

/// The group database's name for `gid`, if it has one. A blocking call
/// (it may consult LDAP or NIS): callers on an event loop run it on a
/// blocking thread.
pub fn group_name(gid: u32) -> Option<String> {
    nix::unistd::Group::from_gid(Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name)
}

/// The name slurmstepd gives itself in the notes it writes into a job's
/// output (`slurmstepd-n1`): users and tools see it there.
pub fn stepd_prefix(node: &str) -> String {
    format!("slurmstepd-{node}")
}

/// A job's working directory, made ready before the fork for the child to
/// enter after it has become the user (so the user's rights decide).
pub struct WorkDir {
    dir: CString,
    /// slurmstepd's note for each likely errno, formatted in advance: the
    /// child may not allocate.
    notes: Vec<(i32, Vec<u8>)>,
    other_note: Vec<u8>,
}

impl WorkDir {
    /// `node` names this node in the note, as slurmstepd's log prefix does.
    pub fn new(dir: &std::path::Path, node: &str) -> io::Result<WorkDir> {
        use nix::errno::Errno;
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "working directory contains a NUL byte",
            )
        })?;
        let note = |why: &str| {
            format!(
                "{}: error: couldn't chdir to `{}': {why}: going to /tmp instead\n",
                stepd_prefix(node),
                dir.display()
            )
            .into_bytes()
        };
        let notes = [
            Errno::EACCES,
            Errno::ENOENT,
            Errno::ENOTDIR,
            Errno::ELOOP,
            Errno::ENAMETOOLONG,
        ]
        .into_iter()
        .map(|e| (e as i32, note(e.desc())))
        .collect();
        Ok(WorkDir {
            dir: c,
            notes,
            other_note: note("cannot enter the directory"),
        })
    }

    /// In the forked child: change to the directory, or, as slurmstepd
    /// does, say why not on stderr and go to `/tmp`. Only chdir and write,
    /// on memory prepared before the fork.
    pub fn enter_in_child(&self) -> io::Result<()> {
        // SAFETY: chdir on a NUL-terminated string that outlives the call.
        if unsafe { libc::chdir(self.dir.as_ptr()) } == 0 {
            return Ok(());
        }
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let note = self
            .notes
            .iter()
            .find(|(e, _)| *e == errno)
            .map_or(&self.other_note, |(_, n)| n);
        // SAFETY: write(2) of a buffer that outlives the call; best effort.
        unsafe {
            libc::write(2, note.as_ptr().cast(), note.len());
        }
        // SAFETY: as above, on a static NUL-terminated string.
        if unsafe { libc::chdir(c"/tmp".as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_gets_only_its_primary_group() {
        assert_eq!(supplementary_groups("no-such-user-here", 4242), vec![4242]);
        assert_eq!(supplementary_groups("bad\0name", 7), vec![7]);
    }

    #[test]
    fn a_known_name_gets_its_primary_group_first() {
        let groups = supplementary_groups("root", 0);
        assert_eq!(groups.first(), Some(&0));
    }

    #[test]
    fn run_acts_as_the_user_and_leaves_the_daemon_as_it_was() {
        let before = (nix::unistd::geteuid(), nix::unistd::getegid());
        let user = JobUser::new("nobody", 65534, 65534);
        let seen = user
            .run(|| {
                (
                    nix::unistd::geteuid().as_raw(),
                    nix::unistd::getegid().as_raw(),
                )
            })
            .unwrap();
        if before.0.is_root() {
            assert_eq!(seen, (65534, 65534));
            // Root can read a root-only file; the user, on its thread, cannot.
            let dir = tempfile::tempdir().unwrap();
            let secret = dir.path().join("secret");
            std::fs::write(&secret, "x").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
            let denied = user.run(|| std::fs::read(&secret)).unwrap();
            assert_eq!(denied.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
            assert!(std::fs::read(&secret).is_ok());
        } else {
            assert_eq!(seen, (before.0.as_raw(), before.1.as_raw()));
        }
        assert_eq!((nix::unistd::geteuid(), nix::unistd::getegid()), before);
    }
}
