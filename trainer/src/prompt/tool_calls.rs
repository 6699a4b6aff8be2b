//! Tool calls in a model's reply, in the Hermes format that Qwen's and other chat templates
//! teach: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks. `trainer serve`
//! answers them as OpenAI's `tool_calls`; the in-process agent policy gives them to the agent
//! loop the same way.

use serde_json::{Value, json};

/// The tool calls in `text` as OpenAI writes them (`id`, `type`, `function.name`,
/// `function.arguments` as a JSON string), and the text around them (trimmed when there are
/// calls). A block that is not such JSON stays in the text.
pub fn parse(text: &str) -> (String, Vec<Value>) {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut rest = text;
    let mut kept = String::new();
    let mut calls = Vec::new();
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else {
            break;
        };
        let body = after[..end].trim();
        let parsed = serde_json::from_str::<Value>(body).ok().and_then(|v| {
            let name = v.get("name")?.as_str()?.to_owned();
            let arguments = match v.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "{}".to_owned(),
            };
            Some((name, arguments))
        });
        match parsed {
            Some((name, arguments)) => {
                kept.push_str(&rest[..start]);
                calls.push(json!({
                    "id": format!("call_{}", calls.len()),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }));
            }
            None => kept.push_str(&rest[..start + OPEN.len() + end + CLOSE.len()]),
        }
        rest = &after[end + CLOSE.len()..];
    }
    kept.push_str(rest);
    let content = if calls.is_empty() {
        kept
    } else {
        kept.trim().to_owned()
    };
    (content, calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_blocks_become_tool_calls_and_the_rest_stays_text() {
        let (text, calls) = parse(
            "Let me look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
        );
        assert_eq!(text, "Let me look.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["function"]["name"], "bash");
        assert_eq!(calls[0]["function"]["arguments"], "{\"command\":\"ls\"}");
        let (text, calls) = parse("<tool_call>not json</tool_call> tail");
        assert_eq!(
            (text.as_str(), calls.len()),
            ("<tool_call>not json</tool_call> tail", 0)
        );
        let (text, calls) = parse("plain");
        assert_eq!((text.as_str(), calls.len()), ("plain", 0));
    }
}
