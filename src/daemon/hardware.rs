//! The hardware a node daemon reports when it registers, as slurmd does:
//! sockets, cores, threads, CPUs and boards from hwloc, RealMemory as
//! `slurmd -C` counts it, and the GPUs NVML finds. The controller checks
//! them against slurm.conf (`ctld/register.rs`).
//!
//! Detection runs once per daemon start, off the event loop (hwloc and
//! NVML block). A node where it fails reports its slurm.conf values and
//! says so once in the log: better a node that runs than one that cannot
//! register. Simulated nodes always report slurm.conf's values, since
//! thousands of them share one machine.

use crate::config::NodeConf;
use crate::exec::hw::{gpu, topology, HwError};
use crate::model::node::{NodeResources, ReportedGpu};

/// What slurm.conf says the node has (simulated nodes, and the fallback).
pub fn configured(nc: &NodeConf) -> NodeResources {
    NodeResources {
        cpus: nc.cpus,
        sockets: nc.sockets,
        cores_per_socket: nc.cores_per_socket,
        threads_per_core: nc.threads_per_core,
        real_memory_mb: nc.real_memory_mb,
        boards: nc.boards,
        gpus: Vec::new(),
    }
}

/// This machine's hardware (blocking: hwloc and NVML), and the topology
/// it was read from (task binding maps CPU ids with it).
pub fn detect() -> Result<(NodeResources, topology::Topology), HwError> {
    let topo = topology::detect()?;
    let found = gpu::detect(&topo);
    if let Some(reason) = &found.reason {
        // A node without the NVIDIA driver is not an error.
        tracing::debug!(reason = %reason, "no GPUs detected");
    }
    let found_gpus = found.gpus;
    let resources = NodeResources {
        cpus: topo.cpus(),
        sockets: topo.sockets,
        cores_per_socket: topo.cores_per_socket,
        threads_per_core: topo.threads_per_core,
        real_memory_mb: topology::real_memory_mb(),
        boards: topo.boards,
        gpus: found_gpus
            .into_iter()
            .map(|g| ReportedGpu {
                index: g.index,
                type_name: g.type_name,
                file: g.file,
                cores: g.cores,
            })
            .collect(),
    };
    Ok((resources, topo))
}

/// What a real node reports: its detected hardware, or slurm.conf's
/// values (logged once) when detection fails; and the topology detected.
pub async fn report(nc: &NodeConf) -> (NodeResources, Option<topology::Topology>) {
    let node = nc.name.clone();
    match tokio::task::spawn_blocking(detect).await {
        Ok(Ok((r, topo))) => {
            tracing::info!(
                node = %node,
                cpus = r.cpus,
                sockets = r.sockets,
                cores_per_socket = r.cores_per_socket,
                threads_per_core = r.threads_per_core,
                real_memory_mb = r.real_memory_mb,
                gpus = r.gpus.len(),
                "hardware detected"
            );
            (r, Some(topo))
        }
        Ok(Err(e)) => {
            tracing::warn!(node = %node, error = %e, "hardware detection failed; reporting slurm.conf's values");
            (configured(nc), None)
        }
        Err(e) => {
            tracing::warn!(node = %node, error = %e, "hardware detection did not finish; reporting slurm.conf's values");
            (configured(nc), None)
        }
    }
}
