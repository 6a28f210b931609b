//! HTTP plumbing shared by the runtime API and the mock model: one body type,
//! JSON helpers, a channel-backed streaming body, and the accept loop.
//!
//! Every response body is a [`Body`] so a handler can return a small JSON
//! document, a proxied upstream stream or a generated SSE stream through the
//! same type, without buffering any of them.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// Error type of every body we produce.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The one response body type.
pub type Body = BoxBody<Bytes, BoxError>;

/// A complete body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A JSON response with the given status.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let text = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = Response::new(full(text));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The error body every failed call returns: `{ok:false,error,message}`.
pub fn json_error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    json(
        status,
        &serde_json::json!({ "ok": false, "error": code, "message": message }),
    )
}

/// Reads a request body up to `limit` bytes; `None` when it is larger or the
/// connection failed while reading.
pub async fn read_body_limited(body: Incoming, limit: usize) -> Option<Bytes> {
    let limited = http_body_util::Limited::new(body, limit);
    limited.collect().await.ok().map(|c| c.to_bytes())
}

/// A streaming body fed from a channel: each message becomes one data frame
/// that hyper writes (and flushes) as soon as it is received, which is what
/// SSE needs. The stream ends when every sender is dropped.
pub struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    /// A body and the sender that feeds it.
    pub fn pair(capacity: usize) -> (mpsc::Sender<Bytes>, Body) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, ChannelBody { rx }.boxed())
    }
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// The handler signature of a server: request in, response out, never fails
/// (every error is already a JSON response).
pub trait Handler: Send + Sync + 'static {
    fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>>;
}

/// Accepts HTTP/1.1 connections on `listener` until `shutdown` turns true.
/// Connections already accepted keep running on their own tasks.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let (stream, _peer) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                // EMFILE and friends: back off briefly instead of spinning.
                crate::log!("devhost: accept failed: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(req).await) }
            });
            // Errors here are client disconnects; nothing to report upwards.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
