"""Generates a deterministic benchmark set for the SWE-RL reward, unlike the development vectors.

Usage: python3 benches/python/gen_swerl_cases.py [--cases N] [--seed S] [--small] OUTPUT.jsonl

Each line is a `harness reward` input (`id`, `code_context`, `oracle_new_content`, `output`).
The same arguments always write the same bytes (a seeded `random.Random`, no clock, no hashing
order). The set mixes what the 120 development vectors have little of:

- file sizes from a dozen lines to several thousand (a few of 150-250 KB);
- many hunks per file (up to 24) and patches over up to 6 files, some of them new files;
- answers that are exact, partial (a subset of the hunks), near misses (typos, renamed
  identifiers, whitespace, a hunk off by a few lines), re-ordered, with an extra file, or
  malformed (missing or doubled tags, empty thought, no blocks, a search that is not found,
  identical search and replace);
- CRLF files, non-ASCII text, and files of 200+ lines whose repeated lines trigger difflib's
  popular-line rule.

With `--small`, every case is a few lines: one or two files of 3 to 30 lines, one or two hunks,
the same kinds of answer but no large, huge or many-hunk ones. Scoring such a case takes
microseconds, so a set of them measures what a whole process spends around the scoring (start,
plugin load, JSON in and out) rather than the scoring itself.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = (
    "data value item node path cfg size idx count total buf msg flag key result self other "
    "request response parser token stream handler cache index entry record column row field "
    "user config state queue batch error retry limit offset length width height"
).split()
NON_ASCII = ["é", "ü", "добро", "日本語", "😀", "ﬁ", "κόσμε", "→", "\u00a0", "Ω"]
POPULAR = ["", "pass", "    return None", "}", "        pass", "#"]


def identifier(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def code_line(rng: random.Random, indent: int) -> str:
    pad = "    " * indent
    kind = rng.random()
    a, b = identifier(rng), identifier(rng)
    if kind < 0.25:
        return f"{pad}{a} = {b}({identifier(rng)}, {rng.randint(0, 999)})"
    if kind < 0.4:
        return f"{pad}if {a} > {rng.randint(0, 99)}:"
    if kind < 0.5:
        return f"{pad}return {a}"
    if kind < 0.6:
        return f"{pad}# {' '.join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))}"
    if kind < 0.67:
        text = rng.choice(NON_ASCII) + " " + rng.choice(WORDS)
        return f'{pad}{a} = "{text}"'
    if kind < 0.75:
        return f"{pad}for {a} in range({rng.randint(1, 500)}):"
    if kind < 0.85:
        return f"{pad}{a}.append({b} + {rng.randint(0, 9999)})"
    if kind < 0.92:
        return ""
    return f"{pad}{a}[{rng.randint(0, 9)}] = [{', '.join(str(rng.randint(0, 9)) for _ in range(rng.randint(1, 6)))}]"


def source_file(rng: random.Random, lines: int, popular: bool) -> list[str]:
    """A Python-like file of about `lines` lines; with `popular`, a tenth of them repeat."""
    out: list[str] = []
    n = 0
    while len(out) < lines:
        if rng.random() < 0.15:
            out.append(f"class {identifier(rng).title().replace('_', '')}{n}:")
            indent = 1
        else:
            indent = 0
        out.append(f"{'    ' * indent}def {identifier(rng)}_{n}({identifier(rng)}, {identifier(rng)}):")
        for _ in range(rng.randint(2, 14)):
            if popular and rng.random() < 0.12:
                out.append(rng.choice(POPULAR))
            else:
                out.append(code_line(rng, indent + 1 + (rng.random() < 0.3)))
        out.append("")
        n += 1
    return out[:lines]


def edited_line(rng: random.Random, line: str) -> str:
    """A changed version of one line (never equal to it)."""
    choice = rng.random()
    if choice < 0.3 and line.strip():
        return line + f"  # {rng.choice(WORDS)}"
    if choice < 0.6:
        words = [w for w in WORDS if w in line]
        if words:
            w = rng.choice(words)
            new = line.replace(w, rng.choice(WORDS) + "_" + w, 1)
            if new != line:
                return new
    if choice < 0.8:
        return line.replace("(", "(" + identifier(rng) + ", ", 1) if "(" in line else line + " + 1"
    return code_line(rng, 1)


def hunk_edit(rng: random.Random, lines: list[str], start: int, length: int) -> list[str]:
    """New lines for lines[start:start + length]: changed, inserted or deleted lines."""
    old = lines[start : start + length]
    kind = rng.random()
    if kind < 0.55:
        new = [edited_line(rng, l) if rng.random() < 0.5 else l for l in old]
        if new == old:
            new[rng.randrange(len(new))] = code_line(rng, 1) + "  # fix"
    elif kind < 0.8:
        at = rng.randint(0, len(old))
        new = old[:at] + [code_line(rng, 2) for _ in range(rng.randint(1, 8))] + old[at:]
    elif kind < 0.92 and len(old) > 1:
        cut = rng.randrange(len(old))
        new = old[:cut] + old[cut + 1 :]
    else:
        new = [code_line(rng, 1) for _ in range(rng.randint(1, length + 3))]
    return new


def plan_hunks(rng: random.Random, n_lines: int, hunks: int) -> list[tuple[int, int]]:
    """Disjoint (start, length) ranges, sorted, at least 4 lines apart."""
    spans: list[tuple[int, int]] = []
    tries = 0
    while len(spans) < hunks and tries < hunks * 20:
        tries += 1
        length = rng.randint(1, 6)
        if n_lines <= length + 1:
            break
        start = rng.randrange(0, n_lines - length)
        if all(start + length + 4 <= s or s + l + 4 <= start for s, l in spans):
            spans.append((start, length))
    return sorted(spans)


def context_size(rng: random.Random, kind: str) -> int:
    if kind == "small":
        return rng.randint(3, 30)
    if kind == "large":
        return rng.randint(3000, 6000)
    if kind == "huge":
        return rng.randint(5000, 7000)
    return int(rng.choice([12, 40, 90, 180, 250, 400, 800, 1500]) * rng.uniform(0.7, 1.3))


def block(path: str, search: list[str], replace: list[str], lang: str = "python") -> str:
    return (
        f"```{lang}\n### {path}\n<<<<<<< SEARCH\n"
        + "\n".join(search)
        + "\n=======\n"
        + "\n".join(replace)
        + "\n>>>>>>> REPLACE\n```"
    )


def completion(rng: random.Random, blocks: list[str], thought: str | None = None) -> str:
    thought = thought if thought is not None else " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))
    glue = rng.choice(["\n\n", "\n", "\nThen:\n"])
    return f"<think>\n{thought}\n</think>\n<solution>\n{glue.join(blocks)}\n</solution>"


def perturb(rng: random.Random, replace: list[str]) -> list[str]:
    """A near miss: the same edit with a typo, a renamed identifier or changed whitespace."""
    out = list(replace)
    if not out:
        return [code_line(rng, 1)]
    i = rng.randrange(len(out))
    how = rng.random()
    if how < 0.4 and out[i]:
        pos = rng.randrange(len(out[i]))
        out[i] = out[i][:pos] + rng.choice("abcxyz_ ") + out[i][pos + 1 :]
    elif how < 0.7:
        out[i] = out[i].replace(" ", "  ", 1) if " " in out[i] else out[i] + " "
    else:
        out[i] = edited_line(rng, out[i])
    return out


def make_case(rng: random.Random, index: int, small: bool = False) -> dict:
    kind = rng.choices(
        [
            "exact",
            "subset",
            "near",
            "shifted",
            "extra_file",
            "wrong_file",
            "shuffled",
            "new_file",
            "many_hunks",
            "large",
            "huge",
            "format",
        ],
        weights=[8, 10, 18, 5, 6, 3, 5, 4, 0, 0, 0, 10] if small else [8, 10, 18, 5, 6, 3, 5, 4, 7, 10, 2, 10],
    )[0]
    size_kind = "small" if small else kind if kind in ("large", "huge") else "normal"
    if kind in ("large", "huge"):
        n_files = 1
    elif small:
        n_files = rng.choice([1, 1, 2])
    elif kind == "many_hunks":
        n_files = rng.choice([1, 1, 2])
    else:
        n_files = rng.choice([1, 1, 1, 2, 2, 3, 4, 6])
    crlf = rng.random() < 0.08
    popular = rng.random() < 0.3
    files: dict[str, list[str]] = {}
    for f in range(n_files):
        path = f"pkg{rng.randint(0, 9)}/{identifier(rng)}_{f}.py"
        files[path] = source_file(rng, context_size(rng, size_kind), popular)
    eol = "\r\n" if crlf else "\n"
    code_context = {p: eol.join(l) + eol for p, l in files.items()}

    # The oracle: hunks in some files (all files but one at most), maybe one new file.
    oracle_new: dict[str, str] = {}
    pred_blocks: list[str] = []
    true_blocks: list[tuple[str, list[str], list[str]]] = []
    for path, lines in files.items():
        if len(files) > 1 and rng.random() < 0.15:
            continue
        if kind == "many_hunks":
            hunks = rng.randint(8, 24)
        elif kind in ("large", "huge"):
            hunks = rng.randint(1, 6)
        elif small:
            hunks = rng.choice([1, 1, 2])
        else:
            hunks = rng.choice([1, 1, 2, 3, 4, 6])
        new_lines: list[str] = []
        cursor = 0
        for start, length in plan_hunks(rng, len(lines), hunks):
            new = hunk_edit(rng, lines, start, length)
            new_lines += lines[cursor:start] + new
            cursor = start + length
            # The model's search block: the hunk with 0-3 lines of context on each side.
            before, after = rng.randint(0, 3), rng.randint(0, 3)
            s0, s1 = max(0, start - before), min(len(lines), start + length + after)
            search = lines[s0:s1]
            replace = lines[s0:start] + new + lines[start + length : s1]
            if search != replace:
                true_blocks.append((path, search, replace))
        new_lines += lines[cursor:]
        oracle_new[path] = eol.join(new_lines) + eol
    if kind == "new_file" or rng.random() < 0.03:
        path = f"pkg/new_{identifier(rng)}.py"
        body = source_file(rng, rng.randint(3, 12) if small else rng.randint(5, 120), False)
        oracle_new[path] = "\n".join(body) + "\n"
        true_blocks.append((path, [""], body))
    if not true_blocks:
        path = next(iter(files))
        lines = files[path]
        new = lines[:1] + ["import os"] + lines[1:]
        oracle_new[path] = eol.join(new) + eol
        true_blocks.append((path, lines[:1], lines[:1] + ["import os"]))

    # The prediction.
    chosen = list(true_blocks)
    if kind == "subset" and len(chosen) > 1:
        chosen = rng.sample(chosen, rng.randint(1, len(chosen) - 1))
        chosen.sort(key=true_blocks.index)
    # Near misses, and some wrong hunks in most other kinds of answer.
    miss = {"near": 0.5, "exact": 0.0, "format": 0.0}.get(kind, 0.2)
    chosen = [
        (p, s, perturb(rng, r)) if rng.random() < miss or (kind == "near" and i == 0) else (p, s, r)
        for i, (p, s, r) in enumerate(chosen)
    ]
    if kind == "shifted":
        # The right edit text applied a few lines away from where the oracle made it.
        shifted = []
        for p, s, r in chosen:
            lines = files.get(p)
            if lines and len(lines) > 20 and rng.random() < 0.6:
                at = rng.randrange(len(lines) - len(s))
                s2 = lines[at : at + len(s)]
                shifted.append((p, s2, s2 + [r[-1] if r else "pass"]))
            else:
                shifted.append((p, s, r))
        chosen = shifted
    if kind == "shuffled":
        rng.shuffle(chosen)
    if kind == "extra_file":
        path = rng.choice(list(files))
        lines = files[path]
        at = rng.randrange(len(lines))
        if rng.random() < 0.5:
            chosen.append((path, lines[at : at + 1], lines[at : at + 1] + ["# extra"]))
        else:
            chosen.append(("docs/extra.py", [""], ["# extra", identifier(rng)]))
    if kind == "wrong_file" and len(files) > 1:
        paths = list(files)
        chosen = [(paths[(paths.index(p) + 1) % len(paths)] if p in files else p, s, r) for p, s, r in chosen]
    if crlf:
        # Models answer with \n; search text with \r would not match, so keep it in the lines.
        chosen = [(p, [l + "\r" for l in s[:-1]] + s[-1:] if p in files else s, r) for p, s, r in chosen]
    blocks = [block(p, s, r) for p, s, r in chosen]
    output = completion(rng, blocks)

    if kind == "format":
        how = rng.choice(["no_think", "two_solutions", "empty_thought", "no_blocks", "not_found", "identical", "unclosed", "prose_then_block"])
        if how == "no_think":
            output = output.replace("<think>", "", 1)
        elif how == "two_solutions":
            output = output + "\n<solution>\nagain\n</solution>"
        elif how == "empty_thought":
            output = completion(rng, blocks, thought=" \u001c ")
        elif how == "no_blocks":
            output = completion(rng, ["I would change " + " ".join(rng.choice(WORDS) for _ in range(40))])
        elif how == "not_found":
            p, s, r = chosen[0]
            output = completion(rng, [block(p, s + ["this line is not in the file"], r)] + blocks[1:])
        elif how == "identical":
            p, s, _ = chosen[-1]
            output = completion(rng, blocks[:-1] + [block(p, s, s)])
        elif how == "unclosed":
            output = output.replace(">>>>>>> REPLACE\n```", ">>>>>>> REPLACE", 1)
        else:
            output = completion(rng, ["Here is the fix:\n```\nnot a block\n```"] + blocks)
    return {
        "id": f"gen-{index:04d}-{kind}",
        "code_context": code_context,
        "oracle_new_content": oracle_new,
        "output": output,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--small", action="store_true", help="cases of a few lines each")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with args.output.open("w", encoding="utf-8", newline="\n") as out:
        for i in range(args.cases):
            out.write(json.dumps(make_case(rng, i, args.small), ensure_ascii=False, sort_keys=True))
            out.write("\n")


if __name__ == "__main__":
    main()
