#!/usr/bin/env bash
# The HTML page of a run in a real browser: evaluates the bundled swerve-mini mixed predictions
# (right, wrong, partial, unappliable, malformed, empty and forging patches) with `harness run`,
# which writes the page beside the run report; then headless Chromium (Debian's `chromium`,
# installed when missing) renders it to a screenshot and dumps its DOM, and the DOM is checked
# against the run report: every summary count, one row per instance with its status, and one
# unresolved instance's section with its failing tests. Needs a running Docker engine.
#
# Usage: [SWERVE_HARNESS=BIN] scripts/check-html-report.sh [OUT_DIR]   (default
# target/html-check; the screenshot is OUT_DIR/report.png)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(realpath -m "${1:-target/html-check}")

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi

# SWERVE_HARNESS: a `harness` binary already built (CI passes the test build's).
if [ -n "${SWERVE_HARNESS:-}" ]; then
    harness=$SWERVE_HARNESS
else
    cargo build --locked -q -p swerve-harness --bin harness
    harness=$(realpath -m "${CARGO_TARGET_DIR:-target}")/debug/harness
fi

mkdir -p "$out"
cd "$out"
"$harness" -q run --dataset swerve-mini \
    --predictions "$root/harness/datasets/swerve-mini/predictions-mixed.jsonl" \
    --run-id html-check --max-workers 2 >summary.txt
report=swerve-mini-mixed.html-check.json
page=swerve-mini-mixed.html-check.html
test -s "$page" || { echo "no $page written" >&2; exit 1; }

browser=(chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage
    --disable-background-networking --no-first-run --hide-scrollbars)
# Chromium's own stderr (D-Bus, GPU notices) is noise here; its exit status is checked.
"${browser[@]}" --window-size=1280,1400 --screenshot="$out/report.png" "file://$out/$page" \
    2>chromium.log
"${browser[@]}" --dump-dom "file://$out/$page" >dom.html 2>>chromium.log
test -s report.png || { echo "no screenshot" >&2; exit 1; }

python3 - "$report" dom.html logs/run_evaluation/html-check/swerve-mini-mixed <<'EOF'
import html, json, re, sys
from pathlib import Path

report = json.load(open(sys.argv[1]))
dom = open(sys.argv[2], encoding="utf-8").read()
logs = Path(sys.argv[3])

def count(key):
    m = re.search(r'<tr data-key="%s"><th>[^<]*</th><td class="count">(\d+)</td>' % key, dom)
    assert m, f"no summary row {key}"
    return int(m.group(1))

checks = {
    "total-instances": report["total_instances"],
    "instances-completed": report["completed_instances"],
    "instances-incomplete": len(report["incomplete_ids"]),
    "instances-resolved": report["resolved_instances"],
    "instances-unresolved": report["unresolved_instances"],
    "instances-with-empty-patches": report["empty_patch_instances"],
    "instances-with-errors": report["error_instances"],
}
for key, want in checks.items():
    assert count(key) == want, f"{key}: page {count(key)}, run report {want}"

rows = dict(re.findall(r'<tr data-instance="([^"]+)" data-status="([a-z_]+)">', dom))
assert len(rows) == report["total_instances"], f"{len(rows)} rows"
for key, status in [("resolved_ids", "resolved"), ("unresolved_ids", "unresolved"),
                    ("error_ids", "error"), ("empty_patch_ids", "empty_patch")]:
    for i in report[key]:
        assert rows.get(i) == status, f"{i}: page says {rows.get(i)}, run report {key}"

# One unresolved instance in detail: its section, patch and every failing test of report.json.
iid = report["unresolved_ids"][0]
m = re.search(r'<section class="instance" id="%s" data-status="unresolved">(.*?)</section>'
              % re.escape(iid), dom, re.S)
assert m, f"no section for {iid}"
section = m.group(1)
status = json.load(open(logs / iid / "report.json"))[iid]["tests_status"]
failing = status["FAIL_TO_PASS"]["failure"] + status["PASS_TO_PASS"]["failure"]
assert failing, f"{iid} has no failing test"
for test in failing:
    assert "<code>%s</code>" % html.escape(test, quote=False) in section, f"{test} not shown"
assert '<pre class="patch">' in section and '<pre class="test-log">' in section
# The browser fetched nothing: no element refers to anything outside the file.
assert not re.search(r'\b(src|href)="(?!#)', dom), "an external reference"
print(f"page checked: {len(rows)} instances, {report['resolved_instances']} resolved, "
      f"{iid}: {len(failing)} failing tests shown")
EOF
echo "screenshot: $out/report.png ($(stat -c %s "$out/report.png") bytes), page: $out/$page ($(stat -c %s "$page") bytes)"
