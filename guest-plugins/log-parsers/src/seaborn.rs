//! `parse_log_seaborn` (`pytest --no-header -rA`, plus verbose `test_x PASSED [ 10%]` lines).

use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// `parse_log_seaborn` (v5), per line, after tokenising and skipping lines with fewer than two
/// tokens (v4 crashed on them, PR #611):
/// - starts with `FAILED` → second token `FAILED`;
/// - else contains ` PASSED ` → if the second token is `PASSED`, first token `PASSED`
///   (and nothing else happens to the line, whatever the second token);
/// - else starts with `PASSED` → second token `PASSED`.
///
/// `ERROR`, `SKIPPED` and `XFAIL` lines are ignored.
pub(crate) fn parse_seaborn(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let tokens = pystr::split(line);
        if tokens.len() < 2 {
            continue;
        }
        if line.starts_with(TestStatus::Failed.as_str()) {
            map.insert(tokens[1], TestStatus::Failed);
        } else if line.contains(" PASSED ") {
            if tokens[1] == TestStatus::Passed.as_str() {
                map.insert(tokens[0], TestStatus::Passed);
            }
        } else if line.starts_with(TestStatus::Passed.as_str()) {
            map.insert(tokens[1], TestStatus::Passed);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn seaborn_lines() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Seaborn, log, expect);
        check(
            "PASSED tests/a.py::t1\nFAILED tests/a.py::t2 - boom\n",
            &[("tests/a.py::t1", "PASSED"), ("tests/a.py::t2", "FAILED")],
        );
        check(
            "tests/a.py::t3 PASSED [ 10%]",
            &[("tests/a.py::t3", "PASSED")],
        );
        // ` PASSED ` present but not as the second token: the line is dropped, even though
        // it starts with PASSED.
        check("PASSED x PASSED y", &[]);
        check("PASSED PASSED y", &[("PASSED", "PASSED")]);
        // Bare status lines are skipped in v5.
        check("PASSED\nFAILED\n", &[]);
        check(
            "ERROR tests/a.py::t4\nSKIPPED [1] a.py:1: x\nXFAIL t5\n",
            &[],
        );
        // FAILED keeps ` - ` tails out by taking the second token only.
        check("FAILED t6[a b] - x", &[("t6[a", "FAILED")]);
    }
}
