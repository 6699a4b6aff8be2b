//! The unified-diff variant of the reward (`calculate_reward_unidiff`): patches instead of a
//! completion or file contents.
//!
//! Each patch text is parsed the way the Python `unidiff` library (0.7.5, by Matias Bordese, MIT
//! licence) parses it, since which texts parse, which files are binary and how hunks render
//! decide the result. The parser below is a port of that library's `PatchSet` state machine,
//! reduced to what the reward reads: file names, the binary flag and the hunks.
//!
//! Known divergences, all on malformed input: hunk-header numbers must be ASCII digits that fit
//! in a `u64` (Python also accepts other Unicode decimal digits and unbounded integers).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::FileMap;
use crate::pystr::py_strip;
use crate::reward::{RewardOutcome, reward_from_patches};

const DEV_NULL: &str = "/dev/null";
const NO_NEWLINE_VALUE: &str = " No newline at end of file";

/// `unidiff`'s line patterns, written for the `regex` crate. Python's `$` also matches before a
/// final newline, hence `\n?\z`; every line handed to them ends with its `\n` (if it has one).
struct Patterns {
    git_header: Regex,
    git_header_uri: Regex,
    git_header_no_prefix: Regex,
    git_new_file: Regex,
    git_deleted_file: Regex,
    source_file: Regex,
    target_file: Regex,
    hunk_header: Regex,
    body_line: Regex,
    empty_body_line: Regex,
    binary_diff: Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let re = |pattern: &str| Regex::new(pattern).expect("valid unidiff pattern");
    Patterns {
        git_header: re(r"\Adiff --git (?P<source>a/[^\t\n]+) (?P<target>b/[^\t\n]+)"),
        git_header_uri: re(r"\Adiff --git (?P<source>.*://[^\t\n]+) (?P<target>.*://[^\t\n]+)"),
        git_header_no_prefix: re(r"\Adiff --git (?P<source>[^\t\n]+) (?P<target>[^\t\n]+)"),
        git_new_file: re(r"\Anew file mode \d+\n?\z"),
        git_deleted_file: re(r"\Adeleted file mode \d+\n?\z"),
        source_file: re(r"\A--- (?P<filename>[^\t\n]+)(?:\t(?P<timestamp>[^\n]+))?"),
        target_file: re(r"\A\+\+\+ (?P<filename>[^\t\n]+)(?:\t(?P<timestamp>[^\n]+))?"),
        hunk_header: re(r"\A@@ -([0-9]+)(?:,([0-9]+))? \+([0-9]+)(?:,([0-9]+))? @@[ ]?(.*)"),
        body_line: re(r"(?s)\A(?P<line_type>[- +\\])(?P<value>.*)"),
        empty_body_line: re(r"(?s)\A(?P<line_type>[- +\\]?)(?P<value>[\r\n]{1,2})"),
        binary_diff: re(concat!(
            r"\ABinary files? ",
            r"(?P<source_filename>[^\t]+?)(?:\t(?P<source_timestamp>[\s0-9:+-]+))?",
            r"(?: and (?P<target_filename>[^\t]+?)(?:\t(?P<target_timestamp>[\s0-9:+-]+))?)? (differ|has changed)"
        )),
    }
});

/// The reward over unified-diff patches: each list of patch texts is parsed into path →
/// normalised change (later patches overwrite earlier ones for the same path; a text that does
/// not parse contributes nothing), then steps 5–6 apply as in the other variants. Never −1.
pub fn unidiff_reward(oracle_patches: &[&str], pred_patches: &[&str]) -> RewardOutcome {
    reward_from_patches(merged_changes(oracle_patches), merged_changes(pred_patches))
}

fn merged_changes(patches: &[&str]) -> BTreeMap<String, String> {
    let mut merged = BTreeMap::new();
    for patch in patches {
        if let Some(changes) = file_changes(patch) {
            merged.extend(changes);
        }
    }
    merged
}

/// Path → change text of every non-binary file of one patch, or `None` when the text does not
/// parse as a unified diff.
///
/// A change text is the file's hunks, each rendered (`@@ -s,l +s,l @@[ heading]` and its lines)
/// and stripped, joined with `"\n"`, after a `rename from <old> to <new>` header for renames; the
/// whole stripped. Paths drop their `a/` or `b/` prefix (the target's when the source is
/// `/dev/null`); a rename is keyed by its source path.
pub(crate) fn file_changes(patch: &str) -> Option<FileMap> {
    let files = parse_patch_set(patch).ok()?;
    let mut changes = FileMap::new();
    for file in files.iter().filter(|f| !f.is_binary) {
        let rename = file.is_rename();
        let hunks: Vec<String> = file
            .hunks
            .iter()
            .map(|h| py_strip(&h.render()).to_owned())
            .collect();
        let header = if rename {
            format!(
                "rename from {} to {}",
                strip_prefix_once(&file.source, "a/"),
                strip_prefix_once(&file.target, "b/")
            )
        } else {
            String::new()
        };
        let content = format!("{header}\n{}", hunks.join("\n"));
        let key = if rename {
            strip_prefix_once(&file.source, "a/").to_owned()
        } else {
            file.path().to_owned()
        };
        changes.insert(key, py_strip(&content).to_owned());
    }
    Some(changes)
}

fn strip_prefix_once<'a>(path: &'a str, prefix: &str) -> &'a str {
    path.strip_prefix(prefix).unwrap_or(path)
}

/// Why a patch text does not parse (the message is informative only).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ParseError(&'static str);

/// One line of a hunk: its type character (`' '`, `'-'`, `'+'`, `'\\'` or `""` for a trailing
/// empty line) and its text with its own line end.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HunkLine {
    line_type: &'static str,
    value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk {
    source_start: u64,
    source_length: u64,
    target_start: u64,
    target_length: u64,
    section_header: String,
    lines: Vec<HunkLine>,
}

impl Hunk {
    /// `str(hunk)` in `unidiff`: both numbers of each range always written.
    fn render(&self) -> String {
        let mut out = format!(
            "@@ -{},{} +{},{} @@",
            self.source_start, self.source_length, self.target_start, self.target_length
        );
        if !self.section_header.is_empty() {
            out.push(' ');
            out.push_str(&self.section_header);
        }
        out.push('\n');
        for line in &self.lines {
            out.push_str(line.line_type);
            out.push_str(&line.value);
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PatchedFile {
    source: String,
    target: String,
    is_binary: bool,
    hunks: Vec<Hunk>,
}

impl PatchedFile {
    fn new(source: &str, target: &str) -> Self {
        Self {
            source: source.to_owned(),
            target: target.to_owned(),
            is_binary: false,
            hunks: Vec::new(),
        }
    }

    /// Neither side is `/dev/null` and the names differ after their first two characters.
    fn is_rename(&self) -> bool {
        let tail = |s: &str| s.chars().skip(2).collect::<String>();
        self.source != DEV_NULL
            && self.target != DEV_NULL
            && tail(&self.source) != tail(&self.target)
    }

    /// `unidiff`'s `path` for a file that is not a rename.
    fn path(&self) -> &str {
        let path = if self.source == DEV_NULL {
            &self.target
        } else {
            &self.source
        };
        path.strip_prefix("a/")
            .or_else(|| path.strip_prefix("b/"))
            .unwrap_or(path)
    }
}

/// The lines of `text` as Python's `StringIO` yields them: split after each `\n`, which is kept.
fn stringio_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
}

/// Port of `PatchSet._parse`. `current` and `patch_info_open` mirror its `current_file` and
/// `patch_info`; `last_source` mirrors its `source_file` local (set by git headers, `---` lines
/// and binary lines), and `seen_source_line` whether its `source_timestamp` local exists (only a
/// `---` line sets it). A `+++` line that starts a file reads both, and Python raises when either
/// is unset.
fn parse_patch_set(text: &str) -> Result<Vec<PatchedFile>, ParseError> {
    let p = &*PATTERNS;
    let mut files: Vec<PatchedFile> = Vec::new();
    let mut current: Option<usize> = None;
    let mut patch_info_open = false;
    let mut last_source: Option<String> = None;
    let mut seen_source_line = false;
    let mut lines = stringio_lines(text);
    while let Some(line) = lines.next() {
        if let Some(caps) = p
            .git_header
            .captures(line)
            .or_else(|| p.git_header_uri.captures(line))
            .or_else(|| p.git_header_no_prefix.captures(line))
        {
            patch_info_open = true;
            last_source = Some(caps["source"].to_owned());
            files.push(PatchedFile::new(&caps["source"], &caps["target"]));
            current = Some(files.len() - 1);
            continue;
        }
        if p.git_new_file.is_match(line) {
            match current.filter(|_| patch_info_open) {
                Some(at) => files[at].source = DEV_NULL.to_owned(),
                None => return Err(ParseError("unexpected new file")),
            }
            continue;
        }
        if p.git_deleted_file.is_match(line) {
            match current.filter(|_| patch_info_open) {
                Some(at) => files[at].target = DEV_NULL.to_owned(),
                None => return Err(ParseError("unexpected deleted file")),
            }
            continue;
        }
        if let Some(caps) = p.source_file.captures(line) {
            let source = caps["filename"].to_owned();
            // Keep the current file only while processing a rename whose names agree.
            if current.is_some_and(|at| files[at].source != source) {
                current = None;
            }
            last_source = Some(source);
            seen_source_line = true;
            continue;
        }
        if let Some(caps) = p.target_file.captures(line) {
            let target = &caps["filename"];
            match current {
                Some(at) if files[at].target != target => {
                    return Err(ParseError("target without source"));
                }
                Some(_) => {}
                None => {
                    let source = last_source
                        .as_deref()
                        .filter(|_| seen_source_line)
                        .ok_or(ParseError("no source file"))?;
                    files.push(PatchedFile::new(source, target));
                    current = Some(files.len() - 1);
                    patch_info_open = false;
                }
            }
            continue;
        }
        if let Some(caps) = p.hunk_header.captures(line) {
            patch_info_open = false;
            let at = current.ok_or(ParseError("unexpected hunk"))?;
            let hunk = parse_hunk(&caps, &mut lines)?;
            files[at].hunks.push(hunk);
            continue;
        }
        if line.starts_with("\\ No newline at end of file") {
            let at = current.ok_or(ParseError("unexpected marker"))?;
            let hunk = files[at]
                .hunks
                .last_mut()
                .ok_or(ParseError("unexpected marker"))?;
            hunk.lines.push(HunkLine {
                line_type: "\\",
                value: format!("{NO_NEWLINE_VALUE}\n"),
            });
            continue;
        }
        if line == "\n"
            && let Some(at) = current
        {
            let hunk = files[at]
                .hunks
                .last_mut()
                .ok_or(ParseError("unexpected trailing newline"))?;
            hunk.lines.push(HunkLine {
                line_type: "",
                value: "\n".to_owned(),
            });
            continue;
        }
        // Anything else is patch info.
        if !patch_info_open {
            current = None;
            patch_info_open = true;
        }
        if let Some(caps) = p.binary_diff.captures(line) {
            let source = caps.name("source_filename").map_or("", |m| m.as_str());
            last_source = Some(source.to_owned());
            match current {
                Some(at) => files[at].is_binary = true,
                None => {
                    let target = caps.name("target_filename").map_or("", |m| m.as_str());
                    let mut file = PatchedFile::new(source, target);
                    file.is_binary = true;
                    files.push(file);
                }
            }
            patch_info_open = false;
            current = None;
            continue;
        }
        if line == "GIT binary patch\n" {
            let at = current.ok_or(ParseError("binary patch without a file"))?;
            files[at].is_binary = true;
            patch_info_open = false;
            current = None;
            continue;
        }
    }
    Ok(files)
}

/// Port of `PatchedFile._parse_hunk`: reads body lines until both ranges are complete.
fn parse_hunk<'a>(
    header: &regex::Captures<'_>,
    lines: &mut impl Iterator<Item = &'a str>,
) -> Result<Hunk, ParseError> {
    let number = |n: usize, default: u64| -> Result<u64, ParseError> {
        header.get(n).map_or(Ok(default), |m| {
            m.as_str()
                .parse()
                .map_err(|_| ParseError("hunk number too large"))
        })
    };
    let mut hunk = Hunk {
        source_start: number(1, 0)?,
        source_length: number(2, 1)?,
        target_start: number(3, 0)?,
        target_length: number(4, 1)?,
        section_header: header.get(5).map_or("", |m| m.as_str()).to_owned(),
        lines: Vec::new(),
    };
    let (mut source_no, mut target_no) = (hunk.source_start, hunk.target_start);
    let source_end = hunk.source_start.checked_add(hunk.source_length);
    let target_end = hunk.target_start.checked_add(hunk.target_length);
    let (Some(source_end), Some(target_end)) = (source_end, target_end) else {
        return Err(ParseError("hunk range too large"));
    };
    let p = &*PATTERNS;
    for line in lines {
        let caps = p
            .body_line
            .captures(line)
            .or_else(|| p.empty_body_line.captures(line))
            .ok_or(ParseError("hunk diff line expected"))?;
        let line_type = match &caps["line_type"] {
            "+" => {
                target_no += 1;
                "+"
            }
            "-" => {
                source_no += 1;
                "-"
            }
            "\\" => "\\",
            // A context line, or an empty line treated as one.
            _ => {
                source_no += 1;
                target_no += 1;
                " "
            }
        };
        if source_no > source_end || target_no > target_end {
            return Err(ParseError("hunk is longer than expected"));
        }
        hunk.lines.push(HunkLine {
            line_type,
            value: caps["value"].to_owned(),
        });
        if source_no == source_end && target_no == target_end {
            break;
        }
    }
    if source_no < source_end || target_no < target_end {
        return Err(ParseError("hunk is shorter than expected"));
    }
    Ok(hunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(patch: &str) -> Option<Vec<(String, String)>> {
        file_changes(patch).map(|map| map.into_iter().collect())
    }

    fn check(patch: &str, expect: Option<&[(&str, &str)]>) {
        let expect = expect.map(|pairs| {
            pairs
                .iter()
                .map(|&(p, c)| (p.to_owned(), c.to_owned()))
                .collect::<Vec<_>>()
        });
        assert_eq!(changes(patch), expect, "patch {patch:?}");
    }

    // Expected values below were produced with unidiff 0.7.5 under CPython 3.11.
    #[test]
    fn renders_hunks_like_unidiff() {
        check(
            "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
            Some(&[("x.py", "@@ -1,1 +1,1 @@\n-a\n+b")]),
        );
        check(
            "diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@ def f():\n a\n-b\n+c\n@@ -10,0 +11 @@\n+z\n",
            Some(&[(
                "x.py",
                "@@ -1,2 +1,2 @@ def f():\n a\n-b\n+c\n@@ -10,0 +11,1 @@\n+z",
            )]),
        );
        // No newline marker, inside and after a hunk.
        check(
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n",
            Some(&[(
                "x",
                "@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file",
            )]),
        );
        // New and deleted files are keyed by their real path.
        check(
            "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n",
            Some(&[("n.py", "@@ -0,0 +1,1 @@\n+x")]),
        );
        check(
            "--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
            Some(&[("d.py", "@@ -1,1 +0,0 @@\n-x")]),
        );
        // Renames: a header, keyed by the source path.
        check(
            "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n--- a/old.py\n+++ b/new.py\n@@ -1 +1 @@\n-a\n+b\n",
            Some(&[(
                "old.py",
                "rename from old.py to new.py\n@@ -1,1 +1,1 @@\n-a\n+b",
            )]),
        );
        check(
            "diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\nrename to new.py\n",
            Some(&[("old.py", "rename from old.py to new.py")]),
        );
        // Binary files are skipped.
        check(
            "diff --git a/i.png b/i.png\nBinary files a/i.png and b/i.png differ\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
            Some(&[("x", "@@ -1,1 +1,1 @@\n-a\n+b")]),
        );
        // Not a diff at all: no files, still a parse.
        check("just prose\n", Some(&[]));
        check("", Some(&[]));
    }

    #[test]
    fn malformed_patches_contribute_nothing() {
        check("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", None);
        check("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n-b\n+b\n", None);
        check("@@ -1 +1 @@\n-a\n+b\n", None);
        check("+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", None);
        // A binary line sets the source name but not the timestamp Python also needs.
        check("Binary files a/x.bin and b/x.bin differ\n+++ b/q\n", None);
        // ... and it sets the source name even for a file already open.
        check(
            "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/q b/q\nBinary files a/x.bin and b/x.bin differ\n+++ b/q\n",
            Some(&[
                ("a", "@@ -1,1 +1,1 @@\n-a\n+b"),
                ("x.bin", "rename from x.bin to q"),
            ]),
        );
    }

    #[test]
    fn reward_over_patches() {
        let a = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n";
        let b = "--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n";
        let check = |oracle: &[&str], pred: &[&str], expect: f64| {
            let outcome = unidiff_reward(oracle, pred);
            assert_eq!(
                outcome.reward.to_bits(),
                expect.to_bits(),
                "{oracle:?} {pred:?}"
            );
            assert!(outcome.format_error.is_none());
        };
        check(&[a], &[a], 1.0);
        check(&[], &[], 1.0);
        check(&[a], &[b], 0.0);
        check(&[a, b], &[a], 0.5);
        // An unparsable prediction contributes nothing.
        check(&[a], &["--- a/x\n+++ b/x\n@@ -1,5 +1 @@\n-a\n"], 0.0);
    }
}
