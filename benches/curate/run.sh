#!/usr/bin/env bash
# Curation throughput, in one run: curate's event stage against DuckDB on the same GH
# Archive-shaped hours (two corpus sizes, peak memory of each), and its patch stage (the clone
# stage: merge base, files at base and head, diffs) against `git diff` on the same PRs.
#
#   benches/curate/run.sh            (env: MB=1100 PRS=300 JOBS=$(nproc) REPEAT=2
#                                          CURATE=target/release/curate)
#
# Inputs are generated once under target/bench-curate/ by corpus.py (MB of events in 48 hour
# files, the small corpus is the first 24 of them; a bare mirror with PRS merged PRs) and reused.
# Needs python3 with duckdb (`python3 -m pip install duckdb`), git and GNU time.
# Each timing is the best of REPEAT runs with the files in the page cache; memory is the largest
# peak RSS. curate's figures are its funnel.json timings (`events` + `aggregate`, `clones`); DuckDB's is the
# query (read_json over the same .json.gz files, PullRequestEvents grouped by repo and number).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/benches/curate"
mb="${MB:-1100}"
prs="${PRS:-300}"
jobs="${JOBS:-$(nproc)}"
repeat="${REPEAT:-2}"
curate="${CURATE:-$root/target/release/curate}"
work="$root/target/bench-curate"
if [[ ! -x "$curate" ]]; then
    cargo build --release -p swerve-curate --manifest-path "$root/Cargo.toml"
fi
mkdir -p "$work"
all="$work/events-$mb"
if [[ ! -f "$all/sizes.tsv" ]]; then
    rm -rf "$all"
    python3 "$here/corpus.py" events "$all" --mb "$mb" --hours 48
fi
half="$work/events-$mb-half"
rm -rf "$half" && mkdir -p "$half"
head -n 24 "$all/sizes.tsv" >"$half/sizes.tsv"
cut -f1 "$half/sizes.tsv" | while read -r f; do ln -s "$all/$f" "$half/$f"; done
mirror="$work/mirror-$prs"
if [[ ! -f "$mirror/events/2024-02-01-0.json.gz" ]]; then
    rm -rf "$mirror"
    python3 "$here/corpus.py" mirror "$mirror" --prs "$prs"
fi
repo="$mirror/repos/benchorg/project.git"
mkdir -p "$work/no-repos"
cat "$all"/*.json.gz >/dev/null
results="$work/results.tsv"
: >"$results"

# `timed KEY CMD...`: appends `KEY wall_s rss_kb` to the results; the command's stdout goes to
# $work/KEY.out.
timed() {
    local key="$1"
    shift
    /usr/bin/time -f "%e %M" -o "$work/$key.time" "$@" >"$work/$key.out" 2>"$work/$key.err"
    echo "$key $(cat "$work/$key.time")" >>"$results"
}
funnel() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1/funnel.json"; }

for size in half all; do
    dir="$half"
    [[ $size == all ]] && dir="$all"
    for i in $(seq "$repeat"); do
        out="$work/out-events-$size"
        timed "curate-$size-$i" "$curate" run --events "$dir" --repos "$work/no-repos" \
            --output "$out" --jobs "$jobs" --relevant 0
        # The event stage as DuckDB's query does it: read, partition and fold per PR.
        echo "curate-$size-$i-events_ms $(funnel "$out" "['timings_ms']['events'] + json.load(open(sys.argv[1]))['timings_ms']['aggregate']")" >>"$results"
        echo "curate-$size-$i-prs $(funnel "$out" "['pull_requests']")" >>"$results"
        timed "duckdb-$size-$i" python3 "$here/duckdb_events.py" "$dir" "$jobs"
    done
    echo "bytes-$size $(awk '{s += $2} END {print s}' "$dir/sizes.tsv")" >>"$results"
done

# Patch stage: curate's clone stage on every PR of the mirror, without and with relevant files;
# then `git diff` on the same (merge base, head) pairs, JOBS at a time, and `git diff-tree
# --stdin` (one process for every pair).
for i in $(seq "$repeat"); do
    for relevant in 0 3; do
        out="$work/out-patch-$relevant"
        timed "patch-curate-r$relevant-$i" "$curate" run --events "$mirror/events" \
            --repos "$mirror/repos" --output "$out" --jobs "$jobs" --relevant "$relevant"
        echo "patch-curate-r$relevant-$i-clones_ms $(funnel "$out" "['timings_ms']['clones']")" >>"$results"
    done
done
echo "patch-tasks $(funnel "$work/out-patch-0" "['tasks']")" >>"$results"
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(t['base_commit'], t['head_commit'])
" "$work/out-patch-0/tasks.jsonl" >"$work/pairs.txt"
awk '{print $2, $1}' "$work/pairs.txt" >"$work/pairs-diff-tree.txt"
for i in $(seq "$repeat"); do
    timed "patch-gitdiff-$i" xargs -P "$jobs" -L 1 \
        sh -c 'git --git-dir "$0" diff "$1" "$2" >/dev/null' "$repo" <"$work/pairs.txt"
    timed "patch-difftree-$i" sh -c \
        "git --git-dir '$repo' diff-tree -p --stdin <'$work/pairs-diff-tree.txt' >/dev/null"
done

python3 "$here/table.py" "$results" "$jobs"
