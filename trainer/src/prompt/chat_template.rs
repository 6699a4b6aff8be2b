//! A checkpoint's own Hugging Face chat template, rendered as `transformers`' `apply_chat_template`
//! renders it, so that a chat model is prompted in the turn format it was tuned on.
//!
//! The template is the `chat_template` field of the checkpoint's `tokenizer_config.json` (a
//! string, or a list of `{name, template}` entries of which the one named `default` is used), or
//! the file `chat_template.jinja` beside it, which wins when both exist, as in `transformers`.
//! Templates are Jinja; they run on minijinja in the environment `transformers` sets up:
//! `trim_blocks` and `lstrip_blocks` on, `{% break %}` and `{% continue %}`, `raise_exception(msg)`
//! (a render error carrying `msg`), `strftime_now(format)`, and a `tojson` filter that writes what
//! Python's `json.dumps` writes (`", "` and `": "` separators, no HTML escaping). Python's string
//! and dict methods (`.strip()`, `.startswith()`, `.split()`, `.items()`) come from
//! minijinja-contrib's `pycompat` layer.
//!
//! A template sees what `transformers` passes it: `messages` (a list of `{role, content}` maps),
//! `add_generation_prompt`, `tools` and `documents` (both `none`: swerve offers no tools), and the
//! special tokens the config names (`bos_token`, `eos_token`, `pad_token`, `unk_token`, each a
//! string, or an object whose `content` is one). `date_string` is not passed, as `transformers`
//! does not pass it, so a template falls back to its own default (Llama 3.1's `26 Jul 2024`).
//! One deliberate difference keeps prompts reproducible: `strftime_now` formats the fixed moment
//! [`FIXED_NOW`], not the clock, so a template that dates its system turn (Llama 3.2) gives the
//! same prompt on every run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, Value};
use minijinja::{Environment, ErrorKind};

use swerve_swebench::pyjson::{self, Dumps};

use crate::error::{Error, IoOp, Result};

/// The file in a checkpoint folder that holds the template and the special tokens.
pub(crate) const CONFIG_FILE: &str = "tokenizer_config.json";

/// The file newer `transformers` versions write the template to; it wins over the config's field.
pub(crate) const JINJA_FILE: &str = "chat_template.jinja";

/// The moment `strftime_now` formats: 2026-01-01 00:00:00, a Thursday, with no time zone (as
/// Python's naive `datetime.now()`).
pub const FIXED_NOW: &str = "2026-01-01 00:00:00";

/// The template's name inside minijinja: render errors read `(in chat_template:LINE)`, with the
/// line counted in the template's own text.
const TEMPLATE_NAME: &str = "chat_template";

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The turn's text.
    pub content: String,
}

impl ChatMessage {
    /// A turn of `role` saying `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A map with `role` before `content`, in that order, as the Python dicts `transformers` is given:
/// `tojson` of a message then writes its keys in the same order.
impl Object for ChatMessage {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(Value::from(self.role.as_str())),
            "content" => Some(Value::from(self.content.as_str())),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}

/// The special tokens a template may print, as strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SpecialTokens {
    bos: Option<String>,
    eos: Option<String>,
    pad: Option<String>,
    unk: Option<String>,
}

impl SpecialTokens {
    fn from_config(config: &serde_json::Value, path: &Path) -> Result<Self> {
        Ok(Self {
            bos: special_token(config, "bos_token", path)?,
            eos: special_token(config, "eos_token", path)?,
            pad: special_token(config, "pad_token", path)?,
            unk: special_token(config, "unk_token", path)?,
        })
    }

    fn named(&self) -> [(&'static str, Option<&str>); 4] {
        [
            ("bos_token", self.bos.as_deref()),
            ("eos_token", self.eos.as_deref()),
            ("pad_token", self.pad.as_deref()),
            ("unk_token", self.unk.as_deref()),
        ]
    }
}

/// A compiled chat template with the special tokens of its checkpoint.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    path: PathBuf,
    tokens: SpecialTokens,
    env: Arc<Environment<'static>>,
}

impl ChatTemplate {
    /// The chat template of the checkpoint in `dir`: `chat_template.jinja` when present, else the
    /// `chat_template` field of `tokenizer_config.json`; `None` when the checkpoint has neither
    /// (no such file, or the field is absent or `null`). Errors name the file that is unreadable,
    /// malformed or whose template does not compile.
    pub fn from_checkpoint(dir: &Path) -> Result<Option<Self>> {
        let config_path = dir.join(CONFIG_FILE);
        let config = match read_if_present(&config_path)? {
            Some(text) => Some(serde_json::from_str::<serde_json::Value>(&text).map_err(
                |source| Error::Json {
                    path: config_path.clone(),
                    source,
                },
            )?),
            None => None,
        };
        let tokens = match &config {
            Some(config) => SpecialTokens::from_config(config, &config_path)?,
            None => SpecialTokens::default(),
        };
        let jinja_path = dir.join(JINJA_FILE);
        if let Some(source) = read_if_present(&jinja_path)? {
            return Self::compile(source, tokens, jinja_path).map(Some);
        }
        let Some(config) = config else {
            return Ok(None);
        };
        match template_field(&config, &config_path)? {
            Some(source) => Self::compile(source, tokens, config_path).map(Some),
            None => Ok(None),
        }
    }

    fn compile(source: String, tokens: SpecialTokens, path: PathBuf) -> Result<Self> {
        let mut env = Environment::new();
        // transformers' `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`;
        // `keep_trailing_newline` stays off, as in Jinja2.
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| template_error(&path, "cannot set up Jinja", &e))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |format: String| strftime_fixed(&format));
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, source)
            .map_err(|e| template_error(&path, "does not compile", &e))?;
        Ok(Self {
            path,
            tokens,
            env: Arc::new(env),
        })
    }

    /// The conversation `messages` as the template writes it; with `add_generation_prompt` it
    /// ends with an open assistant turn, the point where the model's answer starts. A template
    /// that calls `raise_exception` fails with its message.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| Value::from_object(m.clone()))
            .collect();
        self.render_context(messages, Value::from(()), add_generation_prompt)
    }

    /// Renders the template with `transformers`' variables: `messages`, `tools`,
    /// `add_generation_prompt`, `documents` (none) and the special tokens.
    fn render_context(
        &self,
        messages: Vec<Value>,
        tools: Value,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let mut context = BTreeMap::from([
            ("messages", Value::from(messages)),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("tools", tools),
            ("documents", Value::from(())),
        ]);
        for (name, token) in self.tokens.named() {
            if let Some(token) = token {
                context.insert(name, Value::from(token));
            }
        }
        self.env
            .get_template(TEMPLATE_NAME)
            .and_then(|t| t.render(Value::from(context)))
            .map_err(|e| template_error(&self.path, "cannot render", &e))
    }

    /// The conversation `messages` as the template writes it, each message an OpenAI chat
    /// message as JSON (`role`, `content`, and `tool_calls` or `tool_call_id` where it has them),
    /// with `tools` (OpenAI's list of function schemas) given to the template as `tools`. Tool
    /// calls' `arguments` strings that hold a JSON object are given as that object, as
    /// templates expect (they write them with `tojson`).
    pub fn render_chat(
        &self,
        messages: &[serde_json::Value],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if let Some(calls) = m.get_mut("tool_calls").and_then(|c| c.as_array_mut()) {
                    for call in calls {
                        let target = match call.get_mut("function") {
                            Some(function) => function,
                            None => call,
                        };
                        if let Some(args) = target.get_mut("arguments")
                            && let Some(parsed) = args
                                .as_str()
                                .and_then(|text| {
                                    serde_json::from_str::<serde_json::Value>(text).ok()
                                })
                                .filter(serde_json::Value::is_object)
                        {
                            *args = parsed;
                        }
                    }
                }
                Value::from(minijinja::value::Serde(&m))
            })
            .collect();
        let tools = match tools {
            Some(t) => Value::from(minijinja::value::Serde(t)),
            None => Value::from(()),
        };
        self.render_context(messages, tools, add_generation_prompt)
    }

    /// Whether the template reads `tools` (it can show a model the tools it may call).
    pub fn takes_tools(&self) -> bool {
        self.env
            .get_template(TEMPLATE_NAME)
            .map(|t| t.undeclared_variables(false).contains("tools"))
            .unwrap_or(false)
    }

    /// The file the template came from (`tokenizer_config.json` or `chat_template.jinja`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `bos_token` of the checkpoint's config, if it names one.
    pub fn bos_token(&self) -> Option<&str> {
        self.tokens.bos.as_deref()
    }

    /// The `eos_token` of the checkpoint's config, if it names one: for chat models, the token
    /// that ends a turn (`<|im_end|>`, `<|eot_id|>`).
    pub fn eos_token(&self) -> Option<&str> {
        self.tokens.eos.as_deref()
    }
}

/// The file's text, or `None` when it does not exist.
fn read_if_present(path: &Path) -> Result<Option<String>> {
    match fs_err::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(IoOp::Read, path, e)),
    }
}

fn config_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::ChatTemplate {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// A minijinja error with everything it says: its message, where in the template, and the
/// errors it wraps (a failure inside a macro).
fn template_error(path: &Path, what: &str, error: &minijinja::Error) -> Error {
    let mut reason = format!("{what}: {error}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    config_error(path, reason)
}

/// `chat_template` as a string: itself, or the `default` entry of a list of named templates.
fn template_field(config: &serde_json::Value, path: &Path) -> Result<Option<String>> {
    match config.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(source)) => Ok(Some(source.clone())),
        Some(serde_json::Value::Array(entries)) => {
            let mut names = Vec::new();
            for entry in entries {
                let name = entry.get("name").and_then(serde_json::Value::as_str);
                let template = entry.get("template").and_then(serde_json::Value::as_str);
                let (Some(name), Some(template)) = (name, template) else {
                    return Err(config_error(
                        path,
                        "every entry of the `chat_template` list must be an object with string \
                         fields `name` and `template`",
                    ));
                };
                if name == "default" {
                    return Ok(Some(template.to_owned()));
                }
                names.push(name);
            }
            Err(config_error(
                path,
                format!(
                    "the `chat_template` list has no template named `default` (it has: {})",
                    names.join(", ")
                ),
            ))
        }
        Some(_) => Err(config_error(
            path,
            "`chat_template` must be a string or a list of {name, template} objects",
        )),
    }
}

/// A special token field: a string, an object with a `content` string (`AddedToken`), or absent
/// or `null`.
fn special_token(
    config: &serde_json::Value,
    field: &'static str,
    path: &Path,
) -> Result<Option<String>> {
    match config.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(token)) => Ok(Some(token.clone())),
        Some(serde_json::Value::Object(token)) => match token.get("content") {
            Some(serde_json::Value::String(content)) => Ok(Some(content.clone())),
            _ => Err(config_error(
                path,
                format!("`{field}` is an object without a `content` string"),
            )),
        },
        Some(_) => Err(config_error(
            path,
            format!("`{field}` must be a string or an object with a `content` string"),
        )),
    }
}

/// `raise_exception(message)`: stops rendering with `message`.
fn raise_exception(message: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)` at [`FIXED_NOW`]: what Python's `strftime` on glibc writes for that
/// moment, `%-d`-style unpadded fields included. A directive it does not know is written as it
/// stands, as glibc does.
fn strftime_fixed(format: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut directive = chars.next();
        let unpadded = directive == Some('-');
        if unpadded {
            directive = chars.next();
        }
        // (zero-padded, unpadded)
        let field = match directive {
            Some('a') => ("Thu", "Thu"),
            Some('A') => ("Thursday", "Thursday"),
            Some('b' | 'h') => ("Jan", "Jan"),
            Some('B') => ("January", "January"),
            Some('d' | 'm' | 'V') => ("01", "1"),
            Some('e') => (" 1", "1"),
            Some('y' | 'g') => ("26", "26"),
            Some('Y' | 'G') => ("2026", "2026"),
            Some('C') => ("20", "20"),
            Some('H' | 'M' | 'S' | 'U' | 'W') => ("00", "0"),
            Some('I') => ("12", "12"),
            Some('p') => ("AM", "AM"),
            Some('j') => ("001", "1"),
            Some('u' | 'w') => ("4", "4"),
            Some('D' | 'x') => ("01/01/26", "01/01/26"),
            Some('F') => ("2026-01-01", "2026-01-01"),
            Some('T' | 'X') => ("00:00:00", "00:00:00"),
            Some('R') => ("00:00", "00:00"),
            Some('r') => ("12:00:00 AM", "12:00:00 AM"),
            Some('c') => ("Thu Jan  1 00:00:00 2026", "Thu Jan  1 00:00:00 2026"),
            Some('z' | 'Z') => ("", ""),
            Some('n') => ("\n", "\n"),
            Some('t') => ("\t", "\t"),
            Some('%') => ("%", "%"),
            other => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.extend(other);
                continue;
            }
        };
        out.push_str(if unpadded { field.1 } else { field.0 });
    }
    out
}

/// `tojson` as `transformers` defines it: Python's `json.dumps(value, ensure_ascii=False,
/// indent=indent, sort_keys=sort_keys)`, so `{"a": 1, "b": [1, 2]}` with spaces after `,` and
/// `:`, non-ASCII text as it is, and no HTML escaping ([`swerve_swebench::pyjson`]).
fn tojson(value: &Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let options = Dumps {
        indent: kwargs.get("indent")?,
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let text = pyjson::dumps(value, options).map_err(|e| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: {} is not JSON serializable: {e}", value.kind()),
        )
    })?;
    Ok(Value::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(config: serde_json::Value) -> ChatTemplate {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
        ChatTemplate::from_checkpoint(dir.path()).unwrap().unwrap()
    }

    fn render_source(source: &str, messages: &[ChatMessage]) -> Result<String> {
        template(serde_json::json!({ "chat_template": source })).render(messages, true)
    }

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hi"),
        ]
    }

    #[test]
    fn blocks_trim_their_newline_and_leading_space_as_in_transformers() {
        let source = "{% for m in messages %}\n  {% if m.role %}\n{{ m.role }}\n  {% endif %}\n\
                      {% endfor %}\n";
        assert_eq!(
            render_source(source, &conversation()).unwrap(),
            "system\nuser\n"
        );
    }

    #[test]
    fn raise_exception_fails_with_its_message() {
        let source = "{% if messages[0].role == 'system' %}\
                      {{ raise_exception('System role not supported') }}{% endif %}";
        let err = render_source(source, &conversation()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("System role not supported"), "{text}");
        assert!(text.contains(CONFIG_FILE), "{text}");
    }

    #[test]
    fn strftime_now_formats_the_fixed_date() {
        let source =
            "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%-d %B %Y, %A %H:%M %j %%') }}";
        assert_eq!(
            render_source(source, &[]).unwrap(),
            "01 Jan 2026|1 January 2026, Thursday 00:00 001 %"
        );
    }

    #[test]
    fn strftime_fixed_writes_what_python_writes_on_linux() {
        // Python 3.11 on glibc: datetime(2026, 1, 1).strftime(...) of the same format.
        let format = "%a %A %b %h %B %d %m %V %e %y %g %Y %G %C %H %M %S %U %W %I %p %j %u %w %D \
                      %x %F %T %X %R %r %c [%z] [%Z] %n%t%% %q %-d %-m %-H %-j %-e";
        assert_eq!(
            strftime_fixed(format),
            "Thu Thursday Jan Jan January 01 01 01  1 26 26 2026 2026 20 00 00 00 00 00 12 AM 001 \
             4 4 01/01/26 01/01/26 2026-01-01 00:00:00 00:00:00 00:00 12:00:00 AM \
             Thu Jan  1 00:00:00 2026 [] [] \n\t% %q 1 1 0 1 1"
        );
    }

    #[test]
    fn tools_and_documents_are_none_and_date_string_undefined() {
        let source = "{{ tools is none }} {{ documents is none }} {{ date_string is defined }} \
                      {{ add_generation_prompt }}";
        assert_eq!(render_source(source, &[]).unwrap(), "True True False True");
    }

    #[test]
    fn python_string_methods_work() {
        let source = "{% for m in messages %}{{ m.content.strip().split(' ')[0] }}\
                      {{ m.role.startswith('sys') }};{% endfor %}";
        let messages = [ChatMessage::new("system", "  Be brief.  ")];
        assert_eq!(render_source(source, &messages).unwrap(), "BeTrue;");
    }

    #[test]
    fn tojson_writes_what_json_dumps_writes() {
        let source = "{{ messages[0] | tojson }}|{{ {'b': [1, 2.5, none, true], 'a': 'é<\"'} | tojson }}|\
                      {{ {'b': 1, 'a': {}} | tojson(indent=2, sort_keys=true) }}|{{ [1e-05, 1e16] | tojson }}";
        let messages = [ChatMessage::new("user", "x\ny")];
        assert_eq!(
            render_source(source, &messages).unwrap(),
            "{\"role\": \"user\", \"content\": \"x\\ny\"}|\
             {\"b\": [1, 2.5, null, true], \"a\": \"é<\\\"\"}|\
             {\n  \"a\": {},\n  \"b\": 1\n}|[1e-05, 1e+16]"
        );
    }

    #[test]
    fn special_tokens_may_be_objects_with_content() {
        let t = template(serde_json::json!({
            "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
            "bos_token": { "__type": "AddedToken", "content": "<s>", "lstrip": false },
            "eos_token": "</s>",
        }));
        assert_eq!(t.bos_token(), Some("<s>"));
        assert_eq!(t.eos_token(), Some("</s>"));
        assert_eq!(
            t.render(&conversation(), false).unwrap(),
            "<s>Be brief.</s>"
        );
    }

    #[test]
    fn a_list_of_templates_uses_the_default_one() {
        let t = template(serde_json::json!({ "chat_template": [
            { "name": "tool_use", "template": "tools" },
            { "name": "default", "template": "default" },
        ]}));
        assert_eq!(t.render(&[], true).unwrap(), "default");
    }

    #[test]
    fn a_list_without_default_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({ "chat_template": [{ "name": "rag", "template": "x" }] });
        fs_err::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
        let err = ChatTemplate::from_checkpoint(dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(CONFIG_FILE) && err.contains("`default`"),
            "{err}"
        );
        assert!(err.contains("rag"), "{err}");
    }

    #[test]
    fn jinja_file_wins_over_the_config_field() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({ "chat_template": "config", "eos_token": "<e>" });
        fs_err::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
        fs_err::write(dir.path().join(JINJA_FILE), "file {{ eos_token }}\n").unwrap();
        let t = ChatTemplate::from_checkpoint(dir.path()).unwrap().unwrap();
        assert_eq!(t.path(), dir.path().join(JINJA_FILE));
        assert_eq!(t.render(&[], false).unwrap(), "file <e>");
    }

    #[test]
    fn no_template_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ChatTemplate::from_checkpoint(dir.path()).unwrap().is_none());
        let config = serde_json::json!({ "eos_token": "</s>", "chat_template": null });
        fs_err::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
        assert!(ChatTemplate::from_checkpoint(dir.path()).unwrap().is_none());
    }

    #[test]
    fn a_template_that_does_not_compile_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({ "chat_template": "{% if %}" });
        fs_err::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
        let err = ChatTemplate::from_checkpoint(dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(CONFIG_FILE) && err.contains("does not compile"),
            "{err}"
        );
    }
}
