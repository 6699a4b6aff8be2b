#!/usr/bin/env python3
"""Prints benches/curate/run.sh's table from its results file (`KEY value...` lines).

Throughput ratios are curate / baseline (above 1: curate is faster); memory ratios are
curate / baseline (below 1: curate uses less).
"""

import sys
from collections import defaultdict


def main():
    path, jobs = sys.argv[1], sys.argv[2]
    runs = defaultdict(list)
    single = {}
    for line in open(path):
        key, *values = line.split()
        single[key] = values
        base = key.rsplit("-", 1)
        if len(values) == 2 and base[1].isdigit():
            runs[base[0]].append((float(values[0]), int(values[1])))

    def best(prefix, metric):
        return min(float(v[0]) for k, v in single.items() if k.startswith(prefix + "-") and k.endswith(metric))

    def rss(prefix):
        return max(r for _, r in runs[prefix]) / 1024

    rows = []
    for size in ("half", "all"):
        mb = int(single[f"bytes-{size}"][0]) / 1e6
        events_s = best(f"curate-{size}", "-events_ms") / 1000
        wall_s = min(w for w, _ in runs[f"curate-{size}"])
        duck_s = min(
            float(open(path.rsplit("/", 1)[0] + f"/duckdb-{size}-{i}.out").read().split()[0])
            for i in range(1, len(runs[f"duckdb-{size}"]) + 1)
        )
        duck_wall = min(w for w, _ in runs[f"duckdb-{size}"])
        prs = single[f"curate-{size}-1-prs"][0]
        duck_prs = open(path.rsplit("/", 1)[0] + f"/duckdb-{size}-1.out").read().split()[1]
        label = f"events {mb:.0f} MB ({prs} PRs; DuckDB {duck_prs})"
        rows.append((f"{label}: MB/s, stage", mb / events_s, mb / duck_s, (mb / events_s) / (mb / duck_s)))
        rows.append((f"{label}: MB/s, process", mb / wall_s, mb / duck_wall, duck_wall / wall_s))
        rows.append((f"{label}: peak RSS MB", rss(f"curate-{size}"), rss(f"duckdb-{size}"),
                     rss(f"curate-{size}") / rss(f"duckdb-{size}")))
    tasks = int(single["patch-tasks"][0])
    diff_s = min(w for w, _ in runs["patch-gitdiff"])
    tree_s = min(w for w, _ in runs["patch-difftree"])
    for relevant in ("0", "3"):
        clones_s = best(f"patch-curate-r{relevant}", "-clones_ms") / 1000
        rate = tasks / clones_s
        rows.append((f"patch {tasks} PRs, --relevant {relevant}: PRs/s vs git diff (-P {jobs})",
                     rate, tasks / diff_s, rate / (tasks / diff_s)))
        rows.append((f"patch {tasks} PRs, --relevant {relevant}: PRs/s vs git diff-tree --stdin",
                     rate, tasks / tree_s, rate / (tasks / tree_s)))

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'curate':>9}  {'baseline':>9}  {'ratio':>6}")
    for name, ours, theirs, ratio in rows:
        print(f"{name:<{width}}  {ours:>9.1f}  {theirs:>9.1f}  {ratio:>6.2f}")
    print(f"(baseline: DuckDB for events, git for patches; {jobs} threads each; "
          "ratio: curate / baseline, for RSS lower is better)")


if __name__ == "__main__":
    main()
