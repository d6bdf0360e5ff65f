//! sled-backed store with group commit.
//!
//! Writers hand a batch of operations to one writer thread and wait for its
//! acknowledgement. The thread drains whatever has queued up, applies it, and
//! makes it durable with a single `flush` before acknowledging every waiter:
//! one fsync per group, so throughput grows with concurrency instead of
//! collapsing to one fsync per request.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
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
}

struct Batch {
    ops: Vec<Op>,
    done: oneshot::Sender<Result<(), String>>,
}

/// Everything read back at start-up.
#[derive(Debug, Default)]
pub struct Recovered {
    pub jobs: Vec<JobRecord>,
    pub next_job_id: Option<u32>,
    /// Node name → opaque admin state bytes (decoded by the node actor).
    pub node_admin: Vec<(String, Vec<u8>)>,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: mpsc::Sender<Batch>,
    /// Read side of the accounting tree (sled trees are safe to read from any thread).
    acct: sled::Tree,
    /// Array id ++ task job id → (): finds an array's finished tasks.
    acct_array: sled::Tree,
}

struct Trees {
    db: sled::Db,
    jobs: sled::Tree,
    meta: sled::Tree,
    nodes: sled::Tree,
    acct: sled::Tree,
    acct_array: sled::Tree,
}

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
            db,
        };
        let acct = trees.acct.clone();
        let acct_array = trees.acct_array.clone();
        let recovered = recover(&trees)?;
        let (tx, rx) = mpsc::channel::<Batch>();
        thread::Builder::new()
            .name("canopy-store".into())
            .spawn(move || writer_loop(trees, rx))
            .map_err(|e| StoreError::Encode {
                what: "writer thread",
                detail: e.to_string(),
            })?;
        Ok((
            Store {
                tx,
                acct,
                acct_array,
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

    /// Queue `ops`; the returned receiver resolves once they are durable.
    pub fn submit(&self, ops: Vec<Op>) -> oneshot::Receiver<Result<(), String>> {
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::SendError(batch)) = self.tx.send(Batch { ops, done }) {
            let _ = batch
                .done
                .send(Err("state store writer has stopped".into()));
        }
        rx
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
    rmp_serde::from_slice(v).map_err(|e| StoreError::Corrupt {
        what: "accounting",
        key: id.to_string(),
        detail: e.to_string(),
    })
}

fn recover(t: &Trees) -> Result<Recovered, StoreError> {
    let mut out = Recovered::default();
    for item in t.jobs.iter() {
        let (k, v) = item?;
        let rec: JobRecord = rmp_serde::from_slice(&v).map_err(|e| StoreError::Corrupt {
            what: "job",
            key: format!("{k:?}"),
            detail: e.to_string(),
        })?;
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
    Ok(out)
}

fn apply(t: &Trees, op: &Op) -> Result<(), String> {
    match op {
        Op::PutJob(rec) => {
            let bytes = rmp_serde::to_vec_named(rec.as_ref()).map_err(|e| e.to_string())?;
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
            let bytes = rmp_serde::to_vec_named(rec.as_ref()).map_err(|e| e.to_string())?;
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

fn writer_loop(t: Trees, rx: mpsc::Receiver<Batch>) {
    let mut group: Vec<Batch> = Vec::new();
    while let Ok(first) = rx.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(b) => group.push(b),
                Err(_) => break,
            }
        }
        let mut results: Vec<Result<(), String>> = group
            .iter()
            .map(|b| b.ops.iter().try_for_each(|op| apply(&t, op)))
            .collect();
        // One fsync covers the whole group.
        if let Err(e) = t.db.flush() {
            tracing::error!(error = %e, "state store flush failed");
            for r in &mut results {
                *r = Err(format!("flush failed: {e}"));
            }
        }
        for (b, r) in group.drain(..).zip(results) {
            let _ = b.done.send(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::ExitStatus;
    use crate::model::job::{JobState, JobSubmit};

    fn rec(id: u32) -> JobRecord {
        JobRecord {
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
        }
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
        // Give the old writer thread time to drop the db handle.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let (_store, back) = Store::open(dir.path()).unwrap();
        assert_eq!(back.jobs.len(), 49);
        assert!(back.jobs.iter().all(|j| j.job_id != 7));
        assert_eq!(back.next_job_id, Some(51));
        assert_eq!(back.node_admin, vec![("n1".to_string(), vec![1, 2])]);
    }
}
