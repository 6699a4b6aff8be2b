#!/usr/bin/env bash
# The bundled end-to-end run: a tiny model trained on swerve-mini with SFT then GRPO (swe-rl
# reward plugin) on the CPU, its reward curve plotted, and SWE-bench predictions written.
#
#   trainer/scripts/bundled-run.sh [OUTPUT_DIR]      (default: target/swerve-mini-tiny)
#
# The `trainer` binary: $SWERVE_TRAINER when set (scripts/demo.sh passes the one it has just
# built, so that the demo compiles once), else this script builds it in release mode.
#
# Outputs: OUTPUT_DIR/{sft,grpo}/metrics.jsonl and plots/*.png, checkpoints, predictions.jsonl
# (for `harness run --predictions`) and summary.json (first- and last-tenth mean reward).
# About 4 minutes on 2 cores after the release build (docs/benchmarks.md, "The bundled run").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/target/swerve-mini-tiny}"
cd "$root"
trainer="${SWERVE_TRAINER:-}"
if [[ -z $trainer ]]; then
    cargo build --locked --release -p swerve-trainer --bin trainer
    trainer="${CARGO_TARGET_DIR:-$root/target}/release/trainer"
fi
# The trainer sets up the allocator and the thread pool itself (swerve_trainer::runtime).
"$trainer" demo --config trainer/configs/swerve-mini-tiny.toml --root "$root" --output "$out"
