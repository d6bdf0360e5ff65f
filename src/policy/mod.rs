//! Policy: who may do what ([`authz`]) and what a job may ask for
//! ([`admission`], with the size bounds of [`limits`]). Pure functions over the configuration and the request;
//! the controller core calls them for every submission, update and step, so
//! each rule lives in one place. QOS and association limits will join the
//! admission check here.

pub mod admission;
pub mod authz;
pub mod limits;
