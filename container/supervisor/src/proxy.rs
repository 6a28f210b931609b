//! `ANY /_control/hermes-api/<path>`: the streaming reverse proxy to Hermes.
//!
//! Request and response bodies flow chunk by chunk; nothing is buffered. The
//! caller's `authorization` is dropped and the running gateway's key
//! injected; only an allowlist of request headers is forwarded. A pump task
//! between Hermes' body and the client's enforces `x-hermes-deadline-ms`
//! (504 `turn_timeout` before the response starts; after it, an SSE stream
//! gets a final `event: error` and a clean end, any other body is cut), ends
//! an SSE stream with a `gateway_error` event if Hermes dies mid-stream, and
//! aborts the upstream request the moment the client goes away — dropping
//! the upstream connection is what tells Hermes to stop the turn.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hermes_protocol::{header::DEADLINE_MS, ControlError};
use http_body_util::{BodyExt, Either, Empty};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response};
use tokio::sync::mpsc::Sender;
use tokio::time::{Duration, Instant};

use crate::app::{App, InFlight};
use crate::body::{ChannelBody, FrameResult, ResponseBody, StreamAborted};
use crate::error::SupervisorError;
use crate::gateway;
use crate::upstream::{self, ConnectionGuard};

/// Request headers forwarded to Hermes. Everything else is dropped.
pub const FORWARDED_REQUEST_HEADERS: [&str; 4] = [
    "content-type",
    "accept",
    "x-hermes-session-id",
    "x-hermes-session-key",
];

/// Response headers that describe the hop, not the content.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
];

/// Frames buffered between Hermes and the client: enough to smooth
/// scheduling, small enough that a slow client back-pressures Hermes.
const CHANNEL_FRAMES: usize = 16;

/// How long a final error event may wait for a slow client.
const FINAL_EVENT_WAIT: Duration = Duration::from_secs(1);

/// The upstream path: `/` for an empty sub-path; no dot segments,
/// backslashes or NULs (the edge canonicalises; this is the second check).
pub fn upstream_path(sub_path: &str, query: Option<&str>) -> Result<String, SupervisorError> {
    let path = if sub_path.is_empty() { "/" } else { sub_path };
    let bad = !path.starts_with('/')
        || path.contains('\\')
        || path.contains('\0')
        || path.split('/').any(|seg| seg == "." || seg == "..");
    if bad {
        return Err(SupervisorError::BadRequest(
            "proxy path is not canonical".into(),
        ));
    }
    Ok(match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    })
}

/// `x-hermes-deadline-ms` → absolute deadline. Garbage is the caller's bug.
pub fn parse_deadline(
    headers: &HeaderMap,
    received: Instant,
) -> Result<Option<Instant>, SupervisorError> {
    let Some(raw) = headers.get(DEADLINE_MS) else {
        return Ok(None);
    };
    let ms: u64 = raw
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|ms| *ms > 0)
        .ok_or_else(|| {
            SupervisorError::BadRequest(format!("{DEADLINE_MS} must be a positive integer"))
        })?;
    Ok(Some(received + Duration::from_millis(ms)))
}

/// `event: error` carrying a [`ControlError`], preceded by whatever line
/// breaks terminate the event Hermes was in the middle of.
pub fn sse_error_event(tail: &[u8], code: &str, message: &str) -> Bytes {
    let prefix = if tail.is_empty() || tail.ends_with(b"\n\n") {
        ""
    } else if tail.ends_with(b"\n") {
        "\n"
    } else {
        "\n\n"
    };
    let data = serde_json::to_string(&ControlError {
        ok: false,
        error: code.into(),
        message: message.into(),
    })
    .unwrap_or_else(|_| format!(r#"{{"ok":false,"error":"{code}"}}"#));
    Bytes::from(format!("{prefix}event: error\ndata: {data}\n\n"))
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Proxy one request to Hermes.
pub async fn handle(
    app: &Arc<App>,
    request: Request<Incoming>,
    sub_path: &str,
) -> Result<Response<ResponseBody>, SupervisorError> {
    let received = Instant::now();
    let deadline = parse_deadline(request.headers(), received)?;
    let path = upstream_path(sub_path, request.uri().query())?;
    let Some(_pid) = gateway::live_pid(app) else {
        return Err(SupervisorError::Gateway("Hermes is not running".into()));
    };
    let slot = app.gateway_snapshot();
    let port = app.settings.hermes_api_port;

    let (parts, body) = request.into_parts();
    let mut builder = Request::builder().method(parts.method.clone()).uri(path);
    for name in FORWARDED_REQUEST_HEADERS {
        for value in parts.headers.get_all(name) {
            builder = builder.header(name, value);
        }
    }
    let mut bearer = b"Bearer ".to_vec();
    bearer.extend_from_slice(slot.api_key.expose());
    let mut auth = HeaderValue::from_bytes(&bearer)
        .map_err(|_| SupervisorError::internal("gateway key", "not a header value"))?;
    auth.set_sensitive(true);
    builder = builder
        .header(header::HOST, format!("127.0.0.1:{port}"))
        .header(header::AUTHORIZATION, auth);
    let body = if parts.method == Method::GET || parts.method == Method::HEAD {
        Either::Right(Empty::<Bytes>::new())
    } else {
        Either::Left(body)
    };
    let upstream_request = builder
        .body(body)
        .map_err(|e| SupervisorError::BadRequest(e.to_string()))?;

    let in_flight = InFlight::begin(app);
    let send = upstream::send(port, upstream_request);
    let sent = match deadline {
        Some(d) => tokio::time::timeout_at(d, send)
            .await
            .map_err(|_| SupervisorError::TurnTimeout)?,
        None => send.await,
    };
    let (response, connection) = sent.map_err(|e| SupervisorError::Gateway(e.to_string()))?;

    let (parts, upstream_body) = response.into_parts();
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    let (tx, body) = ChannelBody::new(CHANNEL_FRAMES);
    let mut downstream = Response::new(body.boxed());
    *downstream.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            downstream
                .headers_mut()
                .append(HeaderName::clone(name), value.clone());
        }
    }
    let pump = Pump {
        app: Arc::clone(app),
        tx,
        deadline,
        sse,
        tail: Vec::new(),
    };
    tokio::spawn(pump.run(upstream_body, connection, in_flight));
    Ok(downstream)
}

struct Pump {
    app: Arc<App>,
    tx: Sender<FrameResult>,
    deadline: Option<Instant>,
    sse: bool,
    /// Last bytes sent, to terminate a half-sent SSE event cleanly.
    tail: Vec<u8>,
}

impl Pump {
    async fn run(
        mut self,
        mut upstream: Incoming,
        connection: ConnectionGuard,
        in_flight: InFlight,
    ) {
        let outcome = self.forward(&mut upstream).await;
        // Hermes' request is aborted here, before anything else, by closing
        // its connection (no-op when the body already ended).
        drop(upstream);
        drop(connection);
        match outcome {
            Outcome::Done | Outcome::ClientGone => {}
            Outcome::Timeout => {
                self.finish(
                    "turn_timeout",
                    "the turn deadline expired; the upstream request was aborted",
                )
                .await
            }
            Outcome::UpstreamFailed => {
                self.finish("gateway_error", "Hermes failed mid-stream")
                    .await
            }
        }
        drop(in_flight);
    }

    async fn forward(&mut self, upstream: &mut Incoming) -> Outcome {
        let mut pending: Option<UpstreamFrame> = None;
        loop {
            let next = match pending.take() {
                Some(next) => next,
                None => tokio::select! {
                    biased;
                    _ = self.tx.closed() => return Outcome::ClientGone,
                    _ = sleep_until_opt(self.deadline) => return Outcome::Timeout,
                    frame = upstream.frame() => frame,
                },
            };
            let frame: Frame<Bytes> = match next {
                None => return Outcome::Done,
                Some(Ok(frame)) => frame,
                Some(Err(_)) => return Outcome::UpstreamFailed,
            };
            let frame = match frame.into_data() {
                Ok(data) => {
                    let (data, after) = coalesce(data, upstream).await;
                    pending = after;
                    Frame::data(data)
                }
                Err(other) => other,
            };
            if let Some(data) = frame.data_ref() {
                self.remember_tail(data);
                self.app.activity.touch(self.app.started);
            }
            tokio::select! {
                biased;
                sent = self.tx.send(Ok(frame)) => if sent.is_err() { return Outcome::ClientGone },
                _ = sleep_until_opt(self.deadline) => return Outcome::Timeout,
            }
        }
    }

    fn remember_tail(&mut self, data: &Bytes) {
        self.tail
            .extend_from_slice(&data[data.len().saturating_sub(2)..]);
        let keep = self.tail.len().saturating_sub(2);
        self.tail.drain(..keep);
    }

    /// End the client's body: a final SSE error event and a clean end, or
    /// an abort that leaves a non-SSE body visibly truncated.
    async fn finish(&self, code: &str, message: &str) {
        let last = if self.sse {
            Ok(Frame::data(sse_error_event(&self.tail, code, message)))
        } else {
            Err(StreamAborted("upstream aborted"))
        };
        let _ = tokio::time::timeout(FINAL_EVENT_WAIT, self.tx.send(last)).await;
    }
}

type UpstreamFrame = Option<Result<Frame<Bytes>, hyper::Error>>;

/// Largest coalesced data frame.
const COALESCE_MAX: usize = 64 * 1024;

/// Append the data frames Hermes' connection can decode from bytes it has
/// already received, without waiting for the network: one yield to the
/// scheduler per attempt, so a live SSE stream is forwarded immediately
/// while a burst of small chunks becomes one write instead of hundreds.
/// A non-data frame, the end or an error is handed back for the next round.
async fn coalesce(first: Bytes, upstream: &mut Incoming) -> (Bytes, Option<UpstreamFrame>) {
    let mut merged: Option<BytesMut> = None;
    let mut len = first.len();
    while len < COALESCE_MAX {
        let next = tokio::select! {
            biased;
            frame = upstream.frame() => frame,
            _ = tokio::task::yield_now() => break,
        };
        match next {
            Some(Ok(frame)) if frame.is_data() => {
                let Ok(data) = frame.into_data() else { break };
                let buf = merged.get_or_insert_with(|| {
                    let mut b = BytesMut::with_capacity(COALESCE_MAX);
                    b.extend_from_slice(&first);
                    b
                });
                buf.extend_from_slice(&data);
                len += data.len();
            }
            other => {
                return (merged.map_or(first, BytesMut::freeze), Some(other));
            }
        }
    }
    (merged.map_or(first, BytesMut::freeze), None)
}

enum Outcome {
    Done,
    ClientGone,
    Timeout,
    UpstreamFailed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_paths() {
        assert_eq!(upstream_path("", None).unwrap(), "/");
        assert_eq!(
            upstream_path("/v1/models", Some("a=1")).unwrap(),
            "/v1/models?a=1"
        );
        for bad in ["/v1/../x", "/./x", "/a\\b", "v1", "/a/..", "/a\0"] {
            assert!(upstream_path(bad, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn deadlines() {
        let now = Instant::now();
        let mut h = HeaderMap::new();
        assert!(parse_deadline(&h, now).unwrap().is_none());
        h.insert(DEADLINE_MS, HeaderValue::from_static("1500"));
        assert_eq!(
            parse_deadline(&h, now).unwrap(),
            Some(now + Duration::from_millis(1500))
        );
        for bad in ["", "0", "-1", "1e3", "soon"] {
            h.insert(DEADLINE_MS, HeaderValue::from_static(bad));
            assert!(parse_deadline(&h, now).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sse_error_event_terminates_a_half_event() {
        let e = sse_error_event(b"", "turn_timeout", "m");
        assert!(e.starts_with(b"event: error\ndata: {"), "{e:?}");
        assert!(e.ends_with(b"\n\n"));
        let text = String::from_utf8(e.to_vec()).unwrap();
        assert!(text.contains(r#""error":"turn_timeout""#), "{text}");
        assert!(sse_error_event(b"\n\n", "x", "m").starts_with(b"event:"));
        assert!(sse_error_event(b"}\n", "x", "m").starts_with(b"\nevent:"));
        assert!(sse_error_event(b"ab", "x", "m").starts_with(b"\n\nevent:"));
    }
}
