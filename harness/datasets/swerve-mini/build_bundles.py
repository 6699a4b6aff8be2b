#!/usr/bin/env python3
"""Regenerate the swerve-mini artefacts from the plain files in sources/.

sources/<project>/project.json names the repository, its environment
versions and tags; sources/<project>/NN-<slug>/ is one commit each, in order:
``step.json`` (message, date, and for a fix commit the ``instance`` it
becomes), ``issue.md`` (the problem statement) and ``tree/`` (files written
over the previous commit's tree; ``"delete"`` in step.json removes paths).

For each project this makes a git repository with fixed identities and
dates, writes ``repos/<project>.bundle`` (``git bundle create --all``), and
turns every fix commit into a dataset row: base = its parent, ``patch`` = the
diff of the non-test files, ``test_patch`` = the diff of the test files.
FAIL_TO_PASS and PASS_TO_PASS come from running the tests before and after the
gold patch; the FAIL_TO_PASS list must equal the one declared in step.json.

Rows also carry SWE-bench 5's image, eval_script, log_parser and eval_type:
the stable image name `harness images build` tags (swerve/sweb.eval.x86_64.
<id, '__' -> '_1776_'>:latest), the eval script SWE-bench's generator makes
from environments.json, parse_log_pytest, pass_and_fail.

It also writes swerve-mini.jsonl, environments.json and
predictions-mixed.jsonl (from sources/predictions/<instance_id>.diff).

Usage: python3 build_bundles.py [--check]
  --check  build into a temporary folder and compare with the files here
           (byte for byte), without changing anything.
"""

import argparse
import filecmp
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # keep the dataset folder free of __pycache__

from verify import git, is_test_path, parse_log_pytest, pytest_command, run, test_directives, TEST_ENV

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources"
PROJECTS = ["inicfg", "textkit", "spans"]

IDENTITY = {
    "GIT_AUTHOR_NAME": "swerve-mini",
    "GIT_AUTHOR_EMAIL": "swerve-mini@swerve.invalid",
    "GIT_COMMITTER_NAME": "swerve-mini",
    "GIT_COMMITTER_EMAIL": "swerve-mini@swerve.invalid",
}

# The image's test environment (an entry of SWE-bench's per-repo spec table,
# MAP_REPO_VERSION_TO_SPECS). Every pin has a wheel on PyPI for CPython 3.11
# (Debian bookworm's python3).
PYTEST_PIN = "pytest==8.3.4"
ENV_SPEC = {
    "python": "3.11",
    "packages": "",
    "pre_install": [],
    "install": [f"python -m pip install {PYTEST_PIN} pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2"],
    "pip_packages": [],
    "eval_commands": [],
    "test_cmd": "pytest -rA",
    "log_parser": "parse_log_pytest",
}
PREDICTION_MODEL = "swerve-mini-mixed"

# The fields SWE-bench 5 added to its rows: the image `harness images build` makes and
# tags for the row, the eval script SWE-bench's generator makes from the spec
# (v5 adds the exit-code lines when it runs it), the parser, the grading rule.
HEREDOC_DELIMITER = "EOF_114329324912"
IMAGE_PREFIX = "swerve/sweb.eval.x86_64."


def image_name(instance_id):
    """SWE-bench's namespaced image name under the `swerve` namespace."""
    return IMAGE_PREFIX + instance_id.lower().replace("__", "_1776_") + ":latest"


def reset_files(test_patch):
    """Source paths of the diff's entries whose source is not /dev/null (unidiff's PatchedFile.path)."""
    lines = test_patch.split("\n")
    files = []
    for line, following in zip(lines, lines[1:]):
        if not (line.startswith("--- ") and following.startswith("+++ ")):
            continue
        source, target = line[4:].split("\t")[0], following[4:].split("\t")[0]
        if source == "/dev/null":
            continue
        if source.startswith("a/") and (target.startswith("b/") or target == "/dev/null"):
            source = source[2:]
        files.append(source)
    return files


def eval_script(row, spec):
    """SWE-bench's make_eval_script_list for a Python repository, as text."""
    base = row["base_commit"]
    reset = f"git checkout {base} {' '.join(reset_files(row['test_patch']))}"
    apply_test_patch = f"git apply -v - <<'{HEREDOC_DELIMITER}'\n{row['test_patch']}\n{HEREDOC_DELIMITER}"
    test_command = " ".join([spec["test_cmd"], *test_directives(row["test_patch"])])
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        "cd /testbed",
        *spec["eval_commands"],
        "git config --global --add safe.directory /testbed",
        "cd /testbed",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base}",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        *spec["install"],
        reset,
        apply_test_patch,
        ": '>>>>> Start Test Output'",
        test_command,
        ": '>>>>> End Test Output'",
        reset,
    ]
    return "\n".join(lines) + "\n"


def commit_date_utc(repo, commit):
    return git(repo, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", commit).strip()


def build_history(project, repo):
    """Create the project's commits; return [(step_name, step, sha)]."""
    git(None, "init", "--quiet", "--initial-branch=main", str(repo))
    git(repo, "config", "core.autocrlf", "false")
    history = []
    for step_dir in sorted(p for p in (SOURCES / project).iterdir() if p.is_dir()):
        step = json.loads((step_dir / "step.json").read_text(encoding="utf-8"))
        for path in step.get("delete", []):
            (repo / path).unlink()
        tree = step_dir / "tree"
        for src in sorted(tree.rglob("*")):
            if src.is_file():
                dst = repo / src.relative_to(tree)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o644)
        git(repo, "add", "--all")
        env = dict(IDENTITY, GIT_AUTHOR_DATE=step["date"], GIT_COMMITTER_DATE=step["date"])
        run(["git", "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-F", "-"], cwd=repo, env=env, stdin=step["message"] + "\n")
        history.append((step_dir.name, step, git(repo, "rev-parse", "HEAD").strip()))
    return history


def run_tests(work, files):
    return parse_log_pytest(run(pytest_command() + files, cwd=work, env=TEST_ENV, check=False)[1])


def make_row(project_json, repo, work, step_dir, step, base, fix, shas):
    instance = step["instance"]
    changed = git(repo, "diff", "--name-only", base, fix).split()
    code_files = [p for p in changed if not is_test_path(p)]
    test_files = [p for p in changed if is_test_path(p)]
    patch = git(repo, "diff", "--no-color", "--no-ext-diff", base, fix, "--", *code_files)
    test_patch = git(repo, "diff", "--no-color", "--no-ext-diff", base, fix, "--", *test_files)
    assert code_files and test_files, f"{step_dir}: a fix commit needs code and test changes"

    # Derive FAIL_TO_PASS / PASS_TO_PASS by running the tests, as SWE-bench's
    # validation does; dataset order follows the test run's order.
    git(work, "checkout", "--quiet", "--force", "--detach", base)
    git(work, "clean", "-qfdx")
    git(work, "apply", "-", stdin=test_patch)
    directives = test_directives(test_patch)
    before = run_tests(work, directives)
    git(work, "apply", "-", stdin=patch)
    after = run_tests(work, directives)
    broken = [t for t, s in after.items() if s != "PASSED"]
    assert not broken, f"{step_dir}: tests fail with the gold patch: {broken}"
    f2p = [t for t in after if before.get(t) != "PASSED"]
    p2p = [t for t in after if before.get(t) == "PASSED"]
    assert set(f2p) == set(instance["fail_to_pass"]), f"{step_dir}: FAIL_TO_PASS is {f2p}, declared {instance['fail_to_pass']}"

    show = lambda commit, path: git(repo, "show", f"{commit}:{path}")
    context_paths = code_files + [p for p in instance.get("context_files", []) if p not in code_files]
    owner_name = project_json["repo"].replace("/", "__")
    version = instance["version"]
    return {
        "repo": project_json["repo"],
        "instance_id": f"{owner_name}-{instance['number']}",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": (step_dir / "issue.md").read_text(encoding="utf-8"),
        "hints_text": instance.get("hints_text", ""),
        "created_at": commit_date_utc(repo, fix),
        "version": version,
        "environment_setup_commit": shas[project_json["versions"][version]],
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "image": image_name(f"{owner_name}-{instance['number']}"),
        "eval_script": eval_script({"base_commit": base, "test_patch": test_patch}, ENV_SPEC),
        "log_parser": ENV_SPEC["log_parser"],
        "eval_type": "pass_and_fail",
        "code_context": {p: show(base, p) for p in context_paths},
        "oracle_new_content": {p: show(fix, p) for p in code_files},
    }


def build(out):
    (out / "repos").mkdir(parents=True, exist_ok=True)
    rows, environments = [], {}
    with tempfile.TemporaryDirectory(prefix="swerve-mini-build-") as tmp:
        for project in PROJECTS:
            project_json = json.loads((SOURCES / project / "project.json").read_text(encoding="utf-8"))
            repo = Path(tmp) / project
            history = build_history(project, repo)
            shas = {name: sha for name, _, sha in history}
            for tag, step_name in project_json.get("tags", {}).items():
                git(repo, "tag", tag, shas[step_name])
            bundle = out / "repos" / f"{project}.bundle"
            # One pack thread keeps the pack, and so the bundle, byte-stable.
            git(repo, "-c", "pack.threads=1", "bundle", "create", "--quiet", str(bundle), "--all")

            work = Path(tmp) / f"{project}-work"
            git(None, "clone", "--quiet", str(repo), str(work))
            for (_, _, base), (name, step, fix) in zip(history, history[1:]):
                if "instance" in step:
                    rows.append(make_row(project_json, repo, work, SOURCES / project / name, step, base, fix, shas))
            environments[project_json["repo"]] = {v: dict(ENV_SPEC) for v in project_json["versions"]}

    with open(out / "swerve-mini.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "environments.json").write_text(json.dumps(environments, indent=2) + "\n", encoding="utf-8")

    ids = [row["instance_id"] for row in rows]
    pred_dir = SOURCES / "predictions"
    unknown = sorted({p.stem for p in pred_dir.glob("*.diff")} - set(ids))
    assert not unknown, f"predictions for unknown instances: {unknown}"
    with open(out / "predictions-mixed.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for iid in ids:
            path = pred_dir / f"{iid}.diff"
            if path.exists():
                pred = {"instance_id": iid, "model_name_or_path": PREDICTION_MODEL, "model_patch": path.read_text(encoding="utf-8")}
                fh.write(json.dumps(pred, ensure_ascii=False) + "\n")
    return ["repos/" + f"{p}.bundle" for p in PROJECTS] + ["swerve-mini.jsonl", "environments.json", "predictions-mixed.jsonl"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh build with the files here")
    args = parser.parse_args()
    if not args.check:
        for name in build(HERE):
            print(f"wrote {name}")
        return 0
    with tempfile.TemporaryDirectory(prefix="swerve-mini-check-") as tmp:
        differ = [name for name in build(Path(tmp)) if not filecmp.cmp(Path(tmp) / name, HERE / name, shallow=False)]
    for name in differ:
        print(f"differs: {name}")
    print("build is reproducible" if not differ else "build differs from the committed artefacts")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
