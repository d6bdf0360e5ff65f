//! `GrpTRESMins` and `GrpWall`: the arithmetic Slurm 22.05's
//! `acct_policy.c` does for them, on plain numbers. A limit is compared
//! with the decayed usage of the association or QOS (whole minutes,
//! truncated as Slurm truncates them) and, under
//! `AccountingStorageEnforce=safe`, with what the job would add by its
//! time limit plus what running jobs are still committed to (their TRES
//! × the minutes left to their limits). Pure: callers pass the numbers.

use crate::model::assoc::reason::TresKind;
use crate::model::assoc::Tres;

use super::assoc::JobTres;

/// Minutes standing for a job without a time limit (Slurm's `INFINITE`):
/// under `safe`, such a job can never fit a minutes limit.
pub const NO_LIMIT_MINS: u64 = 0xffff_fffe;

/// How a minutes limit stands for one job (Slurm's
/// `acct_policy_tres_usage_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinsCheck {
    Okay,
    /// The usage alone has reached the limit.
    UsedUp,
    /// `safe`: the job's TRES × its time limit alone pass the limit.
    JobTooBig,
    /// `safe`: the job plus what running jobs are committed to pass what
    /// is left.
    NotSafe,
}

/// One association's or QOS's used minutes (decayed, truncated): per
/// TRES and of wall time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MinsUse {
    pub used: JobTres,
    pub wall_used: u64,
}

/// Check `limits` (`GrpTRESMins`) for a job asking for `req` for
/// `time_limit` minutes, given the minutes `used` and those running jobs
/// are `committed` to, skipping TRES a QOS limits instead (`skip`). The
/// first TRES that fails and how, in the limit's order. A TRES the job
/// does not ask for never holds it.
pub fn check_tres_mins(
    limits: &Tres,
    skip: &[&Tres],
    used: &JobTres,
    committed: &JobTres,
    req: &JobTres,
    time_limit: u64,
    safe: bool,
) -> Option<(TresKind, MinsCheck)> {
    for (name, &limit) in &limits.0 {
        if skip.iter().any(|s| s.get(name).is_some()) {
            continue;
        }
        let asked = req
            .get(name)
            .copied()
            .unwrap_or(0)
            .saturating_mul(time_limit);
        if asked == 0 {
            continue;
        }
        let used = used.get(name).copied().unwrap_or(0);
        let kind = TresKind::of(name);
        if used >= limit {
            return Some((kind, MinsCheck::UsedUp));
        }
        if safe {
            if asked > limit {
                return Some((kind, MinsCheck::JobTooBig));
            }
            let committed = committed.get(name).copied().unwrap_or(0);
            if asked.saturating_add(committed) > limit - used {
                return Some((kind, MinsCheck::NotSafe));
            }
        }
    }
    None
}

/// `GrpWall` for a job with `time_limit` minutes: held when the wall
/// minutes used have reached the limit, and under `safe` when the job's
/// limit would pass it (Slurm does not count running jobs' remaining
/// wall time here, only their usage so far).
pub fn wall_blocks(limit: u32, wall_used: u64, time_limit: u64, safe: bool) -> bool {
    let limit = u64::from(limit);
    wall_used >= limit || (safe && wall_used.saturating_add(time_limit) > limit)
}

/// A running job's TRES × `mins` (its request or its remaining time),
/// the way Slurm multiplies them.
pub fn times(tres: &JobTres, mins: u64) -> JobTres {
    tres.iter()
        .map(|(k, v)| (k.clone(), v.saturating_mul(mins)))
        .collect()
}

/// Which minutes limit a running job's group has used up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overrun {
    /// `GrpTRESMins`: the TRES, its limit and the minutes used.
    Tres(String, u64, u64),
    /// `GrpWall`: the limit and the wall minutes used.
    Wall(u32, u64),
}

/// Whether a running job is to be stopped (Slurm's
/// `acct_policy_job_time_out`, which runs only without `safe`): a
/// `GrpTRESMins` the job's TRES count against is used up (TRES a QOS
/// limits instead, `skip`, aside), or `GrpWall` is.
pub fn over_while_running(
    tres_limits: &Tres,
    skip: &[&Tres],
    wall_limit: Option<u32>,
    u: &MinsUse,
    held: &JobTres,
) -> Option<Overrun> {
    for (name, &limit) in &tres_limits.0 {
        if skip.iter().any(|s| s.get(name).is_some()) {
            continue;
        }
        if held.get(name).copied().unwrap_or(0) == 0 {
            continue;
        }
        let used = u.used.get(name).copied().unwrap_or(0);
        if used >= limit {
            return Some(Overrun::Tres(name.clone(), limit, used));
        }
    }
    match wall_limit {
        Some(l) if u.wall_used >= u64::from(l) => Some(Overrun::Wall(l, u.wall_used)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn tres(pairs: &[(&str, u64)]) -> Tres {
        Tres(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    fn jt(pairs: &[(&str, u64)]) -> JobTres {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn usage_alone_holds_without_safe_and_the_job_size_with_it() {
        let lim = tres(&[("cpu", 100)]);
        let check = |used: &[(&str, u64)], committed: &[(&str, u64)], cpus: u64, safe| {
            let req = jt(&[("cpu", cpus), ("mem", 1000)]);
            check_tres_mins(&lim, &[], &jt(used), &jt(committed), &req, 10, safe)
        };
        // Not reached: runs without safe whatever it asks.
        assert_eq!(check(&[("cpu", 60)], &[], 5, false), None);
        // Safe: 60 used + 50 asked passes 100.
        assert_eq!(
            check(&[("cpu", 60)], &[], 5, true),
            Some((TresKind::Cpu, MinsCheck::NotSafe))
        );
        // Committed running jobs count too under safe.
        assert_eq!(
            check(&[("cpu", 10)], &[("cpu", 45)], 5, true),
            Some((TresKind::Cpu, MinsCheck::NotSafe))
        );
        assert_eq!(check(&[("cpu", 10)], &[("cpu", 40)], 5, true), None);
        // A job bigger than the limit itself.
        assert_eq!(
            check(&[], &[], 11, true),
            Some((TresKind::Cpu, MinsCheck::JobTooBig))
        );
        // Without a time limit it never fits under safe.
        let req = jt(&[("cpu", 1)]);
        let none = JobTres::new();
        assert_eq!(
            check_tres_mins(&lim, &[], &none, &none, &req, NO_LIMIT_MINS, true),
            Some((TresKind::Cpu, MinsCheck::JobTooBig))
        );
        // Reached: held with or without safe.
        assert_eq!(
            check(&[("cpu", 100)], &[], 1, false),
            Some((TresKind::Cpu, MinsCheck::UsedUp))
        );
        // ... unless a QOS limits cpu minutes instead.
        let q = tres(&[("cpu", 1)]);
        let used = jt(&[("cpu", 100)]);
        assert_eq!(
            check_tres_mins(&lim, &[&q], &used, &none, &req, 10, false),
            None
        );
        // A TRES the job does not ask for never holds it.
        let gpu = tres(&[("gres/gpu", 5)]);
        let used = jt(&[("gres/gpu", 9)]);
        assert_eq!(
            check_tres_mins(&gpu, &[], &used, &none, &req, 10, true),
            None
        );
    }

    #[test]
    fn wall_is_used_minutes_plus_the_jobs_limit_under_safe() {
        assert!(!wall_blocks(60, 59, 30, false));
        assert!(wall_blocks(60, 60, 1, false));
        assert!(wall_blocks(60, 31, 30, true));
        assert!(!wall_blocks(60, 30, 30, true));
        assert!(wall_blocks(60, 0, NO_LIMIT_MINS, true));
    }

    #[test]
    fn running_jobs_stop_when_a_limit_they_count_for_is_used_up() {
        let lim = tres(&[("cpu", 100), ("gres/gpu", 10)]);
        let u = MinsUse {
            used: jt(&[("cpu", 99), ("gres/gpu", 10)]),
            wall_used: 5,
        };
        let cpu_only = jt(&[("cpu", 4)]);
        assert_eq!(over_while_running(&lim, &[], None, &u, &cpu_only), None);
        let with_gpu = jt(&[("cpu", 4), ("gres/gpu", 1)]);
        assert_eq!(
            over_while_running(&lim, &[], None, &u, &with_gpu),
            Some(Overrun::Tres("gres/gpu".into(), 10, 10))
        );
        // A QOS limiting GPU minutes replaces the association's.
        let q = tres(&[("gres/gpu", 1000)]);
        assert_eq!(over_while_running(&lim, &[&q], None, &u, &with_gpu), None);
        assert_eq!(
            over_while_running(&Tres::default(), &[], Some(5), &u, &cpu_only),
            Some(Overrun::Wall(5, 5))
        );
        assert_eq!(
            over_while_running(&Tres::default(), &[], Some(6), &u, &cpu_only),
            None
        );
    }

    /// With `safe`, whatever order jobs come in, the jobs admitted never
    /// commit more than the limit: used + committed + the job <= limit.
    #[test]
    fn safe_never_commits_past_the_limit() {
        let seed: u64 = std::env::var("TRES_MINS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        println!("tres_mins seed: {seed} (replay with TRES_MINS_SEED={seed})");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..500 {
            let limit = rng.gen_range(1..5_000u64);
            let lim = tres(&[("cpu", limit)]);
            let used = jt(&[("cpu", rng.gen_range(0..limit + 50))]);
            let mut committed = jt(&[("cpu", 0)]);
            for _ in 0..rng.gen_range(1..40) {
                let req = jt(&[("cpu", rng.gen_range(1..64u64))]);
                let mins = rng.gen_range(1..200u64);
                if check_tres_mins(&lim, &[], &used, &committed, &req, mins, true).is_none() {
                    *committed.entry("cpu".into()).or_default() += req["cpu"] * mins;
                }
                let c = committed["cpu"];
                assert!(
                    c == 0 || used["cpu"] + c <= limit,
                    "seed {seed}: used {} + committed {c} > {limit}",
                    used["cpu"]
                );
            }
        }
    }
}
