#!/usr/bin/env bash
# The main job on bundled defaults:
#   1. verified evaluation of the bundled swerve-mini dataset in Docker (`harness run`): the gold
#      patches, then the bundled mixed predictions (right, wrong, partial, unappliable,
#      malformed, empty and forging patches), each printing SWE-bench's summary and writing its
#      run report and per-instance logs under target/demo/;
#   2. scoring the bundled sample completions with the bundled reward plugins (SWE-RL reward,
#      format check, a Python plugin), sandboxed, into target/demo/rewards.jsonl.
# The first run builds the base image offline (debootstrap) and the swerve-mini images.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --locked --release -p swerve-harness --bin harness
harness=$PWD/target/release/harness
mkdir -p target/demo
cd target/demo
"$harness" run --dataset swerve-mini --predictions gold --run-id demo --max-workers 2
"$harness" run --dataset swerve-mini \
    --predictions ../../harness/datasets/swerve-mini/predictions-mixed.jsonl --run-id demo --max-workers 2
"$harness" reward --plugin swe-rl --plugin format=0.5 --plugin python-keywords=0.25 \
    --input ../../harness/samples/swerve-mini-completions.jsonl --output rewards.jsonl
echo "run reports: target/demo/gold.demo.json, target/demo/swerve-mini-mixed.demo.json"
echo "logs: target/demo/logs/run_evaluation/demo/; rewards: target/demo/rewards.jsonl"
