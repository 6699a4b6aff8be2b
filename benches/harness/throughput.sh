#!/usr/bin/env bash
# `harness run` throughput and per-instance overhead on swerve-mini gold, 1 worker then 2.
#
#   benches/harness/throughput.sh [HARNESS_BINARY]     (default: target/release/harness)
#
# Each pass uses a fresh run id (nothing is reused from the resume cache) in a scratch folder,
# after an untimed warm-up run that builds whatever images are missing.
# Prints, per worker count: wall time, instances per minute, and the median / max of each
# instance's overhead (container create → report written, test step excluded) and test time,
# read from the `swerve.json` harness writes beside every report.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
harness="${1:-$root/target/release/harness}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$harness" run -d swerve-mini -p gold --run-id warm-up --max-workers 2 >/dev/null
declare -A wall
for workers in 1 2; do
    run_id="bench-j$workers-$(date +%s)"
    start=$(date +%s.%N)
    "$harness" run -d swerve-mini -p gold --run-id "$run_id" --max-workers "$workers" >/dev/null
    end=$(date +%s.%N)
    wall[$workers]=$(python3 -c "print(f'{$end - $start:.1f}')")
    python3 - "$run_id" "$workers" "${wall[$workers]}" <<'PY'
import json, pathlib, statistics, sys
run_id, workers, wall = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
records = [json.loads(p.read_text()) for p in pathlib.Path("logs/run_evaluation", run_id).glob("*/*/swerve.json")]
over = sorted(r["overhead_ms"] / 1000 for r in records)
tests = sorted(r["tests_ms"] / 1000 for r in records)
resolved = sum(1 for r in records if r.get("outcome") == "resolved")
print(f"workers {workers}: {len(records)} instances ({resolved} resolved) in {wall:.1f} s = {60 * len(records) / wall:.1f}/min; "
      f"overhead median {statistics.median(over):.2f} s, max {over[-1]:.2f} s; "
      f"tests median {statistics.median(tests):.2f} s, max {tests[-1]:.2f} s")
PY
done
python3 -c "print(f'speed-up with 2 workers: {${wall[1]} / ${wall[2]}:.2f}x')"
