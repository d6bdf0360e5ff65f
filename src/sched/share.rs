//! CPUs shared between jobs: `OverSubscribe=YES[:N]` (jobs that ask `-s`)
//! and `FORCE[:N]` (every job), as Slurm 22.05's select/cons_tres does it.
//!
//! cons_tres keeps, per partition, `N` "rows" of core bitmaps; a sharing
//! job is first placed on idle cores (step 1 of its `_job_test`), and only
//! if that fails into a row of its own partition, on cores no job of that
//! row holds. canopy counts the same thing per CPU: how many sharing jobs
//! hold each CPU, at most `N`. Slurm repacks its rows as jobs end
//! (`_build_row_bitmaps`), so a count per CPU is what a row layout allows
//! at best; the difference is a fragmented row set Slurm itself repacks.
//!
//! Node-level rules, as cons_tres's `_verify_node_state` and
//! `_is_node_busy` (`sharing_only`):
//! - a sharing job never goes where a job that does not share runs (the
//!   node is `NODE_CR_ONE_ROW`);
//! - a job that does not share never goes where jobs of *another*
//!   partition whose `N` is above 1 run;
//! - a sharing job overlaps only CPUs held by sharers of its own
//!   partition (other partitions' rows are taken away from the free
//!   cores);
//! - `--exclusive` (and `OverSubscribe=EXCLUSIVE`) needs an empty node.
//!
//! Memory is consumed per job whether or not its CPUs are shared (with
//! `CR_*_Memory`), and a node's `alloc_cpus` counts distinct CPUs, so
//! `CPUAlloc` never exceeds `CPUTot` (Slurm's display counts allocated
//! cores from the union of rows).

use std::borrow::Cow;

use super::placement::{self, IdSet};
use super::{NodeSlot, Request};
use crate::model::job::{Allocation, ShareTag};

/// A node's sharing bookkeeping, kept once a job of a sharing partition
/// is placed on it (`None` on most nodes: nothing to pay for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeShare {
    /// Per abstract CPU id: how many sharing jobs hold it.
    counts: Vec<u16>,
    /// Per abstract CPU id held by sharers: their partition, as an index
    /// into `names` (sharers of two partitions never hold one CPU).
    owner: Vec<u16>,
    /// Partition names `owner` points into (only grows while kept).
    names: Vec<String>,
    /// Distinct CPUs sharing jobs hold (those with a count above 0).
    distinct: u32,
    /// Jobs of sharing partitions on the node (any limit), per partition.
    parts: Vec<(String, u32)>,
}

impl NodeShare {
    /// Jobs of a sharing partition other than `part` run here.
    fn other_part(&self, part: Option<&str>) -> bool {
        self.parts
            .iter()
            .any(|(p, n)| *n > 0 && Some(p.as_str()) != part)
    }

    /// How many sharing jobs hold CPU `id`.
    pub fn count(&self, id: u32) -> u16 {
        self.counts.get(id as usize).copied().unwrap_or(0)
    }

    /// CPU `id` is held by sharers of partition `part`.
    fn owned_by(&self, id: u32, part: &str) -> bool {
        self.owner
            .get(id as usize)
            .and_then(|&i| self.names.get(usize::from(i)))
            .is_some_and(|n| n == part)
    }

    fn name_index(&mut self, part: &str) -> u16 {
        match self.names.iter().position(|n| n == part) {
            Some(i) => i as u16,
            None => {
                self.names.push(part.to_string());
                (self.names.len() - 1) as u16
            }
        }
    }
}

/// The node may not take `req` at all, whatever its free CPUs.
pub(super) fn barred(req: &Request, s: &NodeSlot) -> bool {
    let tag = req.share.as_ref();
    let sharing = tag.is_some_and(ShareTag::shares) && !req.exclusive;
    match (s.share.as_deref(), sharing) {
        // A job that does not share runs here: nobody may share with it.
        (Some(sh), true) => s.alloc_cpus > sh.distinct,
        (None, true) => s.alloc_cpus > 0,
        (Some(sh), false) => sh.other_part(tag.map(|t| t.part.as_str())),
        (None, false) => false,
    }
}

/// The CPUs of `s` that `req` may not take, and how many it may. With
/// `overlap`, a sharing job may take CPUs of its own partition's sharing
/// jobs held fewer than `N` times.
pub(super) fn view<'a>(req: &Request, s: &'a NodeSlot, overlap: bool) -> (Cow<'a, IdSet>, u32) {
    let plain = || (Cow::Borrowed(&s.used), s.cpus.saturating_sub(s.alloc_cpus));
    let Some(tag) = req.share.as_ref().filter(|t| overlap && t.shares()) else {
        return plain();
    };
    let Some(sh) = s.share.as_deref() else {
        return plain();
    };
    if req.exclusive || s.alloc_cpus > sh.distinct {
        return plain();
    }
    // Held too often, or by another partition's sharers (their rows are
    // taken away from the free cores).
    let mut full = IdSet::default();
    let mut n = 0;
    for id in 0..s.layout.cpus() {
        let c = sh.count(id);
        if c >= tag.limit || (c > 0 && !sh.owned_by(id, &tag.part)) {
            full.insert(id);
            n += 1;
        }
    }
    (Cow::Owned(full), s.cpus.saturating_sub(n))
}

/// As [`view`], or with `idle` the whole node ("could it ever run").
pub(super) fn view_of<'a>(
    req: &Request,
    s: &'a NodeSlot,
    idle: bool,
    overlap: bool,
) -> (Cow<'a, IdSet>, u32) {
    if idle {
        (Cow::Borrowed(&s.used), s.cpus)
    } else {
        view(req, s, overlap)
    }
}

/// Hold (or give back) node `i` of `alloc` on `s`: its CPUs, and unless
/// `cpus_only` (a job suspended for a preemptor keeps the rest) its memory
/// and GRES.
pub(super) fn hold_node(
    s: &mut NodeSlot,
    alloc: &Allocation,
    i: usize,
    hold: bool,
    cpus_only: bool,
) {
    let cpus = alloc.cpus.get(i).copied().unwrap_or(0);
    if let Some(p) = &alloc.cap_part {
        count_part(s, p, cpus, hold);
    }
    let ids = alloc.cpu_ids.get(i).map_or(&[][..], Vec::as_slice);
    let gres = if cpus_only {
        &[][..]
    } else {
        alloc.gres.get(i).map_or(&[][..], Vec::as_slice)
    };
    if !cpus_only {
        s.alloc_mem_mb = if hold {
            s.alloc_mem_mb.saturating_add(alloc.mem_mb)
        } else {
            s.alloc_mem_mb.saturating_sub(alloc.mem_mb)
        };
    }
    let Some(tag) = &alloc.share else {
        s.alloc_cpus = if hold {
            s.alloc_cpus.saturating_add(cpus)
        } else {
            s.alloc_cpus.saturating_sub(cpus)
        };
        placement::hold(&mut s.used, &mut s.gres, ids, gres, hold);
        return;
    };
    let sh = s.share.get_or_insert_with(Default::default);
    match sh.parts.iter_mut().find(|(p, _)| *p == tag.part) {
        Some((_, n)) if hold => *n += 1,
        Some((_, n)) => *n = n.saturating_sub(1),
        None if hold => sh.parts.push((tag.part.clone(), 1)),
        None => {}
    }
    sh.parts.retain(|(_, n)| *n > 0);
    if !tag.shares() || ids.is_empty() {
        s.alloc_cpus = if hold {
            s.alloc_cpus.saturating_add(cpus)
        } else {
            s.alloc_cpus.saturating_sub(cpus)
        };
        placement::hold(&mut s.used, &mut s.gres, ids, gres, hold);
    } else {
        // Only the CPUs this job is first to take (or last to leave)
        // change what the node has in use.
        let mut changed = Vec::new();
        let owner = sh.name_index(&tag.part);
        for &id in ids {
            let at = id as usize;
            if sh.counts.len() <= at {
                sh.counts.resize(at + 1, 0);
                sh.owner.resize(at + 1, 0);
            }
            let c = &mut sh.counts[at];
            if hold {
                if *c == 0 {
                    changed.push(id);
                    sh.owner[at] = owner;
                }
                *c = c.saturating_add(1);
            } else if *c > 0 {
                *c -= 1;
                if *c == 0 {
                    changed.push(id);
                }
            }
        }
        let n = changed.len() as u32;
        if hold {
            sh.distinct += n;
            s.alloc_cpus = s.alloc_cpus.saturating_add(n);
        } else {
            sh.distinct = sh.distinct.saturating_sub(n);
            s.alloc_cpus = s.alloc_cpus.saturating_sub(n);
        }
        placement::hold(&mut s.used, &mut s.gres, &changed, gres, hold);
    }
    if sh.parts.is_empty() && sh.distinct == 0 {
        s.share = None;
    }
}

/// Count `cpus` of partition `part` held (or given back) on `s`, for `MaxCPUsPerNode`.
pub(super) fn count_part(s: &mut NodeSlot, part: &str, cpus: u32, hold: bool) {
    match s.part_cpus.iter_mut().find(|(p, _)| p == part) {
        Some((_, n)) if hold => *n = n.saturating_add(cpus),
        Some((_, n)) => *n = n.saturating_sub(cpus),
        None if hold => s.part_cpus.push((part.to_string(), cpus)),
        None => {}
    }
    s.part_cpus.retain(|(_, n)| *n > 0);
}
