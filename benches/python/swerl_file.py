"""Scores a JSONL file with the CPython SWE-RL reward, as one process: what `harness reward
--plugin swe-rl --jobs 1` does, for a whole-process comparison.

Usage: python3 benches/python/swerl_file.py INPUT.jsonl OUTPUT.jsonl

Input lines are `harness reward` samples (`output` or `completion`, `code_context`,
`oracle_new_content`); each output line is `{"line": n, "id": ..., "reward": r}` with `r`
written as Python's shortest round-trip repr, so the bits can be compared with swerve's output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import swerl_reward  # noqa: E402


def main() -> int:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
        for n, line in enumerate(lines, start=1):
            sample = json.loads(line)
            completion = sample.get("completion", sample.get("output", ""))
            result = swerl_reward.search_replace_reward(
                sample.get("code_context", {}), sample.get("oracle_new_content", {}), completion
            )
            out.write(json.dumps({"line": n, "id": sample.get("id", ""), "reward": result["reward"]}))
            out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
