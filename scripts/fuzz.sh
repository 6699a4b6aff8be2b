#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz, libFuzzer with AddressSanitizer), each for a given
# CPU time, and prints a line per target: its CPU time, executions and findings. Not part of CI.
#
#   scripts/fuzz.sh [CPU_SECONDS] [TARGET...]      (default 60 s each, every target)
#
# Installs what it needs: the nightly toolchain (minimal profile, with the wasm32-wasip2 target
# for the plugins that plugin_results loads) and cargo-fuzz. Each target starts from its committed
# seeds (fuzz/seeds/<target>/) and grows a local corpus (fuzz/corpus/<target>/, not committed). A
# target runs in chunks of at most 10 minutes of wall time on the same corpus until the fuzzer has
# used CPU_SECONDS of CPU (user + system, as the shell's `time` measures it), so a run that shares
# the machine (JOBS, `nice`) still gets the CPU time asked for. A crash is written to
# fuzz/artifacts/<target>/ and makes the script exit 1 after the other targets ran. JOBS
# (default 1) runs targets side by side. FUZZ_TIMEOUT (default 10) is libFuzzer's per-input
# timeout in seconds of *wall* time: raise it when the fuzzers share a loaded machine, or slow
# inputs are reported as timeouts. Every chunk appends `CPU_SECONDS RUNS EXIT` to
# target/fuzz-logs/<target>.chunks, so the CPU time of interrupted or repeated runs adds up.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
rustup +nightly target list --installed | grep -q wasm32-wasip2 || rustup +nightly target add wasm32-wasip2
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O
mkdir -p target/fuzz-logs
run_one() {
    local t="$1" log="target/fuzz-logs/$1.log" chunk_log="target/fuzz-logs/$1.chunk"
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    : >"$log"
    local status=ok cpu=0 runs=0 rc user sys chunk_runs
    while ((cpu < seconds)) && [[ $status == ok ]]; do
        local wall=$((seconds - cpu))
        ((wall > 600)) && wall=600
        rc=0
        TIMEFORMAT='%U %S'
        { time cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
            -max_total_time="$wall" -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-10}" >"$chunk_log" 2>&1; } \
            2>"$chunk_log.time" || rc=$?
        cat "$chunk_log" >>"$log"
        ((rc == 0)) || status=FOUND
        read -r user sys <"$chunk_log.time"
        cpu=$((cpu + ${user%.*} + ${sys%.*}))
        chunk_runs=$(grep -oE 'Done [0-9]+ runs' "$chunk_log" | grep -oE '[0-9]+' || echo 0)
        runs=$((runs + chunk_runs))
        echo "$((${user%.*} + ${sys%.*})) $chunk_runs $rc" >>"target/fuzz-logs/$t.chunks"
    done
    printf '%-18s %6s CPU-s %12s execs  %s\n' "$t" "$cpu" "$runs" "$status"
    [[ $status == ok ]]
}
export -f run_one
export seconds
failed=0
printf '%s\n' "${targets[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'run_one {}' || failed=1
exit "$failed"
