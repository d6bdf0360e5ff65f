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
//! queues them, so its event loop never waits for a disk. They are lines
//! appended to one journal file (`jobs/journal`), not a file per job: with
//! hundreds of daemons on a host, creating a file per record made ext4's
//! inode allocation (its scan past recently deleted inodes) a sixth of a
//! 512-node launch's CPU. The journal is rewritten with only the live
//! records when it has grown well past them, and at every start, so a line
//! torn by a crash mid-append is never followed by a new one.

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

/// One journal line.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
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
/// and removed at its end is then written once or not at all.
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
        let mut journal = Journal::open(&dir)?;
        let (tx, rx) = mpsc::channel::<Op>();
        std::thread::Builder::new()
            .name("job-records".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut queued = vec![first];
                    queued.extend(rx.try_iter());
                    let ops = last_per_job(queued);
                    if let Err(e) = journal.apply(ops) {
                        tracing::warn!(path = %journal.path.display(), error = %e, "cannot update the job records");
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

/// The journal's file under the records directory.
fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// A record file of an older daemon (one file per job), read once at start.
#[cfg(test)]
fn legacy_path(dir: &Path, job_id: u32) -> PathBuf {
    dir.join(format!("{job_id}.json"))
}

/// A journal is rewritten when it is larger than this and than
/// [`COMPACT_FACTOR`] times its live records: rarely, and never large.
const COMPACT_MIN_BYTES: u64 = 64 * 1024;
const COMPACT_FACTOR: u64 = 4;

/// The live records and the file they are appended to (the writer thread's own).
struct Journal {
    path: PathBuf,
    file: fs::File,
    live: std::collections::BTreeMap<u32, JobRecord>,
    /// Bytes in the file now.
    bytes: u64,
    /// Bytes it held after it was last rewritten (its live records then).
    rewritten: u64,
}

impl Journal {
    /// Replay the journal under `dir` and rewrite it with only what is live.
    fn open(dir: &Path) -> io::Result<Journal> {
        let path = journal_path(dir);
        let live = read_journal(&path)?
            .into_iter()
            .map(|r| (r.job_id, r))
            .collect();
        let file = rewrite(&path, &live)?;
        let bytes = file.metadata()?.len();
        Ok(Journal {
            file,
            bytes,
            rewritten: bytes,
            path,
            live,
        })
    }

    /// Append `ops` in one write; rewrite the file when it has grown well past
    /// what is live, or when the append failed (so that a half-written line is
    /// never followed by whole ones).
    fn apply(&mut self, ops: Vec<Op>) -> io::Result<()> {
        use std::io::Write;
        let mut text = Vec::new();
        for op in &ops {
            serde_json::to_writer(&mut text, op).map_err(io::Error::other)?;
            text.push(b'\n');
        }
        for op in ops {
            match op {
                Op::Put(rec) => {
                    self.live.insert(rec.job_id, rec);
                }
                Op::Remove(id) => {
                    self.live.remove(&id);
                }
            }
        }
        let before = self.bytes;
        let appended = self.file.write_all(&text);
        self.bytes += text.len() as u64;
        // Against the size of the last rewrite, not an estimate of the live
        // records: a rewrite then always buys room for many appends.
        let grown = self.bytes > COMPACT_MIN_BYTES.max(COMPACT_FACTOR * self.rewritten);
        if appended.is_err() || grown {
            // The whole live set, written afresh, stands for the failed append too.
            let fresh = match rewrite(&self.path, &self.live) {
                Ok(f) => f,
                Err(e) => {
                    if appended.is_err() {
                        // Cut a half-written line off, so the next append
                        // does not run on from it.
                        let _ = self.file.set_len(before);
                        self.bytes = before;
                    }
                    return Err(e);
                }
            };
            self.file = fresh;
            self.bytes = self.file.metadata()?.len();
            self.rewritten = self.bytes;
            return Ok(());
        }
        appended
    }
}

/// The records under `dir` as a restarted daemon would find them, read
/// without changing anything (for tests and inspection).
pub fn read_records(dir: &Path) -> io::Result<Vec<JobRecord>> {
    read_journal(&journal_path(dir))
}

/// The records a journal leaves live, in order of its lines. A line that does
/// not parse (torn by a crash mid-append: only ever the last) is skipped.
fn read_journal(path: &Path) -> io::Result<Vec<JobRecord>> {
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut live: Vec<JobRecord> = Vec::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Op>(line) {
            Ok(Op::Put(rec)) => {
                live.retain(|r| r.job_id != rec.job_id);
                live.push(rec);
            }
            Ok(Op::Remove(id)) => live.retain(|r| r.job_id != id),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "a torn job-record line skipped");
            }
        }
    }
    Ok(live)
}

/// Write `live` as a new journal beside `path` and rename it over `path`: a
/// daemon killed meanwhile leaves the old journal whole. Returns the new file,
/// open for appending.
fn rewrite(path: &Path, live: &std::collections::BTreeMap<u32, JobRecord>) -> io::Result<fs::File> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut text = Vec::new();
    for rec in live.values() {
        serde_json::to_writer(&mut text, &Op::Put(rec.clone())).map_err(io::Error::other)?;
        text.push(b'\n');
    }
    // Opened before the rename and kept: appends always reach the file that
    // is in place (a reopen that failed after the rename would leave them
    // going to the old, unlinked one).
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .open(&tmp)?;
    file.write_all(&text)?;
    fs::rename(&tmp, path)?;
    Ok(file)
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
/// boot, and unreadable ones, are dropped, with the spool directories they
/// name; the journal is rewritten with the others, and the per-job files of
/// an older daemon are taken into it. Blocking: call it off the event loop.
pub fn recover(dir: &Path) -> Vec<Adopted> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let journal = journal_path(dir);
    let mut records = read_journal(&journal).unwrap_or_else(|e| {
        tracing::warn!(path = %journal.display(), error = %e, "job records unreadable");
        Vec::new()
    });
    for e in entries.flatten() {
        let path = e.path();
        if path == journal {
            continue;
        }
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            // A temporary file a killed daemon left behind.
            let _ = fs::remove_file(&path);
            continue;
        }
        // An older daemon's record: one file per job.
        let rec: Option<JobRecord> = fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let _ = fs::remove_file(&path);
        match rec {
            Some(rec) if !records.iter().any(|r| r.job_id == rec.job_id) => records.push(rec),
            Some(_) => {}
            None => tracing::warn!(path = %path.display(), "unreadable job record removed"),
        }
    }
    let boot = kernel_boot_id();
    let mut kept = std::collections::BTreeMap::new();
    let mut found = Vec::new();
    for rec in records {
        if boot.is_empty() || rec.boot_id != boot {
            tracing::info!(
                job_id = rec.job_id,
                "job record from an earlier boot removed"
            );
            if let Some(d) = &rec.spool_dir {
                let _ = fs::remove_dir_all(d);
            }
            continue;
        }
        // Kept as it was written: should this daemon stop before it has dealt
        // with the job, the next one finds the same.
        kept.insert(rec.job_id, rec.clone());
        let mut rec = rec;
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
    if let Err(e) = rewrite(&journal, &kept) {
        tracing::warn!(path = %journal.display(), error = %e, "cannot rewrite the job records");
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
        // The writer is asynchronous: wait until all five ops are done.
        let t = std::time::Instant::now();
        let ids = || {
            read_journal(&journal_path(&dir))
                .unwrap()
                .iter()
                .map(|r| r.job_id)
                .collect::<Vec<_>>()
        };
        while ids() != [1, 2, 3] {
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
        // The other boot's record is gone from the journal, with its spool.
        assert_eq!(ids(), [1, 2]);
        assert!(!job_dir.exists());
    }

    #[test]
    fn an_older_daemons_record_files_are_taken_into_the_journal() {
        let spool = tempfile::tempdir().unwrap();
        let dir = records_dir(spool.path());
        fs::create_dir_all(&dir).unwrap();
        let mut old = rec(7, 1);
        old.boot_id = kernel_boot_id();
        fs::write(legacy_path(&dir, 7), serde_json::to_vec(&old).unwrap()).unwrap();
        fs::write(dir.join(".8.json.tmp"), b"{half").unwrap();
        fs::write(legacy_path(&dir, 9), b"not json").unwrap();
        let found = recover(&dir);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].record.job_id, 7);
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["journal"]);
        assert_eq!(read_journal(&journal_path(&dir)).unwrap(), vec![old]);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_path(dir.path());
        let mut text = Vec::new();
        for op in [Op::Put(rec(1, 0)), Op::Put(rec(2, 1))] {
            serde_json::to_writer(&mut text, &op).unwrap();
            text.push(b'\n');
        }
        // A crash in the middle of the third line.
        text.extend_from_slice(br#"{"Put":{"job_id":3,"boot"#);
        fs::write(&path, &text).unwrap();
        let mut journal = Journal::open(dir.path()).unwrap();
        assert_eq!(journal.live.keys().copied().collect::<Vec<_>>(), [1, 2]);
        // Reopening rewrote the file: what is appended next reads back whole.
        journal
            .apply(vec![Op::Remove(1), Op::Put(rec(4, 0))])
            .unwrap();
        let ids: Vec<u32> = read_journal(&path)
            .unwrap()
            .iter()
            .map(|r| r.job_id)
            .collect();
        assert_eq!(ids, [2, 4]);
    }

    #[test]
    fn large_live_records_are_not_rewritten_at_every_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_path(dir.path());
        let mut journal = Journal::open(dir.path()).unwrap();
        // 100 jobs of 64 tasks each stay: far more than the minimum size.
        for id in 0..100 {
            journal.apply(vec![Op::Put(rec(id, 64))]).unwrap();
        }
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let before = ino(&path);
        // A few short jobs come and go: appended, not a rewrite each.
        for id in 1000..1010 {
            journal.apply(vec![Op::Put(rec(id, 1))]).unwrap();
            journal.apply(vec![Op::Remove(id)]).unwrap();
        }
        assert_eq!(ino(&path), before, "the journal was rewritten");
    }

    #[test]
    fn the_journal_stays_small_and_replays_to_what_is_live() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_path(dir.path());
        let mut journal = Journal::open(dir.path()).unwrap();
        let mut largest = 0;
        // 20,000 short jobs, two of them always running.
        for id in 0..20_000u32 {
            journal.apply(vec![Op::Put(rec(id, 1))]).unwrap();
            if id >= 2 {
                journal.apply(vec![Op::Remove(id - 2)]).unwrap();
            }
            largest = largest.max(fs::metadata(&path).unwrap().len());
        }
        assert!(largest <= COMPACT_MIN_BYTES + 4096, "{largest} bytes");
        let ids: Vec<u32> = read_journal(&path)
            .unwrap()
            .iter()
            .map(|r| r.job_id)
            .collect();
        assert_eq!(ids, [19_998, 19_999]);
    }
}
