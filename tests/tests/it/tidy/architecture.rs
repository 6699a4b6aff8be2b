//! What the tidy checks read in ARCHITECTURE.md: its code spans (with the line each starts on),
//! its crate sections (`### \`dir/\` — \`package\``) and the `unsafe` allow-list of its
//! invariants. Parsing the document itself, rather than copying its lists here, is what keeps the
//! two from drifting apart.

/// A code span (`` `text` ``) of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Span {
    /// The 1-based line its opening backtick is on.
    pub(super) line: usize,
    /// Its text; a span that wraps onto the next line has the line break as one space.
    pub(super) text: String,
    /// Byte offsets in the document of its opening backtick and just after its closing one.
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The code spans of `md`, outside fenced blocks. An unclosed backtick ends at a blank line.
pub(super) fn code_spans(md: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut fenced = false;
    // The open span's line, start offset and text so far.
    let mut open: Option<(usize, usize, String)> = None;
    let mut offset = 0;
    for (index, line) in md.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = None;
            continue;
        }
        if fenced || line.trim().is_empty() {
            open = None;
            continue;
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push(' ');
        }
        let mut at = 0;
        while let Some(tick) = line[at..].find('`').map(|t| at + t) {
            match open.take() {
                Some((span_line, start, mut text)) => {
                    text.push_str(&line[at..tick]);
                    spans.push(Span {
                        line: span_line,
                        text,
                        start,
                        end: line_start + tick + 1,
                    });
                }
                None => open = Some((index + 1, line_start + tick, String::new())),
            }
            at = tick + 1;
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push_str(&line[at..]);
        }
    }
    spans
}

/// A crate section: `### \`dir/\`` with, where the heading names it, the package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Section {
    /// The heading's line.
    pub(super) line: usize,
    /// The folder, as the heading writes it (`harness/swebench/`).
    pub(super) dir: String,
    /// The package the heading names (`swerve-swebench`), if any.
    pub(super) package: Option<String>,
    /// The line after its last line.
    pub(super) end: usize,
}

/// The crate sections of `md`: every `###` heading whose first code span is a folder. A section
/// ends at the next heading of any level.
pub(super) fn sections(md: &str) -> Vec<Section> {
    let spans = code_spans(md);
    let lines: Vec<&str> = md.lines().collect();
    let headings: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with('#'))
        .map(|i| i + 1)
        .collect();
    let mut sections = Vec::new();
    for (k, &line) in headings.iter().enumerate() {
        if !lines[line - 1].starts_with("### ") {
            continue;
        }
        let mut heading = spans.iter().filter(|s| s.line == line);
        let Some(dir) = heading.next().filter(|s| s.text.ends_with('/')) else {
            continue;
        };
        sections.push(Section {
            line,
            dir: dir.text.clone(),
            package: heading.next().map(|s| s.text.clone()),
            end: headings.get(k + 1).copied().unwrap_or(lines.len() + 1),
        });
    }
    sections
}

/// One place of the `unsafe` allow-list: the list item's line and its code spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AllowItem {
    pub(super) line: usize,
    pub(super) spans: Vec<String>,
}

/// The title of the invariant that lists where `unsafe` is allowed.
pub(super) const UNSAFE_INVARIANT: &str = "**`unsafe` is denied workspace-wide**";

/// The items of the `unsafe` invariant's nested list, or None when the document has no such
/// invariant. The list ends where the invariant does: at the next top-level item, a blank line
/// or a heading.
pub(super) fn unsafe_allow_list(md: &str) -> Option<Vec<AllowItem>> {
    let lines: Vec<&str> = md.lines().collect();
    let start = lines.iter().position(|l| l.contains(UNSAFE_INVARIANT))?;
    let mut items: Vec<(usize, String)> = Vec::new();
    for (index, line) in lines.iter().enumerate().skip(start + 1) {
        if line.trim().is_empty() || line.starts_with("- ") || line.starts_with('#') {
            break;
        }
        if line.trim_start().starts_with("- ") && line.starts_with("  ") {
            items.push((index + 1, line.trim_start()[2..].to_owned()));
        } else if let Some((_, text)) = items.last_mut() {
            text.push(' ');
            text.push_str(line.trim());
        }
    }
    Some(
        items
            .into_iter()
            .map(|(line, text)| AllowItem {
                line,
                spans: code_spans(&text).into_iter().map(|s| s.text).collect(),
            })
            .collect(),
    )
}

/// A file extension of the names the document gives as files of the repository (not the files
/// swerve writes, such as `report.json`): sources, WIT, scripts, documents.
pub(super) fn names_a_repository_file(span: &str) -> bool {
    !span.contains(char::is_whitespace)
        && [".rs", ".wit", ".sh", ".md"]
            .iter()
            .any(|ext| span.len() > ext.len() && span.ends_with(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# Architecture

```
a `fenced` block
```

### `one/` — `swerve-one`
`a.rs` and (`b/c.rs`,
`d.wit`): `wrapped
span`.

### `two/` — the second
- **`unsafe` is denied workspace-wide** (`unsafe_code`) and allowed in these places
  only:
  - `one/src/a.rs`: because;
  - glue in (`two/x`'s macros, the `three`
    plugin).
- **Next.**

### Outside the workspace
`e.sh`
";

    #[test]
    fn code_spans_skip_fences_and_wrap_lines() {
        let spans: Vec<(usize, String)> = code_spans(DOC)
            .into_iter()
            .map(|s| (s.line, s.text))
            .collect();
        assert_eq!(
            &spans[..7],
            [
                (7, "one/".into()),
                (7, "swerve-one".into()),
                (8, "a.rs".into()),
                (8, "b/c.rs".into()),
                (9, "d.wit".into()),
                (9, "wrapped span".into()),
                (12, "two/".into()),
            ]
        );
    }

    #[test]
    fn sections_end_at_the_next_heading() {
        assert_eq!(
            sections(DOC),
            [
                Section {
                    line: 7,
                    dir: "one/".into(),
                    package: Some("swerve-one".into()),
                    end: 12,
                },
                Section {
                    line: 12,
                    dir: "two/".into(),
                    package: None,
                    end: 20,
                },
            ]
        );
    }

    #[test]
    fn the_allow_list_is_the_invariants_nested_items() {
        assert_eq!(
            unsafe_allow_list(DOC).unwrap(),
            [
                AllowItem {
                    line: 15,
                    spans: vec!["one/src/a.rs".into()],
                },
                AllowItem {
                    line: 16,
                    spans: vec!["two/x".into(), "three".into()],
                },
            ]
        );
        assert_eq!(unsafe_allow_list("# No invariants\n"), None);
    }

    #[test]
    fn file_names() {
        for (span, expect) in [
            ("a.rs", true),
            ("cpu/decode.rs", true),
            ("docs/hardening.md", true),
            ("setup.sh", true),
            ("plugin.wit", true),
            (".rs", false),
            ("report.json", false),
            ("cargo run -p x.rs", false),
            ("math/", false),
        ] {
            assert_eq!(names_a_repository_file(span), expect, "{span}");
        }
    }
}
