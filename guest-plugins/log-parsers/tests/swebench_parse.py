"""Runs SWE-bench 5.0.2's own log parsers for swerve's differential test.

Reads JSON lines on stdin and writes one JSON line per request on stdout:

- ``{"parser": NAME, "log": TEXT, "test_spec": {"instance_id": ..., "version": ..., "repo": ...}}``
  -> ``{"map": [[test, status], ...]}`` in the parser's dict order, or ``{"error": CLASS}`` when
  the parser raises (``CLASS`` is the exception's class name).
- ``{"report": {"instance_id", "FAIL_TO_PASS", "PASS_TO_PASS", "log_parser", "eval_type",
  "model_patch"}, "log": TEXT}`` -> ``{"report_json": TEXT}``: SWE-bench's ``get_eval_report``
  on the log (written to a file, as its harness reads it) and the text ``run_instance`` writes
  to ``report.json``, or ``{"error": CLASS}`` when grading raises (``harness/tests/it``'s
  report differential).
- ``{"registry": true}`` -> ``{"registry": [names in PARSER_REGISTRY order], "repos": {repo:
  function name or null}}``, the latter from every ``MAP_REPO_TO_PARSER_*``: the ``__name__``
  of the function the map holds (an alias such as ``parse_log_prettier`` reads
  ``parse_log_carbon``), or null where that function is not in ``PARSER_REGISTRY``.

Only ``swebench.harness.log_parsers`` and ``swebench.harness.grading`` are imported. The package
``swebench.harness`` would also import docker, datasets and modal from its ``__init__``, so it is
stood in for by an empty package with the same path, which lets the submodules load without
those dependencies and starts faster.
"""

import contextlib
import json
import os
import sys
import types

import swebench

_harness = types.ModuleType("swebench.harness")
_harness.__path__ = [os.path.join(os.path.dirname(swebench.__file__), "harness")]
sys.modules["swebench.harness"] = _harness

from swebench.harness import grading  # noqa: E402
from swebench.harness import log_parsers  # noqa: E402
from swebench.harness.log_parsers import PARSER_REGISTRY  # noqa: E402
from swebench.types import TestSpec  # noqa: E402


def repo_maps():
    registered = {id(function) for function in PARSER_REGISTRY.values()}
    repos = {}
    for module_name in ("python", "javascript", "c", "go", "java", "php", "ruby", "rust"):
        module = getattr(log_parsers, module_name)
        for attr, table in vars(module).items():
            if attr.startswith("MAP_REPO_TO_PARSER_"):
                for repo, function in table.items():
                    known = id(function) in registered
                    repos[repo] = function.__name__ if known else None
    return repos


def parse(request):
    spec = request.get("test_spec", {})
    test_spec = TestSpec(
        instance_id=spec.get("instance_id", ""),
        image="",
        eval_script_list=[],
        repo=spec.get("repo", ""),
        version=spec.get("version", ""),
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        log_parser=request["parser"],
    )
    parser = PARSER_REGISTRY[request["parser"]]
    try:
        # Some parsers print warnings; stdout carries the answers.
        with contextlib.redirect_stdout(sys.stderr):
            status_map = parser(request["log"], test_spec)
    except Exception as error:  # the class is the answer
        return {"error": type(error).__name__}
    return {"map": [[test, status] for test, status in status_map.items()]}


def report(request):
    import tempfile

    row = request["report"]
    test_spec = TestSpec(
        instance_id=row["instance_id"],
        image="",
        eval_script_list=[],
        repo=row.get("repo", ""),
        version=row.get("version", ""),
        FAIL_TO_PASS=row["FAIL_TO_PASS"],
        PASS_TO_PASS=row["PASS_TO_PASS"],
        log_parser=row["log_parser"],
        eval_type=row.get("eval_type", "pass_and_fail"),
    )
    prediction = {
        "instance_id": row["instance_id"],
        "model_name_or_path": "differential",
        "model_patch": row.get("model_patch"),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as log:
        log.write(request["log"])
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = grading.get_eval_report(
                test_spec, prediction, log.name, include_tests_status=True
            )
    except Exception as error:  # the class is the answer
        return {"error": type(error).__name__}
    finally:
        os.unlink(log.name)
    return {"report_json": json.dumps(result, indent=4)}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("registry"):
            answer = {"registry": list(PARSER_REGISTRY), "repos": repo_maps()}
        elif "report" in request:
            answer = report(request)
        else:
            answer = parse(request)
        sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
