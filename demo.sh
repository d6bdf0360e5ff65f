#!/usr/bin/env bash
# Build canopy, start a local 8-node cluster on loopback, and run a batch job
# on it through the relay tree. Safe to run again: it restarts the cluster.
set -euo pipefail
cd "$(dirname "$0")"
# The node daemon reads the machine's topology with hwloc: its headers (and
# pkg-config, which also wants libudev's) are needed to build.
if ! pkg-config --exists hwloc libudev 2>/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config libhwloc-dev libudev-dev >/dev/null
    else
        echo "demo.sh: install pkg-config, libhwloc-dev and libudev-dev first" >&2
        exit 1
    fi
fi
cargo build --release --quiet
BIN="$PWD/target/release"
DIR="${CANOPY_DEMO_DIR:-/tmp/canopy-demo}"
"$BIN/canopy" cluster down --dir "$DIR" >/dev/null 2>&1 || true
echo "==> starting controller + 8 node daemons (TreeWidth=3) in $DIR"
SETUP=$("$BIN/canopy" cluster up --nodes 8 --tree-width 3 --dir "$DIR")
eval "$SETUP"
mkdir -p "$DIR/work" && cd "$DIR/work"
cat > hello.sh <<'JOB'
#!/bin/bash
#SBATCH --job-name=hello
#SBATCH --nodes=3
#SBATCH --output=hello-%j.out
echo "Hello from job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $(hostname)"
echo "allocated nodes: $SLURM_JOB_NODELIST ($SLURM_NNODES), batch host: $SLURMD_NODENAME"
sleep 2
echo "done"
JOB
echo "==> sbatch hello.sh"
JOB=$(sbatch --parsable hello.sh)
echo "Submitted batch job $JOB"
sleep 0.5
echo "==> squeue"; squeue
echo "==> sinfo"; sinfo
while squeue -h -j "$JOB" -t PD,R,CG -o %i | grep -q .; do sleep 0.5; done
echo "==> scontrol show job $JOB (state)"; scontrol show job "$JOB" | grep -E "JobState|NodeList=|ExitCode"
echo "==> output ($DIR/work/hello-$JOB.out)"; cat "hello-$JOB.out"
echo "==> canopy status (actors and relay tree)"; canopy status | sed -n '/RELAY TREE/,$p'
cat <<MSG

The cluster is still running. To use it from your shell:
    $SETUP
    sbatch --wrap 'hostname'      # submit more jobs; squeue, sinfo, scancel, scontrol work too
Stop it with:
    $BIN/canopy cluster down --dir $DIR
MSG
