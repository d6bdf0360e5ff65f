//! The start gates for advance reservations and licenses (see `gate.rs`).
//!
//! Both are built once per scheduling pass from the reservations and the
//! running jobs, so each question a pass asks per job is a few lookups:
//! the node sets are bitmaps by rank, the license counts a small map.
//!
//! The reservation gate answers two questions. `restrict` is for a start
//! now (the quick pass, preemption): the nodes a job may take at once.
//! Every job of a partition that reaches the same reservations gets the
//! same answer, so the answers are kept per partition (`restrict_in`) and
//! handed out shared: a pass over 100,000 jobs filters each partition's
//! nodes a few times, not once per job. `scope` and `set_aside` are for a
//! plan (the backfill pass): the windows every reservation sets its nodes
//! aside for (a recurring one's next ones too), and for each job which of
//! them bind it, where it may go and when it may start.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use super::gate::{Aside, Exempt, Scope, StartGate};
use super::table::PartitionView;
use crate::model::job::{Allocation, JobRecord};
use crate::model::reason::JobReason;
use crate::model::reservation::{parse_licenses, Reservation, ResvFlag};
use crate::model::time::UnixTime;

/// A set of node ranks as a bitmap.
#[derive(Debug, Clone, Default)]
struct Mask(Vec<u64>);

impl Mask {
    fn new(n: usize) -> Mask {
        Mask(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, r: u32) {
        if let Some(w) = self.0.get_mut(r as usize / 64) {
            *w |= 1 << (r % 64);
        }
    }
    fn has(&self, r: u32) -> bool {
        self.0
            .get(r as usize / 64)
            .is_some_and(|w| w & (1 << (r % 64)) != 0)
    }
    fn or(&mut self, o: &Mask) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    fn any(&self) -> bool {
        self.0.iter().any(|&w| w != 0)
    }
}

/// One reservation's node window, as the gate needs it.
struct Window {
    name: String,
    start: UnixTime,
    end: UnixTime,
    nodes: Mask,
    ranks: Arc<[u32]>,
    maint: bool,
    flex: bool,
    overlap: bool,
    holds_nodes: bool,
    /// A recurring one (its nodes left out), to list its later windows.
    recurring: Option<Reservation>,
}

impl Window {
    /// Which windows leave this reservation's jobs alone (Slurm's
    /// `job_test_resv`: a MAINT one's jobs ignore every other
    /// reservation, an OVERLAP one's every other but MAINT ones).
    fn exempt(&self, idx: usize) -> Exempt {
        let id = idx as u32;
        if self.maint {
            Exempt::Everything
        } else if self.overlap {
            Exempt::AllButMaint(id)
        } else {
            Exempt::Own(id)
        }
    }
}

/// A cached `restrict` answer: the nodes left (`None`: all of them) and
/// whether a MAINT reservation took any.
#[derive(Clone)]
struct Kept {
    nodes: Option<Arc<[u32]>>,
    maint: bool,
}

/// One partition's cached answers, by (the job's reservation, how many
/// future windows its limit reaches).
type PartAnswers = HashMap<(Option<usize>, usize), Kept>;

/// Keeps jobs outside a reservation off its nodes while it is active, or
/// would become active before they end; keeps a job that asks for one on
/// its nodes, and waiting until it starts.
pub struct ResvGate {
    windows: Vec<Window>,
    by_name: HashMap<String, usize>,
    /// Nodes of every active reservation that holds nodes (a job outside
    /// all of them may use none of these), and of the MAINT ones.
    active: Mask,
    active_maint: Mask,
    /// Some node is in `active` (so a pass without reservations asks
    /// nothing per node).
    any_active: bool,
    /// Future windows by start: the ones a job's time limit reaches.
    future: Vec<usize>,
    /// Answers per (partition, the job's reservation, how many future
    /// windows its limit reaches).
    cache: RefCell<HashMap<String, PartAnswers>>,
    now: UnixTime,
}

impl ResvGate {
    /// The gate for a pass at `now` over `node_count` nodes.
    pub fn new<'a>(
        resvs: impl IntoIterator<Item = &'a Reservation>,
        node_count: usize,
        now: UnixTime,
    ) -> ResvGate {
        let mut active = Mask::new(node_count);
        let mut active_maint = Mask::new(node_count);
        let mut windows = Vec::new();
        let mut future = Vec::new();
        for r in resvs.into_iter().filter(|r| r.end > now) {
            let mut nodes = Mask::new(node_count);
            for &rank in &r.ranks {
                nodes.set(rank);
            }
            let w = Window {
                name: r.name.clone(),
                start: r.start,
                end: r.end,
                maint: r.has(ResvFlag::Maint),
                flex: r.has(ResvFlag::Flex),
                overlap: r.has(ResvFlag::Overlap),
                holds_nodes: r.holds_nodes(),
                ranks: r.ranks.iter().copied().collect(),
                recurring: r.recurring().then(|| Reservation {
                    ranks: Vec::new(),
                    ..r.clone()
                }),
                nodes,
            };
            if w.holds_nodes {
                if r.active(now) {
                    active.or(&w.nodes);
                    if w.maint {
                        active_maint.or(&w.nodes);
                    }
                } else {
                    future.push(windows.len());
                }
            }
            windows.push(w);
        }
        future.sort_by_key(|&i| windows[i].start);
        let by_name = windows
            .iter()
            .enumerate()
            .map(|(i, w)| (w.name.clone(), i))
            .collect();
        ResvGate {
            windows,
            by_name,
            any_active: active.any(),
            active,
            active_maint,
            future,
            cache: RefCell::default(),
            now,
        }
    }

    fn window(&self, name: &str) -> Option<(usize, &Window)> {
        let &i = self.by_name.get(name)?;
        Some((i, &self.windows[i]))
    }

    /// The end of `job`'s window if it started now (`None`: no limit).
    fn job_end(job: &JobRecord, now: UnixTime) -> Option<UnixTime> {
        job.time_limit_min.map(|m| now + i64::from(m) * 60)
    }

    /// How many future windows a job ending at `end` reaches.
    fn reached(&self, end: Option<UnixTime>) -> usize {
        match end {
            None => self.future.len(),
            Some(e) => self.future.partition_point(|&i| self.windows[i].start < e),
        }
    }

    /// The nodes reservations other than `own` hold while a job of `own`
    /// (or, `None`, of none) that reaches `reached` future windows runs,
    /// and those of them held for maintenance.
    fn taken(&self, own: Option<usize>, reached: usize) -> (Mask, Mask) {
        let exempt = own.map_or(Exempt::Nothing, |i| self.windows[i].exempt(i));
        let (mut taken, mut maint) = match own {
            // Outside all: every active window binds.
            None => (self.active.clone(), self.active_maint.clone()),
            Some(_) => {
                let mut t = Mask::new(self.active.0.len() * 64);
                let mut m = t.clone();
                for (i, w) in self.windows.iter().enumerate() {
                    if w.holds_nodes && w.start <= self.now && exempt.binds(i as u32, w.maint) {
                        t.or(&w.nodes);
                        if w.maint {
                            m.or(&w.nodes);
                        }
                    }
                }
                (t, m)
            }
        };
        for &i in &self.future[..reached] {
            let w = &self.windows[i];
            if exempt.binds(i as u32, w.maint) {
                taken.or(&w.nodes);
                if w.maint {
                    maint.or(&w.nodes);
                }
            }
        }
        (taken, maint)
    }

    /// `candidates` less what `taken` marks (`None`: nothing taken).
    fn keep(candidates: &[u32], taken: &Mask) -> Option<Vec<u32>> {
        if !candidates.iter().any(|&r| taken.has(r)) {
            return None;
        }
        Some(
            candidates
                .iter()
                .copied()
                .filter(|&r| !taken.has(r))
                .collect(),
        )
    }

    /// The nodes of `candidates` a job (of reservation `own`, or of none)
    /// reaching `reached` future windows may take now: `None` for all of
    /// them. Its own reservation's nodes only, unless that one is FLEX
    /// (its own first, then the others) or holds none.
    fn kept(&self, candidates: &[u32], own: Option<usize>, reached: usize) -> Kept {
        let (taken, maint_mask) = self.taken(own, reached);
        let hit_maint = |nodes: &[u32]| nodes.iter().any(|&r| maint_mask.has(r));
        match own.map(|i| &self.windows[i]) {
            Some(w) if w.holds_nodes && !w.flex => {
                let mine: Vec<u32> = candidates
                    .iter()
                    .copied()
                    .filter(|&r| w.nodes.has(r))
                    .collect();
                let maint = hit_maint(&mine);
                let nodes = Self::keep(&mine, &taken).unwrap_or(mine);
                Kept {
                    nodes: Some(nodes.into()),
                    maint,
                }
            }
            Some(w) if w.holds_nodes => {
                let mut nodes =
                    Self::keep(candidates, &taken).unwrap_or_else(|| candidates.to_vec());
                // Its own nodes first: they are what it reserved.
                nodes.sort_by_key(|&r| !w.nodes.has(r));
                Kept {
                    nodes: Some(nodes.into()),
                    maint: hit_maint(candidates),
                }
            }
            _ => Kept {
                nodes: Self::keep(candidates, &taken).map(Arc::from),
                maint: hit_maint(candidates),
            },
        }
    }

    /// `restrict` for `job` over `candidates`, through the cache when the
    /// candidates are partition `part`'s own list.
    fn answer(
        &self,
        job: &JobRecord,
        candidates: &[u32],
        part: Option<&str>,
        now: UnixTime,
    ) -> Option<Result<Arc<[u32]>, JobReason>> {
        let need = job.submit.min_nodes.unwrap_or(1).max(1) as usize;
        let end = Self::job_end(job, now);
        let own = match job.submit.reservation.as_deref() {
            Some(name) => {
                let Some((i, w)) = self.window(name) else {
                    return Some(Err(JobReason::ReservationDeleted));
                };
                if w.start > now && !w.flex {
                    return Some(Err(JobReason::Reservation));
                }
                Some(i)
            }
            None => {
                let reaches_future = self
                    .future
                    .first()
                    .is_some_and(|&i| end.is_none_or(|e| self.windows[i].start < e));
                if !reaches_future && !self.any_active {
                    return None;
                }
                None
            }
        };
        let reached = self.reached(end);
        let kept = match part {
            Some(p) => {
                let key = (own, reached);
                let hit = self
                    .cache
                    .borrow()
                    .get(p)
                    .and_then(|m| m.get(&key))
                    .cloned();
                match hit {
                    Some(k) => k,
                    None => {
                        let k = self.kept(candidates, own, reached);
                        self.cache
                            .borrow_mut()
                            .entry(p.to_string())
                            .or_default()
                            .insert(key, k.clone());
                        k
                    }
                }
            }
            None => self.kept(candidates, own, reached),
        };
        let nodes = match kept.nodes {
            None if own.is_none() => return None,
            None => Arc::from(candidates),
            Some(n) => n,
        };
        Some(if nodes.len() < need {
            Err(too_few(kept.maint))
        } else {
            Ok(nodes)
        })
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
        self.answer(job, candidates, None, now)
            .map(|r| r.map(|n| n.to_vec()))
    }

    fn restrict_in(
        &self,
        job: &JobRecord,
        part: &PartitionView<'_>,
        now: UnixTime,
    ) -> Option<Result<Arc<[u32]>, JobReason>> {
        self.answer(job, part.ranks, Some(part.name), now)
    }

    /// A job outside every reservation may go anywhere, any time, but is
    /// bound by every window; a reservation's job only to its nodes (any
    /// for FLEX, its own first), from its start (any time for FLEX) to
    /// its end, and bound by the others' windows as `Window::exempt` says.
    fn scope(
        &self,
        job: &JobRecord,
        _candidates: &[u32],
        _now: UnixTime,
    ) -> Option<Result<Scope, JobReason>> {
        let name = job.submit.reservation.as_deref()?;
        let Some((i, w)) = self.window(name) else {
            return Some(Err(JobReason::ReservationDeleted));
        };
        let mut s = Scope {
            exempt: w.exempt(i),
            // It ends (and its pending jobs are held) at its end.
            not_after: Some(w.end - 1),
            ..Scope::default()
        };
        if w.flex {
            if w.holds_nodes {
                s.prefer = Some(w.ranks.clone());
            }
        } else {
            s.not_before = Some(w.start);
            if w.holds_nodes {
                s.nodes = Some(w.ranks.clone());
            }
        }
        Some(Ok(s))
    }

    fn set_aside(&self, now: UnixTime, until: UnixTime) -> Vec<Aside> {
        let mut out = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            if !w.holds_nodes {
                continue;
            }
            let times = match &w.recurring {
                Some(r) => r.occurrences(until),
                None => vec![(w.start, w.end)],
            };
            for (start, end) in times.into_iter().filter(|&(_, e)| e > now) {
                out.push(Aside {
                    id: i as u32,
                    start,
                    end,
                    ranks: w.ranks.clone(),
                    maint: w.maint,
                });
            }
        }
        out
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
            power_up: false,
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
    fn maint_and_overlap_reservations_jobs_pass_other_reservations() {
        let resvs = [
            resv("m", 0, 1000, &[0, 1], &[ResvFlag::Maint]),
            resv("o", 0, 1000, &[1, 2], &[ResvFlag::Overlap]),
            resv("p", 0, 1000, &[2, 3], &[]),
        ];
        let g = ResvGate::new(&resvs, 4, 10);
        let ask = |r: &str| g.restrict(&job(Some(r), Some(5), 1, None), ALL, 10);
        // MAINT's job: all its nodes; OVERLAP's: not the MAINT one; the
        // plain one's: not the OVERLAP one.
        assert_eq!(ask("m"), Some(Ok(vec![0, 1])));
        assert_eq!(ask("o"), Some(Ok(vec![2])));
        assert_eq!(ask("p"), Some(Ok(vec![3])));
    }

    #[test]
    fn answers_over_a_partition_are_shared_and_match_the_plain_ones() {
        let resvs = [
            resv("a", 0, 1000, &[0], &[]),
            resv("later", 500, 2000, &[1], &[]),
        ];
        let g = ResvGate::new(&resvs, 4, 100);
        let part = PartitionView {
            name: "p",
            state: crate::model::partition::PartitionState::Up,
            ranks: ALL,
        };
        for limit in [Some(5), Some(10), None] {
            for r in [None, Some("a")] {
                let j = job(r, limit, 1, None);
                let plain = g.restrict(&j, ALL, 100);
                let shared = g.restrict_in(&j, &part, 100);
                assert_eq!(
                    plain,
                    shared.clone().map(|x| x.map(|v| v.to_vec())),
                    "{limit:?} {r:?}"
                );
                // Asked again: the very same list.
                let again = g.restrict_in(&j, &part, 100);
                if let (Some(Ok(x)), Some(Ok(y))) = (&shared, &again) {
                    assert!(Arc::ptr_eq(x, y));
                }
            }
        }
    }

    #[test]
    fn plans_see_every_window_and_a_reservations_job_its_scope() {
        let mut daily = resv("d", 1000, 2000, &[2], &[ResvFlag::Daily]);
        daily.users = AccessList::default();
        let resvs = [
            resv("r", 500, 1500, &[1], &[ResvFlag::Maint]),
            daily,
            resv("f", 500, 1500, &[3], &[ResvFlag::Flex]),
            resv("lic", 0, 1500, &[], &[ResvFlag::AnyNodes]),
            resv("gone", 0, 50, &[0], &[]),
        ];
        let g = ResvGate::new(&resvs, 4, 100);
        let asides: Vec<(u32, i64, i64, Vec<u32>, bool)> = g
            .set_aside(100, 1000 + 86_400)
            .into_iter()
            .map(|a| (a.id, a.start, a.end, a.ranks.to_vec(), a.maint))
            .collect();
        // The ended one and the licenses-only one set nothing aside; the
        // daily one its windows through the first to start at the horizon.
        assert_eq!(
            asides,
            [
                (0, 500, 1500, vec![1], true),
                (1, 1000, 2000, vec![2], false),
                (1, 1000 + 86_400, 2000 + 86_400, vec![2], false),
                (2, 500, 1500, vec![3], false),
            ]
        );
        let scope = |r: &str| g.scope(&job(Some(r), Some(5), 1, None), ALL, 100);
        let s = scope("r").unwrap().unwrap();
        assert_eq!(
            (s.nodes.as_deref(), s.not_before, s.not_after, s.exempt),
            (Some(&[1][..]), Some(500), Some(1499), Exempt::Everything)
        );
        let s = scope("f").unwrap().unwrap();
        assert_eq!(
            (s.nodes, s.prefer.as_deref(), s.not_before, s.exempt),
            (None, Some(&[3][..]), None, Exempt::Own(2))
        );
        let s = scope("lic").unwrap().unwrap();
        assert_eq!((s.nodes, s.not_before), (None, Some(0)));
        assert_eq!(scope("nope"), Some(Err(JobReason::ReservationDeleted)));
        assert_eq!(g.scope(&job(None, Some(5), 1, None), ALL, 100), None);
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
