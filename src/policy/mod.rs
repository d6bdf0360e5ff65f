//! Policy: who may do what ([`authz`]) and what a job may ask for
//! ([`admission`], with the size bounds of [`limits`]). Pure functions over the configuration and the request;
//! the controller core calls them for every submission, update and step, so
//! each rule lives in one place. Associations and QOS: [`assoc`] at
//! submit, [`assoc_gate`] the run limits each scheduling pass consults,
//! [`tres_mins`] the arithmetic of `GrpTRESMins` and `GrpWall`.

pub mod admission;
pub mod assoc;
pub mod assoc_gate;
#[cfg(test)]
mod assoc_tests;
pub mod authz;
pub mod limits;
#[cfg(test)]
mod minutes_tests;
pub mod partition;
pub mod tres_mins;
