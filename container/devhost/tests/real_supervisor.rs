//! devhost with the real `hermes-supervisor` (and, when the venv exists, the
//! real Hermes answering a chat against devhost's mock model).
//!
//! Needs root (namespaces), `target/<profile>/hermes-supervisor` built
//! (`cargo build -p hermes-supervisor`) and, for the chat, the venv from
//! `scripts/setup-hermes.sh`. Each missing piece is a loud skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{request, request_text, Devhost};

fn supervisor_bin() -> Option<PathBuf> {
    let path = std::env::var_os("HERMES_SUPERVISOR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(support::DEVHOST).with_file_name("hermes-supervisor"));
    path.is_file().then_some(path)
}

fn prerequisites(test: &str) -> Option<PathBuf> {
    if !support::root_or_skip(test) {
        return None;
    }
    let Some(bin) = supervisor_bin() else {
        support::skip(
            test,
            "hermes-supervisor is not built (cargo build -p hermes-supervisor)",
        );
        return None;
    };
    Some(bin)
}

fn control(
    dh: &Devhost,
    id: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let text = body.map(|b| b.to_string());
    request(
        method,
        &dh.url(&format!("/containers/{id}/ports/8080{path}")),
        text.as_deref(),
        Some(token),
    )
}

#[test]
fn real_supervisor_boots_and_containers_are_isolated() {
    let Some(bin) = prerequisites("real_supervisor_boots_and_containers_are_isolated") else {
        return;
    };
    let dh = Devhost::start_with(bin.to_str().unwrap(), &[]);
    let (ta, tb) = (
        "real-token-a-0123456789abcdef0123",
        "real-token-b-0123456789abcdef0123",
    );
    let t0 = Instant::now();
    let status = dh.start_container("real-a", ta, "boot-real-a");
    let ready = dh.wait_ready("real-a", ta, "/_control/health");
    eprintln!(
        "measured: real supervisor start → control API answering {:?}",
        t0.elapsed()
    );
    assert!(ready < Duration::from_secs(5));
    dh.start_container("real-b", tb, "boot-real-b");
    dh.wait_ready("real-b", tb, "/_control/health");

    let (code, h) = control(&dh, "real-a", ta, "GET", "/_control/health", None);
    assert_eq!(
        (code, h["bootId"].as_str()),
        (200, Some("boot-real-a")),
        "{h}"
    );
    let (code, _) = control(&dh, "real-a", tb, "GET", "/_control/health", None);
    assert_eq!(code, 401, "a accepted b's token");

    // Probe markers live in each container's own filesystem.
    let (code, body) = control(
        &dh,
        "real-a",
        ta,
        "POST",
        "/_control/probe",
        Some(&json!({"marker": "marker-for-real-a-1"})),
    );
    assert_eq!(code, 200, "{body}");
    let (_, read_a) = control(&dh, "real-a", ta, "GET", "/_control/probe", None);
    let (_, read_b) = control(&dh, "real-b", tb, "GET", "/_control/probe", None);
    assert_eq!(read_a["read"], "marker-for-real-a-1", "{read_a}");
    assert_eq!(read_b["read"], "(none)", "{read_b}");

    // Destroy: nothing of a's PID namespace and no files remain.
    let pid = status["pid"].as_u64().unwrap() as u32;
    let ns = support::namespace_of(pid);
    let (code, _) = dh.post("/containers/real-a/destroy", &json!({}));
    assert_eq!(code, 200);
    assert!(hermes_devhost::procfs::pids_in_namespace(ns).is_empty());
    assert!(!dh.state_dir.join("containers/real-a").exists());
    let (_, read_b) = control(&dh, "real-b", tb, "GET", "/_control/probe", None);
    assert_eq!(read_b["read"], "(none)");
}

#[test]
fn real_hermes_answers_a_chat_through_the_mock_model() {
    let test = "real_hermes_answers_a_chat_through_the_mock_model";
    let Some(bin) = prerequisites(test) else {
        return;
    };
    let hermes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/hermes/bin/hermes");
    if !hermes.is_file() {
        let why = format!(
            "no Hermes venv at {} (run scripts/setup-hermes.sh)",
            hermes.display()
        );
        support::skip(test, &why);
        return;
    }
    let dh = Devhost::start_with(bin.to_str().unwrap(), &[]);
    let token = "chat-token-0123456789abcdef0123456789";
    let status = dh.start_container("chat-a", token, "boot-chat");
    dh.wait_ready("chat-a", token, "/_control/health");
    let provision = json!({
        "apiServerKey": "a".repeat(64),
        "providerEnv": {},
        "vertexSaJson": null,
        "defaultModel": null,
        "approvalsMode": "manual",
        "keyFingerprint": "fp-test"
    });
    let (code, body) = control(
        &dh,
        "chat-a",
        token,
        "POST",
        "/_control/provision",
        Some(&provision),
    );
    assert_eq!(code, 200, "{body}");
    let t0 = Instant::now();
    let (code, body) = control(
        &dh,
        "chat-a",
        token,
        "POST",
        "/_control/hermes/start",
        Some(&json!({})),
    );
    assert_eq!(code, 200, "{body}");
    loop {
        let (_, state) = control(&dh, "chat-a", token, "GET", "/_control/hermes/ready", None);
        if state["ready"] == true {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "Hermes never became ready: {state}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("measured: Hermes start → /health ready {:?}", t0.elapsed());

    let url = dh.url("/containers/chat-a/ports/8080/_control/hermes-api/v1/chat/completions");
    let t1 = Instant::now();
    let body = json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "ping from devhost test"}]});
    let (code, text) = request_text("POST", &url, Some(&body.to_string()), Some(token));
    eprintln!("measured: first chat turn {:?}", t1.elapsed());
    assert_eq!(code, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"], "mock: ping from devhost test",
        "{v}"
    );

    let body = json!({"model": "hermes-agent", "stream": true, "messages": [{"role": "user", "content": "stream from devhost test"}]});
    let (code, text) = request_text("POST", &url, Some(&body.to_string()), Some(token));
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("chat.completion.chunk") && text.contains("data: [DONE]"),
        "{text}"
    );
    let streamed: String = text
        .split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(streamed, "mock: stream from devhost test");

    // A tool call from the model reaches Hermes' tool loop and its result
    // comes back to the model (the tool does not exist: Hermes says so).
    let body = json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "[mock:tool=no_such_tool {\"x\":1}]"}]});
    let (code, text) = request_text("POST", &url, Some(&body.to_string()), Some(token));
    assert_eq!(code, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        content.starts_with("mock: tool result:") && content.contains("no_such_tool"),
        "{v}"
    );

    // On the host, nothing of the container runs as root, and Hermes runs
    // as uid 10001 of the container's own range.
    let base = status["uidBase"].as_u64().expect("uid range") as u32;
    let ns_pids = hermes_devhost::procfs::pids_in_namespace(support::namespace_of(
        status["pid"].as_u64().unwrap() as u32,
    ));
    let uids: Vec<u32> = ns_pids
        .iter()
        .filter_map(|p| support::host_uid(*p))
        .collect();
    assert!(
        !uids.contains(&0),
        "a container process runs as host root: {uids:?}"
    );
    assert!(
        uids.contains(&(base + 10001)),
        "no Hermes at host uid {}: {uids:?}",
        base + 10001
    );

    let (_, check) = control(&dh, "chat-a", token, "GET", "/_control/boot-check", None);
    assert_eq!(check["nonRoot"], true, "{check}");
    assert_eq!(check["gatewayUid"], 10001, "{check}");
    assert_eq!(check["gatewayUser"], "hermes", "{check}");

    let ns = support::namespace_of(status["pid"].as_u64().unwrap() as u32);
    let (code, _) = dh.post("/containers/chat-a/destroy", &json!({}));
    assert_eq!(code, 200);
    assert!(
        hermes_devhost::procfs::pids_in_namespace(ns).is_empty(),
        "Hermes survived destroy"
    );
}
