#!/usr/bin/env bash
# `curate validate` figures (docs/benchmarks.md, "Executable tasks"): on the project's fixture
# (`cargo run -p swerve-tests --example validate-fixture`), and on real tasks when given.
#
#   benches/curate/validate.sh [TASKS.jsonl REPOS_DIR]
#
# Environment: CURATE (default target/release/curate), CHANGES (default
# target/release/examples/changes_latency). Each set is validated twice into fresh output
# folders: the first pass makes whatever images are missing, the second finds every image made,
# so its wall time per task is the time once a task's environment exists. From funnel.json and
# every swerve.json: the validated share, seconds per stage, test runs, each run's time outside
# the tests (container create and removal, copies, hardening's checks) beside the tests' own,
# images built and reused and their disk. Then, side by side on one validated instance image,
# listing a container's file-system changes from its upper layer (what hardened runs do where
# the engine is local) and with the engine's diff (`docker diff`).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
curate="${CURATE:-$root/target/release/curate}"
changes="${CHANGES:-$root/target/release/examples/changes_latency}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo run -q --manifest-path "$root/Cargo.toml" -p swerve-tests --example validate-fixture -- "$work/fixture" >/dev/null

summary() {
    python3 - "$1" "$2" <<'PY'
import json, pathlib, statistics, sys
out, wall = pathlib.Path(sys.argv[1]), float(sys.argv[2])
f = json.loads((out / "funnel.json").read_text())
runs = [json.loads(p.read_text()) for p in out.glob("logs/**/swerve.json")]
over = sorted(r["overhead_ms"] / 1000 for r in runs)
tests = sorted(r["tests_ms"] / 1000 for r in runs)
stages = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(f["stage_seconds"].items()))
print(f"  {f['validated']}/{f['tasks_in']} validated ({100 * f['validated'] / f['tasks_in']:.0f} %), "
      f"rejected {f['rejected']}; {wall:.1f} s wall, {wall / f['tasks_in']:.1f} s per task; {stages}")
print(f"  {len(runs)} test runs: outside the tests median {statistics.median(over):.2f} s, "
      f"max {over[-1]:.2f} s; the tests median {statistics.median(tests):.2f} s, max {tests[-1]:.2f} s")
print(f"  images: {f['images']['built']} built, {f['images']['reused']} reused, "
      f"{f['images']['disk_bytes'] / 1e6:.0f} MB; environments {f['environments']}")
PY
}

validate() { # name tasks repos
    for pass in 1 2; do
        out="$work/$1-$pass"
        start=$(date +%s.%N)
        "$curate" -q validate --tasks "$2" --repos "$3" --output "$out" --max-workers 2 --runs 2 --timeout 900 || true
        end=$(date +%s.%N)
        echo "$1, pass $pass ($([ "$pass" = 1 ] && echo 'images made as needed' || echo 'every image made')):"
        summary "$out" "$(python3 -c "print($end - $start)")"
    done
}

validate fixture "$work/fixture/tasks.jsonl" "$work/fixture/repos"
if [ $# -ge 2 ]; then
    validate real "$1" "$2"
fi
image=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['image'])" "$work/fixture-2/instances.jsonl")
"$changes" "$image" 5
