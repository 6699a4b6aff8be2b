//! What the tidy checks read in a Rust file: its code with comments and literals blanked out
//! (so that a word in a comment or a string is not taken for code), its `//!` doc, the files it
//! `include!`s, and its `unsafe` sites with the comment right above each.

/// The code of each line of `text`: comments removed, the contents of string and character
/// literals removed (their quotes kept), so that only tokens remain. Block comments and
/// strings may span lines.
pub(super) fn code_lines(text: &str) -> Vec<String> {
    enum State {
        Code,
        /// Inside `/* */`, nested this deep.
        Block(u32),
        Str,
        /// Inside `r#"…"#` with this many `#`.
        Raw(usize),
    }
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut state = State::Code;
    let mut lines = Vec::new();
    for line in text.lines() {
        let c: Vec<char> = line.chars().collect();
        let at = |i: usize| c.get(i).copied();
        let mut code = String::with_capacity(line.len());
        let mut i = 0;
        while i < c.len() {
            match state {
                State::Block(depth) => {
                    if c[i] == '*' && at(i + 1) == Some('/') {
                        state = if depth == 1 {
                            State::Code
                        } else {
                            State::Block(depth - 1)
                        };
                        i += 2;
                    } else if c[i] == '/' && at(i + 1) == Some('*') {
                        state = State::Block(depth + 1);
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                State::Str => {
                    if c[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if c[i] == '"' {
                        state = State::Code;
                        code.push('"');
                    }
                    i += 1;
                }
                State::Raw(hashes) => {
                    if c[i] == '"' && (1..=hashes).all(|k| at(i + k) == Some('#')) {
                        state = State::Code;
                        code.push('"');
                        i += 1 + hashes;
                    } else {
                        i += 1;
                    }
                }
                State::Code => match c[i] {
                    '/' if at(i + 1) == Some('/') => break,
                    '/' if at(i + 1) == Some('*') => {
                        state = State::Block(1);
                        i += 2;
                    }
                    '"' => {
                        state = State::Str;
                        code.push('"');
                        i += 1;
                    }
                    // `r"`, `r#"`, `br#"`: a raw string, unless the `r` ends an identifier.
                    'r' if {
                        let starts = i == 0
                            || !is_ident(c[i - 1])
                            || (c[i - 1] == 'b' && (i < 2 || !is_ident(c[i - 2])));
                        let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                        starts && at(i + 1 + hashes) == Some('"')
                    } =>
                    {
                        let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                        state = State::Raw(hashes);
                        code.push('"');
                        i += 2 + hashes;
                    }
                    '\'' => {
                        code.push('\'');
                        if at(i + 1) == Some('\\') {
                            // An escaped character: up to the closing quote.
                            i += 3;
                            while i < c.len() && c[i] != '\'' {
                                i += 1;
                            }
                            code.push('\'');
                            i += 1;
                        } else if at(i + 2) == Some('\'') {
                            code.push('\'');
                            i += 3;
                        } else {
                            // A lifetime or a label.
                            i += 1;
                        }
                    }
                    other => {
                        code.push(other);
                        i += 1;
                    }
                },
            }
        }
        lines.push(code);
    }
    lines
}

/// Whether the file starts with its `//!` doc: the first line is an inner doc comment.
pub(super) fn starts_with_module_doc(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.starts_with("//!"))
}

/// The paths, as written, that `include!("…")` names in the code of `text` (a path built by a
/// macro, such as one under `OUT_DIR`, is not a file of the repository and is left out).
pub(super) fn includes(text: &str) -> Vec<String> {
    let lines = text.lines().collect::<Vec<_>>();
    let mut found = Vec::new();
    for (code, line) in code_lines(text).iter().zip(&lines) {
        if let Some(start) = code.find("include!(\"") {
            // The literal's contents are blanked in `code`; read them from the line itself.
            let offset = line.find("include!(\"").unwrap_or(start) + "include!(\"".len();
            if let Some(len) = line[offset..].find('"') {
                found.push(line[offset..offset + len].to_owned());
            }
        }
    }
    found
}

/// What an `unsafe` site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SiteKind {
    /// The `unsafe` keyword: a block, an impl, an `extern` block.
    Unsafe,
    /// `unsafe fn` or `unsafe trait`: its contract may be the `# Safety` section of its doc.
    Declaration,
    /// An `allow(unsafe_code)` or `expect(unsafe_code)` attribute: where the lint lets it in.
    Allow,
}

/// An `unsafe` site: its 1-based line and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Site {
    pub(super) line: usize,
    pub(super) kind: SiteKind,
}

/// Every `unsafe` site of `text`, in order (one per line and kind).
pub(super) fn unsafe_sites(text: &str) -> Vec<Site> {
    let mut sites = Vec::new();
    for (index, code) in code_lines(text).iter().enumerate() {
        let line = index + 1;
        if let Some(after) = word_positions(code, "unsafe").next() {
            let next = code[after..].split_whitespace().next().unwrap_or("");
            let kind = if next == "fn" || next == "trait" {
                SiteKind::Declaration
            } else {
                SiteKind::Unsafe
            };
            sites.push(Site { line, kind });
        }
        let squeezed: String = code.split_whitespace().collect();
        if word_positions(code, "unsafe_code").next().is_some()
            && (squeezed.contains("allow(") || squeezed.contains("expect("))
        {
            sites.push(Site {
                line,
                kind: SiteKind::Allow,
            });
        }
    }
    sites
}

/// Where `word` occurs in `code` as a whole identifier: the byte offset just after each.
fn word_positions<'a>(code: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).filter_map(move |(at, _)| {
        let end = at + word.len();
        let before = code[..at].chars().next_back();
        let after = code[end..].chars().next();
        (!before.is_some_and(is_ident) && !after.is_some_and(is_ident)).then_some(end)
    })
}

/// Whether the `unsafe` of `site` says why it holds right above it: the comment lines directly
/// above it (attributes in between are skipped, a blank line or code ends the comment) hold a
/// `// SAFETY:` comment, or for an `unsafe fn` or `unsafe trait` a `# Safety` doc section.
pub(super) fn has_safety_comment(text: &str, site: Site) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let mut above = lines[..site.line - 1].iter().rev().map(|l| l.trim());
    let comment: Vec<&str> = above
        .by_ref()
        .skip_while(|l| l.starts_with("#[") || l.starts_with("#!["))
        .take_while(|l| l.starts_with("//"))
        .collect();
    comment.iter().any(|l| l.starts_with("// SAFETY:"))
        || (site.kind == SiteKind::Declaration
            && comment
                .iter()
                .any(|l| l.starts_with("///") && l.contains("# Safety")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `unsafe` sites of `input` as `line:kind`, and the lines among them that lack their
    /// comment.
    fn check(input: &str, sites: &[&str], undocumented: &[usize]) {
        let found = unsafe_sites(input);
        let names: Vec<String> = found
            .iter()
            .map(|s| format!("{}:{:?}", s.line, s.kind))
            .collect();
        assert_eq!(names, sites, "sites of {input:?}");
        let missing: Vec<usize> = found
            .iter()
            .filter(|s| s.kind != SiteKind::Allow && !has_safety_comment(input, **s))
            .map(|s| s.line)
            .collect();
        assert_eq!(missing, undocumented, "undocumented sites of {input:?}");
    }

    #[test]
    fn unsafe_sites_and_their_comments() {
        check("// SAFETY: why.\nunsafe { f() };\n", &["2:Unsafe"], &[]);
        check(
            "// SAFETY: why,\n// on two lines.\n#[allow(unsafe_code)]\nlet x = unsafe { f() };\n",
            &["3:Allow", "4:Unsafe"],
            &[],
        );
        check(
            "// SAFETY: too far.\n\nunsafe { f() };\n",
            &["3:Unsafe"],
            &[3],
        );
        check(
            "// Why, but not said so.\nunsafe { f() };\n",
            &["2:Unsafe"],
            &[2],
        );
        check(
            "/// # Safety\n/// Callers...\nunsafe fn f() {}\n",
            &["3:Declaration"],
            &[],
        );
        // A doc's `# Safety` is a declaration's contract, not an impl's reason.
        check(
            "/// # Safety\nunsafe impl Send for X {}\n",
            &["2:Unsafe"],
            &[2],
        );
        check("#![allow(unsafe_code)]\n", &["1:Allow"], &[]);
        check("#![deny(unsafe_code)]\n", &[], &[]);
        // Words in comments, strings and raw strings are not code.
        check(
            "let s = \"unsafe { }\"; // unsafe\n/* unsafe\n unsafe */ let r = r#\"unsafe\"#;\nlet c = '\"'; let t = \"unsafe\";\n",
            &[],
            &[],
        );
        check("fn unsafe_thing<'a>(x: &'a str) {}\n", &[], &[]);
    }

    #[test]
    fn module_docs_and_includes() {
        assert!(starts_with_module_doc("//! The crate.\n"));
        assert!(!starts_with_module_doc("// Not a doc.\n//! Late.\n"));
        assert!(!starts_with_module_doc("\n//! After a blank line.\n"));
        assert!(!starts_with_module_doc(""));
        assert_eq!(
            includes(
                "include!(\"plugins.rs\");\n// include!(\"no.rs\");\ninclude!(concat!(env!(\"OUT_DIR\"), \"/x.rs\"));\n"
            ),
            ["plugins.rs"]
        );
    }
}
