//! The mock model over real HTTP: the `hermes-mockllm` binary and the copy
//! that devhost serves, with requests shaped like Hermes' own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Mock {
    child: Child,
    url: String,
}

impl Mock {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hermes-mockllm"))
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn mock");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready line");
        let url = line
            .strip_prefix("MOCKLLM_READY ")
            .expect("ready")
            .trim()
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request as Hermes sends it: big system prompt, tools, history, extra
/// fields the mock does not know.
fn hermes_like(user: Value, stream: bool) -> Value {
    json!({
        "model": "hermes-test-model",
        "stream": stream,
        "stream_options": {"include_usage": true},
        "temperature": 0.7,
        "max_tokens": 4096,
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium"},
        "extra_body": {"provider": {"sort": "price"}},
        "messages": [
            {"role": "system", "content": "You are Hermes. ".repeat(400)},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "tool output"},
            {"role": "user", "content": user}
        ],
        "tools": [{"type": "function", "function": {"name": "terminal_exec", "description": "run", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
        "tool_choice": "auto"
    })
}

/// Parses an SSE body into its `data:` payloads.
fn sse_payloads(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| ev.trim().strip_prefix("data: ").map(str::to_owned))
        .collect()
}

fn stream_text(payloads: &[String]) -> String {
    let mut text = String::new();
    for p in payloads.iter().filter(|p| p.as_str() != "[DONE]") {
        let v: Value = serde_json::from_str(p).expect("chunk is JSON");
        assert_eq!(v["object"], "chat.completion.chunk", "{v}");
        if let Some(c) = v
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        {
            text.push_str(c);
        }
    }
    text
}

fn check_models_and_chat(base: &str) {
    let (code, models) = support::request("GET", &format!("{base}/models"), None, Some("any-key"));
    assert_eq!(code, 200);
    assert_eq!(models["object"], "list");
    assert!(models["data"][0]["id"].is_string());
    let (code, one) = support::request(
        "GET",
        &format!("{base}/models/hermes-test-model"),
        None,
        None,
    );
    assert_eq!((code, one["id"].as_str()), (200, Some("hermes-test-model")));

    // Non-streaming: a chat.completion echoing the last user message.
    let body = hermes_like(json!("hello from the test"), false).to_string();
    let (code, text) = support::request_text(
        "POST",
        &format!("{base}/chat/completions"),
        Some(&body),
        Some("k"),
    );
    assert_eq!(code, 200, "{text}");
    let v: Value = serde_json::from_str(&text).expect("JSON completion");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "hermes-test-model");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "mock: hello from the test"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // Streaming: chunks, a finish chunk, usage, then [DONE].
    let body = hermes_like(json!([{"type": "text", "text": "stream please"}]), true).to_string();
    let (code, text) = support::request_text(
        "POST",
        &format!("{base}/chat/completions"),
        Some(&body),
        Some("k"),
    );
    assert_eq!(code, 200, "{text}");
    let payloads = sse_payloads(&text);
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
    assert!(payloads.len() >= 5, "{payloads:?}");
    assert_eq!(stream_text(&payloads), "mock: stream please");
    let first: Value = serde_json::from_str(&payloads[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let finished = payloads
        .iter()
        .filter(|p| p.contains(r#""finish_reason":"stop""#))
        .count();
    assert_eq!(finished, 1);
    assert!(payloads.iter().any(|p| p.contains(r#""usage""#)));

    // Pre-flight probes of other APIs: JSON 404.
    for probe in ["/api/v1/models", "/api/show"] {
        let root = base.trim_end_matches("/v1");
        let (code, v) = support::request("GET", &format!("{root}{probe}"), None, None);
        assert_eq!(code, 404, "{probe}");
        assert!(v["error"]["message"].is_string(), "{v}");
    }
    // Garbage is a 400, not a crash.
    let (code, _) = support::request_text(
        "POST",
        &format!("{base}/chat/completions"),
        Some("not json"),
        None,
    );
    assert_eq!(code, 400);
    let (code, _) = support::request_text(
        "POST",
        &format!("{base}/chat/completions"),
        Some("{\"messages\":1}"),
        None,
    );
    assert_eq!(code, 400);
}

#[test]
fn standalone_mock_speaks_openai() {
    let mock = Mock::start();
    check_models_and_chat(&mock.url);
}

#[test]
fn devhost_serves_the_same_mock() {
    let dh = support::Devhost::start();
    let (_, health) = dh.get("/healthz");
    assert_eq!(health["mockModelUrl"].as_str(), Some(dh.mock_url.as_str()));
    check_models_and_chat(&dh.mock_url);
}

fn raw_post(url: &str, body: &str) -> TcpStream {
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "POST {path}/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

#[test]
fn hang_and_slow_directives() {
    let mock = Mock::start();
    // [mock:hang]: the role chunk arrives, then nothing, and the stream stays open.
    let body = hermes_like(json!("please [mock:hang]"), true).to_string();
    let mut s = raw_post(&mock.url, &body);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"role\":\"assistant\"") {
        let n = s.read(&mut buf).expect("role chunk in time");
        assert!(n > 0, "closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    s.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    match s.read(&mut buf) {
        Ok(0) => panic!("hang stream ended"),
        Ok(n) => panic!(
            "hang stream sent more: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        ),
    }

    // [mock:slow=100]: chunks spaced out; total time ≥ chunks × delay.
    let body = hermes_like(json!("one two three [mock:slow=100]"), true).to_string();
    let t0 = Instant::now();
    let (code, text) = support::request_text(
        "POST",
        &format!("{}/chat/completions", mock.url),
        Some(&body),
        None,
    );
    let took = t0.elapsed();
    assert_eq!(code, 200);
    let payloads = sse_payloads(&text);
    assert_eq!(
        stream_text(&payloads),
        "mock: one two three [mock:slow=100]"
    );
    assert!(
        took >= Duration::from_millis(100 * 5),
        "slow stream took only {took:?}"
    );

    // [mock:error]: OpenAI-style 500.
    let body = hermes_like(json!("[mock:error]"), true).to_string();
    let (code, v) = support::request(
        "POST",
        &format!("{}/chat/completions", mock.url),
        Some(&body),
        None,
    );
    assert_eq!(code, 500);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("mock error"));
}

#[test]
fn tool_call_round_trip() {
    let mock = Mock::start();
    let url = format!("{}/chat/completions", mock.url);
    let directive = r#"list it [mock:tool=terminal_exec {"command":"ls /workspace"}]"#;

    // Non-streaming: one tool call with the arguments as a JSON string.
    let (code, v) = support::request(
        "POST",
        &url,
        Some(&hermes_like(json!(directive), false).to_string()),
        None,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "terminal_exec");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["command"], "ls /workspace");

    // Streaming: the same call, accumulated from deltas by index.
    let (code, text) = support::request_text(
        "POST",
        &url,
        Some(&hermes_like(json!(directive), true).to_string()),
        None,
    );
    assert_eq!(code, 200);
    let payloads = sse_payloads(&text);
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
    let (mut name, mut arguments, mut finish) = (String::new(), String::new(), String::new());
    for p in payloads.iter().filter(|p| p.as_str() != "[DONE]") {
        let v: Value = serde_json::from_str(p).unwrap();
        if let Some(n) = v
            .pointer("/choices/0/delta/tool_calls/0/function/name")
            .and_then(Value::as_str)
        {
            name.push_str(n);
        }
        if let Some(a) = v
            .pointer("/choices/0/delta/tool_calls/0/function/arguments")
            .and_then(Value::as_str)
        {
            arguments.push_str(a);
        }
        if let Some(f) = v
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
        {
            finish = f.to_owned();
        }
    }
    assert_eq!(
        (name.as_str(), finish.as_str()),
        ("terminal_exec", "tool_calls")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap()["command"],
        "ls /workspace"
    );

    // With the tool's result last, the model answers in text and the turn ends.
    let mut req = hermes_like(json!(directive), true);
    let messages = req["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call.clone()]}));
    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "notes.txt\n"}));
    let (code, text) = support::request_text("POST", &url, Some(&req.to_string()), None);
    assert_eq!(code, 200);
    assert_eq!(
        stream_text(&sse_payloads(&text)),
        "mock: tool result: notes.txt"
    );
}
