#!/usr/bin/env bash
# SWE-bench 5.0.2 from PyPI in a virtual environment of its own, made when missing, for the tests
# and scripts that run SWE-bench's own harness beside swerve's (the interop tests,
# harness/datasets/swerve-mini/compare_swebench.sh):
#
#   scripts/swebench-venv.sh [VENV]      (default: target/swebench-venv; prints its path)
#
# Callers at the same time wait for one another (flock on VENV.lock), so one makes it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/target/swebench-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("swebench") == "5.0.2"' \
        >/dev/null 2>&1
}
if ! installed; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check swebench==5.0.2 >&2
    installed
fi
echo "$venv"
