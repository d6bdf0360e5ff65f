//! Time as the controller records it: whole seconds since the Unix epoch.
//! Every decision in the controller core takes `now` as one of these; only
//! the shells read a clock.

/// Unix time in whole seconds.
pub type UnixTime = i64;
