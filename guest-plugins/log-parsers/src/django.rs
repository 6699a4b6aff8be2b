//! `parse_log_django`: Django's `runtests.py --verbosity 2` output.
//!
//! Keys are `test_x (module.Class)` or, for a test with a docstring, the docstring's first line:
//! Django prints `test_x (m.C)` on one line and `Docstring first line ... ok` on the next.

use std::sync::LazyLock;

use regex::Regex;

use crate::error::{ParseError, PyException};
use crate::pystr::{self, PY_SPACE};
use crate::status::{StatusMap, TestStatus};

const VERSION_TEST: &str = "--version is equivalent to version";
const PASS_SUFFIXES: [&str; 3] = [" ... ok", " ... OK", " ...  OK"];
/// django__django-7188: a migration line and the test result share one line.
const SITES_MIGRATION_PREFIX: &str = "Applying sites.0002_alter_domain_unique...test_no_migrations";

/// Tests whose `... ok` was pushed to the next line by a long multi-line print. Upstream runs
/// these with `re.MULTILINE` over the parser's whole input; `\s` is CPython's.
static INTERRUPTED_OK: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    let s = PY_SPACE;
    [
        format!(
            r"(?m)^(.*?){s}\.\.\.{s}Testing against Django installed in ((?s:.*?)) silenced\)\.\nok$"
        ),
        format!(r"(?m)^(.*?){s}\.\.\.{s}Internal Server Error: /(.*)/\nok$"),
        format!(r"(?m)^(.*?){s}\.\.\.{s}System check identified no issues \(0 silenced\)\nok$"),
    ]
    .map(|pattern| Regex::new(&pattern).expect("valid regex"))
});

/// `parse_log_django`. Each line is stripped, then, in this order:
/// 1. a line containing `--version is equivalent to version` sets that string to `PASSED`;
/// 2. a line containing ` ... ` remembers the text before the first ` ... ` as `prev_test`;
/// 3. a line ending with ` ... ok`, ` ... OK` or ` ...  OK` sets the text before that suffix
///    to `PASSED` (first matching suffix; the django-7188 line is first cut to the text after
///    its first `...`, and the *cut* line is what the later steps see);
/// 4. ` ... skipped` anywhere → text before it `SKIPPED`;
/// 5. ends with ` ... FAIL` → text before the first ` ... FAIL` `FAILED`;
///    starts with `FAIL:` → the second token `FAILED`;
/// 6. ends with ` ... ERROR` / starts with `ERROR:` likewise with `ERROR`;
/// 7. starts with `ok` while `prev_test` is set → `prev_test` `PASSED`.
///
/// Then every match of the three interrupted-`ok` patterns sets its group 1 to `PASSED`.
///
/// A stripped line that is exactly `FAIL:` or `ERROR:` (or has no second token) raises
/// `IndexError` upstream and aborts grading; here it is skipped.
/// The second whitespace-separated token of a `FAIL:` / `ERROR:` header, which upstream takes
/// with `line.split()[1]`: a header with nothing after it raises `IndexError`.
fn second_token(line: &str) -> Result<&str, ParseError> {
    pystr::split(line).get(1).copied().ok_or_else(|| {
        ParseError::new(PyException::IndexError, format!("no test name in {line:?}"))
    })
}

pub(crate) fn parse_django(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    let mut prev_test: Option<&str> = None;
    for raw in log.split('\n') {
        let mut line = pystr::strip(raw);
        if line.contains(VERSION_TEST) {
            map.insert(VERSION_TEST, TestStatus::Passed);
        }
        if line.contains(" ... ") {
            prev_test = Some(pystr::before_first(line, " ... "));
        }
        if let Some(suffix) = PASS_SUFFIXES.into_iter().find(|s| line.ends_with(s)) {
            if line.starts_with(SITES_MIGRATION_PREFIX) {
                line = pystr::strip(line.split_once("...").map_or(line, |(_, rest)| rest));
            }
            let test = line.rsplit_once(suffix).map_or(line, |(head, _)| head);
            map.insert(test, TestStatus::Passed);
        }
        if line.contains(" ... skipped") {
            map.insert(
                pystr::before_first(line, " ... skipped"),
                TestStatus::Skipped,
            );
        }
        if line.ends_with(" ... FAIL") {
            map.insert(pystr::before_first(line, " ... FAIL"), TestStatus::Failed);
        }
        if line.starts_with("FAIL:") {
            map.insert(second_token(line)?, TestStatus::Failed);
        }
        if line.ends_with(" ... ERROR") {
            map.insert(pystr::before_first(line, " ... ERROR"), TestStatus::Error);
        }
        if line.starts_with("ERROR:") {
            map.insert(second_token(line)?, TestStatus::Error);
        }
        if line.starts_with("ok")
            && let Some(test) = prev_test
        {
            map.insert(test, TestStatus::Passed);
        }
    }
    for pattern in INTERRUPTED_OK.iter() {
        for caps in pattern.captures_iter(log) {
            map.insert(&caps[1], TestStatus::Passed);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn django_lines() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Django, log, expect);
        check(
            "test_a (m.C) ... ok\ntest_b (m.C) ... OK\ntest_c (m.C) ...  OK\n",
            &[
                ("test_a (m.C)", "PASSED"),
                ("test_b (m.C)", "PASSED"),
                ("test_c (m.C)", "PASSED"),
            ],
        );
        // Docstring-named test: the name line has no ` ... `.
        check(
            "test_get (m.C)\nGet can accept pk ... ok\n",
            &[("Get can accept pk", "PASSED")],
        );
        check(
            "test_s (m.C) ... skipped 'no db'\n",
            &[("test_s (m.C)", "SKIPPED")],
        );
        check(
            "test_f (m.C) ... FAIL\nFAIL: test_f (m.C)\n",
            &[("test_f (m.C)", "FAILED"), ("test_f", "FAILED")],
        );
        check(
            "test_e (m.C) ... ERROR\nERROR: test_e (m.C)\n",
            &[("test_e (m.C)", "ERROR"), ("test_e", "ERROR")],
        );
        // `... FAILED` is not ` ... FAIL` at the end; ` ... FAIL` cuts at the first one.
        check("test_x ... FAILED", &[]);
        check("a ... FAIL b ... FAIL", &[("a", "FAILED")]);
        // Output between `...` and `ok`: the next line starting with `ok` passes prev_test.
        check(
            "test_p (m.C) ... some output\nmore output\nok\n",
            &[("test_p (m.C)", "PASSED")],
        );
        check("okay\n", &[]);
        check("t1 ... x\nokay then\n", &[("t1", "PASSED")]);
        // Interleaved output: the key is the whole prefix.
        check(
            "test_a (m.C) ... test_b (m.C) ... ok",
            &[("test_a (m.C) ... test_b (m.C)", "PASSED")],
        );
        // Indentation is stripped; lines are whitespace-stripped the Python way.
        check(
            "   test_i (m.C) ... ok \u{1C}",
            &[("test_i (m.C)", "PASSED")],
        );
        check(
            "test_v ... --version is equivalent to version\n",
            &[("--version is equivalent to version", "PASSED")],
        );
        // Bare `FAIL:` raises upstream; skipped here.
        // `FAIL:` alone raises (upstream's `split()[1]`): `parse` gives the empty map.
        check("test_a (m.C) ... ok\nFAIL:\n", &[]);
        let raised = Parser::Django
            .try_parse("ERROR:\n", &crate::LogContext::default())
            .expect_err("IndexError");
        assert_eq!(raised.exception, crate::PyException::IndexError);
    }

    #[test]
    fn django_7188_migration_line() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Django, log, expect);
        check(
            "Applying sites.0002_alter_domain_unique...test_no_migrations (m.C) ... ok",
            &[("test_no_migrations (m.C)", "PASSED")],
        );
        // The migration progress line itself has no ` ... ok` (no space before `...`).
        check("  Applying sites.0002_alter_domain_unique... OK", &[]);
    }

    #[test]
    fn django_interrupted_ok_patterns() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Django, log, expect);
        check(
            "test_s (m.C) ... System check identified no issues (0 silenced)\nok\n",
            &[("test_s (m.C)", "PASSED")],
        );
        check(
            "test_t (m.C) ... Testing against Django installed in '/testbed/django'\nImporting x\nSystem check identified no issues (0 silenced).\nok\n",
            &[("test_t (m.C)", "PASSED")],
        );
        check(
            "test_u (m.C) ... Internal Server Error: /a/b/\nok\n",
            &[("test_u (m.C)", "PASSED")],
        );
        // The pattern finds the test even when a later ` ... ` line replaced prev_test.
        check(
            "test_t (m.C) ... Testing against Django installed in '/x'\nfoo ... bar\n(0 silenced).\nok\n",
            &[("foo", "PASSED"), ("test_t (m.C)", "PASSED")],
        );
        check("test_w (m.C) ... Internal Server Error: /a/\nfine\n", &[]);
    }
}
