#!/usr/bin/env bash
# `harness run --executor slurm` against a local run on swerve-mini gold, side by side: the same
# 13 instances on the same Docker engine, Slurm with 2 array tasks of 1 worker each, local with
# 2 workers.
#
#   benches/harness/slurm.sh [REPEAT] [HARNESS_BINARY]   (default 3, target/release/harness)
#
# Needs a Slurm controller (scripts/slurm-local.sh up starts a one-node cluster). Each pass uses
# a fresh run id in a scratch folder (nothing is reused), after an untimed warm-up run that
# builds whatever images are missing. Prints per pass: wall time, median instance overhead
# (from swerve.json), time from the start of the command to the first report.json written, and
# whether the run reports are byte-identical; then the extra cost of Slurm per array task
# (difference of the median wall times over the number of tasks).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
repeat="${1:-3}"
harness="${2:-$root/target/release/harness}"
tasks=2
"$root/scripts/slurm-local.sh" up >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$harness" run -d swerve-mini -p gold --run-id warm-up --max-workers 2 -q --no-html >/dev/null

measure() { # name run_id start end
    python3 - "$@" <<'PY'
import json, pathlib, statistics, sys
name, run_id, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
base = pathlib.Path(name, "logs/run_evaluation", run_id)
records = [json.loads(p.read_text()) for p in base.glob("*/*/swerve.json")]
first = min(p.stat().st_mtime for p in base.glob("*/*/report.json"))
over = statistics.median(r["overhead_ms"] / 1000 for r in records)
resolved = sum(1 for r in records if r.get("outcome") == "resolved")
print(f"{name:6} {len(records)} instances ({resolved} resolved): wall {end - start:5.1f} s, "
      f"overhead median {over:4.2f} s, first result after {first - start:4.1f} s")
with open("walls.txt", "a") as f:
    f.write(f"{name} {end - start}\n")
PY
}

for pass in $(seq "$repeat"); do
    run_id="bench-$pass-$(date +%s)"
    for name in local slurm; do
        mkdir -p "$name"
        args=(run -d swerve-mini -p gold --run-id "$run_id" -q --no-html)
        if [[ $name == slurm ]]; then
            args+=(--executor slurm --slurm-tasks "$tasks" --max-workers 1)
        else
            args+=(--max-workers 2)
        fi
        start=$(date +%s.%N)
        (cd "$name" && "$harness" "${args[@]}" >/dev/null 2>&1)
        end=$(date +%s.%N)
        measure "$name" "$run_id" "$start" "$end"
    done
    if cmp -s "local/gold.$run_id.json" "slurm/gold.$run_id.json"; then
        echo "pass $pass: run reports byte-identical"
    else
        echo "pass $pass: run reports DIFFER" && exit 1
    fi
done
python3 - "$tasks" <<'PY'
import statistics, sys
tasks = int(sys.argv[1])
walls = {}
for line in open("walls.txt"):
    name, wall = line.split()
    walls.setdefault(name, []).append(float(wall))
local, slurm = statistics.median(walls["local"]), statistics.median(walls["slurm"])
print(f"median wall: local {local:.1f} s, slurm {slurm:.1f} s; "
      f"Slurm's extra cost {(slurm - local) / tasks:.2f} s per array task ({tasks} tasks)")
PY
