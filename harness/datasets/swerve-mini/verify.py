#!/usr/bin/env python3
"""Check the swerve-mini dataset and its predictions for real, without Docker.

For every row of swerve-mini.jsonl this clones the project's bundle into a
temporary folder and checks that

* the row has SWE-bench's fields with the right types (v5's ``image``,
  ``eval_script``, ``log_parser`` and ``eval_type`` included: the stable
  image name, a script that runs the test files between the markers), and the
  extra ``code_context`` / ``oracle_new_content`` fields match the
  repository;
* ``base_commit`` is a real commit, the fix commit is its child, base + gold
  patch + test patch gives exactly the fix commit's tree, and the environment
  setup commit comes before the base commit;
* with the test patch applied at the base commit every FAIL_TO_PASS test fails
  and every PASS_TO_PASS test passes, and with the gold patch as well every
  one of them passes (tests run as ``pytest -rA <test files>``, the files
  derived from the test patch as SWE-bench does).

Then it grades predictions-mixed.jsonl the way SWE-bench does (apply the
model patch, reset the test files, apply the test patch, run, parse the
``-rA`` summary, grade with v5 rules) in a hardened run that removes test
files the model patch added, and compares with
predictions-mixed.expected.json. A second, naive run keeps such files, to show
that the forging prediction would fool a grader that trusts the test output.

Usage: python3 verify.py [-v]. Exit status 0 when every check passes.
Needs git, Python 3.8+ and pytest (installed with pip from the pin in
environments.json when missing).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASET = HERE / "swerve-mini.jsonl"
ENVIRONMENTS = HERE / "environments.json"
PREDICTIONS = HERE / "predictions-mixed.jsonl"
EXPECTED = HERE / "predictions-mixed.expected.json"
REPOS = HERE / "repos"

SWE_BENCH_FIELDS = {
    "repo": str,
    "instance_id": str,
    "base_commit": str,
    "patch": str,
    "test_patch": str,
    "problem_statement": str,
    "hints_text": str,
    "created_at": str,
    "version": str,
    "environment_setup_commit": str,
    "FAIL_TO_PASS": list,
    "PASS_TO_PASS": list,
    "image": str,
    "eval_script": str,
    "log_parser": str,
    "eval_type": str,
}
EXTRA_FIELDS = {"code_context": dict, "oracle_new_content": dict}

STATUS_WORDS = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
# SWE-bench drops these from the test directives (get_test_directives); "csv" has no dot there.
NON_TEST_SUFFIXES = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")

# Commits are made with fixed identities and dates, and git must not pick up
# the user's configuration (diff prefixes, hooks, signing).
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "TZ": "UTC",
}
TEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


class CheckFailed(Exception):
    pass


# ---------------------------------------------------------------- processes

def run(cmd, cwd=None, env=None, stdin=None, check=True):
    """Run a command and return (returncode, stdout+stderr)."""
    full_env = dict(os.environ)
    full_env.update(GIT_ENV)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=full_env,
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if check and proc.returncode != 0:
        raise CheckFailed(f"`{' '.join(map(str, cmd))}` failed ({proc.returncode}):\n{proc.stdout}")
    return proc.returncode, proc.stdout


def git(repo, *args, stdin=None, check=True):
    return run(["git", *args], cwd=repo, stdin=stdin, check=check)[1]


def git_ok(repo, *args, stdin=None):
    return run(["git", *args], cwd=repo, stdin=stdin, check=False)[0] == 0


def ensure_pytest(pin):
    if run([sys.executable, "-c", "import pytest"], check=False)[0] == 0:
        return
    print(f"pytest missing: installing {pin}", file=sys.stderr)
    run([sys.executable, "-m", "pip", "install", "--quiet", pin])


def pytest_command():
    # `pytest -rA` (the test_cmd) does not put the working directory on
    # sys.path, `python -m pytest` does; -P (3.11+) undoes that so imports
    # behave as in the image.
    base = [sys.executable]
    if sys.version_info >= (3, 11):
        base.append("-P")
    return base + ["-m", "pytest", "-rA", "-p", "no:cacheprovider"]


# ------------------------------------------------------------- SWE-bench bits

def test_directives(test_patch):
    """Paths SWE-bench passes to the test command (its get_test_directives)."""
    paths = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    return [p for p in paths if not p.endswith(NON_TEST_SUFFIXES)]


def patch_files(patch):
    """[(path, is_new_file)] for each file entry of a git diff."""
    entries = []
    for block in re.split(r"^(?=diff --git )", patch, flags=re.M):
        match = re.match(r"diff --git a/.* b/(.*)", block)
        if match:
            entries.append((match.group(1), "\n--- /dev/null\n" in block or "\nnew file mode" in block))
    return entries


def is_test_path(path):
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name.startswith("test_") or name == "conftest.py"


def parse_log_pytest(text):
    """SWE-bench v5 parse_log_pytest: test id -> status."""
    status = {}
    for line in text.split("\n"):
        if not line.startswith(STATUS_WORDS):
            continue
        if line.startswith("FAILED"):
            line = line.replace(" - ", " ")
        tokens = line.split()
        if len(tokens) < 2:
            continue
        if tokens[0] == "SKIPPED" and re.match(r"^\[\d+\]$", tokens[1]):
            continue
        status[tokens[1]] = tokens[0]
    return status


def grade(row, status, exit_code):
    """v5 grading -> dict with resolution details.

    PASSED/XFAIL fix a FAIL_TO_PASS test, SKIPPED also keeps a PASS_TO_PASS test; a non-zero
    exit code with results but no FAILED/ERROR status makes the log ungradeable (v5's
    get_logs_eval).
    """
    if exit_code not in (0, None) and status and not any(v in ("FAILED", "ERROR") for v in status.values()):
        return {"gradeable": False, "resolved": False, "f2p_ok": 0, "p2p_ok": 0}
    passed = lambda t: status.get(t) in ("PASSED", "XFAIL")
    maintained = lambda t: passed(t) or status.get(t) == "SKIPPED"
    f2p_ok = sum(map(passed, row["FAIL_TO_PASS"]))
    p2p_ok = sum(map(maintained, row["PASS_TO_PASS"]))
    full = f2p_ok == len(row["FAIL_TO_PASS"]) and p2p_ok == len(row["PASS_TO_PASS"])
    return {"gradeable": bool(status), "resolved": full and bool(status), "f2p_ok": f2p_ok, "p2p_ok": p2p_ok}


# ------------------------------------------------------------------ workspace

class Checkout:
    """A clone of one project bundle, reset to a commit on demand."""

    def __init__(self, bundle, root):
        self.path = Path(root) / bundle.stem
        git(None, "clone", "--quiet", "--no-checkout", str(bundle), str(self.path))

    def reset(self, commit):
        git(self.path, "checkout", "--quiet", "--force", "--detach", commit)
        git(self.path, "reset", "--quiet", "--hard", commit)
        git(self.path, "clean", "-qfdx")

    def apply(self, patch, check_only=False):
        args = ["apply", "--check", "-"] if check_only else ["apply", "-"]
        return git_ok(self.path, *args, stdin=patch)

    def run_tests(self, files):
        code, out = run(pytest_command() + list(files), cwd=self.path, env=TEST_ENV, check=False)
        return code, out, parse_log_pytest(out)

    def show(self, commit, path):
        return git(self.path, "show", f"{commit}:{path}")


# --------------------------------------------------------------------- checks

def check_schema(row, environments):
    problems = []
    for field, kind in {**SWE_BENCH_FIELDS, **EXTRA_FIELDS}.items():
        if not isinstance(row.get(field), kind):
            problems.append(f"{field} missing or not {kind.__name__}")
    if problems:
        return problems
    owner, name = row["repo"].split("/")
    if not re.fullmatch(rf"{owner}__{name}-\d+", row["instance_id"]):
        problems.append("instance_id is not owner__name-N")
    for field in ("base_commit", "environment_setup_commit"):
        if not re.fullmatch(r"[0-9a-f]{40}", row[field]):
            problems.append(f"{field} is not a full sha")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["created_at"]):
        problems.append("created_at is not ISO-8601 UTC")
    spec = environments.get(row["repo"], {}).get(row["version"])
    if spec is None:
        problems.append("no environment spec for repo/version")
    elif row["log_parser"] != spec["log_parser"]:
        problems.append("log_parser differs from the environment spec's")
    expected_image = "swerve/sweb.eval.x86_64." + row["instance_id"].lower().replace("__", "_1776_") + ":latest"
    if row["image"] != expected_image:
        problems.append(f"image is not {expected_image}")
    if row["eval_type"] != "pass_and_fail":
        problems.append("eval_type is not pass_and_fail")
    script = row["eval_script"].split("\n")
    test_line = " ".join(["pytest -rA", *test_directives(row["test_patch"])])
    if script[:2] != ["#!/bin/bash", "set -uxo pipefail"] or script[-2] != f"git checkout {row['base_commit']} " + " ".join(
        path for path, new in patch_files(row["test_patch"]) if not new
    ):
        problems.append("eval_script does not start with the header or end with the test-file reset")
    marker = script.index(": '>>>>> Start Test Output'") if ": '>>>>> Start Test Output'" in script else -1
    if marker < 0 or script[marker + 1 : marker + 3] != [test_line, ": '>>>>> End Test Output'"]:
        problems.append(f"eval_script does not run `{test_line}` between the markers")
    if not 1 <= len(row["FAIL_TO_PASS"]) <= 4 or len(row["PASS_TO_PASS"]) < 3:
        problems.append("expected 1-4 FAIL_TO_PASS and several PASS_TO_PASS tests")
    if set(row["FAIL_TO_PASS"]) & set(row["PASS_TO_PASS"]):
        problems.append("a test is in both FAIL_TO_PASS and PASS_TO_PASS")
    directives = test_directives(row["test_patch"])
    for test in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]:
        if test.split("::")[0] not in directives:
            problems.append(f"{test} is not in a file of the test patch")
    code_files = [path for path, _ in patch_files(row["patch"])]
    if not code_files or any(map(is_test_path, code_files)):
        problems.append("patch must touch non-test files only")
    test_files = [path for path, _ in patch_files(row["test_patch"])]
    if not test_files or not all(map(is_test_path, test_files)):
        problems.append("test_patch must touch test files only")
    if not set(code_files) <= set(row["code_context"]):
        problems.append("code_context lacks a file of the gold patch")
    if set(row["oracle_new_content"]) != set(code_files):
        problems.append("oracle_new_content keys differ from the gold patch's files")
    return problems


def fix_commit_of(checkout, base):
    children = [
        line.split()[0]
        for line in git(checkout.path, "rev-list", "--all", "--parents").splitlines()
        if base in line.split()[1:]
    ]
    if len(children) != 1:
        raise CheckFailed(f"base {base[:12]} has {len(children)} children, expected the fix commit only")
    return children[0]


def check_history(checkout, row):
    base = row["base_commit"]
    if not git_ok(checkout.path, "cat-file", "-e", f"{base}^{{commit}}"):
        raise CheckFailed("base_commit is not a commit of the bundle")
    fix = fix_commit_of(checkout, base)
    if not git_ok(checkout.path, "merge-base", "--is-ancestor", base, fix):
        raise CheckFailed("base_commit does not precede the fix commit")
    if not git_ok(checkout.path, "merge-base", "--is-ancestor", row["environment_setup_commit"], base):
        raise CheckFailed("environment_setup_commit does not precede base_commit")
    base_time, fix_time = (int(git(checkout.path, "log", "-1", "--format=%ct", c)) for c in (base, fix))
    if not base_time < fix_time:
        raise CheckFailed("fix commit is not newer than the base commit")
    fix_date = git(checkout.path, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", fix).strip()
    if fix_date != row["created_at"]:
        raise CheckFailed(f"created_at {row['created_at']} != fix commit date {fix_date}")
    # base + gold patch + test patch must be exactly the fix commit.
    checkout.reset(base)
    for path in row["code_context"]:
        if checkout.show(base, path) != row["code_context"][path]:
            raise CheckFailed(f"code_context[{path}] differs from the base commit")
    if not (checkout.apply(row["patch"]) and checkout.apply(row["test_patch"])):
        raise CheckFailed("gold patch or test patch does not apply at base_commit")
    for path, content in row["oracle_new_content"].items():
        if (checkout.path / path).read_text(encoding="utf-8") != content:
            raise CheckFailed(f"oracle_new_content[{path}] differs from base + gold patch")
    git(checkout.path, "add", "-A")
    if git(checkout.path, "write-tree").strip() != git(checkout.path, "rev-parse", f"{fix}^{{tree}}").strip():
        raise CheckFailed("base + patch + test_patch is not the fix commit's tree")
    return fix


def check_tests(checkout, row, verbose):
    files = test_directives(row["test_patch"])
    f2p, p2p = row["FAIL_TO_PASS"], row["PASS_TO_PASS"]

    checkout.reset(row["base_commit"])
    checkout.apply(row["test_patch"])
    _, before_log, before = checkout.run_tests(files)
    bad = [t for t in f2p if before.get(t) in ("PASSED", "XFAIL")]
    bad += [t for t in p2p if before.get(t) != "PASSED"]
    if bad:
        raise CheckFailed(f"before the fix these tests are in the wrong state: {bad}\n{before_log if verbose else ''}")

    checkout.apply(row["patch"])
    _, after_log, after = checkout.run_tests(files)
    bad = [t for t in f2p + p2p if after.get(t) != "PASSED"]
    if bad:
        raise CheckFailed(f"with the gold patch these tests do not pass: {bad}\n{after_log if verbose else ''}")
    # P2P must list every test that passes on both sides, like SWE-bench's.
    missing = [t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED" and t not in p2p]
    if missing:
        raise CheckFailed(f"PASS_TO_PASS lacks {missing}")
    if len(after) != len(f2p) + len(p2p):
        raise CheckFailed(f"the test files hold tests outside FAIL_TO_PASS/PASS_TO_PASS: {sorted(set(after) - set(f2p + p2p))}")


def evaluate_prediction(checkout, row, model_patch, hardened):
    """SWE-bench's procedure for one prediction; returns a result dict."""
    checkout.reset(row["base_commit"])
    if not checkout.apply(model_patch):
        return {"applied": False}
    added = [path for path, new in patch_files(model_patch) if new]
    removed = []
    if hardened:
        # New files under test paths (conftest.py hooks, fake test modules) are
        # the model's, not the task's; SWE-bench's reset never touches them.
        for path in added:
            if is_test_path(path) and (checkout.path / path).exists():
                (checkout.path / path).unlink()
                removed.append(path)
    test_files = [path for path, new in patch_files(row["test_patch"]) if not new]
    if test_files:
        git(checkout.path, "checkout", row["base_commit"], "--", *test_files)
    if not checkout.apply(row["test_patch"]):
        return {"applied": True, "test_patch_failed": True, "resolved": False}
    code, log, status = checkout.run_tests(test_directives(row["test_patch"]))
    result = grade(row, status, code)
    result.update(applied=True, exit_code=code, removed=removed, errors=[t for t, s in status.items() if s == "ERROR"])
    return result


def fuzzy_apply_fails(checkout, row, model_patch):
    """True when SWE-bench v5's later apply attempts fail too (chain: docs/harness.md)."""
    checkout.reset(row["base_commit"])
    if git_ok(checkout.path, "apply", "--check", "--3way", "-", stdin=model_patch):
        return False
    if shutil.which("patch") is None:
        return True
    code, _ = run(["patch", "--dry-run", "--batch", "--forward", "--fuzz=5", "-p1"], cwd=checkout.path, stdin=model_patch, check=False)
    return code != 0


def check_prediction_kind(kind, pred, row, hardened, naive):
    """Does the prediction really exercise what its kind says?"""
    n_f2p, n_p2p = len(row["FAIL_TO_PASS"]), len(row["PASS_TO_PASS"])
    patch = pred["model_patch"] or ""
    checks = {
        "resolves": lambda: hardened.get("resolved") and patch != row["patch"],
        "wrong": lambda: hardened["f2p_ok"] == 0 and hardened["p2p_ok"] == n_p2p,
        "partial": lambda: 0 < hardened["f2p_ok"] < n_f2p and hardened["p2p_ok"] == n_p2p,
        "breaks-p2p": lambda: hardened["f2p_ok"] == n_f2p and hardened["p2p_ok"] < n_p2p,
        "import-error": lambda: hardened["errors"] and hardened["f2p_ok"] == 0 and hardened["p2p_ok"] == 0,
        "test-only": lambda: all(is_test_path(p) for p, _ in patch_files(patch)) and hardened["f2p_ok"] == 0,
        "forge": lambda: naive.get("resolved") and hardened["removed"] and not hardened["resolved"],
        "unappliable": lambda: patch.startswith("diff --git") and not hardened["applied"],
        "malformed": lambda: "diff --git" not in patch and not hardened["applied"],
        "empty": lambda: patch == "",
    }
    if kind not in checks:
        return f"unknown kind {kind!r}"
    return None if checks[kind]() else f"does not behave as a {kind!r} prediction"


# ----------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print test logs on failure")
    args = parser.parse_args()

    rows = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    environments = json.loads(ENVIRONMENTS.read_text(encoding="utf-8"))
    predictions = [json.loads(line) for line in PREDICTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    pins = {pkg for repo in environments.values() for spec in repo.values() for cmd in spec["install"] for pkg in cmd.split() if pkg.startswith("pytest==")}
    ensure_pytest(sorted(pins)[0] if pins else "pytest")

    failures = []
    fail = lambda what: (failures.append(what), print(f"FAIL {what}"))
    by_id = {row["instance_id"]: row for row in rows}
    if len(by_id) != len(rows):
        fail("duplicate instance ids")

    with tempfile.TemporaryDirectory(prefix="swerve-mini-") as tmp:
        checkouts = {}
        print(f"== dataset: {len(rows)} instances")
        for row in rows:
            iid = row["instance_id"]
            problems = check_schema(row, environments)
            if problems:
                fail(f"{iid}: {'; '.join(problems)}")
                continue
            name = row["repo"].split("/")[1]
            if name not in checkouts:
                checkouts[name] = Checkout(REPOS / f"{name}.bundle", tmp)
            try:
                fix = check_history(checkouts[name], row)
                check_tests(checkouts[name], row, args.verbose)
            except CheckFailed as err:
                fail(f"{iid}: {err}")
                continue
            files = len(patch_files(row["patch"]))
            print(
                f"ok   {iid:<20} F2P {len(row['FAIL_TO_PASS'])} fail->pass, P2P {len(row['PASS_TO_PASS'])} pass->pass, "
                f"gold {files} file(s), base {row['base_commit'][:10]} -> fix {fix[:10]}"
            )

        print(f"== predictions: {len(predictions)} ({PREDICTIONS.name})")
        if set(expected) != {p["instance_id"] for p in predictions}:
            fail("predictions and expected outcomes cover different instance ids")
        tally = {"resolved": 0, "unresolved": 0, "not applied": 0, "empty": 0}
        for pred in predictions:
            iid = pred["instance_id"]
            row, want = by_id.get(iid), expected.get(iid)
            if row is None or want is None:
                fail(f"{iid}: prediction without dataset row or expectation")
                continue
            checkout = checkouts[row["repo"].split("/")[1]]
            patch = pred.get("model_patch") or ""
            if patch == "":
                hardened = naive = {"applied": False}
                tally["empty"] += 1
            else:
                hardened = evaluate_prediction(checkout, row, patch, hardened=True)
                naive = evaluate_prediction(checkout, row, patch, hardened=False) if hardened["applied"] else hardened
            applied = hardened["applied"]
            resolved = bool(hardened.get("resolved"))
            if patch and not applied:
                tally["not applied"] += 1
                if not fuzzy_apply_fails(checkout, row, patch):
                    fail(f"{iid}: git apply fails but SWE-bench's --3way/patch --fuzz fallback would apply it")
            elif applied:
                tally["resolved" if resolved else "unresolved"] += 1
            problems = []
            if applied != want["patch_applies"]:
                problems.append(f"patch_applies {applied}, expected {want['patch_applies']}")
            if resolved != want["resolved"]:
                problems.append(f"resolved {resolved}, expected {want['resolved']}")
            kind_problem = check_prediction_kind(want.get("kind"), pred, row, hardened, naive)
            if kind_problem:
                problems.append(kind_problem)
            detail = ""
            if applied:
                detail = (
                    f"F2P {hardened['f2p_ok']}/{len(row['FAIL_TO_PASS'])}, P2P {hardened['p2p_ok']}/{len(row['PASS_TO_PASS'])}, "
                    f"exit {hardened['exit_code']}"
                )
                if naive.get("resolved") != hardened.get("resolved"):
                    detail += f"; naive run resolved={naive.get('resolved')} (removed {', '.join(hardened['removed'])})"
            if problems:
                fail(f"{iid}: {'; '.join(problems)}")
            else:
                print(f"ok   {iid:<20} {want['kind']:<12} applies={applied!s:<5} resolved={resolved!s:<5} {detail}")

    print(
        f"== summary: {len(rows)} instances, {len(predictions)} predictions "
        f"({tally['resolved']} resolved, {tally['unresolved']} unresolved, {tally['not applied']} not applicable, "
        f"{tally['empty']} empty); {len(failures)} failure(s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
