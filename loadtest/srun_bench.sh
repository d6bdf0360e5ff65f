#!/bin/bash
# Median srun launch time on a fresh 8-node local cluster.
# Usage: loadtest/srun_bench.sh BINDIR LABEL
#   BINDIR holds canopy, canopy-ctld and canopy-noded (e.g. target/release).
# Run two builds in turns (old, new, old, new, ...) to compare them.
set -euo pipefail
B=$1; L=$2; D=$(mktemp -d /tmp/srun_bench_$L.XXXX)
"$B/canopy" cluster up --nodes 8 --dir "$D/c" > "$D/up.log" 2>&1 &
UP=$!
trap 'kill $UP 2>/dev/null || true; pkill -f "$D/c/" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    [ -e "$D/c/slurm.conf" ] && CANOPY_CONF="$D/c/slurm.conf" "$D/c/bin/sinfo" -h -o %t 2>/dev/null | grep -q idle && break
    sleep 0.3
done
export CANOPY_CONF="$D/c/slurm.conf" PATH="$D/c/bin:$PATH"
for _ in 1 2 3; do srun -N8 true < /dev/null; done
L=$L python3 - <<'PY'
import os, statistics, subprocess, time
def median_ms(args, n=30):
    v = []
    for _ in range(n):
        s = time.perf_counter()
        subprocess.run(args, check=True, stdin=subprocess.DEVNULL)
        v.append((time.perf_counter() - s) * 1000)
    return statistics.median(v)
print(f"{os.environ['L']}: srun -N1 true {median_ms(['srun','-N1','true']):.1f} ms, "
      f"srun -N8 true {median_ms(['srun','-N8','true']):.1f} ms")
PY
