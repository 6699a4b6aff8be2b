#!/usr/bin/env bash
# The main job on bundled defaults:
#   1. the bundled training run (`trainer demo`, trainer/scripts/bundled-run.sh): a tiny Qwen2
#      trained from random weights on the 13 swerve-mini tasks, SFT then GRPO with the `swe-rl`
#      reward plugin, on the CPU in about five minutes; reward curve plotted, predictions of the
#      final checkpoint written (greedy), under target/demo/train/;
#   2. those predictions evaluated in Docker with `harness run`, SWE-bench style;
#   3. verified evaluation of the bundled swerve-mini dataset (`harness run`): the gold patches,
#      then the bundled mixed predictions (right, wrong, partial, unappliable, malformed, empty
#      and forging patches), each printing SWE-bench's summary and writing its run report and
#      per-instance logs under target/demo/;
#   4. scoring the bundled sample completions with the bundled reward plugins (SWE-RL reward,
#      format check, a Python plugin), sandboxed, into target/demo/rewards.jsonl.
# The first run builds the base image offline (debootstrap) and the swerve-mini images.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The only compilation: both binaries in one invocation (one feature resolution). The bundled
# run uses this `trainer` instead of building its own.
cargo build --locked --release -p swerve-harness --bin harness -p swerve-trainer --bin trainer
bin=$(realpath -m "${CARGO_TARGET_DIR:-target}")/release
harness=$bin/harness
mkdir -p target/demo
SWERVE_TRAINER=$bin/trainer trainer/scripts/bundled-run.sh "$PWD/target/demo/train"
cd target/demo
"$harness" run --dataset swerve-mini --predictions train/predictions.jsonl --run-id demo \
    --max-workers 2
"$harness" run --dataset swerve-mini --predictions gold --run-id demo --max-workers 2
"$harness" run --dataset swerve-mini \
    --predictions ../../harness/datasets/swerve-mini/predictions-mixed.jsonl --run-id demo --max-workers 2
"$harness" reward --plugin swe-rl --plugin format=0.5 --plugin python-keywords=0.25 \
    --input ../../harness/samples/swerve-mini-completions.jsonl --output rewards.jsonl
echo "trained model: target/demo/train/ (summary.json, grpo/plots/reward.png, predictions.jsonl)"
echo "run reports: target/demo/swerve-mini-tiny.demo.json (the trained model), gold.demo.json, swerve-mini-mixed.demo.json"
echo "logs: target/demo/logs/run_evaluation/demo/; rewards: target/demo/rewards.jsonl"
