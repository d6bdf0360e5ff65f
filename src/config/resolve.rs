//! Resolving a built configuration once every line has been read: the controller's
//! host and address, job id bounds, node ports, NodeSet and DownNodes lines, and each
//! partition's members (`ALL`, node sets, hostlists), with the errors Slurm gives when
//! they do not fit together. Nothing here reads a line; `build` has done that.

use std::collections::HashMap;

use super::build::{Builder, Listed, PendingPartition};
use super::gres::GresSource;
use super::keys::GlobalKey;
use super::parse::Loc;
use super::types::{Config, ConfigError};

impl Builder {
    // -- whole-file validation ----------------------------------------------------------

    pub(super) fn finish(mut self, gres: GresSource<'_>) -> Result<Config, ConfigError> {
        self.resolve_controller()?;
        self.check_job_ids()?;
        self.assign_ports()?;
        let sets = self.resolve_nodesets()?;
        self.apply_down_nodes()?;
        self.resolve_partitions(&sets)?;
        self.check_preempt()?;
        self.warn_gang_over_force();
        let origins: Vec<Loc> = self.node_origin.iter().map(|(l, _)| l.clone()).collect();
        super::gres::resolve(&mut self.cfg, &origins, gres)?;
        self.cfg.fixed_nodes = self.cfg.nodes.len();
        Ok(self.cfg)
    }

    pub(super) fn check_job_ids(&self) -> Result<(), ConfigError> {
        let (first, max) = (self.cfg.first_job_id, self.cfg.max_job_id);
        if first < max {
            return Ok(());
        }
        let loc = self
            .set_at
            .get(&GlobalKey::FirstJobId)
            .or_else(|| self.set_at.get(&GlobalKey::MaxJobId));
        let message = format!("FirstJobId={first} must be below MaxJobId={max}");
        Err(match loc {
            Some(loc) => loc.error("FirstJobId", message),
            None => ConfigError {
                file: self.cfg.path.clone(),
                line: 0,
                key: "FirstJobId".into(),
                message,
            },
        })
    }

    /// Give port-less nodes SlurmdPort (which may appear anywhere in the file), then insist
    /// that no two nodes share an address and port: their daemons could not both listen.
    pub(super) fn assign_ports(&mut self) -> Result<(), ConfigError> {
        let mut owner: HashMap<(&str, u16), &str> = HashMap::new();
        let default_port = self.cfg.slurmd_port;
        for (node, (_, port)) in self.cfg.nodes.iter_mut().zip(&self.node_origin) {
            node.port = port.unwrap_or(default_port);
        }
        for (node, (loc, _)) in self.cfg.nodes.iter().zip(&self.node_origin) {
            if let Some(other) = owner.insert((&node.addr, node.port), &node.name) {
                return Err(loc.error(
                    "Port",
                    format!(
                        "nodes {other} and {} both use {}:{}; give each node its own NodeAddr or Port",
                        node.name, node.addr, node.port
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn resolve_nodesets(&self) -> Result<HashMap<String, Vec<usize>>, ConfigError> {
        let mut sets = HashMap::new();
        for set in &self.nodesets {
            let mut members = Vec::new();
            if let Some(nodes) = &set.nodes {
                let context = format!("NodeSet={} Nodes={}", set.name, nodes.raw);
                for name in &nodes.values {
                    members.push(self.defined(&set.loc, "Nodes", &context, name)?);
                }
            }
            if let Some(feature) = &set.feature {
                let having = self.cfg.nodes.iter().enumerate();
                members.extend(
                    having
                        .filter(|(_, n)| n.features.iter().any(|f| f == feature))
                        .map(|(i, _)| i),
                );
            }
            sets.insert(set.name.clone(), members);
        }
        Ok(sets)
    }

    /// The index of node `name`, or an error naming the text that referred to it.
    pub(super) fn defined(
        &self,
        loc: &Loc,
        key: &str,
        context: &str,
        name: &str,
    ) -> Result<usize, ConfigError> {
        self.cfg
            .node_by_name
            .get(name)
            .copied()
            .ok_or_else(|| loc.error(key, format!("{context}: node '{name}' is not defined")))
    }

    /// DownNodes lines, in order. A name no NodeName line defines is skipped with
    /// Slurm's error, as slurmctld skips it.
    pub(super) fn apply_down_nodes(&mut self) -> Result<(), ConfigError> {
        let mut missing = Vec::new();
        for down in &self.down {
            for name in &down.names.values {
                let Some(&i) = self.cfg.node_by_name.get(name) else {
                    missing.push((down.loc.clone(), name.clone()));
                    continue;
                };
                if let Some(node) = self.cfg.nodes.get_mut(i) {
                    if let Some(state) = down.state {
                        node.state = state;
                    }
                    if down.reason.is_some() {
                        node.reason.clone_from(&down.reason);
                    }
                }
            }
        }
        for (loc, name) in missing {
            self.warn(&loc, format_args!("DownNode \"{name}\" does not exist!"));
        }
        Ok(())
    }

    /// `PreemptMode=GANG` time-slices jobs sharing CPUs of
    /// `OverSubscribe=FORCE` partitions in Slurm (`SchedulerTimeSlice`);
    /// canopy runs such jobs at once, which the admin must hear of.
    fn warn_gang_over_force(&mut self) {
        use crate::model::part_opts::OverSubscribe;
        if !self.cfg.preempt.mode.gang {
            return;
        }
        let forced: Vec<String> = self
            .cfg
            .partitions
            .iter()
            .filter(|p| matches!(p.opts.oversubscribe, OverSubscribe::Force(n) if n > 1))
            .map(|p| p.name.clone())
            .collect();
        if forced.is_empty() {
            return;
        }
        let Some(loc) = self.set_at.get(&GlobalKey::PreemptMode).cloned() else {
            return;
        };
        self.warn(
            &loc,
            format_args!(
                "PreemptMode=GANG: canopy does not time-slice jobs sharing CPUs in \
                 OverSubscribe=FORCE partitions ({}); they run at the same time, \
                 up to FORCE's count per CPU",
                forced.join(",")
            ),
        );
    }

    /// The preemption keys together, as slurmctld checks them at start.
    pub(super) fn check_preempt(&self) -> Result<(), ConfigError> {
        super::preempt::validate(&self.cfg.preempt).map_err(|message| {
            let key = [GlobalKey::PreemptMode, GlobalKey::PreemptType]
                .into_iter()
                .find_map(|k| self.set_at.get(&k).map(|l| (k, l)));
            match key {
                Some((k, loc)) => loc.error(
                    if k == GlobalKey::PreemptMode {
                        "PreemptMode"
                    } else {
                        "PreemptType"
                    },
                    message,
                ),
                None => ConfigError {
                    file: self.cfg.path.clone(),
                    line: 0,
                    key: "PreemptMode".into(),
                    message,
                },
            }
        })
    }

    pub(super) fn resolve_partitions(
        &mut self,
        sets: &HashMap<String, Vec<usize>>,
    ) -> Result<(), ConfigError> {
        let mut default_at: Option<(String, Loc)> = None;
        for pending in std::mem::take(&mut self.partitions) {
            let PendingPartition {
                mut conf,
                nodes,
                loc,
            } = pending;
            if let Some(nodes) = &nodes {
                conf.nodes = self.partition_members(&loc, &conf.name, nodes, sets)?;
                conf.dynamic_join = self.dynamic_join(nodes);
            }
            if conf.default {
                if let Some((first, first_loc)) = &default_at {
                    return Err(loc.error(
                        "Default",
                        format!(
                            "partition {} is Default=YES but so is {first} (at {first_loc}); \
                             only one partition can be the default",
                            conf.name
                        ),
                    ));
                }
                default_at = Some((conf.name.clone(), loc.clone()));
            }
            if let Some(max) = conf.max_nodes.filter(|&max| conf.min_nodes > max) {
                return Err(loc.error(
                    "MinNodes",
                    format!(
                        "partition {}: MinNodes={} exceeds MaxNodes={max}",
                        conf.name, conf.min_nodes
                    ),
                ));
            }
            if let (Some(default), Some(max)) = (conf.default_time_min, conf.max_time_min) {
                if default > max {
                    self.warn(
                        &loc,
                        format_args!(
                            "partition {}: DefaultTime ({default} min) exceeds MaxTime \
                             ({max} min); DefaultTime ignored",
                            conf.name
                        ),
                    );
                    conf.default_time_min = None;
                }
            }
            self.cfg.partitions.push(conf);
        }
        Ok(())
    }

    /// Which dynamic nodes a partition's `Nodes=` takes: `ALL` every one, a NodeSet
    /// with `Feature=` those with the feature (as slurmctld re-evaluates both when it
    /// creates a node).
    pub(super) fn dynamic_join(&self, nodes: &Listed<String>) -> super::types::DynamicJoin {
        let mut join = super::types::DynamicJoin::default();
        for name in &nodes.values {
            if name.eq_ignore_ascii_case("ALL") {
                join.all = true;
            } else if let Some(f) = self
                .nodesets
                .iter()
                .find(|s| &s.name == name)
                .and_then(|s| s.feature.as_ref())
            {
                if !join.features.contains(f) {
                    join.features.push(f.clone());
                }
            }
        }
        join
    }

    /// Members of a partition's `Nodes=`: `ALL`, node set names and hostlists, each node
    /// once, in node order.
    pub(super) fn partition_members(
        &self,
        loc: &Loc,
        partition: &str,
        nodes: &Listed<String>,
        sets: &HashMap<String, Vec<usize>>,
    ) -> Result<Vec<String>, ConfigError> {
        let mut member = vec![false; self.cfg.nodes.len()];
        let mut mark = |i: usize| {
            if let Some(m) = member.get_mut(i) {
                *m = true;
            }
        };
        let context = format!("PartitionName={partition} Nodes={}", nodes.raw);
        for name in &nodes.values {
            if name.eq_ignore_ascii_case("ALL") {
                (0..self.cfg.nodes.len()).for_each(&mut mark);
            } else if let Some(set) = sets.get(name) {
                set.iter().copied().for_each(&mut mark);
            } else {
                mark(self.defined(loc, "Nodes", &context, name)?);
            }
        }
        Ok(self
            .cfg
            .nodes
            .iter()
            .zip(member)
            .filter(|(_, m)| *m)
            .map(|(n, _)| n.name.clone())
            .collect())
    }
}
