#!/usr/bin/env bash
# The agent clients swerve is tested against, from PyPI in a virtual environment of its own, made
# when missing: mini-swe-agent 2.4.6 (its litellm model classes and Docker environment drive
# `trainer serve`, and its Docker environment is the overhead baseline of `harness agent`) and
# the official `openai` client 3.63.0:
#
#   scripts/agent-venv.sh [VENV]      (default: target/agent-venv; prints its path)
#
# Callers at the same time wait for one another (flock on VENV.lock), so one makes it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/target/agent-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m
assert m.version("mini-swe-agent") == "2.4.6"
assert m.version("openai") == "3.63.0"' >/dev/null 2>&1
}
if ! installed; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        mini-swe-agent==2.4.6 openai==3.63.0 >&2
    installed
fi
echo "$venv"
