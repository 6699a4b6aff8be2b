"""Checks swerl_reward.py against the development vectors, then times it per call.

Usage: python3 benches/python/bench_swerl.py [--vectors PATH] [--min-time SECONDS]

The vectors default to the repository's copy,
guest-plugins/swe-rl/tests/data/swerl-dev-vectors.jsonl. Each vector is run repeatedly until at
least --min-time seconds (and at least 3 calls) have passed; the per-call time of a vector is
the best of 3 such rounds divided by the calls. The summary gives the median, mean, p90 and max
over vectors of the microseconds per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import swerl_reward  # noqa: E402


def default_vectors() -> Path:
    repo = Path(__file__).resolve().parents[2]
    return repo / "guest-plugins" / "swe-rl" / "tests" / "data" / "swerl-dev-vectors.jsonl"


def bits(value: float) -> str:
    return struct.pack(">d", value).hex()


def mismatches(vector: dict) -> list[str]:
    """What differs between swerl_reward.py's result and the vector's expected values."""
    expected = vector["expected"]
    result = swerl_reward.search_replace_reward(
        vector["code_context"], vector["oracle_new_content"], vector["output"]
    )
    allowed = {expected["reward_bits"]}
    if expected.get("order_sensitive"):
        allowed.update(expected.get("reward_all_orders_bits", []))
        allowed.add(expected.get("reward_fsum_mean_bits"))
    problems = []
    if bits(result["reward"]) not in allowed:
        problems.append(f"reward {result['reward']!r} not in {sorted(allowed)}")
    if expected["format_error"]:
        if result.get("error") != expected["error"]:
            problems.append(f"error {result.get('error')!r} != {expected['error']!r}")
        return problems
    debug = vector["debug"]
    if [list(t) for t in result["findall"]] != debug["findall"]:
        problems.append("findall differs")
    if result["pred_new_content"] != debug["pred_new_content"]:
        problems.append("pred_new_content differs")
    got = [
        {**s, "similarity_bits": bits(s["similarity"])} for s in result["similarities"]
    ]
    want = [{k: s[k] for k in got[0]} for s in expected["similarities"]] if got else []
    if got != want or len(expected["similarities"]) != len(got):
        problems.append("similarities differ")
    reward, _ = swerl_reward.content_reward(
        vector["code_context"], vector["oracle_new_content"], debug["pred_new_content"]
    )
    if bits(reward) not in allowed:
        problems.append("content_reward differs")
    return problems


def time_per_call(vector: dict, min_time: float) -> float:
    """Best-of-3 seconds per call of search_replace_reward on this vector."""
    args = (vector["code_context"], vector["oracle_new_content"], vector["output"])
    best = float("inf")
    for _ in range(3):
        calls, start = 0, time.perf_counter()
        while True:
            swerl_reward.search_replace_reward(*args)
            calls += 1
            elapsed = time.perf_counter() - start
            if calls >= 3 and elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=Path, default=default_vectors())
    parser.add_argument("--min-time", type=float, default=0.02)
    args = parser.parse_args()

    vectors = [json.loads(line) for line in args.vectors.read_text().splitlines() if line.strip()]
    failed = 0
    for vector in vectors:
        problems = mismatches(vector)
        if problems:
            failed += 1
            print(f"{vector['id']}: {'; '.join(problems)}", file=sys.stderr)
    print(f"{len(vectors) - failed}/{len(vectors)} vectors reproduced (CPython {sys.version.split()[0]})")

    micros = sorted(time_per_call(v, args.min_time) * 1e6 for v in vectors)
    p90 = micros[int(0.9 * (len(micros) - 1))]
    print(
        f"CPython swerl_reward: median {statistics.median(micros):.1f} us/call, "
        f"mean {statistics.fmean(micros):.1f} us/call, p90 {p90:.1f} us, max {micros[-1]:.1f} us "
        f"over {len(micros)} vectors"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
