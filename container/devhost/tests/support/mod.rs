//! Test harness: runs the real `hermes-devhost` binary on a free port with
//! its own state directory, and speaks HTTP to it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const STUB: &str = env!("CARGO_BIN_EXE_hermes-devhost-stub-supervisor");
pub const DEVHOST: &str = env!("CARGO_BIN_EXE_hermes-devhost");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// True when running as root; otherwise prints a loud skip line.
pub fn root_or_skip(test: &str) -> bool {
    if hermes_devhost::procfs::is_root() {
        return true;
    }
    skip(
        test,
        "needs root (namespace isolation); run the tests as root to cover it",
    );
    false
}

/// Prints a skip notice past libtest's output capture (which only catches
/// the print macros), so a skipped test is visible in every run.
pub fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

pub struct Devhost {
    child: Child,
    pub base: String,
    pub mock_url: String,
    pub state_dir: PathBuf,
}

impl Devhost {
    pub fn start() -> Self {
        Self::start_with(STUB, &[])
    }

    pub fn start_with(supervisor: &str, env: &[(&str, &str)]) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let state_dir =
            std::env::temp_dir().join(format!("devhost-test-{}-{n}", std::process::id()));
        let mut cmd = Command::new(DEVHOST);
        cmd.args([
            "--listen",
            "127.0.0.1:0",
            "--mock-listen",
            "127.0.0.1:0",
            "--state-dir",
        ])
        .arg(&state_dir)
        .env("HERMES_SUPERVISOR_BIN", supervisor)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn devhost");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("ready line");
        let mut parts = line.split_whitespace();
        assert_eq!(
            parts.next(),
            Some("DEVHOST_READY"),
            "unexpected first line {line:?}"
        );
        let base = parts.next().expect("api url").to_owned();
        let mock_url = parts.next().expect("mock url").to_owned();
        Self {
            child,
            base,
            mock_url,
            state_dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        request("GET", &self.url(path), None, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        request("POST", &self.url(path), Some(&body.to_string()), None)
    }

    pub fn start_container(&self, id: &str, token: &str, boot: &str) -> Value {
        let (code, body) = self.post(
            &format!("/containers/{id}/start"),
            &serde_json::json!({"env": {"CONTROL_TOKEN": token, "BOOT_ID": boot, "AGENT_ID": id}}),
        );
        assert_eq!(code, 200, "start {id}: {body}");
        body
    }

    /// Polls the container's control health through the devhost until 200.
    pub fn wait_ready(&self, id: &str, token: &str, path: &str) -> Duration {
        let t0 = Instant::now();
        loop {
            let (code, _) = request(
                "GET",
                &self.url(&format!("/containers/{id}/ports/8080{path}")),
                None,
                Some(token),
            );
            if code == 200 {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{id} never became ready (last {code})"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM and wait, like Ctrl-C.
    pub fn shutdown(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id() as i32;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "devhost did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Devhost {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.shutdown_quietly();
        }
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

impl Devhost {
    fn shutdown_quietly(&mut self) -> Option<()> {
        let pid = self.child.id() as i32;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        for _ in 0..500 {
            if self.child.try_wait().ok()?.is_some() {
                return Some(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Some(())
    }
}

/// One request with ureq; any status is returned, never an error.
pub fn request(method: &str, url: &str, body: Option<&str>, token: Option<&str>) -> (u16, Value) {
    let (code, text) = request_text(method, url, body, token);
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (code, value)
}

pub fn request_text(
    method: &str,
    url: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build();
    let mut req = agent.request(method, url);
    if let Some(t) = token {
        req = req.set("authorization", &format!("Bearer {t}"));
    }
    let result = match body {
        Some(b) => req.set("content-type", "application/json").send_string(b),
        None => req.call(),
    };
    match result {
        Ok(resp) => (resp.status(), resp.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(code, resp)) => (code, resp.into_string().unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// A raw HTTP/1.1 exchange whose response is read incrementally.
pub struct RawStream {
    stream: TcpStream,
    pub seen: Vec<u8>,
}

impl RawStream {
    pub fn open(base: &str, method: &str, path: &str, token: &str, body: Option<&[u8]>) -> Self {
        let addr = base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n"
        );
        if let Some(b) = body {
            head.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("write");
        if let Some(b) = body {
            stream.write_all(b).expect("write body");
        }
        Self {
            stream,
            seen: Vec::new(),
        }
    }

    /// Opens a chunked upload whose body is written later with [`Self::send_chunk`].
    pub fn open_chunked(base: &str, path: &str, token: &str) -> Self {
        let addr = base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).expect("write");
        Self {
            stream,
            seen: Vec::new(),
        }
    }

    pub fn send_chunk(&mut self, data: &[u8]) {
        let framed = format!("{:x}\r\n", data.len());
        self.stream
            .write_all(framed.as_bytes())
            .expect("chunk head");
        self.stream.write_all(data).expect("chunk");
        self.stream.write_all(b"\r\n").expect("chunk end");
        self.stream.flush().expect("flush");
    }

    pub fn finish_chunks(&mut self) {
        self.stream.write_all(b"0\r\n\r\n").expect("last chunk");
    }

    /// Reads until `needle` has been seen; panics on timeout or EOF first.
    pub fn read_until(&mut self, needle: &str) {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&self.seen).contains(needle) {
            match self.stream.read(&mut buf) {
                Ok(0) => panic!(
                    "EOF before {needle:?}; got {:?}",
                    String::from_utf8_lossy(&self.seen)
                ),
                Ok(n) => self.seen.extend_from_slice(&buf[..n]),
                Err(e) => panic!(
                    "no {needle:?} in time ({e}); got {:?}",
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
    }

    /// True when the response has not ended (no EOF) within `wait`.
    pub fn still_open_after(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).expect("timeout");
        let mut buf = [0u8; 4096];
        let open = match self.stream.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.seen.extend_from_slice(&buf[..n]);
                !String::from_utf8_lossy(&self.seen).contains("0\r\n\r\n")
            }
            Err(_) => true,
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        open
    }

    /// Reads to EOF, counting bytes (headers and chunk framing included).
    pub fn read_to_end_len(&mut self) -> usize {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0;
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => total += n,
                Err(e) => panic!("read failed after {total} bytes: {e}"),
            }
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }
}

/// Host pids in the same PID namespace as host pid `pid`.
pub fn namespace_of(pid: u32) -> u64 {
    hermes_devhost::procfs::pid_namespace(pid).expect("pid namespace")
}

/// Real uid of host pid `pid` (from `/proc/<pid>/status`).
pub fn host_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn cmdline(pid: u32) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// Sends `path` byte for byte (no client-side normalisation of `%2e%2e`)
/// and returns the status and the raw response text.
pub fn raw_status(base: &str, method: &str, path: &str) -> (u16, String) {
    let mut s = RawStream::open(base, method, path, "x", Some(b"{}"));
    let mut buf = Vec::new();
    let _ = s.stream.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}
