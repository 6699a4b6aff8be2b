//! Prompts that ask a model to fix an issue in the SWE-RL output format (see `swerve_swe_rl`):
//! reasoning between `<think>` tags, then SEARCH/REPLACE edit blocks between `<solution>` tags.
//!
//! The instruction text is swerve's own wording. The code is shown the way the reward expects
//! paths to be named: every file as a `### <path>` header line followed by its text, files
//! separated by a blank line, all inside one fenced block.
//!
//! Four renderings: [`PromptFormat::Template`] for chat-tuned models, through the checkpoint's own
//! Hugging Face chat template ([`chat_template`]: the instructions as the system turn, the
//! task as the user turn, an open assistant turn after them, as `transformers` renders it);
//! [`PromptFormat::ChatMl`], Qwen2's `<|im_start|>` turns written out by swerve, for checkpoints
//! without a template; [`PromptFormat::Plain`], the same instructions as plain text for models
//! without a chat format; and [`PromptFormat::Bare`], the task alone, for tiny models trained from
//! scratch that learn the format by supervised warm-up, where instructions would only lengthen
//! every sequence.
//!
//! [`render_localization`] is the first step of localise-then-repair: the issue and the
//! repository's file paths, asking which files to change, wrapped the same way per format.
//!
//! [`focus`] shortens the files to the regions an oracle change touches, for short CPU training
//! sequences; it uses the answer, so it is for warm-up and demonstrations, not for evaluation.

pub mod chat_template;
pub mod tool_calls;

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::prompt::chat_template::{ChatMessage, ChatTemplate};

/// What the prompt tells the model to do and how to lay out its answer.
pub const INSTRUCTIONS: &str = "\
You are a software engineer working on a repository. Below are an issue report and the source \
files that matter for it. Find the cause of the problem and change the code so that the issue \
is resolved.

Answer in two parts. First write your reasoning between <think> and </think>. Then write the \
change between <solution> and </solution> as one or more edit blocks. Every edit block is a \
fenced code block of its own, laid out like this:

```python
### path/to/module.py
<<<<<<< SEARCH
lines copied from the current file
=======
the lines that take their place
>>>>>>> REPLACE
```

How to write edit blocks:
- Name the file exactly as its `###` header names it below.
- Copy the SEARCH lines from the current file character for character, indentation included, \
and take enough of them that they occur in one place only.
- To add a new file, make the SEARCH part a single empty line and put the whole file in the \
REPLACE part.
- Change several places with several blocks.";

/// How the instructions and the task are wrapped into one prompt string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PromptFormat {
    /// Plain text: instructions, the task, then an `Answer:` line. For models without a chat
    /// template (the tiny models swerve trains from scratch).
    #[default]
    Plain,
    /// The task text and the `Answer:` line, without instructions: for tiny models that learn
    /// the output format from SFT examples.
    Bare,
    /// ChatML turns (`<|im_start|>system … <|im_end|>`), as Qwen2 chat models expect, ending with
    /// an open assistant turn.
    ChatMl,
    /// The checkpoint's own chat template (`tokenizer_config.json`), ending with an open
    /// assistant turn. Rendering needs the template: see [`render`].
    Template,
}

impl std::str::FromStr for PromptFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "plain" => Ok(PromptFormat::Plain),
            "bare" => Ok(PromptFormat::Bare),
            "chatml" => Ok(PromptFormat::ChatMl),
            "template" => Ok(PromptFormat::Template),
            other => Err(format!(
                "unknown prompt format `{other}` (plain, bare, chatml, template)"
            )),
        }
    }
}

/// One task to prompt for: the issue text and the files to show (path → text).
#[derive(Debug, Clone, Copy)]
pub struct PromptTask<'a> {
    /// The issue report.
    pub problem_statement: &'a str,
    /// The files shown to the model, in path order.
    pub files: &'a BTreeMap<String, String>,
}

/// The user part of the prompt: the issue, then the files in one fenced block.
pub fn task_text(task: &PromptTask<'_>) -> String {
    let mut body = String::new();
    for (i, (path, text)) in task.files.iter().enumerate() {
        if i > 0 {
            body.push('\n');
        }
        body.push_str("### ");
        body.push_str(path);
        body.push('\n');
        body.push_str(text);
        if !text.ends_with('\n') {
            body.push('\n');
        }
    }
    format!(
        "Issue:\n{}\n\nSource files:\n{}",
        task.problem_statement.trim_end(),
        fenced(&body)
    )
}

/// `body` (ending with a newline) in a fence longer than any backtick run inside it, so that a
/// file's own code fences cannot close it.
fn fenced(body: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(body).max(2) + 1);
    format!("{fence}\n{body}{fence}")
}

/// The full prompt for `task` in `format`. The model's answer is expected to follow it directly.
///
/// [`PromptFormat::Template`] renders through `chat_template`, the model's own, and fails with
/// [`Error::NoChatTemplate`] without it, or with the template's error when it raises one; the
/// other formats ignore it and do not fail.
pub fn render(
    task: &PromptTask<'_>,
    format: PromptFormat,
    chat_template: Option<&ChatTemplate>,
) -> Result<String> {
    wrap(INSTRUCTIONS, &task_text(task), format, chat_template)
}

/// What the localisation prompt tells the model to do (`trainer predict --retriever model`).
pub const LOCALIZE_INSTRUCTIONS: &str = "\
You are a software engineer working on a repository. Below are an issue report and the paths of \
the repository's files. Name the files that must be changed to resolve the issue.

Answer with paths only: one path per line, the most likely file first, each written exactly as \
it is listed. Name at most five files and write nothing else.";

/// The user part of a localisation prompt: the issue, then `paths` one per line in one fenced
/// block, then how many paths of the repository were `not_listed` (when any were).
pub(crate) fn localization_text(
    problem_statement: &str,
    paths: &[&str],
    not_listed: usize,
) -> String {
    let body: String = paths.iter().map(|p| format!("{p}\n")).collect();
    let note = if not_listed > 0 {
        format!("\n({not_listed} more files are not listed.)")
    } else {
        String::new()
    };
    format!(
        "Issue:\n{}\n\nRepository files:\n{}{note}\n\nWhich files must change?",
        problem_statement.trim_end(),
        fenced(&body)
    )
}

/// The localisation prompt (the issue and the repository's file paths, asking which files to
/// change) in `format`, wrapped as [`render`] wraps a task: the same layout per format, with
/// [`LOCALIZE_INSTRUCTIONS`] in place of [`INSTRUCTIONS`] ([`PromptFormat::Bare`] shows no
/// instructions; the question ends the user text in every format).
pub fn render_localization(
    problem_statement: &str,
    paths: &[&str],
    not_listed: usize,
    format: PromptFormat,
    chat_template: Option<&ChatTemplate>,
) -> Result<String> {
    let user = localization_text(problem_statement, paths, not_listed);
    wrap(LOCALIZE_INSTRUCTIONS, &user, format, chat_template)
}

/// `instructions` and the `user` text in `format`'s layout, ending where the model's answer
/// starts.
fn wrap(
    instructions: &str,
    user: &str,
    format: PromptFormat,
    chat_template: Option<&ChatTemplate>,
) -> Result<String> {
    Ok(match format {
        PromptFormat::Plain => format!("{instructions}\n\n{user}\n\nAnswer:\n"),
        PromptFormat::Bare => format!("{user}\n\nAnswer:\n"),
        PromptFormat::ChatMl => format!(
            "<|im_start|>system\n{instructions}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n\
             <|im_start|>assistant\n"
        ),
        PromptFormat::Template => {
            let messages = [
                ChatMessage::new("system", instructions),
                ChatMessage::new("user", user),
            ];
            chat_template
                .ok_or(Error::NoChatTemplate)?
                .render(&messages, true)?
        }
    })
}

/// The files an oracle change touches, each cut down to its changed lines plus `radius` lines
/// of context on either side; elided stretches are shown as a line `...`. Files the oracle does
/// not change are left out; a file the oracle creates is shown empty.
///
/// Every line shown is a line of the original file, so SEARCH parts copied from the shortened
/// view still match the full file that the reward applies them to.
pub fn focus(
    code_context: &BTreeMap<String, String>,
    oracle_new_content: &BTreeMap<String, String>,
    radius: usize,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (path, new) in oracle_new_content {
        let old = code_context.get(path).map_or("", String::as_str);
        if old == new {
            continue;
        }
        let (lines, new_lines) = (text_lines(old), text_lines(new));
        let matcher = swerve_swe_rl::difflib::SequenceMatcher::new(
            &lines,
            &new_lines,
            swerve_swe_rl::difflib::Autojunk::Off,
        );
        let mut keep = vec![false; lines.len()];
        for group in matcher.grouped_opcodes(radius) {
            let (start, end) = (group[0].i1, group[group.len() - 1].i2);
            keep[start..end].iter_mut().for_each(|k| *k = true);
        }
        let mut shown = String::new();
        let mut elided = false;
        for (line, kept) in lines.iter().zip(&keep) {
            if *kept {
                shown.push_str(line);
                shown.push('\n');
                elided = false;
            } else if !elided {
                shown.push_str("...\n");
                elided = true;
            }
        }
        out.insert(path.clone(), shown);
    }
    out
}

/// The lines of `text` without terminators; a final newline does not start another line.
fn text_lines(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        Vec::new()
    } else {
        text.split('\n').collect()
    }
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut best, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn task_text_lists_files_under_headers_in_one_fence() {
        let files = files(&[("b.py", "y = 2\n"), ("a.py", "x = 1")]);
        let text = task_text(&PromptTask {
            problem_statement: "It breaks.\n",
            files: &files,
        });
        assert_eq!(
            text,
            "Issue:\nIt breaks.\n\nSource files:\n```\n### a.py\nx = 1\n\n### b.py\ny = 2\n```"
        );
    }

    #[test]
    fn fence_outgrows_backticks_in_files() {
        let files = files(&[("README.md", "```sh\nmake\n```\n")]);
        let text = task_text(&PromptTask {
            problem_statement: "Docs.",
            files: &files,
        });
        assert!(text.contains("\n````\n### README.md\n"), "{text}");
        assert!(text.ends_with("```\n````"), "{text}");
    }

    #[test]
    fn formats_wrap_the_same_task() {
        let files = files(&[("a.py", "x = 1\n")]);
        let task = PromptTask {
            problem_statement: "Issue text",
            files: &files,
        };
        let plain = render(&task, PromptFormat::Plain, None).unwrap();
        assert!(plain.starts_with(INSTRUCTIONS));
        assert!(plain.ends_with("```\n\nAnswer:\n"));
        let bare = render(&task, PromptFormat::Bare, None).unwrap();
        assert_eq!(bare, format!("{}\n\nAnswer:\n", task_text(&task)));
        let chat = render(&task, PromptFormat::ChatMl, None).unwrap();
        assert!(chat.starts_with("<|im_start|>system\nYou are"));
        assert!(chat.ends_with("<|im_end|>\n<|im_start|>assistant\n"));
        assert!(chat.contains(&task_text(&task)));
    }

    #[test]
    fn localization_prompt_lists_paths_and_counts_the_rest() {
        let text = localization_text("It breaks.\n", &["a.py", "pkg/b.py"], 3);
        assert_eq!(
            text,
            "Issue:\nIt breaks.\n\nRepository files:\n```\na.py\npkg/b.py\n```\n\
             (3 more files are not listed.)\n\nWhich files must change?"
        );
        assert!(!localization_text("x", &["a.py"], 0).contains("not listed"));
        let plain = render_localization("x", &["a.py"], 0, PromptFormat::Plain, None).unwrap();
        assert!(plain.starts_with(LOCALIZE_INSTRUCTIONS), "{plain}");
        assert!(
            plain.ends_with("Which files must change?\n\nAnswer:\n"),
            "{plain}"
        );
        let qwen = fixture_template("qwen2.5-instruct");
        assert_eq!(
            render_localization("x", &["a.py"], 0, PromptFormat::Template, Some(&qwen)).unwrap(),
            render_localization("x", &["a.py"], 0, PromptFormat::ChatMl, None).unwrap()
        );
    }

    fn fixture_template(name: &str) -> ChatTemplate {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/chat_templates")
            .join(name);
        ChatTemplate::from_checkpoint(&dir).unwrap().unwrap()
    }

    #[test]
    fn qwen_template_renders_what_chatml_writes() {
        let files = files(&[("a.py", "x = 1\n")]);
        let task = PromptTask {
            problem_statement: "Issue text",
            files: &files,
        };
        let qwen = fixture_template("qwen2.5-instruct");
        assert_eq!(
            render(&task, PromptFormat::Template, Some(&qwen)).unwrap(),
            render(&task, PromptFormat::ChatMl, None).unwrap()
        );
    }

    #[test]
    fn llama_template_puts_instructions_after_its_date_header() {
        let files = files(&[("a.py", "x = 1\n")]);
        let task = PromptTask {
            problem_statement: "Issue text",
            files: &files,
        };
        let llama = fixture_template("llama-3.1-instruct");
        let prompt = render(&task, PromptFormat::Template, Some(&llama)).unwrap();
        assert_eq!(
            prompt,
            format!(
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
                 Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n\
                 {INSTRUCTIONS}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{}\
                 <|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                task_text(&task)
            )
        );
    }

    #[test]
    fn template_format_without_a_template_is_an_error() {
        let files = files(&[("a.py", "x = 1\n")]);
        let task = PromptTask {
            problem_statement: "Issue text",
            files: &files,
        };
        let err = render(&task, PromptFormat::Template, None).unwrap_err();
        assert!(matches!(err, Error::NoChatTemplate), "{err}");
        assert_eq!("template".parse(), Ok(PromptFormat::Template));
    }

    #[test]
    fn instructions_teach_every_marker_of_the_format() {
        for marker in [
            "<think>",
            "</think>",
            "<solution>",
            "</solution>",
            "\n### path/to/module.py\n",
            "\n<<<<<<< SEARCH\n",
            "\n=======\n",
            "\n>>>>>>> REPLACE\n",
        ] {
            assert!(INSTRUCTIONS.contains(marker), "{marker}");
        }
    }

    #[test]
    fn focus_keeps_changed_regions_with_context() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let shown = focus(
            &files(&[("m.py", &old), ("other.py", "z\n")]),
            &files(&[("m.py", &new), ("other.py", "z\n")]),
            2,
        );
        assert_eq!(shown.len(), 1, "unchanged files are left out");
        assert_eq!(
            shown["m.py"],
            "...\nline 8\nline 9\nline 10\nline 11\nline 12\n...\n"
        );
    }

    #[test]
    fn focus_shows_a_new_file_empty() {
        let shown = focus(&BTreeMap::new(), &files(&[("new.py", "x = 1\n")]), 2);
        assert_eq!(shown["new.py"], "");
    }
}
