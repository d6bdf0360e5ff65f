#!/usr/bin/env bash
# GPU check on a real GPU machine, for a session that has one (run from the
# repository root). Unlike gpu_check.sh it needs no compiler there: it runs
# binaries built here and carried in BIN (default .dev/bin, with the shared
# libraries they need beside them in .dev/lib):
#
#   mkdir -p .dev/bin .dev/lib
#   for b in canopy canopy-authd canopy-ctld canopy-noded; do
#       strip -o .dev/bin/$b target/release/$b; done
#   cp -L /lib/x86_64-linux-gnu/{libhwloc.so.15,libudev.so.1} .dev/lib/
#
# It prints what `canopy-noded -C` and `-G` detect next to nvidia-smi's
# view, then starts a one-node cluster whose slurm.conf is written from
# `-C` (so the registration check against the hardware is real) with
# `Gres=` from what NVML found and gres.conf `AutoDetect=nvml`, confined
# as a site runs it (task/cgroup,task/affinity, proctrack/cgroup,
# ConstrainCores/Devices/RAMSpace), and runs GPU jobs on it: environment,
# binding next to the GPU, device fencing, real CUDA work inside a step,
# and what scontrol, sinfo and sacct show. Each check prints PASS or FAIL;
# the script ends non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN="$(realpath "${BIN:-.dev/bin}")"
export LD_LIBRARY_PATH="$(realpath "${LIBS:-.dev/lib}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUTDIR="${OUT:-/tmp}"
D="${DIR:-/tmp/canopy-gpu}"
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

echo "== machine"
uname -r
stat -fc 'cgroup fs: %T' /sys/fs/cgroup
lscpu | grep -E '^(CPU\(s\)|Thread|Core|Socket|NUMA node)' || true
have_gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
    nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv
    nvidia-smi topo -m
    ls -l /dev/nvidia* 2>/dev/null
fi

echo "== canopy-noded -C"
cline=$("$BIN/canopy-noded" -C | head -1)
echo "$cline"
echo "== canopy-noded -G"
gout=$("$BIN/canopy-noded" -G 2>&1)
echo "$gout"
ngpu=$(grep -c 'Gres Name=gpu' <<<"$gout" || true)
gtype=$(grep -m1 -o 'Type=[^ ]*' <<<"$gout" | cut -d= -f2)
if [ "$have_gpu" = 1 ]; then
    want=$(nvidia-smi -L | grep -c '^GPU ')
    [ "$ngpu" = "$want" ] && pass "-G found $ngpu GPU(s), as nvidia-smi does" ||
        fail "-G found $ngpu GPU(s), nvidia-smi $want"
    name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "nvidia-smi name: '$name' -> canopy Type=$gtype"
    grep -q "File=/dev/nvidia" <<<"$gout" && pass "-G names the device files" ||
        fail "-G names no /dev/nvidia file"
fi

echo "== one-node cluster in $D"
"$BIN/canopy" cluster down --dir "$D" >/dev/null 2>&1 || true
rm -rf "$D"
if ! "$BIN/canopy" cluster up --nodes 1 --dir "$D" --wait 60 >"$D.env" 2>&1; then
    cat "$D.env"; cat "$D"/log/*.log 2>/dev/null | tail -40
    fail "canopy cluster up"; exit 1
fi
"$BIN/canopy" cluster down --dir "$D" >/dev/null
# The node line from -C, the Gres from -G; no config_overrides, so the
# node is checked against its hardware at registration as slurmd does.
nodeline=$(sed 's/^NodeName=[^ ]* //' <<<"$cline")
gres=""
[ "$ngpu" -gt 0 ] && gres="Gres=gpu:$gtype:$ngpu"
python3 - "$D/slurm.conf" "$nodeline" "$gres" <<'PY'
import re, sys
path, nodeline, gres = sys.argv[1:]
text = open(path).read()
text = text.replace("SlurmdParameters=config_overrides\n", "")
text = re.sub(r"^NodeName=DEFAULT .*$", "NodeName=DEFAULT " + nodeline, text, flags=re.M)
text = re.sub(r"^(NodeName=n1 .*)$", r"\1 " + gres, text, flags=re.M)
text += ("GresTypes=gpu\nTaskPlugin=task/cgroup,task/affinity\n"
         "ProctrackType=proctrack/cgroup\nJobAcctGatherType=jobacct_gather/cgroup\n")
open(path, "w").write(text)
PY
echo "AutoDetect=nvml" >"$D/gres.conf"
printf 'ConstrainCores=yes\nConstrainDevices=yes\nConstrainRAMSpace=yes\n' >"$D/cgroup.conf"
cat "$D/slurm.conf" "$D/gres.conf" "$D/cgroup.conf"
conf="$D/slurm.conf"
for d in authd ctld; do
    setsid "$BIN/canopy-$d" -f "$conf" >"$D/log/$d.log" 2>&1 </dev/null &
    echo $! >"$D/pids/$d.pid"
done
setsid "$BIN/canopy-noded" -f "$conf" -N n1 >"$D/log/n1.log" 2>&1 </dev/null &
echo $! >"$D/pids/n1.pid"
export CANOPY_CONF="$conf" PATH="$D/bin:$PATH"
state=""
for _ in $(seq 60); do
    state=$(sinfo -h -o %T 2>/dev/null | head -1)
    [ "$state" = idle ] && break
    sleep 1
done
echo "node state: $state"
[ "$state" = idle ] && pass "node registered against its hardware and is idle" ||
    fail "node is '$state', not idle"
scontrol show node n1
grep -iE 'cgroup|unconfined|gres|gpu|nvml' "$D/log/n1.log" | head -20
mkdir -p "$D/work" && cd "$D/work"

if [ "$ngpu" -gt 0 ]; then
    echo "== srun --gpus=1 --gpu-bind=closest --cpu-bind=verbose,cores -c2"
    o=$(srun --gpus=1 -c2 --gpu-bind=closest --cpu-bind=verbose,cores sh -c \
        'echo CVD=$CUDA_VISIBLE_DEVICES GDO=$GPU_DEVICE_ORDINAL SJG=$SLURM_JOB_GPUS SSG=$SLURM_STEP_GPUS;
         grep Cpus_allowed_list /proc/self/status; nvidia-smi -L' 2>&1)
    echo "$o"
    grep -q "CVD=0 " <<<"$o" && pass "CUDA_VISIBLE_DEVICES=0 in the step" ||
        fail "CUDA_VISIBLE_DEVICES"
    # srun's own allocation has no batch step: Slurm sets SLURM_STEP_GPUS
    # for its tasks, and SLURM_JOB_GPUS only in a batch job's environment.
    grep -q "SSG=0" <<<"$o" && pass "SLURM_STEP_GPUS names the GPU" || fail "SLURM_STEP_GPUS"
    grep -q '^GPU 0:' <<<"$o" && pass "nvidia-smi inside the step sees its GPU" ||
        fail "nvidia-smi inside the step sees no GPU"
    cores=$(grep -m1 -o 'Cores=[^ ]*' <<<"$gout" | cut -d= -f2)
    echo "GPU 0 cores (abstract ids) from -G: $cores"

    echo "== a step with no GPU: is /dev/nvidia* fenced?"
    o=$(srun -n1 sh -c 'nvidia-smi -L 2>&1; head -c1 /dev/nvidia0 2>&1 </dev/null; echo rc=$?' 2>&1)
    echo "$o"
    if ! grep -q '^GPU 0:' <<<"$o"; then
        pass "a step without a GPU cannot use it"
    elif grep -q 'NOT fenced' "$D/log/n1.log"; then
        echo "NOTE: a step without a GPU still sees it: the node said devices are NOT fenced here"
    else
        fail "a step without a GPU still sees it, and the node claims to fence devices"
    fi

    echo "== CUDA work inside a step (PyTorch)"
    o=$(srun --gpus=1 python3 -c '
import torch
print("devices", torch.cuda.device_count(), torch.cuda.get_device_name(0))
x = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
print("matmul ok", bool(torch.isfinite((x @ x).sum()).item()))' 2>&1)
    echo "$o"
    grep -q "matmul ok True" <<<"$o" && pass "a CUDA matmul ran inside a step" ||
        fail "CUDA inside a step"

    echo "== more GPUs than the node has"
    o=$(srun --gpus=$((ngpu + 1)) true 2>&1); rc=$?
    echo "rc=$rc $o"
    [ $rc -ne 0 ] && grep -q "Requested node configuration is not available" <<<"$o" &&
        pass "an impossible GPU request is refused as Slurm refuses it" ||
        fail "impossible GPU request"

    echo "== batch job: scontrol -d, sinfo %G, squeue %b, sacct AllocTRES"
    j=$(sbatch --parsable --gpus=1 -o gpu-%j.out --wrap 'nvidia-smi -L; env | grep -E "^(SLURM_JOB_GPUS|CUDA_VISIBLE)"; sleep 3')
    sleep 1.5
    scontrol -d show job "$j" | grep -E 'GRES=|TRES=|CPU_IDs'
    scontrol -d show job "$j" | grep -q "GRES=gpu:$gtype:1(IDX:0)" &&
        pass "scontrol -d show job names the GPU index" || fail "scontrol GRES IDX"
    scontrol -d show node n1 | grep -E 'Gres|TRES'
    scontrol -d show node n1 | grep -q "GresUsed=gpu:$gtype:1(IDX:0)" &&
        pass "GresUsed shows the running job's GPU" || fail "GresUsed"
    sinfo -h -o %G
    squeue -h -o '%i %b'
    for _ in $(seq 30); do squeue -h -j "$j" -t PD,R,CG -o %i | grep -q . || break; sleep 1; done
    cat "gpu-$j.out"
    grep -q "SLURM_JOB_GPUS=0" "gpu-$j.out" && pass "the batch job has SLURM_JOB_GPUS" ||
        fail "SLURM_JOB_GPUS in the batch job"
    grep -q '^GPU 0:' "gpu-$j.out" && pass "batch job saw its GPU" || fail "batch job GPU"
    sacct -j "$j" -X -n -P -o jobid,state,exitcode,alloctres
    sacct -j "$j" -X -n -P -o alloctres | grep -q "gres/gpu=1" &&
        pass "sacct AllocTRES counts gres/gpu=1" || fail "sacct AllocTRES"
fi

echo "== confinement on this host"
o=$(srun -n1 -c1 --mem=64 sh -c 'grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup' 2>&1)
echo "$o"

cd /
"$BIN/canopy" cluster down --dir "$D" >/dev/null 2>&1
tail -30 "$D/log/n1.log" >"$OUTDIR/n1.log.tail" 2>/dev/null
echo "== $fails check(s) failed"
exit $((fails > 0))
