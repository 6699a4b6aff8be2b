//! Dart's `test` runner: the JSON reporter's event stream and the two compact text reporters.

use std::sync::LazyLock;

use super::{Pattern, group, set_default, splitlines};
use crate::error::{ParseError, PyException};
use crate::pyjson::{self, Json};
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// A JSON value as a Python dict key: equal keys are those Python's `==` (and hash) make
/// equal. JSON `true`/`false` are the integers 1 and 0, and a float with an integral value
/// equals that integer. `NaN` equals `NaN`: `json` hands out one shared NaN object, and a dict
/// lookup tries identity before `==`.
#[derive(Debug)]
enum Key {
    Str(String),
    /// An integral number, as canonical decimal text (sign, no leading zeros).
    Int(String),
    /// A finite non-integral float, by its bits.
    Float(u64),
    /// `inf` (`true`) or `-inf`.
    Infinite(bool),
    NaN,
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        match (self, other) {
            (Key::Str(a), Key::Str(b)) | (Key::Int(a), Key::Int(b)) => a == b,
            (Key::Float(a), Key::Float(b)) => a == b,
            (Key::Infinite(a), Key::Infinite(b)) => a == b,
            (Key::NaN, Key::NaN) => true,
            _ => false,
        }
    }
}

/// The exact decimal value of an integral, finite `f64`.
fn integral_float_text(value: f64) -> String {
    if value.abs() < 1e38 {
        #[allow(clippy::cast_possible_truncation)]
        return (value as i128).to_string();
    }
    // mantissa * 2^exponent, written out by repeated doubling of little-endian decimal digits.
    let bits = value.to_bits();
    let exponent = ((bits >> 52) & 0x7FF) as i32 - 1075;
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    let mut digits: Vec<u8> = mantissa
        .to_string()
        .bytes()
        .rev()
        .map(|b| b - b'0')
        .collect();
    for _ in 0..exponent.max(0) {
        let mut carry = 0;
        for digit in &mut digits {
            let doubled = *digit * 2 + carry;
            *digit = doubled % 10;
            carry = doubled / 10;
        }
        if carry > 0 {
            digits.push(carry);
        }
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let text: String = digits.iter().rev().map(|d| char::from(b'0' + d)).collect();
    format!("{sign}{text}")
}

/// Whether a JSON number literal is written as a float (`.`, an exponent) rather than an int.
fn is_float_literal(literal: &str) -> bool {
    literal.contains(['.', 'e', 'E'])
}

/// The dict key a JSON value makes: `Ok(None)` for `null` (Python's `None`, which upstream
/// tests for), `Err` for the unhashable list and dict.
fn key_of(value: &Json) -> Result<Option<Key>, ParseError> {
    Ok(Some(match value {
        Json::Null => return Ok(None),
        Json::Bool(flag) => Key::Int(if *flag { "1" } else { "0" }.to_owned()),
        Json::String { value, .. } => Key::Str(value.clone()),
        Json::Number(literal) => match literal.as_str() {
            "NaN" => Key::NaN,
            "Infinity" => Key::Infinite(true),
            "-Infinity" => Key::Infinite(false),
            _ if is_float_literal(literal) => {
                let float: f64 = literal.parse().unwrap_or(f64::NAN);
                if float.is_infinite() {
                    Key::Infinite(float > 0.0)
                } else if float.fract() == 0.0 {
                    Key::Int(integral_float_text(float))
                } else {
                    Key::Float(float.to_bits())
                }
            }
            _ => {
                let (sign, digits) = match literal.strip_prefix('-') {
                    Some(digits) => ("-", digits),
                    None => ("", literal.as_str()),
                };
                let digits = digits.trim_start_matches('0');
                if digits.is_empty() {
                    Key::Int("0".to_owned())
                } else {
                    Key::Int(format!("{sign}{digits}"))
                }
            }
        },
        Json::Array(_) | Json::Object(_) => {
            return Err(ParseError::new(
                PyException::TypeError,
                "a test id is a list or an object (unhashable)",
            ));
        }
    }))
}

/// Python's truthiness of a JSON value.
fn truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(flag) => *flag,
        Json::Number(literal) => match literal.as_str() {
            "NaN" | "Infinity" | "-Infinity" => true,
            _ if is_float_literal(literal) => literal.parse::<f64>().is_ok_and(|f| f != 0.0),
            _ => literal.chars().any(|c| matches!(c, '1'..='9')),
        },
        Json::String { value, .. } => !value.is_empty(),
        Json::Array(items) => !items.is_empty(),
        Json::Object(entries) => !entries.is_empty(),
    }
}

/// Whether `value` is the string `text`.
fn is_str(value: Option<&Json>, text: &str) -> bool {
    matches!(value, Some(Json::String { value, .. }) if value == text)
}

/// The JSON objects of the log: each stripped, non-blank line read with `json.loads` (lines
/// that are not JSON are skipped; one nested too deeply raises `RecursionError`); an object is
/// an event, and so is each object inside a top-level array.
fn dart_events(log: &str) -> Result<Vec<Json>, ParseError> {
    let mut events = Vec::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        match pyjson::loads(line) {
            Ok(event @ Json::Object(_)) => events.push(event),
            Ok(Json::Array(items)) => events.extend(
                items
                    .into_iter()
                    .filter(|item| matches!(item, Json::Object(_))),
            ),
            Ok(_) => {}
            Err(err) if err.what == "nested too deeply" => {
                return Err(ParseError::new(PyException::RecursionError, err.what));
            }
            Err(_) => {}
        }
    }
    Ok(events)
}

/// A `testStart` event: remembers `test.name` under `test.id`, unless `test` is not an object,
/// the id is missing or `null`, the name is falsy, or it starts with `loading `. A truthy name
/// that is not a string raises `AttributeError`; a list or object id raises `TypeError`.
fn dart_start(event: &Json, names: &mut Vec<(Key, String)>) -> Result<(), ParseError> {
    let Some(test @ Json::Object(_)) = event.get("test") else {
        return Ok(());
    };
    let Some(id) = test.get("id").filter(|id| **id != Json::Null) else {
        return Ok(());
    };
    let Some(name) = test.get("name").filter(|name| truthy(name)) else {
        return Ok(());
    };
    let Json::String { value: name, .. } = name else {
        return Err(ParseError::new(
            PyException::AttributeError,
            "a test name is not a string",
        ));
    };
    if name.starts_with("loading ") {
        return Ok(());
    }
    let Some(key) = key_of(id)? else {
        return Ok(());
    };
    match names.iter_mut().find(|(known, _)| *known == key) {
        Some((_, known_name)) => known_name.clone_from(name),
        None => names.push((key, name.clone())),
    }
    Ok(())
}

/// A `testDone` event: the remembered name of `testID` gets `PASSED`, `FAILED` or `ERROR` for a
/// `result` of `success`, `failure` or `error`, else `SKIPPED` when `skipped` is truthy. Events
/// without a `testID` (or with `null`), with a truthy `hidden`, or for an unknown id are
/// ignored; a list or object `testID` raises `TypeError`.
fn dart_done(
    event: &Json,
    names: &[(Key, String)],
    results: &mut StatusMap,
) -> Result<(), ParseError> {
    let Some(id) = event.get("testID").filter(|id| **id != Json::Null) else {
        return Ok(());
    };
    if event.get("hidden").is_some_and(truthy) {
        return Ok(());
    }
    let Some(key) = key_of(id)? else {
        return Ok(());
    };
    let Some((_, name)) = names.iter().find(|(known, _)| *known == key) else {
        return Ok(());
    };
    let result = event.get("result");
    let status = if is_str(result, "success") {
        TestStatus::Passed
    } else if is_str(result, "failure") {
        TestStatus::Failed
    } else if is_str(result, "error") {
        TestStatus::Error
    } else if event.get("skipped").is_some_and(truthy) {
        TestStatus::Skipped
    } else {
        return Ok(());
    };
    results.insert(name.as_str(), status);
    Ok(())
}

/// `parse_log_dart`: `dart test --reporter json`. Every event is read in order (see
/// [`dart_events`]); `testStart` events name test ids ([`dart_start`]) and `testDone` events
/// give the named tests their status ([`dart_done`]); later results overwrite.
pub(super) fn parse_log_dart(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut names: Vec<(Key, String)> = Vec::new();
    for event in dart_events(log)? {
        let kind = event.get("type");
        if is_str(kind, "testStart") {
            dart_start(&event, &mut names)?;
        } else if is_str(kind, "testDone") {
            dart_done(&event, &names, &mut results)?;
        }
    }
    Ok(results)
}

static DART_V2_LINE: Pattern = LazyLock::new(|| {
    pyre::compile(r"^\[[\w_]+\]:\s+\d{2}:\d{2}\s+\+(\d+):\s+(/[^:]+\.dart):\s+(.+)$")
});

/// `parse_log_dart_v2`: the compact reporter behind a `[package]:` prefix,
/// `[pkg]: 00:01 +3: /path/x_test.dart: name`. Stripped lines mentioning `loading` (any case)
/// are skipped. Each `(file, name)` is counted; in first-seen order, one seen twice or more is
/// `PASSED` and one seen once is `ERROR`, keyed `file: name`.
pub(super) fn parse_log_dart_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut seen: Vec<(&str, &str, usize)> = Vec::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() || line.to_lowercase().contains("loading") {
            continue;
        }
        let Some(caps) = DART_V2_LINE.captures(line) else {
            continue;
        };
        let (file, name) = (group(&caps, 2), group(&caps, 3));
        match seen.iter_mut().find(|(f, n, _)| *f == file && *n == name) {
            Some((_, _, count)) => *count += 1,
            None => seen.push((file, name, 1)),
        }
    }
    let mut results = StatusMap::new();
    for (file, name, count) in seen {
        let status = if count >= 2 {
            TestStatus::Passed
        } else {
            TestStatus::Error
        };
        results.insert(format!("{file}: {name}"), status);
    }
    Ok(results)
}

static DART_V3_LINE: Pattern = LazyLock::new(|| {
    pyre::compile(r"^\d+:\d+\s+\+\d+(?:\s+-\d+)?:\s+(/[^:]+\.dart):\s+(.+?)(?:\s+\[E\])?$")
});
static DART_V3_LOADING: Pattern = LazyLock::new(|| {
    pyre::compile(r"^\d+:\d+\s+\+\d+\s+-\d+:\s+loading\s+(/[^:]+\.dart)\s+\[E\]$")
});

/// `parse_log_dart_v3`: the compact reporter, `00:02 +88 -1: /path/x_test.dart: name [E]`.
/// Per stripped line: `... loading /path.dart [E]` makes the file `ERROR`; a test line keyed
/// `file: name` is `FAILED` (overwriting) when the line contains `[E]`, and otherwise `PASSED`
/// unless present. (Upstream means to fail lines with a `-N` counter, but looks for ` -` in the
/// text before the line's first `:`, the minutes of the timestamp, so never finds it.)
pub(super) fn parse_log_dart_v3(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = DART_V3_LOADING.captures(line) {
            results.insert(group(&caps, 1), TestStatus::Error);
            continue;
        }
        let Some(caps) = DART_V3_LINE.captures(line) else {
            continue;
        };
        let full_name = format!("{}: {}", group(&caps, 1), pystr::strip(group(&caps, 2)));
        if line.contains("[E]") {
            results.insert(full_name, TestStatus::Failed);
        } else if pystr::before_first(line, ":").contains(" -") {
            set_default(&mut results, &full_name, TestStatus::Failed);
        } else {
            set_default(&mut results, &full_name, TestStatus::Passed);
        }
    }
    Ok(results)
}
