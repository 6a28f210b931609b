//! The container runtime behind one interface: Cloudflare's container
//! binding in production, `hermes-devhost` over loopback HTTP under
//! `wrangler dev`. Which one is configuration (`HERMES_CONTAINER_RUNTIME`),
//! chosen once per request in [`Runtime::from_config`]; routes never branch
//! on it.

use std::time::Duration;

use wasm_bindgen::{JsCast, JsValue};
use worker::{
    js_sys, worker_sys, AbortController, Container, Env, Fetch, Headers, Response, State,
};

use super::net::{abort_on_timeout, build_request, race, CallError};
use crate::agent_id::AgentId;
use crate::errors::{ApiError, ErrorCode};
use crate::http::string_binding;
use crate::settings::{runtime_choice, RuntimeChoice};

/// Timeout of runtime management calls (start, status, destroy).
const MANAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Origin used for requests into the container (the runtime routes by port).
const CONTAINER_ORIGIN: &str = "http://container";

pub enum Runtime {
    Cloudflare(Container),
    Devhost { base: String, container_id: String },
}

fn js_err(e: JsValue) -> String {
    e.as_string()
        .or_else(|| {
            js_sys::Reflect::get(&e, &JsValue::from_str("message"))
                .ok()
                .and_then(|m| m.as_string())
        })
        .unwrap_or_else(|| format!("{e:?}"))
}

impl Runtime {
    pub fn from_config(state: &State, env: &Env, agent: &AgentId) -> Result<Self, ApiError> {
        let choice = runtime_choice(
            string_binding(env, "HERMES_CONTAINER_RUNTIME").as_deref(),
            string_binding(env, "DEVHOST_URL").as_deref(),
        )
        .map_err(|m| ApiError::new(ErrorCode::ServerMisconfigured, m))?;
        match choice {
            RuntimeChoice::Cloudflare => state.container().map(Runtime::Cloudflare).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::ServerMisconfigured,
                    "no container binding for this object (set HERMES_CONTAINER_RUNTIME=devhost for local development)",
                )
            }),
            RuntimeChoice::Devhost { base_url } => {
                Ok(Runtime::Devhost { base: base_url, container_id: agent.object_name() })
            }
        }
    }

    fn devhost_url(base: &str, id: &str, tail: &str) -> String {
        format!("{base}/containers/{id}{tail}")
    }

    async fn devhost_call(
        base: &str,
        id: &str,
        method: &str,
        tail: &str,
        body: Option<String>,
    ) -> Result<Response, String> {
        let headers = Headers::new();
        if body.is_some() {
            headers
                .set("content-type", "application/json")
                .map_err(|e| e.to_string())?;
        }
        let controller = AbortController::default();
        let req = build_request(
            &Self::devhost_url(base, id, tail),
            method,
            &headers,
            body.map(|b| JsValue::from_str(&b)),
            &controller,
        )?;
        let outcome = race(Fetch::Request(req).send(), MANAGE_TIMEOUT).await;
        abort_on_timeout(outcome, controller).map_err(|e| e.to_string())
    }

    /// Is [`Self::running`] a local read (true) or a network call (false)?
    pub fn running_is_cheap(&self) -> bool {
        matches!(self, Runtime::Cloudflare(_))
    }

    pub async fn running(&self) -> Result<bool, String> {
        match self {
            Runtime::Cloudflare(c) => Ok(c.running()),
            Runtime::Devhost { base, container_id } => {
                let mut resp = Self::devhost_call(base, container_id, "GET", "", None).await?;
                if resp.status_code() != 200 {
                    return Ok(false);
                }
                let v: serde_json::Value = resp.json().await.map_err(|e| e.to_string())?;
                Ok(v["running"].as_bool().unwrap_or(false))
            }
        }
    }

    /// Start the container with `env`. Throws (here: `Err`) when already
    /// running, like the platform.
    pub async fn start(&self, env: &[(String, String)]) -> Result<(), String> {
        match self {
            Runtime::Cloudflare(c) => {
                let opts = crate::js_options::start_options(env).map_err(js_err)?;
                let raw: &worker_sys::Container = c.as_ref().unchecked_ref();
                raw.start(&opts.into()).map_err(js_err)
            }
            Runtime::Devhost { base, container_id } => {
                let vars: serde_json::Map<String, serde_json::Value> = env
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect();
                let body = serde_json::json!({ "env": vars }).to_string();
                let mut resp =
                    Self::devhost_call(base, container_id, "POST", "/start", Some(body)).await?;
                if resp.status_code() == 200 {
                    Ok(())
                } else {
                    Err(format!(
                        "devhost start: {} {}",
                        resp.status_code(),
                        resp.text().await.unwrap_or_default()
                    ))
                }
            }
        }
    }

    pub async fn destroy(&self) -> Result<(), String> {
        match self {
            Runtime::Cloudflare(c) => c.destroy(None).await.map_err(|e| e.to_string()),
            Runtime::Devhost { base, container_id } => {
                let resp = Self::devhost_call(base, container_id, "POST", "/destroy", None).await?;
                match resp.status_code() {
                    200 | 404 => Ok(()),
                    s => Err(format!("devhost destroy: status {s}")),
                }
            }
        }
    }

    /// Send a request to `port` inside the container. `path_and_query`
    /// starts with `/`. The caller owns the abort controller and timeout.
    pub async fn fetch(
        &self,
        port: u16,
        method: &str,
        path_and_query: &str,
        headers: &Headers,
        body: Option<JsValue>,
        controller: &AbortController,
    ) -> worker::Result<Response> {
        match self {
            Runtime::Cloudflare(c) => {
                let url = format!("{CONTAINER_ORIGIN}{path_and_query}");
                let req = build_request(&url, method, headers, body, controller)
                    .map_err(worker::Error::RustError)?;
                c.get_tcp_port(port)?.fetch_request(req).await
            }
            Runtime::Devhost { base, container_id } => {
                let url = Self::devhost_url(
                    base,
                    container_id,
                    &format!("/ports/{port}{path_and_query}"),
                );
                let req = build_request(&url, method, headers, body, controller)
                    .map_err(worker::Error::RustError)?;
                Fetch::Request(req).send().await
            }
        }
    }
}

impl From<CallError> for String {
    fn from(e: CallError) -> Self {
        e.to_string()
    }
}
