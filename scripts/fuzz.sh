#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz, libFuzzer with AddressSanitizer), each for a given
# time, and prints a line per target: its time, executions and findings. Not part of CI.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default 60 s each, every target)
#
# Installs what it needs: the nightly toolchain (minimal profile) and cargo-fuzz. Each target
# starts from its committed seeds (fuzz/seeds/<target>/) and grows a local corpus
# (fuzz/corpus/<target>/, not committed); a crash is written to fuzz/artifacts/<target>/ and makes
# the script exit 1 after the other targets ran. JOBS (default 1) runs targets side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O
mkdir -p target/fuzz-logs
run_one() {
    local t="$1" log="target/fuzz-logs/$1.log"
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    local status=ok
    cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1 || status=FOUND
    local runs
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' || echo "?")
    printf '%-18s %6ss %12s execs  %s\n' "$t" "$seconds" "$runs" "$status"
    [[ $status == ok ]]
}
export -f run_one
export seconds
failed=0
printf '%s\n' "${targets[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'run_one {}' || failed=1
exit "$failed"
