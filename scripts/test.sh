#!/usr/bin/env bash
# Runs every test of the workspace (default members: host, harness, sandbox, trainer, the
# plugins' libraries and the end-to-end tests). Needs a running Docker engine; starts a one-node
# Slurm cluster for the `--executor slurm` tests when no controller answers
# (scripts/slurm-local.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/slurm-local.sh up >/dev/null
cargo test --locked "$@"
