"""Reads the TensorBoard event files of training runs with the `tensorboard` package (PyPI) and
checks them against each run's metrics.jsonl: every metric is a scalar tag `train/<metric>`
holding every step of the file with its value (float32; `null` is NaN), and nothing else.

Usage: python3 check_events.py RUN_DIR...   (exit status 1 and a message on the first mismatch)
"""

import json
import math
import struct
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def f32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def check(run_dir: Path) -> int:
    expected = {}
    with open(run_dir / "metrics.jsonl", encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            row = json.loads(line)
            step = row.pop("step")
            for name, value in row.items():
                value = math.nan if value is None else f32(float(value))
                expected.setdefault("train/" + name, []).append((step, value))
    if not expected:
        sys.exit(f"{run_dir}/metrics.jsonl holds no metrics")
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    if tags != sorted(expected):
        sys.exit(f"{run_dir}: tags {tags} != metrics.jsonl keys {sorted(expected)}")
    for tag, want in expected.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if [s for s, _ in got] != [s for s, _ in want]:
            sys.exit(f"{run_dir}: {tag} steps {[s for s, _ in got]} != {[s for s, _ in want]}")
        for (step, value), (_, w) in zip(got, want):
            same = (math.isnan(value) and math.isnan(w)) or value == w
            if not same:
                sys.exit(f"{run_dir}: {tag} at step {step} is {value}, metrics.jsonl has {w}")
    return sum(len(v) for v in expected.values())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        n = check(Path(arg))
        print(f"{arg}: {n} scalars match metrics.jsonl")
