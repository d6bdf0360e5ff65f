//! Who may run `canopy exec` where: root and operators on any node; any
//! other user only on the nodes where a job of theirs is running now (what
//! Slurm's `pam_slurm_adopt` allows for ssh). Pure; the controller gathers
//! the caller's running allocations and applies this before sending anything.

use crate::tree::rankset::RankSet;

/// `Ok` when the caller may run on every rank of `requested`; otherwise the
/// ranks refused. `own` is the union of the caller's running jobs' nodes.
pub fn check(operator: bool, requested: &RankSet, own: &RankSet) -> Result<(), RankSet> {
    if operator {
        return Ok(());
    }
    let refused = requested.difference(own);
    if refused.is_empty() {
        Ok(())
    } else {
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_run_anywhere() {
        let all = RankSet::from_range(0..100);
        assert_eq!(check(true, &all, &RankSet::new()), Ok(()));
    }

    #[test]
    fn users_run_only_where_their_jobs_run() {
        let own = RankSet::from_range(2..5);
        assert_eq!(check(false, &RankSet::from_range(2..5), &own), Ok(()));
        assert_eq!(check(false, &RankSet::from_ranks([3]), &own), Ok(()));
        assert_eq!(
            check(false, &RankSet::from_range(0..6), &own),
            Err(RankSet::from_ranks([0, 1, 5])),
            "every node outside the job is named"
        );
        assert_eq!(
            check(false, &RankSet::from_ranks([7]), &RankSet::new()),
            Err(RankSet::from_ranks([7])),
            "no job at all"
        );
    }
}
