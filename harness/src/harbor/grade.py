#!/usr/bin/env python3
"""swerve's grading of one exported task, run by the Harbor verifier (`tests/test.sh`).

Usage: grade.py CONFIG LOG REWARD REPORT

CONFIG (`tests/config.json`) names the instance, its log parser family and its tests. LOG is
the eval script's output. The grade is swerve's (SWE-bench 5's `get_logs_eval` and
`get_eval_report` as swerve implements them): the test section between the markers (else the
whole log) is parsed by the row's parser, each FAIL_TO_PASS test must pass and each
PASS_TO_PASS test must keep passing; REWARD gets 1 when it is resolved, else 0, and REPORT the
per-test outcomes. Written by `harness dataset export --harbor`; only the Python standard
library is used, so that any image with a `python3` can run it.
"""

import json
import re
import sys

STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"
BAD_CODES = (
    ">>>>> Patch Apply Failed",
    ">>>>> Reset Failed",
    ">>>>> Tests Errored",
    ">>>>> Tests Timed Out",
)
EXIT_CODE = re.compile(r">>>>> Test Exit Code:\s*(-?\d+)")
SUITE_EVIDENCE = re.compile(
    "|".join(
        [
            r"Executed [1-9]\d* of \d+",
            r"TOTAL: [1-9]\d* (?:SUCCESS|FAILED)",
            r"[1-9]\d* passing",
            r"Tests:\s+[1-9]\d*",
            r"Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total",
            r"^# tests [1-9]\d*",
            r"[1-9]\d* specs?, \d+ failures?",
            r"': ok$",
        ]
    ),
    re.MULTILINE,
)
SKIP_COUNT = re.compile(r"\[\d+\]")
ANSI_REMNANT = re.compile(r"\[(\d+)m")
CONTROL = {c: None for c in range(1, 0x20)}


def status_prefix(line):
    for status in STATUSES:
        if line.startswith(status):
            return status
    return None


def is_skip_summary(status, name):
    return status == "SKIPPED" and SKIP_COUNT.fullmatch(name) is not None


def summary_entry(line):
    """A pytest `-rA` summary line: the status word it starts with and the next token."""
    status = status_prefix(line)
    if status is None:
        return None
    if status == "FAILED":
        line = line.replace(" - ", " ")
    tokens = line.split()
    if len(tokens) < 2 or is_skip_summary(tokens[0], tokens[1]):
        return None
    return tokens[1], tokens[0]


def parse_pytest(log):
    results = {}
    for line in log.split("\n"):
        entry = summary_entry(line)
        if entry:
            results[entry[0]] = entry[1]
    return results


def parse_matplotlib(log):
    results = {}
    for line in log.split("\n"):
        line = line.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
        entry = summary_entry(line)
        if entry:
            results[entry[0]] = entry[1]
    return results


def normalize_option(name):
    """A temporary path in a test's parameter kept as its last segment."""
    open_at = name.find("[")
    close_at = name.rfind("]")
    if open_at < 0 or close_at <= open_at:
        return name
    main, option = name[:open_at], name[open_at + 1 : close_at]
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        return "%s[/%s]" % (main, option.rsplit("/", 1)[-1])
    return "%s[%s]" % (main, option)


def parse_pytest_options(log):
    results = {}
    for line in log.split("\n"):
        entry = summary_entry(line)
        if entry:
            results[normalize_option(entry[0])] = entry[1]
    return results


def parse_pytest_v2(log):
    results = {}
    for raw in log.split("\n"):
        line = ANSI_REMNANT.sub("", raw).translate(CONTROL)
        status = status_prefix(line)
        if status is not None:
            if status == "FAILED":
                line = line.split(" - ", 1)[0]
            tokens = line.split()
            if len(tokens) >= 2 and not is_skip_summary(tokens[0], tokens[1]):
                results[" ".join(tokens[1:])] = tokens[0]
        elif any(line.endswith(s) for s in STATUSES):
            tokens = line.split()
            if len(tokens) >= 2:
                results[" ".join(tokens[:-1])] = tokens[-1]
    return results


DJANGO_VERSION_TEST = "--version is equivalent to version"
DJANGO_PASS_SUFFIXES = (" ... ok", " ... OK", " ...  OK")
DJANGO_SITES_MIGRATION = "Applying sites.0002_alter_domain_unique...test_no_migrations"
DJANGO_INTERRUPTED_OK = [
    re.compile(
        r"^(.*?)\s\.\.\.\sTesting against Django installed in ((?s:.*?)) silenced\)\.\nok$",
        re.MULTILINE,
    ),
    re.compile(r"^(.*?)\s\.\.\.\sInternal Server Error: /(.*)/\nok$", re.MULTILINE),
    re.compile(
        r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
        re.MULTILINE,
    ),
]


def parse_django(log):
    """Django's `runtests.py --verbosity 2`: `name ... ok|skipped|FAIL|ERROR` lines, `FAIL:` and
    `ERROR:` headers (one without a name raises IndexError, as upstream's does), an `ok`
    alone after output that split a test's line, and the three messages that print between a
    test's name and its `ok`."""
    results = {}
    previous = None
    for raw in log.split("\n"):
        line = raw.strip()
        if DJANGO_VERSION_TEST in line:
            results[DJANGO_VERSION_TEST] = "PASSED"
        if " ... " in line:
            previous = line.split(" ... ", 1)[0]
        for suffix in DJANGO_PASS_SUFFIXES:
            if line.endswith(suffix):
                if line.startswith(DJANGO_SITES_MIGRATION):
                    line = line.split("...", 1)[1].strip()
                results[line.rsplit(suffix, 1)[0]] = "PASSED"
                break
        if " ... skipped" in line:
            results[line.split(" ... skipped", 1)[0]] = "SKIPPED"
        if line.endswith(" ... FAIL"):
            results[line.split(" ... FAIL", 1)[0]] = "FAILED"
        if line.startswith("FAIL:"):
            results[line.split()[1]] = "FAILED"
        if line.endswith(" ... ERROR"):
            results[line.split(" ... ERROR", 1)[0]] = "ERROR"
        if line.startswith("ERROR:"):
            results[line.split()[1]] = "ERROR"
        if line.startswith("ok") and previous is not None:
            results[previous] = "PASSED"
    for pattern in DJANGO_INTERRUPTED_OK:
        for match in pattern.finditer(log):
            results[match.group(1)] = "PASSED"
    return results


SYMPY_TRACEBACK = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


def parse_sympy(log):
    """SymPy's `bin/test --verbose`: traceback headers `___ path.py:test ___` fail, then
    `test_name ok|F|E` lines."""
    results = {}
    for match in SYMPY_TRACEBACK.finditer(log):
        results["%s.py:%s" % (match.group(2), match.group(3))] = "FAILED"
    for line in log.split("\n"):
        line = line.strip()
        if not line.startswith("test_"):
            continue
        name = line.split()[0]
        if line.endswith(" E"):
            results[name] = "ERROR"
        if line.endswith(" F"):
            results[name] = "FAILED"
        if line.endswith(" ok"):
            results[name] = "PASSED"
    return results


def parse_seaborn(log):
    """pytest's summary `FAILED`/`PASSED name` lines and verbose `name PASSED [ n%]` lines."""
    results = {}
    for line in log.split("\n"):
        tokens = line.split()
        if len(tokens) < 2:
            continue
        if line.startswith("FAILED"):
            results[tokens[1]] = "FAILED"
        elif " PASSED " in line:
            if tokens[1] == "PASSED":
                results[tokens[0]] = "PASSED"
        elif line.startswith("PASSED"):
            results[tokens[1]] = "PASSED"
    return results


PARSERS = {
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "pytest_v2": parse_pytest_v2,
    "matplotlib": parse_matplotlib,
    "django": parse_django,
    "sympy": parse_sympy,
    "seaborn": parse_seaborn,
}


def evaluate(log, parse):
    """(status map, None) for a gradeable log, else (None, why not)."""
    log = log.replace("\r\n", "\n").replace("\r", "\n")
    for code in BAD_CODES:
        if code in log:
            return None, "bad code %r" % code
    start = log.find(START)
    if start < 0 or END not in log:
        return None, "missing test output markers"
    section = log[start + len(START) :].split(START, 1)[0].split(END, 1)[0]
    try:
        statuses = parse(section)
        if not statuses:
            statuses = parse(log)
    except Exception as error:  # noqa: BLE001 - the parser raised, as SWE-bench's may
        return None, "the log parser raised %s" % type(error).__name__
    if not statuses and not SUITE_EVIDENCE.search(log):
        return None, "no test results"
    exit_code = EXIT_CODE.search(log)
    if (
        exit_code
        and int(exit_code.group(1)) != 0
        and statuses
        and not any(s in ("FAILED", "ERROR") for s in statuses.values())
    ):
        return None, "exit code %s contradicts the results" % exit_code.group(1)
    return statuses, None


def resolve_test(test, statuses):
    """A test's status, with a truncated parametrised id matched as a prefix."""
    if test in statuses:
        return statuses[test]
    if test.count("[") <= test.count("]"):
        return None
    found = [s for name, s in statuses.items() if name.startswith(test)]
    if not found:
        return None
    passed = found[0] in ("PASSED", "XFAIL")
    if all((s in ("PASSED", "XFAIL")) == passed for s in found):
        return found[0]
    return None


def outcomes(tests, statuses, maintained, eval_type):
    success, failure = [], []
    for test in tests:
        if eval_type == "fail_only":
            ok = statuses.get(test) != "FAILED"
        else:
            status = resolve_test(test, statuses)
            if status in ("PASSED", "XFAIL"):
                ok = True
            elif status == "SKIPPED":
                ok = maintained
            elif status is None or status in ("FAILED", "ERROR"):
                ok = False
            else:
                continue
        (success if ok else failure).append(test)
    return {"success": success, "failure": failure}


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    config_path, log_path, reward_path, report_path = argv[1:]
    with open(config_path, encoding="utf-8") as file:
        config = json.load(file)
    try:
        with open(log_path, encoding="utf-8", errors="replace", newline="") as file:
            log = file.read()
    except OSError:
        log = ""
    statuses, problem = evaluate(log, PARSERS[config["parser"]])
    report = {"instance_id": config["instance_id"], "resolved": False}
    if statuses is None:
        report["problem"] = problem
    else:
        eval_type = config.get("eval_type", "pass_and_fail")
        f2p = outcomes(config["FAIL_TO_PASS"], statuses, False, eval_type)
        p2p = outcomes(config["PASS_TO_PASS"], statuses, True, eval_type)
        report["tests_status"] = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
        report["resolved"] = not f2p["failure"] and not p2p["failure"]
    with open(report_path, "w", encoding="utf-8") as file:
        json.dump(report, file, indent=2)
    with open(reward_path, "w", encoding="utf-8") as file:
        file.write("1\n" if report["resolved"] else "0\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
