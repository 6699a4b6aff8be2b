#!/usr/bin/env bash
# Podman's Docker-compatible service on this machine, for running swerve on a node without
# Docker (docs/cluster.md):
#
#   scripts/podman-local.sh up     install podman and catatonit if missing, start the service on
#                                  /run/podman/podman.sock; prints the DOCKER_HOST to export
#   scripts/podman-local.sh down   stop the service
#
# Podman gives containers the highest open-file and process limits by default; a host that
# forbids raising them (no CAP_SYS_RESOURCE, as in some VMs and containers) then refuses to start
# any container ("error setting rlimit ... operation not permitted"). The drop-in
# /etc/containers/containers.conf.d/swerve.conf sets limits such hosts accept. catatonit is
# Podman's init binary (swerve starts containers with an init, as Docker's --init).
set -euo pipefail
socket=/run/podman/podman.sock

up() {
    if ! command -v podman >/dev/null || [[ ! -x /usr/libexec/podman/catatonit ]]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq podman catatonit >/dev/null
    fi
    mkdir -p /etc/containers/containers.conf.d "$(dirname "$socket")"
    cat >/etc/containers/containers.conf.d/swerve.conf <<'CONF'
# Written by swerve's scripts/podman-local.sh.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
CONF
    if ! pgrep -f "podman system service" >/dev/null; then
        nohup podman system service --time=0 "unix://$socket" >/var/tmp/podman-service.log 2>&1 &
    fi
    for _ in $(seq 50); do
        [[ -S $socket ]] && curl -sf --unix-socket "$socket" http://d/_ping >/dev/null && break
        sleep 0.2
    done
    echo "export DOCKER_HOST=unix://$socket"
}

down() {
    pkill -f "podman system service" 2>/dev/null || true
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    *)
        echo "usage: $0 up|down" >&2
        exit 2
        ;;
esac
