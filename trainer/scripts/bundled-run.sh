#!/usr/bin/env bash
# The bundled end-to-end run: a tiny model trained on swerve-mini with SFT then GRPO (swe-rl
# reward plugin) on the CPU, its reward curve plotted, and SWE-bench predictions written.
#
#   trainer/scripts/bundled-run.sh [OUTPUT_DIR]      (default: target/swerve-mini-tiny)
#
# Outputs: OUTPUT_DIR/{sft,grpo}/metrics.jsonl and plots/*.png, checkpoints, predictions.jsonl
# (for `harness run --predictions`) and summary.json (first- and last-tenth mean reward).
# About 10 minutes on 2 cores after the release build (docs/benchmarks.md, "The bundled run").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/target/swerve-mini-tiny}"
cd "$root"
# dfdx allocates and frees a fresh buffer for every tensor op; with glibc's defaults each large
# one is an mmap, so every step page-faults its working set in again (a third of an SFT step's
# time in the kernel). Keeping freed memory in the heap removes that.
export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184}"
cargo run --release -p swerve-trainer --bin trainer -- demo \
    --config trainer/configs/swerve-mini-tiny.toml --root "$root" --output "$out"
