//! The runtime API against real processes: the devhost binary, bubblewrap
//! and the stub supervisor. Tests that need namespaces skip loudly without
//! root.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::{request, Devhost, RawStream};

#[test]
fn bad_ids_are_400_json() {
    let dh = Devhost::start();
    for path in [
        "/containers/UPPER/start",
        "/containers/-lead/start",
        "/containers/a.b/start",
        "/containers/..%2f..%2fetc/start",
        "/containers/%2e%2e/start",
        &format!("/containers/{}/start", "a".repeat(129)),
    ] {
        let (code, body) = support::raw_status(&dh.base, "POST", path);
        assert_eq!(code, 400, "{path}: {body}");
        assert!(body.contains(r#""ok":false"#), "{body}");
        assert!(
            body.contains(r#""error":"invalid_container_id""#),
            "{path}: {body}"
        );
    }
    let (code, body) = dh.get("/containers/Bad/ports/8080/x");
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("invalid_container_id"))
    );
    let (code, body) = dh.get("/nowhere");
    assert_eq!((code, body["error"].as_str()), (404, Some("not_found")));
    // Bad env names and bodies are refused before anything starts.
    let (code, body) = dh.post("/containers/ok1/start", &json!({"env": {"BAD-NAME": "x"}}));
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    let (code, _) = dh.post("/containers/ok1/start", &json!({"env": {"A": 1}}));
    assert_eq!(code, 400);
    // The error never quotes a value from the body (it may be a secret).
    for bad in [
        json!({"env": "CONTROL_TOKEN=sekrit-value"}),
        json!({"env": {"CONTROL_TOKEN": ["sekrit-value"]}}),
    ] {
        let (code, body) = dh.post("/containers/ok1/start", &bad);
        assert_eq!(code, 400);
        assert!(!body.to_string().contains("sekrit"), "{body}");
    }
    let (code, body) = dh.post(
        "/containers/ok1/start",
        &json!({"env": {"BAD NAME": "sekrit-value"}}),
    );
    assert_eq!(code, 400);
    assert!(!body.to_string().contains("sekrit"), "{body}");
    let (code, body) = dh.get("/containers/ok1");
    assert_eq!((code, body["running"].as_bool()), (200, Some(false)));
}

#[test]
fn lifecycle_409_503_signal_and_fetch_reaches_the_right_container() {
    let dh = Devhost::start();
    // Never started: not running, and a fetch says what Cloudflare says.
    let (code, body) = dh.get("/containers/c-a/ports/8080/_control/health");
    assert_eq!(code, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("the container is not listening"),
        "{body}"
    );

    let t0 = Instant::now();
    dh.start_container("c-a", "token-a-0123456789", "boot-a");
    let start_ms = t0.elapsed();
    let ready = dh.wait_ready("c-a", "token-a-0123456789", "/_control/health");
    eprintln!(
        "measured: start call {start_ms:?}, start → control port answering {:?}",
        start_ms + ready
    );
    dh.start_container("c-b", "token-b-0123456789", "boot-b");
    dh.wait_ready("c-b", "token-b-0123456789", "/_control/health");

    // Double start → 409 JSON.
    let (code, body) = dh.post("/containers/c-a/start", &json!({"env": {}}));
    assert_eq!(
        (code, body["error"].as_str()),
        (409, Some("already_running")),
        "{body}"
    );

    // Each id reaches its own supervisor: boot ids differ, tokens are per container.
    let (code, a) = request(
        "GET",
        &dh.url("/containers/c-a/ports/8080/_control/health"),
        None,
        Some("token-a-0123456789"),
    );
    assert_eq!((code, a["bootId"].as_str()), (200, Some("boot-a")));
    let (code, b) = request(
        "GET",
        &dh.url("/containers/c-b/ports/8080/_control/health"),
        None,
        Some("token-b-0123456789"),
    );
    assert_eq!((code, b["bootId"].as_str()), (200, Some("boot-b")));
    let (code, _) = request(
        "GET",
        &dh.url("/containers/c-b/ports/8080/_control/health"),
        None,
        Some("token-a-0123456789"),
    );
    assert_eq!(code, 401, "container b must not accept a's token");

    // Query strings and methods are forwarded; unmapped ports are refused.
    let (code, who) = request(
        "GET",
        &dh.url("/containers/c-a/ports/8080/whoami?x=1"),
        None,
        Some("token-a-0123456789"),
    );
    assert_eq!(code, 200);
    assert_eq!(who["agentId"], "c-a");
    assert!(
        who["mockModelUrl"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{who}"
    );
    let names: Vec<&str> = who["envNames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for needed in [
        "HERMES_CONTROL_PORT",
        "HERMES_API_PORT",
        "HERMES_EGRESS_GUARD_PORT",
        "HERMES_BIN",
        "HERMES_CONTROL_HOST",
    ] {
        assert!(names.contains(&needed), "{needed} missing from {names:?}");
    }
    let (code, body) = dh.get("/containers/c-a/ports/9999/x");
    assert_eq!(code, 503, "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("container port not found"));
    // Nothing listens on the (mapped) Hermes port yet.
    let (code, body) = dh.get("/containers/c-a/ports/8642/health");
    assert_eq!(code, 503, "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("the container is not listening"));

    // signal(15): the stub exits; the runtime reports it stopped.
    let (code, body) = dh.post("/containers/c-a/signal", &json!({"signal": 15}));
    assert_eq!(code, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, status) = dh.get("/containers/c-a");
        if status["running"] == false {
            assert_eq!(status["exitCode"], 0, "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "container did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, body) = dh.get("/containers/c-a/ports/8080/_control/health");
    assert_eq!(code, 503);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("the container is not listening"));
    let (code, _) = dh.post("/containers/c-a/signal", &json!({"signal": 15}));
    assert_eq!(code, 409);
    let (code, _) = dh.post("/containers/c-b/signal", &json!({"signal": 0}));
    assert_eq!(code, 400);

    // A supervisor that dies reports its exit code; the container is stopped.
    let (code, _) = request(
        "POST",
        &dh.url("/containers/c-b/ports/8080/exit?code=3"),
        Some(""),
        Some("token-b-0123456789"),
    );
    assert_eq!(code, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, status) = dh.get("/containers/c-b");
        if status["running"] == false {
            assert_eq!(status["exitCode"], 3, "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "container did not stop after exit(3)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, body) = dh.get("/containers/c-b/ports/8080/_control/health");
    assert_eq!(code, 503, "{body}");

    // An exited container can be started again (fresh), like production.
    dh.start_container("c-a", "token-a2-0123456789", "boot-a2");
    dh.wait_ready("c-a", "token-a2-0123456789", "/_control/health");

    // Destroy is idempotent.
    for _ in 0..2 {
        let (code, body) = dh.post("/containers/c-a/destroy", &json!({}));
        assert_eq!((code, body["ok"].as_bool()), (200, Some(true)));
    }
    let (code, _) = dh.post("/containers/never-started/destroy", &json!({}));
    assert_eq!(code, 200);
}

#[test]
fn streaming_passes_through_unbuffered_both_ways() {
    let dh = Devhost::start();
    dh.start_container("s1", "tok-s1-0123456789", "b");
    dh.wait_ready("s1", "tok-s1-0123456789", "/_control/health");

    // Response: the stub sends "first", then waits for /release before it
    // sends "second" and ends. Seeing "first" before releasing proves the
    // chunk was forwarded before the body ended.
    let mut stream = RawStream::open(
        &dh.base,
        "GET",
        "/containers/s1/ports/8080/stream",
        "tok-s1-0123456789",
        None,
    );
    let t0 = Instant::now();
    stream.read_until("first");
    eprintln!("measured: first streamed chunk after {:?}", t0.elapsed());
    assert!(!stream.text().contains("second"));
    assert!(
        stream.still_open_after(Duration::from_millis(200)),
        "body ended early"
    );
    let (code, _) = request(
        "POST",
        &dh.url("/containers/s1/ports/8080/release"),
        Some(""),
        Some("tok-s1-0123456789"),
    );
    assert_eq!(code, 200);
    stream.read_until("second");

    // Request body: a chunked upload is echoed piece by piece while the
    // upload is still open.
    let mut up = RawStream::open_chunked(
        &dh.base,
        "/containers/s1/ports/8080/echo",
        "tok-s1-0123456789",
    );
    up.send_chunk(b"ping-one");
    up.read_until("ping-one");
    up.send_chunk(b"ping-two");
    up.read_until("ping-two");
    up.finish_chunks();
}

#[test]
fn two_containers_cannot_see_each_others_files() {
    if !support::root_or_skip("two_containers_cannot_see_each_others_files") {
        return;
    }
    let dh = Devhost::start();
    let (_, health) = dh.get("/healthz");
    assert_eq!(health["isolation"], "namespaces", "{health}");
    let (ta, tb) = ("tok-iso-a-0123456789", "tok-iso-b-0123456789");
    let sa = dh.start_container("agent:iso-a", ta, "a");
    let sb = dh.start_container("agent:iso-b", tb, "b");
    // Own uid ranges: container root is a different, unprivileged host uid.
    let (base_a, base_b) = (
        sa["uidBase"].as_u64().unwrap(),
        sb["uidBase"].as_u64().unwrap(),
    );
    assert_ne!(base_a, base_b);
    assert!(base_a >= 65536 && base_b >= 65536, "{sa} {sb}");
    assert_eq!(
        support::host_uid(sa["pid"].as_u64().unwrap() as u32),
        Some(base_a as u32)
    );
    dh.wait_ready("agent:iso-a", ta, "/_control/health");
    dh.wait_ready("agent:iso-b", tb, "/_control/health");
    let file = |id: &str, tok: &str, method: &str, path: &str, body: Option<&str>| {
        request(
            method,
            &dh.url(&format!("/containers/{id}/ports/8080/file?path={path}")),
            body,
            Some(tok),
        )
    };
    for path in [
        "/workspace/marker.txt",
        "/home/hermes/.hermes/marker.txt",
        "/tmp/marker.txt",
        "/var/lib/hermes-edge/marker",
    ] {
        let (code, body) = file("agent:iso-a", ta, "POST", path, Some("from-a"));
        assert_eq!(code, 200, "{path}: {body}");
        let (code, body) = file("agent:iso-b", tb, "GET", path, None);
        assert_eq!(code, 404, "b can read a's {path}: {body}");
        let (code, _) = file("agent:iso-b", tb, "POST", path, Some("from-b"));
        assert_eq!(code, 200);
        let (code, body) = file("agent:iso-a", ta, "GET", path, None);
        assert_eq!((code, body.as_str()), (200, Some("from-a")), "{path}");
    }
    // The host side of a's files is not reachable from b either.
    let host_path = dh
        .state_dir
        .join("containers/agent:iso-a/workspace/marker.txt");
    assert!(host_path.exists(), "files live under the state dir");
    {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(&host_path).unwrap().uid();
        assert_eq!(
            owner as u64, base_a,
            "a's files belong to a's uid range on the host"
        );
    }
    let (code, _) = file("agent:iso-b", tb, "GET", &host_path.to_string_lossy(), None);
    assert_eq!(code, 404, "b reached a's files through the host path");
    // Own PID namespace (the supervisor is PID 1) and own hostname.
    let (_, who) = request(
        "GET",
        &dh.url("/containers/agent:iso-b/ports/8080/whoami"),
        None,
        Some(tb),
    );
    assert_eq!(who["pid"], 1, "{who}");
    assert_eq!(who["hostname"], "agent:iso-b");
    // The developer's home is not in the view.
    let (code, _) = file("agent:iso-b", tb, "GET", "/root/.bash_history", None);
    assert_eq!(code, 404);
}

#[test]
fn destroy_kills_every_process_and_removes_files() {
    if !support::root_or_skip("destroy_kills_every_process_and_removes_files") {
        return;
    }
    let dh = Devhost::start();
    let tok = "tok-d-0123456789";
    let status = dh.start_container("d1", tok, "b");
    dh.wait_ready("d1", tok, "/_control/health");
    let host_pid = status["pid"].as_u64().unwrap() as u32;
    let ns = support::namespace_of(host_pid);
    // A grandchild that left the process group and session.
    let (code, body) = request(
        "POST",
        &dh.url("/containers/d1/ports/8080/spawn"),
        Some(""),
        Some(tok),
    );
    assert_eq!(code, 200, "{body}");
    let (code, _) = request(
        "POST",
        &dh.url("/containers/d1/ports/8080/file?path=/workspace/x"),
        Some("x"),
        Some(tok),
    );
    assert_eq!(code, 200);
    let before = hermes_devhost::procfs::pids_in_namespace(ns);
    assert!(
        before.len() >= 2,
        "expected supervisor + sleep, got {before:?}"
    );
    let dir = dh.state_dir.join("containers/d1");
    assert!(dir.join("workspace/x").exists());

    let t0 = Instant::now();
    let (code, body) = dh.post("/containers/d1/destroy", &json!({}));
    eprintln!("measured: destroy took {:?}", t0.elapsed());
    assert_eq!(
        (code, body["destroyed"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let left = hermes_devhost::procfs::pids_in_namespace(ns);
    assert!(left.is_empty(), "processes survived destroy: {left:?}");
    for pid in before {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || support::namespace_of(pid) != ns
        );
    }
    assert!(!dir.exists(), "files survived destroy");
    let (_, status) = dh.get("/containers/d1");
    assert_eq!(status["running"], false);
}

#[test]
fn secrets_never_appear_in_argv() {
    let dh = Devhost::start();
    let token = "tok-secret-argv-5a5a5a5a5a";
    let status = dh.start_container("argv1", token, "b");
    dh.wait_ready("argv1", token, "/_control/health");
    let pid = status["pid"].as_u64().unwrap() as u32;
    let mut pids = vec![pid];
    // bwrap's outer process too (the supervisor's parent).
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        if let Some(ppid) = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
        {
            pids.push(ppid.parse().unwrap());
        }
    }
    for p in pids {
        let argv = String::from_utf8_lossy(&support::cmdline(p)).into_owned();
        assert!(!argv.is_empty(), "no cmdline for {p}");
        assert!(!argv.contains(token), "token in argv of {p}: {argv}");
    }
    let (_, logs) = dh.get("/containers/argv1/logs");
    assert!(!logs.to_string().contains(token));
}

#[test]
fn shutdown_destroys_all_containers() {
    let mut dh = Devhost::start();
    let mut pids = Vec::new();
    for id in ["sd-a", "sd-b"] {
        let tok = format!("tok-{id}-0123456789");
        let st = dh.start_container(id, &tok, "b");
        dh.wait_ready(id, &tok, "/_control/health");
        pids.push(st["pid"].as_u64().unwrap() as u32);
    }
    let status = dh.shutdown();
    assert!(status.success(), "{status:?}");
    for pid in pids {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .map(|c| c.contains("stub-supervisor"))
            .unwrap_or(false);
        assert!(!alive, "supervisor {pid} survived devhost shutdown");
    }
    assert!(!dh.state_dir.join("containers/sd-a").exists());
    assert!(!dh.state_dir.join("containers/sd-b").exists());
}

#[test]
fn reduced_isolation_still_runs_and_destroys_the_group() {
    let dh = Devhost::start_with(support::STUB, &[("DEVHOST_ISOLATION", "reduced")]);
    let (_, health) = dh.get("/healthz");
    assert_eq!(health["isolation"], "reduced", "{health}");
    let tok = "tok-reduced-0123456789";
    let status = dh.start_container("red1", tok, "b");
    dh.wait_ready("red1", tok, "/_control/health");
    let (_, who) = request(
        "GET",
        &dh.url("/containers/red1/ports/8080/whoami"),
        None,
        Some(tok),
    );
    // No mount namespace: the supervisor is pointed at its own directory.
    let home = who["home"].as_str().unwrap().to_owned();
    assert!(home.starts_with(dh.state_dir.to_str().unwrap()), "{who}");
    let pgid = status["pid"].as_u64().unwrap() as u32;
    assert!(!hermes_devhost::procfs::pids_in_group(pgid).is_empty());
    let (code, _) = dh.post("/containers/red1/destroy", &json!({}));
    assert_eq!(code, 200);
    assert!(hermes_devhost::procfs::pids_in_group(pgid).is_empty());
    assert!(!dh.state_dir.join("containers/red1").exists());
}

#[test]
fn missing_supervisor_is_a_json_start_failure() {
    let dh = Devhost::start_with("/nonexistent/hermes-supervisor", &[]);
    let (code, body) = dh.post("/containers/nosup/start", &json!({"env": {}}));
    assert_eq!(code, 500, "{body}");
    assert_eq!(body["error"], "start_failed");
    assert!(
        body["message"].as_str().unwrap().contains("not found"),
        "{body}"
    );
    let (_, status) = dh.get("/containers/nosup");
    assert_eq!(status["running"], false);
}

/// Reads a whole response through a raw connection; returns body bytes.
fn drain(base: &str, path: &str, token: &str) -> usize {
    let mut s = RawStream::open(base, "GET", path, token, None);
    s.read_to_end_len()
}

#[test]
fn proxy_throughput_against_direct() {
    let dh = Devhost::start();
    let tok = "tok-tput-0123456789";
    let status = dh.start_container("tput", tok, "b");
    dh.wait_ready("tput", tok, "/_control/health");
    let direct = format!(
        "http://127.0.0.1:{}",
        status["ports"]["8080"].as_u64().unwrap()
    );
    let mb = 256;
    let path = format!("/bytes?mb={mb}");
    // Warm up both paths once.
    drain(&direct, "/bytes?mb=8", tok);
    drain(&dh.base, "/containers/tput/ports/8080/bytes?mb=8", tok);
    let t0 = Instant::now();
    let n_direct = drain(&direct, &path, tok);
    let direct_t = t0.elapsed();
    let t1 = Instant::now();
    let n_proxy = drain(&dh.base, &format!("/containers/tput/ports/8080{path}"), tok);
    let proxy_t = t1.elapsed();
    assert!(
        n_direct >= mb << 20 && n_proxy >= mb << 20,
        "{n_direct} {n_proxy}"
    );
    let rate = |t: Duration| (mb as f64) / t.as_secs_f64();
    eprintln!(
        "measured: {mb} MiB direct {:.0} MiB/s, through devhost {:.0} MiB/s (ratio {:.2})",
        rate(direct_t),
        rate(proxy_t),
        direct_t.as_secs_f64() / proxy_t.as_secs_f64()
    );
}

#[test]
fn a_caller_that_disconnects_aborts_the_upstream_exchange() {
    let dh = Devhost::start();
    let tok = "tok-abort-0123456789";
    dh.start_container("ab1", tok, "b");
    dh.wait_ready("ab1", tok, "/_control/health");
    let mut stream = RawStream::open(
        &dh.base,
        "GET",
        "/containers/ab1/ports/8080/stream",
        tok,
        None,
    );
    stream.read_until("first");
    drop(stream);
    let t0 = Instant::now();
    loop {
        let (_, v) = request(
            "GET",
            &dh.url("/containers/ab1/ports/8080/abandoned"),
            None,
            Some(tok),
        );
        if v["abandoned"] == 1 {
            eprintln!("measured: upstream saw the abort after {:?}", t0.elapsed());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "upstream never saw the caller leave: {v}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
