//! A restart against a node table that is not the one the stored state was written against.
//!
//! Stored ranks — jobs' allocations, reservations, dynamic nodes' offsets past slurm.conf's
//! nodes — name nodes by their place in the controller's table: slurm.conf's nodes in file
//! order, then the dynamic ones. If slurm.conf's node list changed while the controller was
//! down (lines added, removed or reordered), or MaxNodeCount was lowered below where dynamic
//! nodes sat, the same numbers would now name other nodes. slurmctld rebuilds its node bitmaps
//! from names at start-up; this does the same for canopy's ranks: every stored rank is mapped
//! to the node of the same name in the new table, and what changed is written back before the
//! controller serves anything.
//!
//! Dynamic nodes keep their offsets past the file's nodes where MaxNodeCount leaves room, so a
//! restart with an unchanged file moves nothing; otherwise they are packed, in their old order.
//!
//! It refuses, with the remedy, rather than lose what was accepted: a node that a running job
//! holds and slurm.conf no longer lists, and a MaxNodeCount below the nodes that exist.
//! Finished jobs that remember a node no longer there keep `GONE` for it (shown as `?`).
//!
//! Pure: the stored records come in, the records to write back go out.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::config::{hostlist, Config};
use crate::model::job::JobRecord;
use crate::model::reservation::Reservation;
use crate::state::store::Op;

/// The rank a finished job keeps for a node that no longer exists.
pub const GONE: u32 = u32::MAX;

/// Why the controller cannot start on this configuration with this state.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RenumberError {
    #[error(
        "MaxNodeCount={cap} leaves no room for the {have} nodes that exist ({file} in slurm.conf, \
         {dynamic} created dynamically: {names}); raise MaxNodeCount, or delete dynamic nodes \
         (scontrol delete nodename=...) before lowering it"
    )]
    TooMany {
        cap: u32,
        have: usize,
        file: usize,
        dynamic: usize,
        names: String,
    },
    #[error(
        "job {job_id} holds node {node}, which slurm.conf no longer lists; put its NodeName line \
         back, start canopy-ctld, and end the job (scancel) before removing the node"
    )]
    HeldNodeGone { job_id: u32, node: String },
}

/// What a restart writes back and starts with.
#[derive(Debug, Default)]
pub struct Restored {
    /// The dynamic nodes by their (possibly new) offsets: what the controller starts with.
    pub dyn_nodes: Vec<(u32, String)>,
    /// Records to write before anything is served (changed jobs, reservations, dynamic
    /// nodes, and the file's node names the ranks now refer to).
    pub persist: Vec<Op>,
    /// How many stored ranks now name another place (for the log).
    pub moved: usize,
}

/// Map the stored state onto `conf` (slurm.conf as read now, without dynamic nodes).
/// `old_file`: slurm.conf's node names when the ranks were written (`None`: not stored, by an
/// older controller; taken to be the file's names now). Changes `jobs` and `resvs` in place.
pub fn restore(
    conf: &Config,
    old_file: Option<&[String]>,
    stored: &[(u32, String)],
    jobs: &mut [JobRecord],
    resvs: &mut [Reservation],
) -> Result<Restored, RenumberError> {
    let file_now: Vec<String> = conf.nodes[..conf.fixed_nodes]
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let stored_file = old_file;
    let old_file = old_file.unwrap_or(&file_now);
    let mut sorted: Vec<&(u32, String)> = stored.iter().collect();
    sorted.sort_by_key(|(o, _)| *o);
    // The old table: the old file's names, then each stored line's name at its offset.
    let mut old_names: Vec<String> = old_file.to_vec();
    let mut dynamic: Vec<(u32, String, String)> = Vec::new();
    let mut drop_lines = Vec::new();
    for (offset, line) in sorted {
        let Some(name) = line_name(conf, line) else {
            continue; // unreadable now: `with_stored_nodes` warns and skips it
        };
        let rank = old_file.len() + *offset as usize;
        if old_names.len() <= rank {
            old_names.resize(rank + 1, String::new());
        }
        old_names[rank] = name.clone();
        if conf.node_index(&name).is_none() {
            dynamic.push((*offset, name, line.clone()));
        } else {
            // slurm.conf lists it now: the file's line stands, the stored one goes.
            tracing::warn!(node = %name, "dynamic node now listed in slurm.conf; its stored line is dropped");
            drop_lines.push(*offset);
        }
    }
    let cap = conf.node_capacity() as usize;
    let fixed = conf.fixed_nodes;
    if fixed + dynamic.len() > cap {
        let names: Vec<&str> = dynamic.iter().map(|(_, n, _)| n.as_str()).collect();
        return Err(RenumberError::TooMany {
            cap: conf.max_node_count.unwrap_or(0),
            have: fixed + dynamic.len(),
            file: fixed,
            dynamic: dynamic.len(),
            names: hostlist::compress(&names),
        });
    }
    let mut out = Restored {
        persist: drop_lines.into_iter().map(Op::DeleteDynNode).collect(),
        ..Default::default()
    };
    let fits = dynamic.iter().all(|(o, _, _)| fixed + (*o as usize) < cap);
    if fits {
        out.dyn_nodes = dynamic.iter().map(|(o, _, l)| (*o, l.clone())).collect();
    } else {
        // Packed in their old order; the old offsets go from the store.
        for (i, (old, name, line)) in dynamic.iter().enumerate() {
            out.persist.push(Op::DeleteDynNode(*old));
            tracing::warn!(node = %name, from = old, to = i, "dynamic node moved: MaxNodeCount no longer reaches its rank");
            out.dyn_nodes.push((i as u32, line.clone()));
        }
        for (o, l) in &out.dyn_nodes {
            out.persist.push(Op::PutDynNode {
                offset: *o,
                line: l.clone(),
            });
        }
    }
    // The new table's rank for each name.
    let mut new_rank: std::collections::HashMap<&str, u32> = file_now
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i as u32))
        .collect();
    for (o, (_, name, _)) in out.dyn_nodes.iter().zip(&dynamic) {
        new_rank.insert(name.as_str(), (fixed + o.0 as usize) as u32);
    }
    let map = |old: u32| -> Option<u32> {
        let name = old_names.get(old as usize)?;
        new_rank.get(name.as_str()).copied()
    };
    let identity = (0..old_names.len() as u32)
        .filter(|&r| !old_names[r as usize].is_empty())
        .all(|r| map(r) == Some(r));
    if !identity {
        for j in jobs.iter_mut() {
            let mut changed = false;
            // A job suspended for a preemptor names the nodes it lent CPUs on, too.
            if let Some(s) = j.preempt_suspended.as_mut() {
                for l in s.lent.iter_mut() {
                    match map(l.rank) {
                        Some(to) if to != l.rank => {
                            l.rank = to;
                            changed = true;
                        }
                        _ => {}
                    }
                }
            }
            let Some(a) = j.alloc.as_mut() else {
                if changed {
                    out.persist.push(Op::PutJob(Box::new(j.clone())));
                }
                continue;
            };
            for r in a.ranks.iter_mut() {
                let to = match map(*r) {
                    Some(to) => to,
                    None if j.state.is_finished() => GONE,
                    None if *r == GONE => GONE,
                    None => {
                        return Err(RenumberError::HeldNodeGone {
                            job_id: j.job_id,
                            node: old_names
                                .get(*r as usize)
                                .cloned()
                                .unwrap_or_else(|| format!("at rank {r}")),
                        })
                    }
                };
                if to != *r {
                    *r = to;
                    changed = true;
                    out.moved += 1;
                }
            }
            if changed {
                out.persist.push(Op::PutJob(Box::new(j.clone())));
            }
        }
        for r in resvs.iter_mut() {
            let before = r.ranks.clone();
            let ranks: BTreeSet<u32> = before.iter().filter_map(|&o| map(o)).collect();
            let ranks: Vec<u32> = ranks.into_iter().collect();
            if ranks != before {
                let gone: Vec<&str> = before
                    .iter()
                    .filter(|&&o| map(o).is_none())
                    .filter_map(|&o| old_names.get(o as usize).map(String::as_str))
                    .collect();
                if !gone.is_empty() {
                    tracing::warn!(reservation = %r.name, nodes = %hostlist::compress(&gone), "reserved nodes no longer in slurm.conf; left out of the reservation");
                }
                let names: Vec<&str> = ranks
                    .iter()
                    .filter_map(|&n| {
                        let n = n as usize;
                        if n < fixed {
                            Some(file_now[n].as_str())
                        } else {
                            let off = (n - fixed) as u32;
                            out.dyn_nodes
                                .iter()
                                .zip(&dynamic)
                                .find(|((o, _), _)| *o == off)
                                .map(|(_, (_, name, _))| name.as_str())
                        }
                    })
                    .collect();
                r.node_list = hostlist::compress(&names);
                r.ranks = ranks;
                out.moved += 1;
                out.persist.push(Op::PutResv(Box::new(r.clone())));
            }
        }
    }
    if stored_file != Some(file_now.as_slice()) {
        out.persist.push(Op::PutFileNodes(file_now));
    }
    Ok(out)
}

/// The node a stored line names (`None` if it no longer reads).
fn line_name(conf: &Config, line: &str) -> Option<String> {
    match conf.read_node_line(line) {
        Ok(v) if v.len() == 1 => v.into_iter().next().map(|(n, _)| n.name),
        _ => None,
    }
}

#[cfg(test)]
#[path = "renumber_tests.rs"]
mod tests;
