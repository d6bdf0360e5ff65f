//! Dynamic nodes, as Slurm 22.05 has them (`slurmd -Z`, `scontrol create node`, `scontrol
//! delete nodename=`): node lines that are not in slurm.conf, read with exactly the rules of the
//! file's own node lines, and added to (or removed from) a loaded [`Config`].
//!
//! A dynamic node gets the next rank after every node already there, or the rank a deleted
//! dynamic node left vacant: ranks never shift, so no node is re-ranked in the relay tree
//! (`tree::topology` places the dynamic ranks). It joins each partition whose `Nodes=` says `ALL`
//! or names a `NodeSet` with a `Feature=` it has. `MaxNodeCount` bounds how many nodes may exist;
//! unset, there is no room for any, as in Slurm.
//!
//! This module decides nothing about running jobs (the controller core refuses to delete a busy
//! node) and does no I/O: a line comes in as text, a new `Config` goes out.

use std::path::Path;

use thiserror::Error;

use super::build::Builder;
use super::gres::{GresSource, NodeGres};
use super::parse::read_lines;
use super::types::{ConfNodeState, Config, NodeConf};

/// Why a node could not be created or deleted; `message` is Slurm's text where it has one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DynamicError {
    /// The line itself is wrong (an unknown attribute, a bad value).
    #[error("{0}")]
    Line(String),
    /// A node of that name exists already.
    #[error("Node '{0}' already exists in the node table")]
    Exists(String),
    /// `MaxNodeCount` (or its absence) leaves no room.
    #[error("Attempting to create node record past MaxNodeCount:{0}")]
    TooMany(u32),
    /// `scontrol create` may only make FUTURE or CLOUD nodes.
    #[error("Only State=FUTURE and State=CLOUD allowed for nodes created by scontrol")]
    State,
    /// No node of that name.
    #[error("Invalid node name specified")]
    Unknown(String),
    /// A node slurm.conf lists cannot be deleted.
    #[error("Can't delete non-dynamic node '{0}'.")]
    NotDynamic(String),
}

/// The attributes a node daemon finds (slurmd -C's), for [`dynamic_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
}

/// Keys that describe the CPU layout: if `--conf` gives any, it gives the layout and the
/// detected one is left out (mixing them would contradict).
const LAYOUT_KEYS: [&str; 7] = [
    "cpus",
    "procs",
    "boards",
    "sockets",
    "socketsperboard",
    "corespersocket",
    "threadspercore",
];

/// The node line `canopy-noded -Z` registers with, as `slurmd -Z` builds it: the hardware it
/// detected, then `--conf`'s attributes, which win over what was detected.
pub fn dynamic_line(name: &str, hw: &Detected, conf: &str) -> String {
    let given: Vec<String> = conf
        .split_whitespace()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_ascii_lowercase()))
        .collect();
    let has = |k: &str| given.iter().any(|g| g == k);
    let mut line = format!("NodeName={name}");
    if !LAYOUT_KEYS.iter().any(|k| has(k)) {
        line.push_str(&format!(
            " CPUs={} Boards={} SocketsPerBoard={} CoresPerSocket={} ThreadsPerCore={}",
            hw.cpus,
            hw.boards.max(1),
            (hw.sockets / hw.boards.max(1)).max(1),
            hw.cores_per_socket.max(1),
            hw.threads_per_core.max(1)
        ));
    }
    if !has("realmemory") {
        line.push_str(&format!(" RealMemory={}", hw.real_memory_mb.max(1)));
    }
    if !conf.trim().is_empty() {
        line.push(' ');
        line.push_str(conf.trim());
    }
    line
}

/// `node` as one node line that reads back to the same node: what a controller stores for a
/// dynamic node and hands its daemon.
pub fn node_line(node: &NodeConf) -> String {
    let mut line = format!(
        "NodeName={} NodeAddr={} NodeHostname={} Port={} CPUs={} Boards={} SocketsPerBoard={} \
         CoresPerSocket={} ThreadsPerCore={} RealMemory={} TmpDisk={} Weight={}",
        node.name,
        node.addr,
        node.hostname,
        node.port,
        node.cpus,
        node.boards,
        node.sockets / node.boards.max(1),
        node.cores_per_socket,
        node.threads_per_core,
        node.real_memory_mb,
        node.tmp_disk_mb,
        node.weight
    );
    if !node.gres.is_empty() {
        line.push_str(&format!(" Gres={}", node.gres));
    }
    if !node.features.is_empty() {
        line.push_str(&format!(" Feature={}", node.features.join(",")));
    }
    if node.state != ConfNodeState::Unknown {
        line.push_str(&format!(" State={}", node.state.name()));
    }
    line
}

impl Config {
    /// Nodes a dynamic node may still be created beside: `MaxNodeCount` less the nodes that
    /// exist (vacant ranks do not count).
    pub fn node_capacity(&self) -> u32 {
        self.max_node_count
            .unwrap_or(0)
            .max(self.fixed_nodes as u32)
    }

    /// The relay tree's ranks: (the file's nodes, room for all nodes). Every daemon builds
    /// `Topology::with_dynamic` from these, so they agree without talking; an empty tree still
    /// has one rank so that a node-less file can start.
    pub fn tree_ranks(&self) -> (u32, u32) {
        let fixed = self.fixed_nodes as u32;
        (fixed, self.node_capacity().max(fixed).max(1))
    }

    /// Every dynamic node's line, by rank offset past the file's nodes (what the store holds).
    pub fn dynamic_lines(&self) -> Vec<(u32, String)> {
        self.nodes
            .iter()
            .enumerate()
            .skip(self.fixed_nodes)
            .filter(|(_, n)| !n.vacant)
            .map(|(i, n)| ((i - self.fixed_nodes) as u32, node_line(n)))
            .collect()
    }

    /// Whether node `name` was created dynamically (Slurm's DYNAMIC_NORM).
    pub fn is_dynamic(&self, name: &str) -> bool {
        self.node_index(name)
            .and_then(|i| self.nodes.get(i))
            .is_some_and(|n| n.dynamic)
    }

    /// The nodes of `line` (`NodeName=<hostlist> attr=value ...`), read as slurm.conf's node
    /// lines are, with this file's SlurmdPort, GresTypes and `NodeName=DEFAULT`-free: each with
    /// its GRES inventory. Nothing is added.
    pub fn read_node_line(&self, line: &str) -> Result<Vec<(NodeConf, NodeGres)>, DynamicError> {
        if line.contains(['\n', '\r']) {
            return Err(DynamicError::Line("a node line must be one line".into()));
        }
        let head = line.trim_start();
        let starts = head
            .get(..9)
            .is_some_and(|h| h.eq_ignore_ascii_case("NodeName="));
        if !starts {
            return Err(DynamicError::Line(format!(
                "Input line must include \"NodeName\", found: {line}"
            )));
        }
        let bad = |e: super::ConfigError| DynamicError::Line(e.message);
        let path = Path::new("node line");
        let lines = read_lines(line, path).map_err(bad)?;
        let mut b = Builder::new(&self.path);
        b.cfg.gres_types = self.gres_types.clone();
        for l in &lines {
            let first = l.items.first().map(|i| i.key.to_ascii_lowercase());
            if first.as_deref() != Some("nodename") {
                return Err(DynamicError::Line(
                    "only node attributes may follow NodeName=".into(),
                ));
            }
            let value = l.items.first().map(|i| i.value.trim()).unwrap_or_default();
            if value.eq_ignore_ascii_case("DEFAULT") {
                return Err(DynamicError::Line(
                    "NodeName=DEFAULT cannot be created; name the node".into(),
                ));
            }
            b.line(l).map_err(bad)?;
        }
        if b.cfg.nodes.is_empty() {
            return Err(DynamicError::Line(format!("no node named in: {line}")));
        }
        let origins: Vec<_> = b.node_origin.iter().map(|(l, _)| l.clone()).collect();
        let ports: Vec<Option<u16>> = b.node_origin.iter().map(|(_, p)| *p).collect();
        super::gres::resolve(&mut b.cfg, &origins, GresSource::Absent).map_err(bad)?;
        let gres = std::mem::take(&mut b.cfg.gres.nodes);
        let nodes = std::mem::take(&mut b.cfg.nodes);
        Ok(nodes
            .into_iter()
            .zip(ports)
            .zip(gres)
            .map(|((mut n, port), mut g)| {
                n.port = port.unwrap_or(self.slurmd_port);
                n.dynamic = true;
                g.autodetect = g.autodetect.or(self.gres.autodetect);
                (n, g)
            })
            .collect())
    }

    /// This configuration with `line`'s nodes created (Slurm's `create_nodes`): each gets a
    /// vacant rank, else the next one, and joins the partitions that take it. `scontrol`
    /// asks for State=FUTURE or CLOUD (`from_scontrol`); `canopy-noded -Z` registers
    /// whatever state. Returns the new ranks, in the line's order.
    pub fn with_created_nodes(
        &self,
        line: &str,
        from_scontrol: bool,
    ) -> Result<(Config, Vec<u32>), DynamicError> {
        let created = self.read_node_line(line)?;
        if from_scontrol
            && created
                .iter()
                .any(|(n, _)| !matches!(n.state, ConfNodeState::Future | ConfNodeState::Cloud))
        {
            return Err(DynamicError::State);
        }
        if let Some((n, _)) = created
            .iter()
            .find(|(n, _)| self.node_index(&n.name).is_some())
        {
            return Err(DynamicError::Exists(n.name.clone()));
        }
        let present = self.nodes.iter().filter(|n| !n.vacant).count();
        let cap = self.node_capacity();
        if present + created.len() > cap as usize {
            return Err(DynamicError::TooMany(cap));
        }
        let mut conf = self.clone();
        let mut ranks = Vec::with_capacity(created.len());
        for (node, gres) in created {
            let rank = match conf.nodes.iter().position(|n| n.vacant) {
                Some(r) => {
                    conf.nodes[r] = node;
                    r
                }
                None => {
                    conf.nodes.push(node);
                    conf.nodes.len() - 1
                }
            };
            if let Some(g) = conf.gres.nodes.get_mut(rank) {
                *g = gres;
            } else {
                conf.gres.nodes.resize(rank, NodeGres::default());
                conf.gres.nodes.push(gres);
            }
            conf.node_by_name
                .insert(conf.nodes[rank].name.clone(), rank);
            conf.join_partitions(rank);
            ranks.push(rank as u32);
        }
        Ok((conf, ranks))
    }

    /// Put node `rank` in every partition that takes it, keeping rank (file) order.
    fn join_partitions(&mut self, rank: usize) {
        let node = &self.nodes[rank];
        for p in &mut self.partitions {
            if !p.dynamic_join.takes(node) || p.nodes.contains(&node.name) {
                continue;
            }
            let by_name = &self.node_by_name;
            let at = p
                .nodes
                .iter()
                .position(|m| by_name.get(m).is_some_and(|&r| r > rank))
                .unwrap_or(p.nodes.len());
            p.nodes.insert(at, node.name.clone());
        }
    }

    /// This configuration without dynamic node `name` (Slurm's `delete_nodes`): its rank is
    /// left vacant for the next one. Whether jobs still hold it is the caller's check.
    pub fn with_deleted_node(&self, name: &str) -> Result<(Config, u32), DynamicError> {
        let rank = self
            .node_index(name)
            .ok_or_else(|| DynamicError::Unknown(name.to_string()))?;
        if !self.nodes[rank].dynamic {
            return Err(DynamicError::NotDynamic(name.to_string()));
        }
        let mut conf = self.clone();
        conf.node_by_name.remove(name);
        for p in &mut conf.partitions {
            p.nodes.retain(|m| m != name);
        }
        if let Some(g) = conf.gres.nodes.get_mut(rank) {
            *g = NodeGres::default();
        }
        let slot = &mut conf.nodes[rank];
        slot.vacant = true;
        slot.features.clear();
        slot.gres.clear();
        Ok((conf, rank as u32))
    }

    /// This configuration with the dynamic nodes a controller stored, at the ranks they had
    /// (`stored`: offset past the file's nodes → node line). Lines that no longer apply (the
    /// file now lists the name, or the line no longer reads) are skipped, each with a warning
    /// in `warnings`; ranks with nothing stored stay vacant.
    pub fn with_stored_nodes(&self, stored: &[(u32, String)]) -> Config {
        let mut conf = self.clone();
        let mut sorted: Vec<&(u32, String)> = stored.iter().collect();
        sorted.sort_by_key(|(i, _)| *i);
        for (offset, line) in sorted {
            let rank = conf.fixed_nodes + *offset as usize;
            let mut one = match conf.read_node_line(line) {
                Ok(mut v) if v.len() == 1 => v.remove(0),
                Ok(_) => continue,
                Err(e) => {
                    conf.warnings
                        .push(format!("stored dynamic node line skipped ({e}): {line}"));
                    continue;
                }
            };
            if conf.node_index(&one.0.name).is_some() {
                conf.warnings.push(format!(
                    "stored dynamic node {} skipped: slurm.conf defines that name now",
                    one.0.name
                ));
                continue;
            }
            while conf.nodes.len() < rank {
                let mut hole = one.0.clone();
                hole.name = String::new();
                hole.vacant = true;
                conf.nodes.push(hole);
                conf.gres.nodes.push(NodeGres::default());
            }
            if rank < conf.nodes.len() {
                // Two lines for one rank: the first stands.
                continue;
            }
            one.0.dynamic = true;
            conf.node_by_name.insert(one.0.name.clone(), rank);
            conf.nodes.push(one.0);
            conf.gres.nodes.push(one.1);
            conf.join_partitions(rank);
        }
        conf
    }
}

#[cfg(test)]
#[path = "dynamic_tests.rs"]
mod tests;
