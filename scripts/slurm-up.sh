#!/usr/bin/env bash
# Brings up a single-node Slurm on this machine (localhost), as root, for detsim's Slurm tests and for
# trying `detsim slurm submit` by hand: installs slurm-wlm and munge from Debian when missing, makes
# the munge key, starts munged (as munge), writes a slurm.conf (SlurmUser=root, proctrack/linuxproc,
# task/none, one node declared with DETSIM_SLURM_CPUS CPUs, default 16, so that a run's worker steps
# fit on a 2-core machine), starts slurmctld and slurmd, and waits until `sinfo` shows the node idle.
# Idempotent: a cluster that is already up is left alone. Stop it with scripts/slurm-down.sh.
# NOT a production setup (no accounting, no cgroups, no real resource limits) and not for a machine
# whose /etc/slurm/slurm.conf someone else wrote: such a file is refused, never overwritten.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK='# written by detsim scripts/slurm-up.sh'
CPUS=${DETSIM_SLURM_CPUS:-16}
WAIT_S=${DETSIM_SLURM_WAIT_S:-60}
NODE=$(hostname -s)
RUN=/run/detsim-slurm

die() {
  echo "slurm-up: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (starts munged, slurmctld and slurmd)"

node_state() { sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n1; }

# Already up: nothing to do.
if command -v sinfo >/dev/null && [ "$(node_state)" = idle ]; then
  echo "slurm-up: already up (node $NODE idle)"
  exit 0
fi

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null; then
    return
  fi
  echo "slurm-up: installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  if ! alive /run/munge/munged.pid; then
    runuser -u munge -- /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
  fi
  for _ in $(seq 1 50); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  die "munge does not work: 'munge -n | unmunge' fails (see /var/log/munge/munged.log)"
}

write_conf() {
  if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script; refusing to overwrite it"
  fi
  install -d -m 0755 /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$RUN"
  cat >"$CONF.tmp" <<EOF
$MARK: a single-node cluster on localhost for tests.
ClusterName=detsim
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Declared CPUs may exceed the real ones: the node keeps its declared size.
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=10
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=detsim Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  mv "$CONF.tmp" "$CONF"
}

start_slurm() {
  if ! alive "$RUN/slurmctld.pid"; then
    /usr/sbin/slurmctld || die "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
  fi
  if ! alive "$RUN/slurmd.pid"; then
    /usr/sbin/slurmd || die "slurmd did not start (see /var/log/slurm/slurmd.log)"
  fi
}

wait_idle() {
  local state=''
  for _ in $(seq 1 $((WAIT_S * 2))); do
    state=$(node_state)
    case "$state" in
      idle) return ;;
      down* | drain* | fail*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  die "node $NODE is not idle after ${WAIT_S}s (state: ${state:-none}); see /var/log/slurm/slurmctld.log and slurmd.log"
}

install_packages
start_munge
write_conf
start_slurm
wait_idle
echo "slurm-up: node $NODE idle ($CPUS CPUs declared, partition detsim)"
