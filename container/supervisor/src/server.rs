//! The control API: accept loop, authentication, routing.
//!
//! Every request is authenticated before it is routed, so an unauthenticated
//! caller learns nothing about which paths exist (always 401). Routing is by
//! exact path, then method: unknown path → 404, known path with the wrong
//! method → 405. Handlers return `Result`; the one mapping to a status code
//! is [`SupervisorError::into_response`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hermes_protocol::limits::{CONTROL_BODY_MAX, TERMINAL_BODY_MAX};
use hermes_protocol::terminal::{
    ExecRequest, ExposePortRequest, FileListRequest, FileReadRequest, FileWriteRequest,
    GitCloneRequest,
};
use hermes_protocol::{path, Activity, Health, ProbeWrite, Provision};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;

use crate::app::App;
use crate::body::ResponseBody;
use crate::error::{json_response, SupervisorError};
use crate::{auth, bootcheck, gateway, probe, provision, proxy, terminal};

/// Bind the control port and serve forever.
pub async fn serve(app: Arc<App>) -> std::io::Result<()> {
    let listener = TcpListener::bind(app.settings.control_addr).await?;
    let local: SocketAddr = listener.local_addr()?;
    // The first stdout line is part of the contract: devhost and the tests
    // read the bound port from it when they asked for port 0.
    println!("hermes-supervisor: control API listening on {local}");
    // Establish and self-test the terminal boundary in the background now
    // that the port the probe must fail to reach exists.
    let _ = app.terminal.control_port.set(local.port());
    let early = Arc::clone(&app);
    tokio::spawn(async move {
        let _ = crate::terminal::mcp_socket(&early).await;
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                eprintln!("hermes-supervisor: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let app = Arc::clone(&app);
                async move {
                    Ok::<_, Infallible>(
                        route(&app, req)
                            .await
                            .unwrap_or_else(SupervisorError::into_response),
                    )
                }
            });
            // A timer makes hyper enforce its header read timeout, so a
            // client that never finishes its request head cannot hold a
            // connection forever.
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(30))
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Bytes of an oversized body read (and thrown away) before answering 413,
/// so the client finishes sending and can read the answer instead of
/// seeing its upload reset mid-way.
const DRAIN_MAX: usize = 8 * CONTROL_BODY_MAX;
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

async fn read_json<T: DeserializeOwned>(body: Incoming) -> Result<T, SupervisorError> {
    read_json_limited(body, CONTROL_BODY_MAX).await
}

async fn read_json_limited<T: DeserializeOwned>(
    mut body: Incoming,
    limit: usize,
) -> Result<T, SupervisorError> {
    let unreadable = || SupervisorError::BadRequest("request body could not be read".into());
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| unreadable())?;
        if let Some(data) = frame.data_ref() {
            bytes.extend_from_slice(data);
            if bytes.len() > limit {
                let drain = async {
                    let mut seen = bytes.len();
                    while let Some(Ok(frame)) = body.frame().await {
                        seen += frame.data_ref().map_or(0, |d| d.len());
                        if seen > DRAIN_MAX.max(limit) {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain).await;
                return Err(SupervisorError::PayloadTooLarge(limit));
            }
        }
    }
    // serde's message names the field and position, never echoes values.
    serde_json::from_slice(&bytes)
        .map_err(|e| SupervisorError::BadRequest(format!("malformed JSON body: {e}")))
}

fn ok_json<T: serde::Serialize>(value: &T) -> Result<Response<ResponseBody>, SupervisorError> {
    Ok(json_response(StatusCode::OK, value))
}

/// Authenticate, then dispatch.
pub async fn route(
    app: &Arc<App>,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, SupervisorError> {
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if !auth::bearer_matches(authorization, app.settings.control_token.expose()) {
        return Err(SupervisorError::Unauthorized);
    }
    let method = req.method().clone();
    let path_str = req.uri().path().to_owned();
    if let Some(sub) = path_str.strip_prefix(path::HERMES_API_PREFIX) {
        if sub.is_empty() || sub.starts_with('/') {
            return proxy::handle(app, req, sub).await;
        }
        return Err(SupervisorError::NotFound);
    }
    if path_str.starts_with(terminal::ports::PREFIX) {
        let (port, sub) = terminal::ports::parse(&path_str).ok_or(SupervisorError::NotFound)?;
        return terminal::ports::forward(app, req, port, sub).await;
    }
    match (path_str.as_str(), method) {
        (path::HEALTH, Method::GET) => ok_json(&Health {
            ok: true,
            boot_id: app.settings.boot_id.clone(),
            uptime_ms: app.uptime_ms(),
        }),
        (path::PROVISION, Method::POST) => {
            let body: Provision = read_json(req.into_body()).await?;
            let mcp = terminal::mcp_socket(app).await;
            ok_json(&provision::apply(app, &body, mcp.as_deref())?)
        }
        (path::HERMES_START, Method::POST) => ok_json(&gateway::start(app).await?),
        (path::HERMES_STOP, Method::POST) => ok_json(&gateway::stop(app).await),
        (path::HERMES_READY, Method::GET) => {
            let state = gateway::ready_state(app).await;
            if state.ready {
                bootcheck::warm_version_cache(app);
            }
            ok_json(&state)
        }
        (path::BOOT_CHECK, Method::GET) => ok_json(&bootcheck::report(app).await),
        (path::PROBE, Method::POST) => {
            let body: ProbeWrite = read_json(req.into_body()).await?;
            ok_json(&probe::write(app, &body)?)
        }
        (path::PROBE, Method::GET) => ok_json(&probe::read(app)?),
        (path::TERMINAL_EXEC, Method::POST) => {
            let body: ExecRequest = read_json(req.into_body()).await?;
            ok_json(&terminal::ops::exec(app, &body).await?)
        }
        (path::TERMINAL_GIT_CLONE, Method::POST) => {
            let body: GitCloneRequest = read_json(req.into_body()).await?;
            ok_json(&terminal::git::clone(app, &body).await?)
        }
        (path::TERMINAL_FILE_READ, Method::POST) => {
            let body: FileReadRequest = read_json(req.into_body()).await?;
            ok_json(&terminal::ops::file_read(app, &body).await?)
        }
        (path::TERMINAL_FILE_WRITE, Method::POST) => {
            let body: FileWriteRequest =
                read_json_limited(req.into_body(), TERMINAL_BODY_MAX).await?;
            ok_json(&terminal::ops::file_write(app, &body).await?)
        }
        (path::TERMINAL_FILE_LIST, Method::POST) => {
            let body: FileListRequest = read_json(req.into_body()).await?;
            ok_json(&terminal::ops::file_list(app, &body).await?)
        }
        (path::TERMINAL_EXPOSE_PORT, Method::POST) => {
            let body: ExposePortRequest = read_json(req.into_body()).await?;
            ok_json(&terminal::expose_port(app, &body).await?)
        }
        (path::TERMINAL_STATUS, Method::GET) => ok_json(&terminal::status(app).await),
        (path::TERMINAL_WORKSPACE, Method::POST) => {
            if !app.settings.workspace_cli_enabled {
                return Err(SupervisorError::WorkspaceCliDisabled);
            }
            // The token is read from its header only (never the body), and
            // validated before the body is even read.
            let token = terminal::workspace::validate_token(
                req.headers()
                    .get(hermes_protocol::workspace::TOKEN_HEADER)
                    .map(|v| v.as_bytes()),
            )
            .map_err(|e| SupervisorError::BadRequest(e.to_string()))?;
            let body: hermes_protocol::workspace::WorkspaceRequest =
                read_json(req.into_body()).await?;
            ok_json(&terminal::workspace::invoke(app, &token, &body).await?)
        }
        (path::ACTIVITY, Method::GET) => ok_json(&Activity {
            ok: true,
            in_flight: app.activity.in_flight(),
            last_activity_ms_ago: app.activity.ms_ago(app.started),
        }),
        (
            path::HEALTH
            | path::PROVISION
            | path::HERMES_START
            | path::HERMES_STOP
            | path::HERMES_READY
            | path::BOOT_CHECK
            | path::PROBE
            | path::ACTIVITY
            | path::TERMINAL_EXEC
            | path::TERMINAL_GIT_CLONE
            | path::TERMINAL_FILE_READ
            | path::TERMINAL_FILE_WRITE
            | path::TERMINAL_FILE_LIST
            | path::TERMINAL_EXPOSE_PORT
            | path::TERMINAL_STATUS
            | path::TERMINAL_WORKSPACE,
            _,
        ) => Err(SupervisorError::MethodNotAllowed),
        _ => Err(SupervisorError::NotFound),
    }
}
