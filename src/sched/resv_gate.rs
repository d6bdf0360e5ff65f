//! The start gates for advance reservations and licenses (see `gate.rs`).
//!
//! Both are built once per scheduling pass from the reservations and the
//! running jobs, so each question a pass asks per job is a few lookups:
//! the node sets are bitmaps by rank, the license counts a small map.

use std::cell::RefCell;
use std::collections::HashMap;

use super::gate::StartGate;
use crate::model::job::{Allocation, JobRecord};
use crate::model::reason::JobReason;
use crate::model::reservation::{parse_licenses, Reservation, ResvFlag};
use crate::model::time::UnixTime;

/// One reservation's node window, as the gate needs it.
struct Window {
    name: String,
    start: UnixTime,
    /// Indexed by rank.
    nodes: Vec<bool>,
    maint: bool,
    flex: bool,
    holds_nodes: bool,
}

/// Keeps jobs outside a reservation off its nodes while it is active, or
/// would become active before they end; keeps a job that asks for one on
/// its nodes, and waiting until it starts.
pub struct ResvGate {
    windows: Vec<Window>,
    /// Nodes of every active reservation that holds nodes (a job outside
    /// all of them may use none of these).
    active: Vec<bool>,
    /// Some node is in `active` (so a pass without reservations asks
    /// nothing per node).
    any_active: bool,
    active_maint: Vec<bool>,
    /// Future windows by start: the ones a job's time limit reaches.
    future: Vec<usize>,
    /// What jobs outside every reservation may use, by how many future
    /// windows their time limit reaches: (the candidates asked about, the
    /// nodes left (`None`: all of them), whether MAINT took any). Jobs of
    /// one partition share the answer, so a pass filters each partition's
    /// nodes a few times, not once per job.
    outside_cache: RefCell<HashMap<usize, Vec<Outside>>>,
}

/// One cached answer for jobs outside reservations.
struct Outside {
    candidates: Vec<u32>,
    kept: Option<Vec<u32>>,
    maint: bool,
}

impl ResvGate {
    /// The gate for a pass at `now` over `node_count` nodes.
    pub fn new<'a>(
        resvs: impl IntoIterator<Item = &'a Reservation>,
        node_count: usize,
        now: UnixTime,
    ) -> ResvGate {
        let mut active = vec![false; node_count];
        let mut active_maint = vec![false; node_count];
        let mut windows = Vec::new();
        let mut future = Vec::new();
        let mut any_active = false;
        for r in resvs.into_iter().filter(|r| r.end > now) {
            let mut nodes = vec![false; node_count];
            for &rank in &r.ranks {
                if let Some(n) = nodes.get_mut(rank as usize) {
                    *n = true;
                }
            }
            let w = Window {
                name: r.name.clone(),
                start: r.start,

                maint: r.has(ResvFlag::Maint),
                flex: r.has(ResvFlag::Flex),
                holds_nodes: r.holds_nodes(),
                nodes,
            };
            if w.holds_nodes {
                if r.active(now) {
                    any_active |= !r.ranks.is_empty();
                    for (i, &n) in w.nodes.iter().enumerate() {
                        if n {
                            active[i] = true;
                            active_maint[i] |= w.maint;
                        }
                    }
                } else {
                    future.push(windows.len());
                }
            }
            windows.push(w);
        }
        future.sort_by_key(|&i| windows[i].start);
        ResvGate {
            windows,
            active,
            any_active,
            active_maint,
            future,
            outside_cache: RefCell::default(),
        }
    }

    fn window(&self, name: &str) -> Option<&Window> {
        self.windows.iter().find(|w| w.name == name)
    }

    /// The end of `job`'s window if it started now (`None`: no limit).
    fn job_end(job: &JobRecord, now: UnixTime) -> Option<UnixTime> {
        job.time_limit_min.map(|m| now + i64::from(m) * 60)
    }

    /// For a job outside every reservation: `candidates` less what
    /// reservations hold in `[now, end)` (`None`: nothing taken), and
    /// whether MAINT took any; from the cache when a job of the same
    /// partition reaching the same windows asked before.
    fn outside_all(
        &self,
        candidates: &[u32],
        now: UnixTime,
        end: Option<UnixTime>,
    ) -> (Option<Vec<u32>>, bool) {
        let reached = match end {
            None => self.future.len(),
            Some(e) => self.future.partition_point(|&i| self.windows[i].start < e),
        };
        let mut cache = self.outside_cache.borrow_mut();
        let entries = cache.entry(reached).or_default();
        if let Some(hit) = entries.iter().find(|o| o.candidates == candidates) {
            return (hit.kept.clone(), hit.maint);
        }
        let (kept, maint) = self.outside(candidates, None, now, end);
        let kept = (kept.len() != candidates.len()).then_some(kept);
        entries.push(Outside {
            candidates: candidates.to_vec(),
            kept: kept.clone(),
            maint,
        });
        (kept, maint)
    }

    /// `candidates` less the nodes reservations other than `own` hold in
    /// `[now, end)`; and whether a MAINT one took any.
    fn outside(
        &self,
        candidates: &[u32],
        own: Option<&str>,
        now: UnixTime,
        end: Option<UnixTime>,
    ) -> (Vec<u32>, bool) {
        let reaching: Vec<&Window> = self
            .future
            .iter()
            .map(|&i| &self.windows[i])
            .take_while(|w| end.is_none_or(|e| w.start < e))
            .chain(
                // An own active window is skipped below; others' are in `active`.
                self.windows
                    .iter()
                    .filter(|w| own.is_some() && w.holds_nodes && w.start <= now),
            )
            .filter(|w| Some(w.name.as_str()) != own)
            .collect();
        let mut maint = false;
        let kept = candidates
            .iter()
            .copied()
            .filter(|&r| {
                let i = r as usize;
                let by_active = own.is_none() && self.active.get(i).copied().unwrap_or(false);
                let hit = by_active
                    || reaching
                        .iter()
                        .any(|w| w.nodes.get(i).copied().unwrap_or(false));
                if hit {
                    maint |= (own.is_none() && self.active_maint.get(i).copied().unwrap_or(false))
                        || reaching
                            .iter()
                            .any(|w| w.maint && w.nodes.get(i).copied().unwrap_or(false));
                }
                !hit
            })
            .collect();
        (kept, maint)
    }
}

/// The reason a job waits when the nodes left to it are too few.
fn too_few(maint: bool) -> JobReason {
    if maint {
        JobReason::ReqNodeNotAvailMaint
    } else {
        JobReason::Resources
    }
}

impl StartGate for ResvGate {
    fn restrict(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        now: UnixTime,
    ) -> Option<Result<Vec<u32>, JobReason>> {
        let need = job.submit.min_nodes.unwrap_or(1).max(1) as usize;
        let end = Self::job_end(job, now);
        match job.submit.reservation.as_deref() {
            Some(name) => {
                let Some(w) = self.window(name) else {
                    return Some(Err(JobReason::ReservationDeleted));
                };
                if w.start > now && !w.flex {
                    return Some(Err(JobReason::Reservation));
                }
                if !w.holds_nodes || w.flex {
                    // Its own nodes and any free of other reservations.
                    let (mut kept, maint) = self.outside(candidates, Some(name), now, end);
                    if w.flex && w.holds_nodes {
                        // Its own nodes first: they are what it reserved.
                        kept.sort_by_key(|&r| !w.nodes.get(r as usize).copied().unwrap_or(false));
                    }
                    return Some(if kept.len() < need {
                        Err(too_few(maint))
                    } else {
                        Ok(kept)
                    });
                }
                let mine: Vec<u32> = candidates
                    .iter()
                    .copied()
                    .filter(|&r| w.nodes.get(r as usize).copied().unwrap_or(false))
                    .collect();
                // Nor past its end onto a reservation that follows it.
                let (kept, maint) = self.outside(&mine, Some(name), now, end);
                Some(if kept.len() < need {
                    Err(too_few(maint))
                } else {
                    Ok(kept)
                })
            }
            None => {
                let reaches_future = self
                    .future
                    .first()
                    .is_some_and(|&i| end.is_none_or(|e| self.windows[i].start < e));
                if !reaches_future && !self.any_active {
                    return None;
                }
                let (kept, maint) = self.outside_all(candidates, now, end);
                let kept = kept?;
                Some(if kept.len() < need {
                    Err(too_few(maint))
                } else {
                    Ok(kept)
                })
            }
        }
    }
}

/// Counts licenses: a job waits (reason `Licenses`) until what it asks for
/// is free, less what active reservations hold for their own jobs.
pub struct LicenseGate {
    total: HashMap<String, u32>,
    used: HashMap<String, u32>,
    /// Per active reservation with licenses: what it holds, less what its
    /// own running jobs use.
    held: Vec<(String, HashMap<String, u32>)>,
}

impl LicenseGate {
    /// `running`: the jobs holding licenses now.
    pub fn new<'a, 'r>(
        total: &[(String, u32)],
        running: impl Iterator<Item = &'a JobRecord>,
        resvs: impl IntoIterator<Item = &'r Reservation>,
        now: UnixTime,
    ) -> LicenseGate {
        let mut g = LicenseGate {
            total: total.iter().cloned().collect(),
            used: HashMap::new(),
            held: resvs
                .into_iter()
                .filter(|r| r.active(now) && !r.licenses.is_empty())
                .map(|r| (r.name.clone(), r.licenses.iter().cloned().collect()))
                .collect(),
        };
        if g.total.is_empty() {
            return g;
        }
        for j in running {
            g.take(j);
        }
        g
    }

    /// What `job` asks for (nothing if it asks for none, or unreadably:
    /// admission refused those).
    fn asked(job: &JobRecord) -> Vec<(String, u32)> {
        job.submit
            .licenses
            .as_deref()
            .and_then(|l| parse_licenses(l).ok())
            .unwrap_or_default()
    }

    fn take(&mut self, job: &JobRecord) {
        let own = job.submit.reservation.as_deref();
        for (name, n) in Self::asked(job) {
            *self.used.entry(name.clone()).or_default() += n;
            if let Some((_, held)) = self.held.iter_mut().find(|(r, _)| Some(r.as_str()) == own) {
                if let Some(h) = held.get_mut(&name) {
                    *h = h.saturating_sub(n);
                }
            }
        }
    }

    /// How many of `name` a job in reservation `own` could take now.
    pub fn free(&self, name: &str, own: Option<&str>) -> u32 {
        let total = self.total.get(name).copied().unwrap_or(0);
        let used = self.used.get(name).copied().unwrap_or(0);
        let held: u32 = self
            .held
            .iter()
            .filter(|(r, _)| Some(r.as_str()) != own)
            .filter_map(|(_, h)| h.get(name))
            .sum();
        total.saturating_sub(used).saturating_sub(held)
    }
}

impl StartGate for LicenseGate {
    fn blocked(&self, job: &JobRecord, _now: UnixTime) -> Option<JobReason> {
        job.submit.licenses.as_ref()?;
        let own = job.submit.reservation.as_deref();
        Self::asked(job)
            .iter()
            .any(|(name, n)| *n > self.free(name, own))
            .then_some(JobReason::Licenses)
    }

    fn started(&mut self, job: &JobRecord, _alloc: &Allocation, _now: UnixTime) {
        if job.submit.licenses.is_some() {
            self.take(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{JobState, JobSubmit};
    use crate::model::reservation::AccessList;

    fn resv(name: &str, start: i64, end: i64, ranks: &[u32], flags: &[ResvFlag]) -> Reservation {
        Reservation {
            name: name.into(),
            start,
            end,
            ranks: ranks.to_vec(),
            node_list: String::new(),
            cpus: 0,
            partition: None,
            features: None,
            users: AccessList::default(),
            accounts: AccessList::default(),
            flags: flags.to_vec(),
            purge_secs: None,
            licenses: vec![],
        }
    }

    fn job(resv: Option<&str>, limit_min: Option<u32>, nodes: u32, lic: Option<&str>) -> JobRecord {
        JobRecord {
            earlier_runs: Vec::new(),
            job_id: 1,
            submit: JobSubmit {
                reservation: resv.map(str::to_string),
                licenses: lic.map(str::to_string),
                min_nodes: Some(nodes),
                ..Default::default()
            },
            partition: "p".into(),
            time_limit_min: limit_min,
            state: JobState::Pending,
            reason: JobReason::None,
            priority: 1,
            submit_time: 0,
            start_time: None,
            end_time: None,
            alloc: None,
            exit: Default::default(),
            restarts: 0,
            ending_as: None,
            next_step: 0,
            steps: vec![],
            array: None,
            dependency: None,
            requeue: None,
            priority_set: false,
            mail_sent: 0,
            configuring: false,
            preempted: None,
            suspend: Default::default(),
            preempt_suspended: None,
        }
    }

    const ALL: &[u32] = &[0, 1, 2, 3];

    #[test]
    fn jobs_outside_keep_off_active_reservations_and_ones_their_limit_reaches() {
        let g = ResvGate::new(
            &[
                resv("m", 0, 1000, &[0], &[ResvFlag::Maint]),
                resv("later", 500, 2000, &[1], &[]),
            ],
            4,
            100,
        );
        // 5 minutes: ends at 400, before `later` starts.
        assert_eq!(
            g.restrict(&job(None, Some(5), 1, None), ALL, 100),
            Some(Ok(vec![1, 2, 3]))
        );
        // 10 minutes: ends at 700, inside `later`.
        assert_eq!(
            g.restrict(&job(None, Some(10), 1, None), ALL, 100),
            Some(Ok(vec![2, 3]))
        );
        // No limit reaches everything; three nodes do not fit in two, and
        // one of those taken is in maintenance.
        assert_eq!(
            g.restrict(&job(None, None, 3, None), ALL, 100),
            Some(Err(JobReason::ReqNodeNotAvailMaint))
        );
        let plain = ResvGate::new(&[resv("later", 500, 2000, &[1, 2], &[])], 4, 100);
        assert_eq!(
            plain.restrict(&job(None, None, 3, None), ALL, 100),
            Some(Err(JobReason::Resources))
        );
        // Only the MAINT node in its partition: maintenance says so.
        assert_eq!(
            g.restrict(&job(None, Some(5), 1, None), &[0], 100),
            Some(Err(JobReason::ReqNodeNotAvailMaint))
        );
        // Nothing reserved in the way: no opinion.
        let none = ResvGate::new(&[resv("x", 5000, 6000, &[0], &[])], 4, 100);
        assert_eq!(none.restrict(&job(None, Some(5), 1, None), ALL, 100), None);
    }

    #[test]
    fn jobs_of_a_reservation_wait_for_it_and_stay_on_its_nodes() {
        let resvs = [
            resv("r", 500, 2000, &[1, 2], &[]),
            resv("f", 500, 2000, &[3], &[ResvFlag::Flex]),
            resv("lic", 0, 2000, &[], &[ResvFlag::AnyNodes]),
        ];
        let before = ResvGate::new(&resvs, 4, 100);
        assert_eq!(
            before.restrict(&job(Some("r"), Some(5), 1, None), ALL, 100),
            Some(Err(JobReason::Reservation))
        );
        // FLEX: may start early, its own node first, then the others.
        assert_eq!(
            before.restrict(&job(Some("f"), Some(5), 1, None), ALL, 100),
            Some(Ok(vec![3, 0, 1, 2]))
        );
        let during = ResvGate::new(&resvs, 4, 600);
        assert_eq!(
            during.restrict(&job(Some("r"), Some(5), 1, None), ALL, 600),
            Some(Ok(vec![1, 2]))
        );
        assert_eq!(
            during.restrict(&job(Some("f"), Some(5), 1, None), ALL, 600),
            Some(Ok(vec![3, 0]))
        );
        assert_eq!(
            during.restrict(&job(Some("lic"), Some(5), 1, None), ALL, 600),
            Some(Ok(vec![0]))
        );
        assert_eq!(
            during.restrict(&job(Some("gone"), Some(5), 1, None), ALL, 600),
            Some(Err(JobReason::ReservationDeleted))
        );
    }

    #[test]
    fn licenses_count_running_jobs_starts_and_reserved_ones() {
        let mut running = job(None, None, 1, Some("fluent:2"));
        running.state = JobState::Running;
        let mut r = resv("lr", 0, 1000, &[], &[ResvFlag::AnyNodes]);
        r.licenses = vec![("matlab".into(), 2)];
        let total = [("fluent".to_string(), 3), ("matlab".to_string(), 3)];
        let mut g = LicenseGate::new(&total, [&running].into_iter(), &[r], 10);
        assert_eq!(g.free("fluent", None), 1);
        assert_eq!(g.free("matlab", None), 1);
        assert_eq!(g.free("matlab", Some("lr")), 3);
        let one = job(None, None, 1, Some("fluent"));
        assert_eq!(g.blocked(&one, 10), None);
        g.started(&one, &Allocation::default(), 10);
        assert_eq!(g.blocked(&one, 10), Some(JobReason::Licenses));
        assert_eq!(
            g.blocked(&job(None, None, 1, Some("matlab:2")), 10),
            Some(JobReason::Licenses)
        );
        let inside = job(Some("lr"), None, 1, Some("matlab:2"));
        assert_eq!(g.blocked(&inside, 10), None);
        g.started(&inside, &Allocation::default(), 10);
        // The reservation's own jobs used what it held: the rest is free.
        assert_eq!(g.free("matlab", None), 1);
        assert_eq!(g.blocked(&job(None, None, 1, None), 10), None);
    }
}
