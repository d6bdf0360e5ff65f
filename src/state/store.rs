//! sled-backed store with group commit.
//!
//! Writers hand a batch of operations to one writer thread and wait for its
//! acknowledgement. The thread drains whatever has queued up, applies it, and
//! makes it durable with a single `flush` before acknowledging every waiter:
//! one fsync per group, so throughput grows with concurrency instead of
//! collapsing to one fsync per request.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use thiserror::Error;
use tokio::sync::oneshot;

use crate::model::acct::AcctJob;
use crate::model::job::JobRecord;

/// Most operations applied under one flush.
const MAX_GROUP: usize = 4096;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open state store at {path}: {source}")]
    Open { path: PathBuf, source: sled::Error },
    #[error("state store I/O failed: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt {what} record under key {key}: {detail}")]
    Corrupt {
        what: &'static str,
        key: String,
        detail: String,
    },
    #[error("cannot encode {what}: {detail}")]
    Encode { what: &'static str, detail: String },
    #[error("state store writer has stopped")]
    WriterGone,
    #[error("{what} record under key {key} was written by a newer canopy (record version {version}; this one reads up to {RECORD_VERSION}): start the newer canopy-ctld")]
    TooNew {
        what: &'static str,
        key: String,
        version: u8,
    },
}

/// Stored records begin with this byte and their format version, then the
/// record as a MessagePack map with named fields. MessagePack never uses
/// 0xc1, so a record without the prefix is one written before records were
/// versioned (version 0: the same map). A field added with
/// `#[serde(default)]` needs no new version; a change older readers would
/// misread bumps [`RECORD_VERSION`], and they then refuse to start rather
/// than drop what they cannot read.
const RECORD_TAG: u8 = 0xc1;
/// The record format this build writes.
pub const RECORD_VERSION: u8 = 1;

fn encode<T: serde::Serialize>(rec: &T) -> Result<Vec<u8>, String> {
    let mut out = vec![RECORD_TAG, RECORD_VERSION];
    rmp_serde::encode::write_named(&mut out, rec).map_err(|e| e.to_string())?;
    Ok(out)
}

fn decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    key: impl std::fmt::Display,
    bytes: &[u8],
) -> Result<T, StoreError> {
    let payload = match bytes {
        [RECORD_TAG, version, rest @ ..] => {
            if *version > RECORD_VERSION {
                return Err(StoreError::TooNew {
                    what,
                    key: key.to_string(),
                    version: *version,
                });
            }
            rest
        }
        legacy => legacy,
    };
    rmp_serde::from_slice(payload).map_err(|e| StoreError::Corrupt {
        what,
        key: key.to_string(),
        detail: e.to_string(),
    })
}

/// One change to durable state.
#[derive(Debug, Clone)]
pub enum Op {
    PutJob(Box<JobRecord>),
    DeleteJob(u32),
    /// The next job id to hand out.
    NextJobId(u32),
    /// Admin state of a node (`None` clears it).
    NodeAdmin {
        name: String,
        state: Option<Vec<u8>>,
    },
    /// The accounting record of a finished job (kept for good).
    PutAcct(Box<AcctJob>),
    /// Replace one step of a finished job's stored accounting record (a
    /// node's usage report that came after the job's end); nothing if the
    /// record or step is not there.
    PutAcctStep {
        job_id: u32,
        step: Box<crate::model::acct::AcctStep>,
    },
    /// priority/multifactor's usage book, whole (replaces the last one;
    /// the jobs' ages are not in it).
    PutUsage(Box<crate::state::usage::UsageBook>),
    /// The association and QOS database as it is now (sacctmgr's changes;
    /// small, so stored whole).
    PutAccounts(Box<crate::model::assoc::AssocDb>),
    /// A reservation as it is now (created, updated or rolled forward).
    PutResv(Box<crate::model::reservation::Reservation>),
    /// A reservation deleted, ended or purged.
    DeleteResv(String),
    /// The number the next generated reservation name ends in.
    ResvSuffix(u32),
    /// priority/multifactor: pending jobs' eligible-since times (replaces
    /// the last map).
    PutAges(Box<std::collections::BTreeMap<u32, crate::model::time::UnixTime>>),
    /// A dynamic node's line, by its rank's offset past slurm.conf's nodes
    /// (`config::dynamic`): it comes back at that rank after a restart.
    PutDynNode {
        offset: u32,
        line: String,
    },
    /// A dynamic node deleted: its rank is vacant.
    DeleteDynNode(u32),
    /// The names of slurm.conf's nodes, in rank order, that the stored ranks (jobs'
    /// allocations, reservations, dynamic nodes' offsets) were written against: a restart
    /// with a different node list maps them by name (`ctld::renumber`).
    PutFileNodes(Vec<String>),
}

struct Batch {
    ops: Vec<Op>,
    done: oneshot::Sender<Result<(), String>>,
    /// All or nothing (`Store::commit_atomic`).
    atomic: bool,
}

/// Everything read back at start-up.
#[derive(Debug, Default)]
pub struct Recovered {
    pub jobs: Vec<JobRecord>,
    pub next_job_id: Option<u32>,
    /// Node name → opaque admin state bytes (decoded by the controller core).
    pub node_admin: Vec<(String, Vec<u8>)>,
    /// priority/multifactor's usage, if any was stored.
    pub usage: Option<crate::state::usage::UsageBook>,
    /// The association database (`None`: never written).
    pub accounts: Option<crate::model::assoc::AssocDb>,
    /// Reservations (see `ctld::reservations`).
    pub reservations: Vec<crate::model::reservation::Reservation>,
    /// The last generated reservation name's number.
    pub resv_suffix: Option<u32>,
    /// Dynamic nodes: (rank offset past slurm.conf's nodes, node line).
    pub dyn_nodes: Vec<(u32, String)>,
    /// slurm.conf's node names the stored ranks were written against (`None`: never
    /// stored, by a controller from before they were).
    pub file_nodes: Option<Vec<String>>,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: mpsc::Sender<Batch>,
    /// Read side of the accounting tree (sled trees are safe to read from any thread).
    acct: sled::Tree,
    /// Array id ++ task job id → (): finds an array's finished tasks.
    acct_array: sled::Tree,
    /// Fault injection for the crash-only tests: while set, every batch
    /// fails as a write of unknown outcome would, and nothing is applied.
    /// Only tests set it.
    #[cfg_attr(not(test), allow(dead_code))]
    faults: Arc<AtomicBool>,
}

struct Trees {
    db: sled::Db,
    jobs: sled::Tree,
    meta: sled::Tree,
    nodes: sled::Tree,
    acct: sled::Tree,
    acct_array: sled::Tree,
    /// Key `db`: the association database.
    accounts: sled::Tree,
    resv: sled::Tree,
    /// Dynamic nodes' lines, by rank offset (big-endian u32).
    dyn_nodes: sled::Tree,
}

/// The one key of the `accounts` tree.
const ACCOUNTS_KEY: &[u8] = b"db";

impl Store {
    /// Open (creating if needed) the store under `dir` and read everything back.
    pub fn open(dir: &Path) -> Result<(Store, Recovered), StoreError> {
        let db = sled::Config::new()
            .path(dir.join("canopy.sled"))
            // Durability comes from our explicit flush per group, not a timer.
            .flush_every_ms(None)
            .open()
            .map_err(|source| StoreError::Open {
                path: dir.to_path_buf(),
                source,
            })?;
        let trees = Trees {
            jobs: db.open_tree("jobs")?,
            meta: db.open_tree("meta")?,
            nodes: db.open_tree("nodes")?,
            acct: db.open_tree("acct")?,
            acct_array: db.open_tree("acct_array")?,
            accounts: db.open_tree("accounts")?,
            resv: db.open_tree("resv")?,
            dyn_nodes: db.open_tree("dyn_nodes")?,
            db,
        };
        let acct = trees.acct.clone();
        let acct_array = trees.acct_array.clone();
        let recovered = recover(&trees)?;
        let (tx, rx) = mpsc::channel::<Batch>();
        let faults = Arc::new(AtomicBool::new(false));
        let writer_faults = faults.clone();
        thread::Builder::new()
            .name("canopy-store".into())
            .spawn(move || writer_loop(trees, rx, writer_faults))
            .map_err(|e| StoreError::Encode {
                what: "writer thread",
                detail: e.to_string(),
            })?;
        Ok((
            Store {
                tx,
                acct,
                acct_array,
                faults,
            },
            recovered,
        ))
    }

    /// The accounting record of finished job `id`, if any.
    pub fn acct_get(&self, id: u32) -> Result<Option<AcctJob>, StoreError> {
        match self.acct.get(id.to_be_bytes())? {
            Some(v) => decode_acct(&v, id).map(Some),
            None => Ok(None),
        }
    }

    /// Job ids of the finished tasks of array `array_id`, in id order.
    pub fn acct_array_members(&self, array_id: u32) -> Result<Vec<u32>, StoreError> {
        let mut out = Vec::new();
        for item in self.acct_array.scan_prefix(array_id.to_be_bytes()) {
            let (k, _) = item?;
            if let Some(id) = k.get(4..8).and_then(|b| b.try_into().ok()) {
                out.push(u32::from_be_bytes(id));
            }
        }
        Ok(out)
    }

    /// Every finished job's record for which `keep` holds, in job id order.
    /// (A full scan: callers run it off the actor thread.)
    pub fn acct_scan(
        &self,
        mut keep: impl FnMut(&AcctJob) -> bool,
    ) -> Result<Vec<AcctJob>, StoreError> {
        let mut out = Vec::new();
        for item in self.acct.iter() {
            let (k, v) = item?;
            let id = k.as_ref().try_into().map(u32::from_be_bytes).unwrap_or(0);
            let rec = decode_acct(&v, id)?;
            if keep(&rec) {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// Make every later batch fail (`true`) as a write of unknown outcome
    /// would, or work again (`false`). For tests of crash-only behaviour.
    #[cfg(test)]
    pub(crate) fn fail_writes(&self, on: bool) {
        self.faults.store(on, Ordering::SeqCst);
    }

    /// Queue `ops`; the returned receiver resolves once they are durable.
    pub fn submit(&self, ops: Vec<Op>) -> oneshot::Receiver<Result<(), String>> {
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::SendError(batch)) = self.tx.send(Batch {
            ops,
            done,
            atomic: false,
        }) {
            let _ = batch
                .done
                .send(Err("state store writer has stopped".into()));
        }
        rx
    }

    /// Apply `ops` all or nothing, and wait until they are durable: for changes whose parts
    /// mean nothing alone (a restart's renumbering rewrites jobs, reservations, dynamic
    /// nodes and the node table the ranks refer to). Only jobs, reservations, dynamic
    /// nodes and the node table may be written so.
    pub async fn commit_atomic(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let (done, rx) = oneshot::channel();
        if self
            .tx
            .send(Batch {
                ops,
                done,
                atomic: true,
            })
            .is_err()
        {
            return Err(StoreError::WriterGone);
        }
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(detail)) => Err(StoreError::Encode {
                what: "atomic batch",
                detail,
            }),
            Err(_) => Err(StoreError::WriterGone),
        }
    }

    /// Apply `ops` and wait until they are durable.
    pub async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        match self.submit(ops).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(detail)) => Err(StoreError::Encode {
                what: "batch",
                detail,
            }),
            Err(_) => Err(StoreError::WriterGone),
        }
    }

    /// Wait until every batch queued before this call is applied and
    /// fsynced (shutdown calls it last). An empty batch through the same
    /// queue: the writer takes batches in order and acknowledges a group
    /// only after its flush, so this one's acknowledgement covers them all.
    pub async fn sync(&self) -> Result<(), StoreError> {
        self.commit(Vec::new()).await
    }
}

fn decode_acct(v: &[u8], id: u32) -> Result<AcctJob, StoreError> {
    decode("accounting", id, v)
}

/// Where the usage book lives in the `meta` tree.
const USAGE_KEY: &[u8] = b"usage";
/// Where the jobs' eligible-since times live in the `meta` tree.
const AGES_KEY: &[u8] = b"ages";
/// Where slurm.conf's node names (as the stored ranks knew them) live in the `meta` tree.
const FILE_NODES_KEY: &[u8] = b"file_nodes";

fn recover(t: &Trees) -> Result<Recovered, StoreError> {
    let mut out = Recovered::default();
    for item in t.jobs.iter() {
        let (k, v) = item?;
        let id = k.as_ref().try_into().map(u32::from_be_bytes).unwrap_or(0);
        let rec: JobRecord = decode("job", id, &v)?;
        out.jobs.push(rec);
    }
    if let Some(v) = t.meta.get(b"next_job_id")? {
        let bytes: [u8; 4] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
            what: "meta",
            key: "next_job_id".into(),
            detail: format!("expected 4 bytes, found {}", v.len()),
        })?;
        out.next_job_id = Some(u32::from_be_bytes(bytes));
    }
    for item in t.nodes.iter() {
        let (k, v) = item?;
        out.node_admin
            .push((String::from_utf8_lossy(&k).into_owned(), v.to_vec()));
    }
    if let Some(v) = t.meta.get(USAGE_KEY)? {
        let mut book: crate::state::usage::UsageBook = decode("usage", "book", &v)?;
        if let Some(v) = t.meta.get(AGES_KEY)? {
            book.accrue = decode("usage", "ages", &v)?;
        }
        out.usage = Some(book);
    }
    if let Some(v) = t.accounts.get(ACCOUNTS_KEY)? {
        out.accounts = Some(decode("accounts", "db", &v)?);
    }
    for item in t.resv.iter() {
        let (k, v) = item?;
        out.reservations
            .push(decode("reservation", String::from_utf8_lossy(&k), &v)?);
    }
    if let Some(v) = t.meta.get(b"resv_suffix")? {
        let bytes: [u8; 4] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
            what: "meta",
            key: "resv_suffix".into(),
            detail: format!("expected 4 bytes, found {}", v.len()),
        })?;
        out.resv_suffix = Some(u32::from_be_bytes(bytes));
    }
    for item in t.dyn_nodes.iter() {
        let (k, v) = item?;
        let key = String::from_utf8_lossy(&k).into_owned();
        let offset =
            k.as_ref()
                .try_into()
                .map(u32::from_be_bytes)
                .map_err(|_| StoreError::Corrupt {
                    what: "dyn_nodes",
                    key: key.clone(),
                    detail: format!("expected a 4-byte key, found {}", k.len()),
                })?;
        let line = String::from_utf8(v.to_vec()).map_err(|e| StoreError::Corrupt {
            what: "dyn_nodes",
            key,
            detail: e.to_string(),
        })?;
        out.dyn_nodes.push((offset, line));
    }
    if let Some(v) = t.meta.get(FILE_NODES_KEY)? {
        out.file_nodes = Some(decode("meta", "file_nodes", &v)?);
    }
    Ok(out)
}

fn apply(t: &Trees, op: &Op) -> Result<(), String> {
    match op {
        Op::PutJob(rec) => {
            let bytes = encode(rec.as_ref())?;
            t.jobs
                .insert(rec.job_id.to_be_bytes(), bytes)
                .map_err(|e| e.to_string())?;
        }
        Op::DeleteJob(id) => {
            t.jobs.remove(id.to_be_bytes()).map_err(|e| e.to_string())?;
        }
        Op::NextJobId(id) => {
            t.meta
                .insert(b"next_job_id", &id.to_be_bytes())
                .map_err(|e| e.to_string())?;
        }
        Op::PutAcct(rec) => {
            let bytes = encode(rec.as_ref())?;
            t.acct
                .insert(rec.job_id.to_be_bytes(), bytes)
                .map_err(|e| e.to_string())?;
            if let Some(a) = &rec.array {
                let mut key = a.array_job_id.to_be_bytes().to_vec();
                key.extend_from_slice(&rec.job_id.to_be_bytes());
                t.acct_array
                    .insert(key, &[] as &[u8])
                    .map_err(|e| e.to_string())?;
            }
        }
        Op::PutAcctStep { job_id, step } => {
            let key = job_id.to_be_bytes();
            let Some(v) = t.acct.get(key).map_err(|e| e.to_string())? else {
                return Ok(());
            };
            let mut rec = decode_acct(&v, *job_id).map_err(|e| e.to_string())?;
            let Some(slot) = rec.steps.iter_mut().find(|s| s.kind == step.kind) else {
                return Ok(());
            };
            *slot = step.as_ref().clone();
            let bytes = encode(&rec)?;
            t.acct.insert(key, bytes).map_err(|e| e.to_string())?;
        }
        Op::PutUsage(book) => {
            let bytes = encode(book.as_ref())?;
            t.meta.insert(USAGE_KEY, bytes).map_err(|e| e.to_string())?;
        }
        Op::PutAccounts(db) => {
            let bytes = encode(db.as_ref())?;
            t.accounts
                .insert(ACCOUNTS_KEY, bytes)
                .map_err(|e| e.to_string())?;
        }
        Op::PutResv(r) => {
            let bytes = encode(r.as_ref())?;
            t.resv
                .insert(r.name.as_bytes(), bytes)
                .map_err(|e| e.to_string())?;
        }
        Op::DeleteResv(name) => {
            t.resv.remove(name.as_bytes()).map_err(|e| e.to_string())?;
        }
        Op::ResvSuffix(n) => {
            t.meta
                .insert(b"resv_suffix", &n.to_be_bytes())
                .map_err(|e| e.to_string())?;
        }
        Op::PutAges(ages) => {
            let bytes = encode(ages.as_ref())?;
            t.meta.insert(AGES_KEY, bytes).map_err(|e| e.to_string())?;
        }
        Op::PutDynNode { offset, line } => {
            t.dyn_nodes
                .insert(offset.to_be_bytes(), line.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        Op::PutFileNodes(names) => {
            let bytes = encode(names)?;
            t.meta
                .insert(FILE_NODES_KEY, bytes)
                .map_err(|e| e.to_string())?;
        }
        Op::DeleteDynNode(offset) => {
            t.dyn_nodes
                .remove(offset.to_be_bytes())
                .map_err(|e| e.to_string())?;
        }
        Op::NodeAdmin { name, state } => {
            match state {
                Some(bytes) => t.nodes.insert(name.as_bytes(), bytes.as_slice()),
                None => t.nodes.remove(name.as_bytes()),
            }
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn writer_loop(t: Trees, rx: mpsc::Receiver<Batch>, faults: Arc<AtomicBool>) {
    // Fail-stop: after a batch fails (its outcome unknown: part of it may be
    // applied), every later batch fails too, so nothing decided after the
    // failure, on state that may not exist, is ever reported durable. The
    // controller stops on the first failure and recovers from disk.
    let mut broken: Option<String> = None;
    let mut group: Vec<Batch> = Vec::new();
    while let Ok(first) = rx.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(b) => group.push(b),
                Err(_) => break,
            }
        }
        let mut results: Vec<Result<(), String>> = Vec::with_capacity(group.len());
        for b in &group {
            if broken.is_none() && faults.load(Ordering::SeqCst) {
                // The tests' stand-in for a write of unknown outcome.
                broken = Some("injected write failure".into());
                results.push(Err("injected write failure".into()));
                continue;
            }
            if broken.is_some() {
                results.push(Err(stopped(&broken)));
                continue;
            }
            let r = if b.atomic {
                apply_atomic(&t, &b.ops)
            } else {
                b.ops.iter().try_for_each(|op| apply(&t, op))
            };
            if let Err(e) = &r {
                tracing::error!(error = %e, "state store write failed; failing every later write");
                broken = Some(e.clone());
            }
            results.push(r);
        }
        // One fsync covers the whole group.
        if let Err(e) = t.db.flush() {
            tracing::error!(error = %e, "state store flush failed; failing every later write");
            let e = format!("flush failed: {e}");
            for r in &mut results {
                *r = Err(e.clone());
            }
            broken.get_or_insert(e);
        }
        for (b, r) in group.drain(..).zip(results) {
            let _ = b.done.send(r);
        }
    }
}

/// `ops` in one sled transaction over the trees they touch: a crash leaves all of them or
/// none (sled writes a plain batch op by op).
fn apply_atomic(t: &Trees, ops: &[Op]) -> Result<(), String> {
    use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
    // Encoded first: the transaction closure may run more than once.
    let mut writes: Vec<(u8, Vec<u8>, Option<Vec<u8>>)> = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Op::PutJob(r) => writes.push((
                0,
                r.job_id.to_be_bytes().to_vec(),
                Some(encode(r.as_ref())?),
            )),
            Op::PutResv(r) => {
                writes.push((1, r.name.as_bytes().to_vec(), Some(encode(r.as_ref())?)))
            }
            Op::PutDynNode { offset, line } => writes.push((
                2,
                offset.to_be_bytes().to_vec(),
                Some(line.as_bytes().to_vec()),
            )),
            Op::DeleteDynNode(offset) => writes.push((2, offset.to_be_bytes().to_vec(), None)),
            Op::PutFileNodes(names) => {
                writes.push((3, FILE_NODES_KEY.to_vec(), Some(encode(names)?)))
            }
            other => return Err(format!("{other:?} cannot be written atomically")),
        }
    }
    (&t.jobs, &t.resv, &t.dyn_nodes, &t.meta)
        .transaction(|(jobs, resv, dyn_nodes, meta)| {
            for (tree, key, value) in &writes {
                let tree = match tree {
                    0 => jobs,
                    1 => resv,
                    2 => dyn_nodes,
                    _ => meta,
                };
                match value {
                    Some(v) => tree.insert(key.as_slice(), v.as_slice())?,
                    None => tree.remove(key.as_slice())?,
                };
            }
            Ok::<(), ConflictableTransactionError<String>>(())
        })
        .map_err(|e: TransactionError<String>| e.to_string())
}

/// The error every batch gets once the store has failed.
fn stopped(cause: &Option<String>) -> String {
    format!(
        "state store stopped after an earlier failure: {}",
        cause.as_deref().unwrap_or("unknown")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::ExitStatus;
    use crate::model::job::{JobState, JobSubmit};

    fn rec(id: u32) -> JobRecord {
        JobRecord {
            earlier_runs: Vec::new(),
            job_id: id,
            submit: JobSubmit {
                name: format!("j{id}"),
                ..Default::default()
            },
            partition: "debug".into(),
            time_limit_min: None,
            state: JobState::Pending,
            reason: crate::model::reason::JobReason::None,
            priority: 1,
            submit_time: 0,
            start_time: None,
            end_time: None,
            alloc: None,
            exit: ExitStatus::default(),
            restarts: 0,
            ending_as: None,
            next_step: 0,
            steps: vec![],
            array: None,
            dependency: None,
            requeue: None,
            priority_set: false,
            mail_sent: 0,
            configuring: false,
            power_up: false,
            preempted: None,
            suspend: Default::default(),
            preempt_suspended: None,
        }
    }

    /// priority/multifactor's usage is read back whole after a restart;
    /// a store without one recovers none.
    #[tokio::test]
    async fn usage_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut book = crate::state::usage::UsageBook::default();
        book.add(&["chem/alice".into(), "chem".into(), "root".into()], 1234.5);
        book.last_calc = Some(77);
        book.accrue.insert(5, 70);
        {
            let (store, rec) = Store::open(dir.path()).unwrap();
            assert_eq!(rec.usage, None);
            let ages = Box::new(book.accrue.clone());
            store
                .commit(vec![
                    Op::PutUsage(Box::new(book.clone())),
                    Op::PutAges(ages),
                ])
                .await
                .unwrap();
        }
        let (_, rec) = reopen(dir.path()).await;
        assert_eq!(rec.usage, Some(book));
    }

    /// A renumbering's writes go in all at once and read back; a batch holding a record of
    /// another kind is refused whole, nothing of it written.
    #[tokio::test]
    async fn an_atomic_batch_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (store, _) = Store::open(dir.path()).unwrap();
            store
                .commit(vec![Op::PutDynNode {
                    offset: 5,
                    line: "NodeName=d9".into(),
                }])
                .await
                .unwrap();
            store
                .commit_atomic(vec![
                    Op::PutJob(Box::new(rec(7))),
                    Op::DeleteDynNode(5),
                    Op::PutDynNode {
                        offset: 0,
                        line: "NodeName=d9".into(),
                    },
                    Op::PutFileNodes(vec!["n1".into(), "n2".into()]),
                ])
                .await
                .unwrap();
            let refused = store
                .commit_atomic(vec![Op::PutJob(Box::new(rec(8))), Op::NextJobId(9)])
                .await;
            assert!(refused.is_err());
        }
        let (_, back) = reopen(dir.path()).await;
        let ids: Vec<u32> = back.jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, [7], "job 8's batch was refused whole");
        assert_eq!(back.dyn_nodes, [(0, "NodeName=d9".to_string())]);
        assert_eq!(back.file_nodes, Some(vec!["n1".into(), "n2".into()]));
    }

    /// Open the store again once the dropped one's writer thread has let go
    /// of the database lock (it exits on its own after the drop).
    async fn reopen(dir: &std::path::Path) -> (Store, Recovered) {
        for _ in 0..200 {
            match Store::open(dir) {
                Ok(open) => return open,
                Err(e) if e.to_string().contains("lock") => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("the store's lock was never released");
    }

    #[tokio::test]
    async fn sync_waits_for_every_batch_queued_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path()).unwrap();
        let mut waits: Vec<_> = (1..=200)
            .map(|id| store.submit(vec![Op::PutJob(Box::new(rec(id)))]))
            .collect();
        store.sync().await.unwrap();
        // Each earlier batch was acknowledged (durable) before the barrier was.
        for w in &mut waits {
            assert_eq!(w.try_recv().ok(), Some(Ok(())));
        }
    }

    /// A node's usage report after the job's end replaces that step in the
    /// stored accounting record, and nothing else.
    #[tokio::test]
    async fn a_late_step_report_patches_the_stored_record() {
        use crate::model::acct::AcctJob;
        use crate::model::job::{JobState, StepKind};
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path()).unwrap();
        let step = |kind, rss| crate::model::acct::AcctStep {
            kind,
            name: "s".into(),
            state: JobState::Completed,
            exit_code: (0, 0),
            start_time: None,
            end_time: None,
            nodes: "n1".into(),
            num_nodes: 1,
            num_tasks: 1,
            alloc_cpus: 1,
            max_rss_kb: rss,
            max_vmsize_kb: 0,
            user_cpu_ms: 0,
            system_cpu_ms: 0,
            srun_host: String::new(),
            srun_pid: 0,
            usage: Default::default(),
        };
        let acct = AcctJob {
            job_id: 4,
            steps: vec![step(StepKind::Batch, 5), step(StepKind::Numbered(0), 0)],
            ..Default::default()
        };
        store
            .commit(vec![Op::PutAcct(Box::new(acct))])
            .await
            .unwrap();
        let patch = |job_id| Op::PutAcctStep {
            job_id,
            step: Box::new(step(StepKind::Numbered(0), 777)),
        };
        // A job with no stored record: nothing to patch, no error.
        store.commit(vec![patch(4), patch(5)]).await.unwrap();
        let back = store.acct_get(4).unwrap().unwrap();
        assert_eq!(back.steps[0].max_rss_kb, 5);
        assert_eq!(back.steps[1].max_rss_kb, 777);
        assert!(store.acct_get(5).unwrap().is_none());
    }

    #[tokio::test]
    async fn committed_state_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (store, rec0) = Store::open(dir.path()).unwrap();
            assert!(rec0.jobs.is_empty());
            let mut waits = Vec::new();
            for id in 1..=50 {
                waits
                    .push(store.submit(vec![Op::PutJob(Box::new(rec(id))), Op::NextJobId(id + 1)]));
            }
            for w in waits {
                w.await.unwrap().unwrap();
            }
            store.commit(vec![Op::DeleteJob(7)]).await.unwrap();
            store
                .commit(vec![Op::NodeAdmin {
                    name: "n1".into(),
                    state: Some(vec![1, 2]),
                }])
                .await
                .unwrap();
        }
        let (_store, back) = reopen(dir.path()).await;
        assert_eq!(back.jobs.len(), 49);
        assert!(back.jobs.iter().all(|j| j.job_id != 7));
        assert_eq!(back.next_job_id, Some(51));
        assert_eq!(back.node_admin, vec![("n1".to_string(), vec![1, 2])]);
        assert!(back.accounts.is_none());
    }

    /// The association database comes back as it was last written.
    #[tokio::test]
    async fn the_account_database_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = crate::model::assoc::AssocDb::default();
        db.ensure_cluster("c1");
        {
            let (store, _) = Store::open(dir.path()).unwrap();
            store
                .commit(vec![Op::PutAccounts(Box::new(db.clone()))])
                .await
                .unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let (_store, back) = Store::open(dir.path()).unwrap();
        assert_eq!(back.accounts, Some(db));
    }

    #[test]
    fn records_carry_their_version_and_old_or_newer_ones_are_told_apart() {
        let r = rec(3);
        let bytes = encode(&r).unwrap();
        assert_eq!(&bytes[..2], &[RECORD_TAG, RECORD_VERSION]);
        assert_eq!(decode::<JobRecord>("job", 3, &bytes).unwrap(), r);
        // A record from before versions (a bare named map) still reads.
        let legacy = rmp_serde::to_vec_named(&r).unwrap();
        assert_eq!(decode::<JobRecord>("job", 3, &legacy).unwrap(), r);
        // One from a newer canopy is refused by name, not misread.
        let mut newer = bytes.clone();
        newer[1] = RECORD_VERSION + 1;
        let e = decode::<JobRecord>("job", 3, &newer).unwrap_err();
        assert!(matches!(e, StoreError::TooNew { version, .. } if version == RECORD_VERSION + 1));
        assert!(e.to_string().contains("newer canopy"), "{e}");
        // Garbage is corrupt, with the key named.
        let e = decode::<JobRecord>("job", 3, &[RECORD_TAG, 1, 0xff, 0x00]).unwrap_err();
        assert!(
            e.to_string().contains("corrupt job record under key 3"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_failed_write_applies_nothing_and_fails_every_later_one() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (store, _) = Store::open(dir.path()).unwrap();
            store
                .commit(vec![Op::PutJob(Box::new(rec(1)))])
                .await
                .unwrap();
            store.fail_writes(true);
            let r = store
                .submit(vec![Op::PutJob(Box::new(rec(2)))])
                .await
                .unwrap();
            assert_eq!(r, Err("injected write failure".to_string()));
            // Fail-stop: the store works again, but nothing after the
            // failure is written or reported durable.
            store.fail_writes(false);
            let r = store
                .submit(vec![Op::PutJob(Box::new(rec(3)))])
                .await
                .unwrap();
            assert!(r.is_err_and(|e| e.contains("stopped after an earlier failure")));
        }
        let (_store, back) = reopen(dir.path()).await;
        let ids: Vec<u32> = back.jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, vec![1]);
    }
}
