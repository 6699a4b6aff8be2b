#!/usr/bin/env bash
# `trainer predict --retriever oracle|bm25|model` on rows without code_context: recall@1/@5 of
# each ranking against the gold patch's files, prompt tokens, rows that fell back to BM25, and
# prediction throughput (rows per minute, the whole command: reading the mirrors, ranking,
# localising, decoding).
#
#   benches/trainer/retrieval.sh     (env: TRAINER=target/release/trainer
#                                          CURATE=target/release/curate
#                                          MODEL=trainer/fixtures/tiny-qwen2
#                                          MAX_NEW_TOKENS=256 BUDGET=4096 FORMAT=bare
#                                          COPIES=4 ROUNDS=3)
#
# Two row sets, made under a scratch folder: swerve-mini's 13 rows (mirrors cloned from the
# dataset's bundles) and the tasks `curate run` makes from the curation corpus the project writes
# itself (`cargo run -p swerve-tests --example curation-corpus`: its bare mirrors and GH Archive
# hours), both with code_context removed. Needs git, jq and cargo.
# Each set is repeated COPIES times (instance ids suffixed `-copyK`), so that a run lasts long
# enough to time; recall and tokens are those of the distinct rows. Each command runs ROUNDS
# times; wall time is the median. Prints one Markdown row per set and retriever.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
trainer="${TRAINER:-$root/target/release/trainer}"
curate="${CURATE:-$root/target/release/curate}"
model="${MODEL:-$root/trainer/fixtures/tiny-qwen2}"
max_new="${MAX_NEW_TOKENS:-256}"
budget="${BUDGET:-4096}"
format="${FORMAT:-bare}"
copies="${COPIES:-4}"
rounds="${ROUNDS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sets=(mini curated)
mkdir -p "$work/mini/repos/swerve"
for name in inicfg spans textkit; do
    git -c init.defaultBranch=main clone -q --mirror "$root/harness/datasets/swerve-mini/repos/$name.bundle" \
        "$work/mini/repos/swerve/$name.git"
done
# Rows without code_context, COPIES times with distinct instance ids.
strip() {
    jq -c --argjson copies "$copies" \
        'del(.code_context) as $row | range($copies) as $k | $row | .instance_id += "-copy\($k)"' "$1"
}
strip "$root/harness/datasets/swerve-mini/swerve-mini.jsonl" >"$work/mini/rows.jsonl"

cargo run --quiet --manifest-path "$root/Cargo.toml" -p swerve-tests --example curation-corpus -- \
    "$work/gen" >/dev/null
"$curate" run --events "$work/gen/events" --repos "$work/gen/repos" \
    --output "$work/gen/out" >/dev/null 2>&1
mkdir -p "$work/curated"
ln -s "$work/gen/repos" "$work/curated/repos"
strip "$work/gen/out/tasks.jsonl" >"$work/curated/rows.jsonl"

echo "| rows | retriever | n | recall@1 | recall@5 | prompt tokens (mean) | localisation prompt tokens (mean) | fell back to BM25 | wall s | rows/min |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for set in "${sets[@]}"; do
    for retriever in oracle bm25 model; do
        out="$work/$set/$retriever.jsonl"
        walls=()
        for _ in $(seq "$rounds"); do
            start=$(date +%s.%N)
            "$trainer" predict --model "$model" --dataset "$work/$set/rows.jsonl" --output "$out" \
                --retriever "$retriever" --repos "$work/$set/repos" --prompt-format "$format" \
                --max-prompt-tokens "$budget" --max-new-tokens "$max_new" \
                2>"$work/$set/$retriever.log" >/dev/null
            end=$(date +%s.%N)
            walls+=("$(awk "BEGIN { print $end - $start }")")
        done
        wall=$(printf '%s\n' "${walls[@]}" | sort -g | sed -n "$(((rounds + 1) / 2))p")
        [[ $(wc -l <"$out") -eq $(wc -l <"$work/$set/rows.jsonl") ]] || {
            echo "$set/$retriever: not every row has a prediction" >&2
            exit 1
        }
        jq -rs --arg set "$set" --arg r "$retriever" --arg wall "$wall" '
            def mean(f): (map(f | select(. != null)) | if length == 0 then null else add / length end);
            def fmt: if . == null then "n/a" else (. * 1000 | round / 1000 | tostring) end;
            ($wall | tonumber) as $wall
            | length as $rows
            | map(select(.instance_id | endswith("-copy0")))
            | "| \($set) | \($r) | \(length) | \(mean(.recall_at_1) | fmt) | \(mean(.recall_at_5) | fmt) | "
              + "\(map(select(.error == null)) | mean(.prompt_tokens) | if . == null then "n/a" else round | tostring end) | "
              + "\(mean(.localization.prompt_tokens) | if . == null then "-" else round | tostring end) | "
              + "\(if $r == "model" then (map(select(.fallback != null)) | length | tostring) else "-" end) | "
              + "\($wall * 10 | round / 10) | \($rows / $wall * 60 | round) |"
        ' "${out%.jsonl}.retrieval.jsonl"
    done
done
