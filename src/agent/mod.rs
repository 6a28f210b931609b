//! The `HermesAgent` Durable Object: one per agent, named `agent:<id>`.
//!
//! It is the only place that owns the agent's state and its container. Its
//! `fetch` re-checks the agent id the Worker forwarded (an object never acts
//! for an id that is not valid, nor for a second id), routes with the shared
//! table, and calls one small `handle_*` method per operation. State lives
//! in SQLite (`storage`); memory only caches what is safe to lose.

mod boot;
mod control;
mod crypto;
mod net;
mod runtime;
mod storage;

use std::time::Duration;

use hermes_protocol::{path, Activity, BootCheck, ProbeRead, ProbeWrite};
use serde::Serialize;
use wasm_bindgen::JsValue;
use worker::{
    durable_object, DurableObject, Env, Headers, Method, Request, Response, Result, State,
};

use self::boot::{Ctx, DesiredKeys, Lifecycle};
use self::control::{ControlClient, ControlFailure};
use self::net::CallError;
use self::runtime::Runtime;
use crate::agent_id::{AgentId, AGENT_ID_HEADER};
use crate::errors::{ApiError, ErrorCode};
use crate::http::{error_response, ok_json, string_binding};
use crate::provider_keys::{parse_byok, KeySet, BYOK_KEY_HEADER, BYOK_PROVIDER_HEADER};
use crate::proxy_path::{
    self, CHAT_FORWARDED_HEADERS, PROXY_FORWARDED_HEADERS, SESSION_KEY_HEADER, TRIGGER_HEADER,
};
use crate::retry::{retry, RetryPolicy};
use crate::router::{self, Route, RouteMatch, TerminalOp};
use crate::settings;
use crate::workspace;

/// Largest chat request body accepted.
const CHAT_BODY_MAX: usize = 5 * 1024 * 1024;

#[durable_object]
pub struct HermesAgent {
    state: State,
    env: Env,
    /// Set once the schema has been migrated in this instance. Losing it
    /// (eviction from memory) only costs one cheap version check.
    schema_ready: std::cell::Cell<bool>,
    lifecycle: Lifecycle,
    /// This instance has checked (or made) the agent binding in SQLite.
    claimed: std::cell::Cell<bool>,
    /// An idle alarm is pending (set by this instance).
    alarm_armed: std::cell::Cell<bool>,
    /// When this instance last received a request (ms since the epoch).
    last_request_ms: std::cell::Cell<i64>,
    /// Requests this instance is handling right now.
    requests_in_flight: std::cell::Cell<u32>,
    /// Consecutive idle alarms that could not read the container's activity.
    activity_failures: std::cell::Cell<u32>,
}

impl DurableObject for HermesAgent {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            schema_ready: std::cell::Cell::new(false),
            lifecycle: Lifecycle::default(),
            claimed: std::cell::Cell::new(false),
            alarm_armed: std::cell::Cell::new(false),
            last_request_ms: std::cell::Cell::new(0),
            requests_in_flight: std::cell::Cell::new(0),
            activity_failures: std::cell::Cell::new(0),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let agent = match AgentId::parse(req.headers().get(AGENT_ID_HEADER)?.as_deref()) {
            Ok(agent) => agent,
            Err(e) => return error_response(&ApiError::from(e)),
        };
        let raw = <worker::web_sys::Request as Clone>::clone(req.inner());
        self.requests_in_flight
            .set(self.requests_in_flight.get() + 1);
        let outcome = self.dispatch(req, &agent).await;
        self.requests_in_flight
            .set(self.requests_in_flight.get().saturating_sub(1));
        // A body nobody read (an early refusal) is cancelled before the
        // answer leaves: otherwise the runtime keeps pumping the caller's
        // stream into this request after the response was sent, and fails
        // with "Can't read from request stream after response has been sent".
        if !raw.body_used() {
            if let Some(body) = raw.body() {
                let _ = body.cancel();
            }
        }
        match outcome {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(refusal)) => error_response(&refusal.for_agent(agent.as_str())),
            Err(err) => {
                worker::console_error!("agent {agent}: internal error: {err}");
                error_response(&ApiError::internal("internal error").for_agent(agent.as_str()))
            }
        }
    }

    async fn alarm(&self) -> Result<Response> {
        self.ensure_schema()?;
        self.handle_idle_alarm().await?;
        Response::ok("alarm handled")
    }
}

type Answer = std::result::Result<Response, ApiError>;

impl HermesAgent {
    async fn dispatch(&self, req: Request, agent: &AgentId) -> Result<Answer> {
        self.ensure_schema()?;
        if !self.claimed.get() {
            if let Err(refusal) = storage::claim_agent(&self.state.storage().sql(), agent) {
                return Ok(Err(refusal));
            }
            self.claimed.set(true);
        }
        let route = match router::route(req.method().as_ref(), &req.path()) {
            RouteMatch::Found(route) => route,
            RouteMatch::MethodNotAllowed(allowed) => {
                return Ok(Err(ApiError::method_not_allowed(allowed)))
            }
            RouteMatch::NotFound => return Ok(Err(ApiError::not_found())),
        };
        let runtime = match Runtime::from_config(&self.state, &self.env, agent) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        self.arm_idle_alarm().await?;
        let cx = Ctx {
            state: &self.state,
            env: &self.env,
            agent,
            runtime: &runtime,
        };
        Ok(match route {
            Route::ProbeWrite => self.handle_probe_write(&cx).await,
            Route::ProbeRead => self.handle_probe_read(&cx).await,
            Route::BootCheck => self.handle_boot_check(&cx).await,
            Route::Stop => self.handle_stop(&cx).await,
            Route::Evict => self.handle_evict(&cx).await,
            Route::Proxy => self.handle_proxy(&cx, req).await,
            Route::Chat => self.handle_chat(&cx, req).await,
            Route::Terminal(op) => self.handle_terminal(&cx, op, req).await,
            Route::Port => self.handle_port(&cx, req).await,
        })
    }

    fn ensure_schema(&self) -> Result<()> {
        if self.schema_ready.get() {
            return Ok(());
        }
        storage::migrate(&self.state.storage())?;
        self.schema_ready.set(true);
        Ok(())
    }

    fn sleep_after(&self) -> Duration {
        match string_binding(&self.env, "HERMES_SLEEP_AFTER") {
            None => settings::SLEEP_AFTER_DEFAULT,
            Some(raw) => settings::parse_sleep_after(&raw).unwrap_or_else(|e| {
                worker::console_error!("{e}; using the default of 30m");
                settings::SLEEP_AFTER_DEFAULT
            }),
        }
    }

    /// Note the request and make sure an idle alarm is pending. The alarm
    /// is set once, not pushed out on every request (a storage write per
    /// request); when it fires it measures idleness itself and re-arms.
    async fn arm_idle_alarm(&self) -> Result<()> {
        self.last_request_ms
            .set(worker::Date::now().as_millis() as i64);
        if !self.alarm_armed.get() {
            self.state.storage().set_alarm(self.sleep_after()).await?;
            self.alarm_armed.set(true);
        }
        Ok(())
    }

    async fn rearm(&self, after: Duration) -> Result<()> {
        self.state.storage().set_alarm(after).await?;
        self.alarm_armed.set(true);
        Ok(())
    }

    /// Idle alarm: sleep (stop and destroy) unless a request or stream is
    /// still in flight in the container or activity was recent.
    async fn handle_idle_alarm(&self) -> Result<()> {
        self.alarm_armed.set(false);
        let sql = self.state.storage().sql();
        let Some(boot) = storage::current_boot(&sql)? else {
            return Ok(());
        };
        let Some(agent) = storage::bound_agent(&sql)? else {
            return Ok(());
        };
        let Ok(agent) = AgentId::parse(Some(&agent)) else {
            return Ok(());
        };
        let runtime = match Runtime::from_config(&self.state, &self.env, &agent) {
            Ok(r) => r,
            Err(e) => {
                worker::console_error!("agent {agent}: idle alarm: {e}");
                return Ok(());
            }
        };
        let sleep_after = self.sleep_after();
        // Idle since the last request this instance saw (an instance that
        // saw none was evicted from memory: no recent requests) and since
        // the last activity inside the container (streams, proxied calls).
        let now = worker::Date::now().as_millis() as i64;
        let last = self.last_request_ms.get();
        let mut idle_for = if last > 0 {
            Duration::from_millis(u64::try_from(now - last).unwrap_or(0))
        } else {
            sleep_after
        };
        let client = ControlClient {
            runtime: &runtime,
            token: &boot.control_token,
        };
        // Never while this object is handling a request (a boot can take
        // longer than a short idle period).
        if self.requests_in_flight.get() > 0 {
            return self.rearm(sleep_after).await;
        }
        match client.call::<Activity>("GET", path::ACTIVITY, None).await {
            Ok(activity) => {
                self.activity_failures.set(0);
                if activity.in_flight > 0 {
                    return self.rearm(sleep_after).await;
                }
                idle_for = idle_for.min(Duration::from_millis(activity.last_activity_ms_ago));
            }
            // Unknown is not idle: a container that is still running gets
            // a few more chances before it is put to sleep anyway.
            Err(f)
                if matches!(runtime.running().await, Ok(true))
                    && self.activity_failures.get() < 3 =>
            {
                self.activity_failures.set(self.activity_failures.get() + 1);
                worker::console_warn!(
                    "agent {agent}: idle alarm: activity unknown ({f}); retrying later"
                );
                return self.rearm(sleep_after).await;
            }
            Err(_) => {}
        }
        if idle_for < sleep_after {
            return self.rearm(sleep_after - idle_for).await;
        }
        let cx = Ctx {
            state: &self.state,
            env: &self.env,
            agent: &agent,
            runtime: &runtime,
        };
        if let Err(e) = self
            .lifecycle
            .evict_if(&cx, "slept", Some(&boot.boot_id))
            .await
        {
            worker::console_error!("agent {agent}: idle sleep failed: {e}");
        }
        Ok(())
    }

    async fn ready_client<'a>(
        &self,
        cx: &'a Ctx<'a>,
        want: Option<&DesiredKeys>,
    ) -> std::result::Result<String, ApiError> {
        self.lifecycle
            .ensure_ready(cx, want)
            .await
            .map(|b| b.control_token)
    }

    /// An idempotent control call on a ready container: retried per the
    /// policy, and when it still fails, the container is verified again
    /// (booted anew if it died) and the call made once more.
    async fn idempotent<T: serde::de::DeserializeOwned>(
        &self,
        cx: &Ctx<'_>,
        method: &str,
        control_path: &str,
        body: Option<String>,
    ) -> std::result::Result<T, ApiError> {
        let token = self.ready_client(cx, None).await?;
        let client = ControlClient {
            runtime: cx.runtime,
            token: &token,
        };
        match self
            .retried(&client, method, control_path, body.clone())
            .await
        {
            Ok(v) => Ok(v),
            Err(_) => {
                let token = self.ready_client(cx, None).await?;
                let client = ControlClient {
                    runtime: cx.runtime,
                    token: &token,
                };
                self.retried(&client, method, control_path, body).await
            }
        }
    }

    /// A retried JSON control call (probe, boot-check: idempotent).
    async fn retried<T: serde::de::DeserializeOwned>(
        &self,
        client: &ControlClient<'_>,
        method: &str,
        control_path: &str,
        body: Option<String>,
    ) -> std::result::Result<T, ApiError> {
        let result = retry(
            &RetryPolicy::default(),
            &mut boot::CryptoJitter,
            worker::Delay::from,
            |_| {
                let body = body.clone();
                async move {
                    client
                        .call::<T>(method, control_path, body)
                        .await
                        .map_err(ControlFailure::into_attempt)
                }
            },
        )
        .await;
        result.map_err(|e| {
            self.lifecycle.invalidate();
            ApiError::new(ErrorCode::GatewayError, e.to_string())
        })
    }

    /// `POST /hosted/agent/probe`: write a fresh marker in the container
    /// and read it back.
    async fn handle_probe_write(&self, cx: &Ctx<'_>) -> Answer {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Written<'a> {
            ok: bool,
            agent_id: &'a str,
            wrote: String,
            read: String,
            isolated: bool,
        }
        let marker = format!("marker-for-{}-{}", cx.agent, random_hex(8)?);
        let body = serde_json::to_string(&ProbeWrite {
            marker: marker.clone(),
        })
        .unwrap_or_default();
        let _: serde_json::Value = self.idempotent(cx, "POST", path::PROBE, Some(body)).await?;
        let read: ProbeRead = self.idempotent(cx, "GET", path::PROBE, None).await?;
        let isolated = read.read == marker;
        answer(ok_json(&Written {
            ok: true,
            agent_id: cx.agent.as_str(),
            wrote: marker,
            read: read.read,
            isolated,
        }))
    }

    /// `GET /hosted/agent/probe`: the container's marker, or `(none)`.
    async fn handle_probe_read(&self, cx: &Ctx<'_>) -> Answer {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Read<'a> {
            ok: bool,
            agent_id: &'a str,
            read: String,
        }
        let read: ProbeRead = self.idempotent(cx, "GET", path::PROBE, None).await?;
        answer(ok_json(&Read {
            ok: true,
            agent_id: cx.agent.as_str(),
            read: read.read,
        }))
    }

    /// `GET /hosted/agent/boot-check`: the supervisor's report plus what
    /// the object knows about its boots.
    async fn handle_boot_check(&self, cx: &Ctx<'_>) -> Answer {
        let report: BootCheck = self.idempotent(cx, "GET", path::BOOT_CHECK, None).await?;
        let mut value =
            serde_json::to_value(&report).map_err(|e| ApiError::internal(e.to_string()))?;
        let sql = self.state.storage().sql();
        let boots = storage::boot_count(&sql).map_err(|e| ApiError::internal(e.to_string()))?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("ok".into(), true.into());
            obj.insert("agentId".into(), cx.agent.as_str().into());
            obj.insert("bootCount".into(), boots.into());
        }
        answer(ok_json(&value))
    }

    async fn handle_stop(&self, cx: &Ctx<'_>) -> Answer {
        self.lifecycle.stop(cx).await?;
        answer(ok_json(
            &serde_json::json!({"ok": true, "agentId": cx.agent.as_str(), "status": "stopped"}),
        ))
    }

    async fn handle_evict(&self, cx: &Ctx<'_>) -> Answer {
        self.lifecycle.evict(cx, "evicted").await?;
        answer(ok_json(
            &serde_json::json!({"ok": true, "agentId": cx.agent.as_str(), "status": "evicted"}),
        ))
    }

    /// The key set a model-using request wants: platform keys plus the
    /// request's BYOK overlay.
    async fn desired_keys(
        &self,
        cx: &Ctx<'_>,
        req: &Request,
    ) -> std::result::Result<DesiredKeys, ApiError> {
        let h = req.headers();
        let byok = parse_byok(
            h.get(BYOK_PROVIDER_HEADER).ok().flatten().as_deref(),
            h.get(BYOK_KEY_HEADER).ok().flatten().as_deref(),
        )?;
        let mut set: KeySet = cx.platform_keys();
        if let Some(byok) = &byok {
            set = set.with_byok(byok);
        }
        let fingerprint = self.lifecycle.fingerprint(cx, &set).await?;
        Ok(DesiredKeys { set, fingerprint })
    }

    fn turn_timeout(&self) -> Duration {
        settings::turn_timeout(string_binding(&self.env, "HERMES_TURN_TIMEOUT_MS").as_deref())
    }

    /// `ALL /hosted/agent/proxy/*`: one attempt, streamed both ways.
    async fn handle_proxy(&self, cx: &Ctx<'_>, req: Request) -> Answer {
        let raw_path = req.path();
        let sub = proxy_path::proxy_subpath(&raw_path).ok_or_else(ApiError::not_found)?;
        let canonical = proxy_path::canonical_subpath(sub)?;
        let session_key = req.headers().get(SESSION_KEY_HEADER).ok().flatten();
        proxy_path::check_session_key(session_key.as_deref())?;
        let keys = self.desired_keys(cx, &req).await?;
        let forwarded = copy_headers(req.headers(), PROXY_FORWARDED_HEADERS)?;
        let target = match req.url().ok().and_then(|u| u.query().map(str::to_owned)) {
            Some(q) => format!("{canonical}?{q}"),
            None => canonical,
        };
        let method = req.method();
        let body = body_of(&req, &method);
        let token = self.ready_client(cx, Some(&keys)).await?;
        let target = format!("{}{target}", path::HERMES_API_PREFIX);
        self.forward(cx, &token, method.as_ref(), &target, &forwarded, body)
            .await
    }

    /// `POST /hosted/agent/v1/chat/completions`: one chat turn, one attempt.
    async fn handle_chat(&self, cx: &Ctx<'_>, mut req: Request) -> Answer {
        let keys = self.desired_keys(cx, &req).await?;
        let bytes = req
            .bytes()
            .await
            .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("unreadable body: {e}")))?;
        if bytes.len() > CHAT_BODY_MAX {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                "chat body larger than 5 MB",
            ));
        }
        if !serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|v| v.is_object()) {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "chat body must be a JSON object",
            ));
        }
        let forwarded = copy_headers(req.headers(), CHAT_FORWARDED_HEADERS)?;
        set_header(&forwarded, "content-type", "application/json")?;
        let trigger = req.headers().get(TRIGGER_HEADER).ok().flatten();
        let disabled =
            settings::flag(string_binding(&self.env, "HERMES_PROACTIVE_TOOLS_DISABLED").as_deref());
        if let Some(key) = proxy_path::chat_session_key(trigger.as_deref(), disabled) {
            set_header(&forwarded, SESSION_KEY_HEADER, key)?;
        }
        let body = JsValue::from(worker::js_sys::Uint8Array::from(bytes.as_slice()));
        let token = self.ready_client(cx, Some(&keys)).await?;
        let target = format!("{}/v1/chat/completions", path::HERMES_API_PREFIX);
        self.forward(cx, &token, "POST", &target, &forwarded, Some(body))
            .await
    }

    /// `/hosted/agent/terminal/*`: forwarded to the supervisor, which runs
    /// the operation as the terminal user under every containment layer
    /// (and answers 503 `terminal_unavailable` naming the layer otherwise).
    /// One attempt except for `status`.
    async fn handle_terminal(&self, cx: &Ctx<'_>, op: TerminalOp, mut req: Request) -> Answer {
        // The Workspace CLI: off unless enabled, and never without a
        // well-formed per-call token (checked before anything boots).
        let workspace_token = if op == TerminalOp::Workspace {
            if !workspace::enabled(
                string_binding(&self.env, "HERMES_WORKSPACE_CLI_ENABLED").as_deref(),
            ) {
                return Err(ApiError::new(
                    ErrorCode::WorkspaceCliDisabled,
                    "the Workspace CLI is disabled (HERMES_WORKSPACE_CLI_ENABLED is not true)",
                ));
            }
            let raw = req
                .headers()
                .get(workspace::WORKSPACE_TOKEN_HEADER)
                .ok()
                .flatten();
            Some(workspace::check_token(raw.as_deref())?.to_owned())
        } else {
            None
        };
        let token = self.ready_client(cx, None).await?;
        let client = ControlClient {
            runtime: cx.runtime,
            token: &token,
        };
        let attempts = if op.retryable() {
            RetryPolicy::default().attempts()
        } else {
            1
        };
        let policy = RetryPolicy::with_attempts(attempts).with_attempt_timeout(TERMINAL_TIMEOUT);
        let body =
            match op {
                TerminalOp::Status => None,
                _ => {
                    let bytes = req.bytes().await.map_err(|e| {
                        ApiError::new(ErrorCode::BadRequest, format!("unreadable body: {e}"))
                    })?;
                    if bytes.len() > hermes_protocol::limits::TERMINAL_BODY_MAX {
                        return Err(ApiError::new(
                            ErrorCode::PayloadTooLarge,
                            "terminal request body too large",
                        ));
                    }
                    Some(String::from_utf8(bytes).map_err(|_| {
                        ApiError::new(ErrorCode::BadRequest, "body must be UTF-8 JSON")
                    })?)
                }
            };
        let method = if op == TerminalOp::Status {
            "GET"
        } else {
            "POST"
        };
        let result = retry(
            &policy,
            &mut boot::CryptoJitter,
            worker::Delay::from,
            |_| {
                let body = body.clone();
                let client = &client;
                let workspace_token = &workspace_token;
                async move {
                    let extra: Vec<(&str, &str)> = workspace_token
                        .as_deref()
                        .map(|t| vec![(workspace::WORKSPACE_TOKEN_HEADER, t)])
                        .unwrap_or_default();
                    client
                        .call_with_headers::<serde_json::Value>(
                            method,
                            op.control_path(),
                            body,
                            TERMINAL_TIMEOUT,
                            &extra,
                        )
                        .await
                        .map_err(|f| {
                            if op.retryable() {
                                f.into_attempt()
                            } else {
                                crate::retry::AttemptError::Fatal(f)
                            }
                        })
                }
            },
        )
        .await;
        match result {
            Ok(mut value) => {
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("ok".into(), true.into());
                    obj.insert("agentId".into(), cx.agent.as_str().into());
                }
                answer(ok_json(&value))
            }
            Err(crate::retry::RetryError::Failed { error, .. }) => Err(terminal_error(error)),
            Err(crate::retry::RetryError::TimedOut { .. }) => Err(ApiError::new(
                ErrorCode::TerminalError,
                "terminal operation timed out",
            )),
        }
    }

    /// `ALL /hosted/agent/ports/<port>/*`: HTTP to a port the terminal user
    /// exposed, through the supervisor (the server listens inside the
    /// terminal's network namespace). One attempt, streamed.
    async fn handle_port(&self, cx: &Ctx<'_>, req: Request) -> Answer {
        let path = req.path();
        let (port, rest) = proxy_path::port_route(&path).ok_or_else(ApiError::not_found)?;
        let port = proxy_path::parse_exposable_port(port)?;
        let canonical = proxy_path::canonical_subpath(rest)?;
        let query = req.url().ok().and_then(|u| u.query().map(str::to_owned));
        let mut target = format!("{}{port}{canonical}", path::TERMINAL_PORTS_PREFIX);
        if let Some(q) = query {
            target = format!("{target}?{q}");
        }
        let forwarded = copy_headers(req.headers(), PORT_FORWARDED_HEADERS)?;
        let method = req.method();
        let body = body_of(&req, &method);
        let token = self.ready_client(cx, None).await?;
        self.forward(cx, &token, method.as_ref(), &target, &forwarded, body)
            .await
    }

    async fn forward(
        &self,
        cx: &Ctx<'_>,
        token: &str,
        method: &str,
        target: &str,
        headers: &Headers,
        body: Option<JsValue>,
    ) -> Answer {
        let client = ControlClient {
            runtime: cx.runtime,
            token,
        };
        let timeout = self.turn_timeout();
        match client
            .forward(method, target, headers, body, timeout, timeout)
            .await
        {
            Ok(resp) => {
                // A 502/503 from the supervisor means Hermes is not
                // answering: verify the boot again on the next request
                // (which restarts Hermes if needed) instead of trusting the
                // cached one.
                if matches!(resp.status_code(), 502 | 503) {
                    self.lifecycle.invalidate();
                }
                Ok(resp)
            }
            Err(CallError::TimedOut) => Err(ApiError::new(
                ErrorCode::TurnTimeout,
                format!(
                    "no answer within the turn timeout of {} ms",
                    timeout.as_millis()
                ),
            )),
            Err(CallError::Failed(m)) => {
                self.lifecycle.invalidate();
                Err(ApiError::new(
                    ErrorCode::GatewayError,
                    format!("Hermes unreachable: {m}"),
                ))
            }
        }
    }
}

/// Headers forwarded to an exposed port (never the caller's credentials).
const PORT_FORWARDED_HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "accept-encoding",
    "cache-control",
    "if-none-match",
    "if-modified-since",
    "range",
];

/// Upper bound of one terminal operation (exec allows 600 s, plus margin).
const TERMINAL_TIMEOUT: Duration = Duration::from_secs(660);

/// Map the supervisor's terminal failure to the edge's error model: its
/// client errors and "unavailable" keep their code and message, anything
/// else is a 502 `terminal_error`.
fn terminal_error(f: ControlFailure) -> ApiError {
    let code = match (f.status, f.code.as_deref()) {
        (Some(400), _) | (Some(413), _) => ErrorCode::BadRequest,
        (Some(503), Some("terminal_unavailable")) => ErrorCode::TerminalUnavailable,
        _ => ErrorCode::TerminalError,
    };
    ApiError::new(code, f.detail.unwrap_or(f.message))
}

fn answer(r: Result<Response>) -> Answer {
    r.map_err(|e| ApiError::internal(e.to_string()))
}

fn set_header(h: &Headers, name: &str, value: &str) -> std::result::Result<(), ApiError> {
    h.set(name, value)
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("header {name}: {e}")))
}

/// Copy only the allowlisted headers.
fn copy_headers(from: &Headers, allowed: &[&str]) -> std::result::Result<Headers, ApiError> {
    let out = Headers::new();
    for name in allowed {
        if let Ok(Some(v)) = from.get(name) {
            set_header(&out, name, &v)?;
        }
    }
    Ok(out)
}

/// The request body as a stream, except for GET and HEAD (which carry none).
fn body_of(req: &Request, method: &Method) -> Option<JsValue> {
    match method {
        Method::Get | Method::Head => None,
        _ => req.inner().body().map(JsValue::from),
    }
}

/// `n` random bytes from the runtime's CSPRNG, hex-encoded.
pub fn random_hex(n: usize) -> std::result::Result<String, ApiError> {
    let mut bytes = vec![0u8; n];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("randomness unavailable: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
