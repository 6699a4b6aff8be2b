//! Python list literals of strings (`['a', "it's"]`), as SWE-bench Pro stores its test lists
//! and reads them back with `eval`. Only what such a list can hold is accepted: single- or
//! double-quoted strings (optionally raw, `r'...'`), adjacent literals joined, Python's escapes,
//! commas with an optional trailing one.

/// Why a text is not a Python list of strings: what was expected and the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{expected} at byte {at}")]
pub(crate) struct LiteralError {
    expected: &'static str,
    at: usize,
}

/// The strings of a Python list literal.
pub(crate) fn string_list(text: &str) -> Result<Vec<String>, LiteralError> {
    let mut reader = Reader { text, at: 0 };
    reader.space();
    reader.expect('[', "`[`")?;
    let mut items = Vec::new();
    loop {
        reader.space();
        if reader.eat(']') {
            break;
        }
        items.push(reader.string()?);
        reader.space();
        if reader.eat(',') {
            continue;
        }
        reader.expect(']', "`,` or `]`")?;
        break;
    }
    reader.space();
    if reader.at != text.len() {
        return Err(reader.error("the end of the list"));
    }
    Ok(items)
}

struct Reader<'t> {
    text: &'t str,
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, what: &'static str) -> Result<(), LiteralError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    fn error(&self, expected: &'static str) -> LiteralError {
        LiteralError {
            expected,
            at: self.at,
        }
    }

    fn space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// One string item: one or more adjacent literals, joined as Python joins them.
    fn string(&mut self) -> Result<String, LiteralError> {
        let mut out = self.literal()?;
        loop {
            let save = self.at;
            self.space();
            match self.peek() {
                Some('\'' | '"' | 'r' | 'R' | 'u' | 'U') => out.push_str(&self.literal()?),
                _ => {
                    self.at = save;
                    return Ok(out);
                }
            }
        }
    }

    fn literal(&mut self) -> Result<String, LiteralError> {
        let mut raw = false;
        match self.peek() {
            Some('r' | 'R') => {
                raw = true;
                self.at += 1;
            }
            Some('u' | 'U') => self.at += 1,
            _ => {}
        }
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => {
                self.at += 1;
                q
            }
            _ => return Err(self.error("a quoted string")),
        };
        let mut out = String::new();
        loop {
            let Some(c) = self.bump() else {
                return Err(self.error("the closing quote"));
            };
            match c {
                c if c == quote => return Ok(out),
                '\n' => return Err(self.error("the closing quote before the line's end")),
                '\\' if raw => {
                    out.push('\\');
                    if let Some(next) = self.bump() {
                        out.push(next);
                    }
                }
                '\\' => self.escape(&mut out)?,
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), LiteralError> {
        let Some(c) = self.bump() else {
            return Err(self.error("an escape"));
        };
        let simple = match c {
            '\n' => return Ok(()),
            '\\' => '\\',
            '\'' => '\'',
            '"' => '"',
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\x0b',
            'x' => return self.hex(2, out),
            'u' => return self.hex(4, out),
            'U' => return self.hex(8, out),
            '0'..='7' => {
                let mut value = c.to_digit(8).expect("octal digit");
                for _ in 0..2 {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            self.at += 1;
                        }
                        None => break,
                    }
                }
                char::from_u32(value).ok_or_else(|| self.error("an octal escape"))?
            }
            other => {
                // Python keeps an unknown escape as it is written.
                out.push('\\');
                other
            }
        };
        out.push(simple);
        Ok(())
    }

    fn hex(&mut self, digits: usize, out: &mut String) -> Result<(), LiteralError> {
        let start = self.at;
        let end = start + digits;
        let value = self
            .text
            .get(start..end)
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .and_then(char::from_u32)
            .ok_or_else(|| self.error("a hexadecimal escape"))?;
        self.at = end;
        out.push(value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::string_list;

    #[test]
    fn python_lists_read_as_python_reads_them() {
        let read = |text: &str| string_list(text).expect(text);
        assert_eq!(read("[]"), Vec::<String>::new());
        assert_eq!(read(" [ 'a' , \"b\", ] "), ["a", "b"]);
        assert_eq!(read(r#"["it's", 'say \"hi\"']"#), ["it's", "say \"hi\""]);
        assert_eq!(
            read(r"['a\\b', 'tab\there', '\x41\u00e9', '\d']"),
            ["a\\b", "tab\there", "Aé", "\\d"]
        );
        assert_eq!(read(r"[r'\d+', 'ab' 'cd']"), ["\\d+", "abcd"]);
        assert_eq!(
            read("['test/a.js | suite → case']"),
            ["test/a.js | suite → case"]
        );
    }

    #[test]
    fn what_is_not_a_list_of_strings_is_refused_with_the_place() {
        for (text, at) in [("['a' 'b'", 8), ("[1, 2]", 1), ("['a'] x", 6), ("'a'", 0)] {
            let err = string_list(text).expect_err(text);
            assert_eq!(err.at, at, "{text}: {err}");
        }
    }
}
