//! The real Hermes (from `.venv/hermes`, built by `scripts/setup-hermes.sh`
//! from the pinned requirements) answering chats through the supervisor's
//! proxy, against a minimal OpenAI-compatible mock model defined here.
//! Skips loudly when the venv is missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// Minimal OpenAI-compatible model: `/v1/models`, and chat completions as
/// JSON or as `chat.completion.chunk` SSE ending in `data: [DONE]`. A user
/// message containing `slow-please` streams one token every 300 ms.
/// Tool names offered to the model, per chat request.
type SeenTools = Arc<Mutex<Vec<Vec<String>>>>;

pub fn start_mock_model() -> (String, SeenTools) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen: SeenTools = Arc::default();
    let seen_by_server = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let seen = Arc::clone(&seen_by_server);
            std::thread::spawn(move || serve_mock_connection(conn, seen));
        }
    });
    (url, seen)
}

fn serve_mock_connection(conn: TcpStream, seen: SeenTools) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut content_length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    content_length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned();
        let send_json = |out: &mut TcpStream, status: &str, v: Value| {
            let text = v.to_string();
            let _ = write!(
                out,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            );
        };
        if path == "/v1/models" {
            send_json(
                &mut out,
                "200 OK",
                json!({"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "test"}]}),
            );
            continue;
        }
        if path != "/v1/chat/completions" {
            send_json(
                &mut out,
                "404 Not Found",
                json!({"error": {"message": "not found"}}),
            );
            continue;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let tools: Vec<String> = request["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        seen.lock().unwrap().push(tools);
        let last_user = request["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .map(|m| match &m["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default();
        let reply = format!("mock reply to: {last_user}");
        if request["stream"] != true {
            send_json(
                &mut out,
                "200 OK",
                json!({"id": "mock-1", "object": "chat.completion", "created": 0, "model": "mock-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}),
            );
            continue;
        }
        let (tokens, delay): (Vec<String>, u64) = if last_user.contains("slow-please") {
            ((0..40).map(|i| format!("t{i} ")).collect(), 300)
        } else {
            (reply.split_inclusive(' ').map(str::to_owned).collect(), 20)
        };
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        );
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "mock-1", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
        events.extend(
            tokens
                .iter()
                .map(|t| chunk(json!({"content": t}), Value::Null)),
        );
        events.push(chunk(json!({}), json!("stop")));
        for event in events {
            if write!(out, "data: {event}\n\n").is_err() || out.flush().is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(delay));
        }
        let _ = write!(out, "data: [DONE]\n\n");
        return;
    }
}

/// POST a chat through the proxy on a raw socket; returns (head, chunks with
/// their arrival times, clean end).
fn raw_chat(
    s: &Supervisor,
    body: &Value,
    extra_headers: &str,
) -> (String, Vec<(Duration, String)>, bool) {
    let t0 = Instant::now();
    let mut conn = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let text = body.to_string();
    write!(
        conn,
        "POST /_control/hermes-api/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n{extra_headers}content-length: {}\r\n\r\n{text}",
        s.token,
        text.len()
    )
    .unwrap();
    let mut reader = BufReader::new(conn);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let mut chunks = Vec::new();
    loop {
        let mut size_line = String::new();
        if reader.read_line(&mut size_line).unwrap_or(0) == 0 {
            return (head, chunks, false);
        }
        let Ok(size) = usize::from_str_radix(size_line.trim(), 16) else {
            return (head, chunks, false);
        };
        if size == 0 {
            return (head, chunks, true);
        }
        let mut data = vec![0u8; size + 2];
        if reader.read_exact(&mut data).is_err() {
            return (head, chunks, false);
        }
        chunks.push((
            t0.elapsed(),
            String::from_utf8_lossy(&data[..size]).into_owned(),
        ));
    }
}

#[test]
fn real_hermes_answers_through_the_proxy_streaming_and_not() {
    let Some(bin) = hermes_venv_bin() else {
        skip(
            "real_hermes_answers_through_the_proxy_streaming_and_not",
            "no .venv/hermes (run scripts/setup-hermes.sh)",
        );
        return;
    };
    let (mock, seen_tools) = start_mock_model();
    let s = Supervisor::start(
        "real",
        Options {
            mock_model_url: Some(mock),
            ..Options::with_bin(&bin)
        },
    );
    let (status, provisioned) = s.provision(json!({"keyFingerprint": "fp-real"}));
    assert_eq!(status, 200, "{provisioned}");
    let t0 = Instant::now();
    let (status, started) = s.call("POST", "/_control/hermes/start", None);
    assert_eq!(status, 200, "{started}");
    let pid = started["pid"].as_u64().unwrap() as u32;
    let state = s.wait_ready(true, Duration::from_secs(90));
    assert_eq!(state["ready"], true, "Hermes did not become ready: {state}");
    eprintln!("real Hermes: start → /health in {:?}", t0.elapsed());

    // Who runs it, from /proc, and with what environment.
    let environ =
        String::from_utf8(std::fs::read(format!("/proc/{pid}/environ")).unwrap()).unwrap();
    let mut names: Vec<&str> = environ
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| e.split('=').next().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["HERMES_HOME", "HOME", "LANG", "PATH"]);
    assert!(!environ.contains(&s.token));
    let (_, check) = s.call("GET", "/_control/boot-check", None);
    assert_eq!(check["hermesVersion"], "0.19.0", "{check}");
    assert_eq!(check["gatewayPid"], pid);
    assert_eq!(check["keyFingerprint"], "fp-real");
    if is_root() {
        assert_eq!(check["gatewayUid"], 10001, "{check}");
        assert_eq!(check["nonRoot"], true);
        assert_eq!(
            proc_status_field(pid, "Uid").unwrap(),
            "10001\t10001\t10001\t10001"
        );
        assert_eq!(
            proc_status_field(pid, "CapEff").unwrap(),
            "0000000000000000"
        );
    } else {
        skip(
            "uid 10001 assertions on the real gateway",
            "not running as root",
        );
    }

    // Non-streaming.
    let response = ureq::post(&s.url("/_control/hermes-api/v1/chat/completions"))
        .set("Authorization", &format!("Bearer {}", s.token))
        .timeout(Duration::from_secs(120))
        .send_json(json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "hello hermes"}]}))
        .unwrap();
    assert_eq!(response.status(), 200);
    let v: Value = response.into_json().unwrap();
    assert_eq!(v["object"], "chat.completion", "{v}");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.contains("mock reply to: hello hermes"), "{content}");

    // Hermes' own shell, file and code tools never reach the model (the
    // hardened config took effect in the real Hermes); others still do.
    let offered = seen_tools.lock().unwrap().clone();
    assert!(!offered.is_empty(), "the mock model saw no chat request");
    for tools in &offered {
        for forbidden in [
            "terminal",
            "process",
            "read_file",
            "write_file",
            "patch",
            "search_files",
            "execute_code",
        ] {
            assert!(
                !tools.iter().any(|t| t == forbidden),
                "{forbidden} offered to the model: {tools:?}"
            );
        }
        assert!(
            tools.iter().any(|t| t == "memory"),
            "allow twin: memory is offered: {tools:?}"
        );
    }

    // Streaming: chunk by chunk, in order, ending with [DONE].
    let (head, chunks, clean) = raw_chat(
        &s,
        &json!({"model": "hermes-agent", "stream": true,
            "messages": [{"role": "user", "content": "stream one two three four five six seven eight"}]}),
        "",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    assert!(clean);
    let all: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    assert!(all.contains("chat.completion.chunk"), "{all}");
    assert!(all.trim_end().ends_with("data: [DONE]"), "{all}");
    let text: String = all
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        text.contains("mock reply to: stream one two three"),
        "{text}"
    );
    let content_chunks: Vec<&(Duration, String)> = chunks
        .iter()
        .filter(|(_, c)| c.contains("\"content\""))
        .collect();
    assert!(
        content_chunks.len() >= 5,
        "not streamed chunk by chunk: {} chunks",
        content_chunks.len()
    );
    let spread = content_chunks.last().unwrap().0 - content_chunks.first().unwrap().0;
    assert!(
        spread >= Duration::from_millis(100),
        "content arrived in one burst ({spread:?}): buffered"
    );

    // The turn deadline, mid-stream, through the real Hermes.
    let t0 = Instant::now();
    let (_, chunks, clean) = raw_chat(
        &s,
        &json!({"model": "hermes-agent", "stream": true, "messages": [{"role": "user", "content": "slow-please"}]}),
        "x-hermes-deadline-ms: 6000\r\n",
    );
    let took = t0.elapsed();
    let all: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    assert!(clean, "{all}");
    assert!(
        all.contains("t0 "),
        "some tokens before the deadline: {all}"
    );
    assert!(
        all.contains("event: error\ndata: {\"ok\":false,\"error\":\"turn_timeout\""),
        "{all}"
    );
    assert!(!all.contains("[DONE]"));
    assert!(took < Duration::from_secs(9), "{took:?}");

    // Restart (what a re-provision does): the old gateway's pid and lock
    // files must not block the new one.
    let (status, restarted) = s.call("POST", "/_control/hermes/start", None);
    assert_eq!(status, 200, "{restarted}");
    let pid2 = restarted["pid"].as_u64().unwrap() as u32;
    assert!(
        !alive(pid) && group_members(pid).is_empty(),
        "first gateway survived the restart"
    );
    let state = s.wait_ready(true, Duration::from_secs(90));
    assert_eq!(
        (state["ready"].clone(), state["pid"].clone()),
        (json!(true), json!(pid2)),
        "{state}"
    );

    // Stop: the whole tree goes.
    assert_eq!(s.call("POST", "/_control/hermes/stop", None).0, 200);
    assert!(
        group_members(pid2).is_empty(),
        "Hermes processes left behind"
    );
    assert!(!alive(pid2));
}
