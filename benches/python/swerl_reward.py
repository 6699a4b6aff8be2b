"""The SWE-RL search/replace reward in plain CPython, for comparison with swerve's Rust port.

Written for swerve from a description of the reward's behaviour (the same rules as the Rust
crate guest-plugins/swe-rl), not from the SWE-RL sources; the reward itself is defined by SWE-RL (Meta). It uses the standard library's
difflib, which is what makes the reward what it is: a line-level unified diff (autojunk on, as
unified_diff always has it) and a character-level SequenceMatcher ratio with autojunk off.

Only one deliberate choice differs from the reference: paths are summed in sorted order, so
results are deterministic (the reference sums in set order).
"""

from __future__ import annotations

import difflib
import re

TAGS = ("<think>", "</think>", "<solution>", "</solution>")

# One fenced SEARCH/REPLACE edit: groups are path, search text and replace text.
BLOCK_RE = re.compile(
    r"```.*?\n### (.*)\n<<<<<<< SEARCH\n([\s\S]*?)\n=======\n([\s\S]*?)\n>>>>>>> REPLACE\n```"
)


class FormatError(Exception):
    """The completion is malformed or its edits do not apply; the reward is -1."""


def _text_between(output: str, open_tag: str, close_tag: str) -> str:
    after_open = output.split(open_tag, 1)[1]
    return after_open.split(close_tag, 1)[0].strip()


def extract_tags(output: str) -> tuple[str, str]:
    """Returns the stripped thought and answer, or raises FormatError."""
    for tag in TAGS:
        if output.count(tag) != 1:
            raise FormatError(f"count of {tag} is not 1")
    thought = _text_between(output, "<think>", "</think>")
    answer = _text_between(output, "<solution>", "</solution>")
    if not thought:
        raise FormatError("Thought is empty")
    return thought, answer


def apply_blocks(code_context: dict, blocks: list) -> dict:
    """Applies (path, search, replace) edits in memory; returns path -> new content."""
    edits_by_path: dict[str, list] = {}
    for path, search, replace in blocks:
        edits_by_path.setdefault(path, []).append((search, replace))
    new_content = {}
    for path, edits in edits_by_path.items():
        # A leading newline anchors every search at a line start.
        text = "\n" + code_context.get(path, "")
        for search, replace in edits:
            if search == replace:
                raise FormatError("Search and replace blocks are identical")
            anchored_search, anchored_replace = "\n" + search, "\n" + replace
            if anchored_search not in text:
                raise FormatError("Search block not found in the code: " + anchored_search)
            text = text.replace(anchored_search, anchored_replace)
        new_content[path] = text[1:]
    return new_content


def line_diff(old: str, new: str) -> str:
    """Unified diff of the two texts' lines, 3 lines of context, without the file headers."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=3, lineterm=""))
    return "\n".join(lines[2:])


def _changed(code_context: dict, contents: dict) -> dict:
    diffs = {}
    for path, new in contents.items():
        diff = line_diff(code_context.get(path, ""), new)
        if diff:
            diffs[path] = diff
    return diffs


def content_reward(code_context: dict, oracle_new_content: dict, pred_new_content: dict):
    """Mean character-level similarity of predicted vs oracle diffs; (reward, similarities)."""
    oracle = _changed(code_context, oracle_new_content)
    pred = _changed(code_context, pred_new_content)
    similarities = []
    for path in sorted(oracle.keys() | pred.keys()):
        pred_change, oracle_change = pred.get(path, ""), oracle.get(path, "")
        if pred_change and oracle_change:
            matcher = difflib.SequenceMatcher(None, pred_change, oracle_change, autojunk=False)
            matches = sum(block.size for block in matcher.get_matching_blocks())
            similarity = matcher.ratio()
        else:
            matches, similarity = 0, 0.0
        similarities.append(
            {
                "path": path,
                "similarity": similarity,
                "matches": matches,
                "total_len": len(pred_change) + len(oracle_change),
                "pred_change": pred_change,
                "oracle_change": oracle_change,
            }
        )
    if not similarities:
        return 1.0, similarities
    total = 0.0
    for entry in similarities:
        total += entry["similarity"]
    return total / len(similarities), similarities


def search_replace_reward(code_context: dict, oracle_new_content: dict, output: str) -> dict:
    """The paper's reward: -1 on a format error, else the content reward of the applied edits."""
    try:
        thought, answer = extract_tags(output)
        blocks = BLOCK_RE.findall(answer)
        if not blocks:
            raise FormatError("No valid search blocks found")
        pred_new_content = apply_blocks(code_context, blocks)
    except FormatError as error:
        return {"reward": -1.0, "error": str(error)}
    reward, similarities = content_reward(code_context, oracle_new_content, pred_new_content)
    return {
        "reward": reward,
        "thought": thought,
        "answer": answer,
        "findall": blocks,
        "pred_new_content": pred_new_content,
        "similarities": similarities,
    }
