//! The runtime's HTTP API, as the Durable Object calls it under
//! `wrangler dev`. Routing is a pure function from method and raw path to a
//! [`Route`]; each route has a small `handle_*`.
//!
//! ```text
//! GET    /healthz                              devhost itself
//! GET    /containers                           every known container
//! POST   /containers/{id}/start   {"env":{..}} start(env)        409 if running
//! GET    /containers/{id}                      running(), exit code
//! POST   /containers/{id}/signal  {"signal":n} signal(n)         409 if not running
//! POST   /containers/{id}/destroy              destroy()         idempotent
//! DELETE /containers/{id}                      destroy()
//! GET    /containers/{id}/logs                 last output lines
//! ANY    /containers/{id}/ports/{port}/{rest}  get_tcp_port(port).fetch(req)
//! ```

use crate::error::ApiError;
use crate::http::{json, read_body_limited, Body, Handler};
use crate::id::ContainerId;
use crate::proxy;
use crate::runtime::Runtime;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Largest start/signal body accepted.
const BODY_MAX: usize = 1024 * 1024;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    List,
    Start(ContainerId),
    Status(ContainerId),
    Signal(ContainerId),
    Destroy(ContainerId),
    Logs(ContainerId),
    /// Container port and the raw path (with leading `/`) to forward.
    Port(ContainerId, u16, String),
}

/// Parses method + raw path (not percent-decoded: an id with `%` is refused).
pub fn route(method: &Method, path: &str) -> Result<Route, ApiError> {
    let not_found = || ApiError::NotFound(path.chars().take(200).collect());
    if path == "/healthz" {
        return only(method, Method::GET, Route::Health);
    }
    if path == "/containers" || path == "/containers/" {
        return only(method, Method::GET, Route::List);
    }
    let rest = path.strip_prefix("/containers/").ok_or_else(not_found)?;
    let (raw_id, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let id = ContainerId::parse(raw_id)?;
    if let Some(port_path) = tail.strip_prefix("/ports/") {
        let (raw_port, forwarded) = match port_path.find('/') {
            Some(i) => (&port_path[..i], &port_path[i..]),
            None => (port_path, "/"),
        };
        let port = raw_port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0 && raw_port.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "invalid port {:?}",
                    raw_port.chars().take(8).collect::<String>()
                ))
            })?;
        return Ok(Route::Port(id, port, forwarded.to_owned()));
    }
    match tail {
        "" | "/" => match *method {
            Method::GET => Ok(Route::Status(id)),
            Method::DELETE => Ok(Route::Destroy(id)),
            _ => Err(ApiError::MethodNotAllowed),
        },
        "/start" => only(method, Method::POST, Route::Start(id)),
        "/signal" => only(method, Method::POST, Route::Signal(id)),
        "/destroy" => only(method, Method::POST, Route::Destroy(id)),
        "/logs" => only(method, Method::GET, Route::Logs(id)),
        _ => Err(not_found()),
    }
}

fn only(method: &Method, want: Method, route: Route) -> Result<Route, ApiError> {
    if *method == want {
        Ok(route)
    } else {
        Err(ApiError::MethodNotAllowed)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct SignalBody {
    signal: i32,
}

/// The API server's handler.
pub struct Api {
    pub runtime: Arc<Runtime>,
    pub mock_model_url: String,
}

impl Handler for Api {
    fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
        Box::pin(async move {
            match self.dispatch(req).await {
                Ok(resp) => resp,
                Err(err) => err.into_response(),
            }
        })
    }
}

impl Api {
    async fn dispatch(&self, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
        let route = route(req.method(), req.uri().path())?;
        match route {
            Route::Health => Ok(self.handle_health().await),
            Route::List => Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "ok": true, "containers": self.runtime.list().await }),
            )),
            Route::Start(id) => self.handle_start(&id, req).await,
            Route::Status(id) => Ok(to_json(&self.runtime.status(&id).await?)),
            Route::Signal(id) => self.handle_signal(&id, req).await,
            Route::Destroy(id) => {
                let existed = self.runtime.destroy(&id).await?;
                Ok(json(
                    StatusCode::OK,
                    &serde_json::json!({ "ok": true, "destroyed": existed }),
                ))
            }
            Route::Logs(id) => Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "ok": true, "lines": self.runtime.logs(&id).await? }),
            )),
            Route::Port(id, port, path) => self.handle_port(&id, port, &path, req).await,
        }
    }

    async fn handle_health(&self) -> Response<Body> {
        let s = self.runtime.settings();
        json(
            StatusCode::OK,
            &serde_json::json!({
                "ok": true,
                "isolation": s.isolation.as_str(),
                "uidRanges": s.isolation == crate::config::Isolation::Namespaces && s.uid_ranges,
                "supervisorBin": s.supervisor_bin,
                "mockModelUrl": self.mock_model_url,
                "containers": self.runtime.list().await.len(),
            }),
        )
    }

    async fn handle_start(
        &self,
        id: &ContainerId,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, ApiError> {
        let body = read_body_limited(req.into_body(), BODY_MAX)
            .await
            .ok_or_else(|| ApiError::BadRequest("body too large or unreadable".into()))?;
        let start: StartBody = if body.is_empty() {
            StartBody {
                env: BTreeMap::new(),
            }
        } else {
            serde_json::from_slice(&body).map_err(|e| body_error("start", START_SHAPE, &e))?
        };
        let status = self.runtime.start(id, &start.env).await?;
        Ok(to_json(&status))
    }

    async fn handle_signal(
        &self,
        id: &ContainerId,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, ApiError> {
        let body = read_body_limited(req.into_body(), BODY_MAX)
            .await
            .ok_or_else(|| ApiError::BadRequest("body too large or unreadable".into()))?;
        let parsed: SignalBody =
            serde_json::from_slice(&body).map_err(|e| body_error("signal", SIGNAL_SHAPE, &e))?;
        self.runtime.signal(id, parsed.signal).await?;
        Ok(json(StatusCode::OK, &serde_json::json!({ "ok": true })))
    }

    async fn handle_port(
        &self,
        id: &ContainerId,
        port: u16,
        path: &str,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, ApiError> {
        let host_port = self.runtime.host_port(id, port).await?;
        let target = match req.uri().query() {
            Some(q) => format!("{path}?{q}"),
            None => path.to_owned(),
        };
        proxy::forward(req, port, host_port, &target).await
    }
}

const START_SHAPE: &str = r#"{"env":{"NAME":"value",..}}"#;
const SIGNAL_SHAPE: &str = r#"{"signal":15}"#;

/// A JSON body error without serde's text: that text quotes the offending
/// value, which in a start body may be a secret.
fn body_error(what: &str, shape: &str, e: &serde_json::Error) -> ApiError {
    ApiError::BadRequest(format!(
        "invalid {what} body (line {} column {}): expected {shape}",
        e.line(),
        e.column()
    ))
}

fn to_json<T: serde::Serialize>(value: &T) -> Response<Body> {
    match serde_json::to_value(value) {
        Ok(v) => json(StatusCode::OK, &v),
        Err(e) => ApiError::Internal(e.to_string()).into_response(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn id(s: &str) -> ContainerId {
        ContainerId::parse(s).unwrap()
    }

    #[test]
    fn routes() {
        let g = Method::GET;
        let p = Method::POST;
        assert_eq!(route(&g, "/healthz").unwrap(), Route::Health);
        assert_eq!(
            route(&p, "/containers/a1/start").unwrap(),
            Route::Start(id("a1"))
        );
        assert_eq!(
            route(&g, "/containers/a1").unwrap(),
            Route::Status(id("a1"))
        );
        assert_eq!(
            route(&Method::DELETE, "/containers/a1").unwrap(),
            Route::Destroy(id("a1"))
        );
        assert_eq!(
            route(&p, "/containers/a1/destroy").unwrap(),
            Route::Destroy(id("a1"))
        );
        assert_eq!(
            route(&p, "/containers/a1/signal").unwrap(),
            Route::Signal(id("a1"))
        );
        assert_eq!(
            route(&p, "/containers/a1/ports/8080/_control/health").unwrap(),
            Route::Port(id("a1"), 8080, "/_control/health".into())
        );
        assert_eq!(
            route(&Method::PUT, "/containers/a1/ports/8642").unwrap(),
            Route::Port(id("a1"), 8642, "/".into())
        );
        // The forwarded path is raw: no decoding here, the supervisor decides.
        assert_eq!(
            route(&g, "/containers/a1/ports/8080/a/%2e%2e/b").unwrap(),
            Route::Port(id("a1"), 8080, "/a/%2e%2e/b".into())
        );
    }

    #[test]
    fn refusals() {
        let g = Method::GET;
        let p = Method::POST;
        let code = |m: &Method, path: &str| route(m, path).unwrap_err().status_and_code();
        assert_eq!(
            code(&p, "/containers/..%2f/start").1,
            "invalid_container_id"
        );
        assert_eq!(code(&p, "/containers/A/start").1, "invalid_container_id");
        assert_eq!(code(&p, "/containers//start").1, "invalid_container_id");
        assert_eq!(code(&g, "/containers/a1/start").1, "method_not_allowed");
        assert_eq!(code(&g, "/containers/a1/nope").1, "not_found");
        assert_eq!(code(&g, "/elsewhere").1, "not_found");
        assert_eq!(code(&g, "/containers/a1/ports/0/x").1, "bad_request");
        assert_eq!(code(&g, "/containers/a1/ports/+80/x").1, "bad_request");
        assert_eq!(code(&g, "/containers/a1/ports/65536/x").1, "bad_request");
    }
}
