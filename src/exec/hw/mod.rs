//! The node's hardware: CPU topology and memory from hwloc
//! ([`topology`]), NVIDIA GPUs from NVML ([`gpu`]). What `canopy-noded -C`
//! and `-G` print, and what task binding (`exec::bind`) computes with.
//! Pure data plus one detection function each; nothing here binds or
//! starts anything.

pub mod gpu;
pub mod topology;

pub use gpu::{DetectedGpu, GpuDetection, GresFlags, GresLine, GresLogStyle};
pub use topology::{HwError, Topology};

/// What `canopy-noded -C` prints, as Slurm 22.05's `slurmd -C`: the node
/// line with the hardware hwloc sees and RAM from sysconf, then `UpTime=`.
/// (Newer slurmd appends autodetected GPUs as `Gres=` and a `Found ...`
/// line: [`gpu::autodetect_summary`] and [`topology::format_node_config`]
/// write those when given them.)
pub fn node_config_report(node: &str) -> Result<String, HwError> {
    let topo = topology::detect()?;
    Ok(topology::format_node_config(
        node,
        &topo,
        topology::real_memory_mb(),
        None,
        topology::uptime_secs(),
    ))
}

/// The GRES lines `canopy-noded -G` logs (as `slurmd -G`), one per
/// autodetected GPU; none without GPUs. The reason none were found is
/// logged once, at debug: a node without a driver is not an error.
pub fn gres_report() -> Result<Vec<String>, HwError> {
    let topo = topology::detect()?;
    let found = gpu::detect(&topo);
    if let Some(reason) = &found.reason {
        tracing::debug!(reason = %reason, "no GPUs autodetected");
    }
    Ok(found
        .gpus
        .iter()
        .map(|g| gpu::format_gres_line(&g.gres_line(topo.cpus())))
        .collect())
}
