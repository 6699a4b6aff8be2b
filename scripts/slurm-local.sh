#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests and for trying `--executor slurm`:
#
#   scripts/slurm-local.sh up      install slurm-wlm and munge if missing, start munged,
#                                  slurmctld and slurmd; returns once the node is idle
#   scripts/slurm-local.sh down    stop the daemons (the configuration and state stay)
#   scripts/slurm-local.sh status  sinfo
#
# Needs root and Debian's packages. The node is named after `hostname -s`, has every CPU of the
# machine and 90 % of its memory, and one partition, `main`. State, spool, pid and log files live
# under SLURM_LOCAL_DIR (default /var/tmp/swerve-slurm). Array tasks run as root and reach the
# machine's Docker engine, as a cluster node's jobs reach that node's engine.
set -euo pipefail
dir="${SLURM_LOCAL_DIR:-/var/tmp/swerve-slurm}"
conf=/etc/slurm/slurm.conf

install() {
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq slurm-wlm munge >/dev/null
    fi
}

configure() {
    local host cpus mem
    if [[ -f $conf ]] && ! grep -q "^# Written by swerve's scripts/slurm-local.sh" "$conf"; then
        echo "slurm-local: $conf exists and was not written by this script; not touching it" >&2
        return 1
    fi
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
    mkdir -p "$dir/state" "$dir/spool" /etc/slurm
    cat >"$conf" <<EOF
# Written by swerve's scripts/slurm-local.sh: a one-node cluster for tests.
ClusterName=swerve-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
    chown munge: /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge && chown munge: /run/munge
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        su -s /bin/sh munge -c 'munged --force' 2>/dev/null || munged --force
    fi
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "slurm-local: munged did not start" >&2
    return 1
}

up() {
    if scontrol ping 2>/dev/null | grep -q "is UP"; then
        sinfo
        return 0
    fi
    install
    configure
    start_munge
    pgrep -x slurmctld >/dev/null || slurmctld
    pgrep -x slurmd >/dev/null || slurmd
    for _ in $(seq 150); do
        if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            sinfo
            return 0
        fi
        sleep 0.2
    done
    echo "slurm-local: the node did not become idle; see $dir/slurmctld.log and $dir/slurmd.log" >&2
    sinfo >&2 || true
    return 1
}

down() {
    for daemon in slurmd slurmctld; do
        pkill -x "$daemon" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null || return 0
        sleep 0.1
    done
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) sinfo ;;
    *)
        echo "usage: $0 up|down|status" >&2
        exit 2
        ;;
esac
