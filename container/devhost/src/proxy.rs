//! `get_tcp_port(p).fetch(req)`: forwards one request to a container's
//! mapped loopback port and streams both bodies, frame by frame.
//!
//! One fresh upstream connection per request (no pool): a request that the
//! caller abandons drops its upstream connection, which is how an aborted
//! chat turn reaches the supervisor.

use crate::error::ApiError;
use crate::http::{Body, BoxError};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Request, Response, Uri};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Hop-by-hop headers (RFC 9110 §7.6.1) are for one connection only.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Forwards `req` to `127.0.0.1:host_port` at `path_and_query`.
/// `container_port` only appears in error messages.
pub async fn forward(
    req: Request<Incoming>,
    container_port: u16,
    host_port: u16,
    path_and_query: &str,
) -> Result<Response<Body>, ApiError> {
    let stream = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect(("127.0.0.1", host_port)),
    )
    .await
    {
        Ok(Ok(stream)) => stream,
        // Refused or timed out: nothing listens (yet) — the runtime's words.
        Ok(Err(_)) | Err(_) => return Err(ApiError::NotListening(container_port)),
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ApiError::Upstream(e.to_string()))?;
    tokio::spawn(async move {
        // Ends when the exchange is over or either side goes away.
        let _ = conn.await;
    });

    let (parts, body) = req.into_parts();
    let uri: Uri = path_and_query
        .parse()
        .map_err(|_| ApiError::BadRequest("invalid forwarded path".into()))?;
    let mut upstream = Request::builder().method(parts.method).uri(uri);
    for (name, value) in parts.headers.iter() {
        if !is_hop_by_hop(name) && name != header::HOST {
            upstream = upstream.header(name, value);
        }
    }
    let host = HeaderValue::from_str(&format!("127.0.0.1:{host_port}"))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    upstream = upstream.header(header::HOST, host);
    let upstream = upstream
        .body(body)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;

    let resp = sender
        .send_request(upstream)
        .await
        .map_err(|e| ApiError::Upstream(e.to_string()))?;
    let (mut parts, body) = resp.into_parts();
    let hop: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|n| is_hop_by_hop(n))
        .cloned()
        .collect();
    for name in hop {
        parts.headers.remove(name);
    }
    let body = body.map_err(|e| Box::new(e) as BoxError).boxed();
    Ok(Response::from_parts(parts, body))
}
