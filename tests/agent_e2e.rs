//! End to end with every real part: `wrangler dev` (workerd) running the
//! Worker and the HermesAgent object, hermes-devhost as the container
//! runtime, one hermes-supervisor per agent, real Hermes from the pinned
//! requirements, and the mock model (SPEC §4, §5, §11).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{random_agent, Response, Stack};

fn chat_body(text: &str, stream: bool) -> String {
    serde_json::json!({"model": "hermes-agent", "stream": stream, "messages": [{"role": "user", "content": text}]})
        .to_string()
}

fn assert_json_error(resp: &Response, status: u16, code: &str) {
    assert_eq!(resp.status, status, "body: {}", resp.body);
    let v = resp.json();
    assert_eq!(v["ok"], false, "{}", resp.body);
    assert_eq!(v["error"], code, "{}", resp.body);
}

#[test]
fn chat_boot_check_proxy_probe_and_hostile_input() {
    let stack = require_or_skip!(Stack::start(""));
    let a = random_agent();
    let b = random_agent();

    // Boot-check: Hermes runs as a non-root user, with a computed marker.
    let started = Instant::now();
    let resp = stack.call("GET", "/hosted/agent/boot-check", &a, None, &[]);
    let cold = started.elapsed();
    assert_eq!(resp.status, 200, "{}", resp.body);
    let check = resp.json();
    assert_eq!(check["ok"], true);
    assert_eq!(check["agentId"], a.as_str());
    assert_eq!(check["nonRoot"], true, "{check}");
    assert_eq!(check["gatewayUid"], 10001, "{check}");
    assert_eq!(check["gatewayUser"], "hermes");
    assert_eq!(check["hermesVersion"], "0.19.0");
    assert!(
        check["imageMarker"].as_str().is_some_and(|m| m.len() >= 16),
        "{check}"
    );
    assert_eq!(check["bootCount"], 1);
    eprintln!("cold boot to boot-check: {cold:?}");

    // A chat turn reaches the (mock) model through Hermes.
    let resp = stack.call(
        "POST",
        "/hosted/agent/v1/chat/completions",
        &a,
        Some(&chat_body("hello edge", false)),
        &[],
    );
    assert_eq!(resp.status, 200, "{}", resp.body);
    let v = resp.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "mock: hello edge");

    // Streaming: chunks arrive before the turn ends.
    let bearer = stack.bearer();
    let started = Instant::now();
    let resp = ureq::post(&stack.dev.url("/hosted/agent/v1/chat/completions"))
        .set("authorization", &bearer)
        .set("x-divinci-agent-id", &a)
        .set("content-type", "application/json")
        .send_string(&chat_body(
            "one two three four five six [mock:slow=400]",
            true,
        ))
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/event-stream"));
    let mut reader = resp.into_reader();
    let mut buf = [0u8; 4096];
    let mut text = String::new();
    let mut first_content: Option<Duration> = None;
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        if first_content.is_none()
            && text.contains("\"content\": \"") | text.contains("\"content\":\"")
            && text.contains("mock")
        {
            first_content = Some(started.elapsed());
        }
    }
    let total = started.elapsed();
    assert!(text.contains("data: [DONE]"), "{text}");
    let first = first_content.expect("a content chunk");
    eprintln!("stream: first content chunk after {first:?}, end after {total:?}");
    assert!(
        total - first >= Duration::from_millis(800),
        "chunks were buffered: first {first:?}, end {total:?}"
    );

    // Proxy: Hermes API with the per-boot key injected by the supervisor;
    // the caller's authorization is never forwarded.
    let resp = stack.call("GET", "/hosted/agent/proxy/v1/models", &a, None, &[]);
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(resp.json()["data"][0]["id"], "hermes-agent");
    let resp = stack.call("GET", "/hosted/agent/proxy/health", &a, None, &[]);
    assert_eq!(resp.status, 200, "{}", resp.body);

    // The official openai Python client, pointed at the proxy route.
    let python = common::repo_root().join(".venv/hermes/bin/python");
    let out = std::process::Command::new(python)
        .arg(common::repo_root().join("tests/fixtures/openai_client.py"))
        .env("BASE_URL", &stack.dev.base)
        .env("AGENT_ID", &a)
        .env("SERVICE_SECRET", &stack.secret)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "openai client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec!["mock: from the openai client"; 2],
        "{stdout}"
    );

    // Isolation: markers live in each agent's own container.
    let wa = stack
        .call("POST", "/hosted/agent/probe", &a, None, &[])
        .json();
    assert_eq!(wa["isolated"], true, "{wa}");
    let rb = stack
        .call("GET", "/hosted/agent/probe", &b, None, &[])
        .json();
    assert_eq!(rb["read"], "(none)", "{rb}");
    let wb = stack
        .call("POST", "/hosted/agent/probe", &b, None, &[])
        .json();
    assert_ne!(wa["wrote"], wb["wrote"]);
    assert_eq!(
        stack
            .call("GET", "/hosted/agent/probe", &a, None, &[])
            .json()["read"],
        wa["wrote"]
    );
    assert_eq!(
        stack
            .call("GET", "/hosted/agent/probe", &b, None, &[])
            .json()["read"],
        wb["wrote"]
    );

    // Hostile input: every answer is a JSON 4xx, never a 5xx.
    let chat = "/hosted/agent/v1/chat/completions";
    type Case<'a> = (
        &'a str,
        String,
        Option<String>,
        Vec<(&'a str, &'a str)>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "POST",
            chat.into(),
            Some("not json".into()),
            vec![],
            400,
            "bad_request",
        ),
        (
            "POST",
            chat.into(),
            Some("[1,2]".into()),
            vec![],
            400,
            "bad_request",
        ),
        (
            "POST",
            chat.into(),
            Some("{\"a\":".into()),
            vec![],
            400,
            "bad_request",
        ),
        ("GET", chat.into(), None, vec![], 405, "method_not_allowed"),
        (
            "POST",
            chat.into(),
            Some(chat_body("x", false)),
            vec![("x-hermes-provider", "openai")],
            400,
            "invalid_byok",
        ),
        (
            "POST",
            chat.into(),
            Some(chat_body("x", false)),
            vec![
                ("x-hermes-provider", "evil"),
                ("x-hermes-provider-key", "sk-12345678"),
            ],
            400,
            "invalid_byok",
        ),
        (
            "POST",
            chat.into(),
            Some(chat_body("x", false)),
            vec![
                ("x-hermes-provider", "openai"),
                ("x-hermes-provider-key", "short"),
            ],
            400,
            "invalid_byok",
        ),
        (
            "GET",
            "/hosted/agent/proxy/a%2F..%2Fb".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/v1/%252e%252e/x".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/a%5Cb".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/a%00b".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/%C0%AE%C0%AE/x".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/v1//models".into(),
            None,
            vec![],
            400,
            "bad_path",
        ),
        (
            "GET",
            "/hosted/agent/proxy/v1/models".into(),
            None,
            vec![("x-hermes-session-key", " Divinci-Internal-proactive")],
            400,
            "reserved_session_key",
        ),
        (
            "POST",
            "/hosted/agent/boot-check".into(),
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/hosted/agent/stop".into(),
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/hosted/agent/evict".into(),
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        (
            "PUT",
            "/hosted/agent/probe".into(),
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/hosted/agent/terminal/exec".into(),
            None,
            vec![],
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            "/hosted/agent/terminal/nope".into(),
            None,
            vec![],
            404,
            "not_found",
        ),
        (
            "POST",
            "/hosted/agent/terminal/workspace".into(),
            Some(r#"{"args":"--version"}"#.into()),
            vec![("x-workspace-token", "ya29.tokenvalue")],
            404,
            "workspace_cli_disabled",
        ),
    ];
    for (method, path, body, headers, status, code) in cases {
        let resp = stack.call(method, &path, &a, body.as_deref(), &headers);
        if resp.status != status {
            eprintln!(
                "{method} {path}: {}\nwrangler log:\n{}",
                resp.body,
                stack.dev.log_tail()
            );
        }
        assert_json_error(&resp, status, code);
        assert!(
            !resp.body.contains("sk-12345678"),
            "key echoed: {}",
            resp.body
        );
    }
    // After all that the agent still answers.
    let resp = stack.call("POST", chat, &a, Some(&chat_body("still here", false)), &[]);
    assert_eq!(
        resp.json()["choices"][0]["message"]["content"],
        "mock: still here"
    );
}

#[test]
fn single_flight_boot_stop_evict_and_byok() {
    let stack = require_or_skip!(Stack::start(""));
    let agent = random_agent();

    // 30 concurrent first requests to a cold agent → one boot.
    let results: Vec<serde_json::Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..30)
            .map(|_| s.spawn(|| stack.call("GET", "/hosted/agent/boot-check", &agent, None, &[])))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .map(|r| {
                assert_eq!(r.status, 200, "{}", r.body);
                r.json()
            })
            .collect()
    });
    let boot_id = results[0]["bootId"].as_str().unwrap().to_owned();
    assert!(
        results.iter().all(|r| r["bootId"] == boot_id.as_str()),
        "all requests see the same boot"
    );
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(
        check["bootCount"], 1,
        "exactly one boot for 30 concurrent cold requests: {check}"
    );
    let pid_before = check["gatewayPid"].clone();

    // BYOK: a new key reaches Hermes without an evict (same boot, new
    // fingerprint, the key in Hermes' .env).
    let fp_before = check["keyFingerprint"].clone();
    let byok = [
        ("x-hermes-provider", "openai"),
        ("x-hermes-provider-key", "sk-byok-test-0123456789"),
    ];
    let resp = stack.call("GET", "/hosted/agent/proxy/v1/models", &agent, None, &byok);
    assert_eq!(resp.status, 200, "{}", resp.body);
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(
        check["bootId"],
        boot_id.as_str(),
        "BYOK must not reboot the container"
    );
    assert_ne!(
        check["keyFingerprint"], fp_before,
        "BYOK must re-provision: {check}"
    );
    assert_ne!(
        check["gatewayPid"], pid_before,
        "Hermes restarted with the new key set"
    );
    if common::is_root() {
        let env_file = common::find_file(stack.devhost.state_dir.path(), ".env");
        let text =
            std::fs::read_to_string(env_file.expect("Hermes .env in the container")).unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("OPENAI_API_KEY=") && l.contains("sk-byok-test-0123456789")),
            "BYOK key not provisioned"
        );
    } else {
        eprintln!("SKIP part: reading the container's .env needs root");
    }
    // The same key set again: no re-provisioning.
    let pid_byok = check["gatewayPid"].clone();
    stack.call("GET", "/hosted/agent/proxy/v1/models", &agent, None, &byok);
    assert_eq!(
        stack
            .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
            .json()["gatewayPid"],
        pid_byok
    );

    // Stop keeps the container; the next request starts Hermes again.
    let resp = stack.call("POST", "/hosted/agent/stop", &agent, None, &[]);
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(resp.json()["status"], "stopped");
    assert!(stack.devhost.running(&agent), "stop keeps the container");
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(check["bootId"], boot_id.as_str(), "stop keeps the boot");
    assert_ne!(check["gatewayPid"], pid_byok, "Hermes was started again");
    assert_eq!(check["nonRoot"], true);

    // Evict destroys the container; the next request boots a new one.
    let resp = stack.call("POST", "/hosted/agent/evict", &agent, None, &[]);
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(resp.json()["status"], "evicted");
    assert!(
        !stack.devhost.running(&agent),
        "evict destroys the container"
    );
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_ne!(check["bootId"], boot_id.as_str(), "evict → new boot id");
    assert_eq!(check["bootCount"], 2);
}

#[test]
fn idle_sleep_destroys_the_container_and_the_next_request_boots_it() {
    let stack = require_or_skip!(Stack::start("HERMES_SLEEP_AFTER=4s\n"));
    let agent = random_agent();
    let first = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert!(stack.devhost.running(&agent));
    let deadline = Instant::now() + Duration::from_secs(60);
    while stack.devhost.running(&agent) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        !stack.devhost.running(&agent),
        "idle alarm did not destroy the container"
    );
    let second = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_ne!(first["bootId"], second["bootId"]);
    assert_eq!(second["bootCount"], 2);

    // A stream longer than the idle period keeps the container awake.
    let started = Instant::now();
    let resp = stack.call(
        "POST",
        "/hosted/agent/v1/chat/completions",
        &agent,
        Some(&chat_body(
            &format!("{} [mock:slow=400]", "w ".repeat(25)),
            true,
        )),
        &[],
    );
    assert!(
        started.elapsed() > Duration::from_secs(8),
        "the stream should outlast the idle period"
    );
    assert!(
        resp.body.contains("data: [DONE]"),
        "stream cut short: {}",
        resp.body
    );
    let third = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(third["bootId"], second["bootId"], "slept during a stream");
}

#[test]
fn a_hung_turn_hits_the_turn_timeout() {
    // The smallest allowed timeout is 30 s (SPEC §4 clamp).
    let stack = require_or_skip!(Stack::start("HERMES_TURN_TIMEOUT_MS=30000\n"));
    let agent = random_agent();
    assert_eq!(
        stack
            .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
            .status,
        200
    );
    let started = Instant::now();
    let resp = stack.call(
        "POST",
        "/hosted/agent/v1/chat/completions",
        &agent,
        Some(&chat_body("wait [mock:hang]", false)),
        &[],
    );
    let took = started.elapsed();
    assert_json_error(&resp, 504, "turn_timeout");
    assert!(
        took >= Duration::from_secs(29) && took < Duration::from_secs(60),
        "took {took:?}"
    );
    // The agent recovers.
    let resp = stack.call(
        "POST",
        "/hosted/agent/v1/chat/completions",
        &agent,
        Some(&chat_body("after", false)),
        &[],
    );
    assert_eq!(
        resp.json()["choices"][0]["message"]["content"],
        "mock: after"
    );
}

/// Host pids of the processes running as `uid` (host view).
fn pids_of_uid(uid: u64) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let real_uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next());
        if real_uid.and_then(|u| u.parse::<u64>().ok()) == Some(uid) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn faults_hermes_killed_mid_stream_and_supervisor_killed() {
    if !common::is_root() {
        eprintln!("SKIP faults test: finding and killing the container's processes needs root");
        return;
    }
    let stack = require_or_skip!(Stack::start(""));
    let agent = random_agent();
    let first = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(first["nonRoot"], true, "{first}");
    let info = Response::get(
        &format!("{}/containers/agent:{agent}", stack.devhost.url),
        &[],
    )
    .unwrap()
    .json();
    let uid_base = info["uidBase"]
        .as_u64()
        .expect("devhost reports the container's uid base");

    // Kill Hermes while a stream is flowing: the client sees a clean end
    // with an error event, never a hang.
    let bearer = stack.bearer();
    let resp = ureq::post(&stack.dev.url("/hosted/agent/v1/chat/completions"))
        .set("authorization", &bearer)
        .set("x-divinci-agent-id", &agent)
        .set("content-type", "application/json")
        .send_string(&chat_body(
            &format!("{} [mock:slow=300]", "word ".repeat(60)),
            true,
        ))
        .unwrap();
    let mut reader = resp.into_reader();
    let mut buf = [0u8; 4096];
    let mut text = String::new();
    while !text.contains("mock") {
        let n = reader.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended before the first content chunk: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let hermes = pids_of_uid(uid_base + 10001);
    assert!(
        !hermes.is_empty(),
        "no Hermes process found at host uid {}",
        uid_base + 10001
    );
    for pid in &hermes {
        // SAFETY: kill(2) on pids we just read.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    let killed_at = Instant::now();
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(20),
            "stream hangs after Hermes died"
        );
    }
    assert!(
        !text.contains("[DONE]"),
        "a killed turn must not look complete"
    );
    assert!(
        text.contains("error"),
        "the stream must end with an error event: {text}"
    );

    // The agent recovers: the next requests restart Hermes in the same container.
    let mut recovered = None;
    for _ in 0..3 {
        let resp = stack.call(
            "POST",
            "/hosted/agent/v1/chat/completions",
            &agent,
            Some(&chat_body("again", false)),
            &[],
        );
        assert!(resp.body.starts_with('{'), "not JSON: {}", resp.body);
        if resp.status == 200 {
            recovered = Some(resp);
            break;
        }
        eprintln!(
            "not yet recovered: {} {}\n{}",
            resp.status,
            resp.body,
            stack.dev.log_tail()
        );
    }
    let resp = recovered.expect("the agent did not recover after Hermes was killed");
    assert_eq!(
        resp.json()["choices"][0]["message"]["content"],
        "mock: again"
    );
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(
        check["bootId"], first["bootId"],
        "Hermes restarts without a new container"
    );

    // Kill the supervisor (PID 1 of the container): the object notices and
    // boots a new container on the next request.
    let resp = Response::send(
        "POST",
        &format!("{}/containers/agent:{agent}/signal", stack.devhost.url),
        &[("content-type", "application/json")],
        Some("{\"signal\":9}"),
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stack.devhost.running(&agent) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let check = stack.call("GET", "/hosted/agent/boot-check", &agent, None, &[]);
    assert_eq!(check.status, 200, "{}", check.body);
    let check = check.json();
    assert_ne!(
        check["bootId"], first["bootId"],
        "a new boot after the supervisor died"
    );
    assert_eq!(check["nonRoot"], true);
}

#[test]
fn terminal_through_the_edge() {
    if !common::is_root() {
        eprintln!("SKIP terminal test: the containment layers need root (devhost namespaces)");
        return;
    }
    let stack = require_or_skip!(Stack::start("HERMES_WORKSPACE_CLI_ENABLED=true\n"));
    let agent = random_agent();
    let t = |op: &str, body: serde_json::Value| {
        stack.call(
            "POST",
            &format!("/hosted/agent/terminal/{op}"),
            &agent,
            Some(&body.to_string()),
            &[],
        )
    };

    let status = stack.call("GET", "/hosted/agent/terminal/status", &agent, None, &[]);
    assert_eq!(status.status, 200, "{}", status.body);
    let status = status.json();
    for layer in ["identity", "environment", "network", "filesystem"] {
        assert_eq!(status["layers"][layer], "established", "{status}");
    }
    assert_eq!(status["uid"], 10002);
    let check = stack
        .call("GET", "/hosted/agent/boot-check", &agent, None, &[])
        .json();
    assert_eq!(
        check["terminalBoundary"]["network"], "established",
        "{check}"
    );

    let r = t("exec", serde_json::json!({"command": "echo hi; id -u"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["stdout"], "hi\n10002\n");
    assert_eq!(r.json()["exitCode"], 0);
    // A failing command is a normal result.
    let r = t("exec", serde_json::json!({"command": "exit 3"}));
    assert_eq!(
        (r.status, r.json()["exitCode"].as_i64()),
        (200, Some(3)),
        "{}",
        r.body
    );
    // The agent's credentials are out of reach.
    let r = t(
        "exec",
        serde_json::json!({"command": "cat /home/hermes/.hermes/.env"}),
    )
    .json();
    assert_ne!(r["exitCode"], 0, "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("ermission denied"),
        "{r}"
    );
    let r = t("exec", serde_json::json!({"command": "env"})).json();
    for secret in ["API_SERVER_KEY", "CONTROL_TOKEN", "OPENAI_API_KEY"] {
        assert!(!r["stdout"].as_str().unwrap_or("").contains(secret), "{r}");
    }

    // Files round-trip inside /workspace; escapes are refused.
    let r = t(
        "file/write",
        serde_json::json!({"path": "notes/a.txt", "content": "hello file"}),
    );
    assert_eq!(
        (r.status, r.json()["bytesWritten"].as_u64()),
        (200, Some(10)),
        "{}",
        r.body
    );
    let r = t(
        "file/read",
        serde_json::json!({"path": "/workspace/notes/a.txt"}),
    )
    .json();
    assert_eq!(r["content"], "hello file");
    let names: Vec<String> = t("file/list", serde_json::json!({"path": "notes"})).json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, vec!["a.txt"]);
    for bad in ["../etc/passwd", "/etc/passwd", "", "a\u{0}b"] {
        let r = t("file/read", serde_json::json!({"path": bad}));
        assert_json_error(&r, 400, "bad_request");
    }
    assert_json_error(
        &t("exec", serde_json::json!({"command": ""})),
        400,
        "bad_request",
    );
    assert_json_error(
        &t("exec", serde_json::json!({"nope": 1})),
        400,
        "bad_request",
    );

    // Egress outside the allowlist is refused by the guard.
    let r = t(
        "git-clone",
        serde_json::json!({"repoUrl": "https://evil.example/repo.git"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["egressDenied"], true, "{}", r.body);
    assert_json_error(
        &t(
            "git-clone",
            serde_json::json!({"repoUrl": "http://github.com/x/y"}),
        ),
        400,
        "bad_request",
    );

    // An exposed port is reachable through the edge; reserved ones are not.
    assert_json_error(
        &t("expose-port", serde_json::json!({"port": 8080})),
        400,
        "bad_request",
    );
    let r = t(
        "exec",
        serde_json::json!({"command": "mkdir -p site && echo served > site/index.html && cd site && (nohup python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 &) && sleep 1"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = t("expose-port", serde_json::json!({"port": 8123}));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = stack.call(
        "GET",
        "/hosted/agent/ports/8123/index.html",
        &agent,
        None,
        &[],
    );
    assert_eq!((r.status, r.body.trim()), (200, "served"));
    let r = stack.call("GET", "/hosted/agent/ports/8642/health", &agent, None, &[]);
    assert_json_error(&r, 400, "bad_request");

    // Hermes reaches the terminal only through the MCP server: a tool call
    // made by the model writes a file that the terminal route then reads.
    let call =
        r#"[mock:tool=mcp__hermes_terminal__write_file {"path":"mcp.txt","content":"via mcp"}]"#;
    let r = stack.call(
        "POST",
        "/hosted/agent/v1/chat/completions",
        &agent,
        Some(&chat_body(call, false)),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let content = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(content.starts_with("mock: tool result:"), "{content}");
    let r = t("file/read", serde_json::json!({"path": "mcp.txt"})).json();
    assert_eq!(r["content"], "via mcp", "{r}");

    // Google Workspace CLI: a token is required and never echoed; the call
    // reaches the supervisor's gws runner (the binary is only in the image:
    // locally the runner answers terminal_error, in the image 200).
    let ws = |token: Option<&str>| {
        let mut headers = vec![];
        if let Some(t) = token {
            headers.push(("x-workspace-token", t));
        }
        stack.call(
            "POST",
            "/hosted/agent/terminal/workspace",
            &agent,
            Some(r#"{"args":"--version"}"#),
            &headers,
        )
    };
    assert_json_error(&ws(None), 400, "bad_request");
    let r = ws(Some("not a token!"));
    assert_json_error(&r, 400, "bad_request");
    assert!(!r.body.contains("not a token!"));
    let r = ws(Some("ya29.secret-token-value"));
    assert!(!r.body.contains("secret-token-value"), "{}", r.body);
    assert!(matches!(r.status, 200 | 502), "{}", r.body);
    if r.status == 502 {
        assert_eq!(r.json()["error"], "terminal_error", "{}", r.body);
    }
}
