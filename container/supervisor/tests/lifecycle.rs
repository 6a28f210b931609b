//! Gateway lifecycle and the streaming proxy against real processes, with
//! stand-ins for Hermes (a shell tree that ignores SIGTERM; a small Python
//! API server) so every edge case is deterministic and fast. The real Hermes
//! is exercised in `real_hermes.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// A gateway that starts a child, a grandchild in its own session, ignores
/// SIGTERM everywhere and records the PIDs.
fn stubborn_tree_bin(dir: &std::path::Path) -> PathBuf {
    let bin = dir.join("stubborn-hermes");
    write_exec(
        &bin,
        "#!/bin/sh\n\
         trap '' TERM\n\
         sleep 300 &\n\
         echo $! >> \"$HERMES_HOME/pids\"\n\
         setsid sleep 301 &\n\
         echo $! >> \"$HERMES_HOME/pids\"\n\
         echo $$ >> \"$HERMES_HOME/pids\"\n\
         exec sleep 302\n",
    );
    bin
}

fn fake_api_bin(dir: &std::path::Path) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_hermes.py");
    let bin = dir.join("fake-hermes");
    write_exec(
        &bin,
        &format!("#!/bin/sh\nexec /usr/bin/python3 {}\n", script.display()),
    );
    bin
}

fn read_pids(s: &Supervisor, want: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(s.hermes_home().join("pids")).unwrap_or_default();
        let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() >= want || Instant::now() > deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn gateway_runs_dropped_and_stop_leaves_nothing_behind() {
    let bins = temp_dir("bins");
    let s = Supervisor::start("tree", Options::with_bin(&stubborn_tree_bin(&bins)));
    assert_eq!(s.provision(json!({})).0, 200);
    let (status, started) = s.call("POST", "/_control/hermes/start", None);
    assert_eq!(status, 200, "{started}");
    let pid = started["pid"].as_u64().unwrap() as u32;
    let pids = read_pids(&s, 3);
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert!(pids.iter().all(|p| alive(*p)));

    // Identity, capabilities and environment, read from /proc.
    let uid_line = proc_status_field(pid, "Uid").unwrap();
    for field in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
        assert_eq!(
            proc_status_field(pid, field).unwrap(),
            "0000000000000000",
            "{field}"
        );
    }
    assert_eq!(proc_status_field(pid, "NoNewPrivs").unwrap(), "1");
    let environ =
        String::from_utf8(std::fs::read(format!("/proc/{pid}/environ")).unwrap()).unwrap();
    // PWD is added by /bin/sh before its `exec`, not by the supervisor (the
    // real gateway's environment is checked exactly in real_hermes.rs).
    let mut names: Vec<&str> = environ
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| e.split('=').next().unwrap())
        .filter(|n| *n != "PWD")
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["HERMES_HOME", "HOME", "LANG", "PATH"]);
    assert!(
        !environ.contains(&s.token),
        "control token inherited by the gateway"
    );
    // Own session and process group.
    assert!(group_members(pid).contains(&pid));

    let (_, check) = s.call("GET", "/_control/boot-check", None);
    assert_eq!(check["gatewayPid"], pid);
    assert_eq!(check["keyFingerprint"], "fp-test-1");
    assert_eq!(check["bootId"], "boot-tree");
    // Every layer is reported (the terminal suite checks the values).
    for layer in ["identity", "environment", "network", "filesystem"] {
        assert!(
            check["terminalBoundary"][layer].is_string(),
            "{layer}: {check}"
        );
    }
    let marker = check["imageMarker"].as_str().unwrap();
    assert_eq!(marker.len(), 16, "{marker}");
    if is_root() {
        assert_eq!(uid_line, "10001\t10001\t10001\t10001");
        assert_eq!(
            proc_status_field(pid, "CapBnd").unwrap(),
            "0000000000000000"
        );
        assert_eq!(proc_status_field(pid, "Groups").unwrap_or_default(), "");
        assert_eq!(check["gatewayUid"], 10001);
        assert_eq!(check["nonRoot"], true);
    } else {
        skip(
            "uid 10001 assertions",
            "not root: the gateway runs as the current user",
        );
        let me = unsafe { libc::geteuid() };
        assert_eq!(check["gatewayUid"], me, "boot-check reports the real uid");
        assert_eq!(check["nonRoot"], me != 0);
    }

    // Everything ignores SIGTERM, so this exercises grace + SIGKILL.
    let t0 = Instant::now();
    let (status, stopped) = s.call("POST", "/_control/hermes/stop", None);
    let took = t0.elapsed();
    assert_eq!(
        (status, stopped),
        (
            200,
            json!({"ok": true, "status": "stopped", "pid": null, "ready": false})
        )
    );
    assert!(
        took >= Duration::from_secs(4),
        "SIGKILL came before the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(12), "stop too slow: {took:?}");
    for p in &pids {
        assert!(!alive(*p), "process {p} survived stop");
    }
    assert!(group_members(pid).is_empty(), "group {pid} not empty");
    assert_eq!(
        s.call("GET", "/_control/hermes/ready", None).1["status"],
        "stopped"
    );
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn restart_replaces_the_gateway() {
    let bins = temp_dir("bins");
    let s = Supervisor::start("restart", Options::with_bin(&fake_api_bin(&bins)));
    assert_eq!(s.provision(json!({})).0, 200);
    let first = s.call("POST", "/_control/hermes/start", None).1["pid"]
        .as_u64()
        .unwrap() as u32;
    assert_eq!(s.wait_ready(true, Duration::from_secs(15))["ready"], true);
    assert_eq!(s.provision(json!({"keyFingerprint": "fp-test-2"})).0, 200);
    let second = s.call("POST", "/_control/hermes/start", None).1["pid"]
        .as_u64()
        .unwrap() as u32;
    assert_ne!(first, second);
    assert!(!alive(first), "old gateway still running after restart");
    let state = s.wait_ready(true, Duration::from_secs(15));
    assert_eq!(
        (state["ready"].clone(), state["pid"].clone()),
        (json!(true), json!(second))
    );
    assert_eq!(
        s.call("GET", "/_control/boot-check", None).1["keyFingerprint"],
        "fp-test-2"
    );
    let events = std::fs::read_to_string(s.hermes_home().join("fake-events")).unwrap();
    let expected_uid = if is_root() {
        10001
    } else {
        unsafe { libc::geteuid() }
    };
    assert!(
        events.contains(&format!("started uid={expected_uid}")),
        "{events}"
    );
    let _ = std::fs::remove_dir_all(bins);
}

/// Answers every connection with Hermes' exact health JSON.
fn impostor(listener: TcpListener, stop: Arc<AtomicBool>) {
    listener.set_nonblocking(true).unwrap();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut conn, _)) => {
                conn.set_nonblocking(false).unwrap();
                let mut buf = [0u8; 2048];
                let _ = conn.read(&mut buf);
                let body = r#"{"status":"ok","platform":"hermes-agent","version":"0.19.0"}"#;
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[test]
fn a_fake_listener_on_the_hermes_port_does_not_fool_readiness() {
    let bins = temp_dir("bins");
    // Squat the API port before the gateway starts, with a perfect mimic.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || impostor(listener, stop))
    };
    // The mimic really answers like Hermes:
    let health: Value = ureq::get(&format!("http://127.0.0.1:{api_port}/health"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(health["platform"], "hermes-agent");

    let s = Supervisor::start(
        "impostor",
        Options {
            api_port: Some(api_port),
            ..Options::with_bin(&stubborn_tree_bin(&bins))
        },
    );
    assert_eq!(s.provision(json!({})).0, 200);
    assert_eq!(s.call("POST", "/_control/hermes/start", None).0, 200);
    for _ in 0..10 {
        let (_, state) = s.call("GET", "/_control/hermes/ready", None);
        assert_eq!(state["ready"], false, "impostor counted as ready: {state}");
        assert_eq!(state["status"], "starting");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();

    // A plain TCP acceptor that never answers: also not ready.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let s2 = Supervisor::start(
        "silent",
        Options {
            api_port: Some(silent_port),
            ..Options::with_bin(&stubborn_tree_bin(&bins))
        },
    );
    assert_eq!(s2.provision(json!({})).0, 200);
    assert_eq!(s2.call("POST", "/_control/hermes/start", None).0, 200);
    assert_eq!(s2.wait_ready(true, Duration::from_secs(2))["ready"], false);
    drop(silent);

    // Allow twin: the real (fake-API) gateway on its own port is ready.
    let s3 = Supervisor::start("genuine", Options::with_bin(&fake_api_bin(&bins)));
    assert_eq!(s3.provision(json!({})).0, 200);
    assert_eq!(s3.call("POST", "/_control/hermes/start", None).0, 200);
    assert_eq!(s3.wait_ready(true, Duration::from_secs(15))["ready"], true);
    let _ = std::fs::remove_dir_all(bins);
}

/// A started supervisor with the fake API server, ready.
fn proxy_fixture(tag: &str) -> (Supervisor, PathBuf) {
    let bins = temp_dir("bins");
    let s = Supervisor::start(tag, Options::with_bin(&fake_api_bin(&bins)));
    assert_eq!(s.provision(json!({})).0, 200);
    assert_eq!(s.call("POST", "/_control/hermes/start", None).0, 200);
    assert_eq!(s.wait_ready(true, Duration::from_secs(15))["ready"], true);
    (s, bins)
}

/// Raw HTTP/1.1 request over a socket; returns the reader after headers.
fn raw_request(
    s: &Supervisor,
    method: &str,
    path: &str,
    extra: &str,
) -> (TcpStream, BufReader<TcpStream>, String) {
    let mut conn = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n{extra}content-length: 0\r\n\r\n",
        s.token
    )
    .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    (conn, reader, head)
}

/// Read a chunked body until it ends or errors; returns (payload, clean end).
fn read_chunked(reader: &mut BufReader<TcpStream>) -> (String, bool) {
    let mut out = String::new();
    loop {
        let mut size_line = String::new();
        if reader.read_line(&mut size_line).unwrap_or(0) == 0 {
            return (out, false);
        }
        let Ok(size) = usize::from_str_radix(size_line.trim(), 16) else {
            return (out, false);
        };
        if size == 0 {
            return (out, true);
        }
        let mut data = vec![0u8; size + 2];
        if reader.read_exact(&mut data).is_err() {
            return (out, false);
        }
        out.push_str(&String::from_utf8_lossy(&data[..size]));
    }
}

#[test]
fn proxy_injects_the_gateway_key_and_forwards_only_allowlisted_headers() {
    let (s, bins) = proxy_fixture("headers");
    let response = ureq::get(&s.url("/_control/hermes-api/echo?q=1"))
        .set("Authorization", &format!("Bearer {}", s.token))
        .set("x-hermes-session-id", "sess-1")
        .set("x-hermes-session-key", "user-key")
        .set("accept", "application/json")
        .set("cookie", "a=b")
        .set("x-divinci-agent-id", "agent-evil")
        .set("x-forwarded-for", "1.2.3.4")
        .call()
        .unwrap();
    let echo: Value = response.into_json().unwrap();
    assert_eq!(echo["path"], "/echo?q=1");
    let headers = echo["headers"].as_object().unwrap();
    assert_eq!(headers["x-hermes-session-id"], "sess-1");
    assert_eq!(headers["x-hermes-session-key"], "user-key");
    assert_eq!(headers["accept"], "application/json");
    for dropped in ["cookie", "x-divinci-agent-id", "x-forwarded-for"] {
        assert!(!headers.contains_key(dropped), "{dropped} forwarded");
    }
    let auth = headers["authorization"].as_str().unwrap();
    assert!(
        !auth.contains(&s.token),
        "control token forwarded to Hermes"
    );
    let env = std::fs::read_to_string(s.hermes_home().join(".env")).unwrap();
    let key = env
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER_KEY='"))
        .unwrap()
        .trim_end_matches('\'');
    assert_eq!(auth, format!("Bearer {key}"));
    // Dot segments are refused before reaching Hermes (raw socket: HTTP
    // client libraries would resolve them away).
    let (_conn, _reader, head) = raw_request(&s, "GET", "/_control/hermes-api/v1/../echo", "");
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn proxy_streams_a_large_upload() {
    let (s, bins) = proxy_fixture("upload");
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let response = ureq::post(&s.url("/_control/hermes-api/upload"))
        .set("Authorization", &format!("Bearer {}", s.token))
        .set("content-type", "application/octet-stream")
        .send_bytes(&payload)
        .unwrap();
    let v: Value = response.into_json().unwrap();
    assert_eq!(v["bytes"], payload.len());
    use sha2::Digest;
    let want: String = sha2::Sha256::digest(&payload)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v["sha256"], want);
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn sse_deadline_ends_the_stream_with_turn_timeout() {
    let (s, bins) = proxy_fixture("deadline");
    let t0 = Instant::now();
    let (_conn, mut reader, head) = raw_request(
        &s,
        "GET",
        "/_control/hermes-api/sse/slow",
        "x-hermes-deadline-ms: 1200\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let (body, clean) = read_chunked(&mut reader);
    let took = t0.elapsed();
    assert!(
        clean,
        "SSE stream must end cleanly after the error event: {body}"
    );
    assert!(
        body.contains("data: {\"n\": 0}"),
        "events flowed before the deadline: {body}"
    );
    assert!(body.ends_with("event: error\ndata: {\"ok\":false,\"error\":\"turn_timeout\",\"message\":\"the turn deadline expired; the upstream request was aborted\"}\n\n"), "{body}");
    assert!(
        took >= Duration::from_millis(1100) && took < Duration::from_secs(4),
        "{took:?}"
    );
    // Hermes saw its request aborted.
    let deadline = Instant::now() + Duration::from_secs(3);
    while !std::fs::read_to_string(s.hermes_home().join("fake-events"))
        .unwrap_or_default()
        .contains("client-gone")
    {
        assert!(
            Instant::now() < deadline,
            "upstream request was not aborted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn deadline_before_headers_is_504_and_non_sse_bodies_are_cut() {
    let (s, bins) = proxy_fixture("deadline504");
    let auth = format!("Bearer {}", s.token);
    let t0 = Instant::now();
    let result = ureq::get(&s.url("/_control/hermes-api/slow-headers"))
        .set("Authorization", &auth)
        .set("x-hermes-deadline-ms", "800")
        .call();
    let Err(ureq::Error::Status(504, response)) = result else {
        panic!("expected 504")
    };
    let v: Value = response.into_json().unwrap();
    assert_eq!(v["error"], "turn_timeout");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // Bad deadline header → 400.
    let (status, _) = s.call_with("GET", "/_control/hermes-api/echo", None, Some(&auth));
    assert_eq!(status, 200);
    let result = ureq::get(&s.url("/_control/hermes-api/echo"))
        .set("Authorization", &auth)
        .set("x-hermes-deadline-ms", "soon")
        .call();
    assert!(matches!(result, Err(ureq::Error::Status(400, _))));
    // A JSON body in progress is cut, not completed, at the deadline.
    let (_conn, mut reader, head) = raw_request(
        &s,
        "GET",
        "/_control/hermes-api/json/slow",
        "x-hermes-deadline-ms: 800\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (body, clean) = read_chunked(&mut reader);
    assert!(
        !clean,
        "a truncated JSON body must not look complete: {body}"
    );
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn hermes_dying_mid_stream_ends_sse_with_gateway_error() {
    let (s, bins) = proxy_fixture("die");
    let (_conn, mut reader, head) = raw_request(&s, "GET", "/_control/hermes-api/sse/die", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (body, clean) = read_chunked(&mut reader);
    assert!(clean, "{body}");
    assert!(body.starts_with("data: {\"n\": 0}\n\n"), "{body}");
    assert!(
        body.contains("event: error\ndata: {\"ok\":false,\"error\":\"gateway_error\""),
        "{body}"
    );
    // The connection drops while the process is still exiting; it is
    // reported stopped once reaped.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = s.call("GET", "/_control/hermes/ready", None).1;
        if state["status"] == "stopped" {
            assert_eq!(state["ready"], false);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dead gateway is not reported stopped: {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn client_disconnect_aborts_the_upstream_request() {
    let (s, bins) = proxy_fixture("disconnect");
    let (conn, mut reader, head) = raw_request(&s, "GET", "/_control/hermes-api/sse/slow", "");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut line = String::new();
    reader.read_line(&mut line).unwrap(); // first chunk size
    let (_, activity) = s.call("GET", "/_control/activity", None);
    assert_eq!(activity["inFlight"], 1, "{activity}");
    assert!(activity["lastActivityMsAgo"].as_u64().unwrap() < 1000);
    drop(reader);
    conn.shutdown(std::net::Shutdown::Both).unwrap();
    drop(conn);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let events =
            std::fs::read_to_string(s.hermes_home().join("fake-events")).unwrap_or_default();
        let in_flight = s.call("GET", "/_control/activity", None).1["inFlight"].clone();
        if events.contains("client-gone") && in_flight == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "upstream not aborted: events={events:?} inFlight={in_flight}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn orphans_of_a_crashed_gateway_are_killed_by_stop() {
    let bins = temp_dir("bins");
    let bin = bins.join("crashing-hermes");
    write_exec(
        &bin,
        "#!/bin/sh\nsetsid sleep 303 &\necho $! >> \"$HERMES_HOME/pids\"\nsleep 0.3\nexit 1\n",
    );
    let s = Supervisor::start("orphan", Options::with_bin(&bin));
    assert_eq!(s.provision(json!({})).0, 200);
    assert_eq!(s.call("POST", "/_control/hermes/start", None).0, 200);
    let orphan = read_pids(&s, 1)[0];
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.call("GET", "/_control/hermes/ready", None).1["status"] != "stopped" {
        assert!(
            Instant::now() < deadline,
            "crashed gateway not reported stopped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        alive(orphan),
        "the orphan outlived its gateway (precondition)"
    );
    assert_eq!(s.call("POST", "/_control/hermes/stop", None).0, 200);
    assert!(
        !alive(orphan),
        "orphan {orphan} of the crashed gateway survived stop"
    );
    let _ = std::fs::remove_dir_all(bins);
}

#[test]
fn sigterm_stops_hermes_then_the_supervisor_exits() {
    let (mut s, bins) = proxy_fixture("sigterm");
    let pid = s.call("GET", "/_control/hermes/ready", None).1["pid"]
        .as_u64()
        .unwrap() as u32;
    assert!(alive(pid));
    // SAFETY: signals the supervisor child this test started.
    unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "supervisor did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(!alive(pid), "Hermes outlived the supervisor's shutdown");
    assert!(group_members(pid).is_empty());
    let _ = std::fs::remove_dir_all(bins);
}
