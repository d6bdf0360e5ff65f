//! Durable controller state in sled under `StateSaveLocation`.
//!
//! `store` owns the database and the group-commit writer; `record` defines what
//! is persisted for each job. Nothing here knows about actors or the network.

pub mod acct;
pub mod store;
pub mod usage;
