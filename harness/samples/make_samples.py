#!/usr/bin/env python3
"""Writes swerve-mini-completions.jsonl: sample completions for every swerve-mini instance, in
the SWE-RL output format, to score with `harness reward`.

Per instance: `gold` (SEARCH/REPLACE blocks that reproduce the gold patch), `partial` (its first
block only), `unrelated` (a valid edit elsewhere), `malformed` (no closing solution tag) and
`not-found` (a search that is not in the file). Deterministic: rerun it and the file is the same.
"""

import difflib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASET = HERE.parent / "datasets" / "swerve-mini" / "swerve-mini.jsonl"
OUT = HERE / "swerve-mini-completions.jsonl"


def blocks_for(path, old, new):
    """SEARCH/REPLACE blocks turning `old` into `new`, one per hunk with two context lines."""
    a, b = old.split("\n"), new.split("\n")
    if not old:
        return [(path, "", new)]
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(2):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        out.append((path, "\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
    return out


def render(thought, blocks, close=True):
    body = "\n\n".join(
        f"```python\n### {p}\n<<<<<<< SEARCH\n{s}\n=======\n{r}\n>>>>>>> REPLACE\n```" for p, s, r in blocks
    )
    return f"<think>\n{thought}\n</think>\n<solution>\n{body}\n" + ("</solution>" if close else "")


def main():
    lines = []
    for row in map(json.loads, DATASET.read_text().splitlines()):
        ctx, oracle = row["code_context"], row["oracle_new_content"]
        gold = [blk for p in sorted(oracle) for blk in blocks_for(p, ctx.get(p, ""), oracle[p])]
        first_path = sorted(ctx)[0]
        first_line = ctx[first_path].split("\n")[0]
        completions = {
            "gold": render("The gold fix.", gold),
            "partial": render("Only the first hunk of the fix.", gold[:1]),
            "unrelated": render(
                "An edit that does not fix the issue.",
                [(first_path, first_line, first_line + "  # reviewed")],
            ),
            "malformed": render("The fix, but the solution tag is never closed.", gold, close=False),
            "not-found": render(
                "A search that is not in the file.",
                [(first_path, "this line does not exist", "neither does this one")],
            ),
        }
        for kind, completion in completions.items():
            lines.append(
                json.dumps(
                    {
                        "id": f"{row['instance_id']}:{kind}",
                        "prompt": row["problem_statement"],
                        "completion": completion,
                        "code_context": ctx,
                        "oracle_new_content": oracle,
                        "reference_patch": row["patch"],
                        "metadata": {"instance_id": row["instance_id"], "kind": kind},
                    },
                    sort_keys=True,
                )
            )
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} samples to {OUT}")


if __name__ == "__main__":
    main()
