//! One proxy request, from request line to tunnel or forwarded response.
//!
//! The phases run in a fixed order and each refusal is audited once:
//! parse the target → [`decide`] against the allowlist → take a tunnel
//! permit → resolve with the guard's own resolver → [`decide_resolved`] on
//! every address → audit the allow → dial one of the checked addresses.
//! Policy refusals answer `403 Egress denied: <reason>`; the tunnel limit
//! answers 503 (the client may retry); an upstream that cannot be reached
//! after an allow answers 502. CONNECT then becomes a byte tunnel; an
//! absolute-form request is rewritten to origin form with a `Host` header
//! derived from the checked target and sent over the checked connection.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::idle::{idle_expired, ActivityClock, Tracked};
use super::Shared;
use crate::audit::AuditRecord;
use crate::decide::{decide, decide_resolved, Decision};
use crate::target::{parse_absolute, parse_connect, Proto, Rejected, Target};

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Tunnel copy buffer per direction. On loopback 256 KiB measured a
/// guard/direct ratio of 0.47–0.62 against 0.27–0.44 for 64 KiB (fewer
/// syscalls and wakeups); at the default 64 tunnels that bounds tunnel
/// buffers at 32 MiB. `splice(2)` was tried and measured no better than this
/// copy on loopback, so its unsafe code was removed.
const TUNNEL_BUFFER: usize = 256 * 1024;

/// Headers that describe one hop and are never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// One client connection, shared with the tunnel it may turn into.
pub(crate) struct ClientConnection {
    /// Touched by every byte on the client socket (and its upstreams).
    pub(crate) clock: Arc<ActivityClock>,
    /// The `max_clients` slot: held until the connection *and* any tunnel
    /// it became are gone.
    pub(crate) _slot: OwnedSemaphorePermit,
}

pub(crate) async fn handle(
    shared: Arc<Shared>,
    client: Arc<ClientConnection>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    if request.method() == Method::CONNECT {
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let parsed = parse_connect(&authority);
        match admit(&shared, parsed, Proto::Connect).await {
            Ok(admitted) => start_tunnel(shared, client, request, admitted),
            Err(response) => response,
        }
    } else {
        let parsed = parse_absolute(&request.uri().to_string());
        match admit(&shared, parsed, Proto::Http).await {
            Ok(admitted) => forward(shared, client.clock.clone(), request, admitted).await,
            Err(response) => response,
        }
    }
}

/// A target that passed every check, with its connection and permit.
struct Admitted {
    target: Target,
    upstream: TcpStream,
    permit: OwnedSemaphorePermit,
}

async fn admit(
    shared: &Shared,
    parsed: Result<Target, Rejected>,
    proto: Proto,
) -> Result<Admitted, Response<ProxyBody>> {
    let target = match parsed {
        Ok(target) => target,
        Err(rejected) => {
            let decision = Decision::Deny {
                reason: rejected.why.reason(),
            };
            audit(
                shared,
                &decision,
                &rejected.raw_host,
                rejected.port.unwrap_or(0),
                proto,
                &[],
            );
            return Err(denied(StatusCode::FORBIDDEN, decision.reason()));
        }
    };
    let host = target.host().to_owned();
    let port = target.port().number();
    // A name that is not on the list is never even looked up.
    let allowlist = shared.allowlist.borrow().clone();
    if let decision @ Decision::Deny { .. } = decide(&allowlist, &target) {
        audit(shared, &decision, &host, port, proto, &[]);
        return Err(denied(StatusCode::FORBIDDEN, decision.reason()));
    }
    let Ok(permit) = shared.tunnels.clone().try_acquire_owned() else {
        let reason = format!(
            "too many concurrent connections (limit {})",
            shared.config.max_tunnels
        );
        let decision = Decision::Deny { reason };
        audit(shared, &decision, &host, port, proto, &[]);
        return Err(denied(StatusCode::SERVICE_UNAVAILABLE, decision.reason()));
    };
    let addrs = match tokio::time::timeout(
        shared.config.connect_timeout,
        shared.resolver.resolve(&host),
    )
    .await
    {
        Ok(Ok(addrs)) => addrs,
        Ok(Err(_)) | Err(_) => {
            let decision = Decision::Deny {
                reason: "host could not be resolved".to_owned(),
            };
            audit(shared, &decision, &host, port, proto, &[]);
            return Err(denied(StatusCode::FORBIDDEN, decision.reason()));
        }
    };
    match decide_resolved(&addrs) {
        Decision::Allow { .. } => {}
        decision @ Decision::Deny { .. } => {
            audit(shared, &decision, &host, port, proto, &addrs);
            return Err(denied(StatusCode::FORBIDDEN, decision.reason()));
        }
    }
    // Decide again with the list in force now: a reload while the name was
    // resolving must not let through a host it removed. (Open tunnels and
    // forwards re-check on every later reload, see `revoked`.)
    let allowlist = shared.allowlist.borrow().clone();
    let decision = decide(&allowlist, &target);
    audit(shared, &decision, &host, port, proto, &addrs);
    if let Decision::Deny { reason } = &decision {
        return Err(denied(StatusCode::FORBIDDEN, reason));
    }
    match dial(shared, &addrs, port).await {
        Some(upstream) => Ok(Admitted {
            target,
            upstream,
            permit,
        }),
        None => Err(plain(
            StatusCode::BAD_GATEWAY,
            "Egress upstream unreachable",
        )),
    }
}

/// Dials the checked addresses in order; never resolves again.
async fn dial(shared: &Shared, addrs: &[IpAddr], port: u16) -> Option<TcpStream> {
    for addr in addrs {
        let connect = TcpStream::connect(SocketAddr::new(*addr, port));
        if let Ok(Ok(stream)) = tokio::time::timeout(shared.config.connect_timeout, connect).await {
            let _ = stream.set_nodelay(true);
            return Some(stream);
        }
    }
    None
}

fn start_tunnel(
    shared: Arc<Shared>,
    client_connection: Arc<ClientConnection>,
    request: Request<Incoming>,
    admitted: Admitted,
) -> Response<ProxyBody> {
    tokio::spawn(async move {
        let clock = client_connection.clock.clone();
        let Admitted {
            target,
            upstream,
            permit,
        } = admitted;
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        let mut client = TokioIo::new(upgraded);
        let mut upstream = Tracked::new(upstream, clock.clone());
        let mut allowlist = shared.allowlist.clone();
        tokio::select! {
            _ = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, TUNNEL_BUFFER, TUNNEL_BUFFER) => {}
            () = idle_expired(&clock, shared.config.idle_timeout) => {}
            () = revoked(&shared, &mut allowlist, &target) => {}
        }
        drop(permit);
        drop(client_connection);
    });
    Response::new(empty())
}

/// Completes when a reloaded allowlist no longer allows `target` (audited).
async fn revoked(
    shared: &Shared,
    allowlist: &mut tokio::sync::watch::Receiver<Arc<crate::Allowlist>>,
    target: &Target,
) {
    loop {
        if allowlist.changed().await.is_err() {
            // The guard is gone; nothing can change any more.
            std::future::pending::<()>().await;
        }
        let current = allowlist.borrow_and_update().clone();
        match decide(&current, target) {
            Decision::Allow { .. } => {}
            Decision::Deny { reason } => {
                let decision = Decision::Deny {
                    reason: format!("allowlist reloaded: {reason}"),
                };
                audit(
                    shared,
                    &decision,
                    target.host(),
                    target.port().number(),
                    target.proto(),
                    &[],
                );
                return;
            }
        }
    }
}

async fn forward(
    shared: Arc<Shared>,
    clock: Arc<ActivityClock>,
    request: Request<Incoming>,
    admitted: Admitted,
) -> Response<ProxyBody> {
    let Admitted {
        target,
        upstream,
        permit,
    } = admitted;
    let (mut parts, body) = request.into_parts();
    let origin_form = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let Ok(uri) = origin_form.parse::<hyper::Uri>() else {
        return plain(StatusCode::BAD_REQUEST, "Bad request target");
    };
    parts.uri = uri;
    parts.version = hyper::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    // The checked name, not whatever Host the client sent: a plain-HTTP
    // request cannot be fronted to another virtual host on the same address.
    let Ok(host_value) = HeaderValue::from_str(&target.host_header()) else {
        return plain(StatusCode::BAD_REQUEST, "Bad host");
    };
    parts.headers.insert(HOST, host_value);
    let io = TokioIo::new(Tracked::new(upstream, clock.clone()));
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake::<_, Incoming>(io).await
    else {
        return plain(StatusCode::BAD_GATEWAY, "Egress upstream unreachable");
    };
    tokio::spawn(async move {
        let mut allowlist = shared.allowlist.clone();
        tokio::select! {
            _ = connection => {}
            () = idle_expired(&clock, shared.config.idle_timeout) => {}
            () = revoked(&shared, &mut allowlist, &target) => {}
        }
        drop(permit);
    });
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(_) => plain(StatusCode::BAD_GATEWAY, "Egress upstream error"),
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

fn audit(
    shared: &Shared,
    decision: &Decision,
    host: &str,
    port: u16,
    proto: Proto,
    addrs: &[IpAddr],
) {
    shared.audit.record(&AuditRecord::new(
        SystemTime::now(),
        decision,
        host,
        port,
        proto,
        addrs,
    ));
}

fn denied(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    plain(status, &format!("Egress denied: {reason}"))
}

fn plain(status: StatusCode, body: &str) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_owned()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}
