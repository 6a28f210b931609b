//! The Worker's fetch handler: stateless gate and router in front of one
//! `HermesAgent` Durable Object per agent.
//!
//! It authenticates public-api (SPEC §2), validates the agent id, and hands
//! the request to the object named `agent:<id>`. It keeps nothing between
//! requests. Client errors are explicit JSON answers; anything unexpected
//! becomes a 500 `internal` without details (those go to the log).

use worker::{
    console_error, event, Context, Env, Headers, Method, Request, RequestInit, Response, Result,
};

use crate::agent_id::{AgentId, AGENT_ID_HEADER};
use crate::errors::{ApiError, ErrorCode};
use crate::gate::{self, ServiceSecrets};
use crate::http::{error_response, string_binding};
use crate::proxy_path;
use crate::router::{self, Route, RouteMatch};

/// Name of the Durable Object binding in wrangler.toml.
pub const AGENT_BINDING: &str = "HERMES_AGENT";
/// Origin used for requests from the Worker to the object (never leaves
/// the runtime; the object routes by path only).
pub const OBJECT_ORIGIN: &str = "https://hermes-agent.internal";
/// Largest body the Worker buffers before handing it to the object
/// (terminal file writes: 5 MB decoded, as base64 in JSON).
const MAX_BUFFERED_BODY: usize = hermes_protocol::limits::TERMINAL_BODY_MAX;

#[event(start)]
fn start() {
    // worker 0.8 installs a hook that lets the runtime re-create the wasm
    // instance after a panic; keep it and add readable console output.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        console_error_panic_hook::hook(info);
        previous(info);
    }));
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    match handle(req, &env).await {
        Ok(response) => Ok(response),
        Err(err) => {
            console_error!("edge: internal error: {err}");
            error_response(&ApiError::internal("internal error"))
        }
    }
}

async fn handle(req: Request, env: &Env) -> Result<Response> {
    let raw_url = req.inner().url();
    let (path, query) = proxy_path::raw_path_and_query(&raw_url);
    let (path, query) = (path.to_owned(), query.map(str::to_owned));
    if !router::is_hosted(&path) {
        return error_response(&ApiError::not_found());
    }

    let primary = string_binding(env, "SERVICE_AUTH_SECRET");
    let next = string_binding(env, "SERVICE_AUTH_SECRET_NEXT");
    let secrets = ServiceSecrets {
        primary: primary.as_deref(),
        next: next.as_deref(),
    };
    let authorization = req.headers().get("authorization")?;
    let agent_header = req.headers().get(AGENT_ID_HEADER)?;
    let agent = match gate::admit(secrets, authorization.as_deref(), agent_header.as_deref()) {
        Ok(agent) => agent,
        Err(refusal) => return error_response(&refusal),
    };

    match router::route(req.method().as_ref(), &path) {
        RouteMatch::NotFound => error_response(&ApiError::not_found().for_agent(agent.as_str())),
        RouteMatch::MethodNotAllowed(allowed) => {
            error_response(&ApiError::method_not_allowed(allowed).for_agent(agent.as_str()))
        }
        RouteMatch::Found(Route::Proxy) => {
            let sub = proxy_path::proxy_subpath(&path).unwrap_or("");
            match proxy_path::canonical_subpath(sub) {
                Ok(canonical) => {
                    let target = format!("{}{canonical}", proxy_path::PROXY_PREFIX);
                    forward_to_object(req, env, &agent, &target, query.as_deref(), true).await
                }
                Err(refusal) => error_response(&refusal.for_agent(agent.as_str())),
            }
        }
        RouteMatch::Found(Route::Port) => {
            let (port, rest) = proxy_path::port_route(&path).unwrap_or(("", ""));
            let checked = proxy_path::parse_exposable_port(port)
                .and_then(|port| proxy_path::canonical_subpath(rest).map(|c| (port, c)));
            match checked {
                Ok((port, canonical)) => {
                    let target = format!("{}{port}{canonical}", proxy_path::PORTS_PREFIX);
                    forward_to_object(req, env, &agent, &target, query.as_deref(), true).await
                }
                Err(refusal) => error_response(&refusal.for_agent(agent.as_str())),
            }
        }
        RouteMatch::Found(_) => {
            forward_to_object(req, env, &agent, &path, query.as_deref(), false).await
        }
    }
}

/// Hand the request to the agent's object. The service credential is not
/// forwarded: the object trusts the Worker, not the caller's header.
async fn forward_to_object(
    mut req: Request,
    env: &Env,
    agent: &AgentId,
    path: &str,
    query: Option<&str>,
    stream_body: bool,
) -> Result<Response> {
    let headers = Headers::new();
    for (name, value) in req.headers().entries() {
        if name == "authorization" || name == AGENT_ID_HEADER {
            continue;
        }
        headers.append(&name, &value)?;
    }
    headers.set(AGENT_ID_HEADER, agent.as_str())?;

    let method = req.method();
    let mut init = RequestInit::new();
    init.with_method(method.clone()).with_headers(headers);
    if !matches!(method, Method::Get | Method::Head) {
        if stream_body {
            init.with_body(req.inner().body().map(Into::into));
        } else {
            // Bounded JSON bodies are read here, so an early refusal in the
            // object never leaves the caller's stream half-pumped.
            let bytes = req.bytes().await?;
            if bytes.len() > MAX_BUFFERED_BODY {
                return error_response(
                    &ApiError::new(ErrorCode::PayloadTooLarge, "request body too large")
                        .for_agent(agent.as_str()),
                );
            }
            init.with_body(Some(
                worker::js_sys::Uint8Array::from(bytes.as_slice()).into(),
            ));
        }
    }
    let target = match query {
        Some(q) => format!("{OBJECT_ORIGIN}{path}?{q}"),
        None => format!("{OBJECT_ORIGIN}{path}"),
    };
    let forwarded = Request::new_with_init(&target, &init)?;

    let stub = env
        .durable_object(AGENT_BINDING)?
        .id_from_name(&agent.object_name())?
        .get_stub()?;
    stub.fetch_with_request(forwarded).await
}
