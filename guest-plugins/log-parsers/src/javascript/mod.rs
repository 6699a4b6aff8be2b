//! The parsers of SWE-bench 5.0.2's JavaScript and TypeScript repositories (SWE-bench
//! Multilingual and Multimodal), grouped by the runner whose output they read: Jest and its
//! relatives ([`jest`]), Mocha ([`mocha`]), browser runners such as Karma ([`browser`]), TAP
//! ([`tap`]) and Deno's (quarto-cli, [`deno`]).
//!
//! Several of these parsers read only failures (chart_js, marked, p5js, bpmn_js, openlayers,
//! eslint): their repositories are graded FAIL_ONLY upstream, where an absent test counts as
//! passing.

pub(crate) mod browser;
pub(crate) mod deno;
pub(crate) mod jest;
pub(crate) mod mocha;
pub(crate) mod tap;

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use crate::pystr;

/// SWE-bench's `ansi_escape`: removes `ESC` + one of `@`–`Z`, `\`–`_`, or a CSI sequence
/// (`ESC [` parameters, intermediates, final byte).
static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1B(?:[@-Z\x5C-_]|\[[0-?]*[ -/]*[@-~])").expect("valid regex"));

/// `swebench.utils.ansi_escape`.
pub(crate) fn ansi_escape(text: &str) -> Cow<'_, str> {
    ANSI.replace_all(text, "")
}

/// The stack of describe blocks that calypso, next and lighthouse's mocha parser keep from
/// indentation: an indented line that is not a result pops every entry indented as much as it
/// or more, then pushes itself (stripped). Entries are joined with ` - `.
#[derive(Debug, Default)]
pub(crate) struct SuiteStack {
    entries: Vec<(String, usize)>,
}

impl SuiteStack {
    /// Applies a line that is not a result: only indented lines (Python's `lstrip` counted in
    /// characters) change the stack; a whitespace-only line pushes an empty name.
    pub(crate) fn adjust(&mut self, line: &str) {
        let indent = pystr::indent(line);
        if indent == 0 {
            return;
        }
        while self.entries.last().is_some_and(|&(_, last)| last >= indent) {
            self.entries.pop();
        }
        self.entries.push((pystr::strip(line).to_owned(), indent));
    }

    /// `" - ".join(names + [test])`.
    pub(crate) fn key(&self, test: &str) -> String {
        let mut key = String::new();
        for (name, _) in &self.entries {
            key.push_str(name);
            key.push_str(" - ");
        }
        key.push_str(test);
        key
    }

    /// `" - ".join(names)`.
    pub(crate) fn joined(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|(name, _)| name.as_str()).collect();
        names.join(" - ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_codes_are_removed() {
        assert_eq!(ansi_escape("\x1b[32m✓\x1b[39m ok\x1b(B\x1b]"), "✓ ok\x1b(B");
    }

    #[test]
    fn suite_stack_follows_indentation() {
        let mut stack = SuiteStack::default();
        for line in ["  a", "    b", "      c", "    d", "no indent", "  e"] {
            stack.adjust(line);
        }
        assert_eq!(stack.key("t"), "e - t");
        stack.adjust("     f");
        assert_eq!(stack.joined(), "e - f");
    }
}
