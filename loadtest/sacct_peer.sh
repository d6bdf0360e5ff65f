#!/bin/bash
# sacct -j over N finished jobs: canopy's own accounting store (sled) against
# Slurm 22.05's slurmdbd on MariaDB, both on this machine, in one run.
#
# Usage (as root): loadtest/sacct_peer.sh BINDIR [N]
#   BINDIR holds canopy, canopy-ctld and canopy-noded (e.g. target/release).
#   N finished jobs on each side (default 10000).
#
# Each side gets N held single jobs (4 submitting clients), then `scancel`
# ends them all, so each is a finished CANCELLED record. Single jobs, not
# arrays: Slurm keeps a cancelled pending array as one database row, canopy
# as one record per task, and the point is N rows on both sides. Then the
# same three sacct commands are timed on each side, process start to exit,
# median of 11.
#
# Slurm's side is private: MariaDB (Debian's mariadb-server) with its own data
# directory and the InnoDB settings Slurm's accounting guide recommends,
# slurmdbd and slurmctld with their own configuration and ports, under a
# temporary directory. Nothing in /etc is touched; munged must be running
# (`../shared/peer/slurm-up.sh` starts it). Everything started is stopped on
# exit.
set -euo pipefail
B=$(cd "$1" && pwd); N=${2:-10000}
[ "$(id -u)" = 0 ] || { echo "run as root: MariaDB runs as mysql, slurmdbd as root" >&2; exit 1; }
for p in /usr/sbin/mariadbd /usr/sbin/slurmdbd /usr/sbin/slurmctld /usr/bin/sacct /usr/bin/sacctmgr; do
    [ -x "$p" ] || { echo "missing $p: apt-get install -y mariadb-server slurmdbd slurmctld slurm-client munge" >&2; exit 1; }
done
pgrep -x munged >/dev/null || { echo "munged is not running (../shared/peer/slurm-up.sh starts it)" >&2; exit 1; }

D=$(mktemp -d /tmp/sacct_peer.XXXX)
cleanup() {
    set +e
    for f in "$D/slurmctld.pid" "$D/slurmdbd.pid" "$D/run/mysqld.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    [ -e "$D/canopy/slurm.conf" ] && "$B/canopy" cluster down --dir "$D/canopy" >/dev/null 2>&1
    sleep 2
    rm -rf "$D"
}
trap cleanup EXIT

# Three free loopback ports: MariaDB, slurmdbd, slurmctld (slurmd's is +1).
read -r PDB PDBD PCTL < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

echo "== MariaDB and slurmdbd in $D" >&2
mkdir -p "$D/db" "$D/run" "$D/state" "$D/spool"
chmod 755 "$D"   # mktemp's 0700 would keep the mysql user out
chown mysql: "$D/db" "$D/run"
mariadb-install-db --user=mysql --datadir="$D/db" --auth-root-authentication-method=normal \
    > "$D/install.log" 2>&1 || { tail -5 "$D/install.log" >&2; exit 1; }
setsid /usr/sbin/mariadbd --user=mysql --datadir="$D/db" --socket="$D/run/mysql.sock" \
    --port="$PDB" --bind-address=127.0.0.1 --pid-file="$D/run/mysqld.pid" --skip-log-bin \
    --innodb-buffer-pool-size=1G --innodb-lock-wait-timeout=900 --innodb-log-file-size=64M \
    > "$D/run/mysqld.log" 2>&1 &
SQL="mariadb --socket=$D/run/mysql.sock -uroot"
for _ in $(seq 60); do $SQL -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
$SQL -e "create user 'slurm'@'127.0.0.1' identified by 'bench';
         grant all on slurm_acct_db.* to 'slurm'@'127.0.0.1';"

H=$(hostname)
cat > "$D/slurm.conf" <<EOF
ClusterName=sacctpeer
SlurmctldHost=$H
SlurmctldPort=$PCTL
SlurmdPort=$((PCTL + 1))
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmctldLogFile=$D/slurmctld.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$PDBD
JobAcctGatherType=jobacct_gather/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
MaxJobCount=200000
NodeName=$H CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat > "$D/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$PDBD
SlurmUser=root
PidFile=$D/slurmdbd.pid
LogFile=$D/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$PDB
StorageUser=slurm
StoragePass=bench
StorageLoc=slurm_acct_db
EOF
chmod 600 "$D/slurmdbd.conf"

# Slurm's commands: Debian's, with this configuration (slurmdbd finds its
# file beside slurm.conf).
slurm() { env -u CANOPY_CONF SLURM_CONF="$D/slurm.conf" PATH=/usr/sbin:/usr/bin:/bin "$@"; }
slurm setsid /usr/sbin/slurmdbd -D > "$D/slurmdbd.out" 2>&1 &
for _ in $(seq 60); do slurm sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
slurm sacctmgr -i add cluster sacctpeer >/dev/null
slurm setsid /usr/sbin/slurmctld -D -i > "$D/slurmctld.out" 2>&1 &
for _ in $(seq 60); do slurm squeue >/dev/null 2>&1 && break; sleep 0.5; done

# N held jobs from 4 clients, then one scancel ends them all.
fill() {
    local per=$((N / 4))
    for p in 1 2 3 4; do
        (for _ in $(seq "$per"); do sbatch --hold --parsable -o /dev/null --wrap true; done > "$1.$p") &
    done
    wait
    cat "$1".[1-4] | sort -n > "$1"
    scancel -u "$(id -un)"
}

echo "== Slurm: $N held jobs, then scancel" >&2
export -f fill; export N
slurm bash -c "fill $D/slurm.ids"
# slurmctld hands records to slurmdbd in the background: wait until all are there.
for _ in $(seq 240); do
    rows=$($SQL -N -e "select count(*) from slurm_acct_db.sacctpeer_job_table where state = 4" 2>/dev/null || echo 0)
    [ "$rows" -ge "$N" ] && break
    sleep 0.5
done
echo "   $rows cancelled rows in MariaDB" >&2

echo "== canopy: $N held jobs, then scancel" >&2
"$B/canopy" cluster up --nodes 2 --dir "$D/canopy" > "$D/canopy-up.log" 2>&1
canopy() { env -u SLURM_CONF CANOPY_CONF="$D/canopy/slurm.conf" PATH="$D/canopy/bin:$PATH" "$@"; }
canopy bash -c "fill $D/canopy.ids"

time_both() {
    SLURM_ID=$(sed -n "$((N / 2))p" "$D/slurm.ids") CANOPY_ID=$(sed -n "$((N / 2))p" "$D/canopy.ids") \
    D="$D" B="$B" N="$N" python3 - <<'PY'
import os, statistics, subprocess, time
D, N = os.environ["D"], os.environ["N"]
env_slurm = {k: v for k, v in os.environ.items() if k != "CANOPY_CONF"}
env_slurm.update(SLURM_CONF=f"{D}/slurm.conf", PATH="/usr/sbin:/usr/bin:/bin")
env_canopy = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
env_canopy.update(CANOPY_CONF=f"{D}/canopy/slurm.conf", PATH=f"{D}/canopy/bin:/usr/bin:/bin")
forms = [
    ["-X", "-P", "-n", "-o", "JobID,State"],
    [],
    ["-P", "-n", "-o", "JobID,JobName,State,ExitCode,Elapsed,MaxRSS"],
]
def median_ms(args, env):
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    assert "CANCELLED" in out, (args, out)
    v = []
    for _ in range(11):
        s = time.perf_counter()
        subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
        v.append((time.perf_counter() - s) * 1000)
    return statistics.median(v)
print(f"sacct -j <one job> with {N} finished jobs recorded, median of 11 (ms):")
print(f"| command | canopy | Slurm (slurmdbd + MariaDB) | ratio |")
print(f"|---|---|---|---|")
for f in forms:
    c = median_ms(["sacct", "-j", os.environ["CANOPY_ID"], *f], env_canopy)
    s = median_ms(["sacct", "-j", os.environ["SLURM_ID"], *f], env_slurm)
    shown = " ".join(["sacct -j ID", *f])
    print(f"| `{shown}` | {c:.1f} | {s:.1f} | {s / c:.1f}x |")
PY
}
time_both
