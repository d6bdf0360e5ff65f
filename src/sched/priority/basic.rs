//! priority/basic, Slurm's default before 23.11: every job that becomes
//! eligible (submitted unheld, or released) gets a priority one below the
//! last one handed out, so the queue is first come, first served until an
//! operator sets a priority or `scontrol top` reorders a user's jobs.

/// The first priority handed out is one below this (Slurm's value).
pub const TOP_PRIORITY: u32 = 0xFFFF_0000;

/// The count-down of priority/basic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasicPriority {
    lowest: u32,
}

impl BasicPriority {
    /// Resume after a restart below every priority handed out before.
    /// Operator-set priorities do not count: a job an operator pushed down
    /// stays behind the jobs submitted after it, as before the restart.
    /// `jobs`: each recovered job's (priority, set by an operator).
    pub fn recover(jobs: impl IntoIterator<Item = (u32, bool)>) -> BasicPriority {
        let lowest = jobs
            .into_iter()
            .filter(|&(p, set)| p > 1 && !set)
            .map(|(p, _)| p)
            .min()
            .unwrap_or(TOP_PRIORITY)
            .min(TOP_PRIORITY);
        BasicPriority { lowest }
    }

    /// The next eligible job's priority (never below 1).
    pub fn assign(&mut self) -> u32 {
        if self.lowest > 1 {
            self.lowest -= 1;
        }
        self.lowest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_down_from_slurms_top_and_resumes_below_what_was_given() {
        let mut p = BasicPriority::recover([]);
        assert_eq!((p.assign(), p.assign()), (4_294_901_759, 4_294_901_758));
        // Held jobs (0), and an operator's low value, do not pull it down.
        let jobs = [(0, false), (4_294_901_700, false), (5, true)];
        assert_eq!(BasicPriority::recover(jobs).assign(), 4_294_901_699);
        let mut floor = BasicPriority { lowest: 2 };
        assert_eq!((floor.assign(), floor.assign()), (1, 1));
    }
}
