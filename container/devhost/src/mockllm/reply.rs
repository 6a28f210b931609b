//! What the mock model answers, decided purely from the request JSON.
//!
//! The reply is `mock: <last user text>`, so an end-to-end test can assert a
//! turn really reached the model. Directives in the last user message change
//! the timing, for timeout tests:
//!
//! * `[mock:hang]` — never finish (streaming: one role chunk, then nothing);
//! * `[mock:slow]` / `[mock:slow=MS]` — wait MS (default 300) between chunks;
//! * `[mock:error]` — answer 500 with an OpenAI-style error.
//!
//! Tool calls are in [`super::tools`].

use serde_json::{json, Value};

/// Model id reported when the request names none.
pub const DEFAULT_MODEL: &str = "mock-model";
/// Default delay between chunks for `[mock:slow]`.
pub const SLOW_DEFAULT_MS: u64 = 300;
/// Longest user text echoed back.
const ECHO_MAX_CHARS: usize = 4_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Normal,
    Hang,
    Slow { delay_ms: u64 },
    Error,
}

/// The text of the last `user` message: a string, or the `text` parts of an
/// array of content parts. Empty when there is none.
pub fn last_user_text(request: &Value) -> String {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return String::new();
    };
    let Some(last) = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return String::new();
    };
    content_text(last.get("content"))
}

/// A message's `content` as text: a string, or its `text` parts joined.
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The directive in `text`, if any (the first one wins).
pub fn behaviour(text: &str) -> Behaviour {
    if text.contains("[mock:hang]") {
        return Behaviour::Hang;
    }
    if text.contains("[mock:error]") {
        return Behaviour::Error;
    }
    if let Some(i) = text.find("[mock:slow") {
        let rest = &text[i + "[mock:slow".len()..];
        let delay_ms = rest
            .strip_prefix('=')
            .and_then(|r| r.split(']').next())
            .and_then(|n| n.trim().parse::<u64>().ok())
            .map(|ms| ms.clamp(1, 60_000))
            .unwrap_or(SLOW_DEFAULT_MS);
        return Behaviour::Slow { delay_ms };
    }
    Behaviour::Normal
}

/// `mock: <text>` (the echo is capped).
pub fn reply_text(user_text: &str) -> String {
    let echo: String = user_text.trim().chars().take(ECHO_MAX_CHARS).collect();
    format!("mock: {echo}")
}

/// The model to report: the request's, or [`DEFAULT_MODEL`].
pub fn model_of(request: &Value) -> String {
    request
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or(DEFAULT_MODEL)
        .to_owned()
}

/// Word-ish pieces (each keeps its trailing space) so a stream has several
/// chunks that concatenate back to `text` exactly.
pub fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn usage(prompt_chars: usize, reply: &str) -> Value {
    // Rough token counts; clients only need plausible integers.
    let prompt = (prompt_chars / 4).max(1);
    let completion = pieces(reply).len().max(1);
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion })
}

/// A non-streaming `chat.completion`.
pub fn completion(id: &str, created: u64, model: &str, reply: &str, prompt_chars: usize) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": reply },
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": usage(prompt_chars, reply),
    })
}

/// One `chat.completion.chunk`.
pub fn chunk(id: &str, created: u64, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
    })
}

/// The chunk carrying usage (`stream_options.include_usage`).
pub fn usage_chunk(id: &str, created: u64, model: &str, reply: &str, prompt_chars: usize) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage(prompt_chars, reply),
    })
}

/// Every SSE event of a streamed reply after the first (role) event, in
/// order, ending with `data: [DONE]`.
pub fn stream_events(
    id: &str,
    created: u64,
    model: &str,
    reply: &str,
    include_usage: bool,
    prompt_chars: usize,
) -> Vec<String> {
    let mut events: Vec<String> = pieces(reply)
        .into_iter()
        .map(|p| sse(&chunk(id, created, model, json!({ "content": p }), None)))
        .collect();
    events.push(sse(&chunk(id, created, model, json!({}), Some("stop"))));
    if include_usage {
        events.push(sse(&usage_chunk(id, created, model, reply, prompt_chars)));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// The first event of a stream: the assistant role.
pub fn role_event(id: &str, created: u64, model: &str) -> String {
    sse(&chunk(
        id,
        created,
        model,
        json!({ "role": "assistant", "content": "" }),
        None,
    ))
}

pub fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// `include_usage` from `stream_options`.
pub fn wants_usage(request: &Value) -> bool {
    request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn last_user_text_reads_strings_and_parts() {
        let req = json!({"messages": [
            {"role": "system", "content": "x".repeat(6000)},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "world"}]},
            {"role": "tool", "content": "t"}
        ], "tools": [{"type": "function"}], "unknown_field": {"x": 1}});
        assert_eq!(last_user_text(&req), "hello world");
        assert_eq!(last_user_text(&json!({})), "");
        assert_eq!(last_user_text(&json!({"messages": [{"role": "user"}]})), "");
    }

    #[test]
    fn directives_table() {
        let rows = [
            ("hi", Behaviour::Normal),
            ("please [mock:hang] now", Behaviour::Hang),
            (
                "[mock:slow]",
                Behaviour::Slow {
                    delay_ms: SLOW_DEFAULT_MS,
                },
            ),
            ("[mock:slow=50]", Behaviour::Slow { delay_ms: 50 }),
            ("[mock:slow=0]", Behaviour::Slow { delay_ms: 1 }),
            ("[mock:slow=999999]", Behaviour::Slow { delay_ms: 60_000 }),
            (
                "[mock:slow=abc]",
                Behaviour::Slow {
                    delay_ms: SLOW_DEFAULT_MS,
                },
            ),
            ("[mock:error]", Behaviour::Error),
            ("[mock:hangs]", Behaviour::Normal),
        ];
        for (text, want) in rows {
            assert_eq!(behaviour(text), want, "{text}");
        }
    }

    #[test]
    fn pieces_concatenate_back() {
        let text = reply_text("  the quick  brown fox ");
        assert_eq!(text, "mock: the quick  brown fox");
        assert_eq!(pieces(&text).concat(), text);
        assert!(pieces(&text).len() >= 4);
    }

    #[test]
    fn stream_events_are_sse_and_end_with_done() {
        let events = stream_events("c1", 1, "m", "mock: hi there", true, 40);
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        let mut text = String::new();
        for e in &events[..events.len() - 1] {
            let body = e
                .strip_prefix("data: ")
                .and_then(|s| s.strip_suffix("\n\n"))
                .unwrap();
            let v: Value = serde_json::from_str(body).unwrap();
            assert_eq!(v["object"], "chat.completion.chunk");
            if let Some(c) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                text.push_str(c);
            }
        }
        assert_eq!(text, "mock: hi there");
    }
}
