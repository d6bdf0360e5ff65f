//! Admission and authorization policy.
