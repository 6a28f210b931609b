//! A stand-in for `hermes-supervisor`, used by devhost's tests: it listens
//! where devhost tells a supervisor to listen and exposes just enough to
//! check isolation, forwarding and teardown from the outside.
//!
//! Every route needs `Authorization: Bearer $CONTROL_TOKEN` (so the tests
//! also prove the token arrives through the environment). Routes:
//! `GET /_control/health`; `GET|POST /file?path=P` read/write a file;
//! `GET /whoami` (pid, hostname, env names — never values); `GET /stream`
//! (one chunk, then waits for `POST /release`, then a second chunk;
//! `GET /abandoned` counts streams whose client left before that);
//! `POST /echo` streams the request body back; `GET /bytes?mb=N` sends N MiB;
//! `POST /exit?code=N` exits with N; `POST /spawn` starts a
//! `sleep` that leaves the process group (setsid) to test teardown.

use bytes::Bytes;
use hermes_devhost::http::{full, json, read_body_limited, Body, BoxError, ChannelBody, Handler};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json as j;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

struct Stub {
    token: String,
    boot_id: String,
    started: Instant,
    release: Notify,
    /// Streams whose client went away before the end.
    abandoned: std::sync::atomic::AtomicU32,
}

fn query_path(req: &Request<Incoming>) -> Option<String> {
    let q = req.uri().query()?;
    q.split('&')
        .find_map(|kv| kv.strip_prefix("path="))
        .map(str::to_owned)
}

impl Handler for Stub {
    fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
        Box::pin(async move { self.dispatch(req).await })
    }
}

impl Stub {
    async fn dispatch(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let authorised = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| !self.token.is_empty() && t == self.token);
        if !authorised {
            return json(
                StatusCode::UNAUTHORIZED,
                &j!({"ok": false, "error": "unauthorized", "message": "bad token"}),
            );
        }
        match (req.method().clone(), req.uri().path()) {
            (Method::GET, "/_control/health") => json(
                StatusCode::OK,
                &j!({"ok": true, "bootId": self.boot_id, "uptimeMs": self.started.elapsed().as_millis() as u64}),
            ),
            (Method::GET, "/file") => match query_path(&req).map(std::fs::read) {
                Some(Ok(bytes)) => Response::new(full(bytes)),
                _ => json(
                    StatusCode::NOT_FOUND,
                    &j!({"ok": false, "error": "not_found", "message": "no such file"}),
                ),
            },
            (Method::POST, "/file") => {
                let Some(path) = query_path(&req) else {
                    return json(StatusCode::BAD_REQUEST, &j!({"ok": false}));
                };
                let body = read_body_limited(req.into_body(), 1 << 20)
                    .await
                    .unwrap_or_default();
                let result = std::path::Path::new(&path)
                    .parent()
                    .map(std::fs::create_dir_all)
                    .unwrap_or(Ok(()))
                    .and_then(|_| std::fs::write(&path, &body));
                match result {
                    Ok(()) => json(StatusCode::OK, &j!({"ok": true})),
                    Err(e) => json(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &j!({"ok": false, "message": e.to_string()}),
                    ),
                }
            }
            (Method::GET, "/whoami") => {
                let names: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                let hostname =
                    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                json(
                    StatusCode::OK,
                    &j!({"ok": true, "pid": std::process::id(), "hostname": hostname.trim(), "envNames": names,
                         "agentId": std::env::var("AGENT_ID").ok(), "home": std::env::var("HERMES_HOME_DIR").ok(),
                         "mockModelUrl": std::env::var("HERMES_MOCK_MODEL_URL").ok()}),
                )
            }
            (Method::GET, "/stream") => {
                let (tx, body) = ChannelBody::pair(4);
                let me = self.clone();
                tokio::spawn(async move {
                    let _ = tx.send(Bytes::from_static(b"first\n")).await;
                    tokio::select! {
                        _ = me.release.notified() => {
                            let _ = tx.send(Bytes::from_static(b"second\n")).await;
                        }
                        _ = tx.closed() => {
                            me.abandoned.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                });
                Response::new(body)
            }
            (Method::GET, "/abandoned") => json(
                StatusCode::OK,
                &j!({"ok": true, "abandoned": self.abandoned.load(std::sync::atomic::Ordering::SeqCst)}),
            ),
            (Method::POST, "/release") => {
                self.release.notify_waiters();
                json(StatusCode::OK, &j!({"ok": true}))
            }
            (Method::POST, "/echo") => {
                let body = req.into_body().map_err(|e| Box::new(e) as BoxError).boxed();
                Response::new(body)
            }
            (Method::GET, "/bytes") => {
                // `?mb=N`: N MiB in 64 KiB chunks, for throughput measurements.
                let mb: usize = req
                    .uri()
                    .query()
                    .and_then(|q| q.strip_prefix("mb="))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1)
                    .min(1024);
                let (tx, body) = ChannelBody::pair(8);
                tokio::spawn(async move {
                    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                    for _ in 0..mb * 16 {
                        if tx.send(chunk.clone()).await.is_err() {
                            return;
                        }
                    }
                });
                Response::new(body)
            }
            (Method::POST, "/exit") => {
                // `?code=N`: exit with N shortly after answering.
                let code: i32 = req
                    .uri()
                    .query()
                    .and_then(|q| q.strip_prefix("code="))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    std::process::exit(code);
                });
                json(StatusCode::OK, &j!({"ok": true}))
            }
            (Method::POST, "/spawn") => {
                let child = std::process::Command::new("setsid")
                    .args(["sleep", "1000"])
                    .stdin(std::process::Stdio::null())
                    .spawn();
                match child {
                    Ok(c) => json(StatusCode::OK, &j!({"ok": true, "pid": c.id()})),
                    Err(e) => json(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &j!({"ok": false, "message": e.to_string()}),
                    ),
                }
            }
            _ => json(
                StatusCode::NOT_FOUND,
                &j!({"ok": false, "error": "not_found", "message": "stub"}),
            ),
        }
    }
}

async fn run() -> Result<(), String> {
    let port: u16 = std::env::var(hermes_protocol::ports::env::CONTROL_PORT)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(hermes_protocol::ports::CONTROL_PORT);
    let token = std::env::var("CONTROL_TOKEN").unwrap_or_default();
    // Like the real supervisor: no child inherits the token.
    std::env::remove_var("CONTROL_TOKEN");
    let stub = Arc::new(Stub {
        token,
        boot_id: std::env::var("BOOT_ID").unwrap_or_default(),
        started: Instant::now(),
        release: Notify::new(),
        abandoned: std::sync::atomic::AtomicU32::new(0),
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    hermes_devhost::http::serve(listener, stub, rx).await;
    Ok(())
}

fn main() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            hermes_devhost::log!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // PID 1 gets no default signal actions: exit on SIGTERM explicitly.
    match rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| e.to_string())?;
        tokio::select! {
            r = run() => r,
            _ = term.recv() => { hermes_devhost::log!("stub-supervisor: SIGTERM"); Ok(()) }
        }
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            hermes_devhost::log!("stub-supervisor: {e}");
            ExitCode::FAILURE
        }
    }
}
