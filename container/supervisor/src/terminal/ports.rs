//! `ANY /_control/terminal/ports/<port>/<path>`: HTTP to a server the
//! terminal user started on an exposed port.
//!
//! Such a server listens inside the terminal's network namespace, which
//! nothing outside can reach — so the supervisor makes the connection from
//! inside: a short-lived thread `setns`es into the namespace, connects to
//! `127.0.0.1:<port>` and exits (a socket stays in the namespace it was
//! created in; a pooled runtime thread is never moved). Only ports recorded
//! by `expose-port` in this boot are forwarded. The caller's
//! `authorization` (the control token) and hop-by-hop headers are dropped.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::{header, Request, Response};
use hyper_util::rt::TokioIo;

use crate::app::App;
use crate::body::{ResponseBody, StreamAborted};
use crate::error::SupervisorError;

/// Path prefix of the route.
pub const PREFIX: &str = hermes_protocol::path::TERMINAL_PORTS_PREFIX;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "authorization",
];

/// `(port, upstream path)` from the request path (without query), or
/// `None` when the port segment is not a number.
pub fn parse(path: &str) -> Option<(u16, String)> {
    let rest = path.strip_prefix(PREFIX)?;
    let (port, sub) = match rest.split_once('/') {
        Some((p, s)) => (p, format!("/{s}")),
        None => (rest, "/".to_owned()),
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((port.parse().ok()?, sub))
}

fn setns_net(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns on this dedicated, short-lived thread only; `fd` is the
    // boundary's open namespace descriptor.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Connect to `127.0.0.1:port` inside the namespace behind `netns_fd`.
pub fn connect_in_netns(netns_fd: RawFd, port: u16) -> io::Result<TcpStream> {
    std::thread::Builder::new()
        .name("terminal-port-connect".into())
        .spawn(move || {
            setns_net(netns_fd)?;
            TcpStream::connect_timeout(
                &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                CONNECT_TIMEOUT,
            )
        })?
        .join()
        .map_err(|_| io::Error::other("connect thread panicked"))?
}

pub async fn forward(
    app: &App,
    req: Request<Incoming>,
    port: u16,
    path: String,
) -> Result<Response<ResponseBody>, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = super::ready(app, &boundary)?;
    if !super::is_exposed(app, port) {
        return Err(SupervisorError::BadRequest(format!(
            "port {port} is not exposed"
        )));
    }
    let fd = ready.netns_fd().as_raw_fd();
    let std_stream = tokio::task::spawn_blocking(move || connect_in_netns(fd, port))
        .await
        .map_err(|_| SupervisorError::Terminal("connect task failed".into()))?
        .map_err(|e| {
            SupervisorError::Terminal(format!(
                "nothing answers on port {port} in the terminal: {}",
                e.kind()
            ))
        })?;
    std_stream
        .set_nonblocking(true)
        .map_err(|e| SupervisorError::internal("socket", e))?;
    let stream = tokio::net::TcpStream::from_std(std_stream)
        .map_err(|e| SupervisorError::internal("socket", e))?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| SupervisorError::Terminal(format!("port {port}: {e}")))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let (parts, body) = req.into_parts();
    let mut upstream = Request::builder()
        .method(parts.method)
        .uri(format!("{path}{query}"));
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != header::HOST {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = upstream
        .header(header::HOST, format!("127.0.0.1:{port}"))
        .body(body)
        .map_err(|_| SupervisorError::BadRequest("request cannot be forwarded".into()))?;
    let response = sender
        .send_request(upstream)
        .await
        .map_err(|e| SupervisorError::Terminal(format!("port {port}: {e}")))?;
    let (parts, body) = response.into_parts();
    let mut out = Response::builder().status(parts.status);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            out = out.header(name, value);
        }
    }
    out.body(body.map_err(|_| StreamAborted("exposed port")).boxed())
        .map_err(|e| SupervisorError::internal("response", e))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn paths() {
        assert_eq!(
            parse("/_control/terminal/ports/3000"),
            Some((3000, "/".into()))
        );
        assert_eq!(
            parse("/_control/terminal/ports/3000/"),
            Some((3000, "/".into()))
        );
        assert_eq!(
            parse("/_control/terminal/ports/3000/a/b"),
            Some((3000, "/a/b".into()))
        );
        assert_eq!(parse("/_control/terminal/ports/"), None);
        assert_eq!(parse("/_control/terminal/ports/x/a"), None);
        assert_eq!(parse("/_control/terminal/ports/-1/a"), None);
        assert_eq!(parse("/_control/terminal/ports/70000/a"), None);
        assert_eq!(parse("/_control/terminal/portsx/1"), None);
    }
}
