//! Python's `json.loads` (strict mode, the C scanner), as much as `parse_log_prismjs` can
//! observe: which texts it accepts, and the values of the objects, arrays and strings it
//! reads back.
//!
//! Python accepts more than JSON: `NaN`, `Infinity` and `-Infinity`, numbers of any size, and
//! `\uD800`-style escapes that leave a lone surrogate in a string. It rejects control
//! characters inside strings, leading zeros (`01` is `0` followed by junk) and anything after
//! the document but the whitespace `[ \t\n\r]`. A repeated object key keeps its first position
//! and its last value. A lone surrogate cannot live in a Rust string, so such strings are kept
//! as [`Json::String`] with `lone_surrogate` set (and U+FFFD in its place).
//!
//! Not reproduced: Python raises `RecursionError` for documents nested about a thousand deep
//! (the exact depth depends on the interpreter's stack); this reader refuses nesting deeper
//! than [`MAX_DEPTH`].

/// The deepest nesting this reader accepts.
pub(crate) const MAX_DEPTH: usize = 900;

/// A decoded JSON value; a number is kept as the literal it was written as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// The literal as written (`-12`, `1.5e3`, `NaN`, `-Infinity`).
    Number(String),
    String {
        value: String,
        /// A `\uD8xx`-style escape without its pair was decoded (Python keeps it as is).
        lone_surrogate: bool,
    },
    Array(Vec<Json>),
    /// Entries in first-key order, each with the last value given for its key.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// `value[key]` on an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Where and why a text is not JSON (Python's message differs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonError {
    pub(crate) at: usize,
    pub(crate) what: &'static str,
}

/// `json.loads(text)`.
pub(crate) fn loads(text: &str) -> Result<Json, JsonError> {
    let mut reader = Reader { text, at: 0 };
    reader.space();
    let value = reader.value(0)?;
    reader.space();
    if reader.at != text.len() {
        return reader.fail("Extra data");
    }
    Ok(value)
}

struct Reader<'t> {
    text: &'t str,
    at: usize,
}

impl<'t> Reader<'t> {
    fn rest(&self) -> &'t str {
        &self.text[self.at..]
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, JsonError> {
        Err(JsonError { at: self.at, what })
    }

    fn space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start_matches([' ', '\t', '\n', '\r']).len();
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.rest().starts_with(token);
        if found {
            self.at += token.len();
        }
        found
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        if depth > MAX_DEPTH {
            return self.fail("nested too deeply");
        }
        match self.rest().as_bytes().first() {
            Some(b'"') => {
                self.at += 1;
                let (value, lone_surrogate) = self.string()?;
                Ok(Json::String {
                    value,
                    lone_surrogate,
                })
            }
            Some(b'{') => {
                self.at += 1;
                self.object(depth + 1)
            }
            Some(b'[') => {
                self.at += 1;
                self.array(depth + 1)
            }
            _ => {
                for (token, value) in [
                    ("null", Json::Null),
                    ("true", Json::Bool(true)),
                    ("false", Json::Bool(false)),
                    ("NaN", Json::Number("NaN".to_owned())),
                    ("Infinity", Json::Number("Infinity".to_owned())),
                    ("-Infinity", Json::Number("-Infinity".to_owned())),
                ] {
                    if self.eat(token) {
                        return Ok(value);
                    }
                }
                self.number()
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, each optional part taken only when it
    /// is complete (`1.` is the number `1` followed by `.`).
    fn number(&mut self) -> Result<Json, JsonError> {
        let bytes = self.rest().as_bytes();
        let digits_from = |from: usize| {
            bytes[from.min(bytes.len())..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let mut len = usize::from(bytes.first() == Some(&b'-'));
        match bytes.get(len) {
            Some(b'0') => len += 1,
            Some(b'1'..=b'9') => len += digits_from(len),
            _ => return self.fail("Expecting value"),
        }
        if bytes.get(len) == Some(&b'.') && digits_from(len + 1) > 0 {
            len += 1 + digits_from(len + 1);
        }
        if matches!(bytes.get(len), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
            let exponent = digits_from(len + 1 + sign);
            if exponent > 0 {
                len += 1 + sign + exponent;
            }
        }
        let literal = self.rest()[..len].to_owned();
        self.at += len;
        Ok(Json::Number(literal))
    }

    /// After the opening quote.
    fn string(&mut self) -> Result<(String, bool), JsonError> {
        let mut value = String::new();
        let mut lone_surrogate = false;
        loop {
            let Some(c) = self.rest().chars().next() else {
                return self.fail("Unterminated string starting at");
            };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok((value, lone_surrogate)),
                '\\' => {
                    let Some(escape) = self.rest().chars().next() else {
                        return self.fail("Unterminated string starting at");
                    };
                    self.at += escape.len_utf8();
                    match escape {
                        '"' => value.push('"'),
                        '\\' => value.push('\\'),
                        '/' => value.push('/'),
                        'b' => value.push('\u{8}'),
                        'f' => value.push('\u{C}'),
                        'n' => value.push('\n'),
                        'r' => value.push('\r'),
                        't' => value.push('\t'),
                        'u' => {
                            let unit = self.hex4()?;
                            match unit {
                                0xD800..=0xDBFF => {
                                    // A high surrogate pairs with an immediately following
                                    // `\uDC00`–`\uDFFF` escape; otherwise it stays alone.
                                    let low = self.rest().strip_prefix("\\u").and_then(|hex| {
                                        hex.get(..4)
                                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                                            .filter(|_| {
                                                hex.as_bytes()[..4]
                                                    .iter()
                                                    .all(u8::is_ascii_hexdigit)
                                            })
                                            .filter(|low| (0xDC00..=0xDFFF).contains(low))
                                    });
                                    match low {
                                        Some(low) => {
                                            self.at += 6;
                                            let code =
                                                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                                            value.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                                        }
                                        None => {
                                            lone_surrogate = true;
                                            value.push('\u{FFFD}');
                                        }
                                    }
                                }
                                0xDC00..=0xDFFF => {
                                    lone_surrogate = true;
                                    value.push('\u{FFFD}');
                                }
                                _ => value.push(char::from_u32(unit).unwrap_or('\u{FFFD}')),
                            }
                        }
                        _ => return self.fail("Invalid \\escape"),
                    }
                }
                c if c < ' ' => return self.fail("Invalid control character at"),
                c => value.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let hex = self.rest().as_bytes().get(..4);
        match hex {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => {
                let text = std::str::from_utf8(hex).unwrap_or("0");
                self.at += 4;
                Ok(u32::from_str_radix(text, 16).unwrap_or(0))
            }
            _ => self.fail("Invalid \\uXXXX escape"),
        }
    }

    /// After `{`.
    fn object(&mut self, depth: usize) -> Result<Json, JsonError> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        self.space();
        if self.eat("}") {
            return Ok(Json::Object(entries));
        }
        loop {
            if !self.eat("\"") {
                return self.fail("Expecting property name enclosed in double quotes");
            }
            let (key, _) = self.string()?;
            self.space();
            if !self.eat(":") {
                return self.fail("Expecting ':' delimiter");
            }
            self.space();
            let value = self.value(depth)?;
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => entries.push((key, value)),
            }
            self.space();
            if self.eat("}") {
                return Ok(Json::Object(entries));
            }
            if !self.eat(",") {
                return self.fail("Expecting ',' delimiter");
            }
            self.space();
        }
    }

    /// After `[`.
    fn array(&mut self, depth: usize) -> Result<Json, JsonError> {
        let mut items = Vec::new();
        self.space();
        if self.eat("]") {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.space();
            if self.eat("]") {
                return Ok(Json::Array(items));
            }
            if !self.eat(",") {
                return self.fail("Expecting ',' delimiter");
            }
            self.space();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_python_accepts() {
        for text in [
            " {} ",
            "[NaN, Infinity, -Infinity, 1e999, -0.5E+3, 123456789012345678901234567890]",
            r#"{"a": "\ud800", "b": "\ud83d\ude00", "c": "\/\b\f\n\r\t"}"#,
            "\"\u{7f}\"",
            "[]",
        ] {
            assert!(loads(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn rejects_what_python_rejects() {
        for text in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1.",
            "[1.e5]",
            "'a'",
            "\"\t\"",
            "{1: 2}",
            "[nan]",
            "\"\\x\"",
            "\"\\u12\"",
            "{} x",
            "-",
            "[-Infinity1]",
        ] {
            assert!(loads(text).is_err(), "{text}");
        }
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let value = loads(r#"{"a": 1, "b": null, "a": "x"}"#).unwrap();
        let Json::Object(entries) = &value else {
            panic!("object");
        };
        assert_eq!(entries[0].0, "a");
        assert!(matches!(value.get("a"), Some(Json::String { value, .. }) if value == "x"));
    }

    #[test]
    fn lone_surrogates_are_flagged() {
        let value = loads(r#""a\udc00""#).unwrap();
        assert!(matches!(
            value,
            Json::String {
                lone_surrogate: true,
                ..
            }
        ));
    }
}
