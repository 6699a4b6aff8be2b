//! Training data: task rows (a dataset line with the files that prompts and rewards need),
//! their prompts, gold SEARCH/REPLACE completions, and prompt/completion pairs for SFT.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use swerve_swebench::Instance;

use crate::error::{Error, IoOp, Result};
use crate::prompt::chat_template::{CONFIG_FILE, ChatTemplate};
use crate::prompt::{self, PromptFormat, PromptTask};

/// Reads task rows of `--dataset`: a `.jsonl`, `.json` or `.parquet` file of SWE-bench-style
/// rows ([`Instance`]) that carry `code_context` and `oracle_new_content`, a folder of them
/// (`split` picks `<split>.jsonl`), `swerve-mini`, the bundled dataset, or a Hugging Face
/// dataset in the local cache ([`swerve_swebench::names`], as `harness run --dataset` reads it).
pub fn read_tasks(dataset: &Path, split: &str) -> Result<Vec<Instance>> {
    let files =
        swerve_swebench::names::rows_files(dataset, split).map_err(|e| Error::DatasetName {
            dataset: dataset.to_path_buf(),
            source: e,
        })?;
    let mut rows = Vec::new();
    // File by file, so that the error names the shard that cannot be read.
    for path in files.files() {
        rows.extend(swerve_swebench::dataset::read_rows(path).map_err(|source| {
            Error::Dataset {
                path: path.clone(),
                source,
            }
        })?);
    }
    Ok(rows)
}

/// One SFT example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftExample {
    /// The prompt (no loss on its tokens).
    pub prompt: String,
    /// The completion (the loss is on its tokens and the EOS appended after them).
    pub completion: String,
    /// Whether the prompt is encoded with the tokenizer's special tokens (the BOS its
    /// post-processor adds): false for a prompt rendered through the model's chat template,
    /// which already starts with them ([`Prompter::add_special_tokens`]). Default true.
    #[serde(default = "encode_with_special_tokens")]
    pub add_special_tokens: bool,
}

/// `SftExample::add_special_tokens`'s default: a plain-text prompt gets the tokenizer's BOS.
fn encode_with_special_tokens() -> bool {
    true
}

/// Reads a JSONL file of `{"prompt": ..., "completion": ...}` lines (with
/// `"add_special_tokens": false` on a line whose prompt already starts with the model's BOS).
pub(crate) fn read_sft_examples(path: &Path) -> Result<Vec<SftExample>> {
    read_jsonl(path)
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = fs_err::read_to_string(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| Error::Data {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// How a task becomes a prompt, as chosen: the flags' side of a [`Prompter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptStyle {
    /// Plain text, ChatML or the model's chat template.
    pub format: PromptFormat,
    /// Show only the oracle's changed regions with this many context lines ([`prompt::focus`]);
    /// `None` shows every file of `code_context` in full.
    pub focus: Option<usize>,
}

/// A [`PromptStyle`] ready to render tasks: with the model's chat template when the style's
/// format is [`PromptFormat::Template`].
#[derive(Debug, Clone)]
pub struct Prompter {
    style: PromptStyle,
    chat_template: Option<Arc<ChatTemplate>>,
}

/// A prompter without a chat template: right for every format but [`PromptFormat::Template`],
/// whose rendering then fails with [`Error::NoChatTemplate`].
impl From<PromptStyle> for Prompter {
    fn from(style: PromptStyle) -> Self {
        Self {
            style,
            chat_template: None,
        }
    }
}

impl Prompter {
    /// `style` for the model in `dir`: with the model's chat template when the format is
    /// [`PromptFormat::Template`] (an error naming the model's `tokenizer_config.json` when it has
    /// none); other formats read nothing.
    pub fn for_model(style: PromptStyle, dir: &Path) -> Result<Self> {
        if style.format != PromptFormat::Template {
            return Ok(style.into());
        }
        let template = ChatTemplate::from_checkpoint(dir)?.ok_or_else(|| Error::ChatTemplate {
            path: dir.join(CONFIG_FILE),
            reason: "the model has no chat template (no `chat_template` field, no \
                     chat_template.jinja beside it); use --prompt-format chatml or plain"
                .into(),
        })?;
        Ok(Self {
            style,
            chat_template: Some(Arc::new(template)),
        })
    }

    /// Whether the prompt is encoded with the tokenizer's special tokens (the BOS its
    /// post-processor adds): not for a chat template, whose text already starts with the tokens
    /// the model expects, as `transformers` and TRL encode it (`add_special_tokens=False`).
    pub fn add_special_tokens(&self) -> bool {
        self.style.format != PromptFormat::Template
    }

    /// The prompt for `task`; fails only for [`PromptFormat::Template`] (no template loaded, or
    /// the template raised an error).
    pub fn render(&self, task: &Instance) -> Result<String> {
        let focused;
        let files = match self.style.focus {
            Some(radius) => {
                focused = prompt::focus(&task.code_context, &task.oracle_new_content, radius);
                &focused
            }
            None => &task.code_context,
        };
        prompt::render(
            &PromptTask {
                problem_statement: task.problem_statement.as_deref().unwrap_or_default(),
                files,
            },
            self.style.format,
            self.chat_template.as_deref(),
        )
    }

    /// The localisation prompt for an issue (`trainer predict --retriever model`): the
    /// repository's `paths`, with `not_listed` more left out, in this prompter's format
    /// ([`prompt::render_localization`]; focus does not apply). Fails as [`Prompter::render`]
    /// does.
    pub fn render_localization(
        &self,
        problem_statement: &str,
        paths: &[&str],
        not_listed: usize,
    ) -> Result<String> {
        prompt::render_localization(
            problem_statement,
            paths,
            not_listed,
            self.style.format,
            self.chat_template.as_deref(),
        )
    }
}

/// The thought of gold completions: short, because it says nothing the edits do not.
pub(crate) const GOLD_THOUGHT: &str = "Make the change the issue asks for.";

/// The gold completion of `task` in the SWE-RL format: one SEARCH/REPLACE block per changed
/// region of each file (CPython `difflib` grouping with two context lines, as
/// `harness/samples/make_samples.py` renders them), a new file as one block with an empty
/// SEARCH part.
pub fn gold_completion(task: &Instance) -> String {
    let mut blocks = Vec::new();
    for (path, new) in &task.oracle_new_content {
        let old = task.code_context.get(path).map_or("", String::as_str);
        if old == new {
            continue;
        }
        if old.is_empty() {
            blocks.push(render_block(path, "", new));
            continue;
        }
        let (a, b): (Vec<&str>, Vec<&str>) = (old.split('\n').collect(), new.split('\n').collect());
        let matcher = swerve_swe_rl::difflib::SequenceMatcher::new(
            &a,
            &b,
            swerve_swe_rl::difflib::Autojunk::Off,
        );
        for group in matcher.grouped_opcodes(2) {
            let (first, last) = (group[0], group[group.len() - 1]);
            blocks.push(render_block(
                path,
                &a[first.i1..last.i2].join("\n"),
                &b[first.j1..last.j2].join("\n"),
            ));
        }
    }
    format!(
        "<think>\n{GOLD_THOUGHT}\n</think>\n<solution>\n{}\n</solution>",
        blocks.join("\n\n")
    )
}

fn render_block(path: &str, search: &str, replace: &str) -> String {
    format!(
        "```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"
    )
}

/// SFT examples from tasks: each task's prompt with its gold completion, encoded as `prompter`
/// says (without the tokenizer's BOS for a chat template, which writes its own).
pub(crate) fn gold_examples(tasks: &[Instance], prompter: &Prompter) -> Result<Vec<SftExample>> {
    tasks
        .iter()
        .map(|t| {
            Ok(SftExample {
                prompt: prompter.render(t)?,
                completion: gold_completion(t),
                add_special_tokens: prompter.add_special_tokens(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn task(old: &str, new: &str) -> Instance {
        Instance {
            instance_id: "o__r-1".into(),
            problem_statement: Some("Fix it.".into()),
            code_context: BTreeMap::from([("m.py".to_owned(), old.to_owned())]),
            oracle_new_content: BTreeMap::from([("m.py".to_owned(), new.to_owned())]),
            ..Instance::default()
        }
    }

    #[test]
    fn gold_completion_scores_one_with_the_swe_rl_reward() {
        let old: String = (1..=12).map(|i| format!("x{i} = {i}\n")).collect();
        let new = old
            .replace("x3 = 3\n", "x3 = 30\n")
            .replace("x10 = 10\n", "");
        let t = task(&old, &new);
        let completion = gold_completion(&t);
        assert_eq!(
            completion.matches("<<<<<<< SEARCH").count(),
            2,
            "{completion}"
        );
        let outcome = swerve_swe_rl::search_replace_reward(
            &t.code_context,
            &t.oracle_new_content,
            &completion,
        );
        assert_eq!(outcome.reward, 1.0, "{completion}");
    }

    #[test]
    fn bundled_dataset_gold_completions_are_perfect() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../harness/datasets/swerve-mini/swerve-mini.jsonl");
        let tasks = read_tasks(&path, "train").unwrap();
        assert_eq!(
            tasks,
            read_tasks(Path::new("swerve-mini"), "train").unwrap()
        );
        assert_eq!(tasks.len(), 13);
        for t in &tasks {
            let outcome = swerve_swe_rl::search_replace_reward(
                &t.code_context,
                &t.oracle_new_content,
                &gold_completion(t),
            );
            assert_eq!(outcome.reward, 1.0, "{}", t.instance_id);
        }
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        fs_err::write(
            &path,
            "{\"prompt\":\"p\",\"completion\":\"c\"}\n\n{\"prompt\":1}\n",
        )
        .unwrap();
        let err = read_sft_examples(&path).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
    }
}
