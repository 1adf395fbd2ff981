#!/usr/bin/env bash
# Stops the single-node Slurm that scripts/slurm-up.sh started: slurmd, slurmctld and munged, each by
# the pid in its pid file (never by name), waiting for each to exit. Leaves packages, slurm.conf,
# the munge key and the spool directories in place, so slurm-up.sh can start it again.
# NOT for a cluster someone else runs: it only touches the pid files slurm-up.sh's config names.
set -uo pipefail

RUN=/run/detsim-slurm

stop_by_pidfile() {
  local name=$1 file=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-down: $name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -KILL "$pid"
    fi
  fi
  rm -f "$file"
  echo "slurm-down: $name stopped"
}

stop_by_pidfile slurmd "$RUN/slurmd.pid"
stop_by_pidfile slurmctld "$RUN/slurmctld.pid"
stop_by_pidfile munged /run/munge/munged.pid
