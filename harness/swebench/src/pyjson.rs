//! Python's `json.dumps`, byte for byte, for everything swerve must write as Python would: the
//! SWE-bench report files (`indent=4`, `ensure_ascii`), the hub rows' test lists (`json.dumps`
//! of a list) and the `tojson` filter of the chat templates `transformers` renders
//! (`ensure_ascii=False`, optional `indent` and `sort_keys`).
//!
//! What Python writes, and so what [`dumps`] writes:
//! - separators `", "` and `": "` on one line; with an indent, one item a line, `,` at line ends,
//!   `": "` after keys, and `[]` / `{}` for empty containers;
//! - strings with `"`, `\`, `\n`, `\r`, `\t`, `\b`, `\f` escaped and other control characters
//!   as `\u00XX` (lower-case hex); with `ensure_ascii` every character outside U+0020–U+007E
//!   (U+007F included) as `\uXXXX`, astral ones as surrogate pairs; without it, U+007F and
//!   everything above as it is;
//! - floats as Python's `repr`: the shortest digits that round-trip, an exponent below 1e-4 and
//!   from 1e16 on (`1e-05`, `1e+16`), and `.0` on integral values (`1.0`);
//! - `sort_keys` ordering keys by code point; without it, keys in the order they come.
//!
//! One difference: serde_json cannot hold a non-finite float, so NaN and the infinities are
//! written `null` where Python writes `NaN` / `Infinity`. Nothing swerve writes holds one.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{CharEscape, Formatter};

/// The arguments of `json.dumps` that change its output; [`Default`] is Python's defaults
/// (`indent=None`, `sort_keys=False`, `ensure_ascii=True`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dumps {
    /// Spaces per level, one item a line; `None` writes everything on one line.
    pub indent: Option<usize>,
    /// Keys sorted by code point at every level.
    pub sort_keys: bool,
    /// Every character outside printable ASCII escaped.
    pub ensure_ascii: bool,
}

impl Default for Dumps {
    fn default() -> Self {
        Dumps {
            indent: None,
            sort_keys: false,
            ensure_ascii: true,
        }
    }
}

impl Dumps {
    /// `json.dumps(value, indent=4)`: how SWE-bench writes its report files.
    pub(crate) const REPORT: Dumps = Dumps {
        indent: Some(4),
        sort_keys: false,
        ensure_ascii: true,
    };
}

/// What Python's `json.dumps` writes for the Python object `value` stands for (maps as dicts,
/// sequences as lists), with `options`. Fails only where serde_json would (a map key that is
/// not a string, number or boolean; a `Serialize` implementation that fails).
pub fn dumps<T: Serialize + ?Sized>(
    value: &T,
    options: Dumps,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, PythonFormatter::new(options));
    if options.sort_keys {
        let mut value = serde_json::to_value(value)?;
        sort_keys(&mut value);
        value.serialize(&mut serializer)?;
    } else {
        value.serialize(&mut serializer)?;
    }
    // Only whole UTF-8 strings and ASCII go into `out`.
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// `json.dumps(value)` with Python's defaults, for values that always serialise (strings, lists
/// of strings, maps with string keys).
pub fn dumps_default<T: Serialize + ?Sized>(value: &T) -> String {
    dumps(value, Dumps::default()).expect("strings, lists and string-keyed maps serialise")
}

/// Python's `repr` of a float, which is what `json.dumps` writes for a finite one.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `Debug` switches to an exponent at the same magnitudes as Python's `repr`
    // (below 1e-4 and from 1e16 on) and keeps `.0` on integral values; only the exponent's
    // form differs (`1e-5` for `1e-05`).
    let text = format!("{x:?}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, mut item) in entries {
                sort_keys(&mut item);
                map.insert(key, item);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// serde_json's writer with Python's separators, indentation, float `repr` and `ensure_ascii`.
struct PythonFormatter {
    options: Dumps,
    level: usize,
    /// Whether the container being written has an item (its closing bracket then goes on a line
    /// of its own when indenting).
    has_value: bool,
}

impl PythonFormatter {
    fn new(options: Dumps) -> Self {
        PythonFormatter {
            options,
            level: 0,
            has_value: false,
        }
    }

    fn open<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        writer.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, writer: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if let (true, Some(indent)) = (self.has_value, self.options.indent) {
            self.newline(writer, indent)?;
        }
        writer.write_all(bracket)
    }

    /// Before an item: the separator, and with an indent the item's own line.
    fn item<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        match self.options.indent {
            Some(indent) => {
                if !first {
                    writer.write_all(b",")?;
                }
                self.newline(writer, indent)
            }
            None if first => Ok(()),
            None => writer.write_all(b", "),
        }
    }

    fn newline<W: ?Sized + Write>(&self, writer: &mut W, indent: usize) -> io::Result<()> {
        writer.write_all(b"\n")?;
        for _ in 0..indent * self.level {
            writer.write_all(b" ")?;
        }
        Ok(())
    }
}

impl Formatter for PythonFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        // A Python float is a double: an f32 is the double it converts to.
        self.write_f64(writer, f64::from(value))
    }

    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(writer, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.open(writer, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.close(writer, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(writer, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    /// serde_json escapes `"`, `\` and U+0000–U+001F itself (through `write_char_escape`, in
    /// Python's forms); everything else arrives here, and with `ensure_ascii` whatever is
    /// outside U+0020–U+007E is escaped.
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.options.ensure_ascii {
            return writer.write_all(fragment.as_bytes());
        }
        let mut plain_from = 0;
        for (at, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[plain_from..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            plain_from = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[plain_from..])
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let text: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => return write!(writer, "\\u{byte:04x}"),
        };
        writer.write_all(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ascii(value: &Value) -> String {
        dumps(value, Dumps::default()).unwrap()
    }

    fn unicode(value: &Value) -> String {
        dumps(
            value,
            Dumps {
                ensure_ascii: false,
                ..Dumps::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn strings_are_escaped_as_python_escapes_them() {
        let check = |input: &str, ascii_out: &str, unicode_out: &str| {
            assert_eq!(ascii(&json!(input)), ascii_out, "{input:?}");
            assert_eq!(unicode(&json!(input)), unicode_out, "{input:?}");
        };
        check("plain text", r#""plain text""#, r#""plain text""#);
        check(
            "quote \" backslash \\ slash /",
            r#""quote \" backslash \\ slash /""#,
            r#""quote \" backslash \\ slash /""#,
        );
        check("\n\r\t\u{8}\u{c}", r#""\n\r\t\b\f""#, r#""\n\r\t\b\f""#);
        check(
            "\u{0}\u{1}\u{1f}",
            r#""\u0000\u0001\u001f""#,
            r#""\u0000\u0001\u001f""#,
        );
        // U+007F is outside ensure_ascii's printable range, and not a control to the other.
        check("\u{7f}", r#""\u007f""#, "\"\u{7f}\"");
        check(
            "caf\u{e9} \u{2014} \u{ffff}",
            r#""caf\u00e9 \u2014 \uffff""#,
            "\"caf\u{e9} \u{2014} \u{ffff}\"",
        );
        check("\u{1F600}", r#""\ud83d\ude00""#, "\"\u{1F600}\"");
    }

    #[test]
    fn layouts_match_python() {
        let value = json!({"b": [1, 2.5, {"x": null}], "a": {}, "c": [], "d": true});
        assert_eq!(
            ascii(&value),
            r#"{"b": [1, 2.5, {"x": null}], "a": {}, "c": [], "d": true}"#
        );
        assert_eq!(
            dumps(&value, Dumps::REPORT).unwrap(),
            "{\n    \"b\": [\n        1,\n        2.5,\n        {\n            \"x\": null\n        }\n    ],\n    \"a\": {},\n    \"c\": [],\n    \"d\": true\n}"
        );
        let sorted = Dumps {
            indent: Some(2),
            sort_keys: true,
            ..Dumps::default()
        };
        assert_eq!(
            dumps(&json!({"b": {"z": 1, "y": 2}, "a": 0}), sorted).unwrap(),
            "{\n  \"a\": 0,\n  \"b\": {\n    \"y\": 2,\n    \"z\": 1\n  }\n}"
        );
        assert_eq!(dumps_default(&["a::b", "c[1]"]), r#"["a::b", "c[1]"]"#);
        assert_eq!(dumps_default::<[&str]>(&[]), "[]");
    }

    #[test]
    fn floats_are_python_reprs() {
        for (x, repr) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e300, "1.5e+300"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (-2.5e-7, "-2.5e-07"),
        ] {
            assert_eq!(float_repr(x), repr);
            assert_eq!(ascii(&json!([x])), format!("[{repr}]"));
        }
        assert_eq!(float_repr(f64::NAN), "NaN");
        assert_eq!(float_repr(f64::NEG_INFINITY), "-Infinity");
    }
}
