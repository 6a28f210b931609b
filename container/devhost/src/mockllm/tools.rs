//! Tool calls from the mock model, so end-to-end tests can drive Hermes'
//! tools (the contained terminal, over MCP) deterministically.
//!
//! `[mock:tool=NAME {json arguments}]` in the last user message makes the
//! model answer with one call of tool `NAME` (`finish_reason:
//! "tool_calls"`). When the conversation's last message is a tool result,
//! the model answers with text instead — `mock: tool result: <result>` —
//! which ends the turn (and lets the test assert what the tool returned).

use super::reply::{content_text, sse};
use serde_json::{json, Value};

/// Longest tool result echoed back.
const RESULT_MAX_CHARS: usize = 2_000;

/// A tool call the model makes: name and arguments (a JSON object, as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// The `[mock:tool=NAME {..}]` directive in `text`. The arguments must be a
/// JSON object; missing arguments mean `{}`; a malformed directive is none.
pub fn tool_directive(text: &str) -> Option<ToolCall> {
    let start = text.find("[mock:tool=")? + "[mock:tool=".len();
    let rest = &text[start..];
    let name_end = rest.find(|c: char| c.is_whitespace() || c == ']')?;
    let name = &rest[..name_end];
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return None;
    }
    let after = rest[name_end..].trim_start();
    let arguments = if after.starts_with('{') {
        let mut values = serde_json::Deserializer::from_str(after).into_iter::<Value>();
        match values.next() {
            Some(Ok(v @ Value::Object(_))) => v.to_string(),
            _ => return None,
        }
    } else {
        "{}".to_owned()
    };
    Some(ToolCall {
        name: name.to_owned(),
        arguments,
    })
}

/// The content of the last message when it is a tool result.
pub fn last_tool_result(request: &Value) -> Option<String> {
    let last = request.get("messages")?.as_array()?.last()?;
    if last.get("role").and_then(Value::as_str) != Some("tool") {
        return None;
    }
    Some(
        content_text(last.get("content"))
            .chars()
            .take(RESULT_MAX_CHARS)
            .collect(),
    )
}

/// The text answer to a tool result.
pub fn result_reply(result: &str) -> String {
    format!("mock: tool result: {}", result.trim())
}

/// A non-streaming completion that calls `call`.
pub fn completion(id: &str, created: u64, model: &str, call_id: &str, call: &ToolCall) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": call_id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments }
                }]
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
    })
}

fn chunk(id: &str, created: u64, model: &str, delta: Value, finish: Option<&str>) -> String {
    sse(&json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
    }))
}

/// The SSE events after the role event: the call's id and name, its
/// arguments, the `tool_calls` finish, then `[DONE]` — the shape OpenAI
/// streams and clients accumulate by `index`.
pub fn stream_events(
    id: &str,
    created: u64,
    model: &str,
    call_id: &str,
    call: &ToolCall,
) -> Vec<String> {
    vec![
        chunk(
            id,
            created,
            model,
            json!({ "tool_calls": [{ "index": 0, "id": call_id, "type": "function",
                                     "function": { "name": call.name, "arguments": "" } }] }),
            None,
        ),
        chunk(
            id,
            created,
            model,
            json!({ "tool_calls": [{ "index": 0, "function": { "arguments": call.arguments } }] }),
            None,
        ),
        chunk(id, created, model, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn directive_table() {
        let call = |n: &str, a: &str| {
            Some(ToolCall {
                name: n.into(),
                arguments: a.into(),
            })
        };
        let rows = [
            (
                r#"run [mock:tool=terminal_exec {"command":"echo hi"}] please"#,
                call("terminal_exec", r#"{"command":"echo hi"}"#),
            ),
            (r#"[mock:tool=list_files]"#, call("list_files", "{}")),
            (
                r#"[mock:tool=read_file {"path":"a]b"}]"#,
                call("read_file", r#"{"path":"a]b"}"#),
            ),
            (r#"[mock:tool=x {"broken":]"#, None),
            (r#"[mock:tool=x [1,2]]"#, call("x", "{}")),
            (r#"[mock:tool= {}]"#, None),
            (r#"[mock:tool=bad/name {}]"#, None),
            ("no directive", None),
        ];
        for (text, want) in rows {
            assert_eq!(tool_directive(text), want, "{text}");
        }
    }

    #[test]
    fn tool_result_only_when_last() {
        let req = json!({"messages": [
            {"role": "user", "content": "[mock:tool=x {}]"},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "42"}]}
        ]});
        assert_eq!(last_tool_result(&req).as_deref(), Some("42"));
        let req = json!({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "hi"}]});
        assert_eq!(last_tool_result(&req), None);
        assert_eq!(result_reply(" 42\n"), "mock: tool result: 42");
    }

    #[test]
    fn streamed_call_parses() {
        let call = ToolCall {
            name: "terminal_exec".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        };
        let events = stream_events("c1", 1, "m", "call_1", &call);
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        let mut args = String::new();
        for e in &events[..events.len() - 1] {
            let v: Value = serde_json::from_str(e.trim().strip_prefix("data: ").unwrap()).unwrap();
            if let Some(a) = v.pointer("/choices/0/delta/tool_calls/0/function/arguments") {
                args.push_str(a.as_str().unwrap());
            }
        }
        assert_eq!(args, call.arguments);
        let done: Value =
            serde_json::from_str(events[2].trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(done["choices"][0]["finish_reason"], "tool_calls");
    }
}
