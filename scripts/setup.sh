#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test swerve: the wasm32-wasip2 Rust target
# (guest plugins), componentize-py (Python plugins), tensorboard (the trainer's event files are
# read back with it), debootstrap (the offline base image), Debian's docker-registry (the
# loopback registry the image-pull test uses) and Open MPI with libclang (the trainer's `mpi`
# feature, which its tests build: `mpirun` runs ranks, libclang generates the MPI bindings).
# Idempotent.
set -euo pipefail

rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

if ! command -v componentize-py >/dev/null 2>&1 || ! componentize-py --version | grep -q '0.25.1'; then
    python3 -m pip install --quiet --disable-pip-version-check 'componentize-py==0.25.1'
fi

if ! python3 -c 'import tensorboard' >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check 'tensorboard==2.21.0'
fi

need=()
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v docker-registry >/dev/null 2>&1 || [ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
dpkg -s libopenmpi-dev >/dev/null 2>&1 || need+=(libopenmpi-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi
