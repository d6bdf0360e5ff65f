#!/bin/bash
# Where exec/bind.rs's expected masks come from: a private Slurm 22.05
# (Debian's slurmctld + slurmd, task/affinity, CR_Core) on one node whose
# topology is hwloc's synthetic SYN, and for each srun option line on
# stdin, the mask list task/affinity computed (from slurmd's log; the
# tasks themselves fail to start when SYN has more CPUs than the machine,
# which does not matter here).
#
# Usage (as root, munge installed):
#   echo '-n4 --cpu-bind=cores -m block:block' | loadtest/bind_peer.sh ["package:2 core:8 pu:2"]
# Intel-style numbering: SYN='package:2 core:8 pu:2(indexes=0,16,1,17,...)'.
# Nothing in /etc is touched; what it starts (munged too, if it was not
# running) is stopped on exit.
set -euo pipefail
SYN=${1:-package:2 core:8 pu:2}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
D=$(mktemp -d /tmp/bind_peer.XXXX); H=$(hostname)
pids=()
cleanup() { set +e; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; sleep 1; rm -rf "$D"; }
trap cleanup EXIT
if ! pgrep -x munged >/dev/null; then
    su -s /bin/sh munge -c /usr/sbin/munged; sleep 1
    # munged forks into the background; its pid file names the daemon.
    pids+=("$(cat /run/munge/munged.pid)")
fi
# Sockets, cores and threads as hwloc will report them (slurmd -C).
read -r S C T < <(HWLOC_SYNTHETIC="$SYN" slurmd -C | head -1 |
    sed -E 's/.*SocketsPerBoard=([0-9]+) CoresPerSocket=([0-9]+) ThreadsPerCore=([0-9]+).*/\1 \2 \3/')
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$D/state" "$D/spool"
cat > "$D/slurm.conf" <<CONF
ClusterName=bindpeer
SlurmctldHost=$H
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmdDebug=debug
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
NodeName=$H Sockets=$S CoresPerSocket=$C ThreadsPerCore=$T CPUs=$((S * C * T)) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf
setsid /usr/sbin/slurmctld -D -i > "$D/ctld.out" 2>&1 & pids+=("$!")
HWLOC_SYNTHETIC="$SYN" setsid /usr/sbin/slurmd -D > "$D/slurmd.out" 2>&1 & pids+=("$!")
for _ in $(seq 30); do sinfo -h -o %t 2>/dev/null | grep -qE 'idle|mix' && break; sleep 1; done
while IFS= read -r args; do
    [ -z "$args" ] && continue
    n=$(wc -l < "$D/slurmd.log")
    # shellcheck disable=SC2086  # the line is srun's options
    timeout 30 srun $args true > /dev/null 2>&1 < /dev/null || true
    sleep 0.3
    echo "### srun $args"
    tail -n +$((n + 1)) "$D/slurmd.log" |
        grep -E "lllp_distribution: JobId|_lllp_generate_cpu_bind jobid|Entire node|outside of job step" |
        sed -E 's/^\[[^]]*\] //; s/task\/affinity: //'
done
