#!/usr/bin/env bash
# Runs every test of the workspace (default members: host, harness, sandbox, trainer, curate, the
# plugins' libraries and the end-to-end tests). Needs a running Docker engine; starts a one-node
# Slurm cluster for the `--executor slurm` tests when no controller answers
# (scripts/slurm-local.sh).
#
# With cargo-nextest installed (this machine kind has it), every test runs in a process of its
# own from one queue across the test binaries, more at once than there are cores, since most
# wait on Docker, PyPI or Slurm (.config/nextest.toml: the Slurm tests one at a time, the
# trainer's two at a time); the doc tests run after them. Without it, `cargo test`. Arguments
# are passed to `cargo test` as they are (`scripts/test.sh -p swerve-curate --test it validate`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/slurm-local.sh up >/dev/null
if [ $# -gt 0 ]; then
    exec cargo test --locked "$@"
fi
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --locked --no-fail-fast
    cargo test --locked --doc
else
    cargo test --locked
fi
