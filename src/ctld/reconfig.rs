//! `scontrol reconfigure`: a re-read configuration applied, or refused
//! with the reason and nothing changed. The shell reads and parses the
//! file; the core decides whether the change is allowed and applies it.

use std::sync::Arc;

use super::command::{Effect, Output, Reply};
use super::core::partition_layout;
use super::core::Core;
use crate::config::Config;

impl Core {
    pub(super) fn reconfigure(&mut self, new: Arc<Config>, out: &mut Output) {
        let r = self.try_reconfigure(new, out);
        out.reply = Some(Reply::Reconfigure(r));
    }

    fn try_reconfigure(&mut self, new: Arc<Config>, out: &mut Output) -> Result<(), String> {
        // Dynamic nodes are not in the file: they stay, at their ranks.
        let new = if self.conf.nodes.len() > self.conf.fixed_nodes {
            Arc::new(new.with_stored_nodes(&self.conf.dynamic_lines()))
        } else {
            new
        };
        let restart = self.conf.restart_only_changes(&new);
        if !restart.is_empty() {
            return Err(format!(
                "{} changed: that needs a restart of canopy-ctld and the node daemons; nothing was changed",
                restart.join(", ")
            ));
        }
        for p in &self.conf.partitions {
            let c = self.jobs.counts(&p.name);
            let active = c.pending + c.running;
            if active > 0 && !new.partitions.iter().any(|n| n.name == p.name) {
                return Err(format!(
                    "partition {} was removed but still has {active} active job(s); nothing was changed",
                    p.name
                ));
            }
        }
        for (rank, nc) in new.nodes.iter().enumerate() {
            // A running job keeps what it holds even if the node shrank;
            // new work sees the new size.
            if let Some(slot) = self.slots.get_mut(rank) {
                slot.cpus = nc.cpus;
                slot.mem_mb = nc.real_memory_mb;
            }
        }
        let (part_ranks, node_parts) = partition_layout(&new);
        self.part_ranks = part_ranks;
        self.node_parts = node_parts;
        tracing::info!(
            path = %new.path.display(),
            partitions = new.partitions.len(),
            nodes = new.nodes.len(),
            "configuration re-read and applied"
        );
        self.push_node_scripts(&new, out);
        self.conf = new.clone();
        // SuspendExcNodes/SuspendExcParts may have changed.
        self.power_reconfigured();
        out.effect(Effect::Reconfigured(new));
        // A partition may have come up or grown.
        out.effect(Effect::Reschedule);
        Ok(())
    }
}
