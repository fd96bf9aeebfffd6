#!/usr/bin/env bash
# A one-node Slurm cluster for tests: munged, slurmctld and slurmd on this
# machine, no systemd, accounting off, short timers. Needs root and Debian's
# slurm-wlm and munge (scripts/install-deps.sh).
#
#   scripts/slurm-test-cluster.sh start DIR   # writes DIR/slurm.conf, starts the daemons
#   scripts/slurm-test-cluster.sh stop DIR    # stops what start started
#
# Clients find the cluster (and its munged's socket) through
# SLURM_CONF=DIR/slurm.conf. SLURMCTLD_PORT and SLURMD_PORT move the daemons
# off 6817/6818 (the Go tests pick free ones); SLURM_TEST_CPUS gives the node
# more CPUs than the machine has (config_overrides), so several small test
# jobs run side by side; SLURM_TEST_GPUS=N gives it N fake GPUs (gres.conf).
set -euo pipefail
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop() {
  for d in slurmd slurmctld munged; do
    f="$dir/$d.pid"
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

start() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "the test cluster needs root (munged runs as munge, slurmd as root)" >&2
    exit 1
  fi
  for b in munged mungekey slurmctld slurmd srun; do
    command -v "$b" >/dev/null || { echo "$b not found: install slurm-wlm and munge (scripts/install-deps.sh)" >&2; exit 1; }
  done
  stop
  # munge: the machine's key (made once), and a munged of this cluster's own
  # on a socket in DIR, so that clusters started side by side (two test runs
  # on one machine) neither share nor stop each other's daemon.
  mkdir -p /etc/munge
  chown munge:munge /etc/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  chmod 0755 "$dir" # munged runs as munge and reaches its directory through DIR
  mdir="$dir/munge"
  mkdir -p "$mdir"
  chown munge:munge "$mdir"
  chmod 0700 "$mdir"
  su -s /bin/sh munge -c "munged --force --socket=$mdir/munge.socket --pid-file=$mdir/munged.pid \
    --log-file=$mdir/munged.log --seed-file=$mdir/munged.seed --key-file=/etc/munge/munge.key"
  cp "$mdir/munged.pid" "$dir/munged.pid" # ours to stop

  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  # Fake GPUs (SLURM_TEST_GPUS=N): character devices with /dev/null's numbers,
  # enough for Slurm to allocate and bind them (CUDA_VISIBLE_DEVICES per task).
  gres="" gresconf=""
  gpus=${SLURM_TEST_GPUS:-0}
  rm -f "$dir/gres.conf" "$dir"/gpu[0-9]*
  if [ "$gpus" -gt 0 ]; then
    ok=1
    for i in $(seq 0 $((gpus - 1))); do mknod "$dir/gpu$i" c 1 3 2>/dev/null || ok=0; done
    if [ "$ok" = 1 ]; then
      gres=" Gres=gpu:$gpus"
      gresconf="GresTypes=gpu"
      echo "Name=gpu File=$dir/gpu[0-$((gpus - 1))]" >"$dir/gres.conf"
    else
      echo "no fake GPUs: mknod is not allowed here" >&2
    fi
  fi
  cat >"$dir/slurm.conf" <<EOF
ClusterName=casestudy-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$mdir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
SlurmdParameters=config_overrides
$gresconf
NodeName=localhost$gres CPUs=${SLURM_TEST_CPUS:-$(nproc)} RealMemory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2)) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -c -f "$SLURM_CONF"
  slurmd -N localhost -f "$SLURM_CONF"
  for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; then
      echo "slurm test cluster up: SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "slurm test cluster did not come up; logs in $dir/log" >&2
  sinfo >&2 || true
  tail -n 20 "$dir/log/"*.log >&2 || true
  stop
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
