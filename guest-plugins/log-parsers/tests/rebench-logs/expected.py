#!/usr/bin/env python3
"""Recomputes the expected outputs of the SWE-rebench V2 parser cases.

Usage: expected.py CHECKOUT [PART ...]

CHECKOUT is a checkout of SWE-rebench V2 (its `lib/agent/log_parsers.py` is imported from
there; nothing of it is copied here). For each PART folder beside this script (default: every
folder), each line of `cases.jsonl` names a parser and a log, either a file of the folder
(`"log": "pytest.log"`) or inline text (`"text": "..."`). `expected.jsonl` gets one line per
case, in the same order: the parser's raw status map as `[name, status]` pairs in dict order,
or the class of the exception it raised.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(sys.argv[1]).resolve()))
    from lib.agent import log_parsers  # noqa: PLC0415

    parts = sys.argv[2:] or sorted(p.name for p in HERE.iterdir() if p.is_dir())
    for part in parts:
        folder = HERE / part
        lines = []
        for number, line in enumerate((folder / "cases.jsonl").read_text().splitlines(), 1):
            if not line.strip():
                continue
            case = json.loads(line)
            if "log" in case:
                with open(folder / case["log"], encoding="utf-8", newline="") as file:
                    log = file.read()
            else:
                log = case["text"]
            name = case["parser"]
            parser = log_parsers.NAME_TO_PARSER.get(name) or getattr(log_parsers, name)
            try:
                answer = {"map": [[k, getattr(v, "value", v)] for k, v in parser(log).items()]}
            except Exception as exc:  # noqa: BLE001 - the class is the expected output
                answer = {"error": type(exc).__name__}
            lines.append(json.dumps({"case": number, "parser": name, **answer}, ensure_ascii=False))
        (folder / "expected.jsonl").write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
