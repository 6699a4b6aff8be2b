#!/usr/bin/env bash
# Runs SWE-bench 5.0.2's own harness and `harness run` on the same rows (swerve-mini exported
# as SWE-bench 5 rows), the same images and the same worker count, for gold and for the
# bundled mixed predictions; compares every per-instance report.json byte for byte, the
# resolved sets and the run reports, and prints both wall times. See docs/swebench-compat.md.
#
# Usage: compare_swebench.sh            (from anywhere; needs Docker, python3 and a built harness)
# Environment: HARNESS (default target/debug/harness), SWEBENCH_VENV (default
# target/swebench-venv, created with `pip install swebench==5.0.2` when missing), WORK (default
# target/swebench-compare, emptied first), WORKERS (default 2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
harness=${HARNESS:-$root/target/debug/harness}
venv=${SWEBENCH_VENV:-$root/target/swebench-venv}
work=${WORK:-$root/target/swebench-compare}
workers=${WORKERS:-2}

[ -x "$harness" ] || { echo "no harness binary at $harness (cargo build -p swerve-harness)" >&2; exit 2; }
"$root/scripts/swebench-venv.sh" "$venv" >/dev/null

rm -rf "$work"
mkdir -p "$work/swebench" "$work/harness" "$work/hardened"
rows="$work/swerve-mini.v5.jsonl"
mixed="$here/predictions-mixed.jsonl"

"$harness" dataset export swerve-mini --output "$rows" >/dev/null
# Both harnesses run in the images harness builds, found by the rows' `image` names.
"$harness" -q images build --dataset swerve-mini >"$work/images.tsv"

now() { date +%s.%N; }
declare -A wall

# name preds run-id
run_swebench() {
    local start end
    start=$(now)
    (cd "$work/swebench" && "$venv/bin/python" -m swebench.harness.run_evaluation \
        --dataset_name "$rows" --predictions_path "$2" --max_workers "$workers" --run_id "$3" \
        >"$3.stdout" 2>"$3.stderr")
    end=$(now)
    wall[swebench-$1]=$(awk "BEGIN { print $end - $start }")
}

# dir name preds run-id mode
run_harness() {
    local start end
    start=$(now)
    (cd "$work/$1" && "$harness" -q run --dataset "$rows" --predictions "$3" \
        --max-workers "$workers" --run-id "$4" --mode "$5" >"$4.stdout" 2>"$4.stderr")
    end=$(now)
    wall[$1-$2]=$(awk "BEGIN { print $end - $start }")
}

run_swebench gold gold cmp-gold
run_harness harness gold gold cmp-gold compat
run_swebench mixed "$mixed" cmp-mixed
run_harness harness mixed "$mixed" cmp-mixed compat
# swerve's default (hardened) run, for the record: it differs on purpose (the forge).
run_harness hardened mixed "$mixed" cmp-mixed hardened

"$venv/bin/python" - "$work" "$workers" \
    "${wall[swebench-gold]}" "${wall[harness-gold]}" \
    "${wall[swebench-mixed]}" "${wall[harness-mixed]}" "${wall[hardened-mixed]}" <<'EOF'
import json, sys
from pathlib import Path

work = Path(sys.argv[1])
workers = sys.argv[2]
walls = dict(zip(["swebench-gold", "harness-gold", "swebench-mixed", "harness-mixed", "hardened-mixed"],
                 map(float, sys.argv[3:])))
failed = False
notes = []

def instances(side, run_id, model):
    folder = work / side / "logs/run_evaluation" / run_id / model
    return {p.name: p for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else {}

def run_report(side, model, run_id):
    return json.loads((work / side / f"{model}.{run_id}.json").read_text())

print(f"| predictions | instances | reports compared | identical | resolved (SWE-bench) | resolved (harness) | same resolved set | SWE-bench wall | harness wall | ratio |")
print(f"|---|---|---|---|---|---|---|---|---|---|")
for name, model in (("gold", "gold"), ("mixed", "swerve-mini-mixed")):
    run_id = f"cmp-{name}"
    sb, hr = instances("swebench", run_id, model), instances("harness", run_id, model)
    differ = []
    compared = 0
    for iid in sorted(set(sb) | set(hr)):
        a = sb.get(iid, Path("/nonexistent")) / "report.json"
        b = hr.get(iid, Path("/nonexistent")) / "report.json"
        if a.exists() != b.exists():
            differ.append(f"{iid}: report.json only in {'SWE-bench' if a.exists() else 'harness'}")
        elif a.exists():
            compared += 1
            if a.read_bytes() != b.read_bytes():
                differ.append(f"{iid}: report.json differs")
    rs, rh = run_report("swebench", model, run_id), run_report("harness", model, run_id)
    same = rs["resolved_ids"] == rh["resolved_ids"]
    keys = [k for k in rs if rs[k] != rh.get(k)]
    s, h = walls[f"swebench-{name}"], walls[f"harness-{name}"]
    print(f"| {name} | {rs['total_instances']} | {compared} | {'yes' if not differ else 'NO'} | "
          f"{rs['resolved_instances']} | {rh['resolved_instances']} | {'yes' if same else 'NO'} | "
          f"{s:.1f} s | {h:.1f} s | {h / s:.2f} |")
    for line in differ:
        print(f"  {name}: {line}", file=sys.stderr)
    if keys:
        print(f"  {name}: run report keys that differ: {', '.join(keys)}", file=sys.stderr)
    same_file = (work / "swebench" / f"{model}.{run_id}.json").read_bytes() == \
        (work / "harness" / f"{model}.{run_id}.json").read_bytes()
    summary = lambda side: [l for l in (work / side / f"{run_id}.stdout").read_text().splitlines()
                            if l.startswith(("Total instances", "Instances ", "Unstopped", "Unremoved", "Report written"))]
    notes.append(f"{name}: run report files {'identical' if same_file else 'DIFFER'}, "
                 f"printed summaries {'identical' if summary('swebench') == summary('harness') else 'DIFFER'}")
    failed |= bool(differ) or not same or h > s / 2

print()
for note in notes:
    print(note)
hardened = run_report("hardened", "swerve-mini-mixed", "cmp-mixed")
compat = run_report("harness", "swerve-mini-mixed", "cmp-mixed")
print(f"workers: {workers}; hardened mixed run: {walls['hardened-mixed']:.1f} s, resolved "
      f"{hardened['resolved_ids']}; not resolved there but resolved by SWE-bench: "
      f"{sorted(set(compat['resolved_ids']) - set(hardened['resolved_ids']))}")
sys.exit(1 if failed else 0)
EOF
