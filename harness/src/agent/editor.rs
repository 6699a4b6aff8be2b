//! The tool-call protocol's file tools, run from the host: `str_replace_editor` (view, create,
//! str_replace, insert, undo_edit) reads and writes files through the engine's copy API, so it
//! needs nothing in the image; `search` runs `grep` in the container. Every path is resolved
//! against the repository folder.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use swerve_sandbox::{Container, ExecRequest};

/// Largest file the editor reads (bigger ones are viewed with `bash`).
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Most matching lines `search` shows.
const MAX_MATCHES: usize = 200;

/// One episode's editor: the files' earlier contents for `undo_edit`.
#[derive(Default)]
pub(crate) struct Editor {
    history: HashMap<String, Vec<Option<Vec<u8>>>>,
}

/// What a tool answered: its text and whether it failed (the agent is told either way).
pub(crate) struct ToolAnswer {
    pub text: String,
    pub ok: bool,
}

fn fail(text: impl Into<String>) -> ToolAnswer {
    ToolAnswer {
        text: text.into(),
        ok: false,
    }
}

fn ok(text: impl Into<String>) -> ToolAnswer {
    ToolAnswer {
        text: text.into(),
        ok: true,
    }
}

/// `path` made absolute against `repo_dir`, `..` segments refused (the editor only needs plain
/// paths; the agent has `bash` for anything else).
fn resolve(repo_dir: &str, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("`path` is empty".to_owned());
    }
    if path.split('/').any(|part| part == "..") {
        return Err(format!("{path}: `..` is not allowed in editor paths"));
    }
    Ok(if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{}", repo_dir.trim_end_matches('/'), path)
    })
}

/// Lines numbered as `cat -n` numbers them, from line `first` (1-based).
fn numbered(text: &str, first: usize) -> String {
    text.lines()
        .enumerate()
        .map(|(i, line)| format!("{:6}\t{line}\n", i + first))
        .collect()
}

impl Editor {
    /// Runs `str_replace_editor` with `args`.
    pub(crate) async fn edit(
        &mut self,
        container: &Container,
        repo_dir: &str,
        args: &Value,
        timeout: Duration,
    ) -> Result<ToolAnswer, swerve_sandbox::Error> {
        let command = args["command"].as_str().unwrap_or_default();
        let path = match resolve(repo_dir, args["path"].as_str().unwrap_or_default()) {
            Ok(path) => path,
            Err(e) => return Ok(fail(e)),
        };
        let current = container.read_file(&path, MAX_FILE_BYTES).await;
        match command {
            "view" => self.view(container, &path, args, current, timeout).await,
            "create" => {
                let Some(text) = args["file_text"].as_str() else {
                    return Ok(fail("create needs `file_text`"));
                };
                if matches!(current, Ok(Some(_))) {
                    return Ok(fail(format!(
                        "{path} exists: use str_replace or insert to change it"
                    )));
                }
                container.write_file(&path, text.as_bytes()).await?;
                self.history.entry(path.clone()).or_default().push(None);
                Ok(ok(format!("Created {path}")))
            }
            "str_replace" | "insert" => {
                let Ok(Some(bytes)) = current else {
                    return Ok(fail(format!("{path}: no such file (or larger than 4 MiB)")));
                };
                let Ok(text) = String::from_utf8(bytes.clone()) else {
                    return Ok(fail(format!("{path} is not UTF-8 text")));
                };
                let changed = if command == "str_replace" {
                    str_replace(&text, args)
                } else {
                    insert(&text, args)
                };
                let (new_text, snippet_line) = match changed {
                    Ok(done) => done,
                    Err(e) => return Ok(fail(format!("{path}: {e}"))),
                };
                container.write_file(&path, new_text.as_bytes()).await?;
                self.history
                    .entry(path.clone())
                    .or_default()
                    .push(Some(bytes));
                Ok(ok(format!(
                    "Edited {path}. Lines around the change:\n{}",
                    snippet(&new_text, snippet_line)
                )))
            }
            "undo_edit" => {
                let Some(previous) = self.history.get_mut(&path).and_then(Vec::pop) else {
                    return Ok(fail(format!("{path}: no edit to undo")));
                };
                match previous {
                    Some(bytes) => container.write_file(&path, &bytes).await?,
                    None => {
                        container
                            .exec(
                                &ExecRequest::new(["rm", "-f", "--", &path]).with_timeout(timeout),
                            )
                            .await?;
                    }
                }
                Ok(ok(format!("Undid the last edit of {path}")))
            }
            other => Ok(fail(format!(
                "unknown command {other:?}: use view, create, str_replace, insert or undo_edit"
            ))),
        }
    }

    async fn view(
        &self,
        container: &Container,
        path: &str,
        args: &Value,
        current: swerve_sandbox::Result<Option<Vec<u8>>>,
        timeout: Duration,
    ) -> Result<ToolAnswer, swerve_sandbox::Error> {
        if let Ok(Some(bytes)) = current {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let (first, last) = match args["view_range"].as_array().map(Vec::as_slice) {
                Some([a, b]) => {
                    let first = a.as_i64().unwrap_or(1).max(1) as usize;
                    let last = match b.as_i64().unwrap_or(-1) {
                        -1 => lines.len(),
                        n => (n.max(0) as usize).min(lines.len()),
                    };
                    if first > last.max(1) {
                        return Ok(fail(format!(
                            "view_range [{first}, {last}] is outside the file's {} lines",
                            lines.len()
                        )));
                    }
                    (first, last)
                }
                Some(_) => return Ok(fail("view_range is two line numbers")),
                None => (1, lines.len()),
            };
            let shown = lines[first.saturating_sub(1)..last].join("\n");
            return Ok(ok(numbered(&shown, first)));
        }
        // Not a readable file: list it as a folder, two levels deep, hidden entries left out.
        let out = container
            .exec(
                &ExecRequest::new(["find", path, "-maxdepth", "2", "-not", "-path", "*/.*"])
                    .with_timeout(timeout),
            )
            .await?;
        if out.success() {
            Ok(ok(out.text()))
        } else {
            Ok(fail(format!("{path}: no such file or folder")))
        }
    }

    /// Runs `search` with `args`.
    pub(crate) async fn search(
        container: &Container,
        repo_dir: &str,
        args: &Value,
        timeout: Duration,
    ) -> Result<ToolAnswer, swerve_sandbox::Error> {
        let Some(term) = args["search_term"].as_str().filter(|t| !t.is_empty()) else {
            return Ok(fail("search needs a non-empty `search_term`"));
        };
        let path = match args["path"].as_str() {
            Some(p) => match resolve(repo_dir, p) {
                Ok(p) => p,
                Err(e) => return Ok(fail(e)),
            },
            None => repo_dir.to_owned(),
        };
        let out = container
            .exec(
                &ExecRequest::new([
                    "grep",
                    "-rnIF",
                    "--exclude-dir=.git",
                    "-e",
                    term,
                    "--",
                    &path,
                ])
                .with_timeout(timeout)
                .with_output_cap(1 << 20, 0),
            )
            .await?;
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            return Ok(ok(format!("No matches for {term:?} in {path}")));
        }
        let mut answer = lines[..lines.len().min(MAX_MATCHES)].join("\n");
        if lines.len() > MAX_MATCHES || out.truncated {
            answer.push_str(&format!(
                "\n[more matches left out: narrow the search or the path; {} shown]",
                MAX_MATCHES.min(lines.len())
            ));
        }
        Ok(ok(answer))
    }
}

/// `old_str` replaced by `new_str`; it must occur exactly once. Returns the text and the line
/// where the change starts.
fn str_replace(text: &str, args: &Value) -> Result<(String, usize), String> {
    let Some(old) = args["old_str"].as_str().filter(|s| !s.is_empty()) else {
        return Err("str_replace needs a non-empty `old_str`".to_owned());
    };
    let new = args["new_str"].as_str().unwrap_or_default();
    match text.matches(old).count() {
        0 => Err("`old_str` does not occur in the file".to_owned()),
        1 => {
            let at = text.find(old).expect("counted once");
            let line = text[..at].matches('\n').count() + 1;
            Ok((text.replacen(old, new, 1), line))
        }
        n => Err(format!(
            "`old_str` occurs {n} times; include more context to make it unique"
        )),
    }
}

/// `new_str` inserted after line `insert_line` (0: at the top).
fn insert(text: &str, args: &Value) -> Result<(String, usize), String> {
    let Some(after) = args["insert_line"].as_u64() else {
        return Err("insert needs `insert_line`".to_owned());
    };
    let new = args["new_str"].as_str().unwrap_or_default();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let after = after as usize;
    if after > lines.len() {
        return Err(format!(
            "insert_line {after} is past the file's {} lines",
            lines.len()
        ));
    }
    let mut out: String = lines[..after].concat();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(new);
    if !new.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&lines[after..].concat());
    Ok((out, after + 1))
}

/// Lines around `line` (1-based), numbered.
fn snippet(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first = line.saturating_sub(4).max(1);
    let last = (line + 4).min(lines.len());
    if first > last {
        return String::new();
    }
    numbered(&lines[first - 1..last].join("\n"), first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn str_replace_needs_exactly_one_occurrence() {
        let text = "a = 1\nb = 2\nb = 2\n";
        let once = str_replace(text, &json!({"old_str": "a = 1", "new_str": "a = 3"}));
        assert_eq!(once, Ok(("a = 3\nb = 2\nb = 2\n".to_owned(), 1)));
        let twice = str_replace(text, &json!({"old_str": "b = 2", "new_str": ""}));
        assert!(twice.unwrap_err().contains("occurs 2 times"));
        assert!(str_replace(text, &json!({"old_str": "zzz"})).is_err());
    }

    #[test]
    fn insert_goes_after_the_line_and_keeps_lines_whole() {
        let text = "one\ntwo";
        let top = insert(text, &json!({"insert_line": 0, "new_str": "zero"}));
        assert_eq!(top, Ok(("zero\none\ntwo".to_owned(), 1)));
        let end = insert(text, &json!({"insert_line": 2, "new_str": "three\n"}));
        assert_eq!(end, Ok(("one\ntwo\nthree\n".to_owned(), 3)));
        assert!(insert(text, &json!({"insert_line": 3, "new_str": "x"})).is_err());
    }

    #[test]
    fn paths_resolve_against_the_repository_and_refuse_parent_steps() {
        assert_eq!(
            resolve("/testbed", "src/a.py").as_deref(),
            Ok("/testbed/src/a.py")
        );
        assert_eq!(resolve("/testbed/", "/etc/x").as_deref(), Ok("/etc/x"));
        assert!(resolve("/testbed", "../etc/passwd").is_err());
        assert_eq!(numbered("x\ny", 9), "     9\tx\n    10\ty\n");
    }
}
