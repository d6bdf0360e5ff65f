#!/usr/bin/env bash
# GPU check for a session that has a GPU machine (run from the repository
# root): builds canopy-noded (debug), prints what `-C` and `-G` report from
# NVML autodetection, and what nvidia-smi says, so the two can be compared
# by eye: GPU count and names (Type= is the name lowercased, spaces as
# '_'), device files (/dev/nvidia<minor>), Cores= (abstract core ids of
# each GPU's CPU affinity) and Links= (NVLink counts, -1 for itself).
# Needs: cargo, libhwloc-dev, pkg-config, libudev-dev, the NVIDIA driver.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
echo "== build"
cargo build --bin canopy-noded 2>&1 | tail -3 || exit 1
bin="$CARGO_TARGET_DIR/debug/canopy-noded"
echo "== canopy-noded -C"
"$bin" -C || echo "(-C failed: rc=$?)"
echo "== canopy-noded -G"
"$bin" -G -v 2>&1 || echo "(-G failed: rc=$?)"
echo "== nvidia-smi"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv
    nvidia-smi topo -m
    for d in /dev/nvidia[0-9]*; do [ -e "$d" ] && ls -l "$d"; done
else
    echo "nvidia-smi not found"
fi
echo "== lscpu (for the abstract core numbering)"
lscpu | grep -E '^(CPU\(s\)|Thread|Core|Socket|NUMA node)' || true
lscpu -p=cpu,core,socket,node | grep -v '^#' | head -64 || true
