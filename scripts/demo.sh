#!/usr/bin/env bash
# The main job on bundled defaults: score the bundled sample completions of swerve-mini with the
# bundled reward plugins (SWE-RL reward, format check, a Python plugin), sandboxed, and print
# the summary. Results go to target/demo/rewards.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p target/demo
cargo run --locked --release -p swerve-harness --bin harness -- reward \
    --plugin swe-rl --plugin format=0.5 --plugin python-keywords=0.25 \
    --input harness/samples/swerve-mini-completions.jsonl \
    --output target/demo/rewards.jsonl
echo "per-sample results: target/demo/rewards.jsonl"
