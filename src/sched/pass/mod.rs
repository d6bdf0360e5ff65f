//! Scheduling passes beyond the quick FIFO pass (`table::schedule`): the
//! backfill pass over a timeline of future node usage.

pub mod backfill;
pub mod timeline;

#[cfg(test)]
mod property;
#[cfg(test)]
mod resv_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod tests;
