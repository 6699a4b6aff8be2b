//! Jest-style output: `parse_log_jest`, `parse_log_jest_json`, `parse_log_vitest`,
//! `parse_log_carbon` (also registered as `parse_log_react_pdf`, and lighthouse's Jest branch),
//! `parse_log_grommet`, `parse_log_calypso` and the per-instance `parse_log_immutable_js`.

use std::sync::LazyLock;

use regex::Regex;

use super::SuiteStack;
use crate::error::{ParseError, PyException};
use crate::parser::LogContext;
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static JEST: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$"));
static JEST_JSON: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\[(PASSED|FAILED)\]\s(.+)$"));
static VITEST: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$"));
/// `parse_log_carbon`'s patterns, tried in this order on each line; the first that matches
/// gives the name (group 1) and the status.
static CARBON: LazyLock<[(Regex, TestStatus); 8]> = LazyLock::new(|| {
    let passed = TestStatus::Passed;
    let failed = TestStatus::Failed;
    [
        (pyre::compile(r"^PASS\s(.*)\s\([\d\.]+ms\)"), passed),
        (pyre::compile(r"^PASS\s(.*)\s\([\d\.]+\ss\)"), passed),
        (pyre::compile(r"^PASS\s(.*)\s\([\d\.]+s\)"), passed),
        (pyre::compile(r"^PASS\s(.*)"), passed),
        (pyre::compile(r"^FAIL\s(.*)\s\([\d\.]+ms\)"), failed),
        (pyre::compile(r"^FAIL\s(.*)\s\([\d\.]+\ss\)"), failed),
        (pyre::compile(r"^FAIL\s(.*)\s\([\d\.]+s\)"), failed),
        (pyre::compile(r"^FAIL\s(.*)"), failed),
    ]
});
static GROMMET_FAIL: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"(?m)^FAIL\s(.*)"));
static GROMMET_PASS: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"(?m)^PASS\s(.*)"));
static GROMMET_TIMING: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"\s\([\d\.]+\s?(?:ms|s)\)$"));
static MS: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\(\d+ms\)"));
static CALYPSO_PASS_TIMED: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\s+✓\s(.*)\(\d+ms\)$"));
static CALYPSO_PASS: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^\s+✓\s(.*)"));
static CALYPSO_FAIL_TIMED: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\s+✕\s(.*)\(\d+ms\)$"));
static CALYPSO_FAIL: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^\s+✕\s(.*)"));

/// `parse_log_jest` (`--verbose`): stripped lines starting with `✓` (passed), `✕` (failed) or
/// `○` (skipped, also `○ skipped name` and `todo`), one whitespace character, then the name,
/// without an optional trailing ` (12 ms)` and stripped. Describe blocks are not part of the
/// name, so equal test names in different blocks collide (the last one wins).
pub(crate) fn parse_jest(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(caps) = JEST.captures(pystr::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "✓" => TestStatus::Passed,
            "✕" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        map.insert(pystr::strip(&caps[2]), status);
    }
    map
}

/// `parse_log_jest_json`: Jest's `--json` report turned into `[PASSED] full name` / `[FAILED]
/// full name` lines by the eval script's jq filter; stripped lines, the name after one
/// whitespace character.
pub(crate) fn parse_jest_json(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &JEST_JSON, (2, 1), |word| match word {
        "PASSED" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_vitest` (`--reporter=verbose`): stripped lines starting with `✓` (passed), `×`
/// (failed) or `↓` (skipped), one whitespace character, then the name without an optional
/// trailing ` 12ms` or ` [skipped]`. The duration is `\d+\s*m?s?`, so a name ending in a space
/// and a number loses the number (`✓ adds 2` is `adds`). The name is not stripped.
pub(crate) fn parse_vitest(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &VITEST, (2, 1), |mark| match mark {
        "✓" => Some(TestStatus::Passed),
        "×" => Some(TestStatus::Failed),
        _ => Some(TestStatus::Skipped),
    })
}

/// `parse_log_carbon` (and `parse_log_react_pdf`, the same code): Jest's per-file `PASS path
/// (1.2 s)` / `FAIL path` lines, raw (an indented or coloured line does not count). The first
/// of eight patterns that matches wins: with a ` (N ms)`, ` (N s)` or ` (Ns)` tail the name is
/// the text before the last such tail; otherwise everything after `PASS`/`FAIL` and one
/// whitespace character. Individual tests are not read.
pub(crate) fn parse_carbon(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        for (pattern, status) in CARBON.iter() {
            if let Some(caps) = pattern.captures(line) {
                map.insert(caps.get(1).map_or("", |m| m.as_str()), *status);
                break;
            }
        }
    }
    map
}

/// `parse_log_grommet`: every `FAIL path` line of the log first (a `FAIL`/`PASS` at a line
/// start, one whitespace character — a newline too — then the rest of the line), then every
/// `PASS path` line, each stripped and without a trailing ` (1.2 s)`-style timing. So a file
/// both failing and passing ends `PASSED`, in its `FAIL` line's place.
pub(crate) fn parse_grommet(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for (pattern, status) in [
        (&*GROMMET_FAIL, TestStatus::Failed),
        (&*GROMMET_PASS, TestStatus::Passed),
    ] {
        for caps in pattern.captures_iter(log) {
            let name = pystr::strip(caps.get(1).map_or("", |m| m.as_str()));
            map.insert(GROMMET_TIMING.replace_all(name, ""), status);
        }
    }
    map
}

/// The name of a calypso result line: `re.match(pattern, line).group(1)`, which raises
/// `AttributeError` when the pattern does not match (a result mark without indentation, or
/// without a whitespace character after it, or a `(12ms)` that does not end the line).
fn calypso_name<'l>(line: &'l str, timed: &Regex, plain: &Regex) -> Result<&'l str, ParseError> {
    let pattern = if MS.is_match(line) { timed } else { plain };
    pattern
        .captures(line)
        .and_then(|caps| caps.get(1))
        .map(|m| m.as_str())
        .ok_or_else(|| {
            ParseError::new(
                PyException::AttributeError,
                format!("calypso result line {line:?} does not match its pattern"),
            )
        })
}

/// `parse_log_calypso`: the log is cut at every ` ./node_modules/.bin/jest ` and each piece
/// after the first is read line by line until a line starting with `Test Suites` or `  ● `.
/// A stripped line starting with `✓` / `✕` is passed / failed; its name is the text after the
/// mark and one whitespace character, without a line-ending `(12ms)` when the line has one;
/// the key is `" - ".join([" - ".join(suites), name]).strip()`, so a test outside any suite
/// gets the key `- name`. Any other indented line adjusts the describe-block stack
/// ([`SuiteStack`]), which carries over from one piece to the next. A result line its pattern
/// does not fit raises `AttributeError`.
pub(crate) fn parse_calypso(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    let mut suites = SuiteStack::default();
    for piece in log.split(" ./node_modules/.bin/jest ").skip(1) {
        for line in piece.split('\n') {
            if line.starts_with("Test Suites") || line.starts_with("  ● ") {
                break;
            }
            let stripped = pystr::strip(line);
            let (name, status) = if stripped.starts_with('✓') {
                let name = calypso_name(line, &CALYPSO_PASS_TIMED, &CALYPSO_PASS)?;
                (name, TestStatus::Passed)
            } else if stripped.starts_with('✕') {
                let name = calypso_name(line, &CALYPSO_FAIL_TIMED, &CALYPSO_FAIL)?;
                (name, TestStatus::Failed)
            } else {
                suites.adjust(line);
                continue;
            };
            let key = format!("{} - {name}", suites.joined());
            map.insert(pystr::strip(&key), status);
        }
    }
    Ok(map)
}

/// `parse_log_immutable_js`: by the last `-`-separated field of the instance id, `2006` is read
/// with [`parse_jest`] and `2005` with [`parse_jest_json`]; any other instance raises
/// `ValueError`.
pub(crate) fn parse_immutable_js(log: &str, ctx: &LogContext) -> Result<StatusMap, ParseError> {
    match ctx.instance_id.rsplit('-').next() {
        Some("2006") => Ok(parse_jest(log)),
        Some("2005") => Ok(parse_jest_json(log)),
        _ => Err(ParseError::new(
            PyException::ValueError,
            format!("unknown immutable-js instance id `{}`", ctx.instance_id),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::parser::check_parser as check;
    use crate::parser::{LogContext, Parser};

    #[test]
    fn jest_verbose_lines() {
        check(
            Parser::Jest,
            "PASS src/a.test.js\n  math\n    ✓ adds (3 ms)\n    ✕ divides [by zero] (12 ms)\n    ○ skipped later\n    ✓ adds\n    ✓x\n",
            &[
                ("adds", "PASSED"),
                ("divides [by zero]", "FAILED"),
                ("skipped later", "SKIPPED"),
            ],
        );
    }

    #[test]
    fn jest_json_and_vitest_lines() {
        check(
            Parser::JestJson,
            "[PASSED] a b > c\n  [FAILED]  d\n[SKIPPED] e\n",
            &[("a b > c", "PASSED"), (" d", "FAILED")],
        );
        check(
            Parser::Vitest,
            " ✓ src/a.test.ts > adds 2ms\n × src/a.test.ts > breaks 15 ms\n ↓ src/a.test.ts > later [skipped]\n ✓ adds 2\n",
            &[
                ("src/a.test.ts > adds", "PASSED"),
                ("src/a.test.ts > breaks", "FAILED"),
                ("src/a.test.ts > later", "SKIPPED"),
                ("adds", "PASSED"),
            ],
        );
    }

    #[test]
    fn carbon_and_grommet_files() {
        check(
            Parser::Carbon,
            "PASS src/a.test.js (1.2 s)\nFAIL src/b.test.js (12ms)\nPASS src/c.test.js\n  PASS indented\nFAIL src/d (x) (3s)\n",
            &[
                ("src/a.test.js", "PASSED"),
                ("src/b.test.js", "FAILED"),
                ("src/c.test.js", "PASSED"),
                ("src/d (x)", "FAILED"),
            ],
        );
        check(
            Parser::Grommet,
            "PASS src/a.js (5.1 s)\nFAIL src/b.js\nPASS src/b.js\n",
            &[("src/b.js", "PASSED"), ("src/a.js", "PASSED")],
        );
    }

    #[test]
    fn calypso_suites_and_keys() {
        check(
            Parser::Calypso,
            "+ yarn ./node_modules/.bin/jest client\n  ✓ top (3ms)\n  block\n    ✓ inner (1ms)\n    nested\n      ✕ deep\n  other\n    ✓ x\nTest Suites: 1 failed\n    ✓ after the summary\n",
            &[
                ("- top", "PASSED"),
                ("block - inner", "PASSED"),
                ("block - nested - deep", "FAILED"),
                ("other - x", "PASSED"),
            ],
        );
        let err = Parser::Calypso
            .try_parse(
                " ./node_modules/.bin/jest \n✓ unindented\n",
                &LogContext::default(),
            )
            .unwrap_err();
        assert_eq!(err.exception.as_str(), "AttributeError");
    }

    #[test]
    fn immutable_js_dispatches_on_the_instance() {
        let ctx = |id: &str| LogContext {
            instance_id: id.to_owned(),
            ..LogContext::default()
        };
        let log = "✓ a\n[FAILED] b\n";
        let parsed = |id: &str| {
            Parser::ImmutableJs
                .try_parse(log, &ctx(id))
                .map(|map| map.iter().map(|(k, _)| k.to_owned()).collect::<Vec<_>>())
                .map_err(|err| err.exception.as_str())
        };
        assert_eq!(
            parsed("immutable-js__immutable-js-2006"),
            Ok(vec!["a".to_owned()])
        );
        assert_eq!(
            parsed("immutable-js__immutable-js-2005"),
            Ok(vec!["b".to_owned()])
        );
        assert_eq!(parsed("immutable-js__immutable-js-1"), Err("ValueError"));
    }
}
