//! The node's hardware: CPU topology and memory from hwloc
//! ([`topology`]), NVIDIA GPUs from NVML ([`gpu`]). What `canopy-noded -C`
//! and `-G` print, and what task binding (`exec::bind`) computes with.
//! Pure data plus one detection function each; nothing here binds or
//! starts anything.

pub mod gpu;
pub mod topology;

pub use gpu::{DetectedGpu, GpuDetection, GresFlags, GresLine};
pub use topology::{HwError, Topology};
