//! `parse_log_sympy`: sympy's own test runner (`bin/test -C --verbose`).

use std::sync::LazyLock;

use regex::Regex;

use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// Traceback headers `____ sympy/x/tests/test_y.py:test_z ____`. Upstream runs `re.findall`
/// without flags; `.` stops at newlines and the groups are greedy. The `regex` crate's
/// leftmost-first semantics give the same matches and groups for this pattern.
static TRACEBACK_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(_*) (.*)\.py:(.*) (_*)").expect("valid regex"));

/// `parse_log_sympy`:
/// 1. every traceback-header match sets `group2 + ".py:" + group3` to `FAILED`;
/// 2. every stripped line starting with `test_` and ending with ` E`, ` F` or ` ok` sets its
///    first token to `ERROR`, `FAILED` or `PASSED`.
///
/// So the last test of a file (`test_x ok    [OK]` / `[FAIL]`), expected failures (`test_x f`)
/// and skips (`test_x s`) are not parsed, and one name in two files collapses into one key.
pub(crate) fn parse_sympy(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for caps in TRACEBACK_HEADER.captures_iter(log) {
        map.insert(format!("{}.py:{}", &caps[2], &caps[3]), TestStatus::Failed);
    }
    for line in log.split('\n') {
        let line = pystr::strip(line);
        if !line.starts_with("test_") {
            continue;
        }
        let name = pystr::split(line)[0];
        // Three independent checks upstream; at most one suffix can match.
        if line.ends_with(" E") {
            map.insert(name, TestStatus::Error);
        }
        if line.ends_with(" F") {
            map.insert(name, TestStatus::Failed);
        }
        if line.ends_with(" ok") {
            map.insert(name, TestStatus::Passed);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn sympy_lines() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Sympy, log, expect);
        check(
            "sympy/a/tests/test_b.py[3] \ntest_one ok\ntest_two F\ntest_three E\ntest_four ok    [FAIL]\n",
            &[
                ("test_one", "PASSED"),
                ("test_two", "FAILED"),
                ("test_three", "ERROR"),
            ],
        );
        // Expected failures and skips are not parsed; indentation is stripped.
        check(
            "test_x f\ntest_y s\n   test_z ok  \n",
            &[("test_z", "PASSED")],
        );
        check("test_Product_is_convergent - Took 10.535 seconds", &[]);
        // Traceback headers come first in the map, before the per-line pass.
        check(
            "test_issue_1 F\n____ sympy/c/tests/test_p.py:test_issue_1 ____\n",
            &[
                ("sympy/c/tests/test_p.py:test_issue_1", "FAILED"),
                ("test_issue_1", "FAILED"),
            ],
        );
        // Greedy groups: the last `.py:` on the line splits, the last ` ` before the
        // trailing underscores ends group 3.
        check("__ a.py:b.py:c d __", &[("a.py:b.py:c d", "FAILED")]);
        check("x sympy/a.py:f ", &[("sympy/a.py:f", "FAILED")]);
        // Same name in two files collapses into one key; the later line wins.
        check("test_a F\ntest_a ok\n", &[("test_a", "PASSED")]);
        check("test_ok", &[]);
    }
}
