//! The controller core (see core.rs).
