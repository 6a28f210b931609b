//! The real `hermes-egress-guard` binary: started like the supervisor will
//! start it (cleared environment, arguments only), spoken to over TCP, its
//! audit lines read from stderr, reloaded with SIGHUP, stopped with SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-egress-guard");

struct GuardProcess {
    child: Child,
    lines: Receiver<Value>,
    /// Lines read but not yet matched by a `wait_for`.
    backlog: Vec<Value>,
    addr: SocketAddr,
}

impl GuardProcess {
    async fn start(args: &[&str], env: &[(&str, &str)]) -> GuardProcess {
        let mut command = Command::new(BIN);
        command
            .env_clear()
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("non-JSON stderr line: {line}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let mut process = GuardProcess {
            child,
            lines,
            backlog: Vec::new(),
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        let listening = process.wait_for(|line| line["event"] == "listening").await;
        process.addr = listening["addr"].as_str().unwrap().parse().unwrap();
        process
    }

    /// Waits for a stderr line matching `predicate`, skipping others.
    async fn wait_for(&mut self, predicate: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.backlog.iter().position(&predicate) {
            return self.backlog.remove(index);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match self.lines.try_recv() {
                Ok(line) if predicate(&line) => return line,
                Ok(line) => self.backlog.push(line),
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        panic!("no matching stderr line within 10 s");
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) },
            0
        );
    }

    fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "guard exited with {status}");
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("guard did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A failing test must not leave a guard running.
impl Drop for GuardProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("hermes-egress-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

fn is_decision(line: &Value, decision: &str, host: &str) -> bool {
    line["decision"] == decision && line["host"] == host
}

#[test]
fn binary_serves_audits_and_reloads_from_file() {
    in_private_netns("binary_serves_audits_and_reloads_from_file", || async {
        let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
        let private = canary(format!("{PRIVATE}:443").parse().unwrap()).await;
        let file = temp_file("reload", "allowed.test, private.test, *.bad, github.com\n");
        let resolve = [
            "--allowlist-file",
            file.to_str().unwrap(),
            "--resolve",
            "allowed.test=11.0.0.1",
            "--resolve",
            "github.com=11.0.0.1",
            "--resolve",
            "private.test=10.0.0.5",
        ];
        let mut guard = GuardProcess::start(&resolve, &[]).await;

        let (reply, mut stream) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(reply.status, 200);
        assert_eq!(read_n(&mut stream, 15).await, "upstream-hello\n");
        let line = guard
            .wait_for(|l| is_decision(l, "allow", "allowed.test"))
            .await;
        assert_eq!(line["reason"], "host matches allowlist entry allowed.test");
        assert_eq!(
            (line["port"].as_u64(), line["proto"].as_str()),
            (Some(443), Some("connect"))
        );
        assert!(line["ts"].as_str().unwrap().ends_with('Z'));

        let (reply, _) = connect_via(guard.addr, "private.test:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (
                403,
                "Egress denied: resolved address 10.0.0.5 is a private address"
            )
        );
        guard
            .wait_for(|l| is_decision(l, "deny", "private.test"))
            .await;
        assert_eq!(private.get(), 0);

        // Narrow the list (atomic rename, as the supervisor should write it).
        let next = temp_file("reload.next", "github.com");
        std::fs::rename(&next, &file).unwrap();
        guard.signal(libc::SIGHUP);
        guard
            .wait_for(|l| {
                l["event"] == "allowlist_loaded"
                    && l["entries"] == serde_json::json!(["github.com"])
            })
            .await;
        let (reply, _) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (403, "Egress denied: host is not on the allowlist")
        );
        let (reply, _) = connect_via(guard.addr, "github.com:443").await;
        assert_eq!(reply.status, 200);

        // An unreadable file on reload fails closed: deny everything.
        std::fs::remove_file(&file).unwrap();
        guard.signal(libc::SIGHUP);
        guard
            .wait_for(|l| l["event"] == "allowlist_reload_failed")
            .await;
        let (reply, _) = connect_via(guard.addr, "github.com:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (
                403,
                "Egress denied: allowlist is empty: all egress is denied"
            )
        );
        guard.stop();
    });
}

#[test]
fn binary_reads_env_list_logs_dropped_entries_and_denies_on_empty() {
    in_private_netns(
        "binary_reads_env_list_logs_dropped_entries_and_denies_on_empty",
        || async {
            let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
            let args = ["--resolve", "allowed.test=11.0.0.1"];
            let mut guard = GuardProcess::start(
                &args,
                &[("EGRESS_ALLOWED_HOSTS", "allowed.test,*.evil.test,127.0.0.1")],
            )
            .await;
            let dropped = guard
                .wait_for(|l| l["event"] == "allowlist_entry_dropped")
                .await;
            assert_eq!(dropped["entry"], "*.evil.test");
            let (reply, _) = connect_via(guard.addr, "allowed.test:443").await;
            assert_eq!(reply.status, 200);
            guard.stop();

            let mut empty = GuardProcess::start(&args, &[("EGRESS_ALLOWED_HOSTS", "")]).await;
            let (reply, _) = connect_via(empty.addr, "allowed.test:443").await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (
                    403,
                    "Egress denied: allowlist is empty: all egress is denied"
                )
            );
            empty
                .wait_for(|l| is_decision(l, "deny", "allowed.test"))
                .await;
            empty.stop();
        },
    );
}

#[test]
fn binary_refuses_bad_arguments() {
    let output = Command::new(BIN)
        .env_clear()
        .args(["--max-tunnels", "zero"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad number \"zero\""));
    let output = Command::new(BIN)
        .env_clear()
        .args(["--allowlist-file", "/nonexistent/egress"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("cannot read allowlist file /nonexistent/egress"));
}
