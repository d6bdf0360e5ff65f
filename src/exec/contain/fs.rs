//! The few cgroupfs file operations both versions share, each failure naming the path and
//! the operation: read and write a control file, make and remove directories, list the
//! processes of a subtree, and parse the `key value` files (`memory.events`, `cpu.stat`,
//! `memory.stat`, `memory.oom_control`, `cpuacct.stat`).
//!
//! Nothing here knows which file means what; that is `cgroup_v1` and `cgroup_v2`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::ContainError;

pub(super) fn io_error(op: &'static str, path: &Path, source: io::Error) -> ContainError {
    ContainError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Write `value` to a control file. N.B. cgroupfs takes one value per write(2); `fs::write`
/// makes exactly one for these short strings.
pub(super) fn write(path: &Path, value: &str) -> Result<(), ContainError> {
    std::fs::write(path, value).map_err(|e| io_error("write", path, e))
}

pub(super) fn read(path: &Path) -> Result<String, ContainError> {
    std::fs::read_to_string(path).map_err(|e| io_error("read", path, e))
}

/// A control file that an older kernel or a disabled controller may lack.
pub(super) fn read_opt(path: &Path) -> Result<Option<String>, ContainError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

/// Make every missing directory of `root/rel`, calling `made` on each one this call
/// made (a v1 cpuset must be filled before anything goes below it). Returns the last.
pub(super) fn make_path(
    root: &Path,
    rel: &Path,
    made: impl Fn(&Path) -> Result<(), ContainError>,
) -> Result<PathBuf, ContainError> {
    // A level can vanish under us: another job of the same user removing the shared
    // `uid_N` directory between our walking past it and making the job's. Walk again,
    // so that the level made again is filled again.
    let mut last_error = None;
    for _ in 0..3 {
        let mut dir = root.to_path_buf();
        let mut vanished = false;
        for part in rel.components() {
            dir.push(part);
            match std::fs::create_dir(&dir) {
                Ok(()) => made(&dir)?,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    last_error = Some(io_error("create directory", &dir, e));
                    vanished = true;
                    break;
                }
                Err(e) => return Err(io_error("create directory", &dir, e)),
            }
        }
        if !vanished {
            return Ok(dir);
        }
    }
    Err(last_error
        .unwrap_or_else(|| io_error("create directory", root, io::ErrorKind::NotFound.into())))
}

/// Make `dir` (its parent must exist); true when this call made it.
pub(super) fn mkdir(dir: &Path) -> Result<bool, ContainError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_error("create directory", dir, e)),
    }
}

/// The directories (child cgroups) directly under `dir`; none when `dir` is gone.
pub(super) fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, ContainError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error("list", dir, e))?;
        // file_type() does not follow links; cgroupfs has none, and a link is not ours.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// The pids in `dir/cgroup.procs` (not its children's).
pub(super) fn procs(dir: &Path) -> Result<Vec<i32>, ContainError> {
    let path = dir.join("cgroup.procs");
    let Some(text) = read_opt(&path)? else {
        return Ok(Vec::new());
    };
    Ok(text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect())
}

/// The pids in `dir` and every cgroup below it, still alive (zombies and reaped pids
/// left out: a fake cgroupfs keeps listing them, and they hold nothing).
pub(super) fn procs_tree(dir: &Path) -> Result<Vec<i32>, ContainError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        out.extend(procs(&dir)?.into_iter().filter(|&pid| alive(pid)));
        stack.extend(subdirs(&dir)?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A pid that exists and is not a zombie.
pub(super) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the last ')' (the command name may hold parentheses).
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Remove `dir` and every cgroup under it, deepest first. A cgroup the kernel still
/// counts as busy (its last processes being reaped) is retried until `patience` is spent.
/// A directory already gone is success.
pub(super) fn remove_tree(dir: &Path, patience: Duration) -> Result<(), ContainError> {
    for child in subdirs(dir)? {
        remove_tree(&child, patience)?;
    }
    let deadline = Instant::now() + patience;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(io_error("remove", dir, e)),
        }
    }
}

/// Remove every empty cgroup under (and including, when `include_self`) `dir`; leave the
/// busy ones. Returns (removed, kept).
pub(super) fn prune(dir: &Path, include_self: bool) -> (usize, usize) {
    let mut counts = (0, 0);
    for child in subdirs(dir).unwrap_or_default() {
        let (r, k) = prune(&child, true);
        counts.0 += r;
        counts.1 += k;
    }
    if include_self {
        match std::fs::remove_dir(dir) {
            Ok(()) => counts.0 += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => counts.1 += 1,
        }
    }
    counts
}

fn busy(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == nix::libc::EBUSY || code == nix::libc::ENOTEMPTY
    )
}

/// The value of `key` in a file of `key value` lines.
pub(super) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(key))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// A cpu or memory-node list the kernel reads: `0,2,5`.
pub(super) fn id_list(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_reads_the_named_line() {
        let text = "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed(text, "oom_kill"), Some(1));
        assert_eq!(keyed(text, "oom"), Some(2));
        assert_eq!(keyed(text, "absent"), None);
        assert_eq!(keyed("oom_kill x\n", "oom_kill"), None);
    }

    #[test]
    fn alive_knows_itself_and_the_dead() {
        assert!(alive(std::process::id() as i32));
        assert!(!alive(i32::MAX));
    }

    #[test]
    fn remove_tree_removes_deepest_first_and_tolerates_absence() {
        let dir = tempfile::tempdir().expect("tempdir");
        let top = dir.path().join("job_1");
        std::fs::create_dir_all(top.join("step_0/task_0")).expect("mkdir");
        std::fs::create_dir_all(top.join("step_batch")).expect("mkdir");
        remove_tree(&top, Duration::ZERO).expect("remove");
        assert!(!top.exists());
        remove_tree(&top, Duration::ZERO).expect("already gone");
    }

    #[test]
    fn prune_keeps_what_is_not_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("c")).expect("mkdir");
        // A regular file makes `c` non-empty, as processes make a cgroup busy.
        std::fs::write(dir.path().join("c/cgroup.procs"), "1\n").expect("write");
        assert_eq!(prune(dir.path(), false), (2, 1));
        assert!(dir.path().join("c").exists() && !dir.path().join("a").exists());
    }

    #[test]
    fn make_path_makes_each_level_once_and_reports_what_it_made() {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = std::cell::RefCell::new(Vec::new());
        let record = |p: &Path| {
            made.borrow_mut().push(p.to_path_buf());
            Ok(())
        };
        let rel = Path::new("uid_5/job_1");
        let leaf = make_path(dir.path(), rel, record).expect("make");
        assert_eq!(leaf, dir.path().join(rel));
        assert_eq!(made.borrow().len(), 2);
        make_path(dir.path(), Path::new("uid_5/job_2"), record).expect("make");
        assert_eq!(made.borrow().len(), 3, "uid_5 existed");
        assert!(!mkdir(&leaf).expect("exists"));
        let e = make_path(&dir.path().join("absent"), rel, record).expect_err("no root");
        assert!(e.to_string().contains("create directory"), "{e}");
    }
}
