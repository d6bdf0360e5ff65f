//! What a node daemon runs, on disk, so that a restarted daemon knows it.
//!
//! Job processes outlive their daemon (a `kill -9`, a crash, an upgrade).
//! Each job this node holds has a small record under `SlurmdSpoolDir/jobs/`:
//! the job id, the process groups of its batch script and tasks (each is a
//! session leader, so pid = process group = session id), each with its start
//! time from `/proc/<pid>/stat`, and the kernel's boot id. On start the
//! daemon reads them back ([`recover`]): a pid whose start time differs is
//! another process that reuses the number, and after a reboot nothing of
//! the job can run. `jobs/` belongs to the daemon's user (root), mode 0700,
//! unlike the job spool directories, which their users own: a user cannot
//! make the daemon adopt (and later kill) a process that is not theirs.
//!
//! Records are written by one thread per daemon, in order: the agent only
//! queues them, so its event loop never waits for a disk.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use crate::wire::messages::ExitStatus;

/// One process a job started: a session leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot).
    pub start_ticks: u64,
}

/// A job as this node holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u32,
    /// The kernel boot id the processes were started under.
    pub boot_id: String,
    /// The batch script, on its batch host once it has started.
    pub batch: Option<Proc>,
    /// srun tasks started here.
    pub tasks: Vec<Proc>,
    /// The batch script's spool directory, removed with the job.
    pub spool_dir: Option<PathBuf>,
}

/// The kernel's boot id (empty if unreadable: then nothing is adopted).
pub fn kernel_boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// What `/proc/<pid>/stat` says of a process: its state letter, start time
/// and, for a zombie, the wait status its parent has not collected yet.
struct Stat {
    state: char,
    start_ticks: u64,
    exit_code: Option<i32>,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ...`: comm may hold spaces and parentheses.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state); field N is `fields[N - 3]`.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        start_ticks: fields.get(22 - 3)?.parse().ok()?,
        exit_code: fields.get(52 - 3).and_then(|f| f.parse().ok()),
    })
}

/// The start time of `pid`, if it exists.
pub fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start_ticks)
}

/// Whether `p` still runs: the same process (same start time), not a zombie.
pub fn running(p: &Proc) -> bool {
    stat(p.pid).is_some_and(|s| s.start_ticks == p.start_ticks && s.state != 'Z')
}

/// Block until `p` has ended, polling `/proc` (it is not this daemon's
/// child, so it cannot be waited for). Its exit status, if it could be read
/// while it was a zombie; otherwise `None`.
pub fn watch_until_ended(p: &Proc, every: std::time::Duration) -> Option<ExitStatus> {
    loop {
        match stat(p.pid) {
            Some(s) if s.start_ticks == p.start_ticks && s.state != 'Z' => {}
            Some(s) if s.start_ticks == p.start_ticks => {
                return s.exit_code.map(decode_wait_status)
            }
            _ => return None,
        }
        std::thread::sleep(every);
    }
}

/// A wait(2) status as the controller's exit status.
fn decode_wait_status(status: i32) -> ExitStatus {
    let signal = status & 0x7f;
    if signal == 0 {
        ExitStatus {
            code: (status >> 8) & 0xff,
            signal: 0,
        }
    } else {
        ExitStatus { code: 0, signal }
    }
}

#[derive(Debug, PartialEq)]
enum Op {
    Put(JobRecord),
    Remove(u32),
}

impl Op {
    fn job_id(&self) -> u32 {
        match self {
            Op::Put(rec) => rec.job_id,
            Op::Remove(id) => *id,
        }
    }
}

/// Of the operations queued at once, only each job's last: it alone decides what is on
/// disk after them. A short job's record put at its launch, put again with its tasks
/// and removed at its end is then written once or not at all. Each put creates a file
/// (write, then rename over the old one), and with hundreds of daemons on one host
/// ext4's allocation of the new inodes was this thread's whole time and a tenth of
/// the host's CPU during a 512-node launch.
fn last_per_job(ops: Vec<Op>) -> Vec<Op> {
    let mut last = std::collections::HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        last.insert(op.job_id(), i);
    }
    ops.into_iter()
        .enumerate()
        .filter(|(i, op)| last.get(&op.job_id()) == Some(i))
        .map(|(_, op)| op)
        .collect()
}

/// The records of one node, written in order by a thread of their own.
#[derive(Clone)]
pub struct RecordBook {
    tx: mpsc::Sender<Op>,
    /// This boot's id, read once (it is file I/O) and stamped on every record.
    boot_id: String,
}

/// Where records live under the spool directory.
pub fn records_dir(spool: &Path) -> PathBuf {
    spool.join("jobs")
}

impl RecordBook {
    /// Start the writer for records under `dir` (created, mode 0700).
    /// Blocking: call it off the event loop.
    pub fn open(dir: PathBuf) -> io::Result<RecordBook> {
        let boot_id = kernel_boot_id();
        fs::create_dir_all(&dir)?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        let (tx, rx) = mpsc::channel::<Op>();
        std::thread::Builder::new()
            .name("job-records".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut queued = vec![first];
                    queued.extend(rx.try_iter());
                    for op in last_per_job(queued) {
                        let (job_id, r) = match op {
                            Op::Put(rec) => (rec.job_id, write_record(&dir, &rec)),
                            Op::Remove(id) => (id, remove_record(&dir, id)),
                        };
                        if let Err(e) = r {
                            tracing::warn!(job_id, error = %e, "cannot update the job's spool record");
                        }
                    }
                }
            })?;
        Ok(RecordBook { tx, boot_id })
    }

    /// The kernel boot id records are stamped with.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    pub fn put(&self, rec: JobRecord) {
        let _ = self.tx.send(Op::Put(rec));
    }

    pub fn remove(&self, job_id: u32) {
        let _ = self.tx.send(Op::Remove(job_id));
    }
}

fn path_of(dir: &Path, job_id: u32) -> PathBuf {
    dir.join(format!("{job_id}.json"))
}

/// Write then rename: a daemon killed mid-write leaves the old record whole.
fn write_record(dir: &Path, rec: &JobRecord) -> io::Result<()> {
    let tmp = dir.join(format!(".{}.json.tmp", rec.job_id));
    let text = serde_json::to_vec(rec).map_err(io::Error::other)?;
    fs::write(&tmp, text)?;
    fs::rename(&tmp, path_of(dir, rec.job_id))
}

fn remove_record(dir: &Path, job_id: u32) -> io::Result<()> {
    match fs::remove_file(path_of(dir, job_id)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A job found again after a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct Adopted {
    /// The record, with only the processes that still run.
    pub record: JobRecord,
    /// The batch script ended while no daemon watched it.
    pub batch_ended: bool,
}

/// Read the records under `dir`: the jobs whose processes may still run here
/// (or whose script ended while the daemon was away). Records of another
/// boot, and unreadable ones, are removed, with the spool directories they
/// name. Blocking: call it off the event loop.
pub fn recover(dir: &Path) -> Vec<Adopted> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let boot = kernel_boot_id();
    let mut found = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            // A temporary file a killed daemon left behind.
            let _ = fs::remove_file(&path);
            continue;
        }
        let rec: Option<JobRecord> = fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let Some(mut rec) = rec else {
            tracing::warn!(path = %path.display(), "unreadable job record removed");
            let _ = fs::remove_file(&path);
            continue;
        };
        if boot.is_empty() || rec.boot_id != boot {
            tracing::info!(
                job_id = rec.job_id,
                "job record from an earlier boot removed"
            );
            if let Some(d) = &rec.spool_dir {
                let _ = fs::remove_dir_all(d);
            }
            let _ = fs::remove_file(&path);
            continue;
        }
        let batch_ended = rec.batch.as_ref().is_some_and(|p| !running(p));
        if batch_ended {
            rec.batch = None;
        }
        rec.tasks.retain(running);
        found.push(Adopted {
            record: rec,
            batch_ended,
        });
    }
    found.sort_by_key(|a| a.record.job_id);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(job_id: u32, tasks: usize) -> JobRecord {
        JobRecord {
            job_id,
            boot_id: "b".into(),
            batch: None,
            tasks: vec![
                Proc {
                    pid: 1,
                    start_ticks: 1
                };
                tasks
            ],
            spool_dir: None,
        }
    }

    #[test]
    fn only_each_jobs_last_queued_operation_is_applied() {
        let ops = vec![
            Op::Put(rec(1, 0)),
            Op::Put(rec(2, 0)),
            Op::Put(rec(1, 1)),
            Op::Remove(2),
            Op::Put(rec(3, 0)),
            Op::Remove(1),
            Op::Put(rec(1, 2)),
        ];
        assert_eq!(
            last_per_job(ops),
            vec![Op::Remove(2), Op::Put(rec(3, 0)), Op::Put(rec(1, 2))]
        );
        assert_eq!(last_per_job(Vec::new()), Vec::new());
    }

    #[test]
    fn wait_statuses_decode_as_wait_does() {
        assert_eq!(
            decode_wait_status(3 << 8),
            ExitStatus { code: 3, signal: 0 }
        );
        assert_eq!(decode_wait_status(9), ExitStatus { code: 0, signal: 9 });
        // A core dump flag does not change the signal.
        assert_eq!(
            decode_wait_status(0x80 | 11),
            ExitStatus {
                code: 0,
                signal: 11
            }
        );
    }

    #[test]
    fn this_process_runs_and_a_reused_pid_does_not() {
        let pid = std::process::id() as i32;
        let me = Proc {
            pid,
            start_ticks: start_ticks(pid).unwrap(),
        };
        assert!(running(&me));
        let impostor = Proc {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!running(&impostor));
    }

    #[test]
    fn records_survive_a_restart_and_other_boots_do_not() {
        let spool = tempfile::tempdir().unwrap();
        let dir = records_dir(spool.path());
        let book = RecordBook::open(dir.clone()).unwrap();
        let pid = std::process::id() as i32;
        let me = Proc {
            pid,
            start_ticks: start_ticks(pid).unwrap(),
        };
        let gone = Proc {
            pid,
            start_ticks: me.start_ticks + 1,
        };
        let job_dir = spool.path().join("job00003");
        fs::create_dir_all(&job_dir).unwrap();
        let rec = |job_id, boot_id: &str, batch| JobRecord {
            job_id,
            boot_id: boot_id.to_string(),
            batch,
            tasks: vec![me, gone],
            spool_dir: Some(spool.path().join(format!("job{job_id:05}"))),
        };
        book.put(rec(1, &kernel_boot_id(), Some(me)));
        book.put(rec(2, &kernel_boot_id(), Some(gone)));
        book.put(rec(3, "another-boot", Some(me)));
        book.put(rec(4, &kernel_boot_id(), None));
        book.remove(4);
        // The writer is asynchronous: wait until all four ops are done.
        let t = std::time::Instant::now();
        while fs::read_dir(&dir).unwrap().count() != 3 || path_of(&dir, 4).exists() {
            assert!(t.elapsed().as_secs() < 10, "records never written");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = recover(&dir);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].record.batch, Some(me));
        assert_eq!(found[0].record.tasks, vec![me]);
        assert!(!found[0].batch_ended);
        assert_eq!(found[1].record.job_id, 2);
        assert!(found[1].batch_ended);
        assert_eq!(found[1].record.batch, None);
        assert!(!path_of(&dir, 3).exists());
        assert!(!job_dir.exists());
    }
}
