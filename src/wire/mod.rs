//! The wire protocol, in three layers: [`frame`] (bytes ↔ frames, with a
//! maximum size), [`messages`] (the typed envelope and `Body` enum, named
//! MessagePack fields) and [`auth`] (HMAC credentials with replay protection).
//! [`connection`] is the one framed connection used by daemons and CLI alike;
//! [`signer`] decides who signs its frames (a key, or the local signer).
//! [`types`] holds the job/node/partition records that travel inside messages;
//! [`joblist`] sends lists of jobs column by column.

pub mod auth;
pub mod connection;
pub mod error;
pub mod exec;
pub mod frame;
pub mod joblist;
pub mod messages;
pub mod priority;
pub mod resv;
pub mod shares;
pub mod signer;
pub mod types;
