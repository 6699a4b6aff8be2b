//! Fixtures for `curate validate`: small Python repositories with real history (built with the
//! `git` command and mirrored as `curate run` reads mirrors), each installable from PyPI with
//! small pure-Python dependencies, and one task row per case with the outcome its author knows
//! it must have.
//!
//! | task | repository's files | expected |
//! |---|---|---|
//! | `fixture__calc-1` | pyproject extra `test`, `[tool.pytest.ini_options]` | kept: one FAIL_TO_PASS, two PASS_TO_PASS |
//! | `fixture__calc-2` | the same | `gold_fails` (the gold patch does not fix the new test) |
//! | `fixture__calc-3` | the same | `test_patch_failed` |
//! | `fixture__calc-4` | the same | `no_test_files` (no test changes) |
//! | `fixture__calc-5` | the same | `tests_not_collected` (the new test file does not import) |
//! | `fixture__calc-6` | the same | `no_fail_to_pass` (the new test passes before the fix) |
//! | `fixture__calc-7` | the same | `gold_apply_failed` |
//! | `fixture__calc-8` | the same | `flaky` (the fix makes the new tests' outcome random) |
//! | `fixture__calc-9` | the same | `timed_out` (a test that sleeps; in [`Fixture::slow`]) |
//! | `fixture__words-1` | `setup.cfg` (`python_requires < 3.12`: Python 3.11) + `requirements/tests.txt` (the test imports `six`) | kept |
//! | `fixture__modern-1` | `requires-python >= 3.13` (the test uses `copy.replace`), a PEP 735 group including another (the test imports `tomli_w`) | kept |
//! | `fixture__broken-1` | a dependency that PyPI does not have | `install_failed` |
//! | `fixture__plain-1` | no packaging file at all | `no_recipe` |
//!
//! `calc` says `requires-python >= 3.8`, so it runs on the newest Python offered (3.13).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::curation::history::{Events, Pr, WorkRepo};

/// What a fixture task must come out as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Validated with these lists.
    Kept {
        /// FAIL_TO_PASS.
        fail_to_pass: Vec<String>,
        /// PASS_TO_PASS.
        pass_to_pass: Vec<String>,
    },
    /// Dropped for this reason (as `rejected.jsonl` writes it).
    Dropped(&'static str),
}

/// The built fixture.
pub struct Fixture {
    /// Bare mirrors, `<owner>/<name>.git`.
    pub repos: PathBuf,
    /// The task rows.
    pub tasks: PathBuf,
    /// Each task's expected outcome, by instance id.
    pub expected: Vec<(String, Expected)>,
    /// GH Archive hour files in which the kept tasks' pull requests are merged and link an
    /// issue, so that `curate run --events EVENTS --repos REPOS` makes those tasks (the PRs are
    /// merged into `main` in the mirrors).
    pub events: PathBuf,
    /// The task whose test outlasts any short timeout (`fixture__calc-9`), a rows file of its
    /// own so that only it runs under one.
    pub slow: PathBuf,
}

const CALC_PYPROJECT: &str = r#"[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1.0"
requires-python = ">=3.8"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["calc"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"#;

const CALC_BUGGY: &str = "def add(a, b):\n    if b < 0:\n        return a - b\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a + b\n";

const CALC_TESTS: &str = "from calc import add, mul\n\n\ndef test_add_positive():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n";

fn s(x: &str) -> Option<&[u8]> {
    Some(x.as_bytes())
}

/// One task row.
fn row(
    repo: &WorkRepo,
    number: u64,
    base: &str,
    patch: &str,
    test_patch: &str,
) -> serde_json::Value {
    json!({
        "instance_id": format!("{}-{number}", repo.name.replace('/', "__")),
        "repo": repo.name,
        "pull_number": number,
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": format!("Fixture task {number} of {}", repo.name),
        "code_context": {},
    })
}

/// A pull request on `base` of `repo`: code files changed to `code`, test files to `tests`;
/// returns (gold patch, test patch) as git prints them.
fn pull(
    repo: &WorkRepo,
    number: u64,
    base: &str,
    code: &[(&str, Option<&[u8]>)],
    tests: &[(&str, Option<&[u8]>)],
) -> (String, String) {
    let branch = format!("pr-{number}");
    repo.branch(&branch, base);
    let mut files = code.to_vec();
    files.extend_from_slice(tests);
    let head = repo.commit(&branch, &files, &format!("PR {number}"));
    let code_paths: Vec<&str> = code.iter().map(|(p, _)| *p).collect();
    let test_paths: Vec<&str> = tests.iter().map(|(p, _)| *p).collect();
    let gold = if code_paths.is_empty() {
        String::new()
    } else {
        repo.diff(base, &head, &code_paths)
    };
    let test = if test_paths.is_empty() {
        String::new()
    } else {
        repo.diff(base, &head, &test_paths)
    };
    repo.checkout("main");
    (gold, test)
}

/// Merges `pr-<number>` of `repo` into `main` and records the events of a merged pull request
/// that fixes an issue opened the same day.
fn merged(repo: &WorkRepo, repo_id: u64, number: u64, base: &str, events: &mut Events) {
    let head = repo.rev(&format!("pr-{number}"));
    repo.merge("main", &format!("pr-{number}"), number);
    let issue = 100 + number;
    let (opened, closed) = (
        format!("2017-03-{number:02}T09:00:00Z"),
        format!("2017-03-{number:02}T15:00:00Z"),
    );
    events.issue(
        &repo.name,
        repo_id,
        issue,
        &format!("Task {number} of {} is wrong", repo.name),
        "What it does and what it should do.",
        &opened,
    );
    let body = format!("Fixes #{issue}");
    let pr = Pr {
        repo: &repo.name,
        repo_id,
        number,
        title: "Fix it",
        body: Some(&body),
        login: "dev",
        base: ("main", base),
        head: &head,
    };
    events.pr(&pr, "opened", false, &opened);
    events.pr(&pr, "closed", true, &closed);
}

/// Builds the fixture under `root` (`root/repos`, `root/events`, `root/tasks.jsonl`,
/// `root/slow.jsonl`).
pub fn build(root: &Path) -> Fixture {
    let mut events = Events::default();
    let mut rows = Vec::new();
    let mut expected = Vec::new();
    let id = |repo: &str, n: u64| format!("{}-{n}", repo.replace('/', "__"));

    // calc: pyproject with a test extra.
    let calc = WorkRepo::new(root, "fixture/calc");
    let base = calc.commit(
        "main",
        &[
            ("pyproject.toml", s(CALC_PYPROJECT)),
            ("calc/__init__.py", s(CALC_BUGGY)),
            ("calc/dice.py", s("def roll():\n    return 0.25\n")),
            ("tests/test_calc.py", s(CALC_TESTS)),
            ("README.md", s("calc\n")),
        ],
        "calc",
    );
    let fixed_add = CALC_BUGGY.replace("        return a - b\n", "        return a + b\n");
    let new_test =
        format!("{CALC_TESTS}\n\ndef test_add_negative():\n    assert add(2, -3) == -1\n");
    let (gold, test) = pull(
        &calc,
        1,
        &base,
        &[("calc/__init__.py", s(&fixed_add))],
        &[("tests/test_calc.py", s(&new_test))],
    );
    rows.push(row(&calc, 1, &base, &gold, &test));
    expected.push((
        id(&calc.name, 1),
        Expected::Kept {
            fail_to_pass: vec!["tests/test_calc.py::test_add_negative".into()],
            pass_to_pass: vec![
                "tests/test_calc.py::test_add_positive".into(),
                "tests/test_calc.py::test_mul".into(),
            ],
        },
    ));
    let test_patch_one = test.clone();

    // 2: the gold patch leaves `sub` broken.
    let doc = CALC_BUGGY.replace(
        "def mul(a, b):\n",
        "def mul(a, b):\n    \"\"\"a times b\"\"\"\n",
    );
    let (gold, test) = pull(
        &calc,
        2,
        &base,
        &[("calc/__init__.py", s(&doc))],
        &[(
            "tests/test_sub.py",
            s("from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"),
        )],
    );
    rows.push(row(&calc, 2, &base, &gold, &test));
    expected.push((id(&calc.name, 2), Expected::Dropped("gold_fails")));
    let gold_doc = gold.clone();

    // 3: a test patch written against other content.
    let stale = test_patch_one.replace(" def test_mul():", " def test_mull():");
    assert_ne!(stale, test_patch_one);
    rows.push(row(&calc, 3, &base, &gold_doc, &stale));
    expected.push((id(&calc.name, 3), Expected::Dropped("test_patch_failed")));

    // 4: no test changes.
    rows.push(row(&calc, 4, &base, &gold_doc, ""));
    expected.push((id(&calc.name, 4), Expected::Dropped("no_test_files")));

    // 5: the new test file does not even import.
    let (gold, test) = pull(
        &calc,
        5,
        &base,
        &[("calc/__init__.py", s(&doc))],
        &[("tests/test_broken.py", s("def test_x(:\n    pass\n"))],
    );
    rows.push(row(&calc, 5, &base, &gold, &test));
    expected.push((id(&calc.name, 5), Expected::Dropped("tests_not_collected")));

    // 6: the new test passes before the fix.
    let (gold, test) = pull(
        &calc,
        6,
        &base,
        &[("calc/__init__.py", s(&doc))],
        &[(
            "tests/test_zero.py",
            s("from calc import mul\n\n\ndef test_mul_zero():\n    assert mul(7, 0) == 0\n"),
        )],
    );
    rows.push(row(&calc, 6, &base, &gold, &test));
    expected.push((id(&calc.name, 6), Expected::Dropped("no_fail_to_pass")));

    // 7: a gold patch written against other content.
    let stale_gold = gold_doc.replace(" def mul(a, b):", " def mul(x, y):");
    assert_ne!(stale_gold, gold_doc);
    rows.push(row(&calc, 7, &base, &stale_gold, &test_patch_one));
    expected.push((id(&calc.name, 7), Expected::Dropped("gold_apply_failed")));

    // 8: the new tests pass before the fix, and after it each passes at random: whatever the
    // draws, some test differs between the two runs after (all 24 agreeing: 2^-24), so no
    // test fails before and passes after and the flaky ones are why.
    let (gold, test) = pull(
        &calc,
        8,
        &base,
        &[(
            "calc/dice.py",
            s("import random\n\n\ndef roll():\n    return random.random()\n"),
        )],
        &[(
            "tests/test_dice.py",
            s(
                "import pytest\n\nfrom calc.dice import roll\n\n\n@pytest.mark.parametrize(\"i\", range(24))\ndef test_roll_is_low(i):\n    assert roll() < 0.5\n",
            ),
        )],
    );
    rows.push(row(&calc, 8, &base, &gold, &test));
    expected.push((id(&calc.name, 8), Expected::Dropped("flaky")));

    // 9: a test that sleeps past any short limit.
    let (gold, test) = pull(
        &calc,
        9,
        &base,
        &[("calc/__init__.py", s(&doc))],
        &[(
            "tests/test_slow.py",
            s("import time\n\n\ndef test_slow():\n    time.sleep(3600)\n"),
        )],
    );
    let slow_row = row(&calc, 9, &base, &gold, &test);
    merged(&calc, 9001, 1, &base, &mut events);
    calc.mirror(root, &[], &[]);

    // words: setup.cfg, and a test dependency only in requirements/tests.txt.
    let words = WorkRepo::new(root, "fixture/words");
    let base = words.commit(
        "main",
        &[
            (
                "setup.cfg",
                s("[metadata]\nname = words\nversion = 0.1.0\n\n[options]\npackages = words\npython_requires = >=3.8, <3.12\n\n[tool:pytest]\ntestpaths = tests\n"),
            ),
            ("setup.py", s("from setuptools import setup\n\nsetup()\n")),
            ("requirements/tests.txt", s("-r base.txt\npytest\n")),
            ("requirements/base.txt", s("six\n")),
            ("words/__init__.py", s("def shout(text):\n    return text.upper() + \"!\"\n")),
            (
                "tests/test_words.py",
                s("from words import shout\n\n\ndef test_shout():\n    assert shout(\"hi\") == \"HI!\"\n"),
            ),
        ],
        "words",
    );
    let (gold, test) = pull(
        &words,
        1,
        &base,
        &[(
            "words/__init__.py",
            s(
                "import six\n\n\ndef shout(text):\n    return six.ensure_text(text).upper() + \"!\"\n",
            ),
        )],
        &[(
            "tests/test_words.py",
            s(
                "import six\n\nfrom words import shout\n\n\ndef test_shout():\n    assert shout(\"hi\") == \"HI!\"\n\n\ndef test_shout_bytes():\n    assert shout(six.b(\"hi\")) == \"HI!\"\n",
            ),
        )],
    );
    rows.push(row(&words, 1, &base, &gold, &test));
    merged(&words, 9002, 1, &base, &mut events);
    expected.push((
        id(&words.name, 1),
        Expected::Kept {
            fail_to_pass: vec!["tests/test_words.py::test_shout_bytes".into()],
            pass_to_pass: vec!["tests/test_words.py::test_shout".into()],
        },
    ));
    words.mirror(root, &[], &[]);

    // modern: needs Python 3.13; the test's dependency is only in a PEP 735 group that another
    // group includes.
    let modern = WorkRepo::new(root, "fixture/modern");
    let base = modern.commit(
        "main",
        &[
            (
                "pyproject.toml",
                s("[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"modern\"\nversion = \"0.1.0\"\nrequires-python = \">=3.13\"\n\n[dependency-groups]\nsupport = [\"tomli-w\"]\ntest = [\"pytest\", {include-group = \"support\"}]\n\n[tool.setuptools]\npackages = [\"modern\"]\n"),
            ),
            (
                "modern/__init__.py",
                s("import copy\nfrom dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Point:\n    x: int\n    y: int\n\n\ndef moved(p, dx):\n    return copy.replace(p, x=p.x)\n"),
            ),
            (
                "tests/test_modern.py",
                s("from modern import Point, moved\n\n\ndef test_still():\n    assert moved(Point(1, 2), 0) == Point(1, 2)\n"),
            ),
        ],
        "modern",
    );
    let (gold, test) = pull(
        &modern,
        1,
        &base,
        &[(
            "modern/__init__.py",
            s(
                "import copy\nfrom dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Point:\n    x: int\n    y: int\n\n\ndef moved(p, dx):\n    return copy.replace(p, x=p.x + dx)\n",
            ),
        )],
        &[(
            "tests/test_modern.py",
            s(
                "import tomli_w\n\nfrom modern import Point, moved\n\n\ndef test_still():\n    assert moved(Point(1, 2), 0) == Point(1, 2)\n\n\ndef test_moved():\n    p = moved(Point(1, 2), 3)\n    assert tomli_w.dumps({\"x\": p.x}) == \"x = 4\\n\"\n",
            ),
        )],
    );
    rows.push(row(&modern, 1, &base, &gold, &test));
    merged(&modern, 9003, 1, &base, &mut events);
    expected.push((
        id(&modern.name, 1),
        Expected::Kept {
            fail_to_pass: vec!["tests/test_modern.py::test_moved".into()],
            pass_to_pass: vec!["tests/test_modern.py::test_still".into()],
        },
    ));
    modern.mirror(root, &[], &[]);

    // broken: a dependency PyPI does not have.
    let broken = WorkRepo::new(root, "fixture/broken");
    let base = broken.commit(
        "main",
        &[
            (
                "pyproject.toml",
                s("[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"broken\"\nversion = \"0.1.0\"\ndependencies = [\"swerve-fixture-no-such-distribution==0.0.1\"]\n\n[tool.setuptools]\npackages = [\"broken\"]\n\n[tool.pytest.ini_options]\n"),
            ),
            ("broken/__init__.py", s("VALUE = 1\n")),
        ],
        "broken",
    );
    let (gold, test) = pull(
        &broken,
        1,
        &base,
        &[("broken/__init__.py", s("VALUE = 2\n"))],
        &[(
            "tests/test_value.py",
            s("from broken import VALUE\n\n\ndef test_value():\n    assert VALUE == 2\n"),
        )],
    );
    rows.push(row(&broken, 1, &base, &gold, &test));
    expected.push((id(&broken.name, 1), Expected::Dropped("install_failed")));
    broken.mirror(root, &[], &[]);

    // plain: no packaging file.
    let plain = WorkRepo::new(root, "fixture/plain");
    let base = plain.commit("main", &[("plain.py", s("X = 1\n"))], "plain");
    let (gold, test) = pull(
        &plain,
        1,
        &base,
        &[("plain.py", s("X = 2\n"))],
        &[(
            "test_plain.py",
            s("import plain\n\n\ndef test_x():\n    assert plain.X == 2\n"),
        )],
    );
    rows.push(row(&plain, 1, &base, &gold, &test));
    expected.push((id(&plain.name, 1), Expected::Dropped("no_recipe")));
    plain.mirror(root, &[], &[]);

    let tasks = root.join("tasks.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&tasks, text).expect("write tasks.jsonl");
    events.write(&root.join("events"));
    let slow = root.join("slow.jsonl");
    std::fs::write(&slow, format!("{slow_row}\n")).expect("write slow.jsonl");
    Fixture {
        repos: root.join("repos"),
        tasks,
        expected,
        events: root.join("events"),
        slow,
    }
}
