//! The two ways an agent speaks (`docs/agent.md`): the text protocol of mini-swe-agent (one
//! fenced bash block per reply, a sentinel line to submit) and OpenAI tool calls (`bash`, a file
//! editor, search and submit, in the style of R2E-Gym's tools). The prompts are swerve's own
//! words; what is matched is the protocol: block tags, the sentinel, the observation's parts,
//! the output cap.

use serde_json::{Value, json};

/// The line that, printed first by a command that exits 0, submits the rest of its output as the
/// patch (mini-swe-agent's sentinel).
pub const SUBMIT_SENTINEL: &str = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

/// Observations of this many characters or more are cut to a head and a tail.
pub const OBSERVATION_CAP_CHARS: usize = 10_000;
/// Characters kept at each end of a cut observation.
const KEPT_CHARS: usize = 5_000;

/// Which protocol an episode speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// One fenced block tagged `mswea_bash_command` (or `bash`) per reply; submission by the
    /// sentinel.
    #[default]
    Text,
    /// OpenAI tool calls: `bash`, `str_replace_editor`, `search`, `submit`.
    Tools,
}

impl Protocol {
    /// `text` or `tools`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Text => "text",
            Protocol::Tools => "tools",
        }
    }
}

/// The system prompt.
pub(crate) fn system_prompt(protocol: Protocol) -> String {
    match protocol {
        Protocol::Text => format!(
            "You are a software engineer working in a shell on a code repository. Each of your \
             replies runs exactly one shell command.\n\n\
             Format: first explain your reasoning under a line `THOUGHT:`, then give the command \
             in one fenced block tagged `mswea_bash_command`, like this:\n\n\
             THOUGHT: I want to see the repository's files.\n\n\
             ```mswea_bash_command\nls -la\n```\n\n\
             Every command runs in a fresh `bash -c` in the repository's folder: `cd` and \
             variables do not carry over to the next command (chain with `&&`). Commands cannot \
             be interactive, have no network, and are stopped when they run too long. Long \
             output is cut in the middle.\n\n\
             When you are done, submit with a command whose output starts with the line \
             `{SUBMIT_SENTINEL}` followed by the diff of your changes, and nothing else in that \
             reply:\n\n\
             ```mswea_bash_command\necho {SUBMIT_SENTINEL} && git add -A && git diff --cached\n```"
        ),
        Protocol::Tools => "You are a software engineer working on a code repository through \
             tools: `bash` runs a shell command in the repository's folder (a fresh `bash -c` \
             each time, no network, stopped when it runs too long), `str_replace_editor` views, \
             creates and edits files, `search` finds text in files, and `submit` ends the task \
             with your changes to the repository as the answer. Call one tool per reply."
            .to_owned(),
    }
}

/// The task's first user message.
pub(crate) fn task_prompt(protocol: Protocol, repo_dir: &str, problem: &str) -> String {
    let how = match protocol {
        Protocol::Text => {
            "Change the repository's non-test files so that the issue is resolved, \
             check your change, then submit."
        }
        Protocol::Tools => {
            "Change the repository's non-test files so that the issue is \
             resolved, check your change, then call `submit`."
        }
    };
    format!(
        "The repository is checked out at {repo_dir}. Resolve this issue:\n\n\
         <issue>\n{problem}\n</issue>\n\n{how}"
    )
}

/// The answer to a reply that breaks the text protocol.
pub(crate) fn format_error_message(blocks: usize) -> String {
    let found = match blocks {
        0 => "no command block".to_owned(),
        n => format!("{n} command blocks"),
    };
    format!(
        "Format error: your reply had {found}. Reply with a `THOUGHT:` section and exactly one \
         fenced block tagged `mswea_bash_command` holding one command (chain several with \
         `&&`). To submit, run `echo {SUBMIT_SENTINEL} && git add -A && git diff --cached` as \
         that command."
    )
}

/// The command blocks of a text-protocol reply, in order: fenced blocks tagged
/// `mswea_bash_command` or `bash`.
pub(crate) fn command_blocks(reply: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        let tag = line.trim();
        let Some(tag) = tag.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.trim_end() != "```")
            .collect();
        if matches!(tag.trim(), "mswea_bash_command" | "bash") {
            blocks.push(body.join("\n"));
        }
    }
    blocks
}

/// How a command's output was captured: its head, its tail and the bytes between them that were
/// dropped.
#[derive(Debug, Clone, Default)]
pub(crate) struct Captured {
    /// The first bytes printed.
    pub head: Vec<u8>,
    /// The last bytes printed past the head.
    pub tail: Vec<u8>,
    /// Bytes dropped between them.
    pub elided: u64,
}

impl Captured {
    /// All that was printed, when nothing was dropped.
    pub(crate) fn whole(&self) -> Option<String> {
        (self.elided == 0).then(|| {
            let mut bytes = self.head.clone();
            bytes.extend_from_slice(&self.tail);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }

    /// Bytes printed in all.
    pub(crate) fn total_bytes(&self) -> u64 {
        (self.head.len() + self.tail.len()) as u64 + self.elided
    }
}

/// A command's output as the agent is shown it: whole when shorter than
/// [`OBSERVATION_CAP_CHARS`], else a warning, the first and last 5,000 characters and how many
/// were left out between them. Returns the text and the characters left out.
pub(crate) fn render_output(captured: &Captured) -> (String, u64) {
    let head = String::from_utf8_lossy(&captured.head);
    let tail = String::from_utf8_lossy(&captured.tail);
    let head_chars = head.chars().count();
    let tail_chars = tail.chars().count();
    let total = head_chars as u64 + tail_chars as u64 + captured.elided;
    if total < OBSERVATION_CAP_CHARS as u64 {
        return (format!("{head}{tail}"), 0);
    }
    let joined: String;
    let (first, last): (&str, &str) = if captured.elided == 0 {
        joined = format!("{head}{tail}");
        let start = char_index(&joined, KEPT_CHARS);
        let end = char_index(&joined, joined.chars().count() - KEPT_CHARS);
        (&joined[..start], &joined[end..])
    } else {
        let first = &head[..char_index(&head, KEPT_CHARS.min(head_chars))];
        let last = &tail[char_index(&tail, tail_chars.saturating_sub(KEPT_CHARS))..];
        (first, last)
    };
    let left_out = total - (first.chars().count() + last.chars().count()) as u64;
    let text = format!(
        "<warning>The output was too long ({total} characters): only its start and end are \
         shown. Narrow the command (grep, head, tail, sed -n) to see the rest.</warning>\n\
         <output_head>\n{first}\n</output_head>\n\
         <elided_chars>{left_out} characters left out</elided_chars>\n\
         <output_tail>\n{last}\n</output_tail>"
    );
    (text, left_out)
}

/// The byte index of character `n` of `s` (its length when `n` is past the end).
fn char_index(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// The observation of a text-protocol command: its exit status and its output (cut as
/// [`render_output`] cuts it), with a line saying when the command was killed at its limit.
pub(crate) fn observation(
    returncode: Option<i64>,
    output: &str,
    timed_out_after: Option<u64>,
) -> String {
    let mut text = String::new();
    if let Some(secs) = timed_out_after {
        text.push_str(&format!(
            "<warning>The command ran past its {secs} s limit and was killed; what it printed \
             before is below. Run long jobs with a timeout, or in smaller parts.</warning>\n"
        ));
    }
    let code = returncode.map_or_else(|| "killed".to_owned(), |c| c.to_string());
    text.push_str(&format!("<returncode>{code}</returncode>\n"));
    if output.starts_with("<warning>The output was too long") {
        text.push_str(output);
    } else {
        text.push_str(&format!("<output>\n{output}</output>"));
    }
    text
}

/// The patch a submission carries: the output after the sentinel line, when the command exited 0
/// and its output's first line is the sentinel.
pub(crate) fn submission(returncode: Option<i64>, output: &str) -> Option<String> {
    if returncode != Some(0) {
        return None;
    }
    let (first, rest) = output.split_once('\n').unwrap_or((output, ""));
    (first.trim() == SUBMIT_SENTINEL).then(|| rest.to_owned())
}

/// The tools offered by the tool-call protocol, as OpenAI's `tools` field takes them.
pub(crate) fn tool_schemas() -> Value {
    json!([
        {"type": "function", "function": {
            "name": "bash",
            "description": "Run a shell command in the repository's folder and see its exit status and output.",
            "parameters": {"type": "object", "properties": {
                "command": {"type": "string", "description": "The command, run with bash -c."}
            }, "required": ["command"]}
        }},
        {"type": "function", "function": {
            "name": "str_replace_editor",
            "description": "View a file or folder, create a file, replace a unique string in a file, insert text after a line, or undo the last edit of a file.",
            "parameters": {"type": "object", "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
                "path": {"type": "string", "description": "Absolute path, or relative to the repository."},
                "file_text": {"type": "string", "description": "create: the new file's content."},
                "old_str": {"type": "string", "description": "str_replace: the text to replace (must occur exactly once)."},
                "new_str": {"type": "string", "description": "str_replace: its replacement; insert: the text to insert."},
                "insert_line": {"type": "integer", "description": "insert: the line after which new_str goes (0: at the top)."},
                "view_range": {"type": "array", "items": {"type": "integer"}, "description": "view: first and last line (-1: to the end)."}
            }, "required": ["command", "path"]}
        }},
        {"type": "function", "function": {
            "name": "search",
            "description": "Find lines holding a text in a file or under a folder (the repository by default).",
            "parameters": {"type": "object", "properties": {
                "search_term": {"type": "string"},
                "path": {"type": "string"}
            }, "required": ["search_term"]}
        }},
        {"type": "function", "function": {
            "name": "submit",
            "description": "End the task: your changes to the repository are the answer.",
            "parameters": {"type": "object", "properties": {}}
        }}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tagged_block_is_an_action_and_other_fences_are_not() {
        let reply = "THOUGHT: look\n\n```mswea_bash_command\nls -la\n```\n";
        assert_eq!(command_blocks(reply), ["ls -la"]);
        let legacy = "THOUGHT: x\n```bash\ncat a &&\n  cat b\n```";
        assert_eq!(command_blocks(legacy), ["cat a &&\n  cat b"]);
        let python = "```python\nprint(1)\n```\nno command";
        assert!(command_blocks(python).is_empty());
        let two = "```bash\nls\n```\nthen\n```mswea_bash_command\npwd\n```";
        assert_eq!(command_blocks(two).len(), 2);
    }

    #[test]
    fn the_sentinel_submits_only_as_the_first_line_of_a_successful_command() {
        let out = format!("{SUBMIT_SENTINEL}\ndiff --git a/x b/x\n");
        assert_eq!(
            submission(Some(0), &out).as_deref(),
            Some("diff --git a/x b/x\n")
        );
        assert_eq!(submission(Some(1), &out), None);
        assert_eq!(submission(Some(0), &format!("x\n{out}")), None);
        assert_eq!(submission(Some(0), SUBMIT_SENTINEL).as_deref(), Some(""));
    }

    #[test]
    fn short_output_is_whole_and_long_output_keeps_both_ends() {
        let short = Captured {
            head: b"hello\n".to_vec(),
            ..Captured::default()
        };
        assert_eq!(render_output(&short), ("hello\n".to_owned(), 0));
        let long: String = (0..3000).map(|i| format!("{i:05}\n")).collect();
        let whole = Captured {
            head: long.as_bytes().to_vec(),
            ..Captured::default()
        };
        let (text, left_out) = render_output(&whole);
        assert_eq!(left_out, 18_000 - 10_000);
        assert!(text.contains("<output_head>\n00000\n"));
        assert!(text.ends_with("02999\n\n</output_tail>"));
        assert!(text.contains("<elided_chars>8000 characters left out</elided_chars>"));
        // A flood captured as head and tail with a gap: the gap counts as left out.
        let flood = Captured {
            head: vec![b'a'; 6000],
            tail: vec![b'z'; 6000],
            elided: 1_000_000,
        };
        let (text, left_out) = render_output(&flood);
        assert_eq!(left_out, 1_000_000 + 2000);
        assert!(text.contains(&format!("\n{}\n</output_head>", "a".repeat(5000))));
        assert!(text.contains(&format!("<output_tail>\n{}\n", "z".repeat(5000))));
    }

    #[test]
    fn observations_carry_the_exit_status_and_the_kill() {
        let obs = observation(Some(2), "no such file\n", None);
        assert_eq!(
            obs,
            "<returncode>2</returncode>\n<output>\nno such file\n</output>"
        );
        let killed = observation(None, "", Some(60));
        assert!(killed.starts_with("<warning>The command ran past its 60 s limit"));
        assert!(killed.contains("<returncode>killed</returncode>"));
    }
}
