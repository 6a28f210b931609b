//! HTTP/1.1 connections to Hermes' API on loopback.
//!
//! One fresh connection per request, driven by a task that is aborted when
//! its guard drops: aborting a proxied turn (deadline, client gone) closes
//! the TCP connection, which is how Hermes learns to stop. No pooling — the
//! API is on loopback, and a pooled connection could outlive an abort.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Aborts the connection task when dropped.
pub struct ConnectionGuard(JoinHandle<()>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("connect to 127.0.0.1:{0} failed: {1}")]
    Connect(u16, std::io::ErrorKind),
    #[error("HTTP handshake failed: {0}")]
    Handshake(hyper::Error),
    #[error("request failed: {0}")]
    Request(hyper::Error),
    #[error("timed out")]
    Timeout,
    #[error("response body unreadable")]
    Body,
}

/// Send `request` over a new connection to `127.0.0.1:port`.
pub async fn send<B>(
    port: u16,
    request: Request<B>,
) -> Result<(Response<Incoming>, ConnectionGuard), UpstreamError>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| UpstreamError::Connect(port, e.kind()))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(UpstreamError::Handshake)?;
    let guard = ConnectionGuard(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(UpstreamError::Request)?;
    Ok((response, guard))
}

/// A small GET (readiness): status and at most 64 KiB of body.
pub async fn get(
    port: u16,
    path: &str,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), UpstreamError> {
    let exchange = async {
        let request = Request::get(path)
            .header(hyper::header::HOST, format!("127.0.0.1:{port}"))
            .body(Empty::<Bytes>::new())
            .map_err(|_| UpstreamError::Body)?;
        let (response, _guard) = send(port, request).await?;
        let status = response.status();
        let body = Limited::new(response.into_body(), 64 * 1024)
            .collect()
            .await
            .map_err(|_| UpstreamError::Body)?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or(Err(UpstreamError::Timeout))
}
