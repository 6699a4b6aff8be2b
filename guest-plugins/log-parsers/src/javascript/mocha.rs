//! Mocha-style output: `parse_log_highlightjs`, `parse_log_marked`, `parse_log_eslint`,
//! `parse_log_prismjs`, `parse_log_lighthouse` and `parse_log_p5js`.

use std::sync::LazyLock;

use regex::Regex;

use super::{SuiteStack, ansi_escape};
use crate::error::{ParseError, PyException};
use crate::parser::LogContext;
use crate::pyjson::{self, Json};
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static HIGHLIGHTJS_SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"\n[ \t]*\d+ passing"));
static MS: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\(\d+ms\)"));
static NUMBERED: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"^\d+\)"));
static MARKED: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"^\d+\)\s(.*)"));
static ESLINT: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"(\s{2}\d+\))([\s\S]*?)\s+(?:(.*)Error)"));
static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\s+"));
static LIGHTHOUSE_RUN: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"running\s\d+\stest\sfiles"));
static LIGHTHOUSE_PASSING: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\d+\spassing"));
/// Lighthouse's mocha result patterns, tried in order with `re.match` on the stripped line.
static LIGHTHOUSE_RESULT: LazyLock<[(Regex, TestStatus); 4]> = LazyLock::new(|| {
    [
        (
            pyre::compile_match(r"✔\s(.*)\s\(\d+m+s\)"),
            TestStatus::Passed,
        ),
        (pyre::compile_match(r"✔\s(.*)"), TestStatus::Passed),
        (
            pyre::compile_match(r"\d+\)\s(.*)\s\(\d+m+s\)"),
            TestStatus::Failed,
        ),
        (pyre::compile_match(r"\d+\)\s(.*)"), TestStatus::Failed),
    ]
});
static FULL_TITLE: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r#"(?m)"fullTitle":\s"(.*)",\n"#));
static P5JS_FAIL_HEAD: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"\s*(\d+)\)"));
static P5JS_OPEN_TAG: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"<(\w+)>"));

/// `remove_timing_str`: every `(12ms)` removed, then stripped.
fn without_ms(name: &str) -> String {
    pystr::strip(&MS.replace_all(name, "")).to_owned()
}

/// `parse_log_highlightjs` (mocha's spec reporter): the log is first cut before the first
/// `\n` + spaces/tabs + `N passing` (the summary and failure details). Then per line: a
/// stripped line starting with `✓` or `✔` passes the text after the first such mark; a
/// stripped line starting with `N)` fails the text after the line's first `)`; names lose
/// their `(12ms)` and are stripped, and the key is `suite.name` (or just `name`). Any other
/// non-empty line indented by at least two spaces replaces the suite with itself (stripped),
/// so only the innermost describe block is kept, and unindented lines leave it alone.
pub(crate) fn parse_highlightjs(log: &str) -> StatusMap {
    let log = HIGHLIGHTJS_SUMMARY.splitn(log, 2).next().unwrap_or("");
    let mut map = StatusMap::new();
    let mut suite: Option<&str> = None;
    let key = |suite: Option<&str>, name: String| match suite {
        Some(suite) => format!("{suite}.{name}"),
        None => name,
    };
    for line in log.split('\n') {
        let stripped = pystr::strip(line);
        if let Some(mark) = ['✓', '✔'].into_iter().find(|&m| stripped.starts_with(m)) {
            let after = line.split_once(mark).map_or("", |(_, after)| after);
            map.insert(key(suite, without_ms(after)), TestStatus::Passed);
        } else if NUMBERED.is_match(stripped) {
            let after = line.split_once(')').map_or("", |(_, after)| after);
            map.insert(key(suite, without_ms(after)), TestStatus::Failed);
        } else if line.starts_with("  ") {
            suite = Some(stripped);
        }
    }
    map
}

/// `parse_log_marked` (jasmine): only failures, from raw lines starting with `N)` and one
/// whitespace character; the rest of the line, stripped, is the name.
pub(crate) fn parse_marked(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        if let Some(caps) = MARKED.captures(line) {
            map.insert(pystr::strip(&caps[1]), TestStatus::Failed);
        }
    }
    map
}

/// `parse_log_eslint` (mocha, `--reporter min` style failure list): only failures. Every
/// non-overlapping match of two whitespace characters + `N)`, then the shortest text that is
/// followed by whitespace and a line containing `Error` (the last `Error` of that line), gives
/// a name: that text with whitespace runs (newlines included) collapsed to one space, stripped.
pub(crate) fn parse_eslint(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for caps in ESLINT.captures_iter(log) {
        let text = caps.get(2).map_or("", |m| m.as_str());
        map.insert(
            pystr::strip(&WHITESPACE.replace_all(text, " ")).to_owned(),
            TestStatus::Failed,
        );
    }
    map
}

/// The command whose JSON output prismjs's parser reads.
const PRISM_COMMAND: &str = "./node_modules/.bin/mocha tests/run.js --reporter json";

/// `test["fullTitle"]` for each entry of one of the report's lists, as Python iterates it: a
/// list yields its items, an object its keys, a string its characters, and only objects with a
/// `fullTitle` can be indexed (an empty string, list or object yields nothing).
fn full_titles<'j>(list: &'j Json, field: &str) -> Result<Vec<&'j str>, ParseError> {
    let type_error = |what: &str| {
        Err(ParseError::new(
            PyException::TypeError,
            format!("`{field}`: {what}"),
        ))
    };
    let items: &[Json] = match list {
        Json::Array(items) => items,
        Json::Object(entries) if entries.is_empty() => &[],
        Json::String { value, .. } if value.is_empty() => &[],
        Json::Object(_) | Json::String { .. } => return type_error("entries are strings"),
        Json::Null | Json::Bool(_) | Json::Number(_) => return type_error("not iterable"),
    };
    let mut titles = Vec::with_capacity(items.len());
    for item in items {
        let Json::Object(_) = item else {
            return type_error("an entry is not an object");
        };
        match item.get("fullTitle") {
            Some(Json::String {
                value,
                lone_surrogate: false,
            }) => titles.push(value.as_str()),
            Some(Json::Object(_) | Json::Array(_)) => return type_error("unhashable fullTitle"),
            // A number, boolean, null or lone-surrogate title would be a non-`str` key
            // upstream, which a Rust status map cannot hold; mocha never writes one.
            Some(_) => return type_error("fullTitle is not a string this crate can store"),
            None => {
                return Err(ParseError::new(
                    PyException::KeyError,
                    format!("`{field}` entry without fullTitle"),
                ));
            }
        }
    }
    Ok(titles)
}

/// `parse_log_prismjs`: the log is split at every `./node_modules/.bin/mocha tests/run.js
/// --reporter json`, and each piece after the first yields the JSON between its first `{` and
/// its last `}` (braces re-added; a piece without `{` or `}` is taken whole) read with
/// `json.loads`. Every `failures[].fullTitle` is failed, then every `passes[].fullTitle`
/// passed, piece by piece. Text that is not JSON raises `JSONDecodeError`, a report without
/// `failures` or `passes` `KeyError`, and lists of the wrong shape `TypeError`.
pub(crate) fn parse_prismjs(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    for piece in log.split(PRISM_COMMAND).skip(1) {
        let inner = piece.split_once('{').map_or(piece, |(_, after)| after);
        let inner = inner.rsplit_once('}').map_or(inner, |(before, _)| before);
        let report = pyjson::loads(&format!("{{{inner}}}")).map_err(|err| {
            ParseError::new(
                PyException::JsonDecodeError,
                format!("{} at byte {}", err.what, err.at),
            )
        })?;
        for (field, status) in [
            ("failures", TestStatus::Failed),
            ("passes", TestStatus::Passed),
        ] {
            let Some(list) = report.get(field) else {
                return Err(ParseError::new(
                    PyException::KeyError,
                    format!("report without `{field}`"),
                ));
            };
            for title in full_titles(list, field)? {
                map.insert(title, status);
            }
        }
    }
    Ok(map)
}

/// `parse_log_lighthouse`: by the context's `version`, `9.5`, `10.0` and `10.2` are read as
/// mocha ([`parse_lighthouse_mocha`]); any other version that Python's `float()` reads as at
/// least 3 as Jest ([`super::jest::parse_carbon`]); one it cannot read raises `ValueError`;
/// lower versions (and `nan`) with the legacy mocha JSON reader ([`parse_lighthouse_json`]).
pub(crate) fn parse_lighthouse(log: &str, ctx: &LogContext) -> Result<StatusMap, ParseError> {
    if matches!(ctx.version.as_str(), "9.5" | "10.0" | "10.2") {
        return Ok(parse_lighthouse_mocha(log));
    }
    let Some(version) = pystr::float(&ctx.version) else {
        return Err(ParseError::new(
            PyException::ValueError,
            format!("version `{}` is not a number", ctx.version),
        ));
    };
    if version >= 3.0 {
        Ok(super::jest::parse_carbon(log))
    } else {
        Ok(parse_lighthouse_json(log))
    }
}

/// `parse_log_lighthouse_mocha`: each piece after a `running N test files` line, cut before its
/// first `N passing` and stripped, is read per line with a fresh [`SuiteStack`]: a stripped
/// line starting with `✔` + whitespace passes, `N)` + whitespace fails, the name being the rest
/// without a trailing ` (12ms)`-style duration (the `(…)` must be the line's last one that
/// matches); the key joins the suites and the name with ` - `. Other indented lines adjust the
/// stack.
fn parse_lighthouse_mocha(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for run in LIGHTHOUSE_RUN.split(log).skip(1) {
        let run = pystr::strip(LIGHTHOUSE_PASSING.splitn(run, 2).next().unwrap_or(""));
        let mut suites = SuiteStack::default();
        for line in run.split('\n') {
            let stripped = pystr::strip(line);
            let result = LIGHTHOUSE_RESULT.iter().find_map(|(pattern, status)| {
                let caps = pattern.captures(stripped)?;
                Some((caps.get(1).map_or("", |m| m.as_str()), *status))
            });
            match result {
                Some((name, status)) => map.insert(suites.key(name), status),
                None => suites.adjust(line),
            }
        }
    }
    map
}

/// Lighthouse before 3: after each `./node_modules/.bin/mocha --reporter json`, the
/// `"fullTitle": "…",` lines (the value up to the line's last `",`, escapes left as written)
/// between the last `"passes": [` and the last `]` after it are passed, then those between the
/// last `"failures": [` and the last `],` after it are failed.
fn parse_lighthouse_json(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for piece in log
        .split("./node_modules/.bin/mocha --reporter json")
        .skip(1)
    {
        for (open, close, status) in [
            (r#""passes": ["#, "]", TestStatus::Passed),
            (r#""failures": ["#, "],", TestStatus::Failed),
        ] {
            let region = piece.rsplit_once(open).map_or(piece, |(_, after)| after);
            let region = region
                .rsplit_once(close)
                .map_or(region, |(before, _)| before);
            for caps in FULL_TITLE.captures_iter(region) {
                map.insert(&caps[1], status);
            }
        }
    }
    map
}

/// p5.js's `remove_json_blocks`: drops lines that open (`{` or `[` at the end of the
/// right-stripped line) a block, every line until an unindented `}` / `]` closes it (an
/// indented closer does not), and one-line `{…}` / `[…]`.
fn remove_json_blocks(log: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut in_object = false;
    let mut in_list = false;
    for line in log.split('\n') {
        let stripped = pystr::rstrip(line);
        if stripped.ends_with('{') {
            in_object = true;
        } else if stripped.ends_with('[') {
            in_list = true;
        } else if stripped == "}" && in_object {
            in_object = false;
        } else if stripped == "]" && in_list {
            in_list = false;
        } else if in_object
            || in_list
            || (stripped.starts_with('{') && stripped.ends_with('}'))
            || (stripped.starts_with('[') && stripped.ends_with(']'))
        {
        } else {
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// The leftmost match of upstream's `<(\w+)>[\s\S]*?<\/\1>`: an opening tag whose name is the
/// whole run of word characters between `<` and `>`, up to the first closing tag of that name.
/// Returns (start, end, name).
fn find_xml_block(text: &str) -> Option<(usize, usize, &str)> {
    let mut from = 0;
    while let Some(caps) = P5JS_OPEN_TAG.captures_at(text, from) {
        let (whole, name) = (caps.get(0)?, caps.get(1)?);
        let close = format!("</{}>", name.as_str());
        if let Some(at) = text[whole.end()..].find(&close) {
            return Some((whole.start(), whole.end() + at + close.len(), name.as_str()));
        }
        // No closing tag after this one: the next candidate starts after its `<`.
        from = whole.start() + 1;
    }
    None
}

/// p5.js's `remove_xml_blocks`: repeatedly replaces the leftmost `<tag>…</tag>` block with one
/// `<tag>` for every further `<tag>` inside it, searching again from the start each time.
fn remove_xml_blocks(log: String) -> String {
    let mut text = log;
    while let Some((start, end, name)) = find_xml_block(&text) {
        let open = format!("<{name}>");
        let kept = text[start..end].matches(&open).count().saturating_sub(1);
        text = format!("{}{}{}", &text[..start], open.repeat(kept), &text[end..]);
    }
    text
}

/// The failures of p5.js's log: at the start of a line, optional whitespace (newlines too),
/// `N)`, then the shortest text of at most 1000 characters (newlines included) up to a `:`.
/// Returns the text before the `:` for each non-overlapping such match.
fn p5js_failures(log: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut at = 0;
    while at <= log.len() {
        let line_start = at == 0 || log.as_bytes()[at - 1] == b'\n';
        let next = if line_start {
            P5JS_FAIL_HEAD.find(&log[at..]).and_then(|head| {
                let body_start = at + head.end();
                let colon = log[body_start..]
                    .char_indices()
                    .take(1001)
                    .find(|&(_, c)| c == ':')?
                    .0;
                found.push(&log[body_start..body_start + colon]);
                Some(body_start + colon + 1)
            })
        } else {
            None
        };
        at = match next {
            Some(end) => end,
            None => match log[at..].find('\n') {
                Some(newline) => at + newline + 1,
                None => break,
            },
        };
    }
    found
}

/// `parse_log_p5js` (mocha in a browser, only failures): colour codes removed, then JSON
/// blocks ([`remove_json_blocks`]) and XML-like blocks ([`remove_xml_blocks`]). Every `N)` at a
/// line start up to the first `:` within 1000 characters is a failure when its text's lines
/// are each strictly more indented than the one before (the first after the `)` by at least
/// one); the key is those lines stripped and joined with `:`.
pub(crate) fn parse_p5js(log: &str) -> StatusMap {
    let log = remove_xml_blocks(remove_json_blocks(&ansi_escape(log)));
    let mut map = StatusMap::new();
    for text in p5js_failures(&log) {
        let mut last_indent = 0;
        let indented = text.split('\n').all(|line| {
            let indent = pystr::indent(line);
            let deeper = indent > last_indent;
            last_indent = indent;
            deeper
        });
        if indented {
            let names: Vec<&str> = text.split('\n').map(pystr::strip).collect();
            map.insert(names.join(":"), TestStatus::Failed);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::check_parser as check;
    use crate::parser::{LogContext, Parser};

    #[test]
    fn highlightjs_spec_reporter() {
        check(
            Parser::Highlightjs,
            "top ✓ no suite\n  markup\n    ✓ renders (12ms)\n    1) breaks (3ms)\n      nested\n    ✔ again\n\n  3 passing (1s)\n  1) markup breaks:\n     Error\n",
            // `top ✓ no suite` does not start with the mark; `nested` replaced `markup`.
            &[
                ("markup.renders", "PASSED"),
                ("markup.breaks", "FAILED"),
                ("nested.again", "PASSED"),
            ],
        );
    }

    #[test]
    fn marked_and_eslint_failures() {
        check(
            Parser::Marked,
            "1) Marked should parse\n  2) indented\n3)nospace\n",
            &[("Marked should parse", "FAILED")],
        );
        check(
            Parser::Eslint,
            "  1) rule\n       works on [x]:\n     AssertionError: boom\n  2) other: TypeError here\n",
            // The shortest text before whitespace and an `Error` line: empty for `2) other:`.
            &[("rule works on [x]:", "FAILED"), ("", "FAILED")],
        );
    }

    #[test]
    fn prismjs_json_report() {
        let log = "+ ./node_modules/.bin/mocha tests/run.js --reporter json\n{\"stats\": {}, \"failures\": [{\"fullTitle\": \"a b\"}], \"passes\": [{\"fullTitle\": \"c\"}, {\"fullTitle\": \"a b\"}]}\n";
        check(Parser::Prismjs, log, &[("a b", "PASSED"), ("c", "PASSED")]);
        let raises = |log: &str| {
            Parser::Prismjs
                .try_parse(log, &LogContext::default())
                .unwrap_err()
                .exception
                .as_str()
        };
        let cmd = "./node_modules/.bin/mocha tests/run.js --reporter json";
        assert_eq!(raises(&format!("{cmd} {{ nope }}")), "JSONDecodeError");
        assert_eq!(raises(&format!("{cmd} {{\"passes\": []}}")), "KeyError");
        assert_eq!(
            raises(&format!("{cmd} {{\"failures\": 1, \"passes\": []}}")),
            "TypeError"
        );
        check(Parser::Prismjs, "no command here", &[]);
    }

    #[test]
    fn lighthouse_by_version() {
        let ctx = |version: &str| LogContext {
            version: version.to_owned(),
            ..LogContext::default()
        };
        let mocha = "running 2 test files\n  audit\n    ✔ works (12ms)\n    1) breaks\n3 passing\n";
        let parsed = |log: &str, version: &str| {
            Parser::Lighthouse
                .try_parse(log, &ctx(version))
                .map(|map| {
                    map.iter()
                        .map(|(k, s)| format!("{k}={s}"))
                        .collect::<Vec<_>>()
                })
                .map_err(|err| err.exception.as_str())
        };
        assert_eq!(
            parsed(mocha, "9.5"),
            // The run is stripped first, so `audit` is not indented and never a suite.
            Ok(vec!["works=PASSED".to_owned(), "breaks=FAILED".to_owned()])
        );
        assert_eq!(
            parsed("PASS a.test.js (2 s)\n", " 1_0.0 "),
            Ok(vec!["a.test.js=PASSED".to_owned()])
        );
        assert_eq!(parsed("", "x"), Err("ValueError"));
        let legacy = "./node_modules/.bin/mocha --reporter json\n\"passes\": [\n  \"fullTitle\": \"p\",\n],\n\"failures\": [\n  \"fullTitle\": \"f\",\n],\n";
        assert_eq!(
            parsed(legacy, "2.0"),
            Ok(vec!["p=PASSED".to_owned(), "f=FAILED".to_owned()])
        );
    }

    #[test]
    fn p5js_failures_need_growing_indentation() {
        check(
            Parser::P5js,
            "  1) Suite\n       case one:\n     Error: x\n2)flat\nline: y\n{\n  \"a\": 1\n}\n  3) <b>bold</b> name: z\n",
            // `<b>bold</b>` is removed as an XML block.
            &[("Suite:case one", "FAILED"), ("name", "FAILED")],
        );
    }
}
