#!/usr/bin/env bash
# Runs every test of the workspace (default members: host, harness, sandbox, trainer, the
# plugins' libraries and the end-to-end tests). Needs a running Docker engine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --locked "$@"
