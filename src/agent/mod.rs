//! The `HermesAgent` Durable Object: one per agent, named `agent:<id>`.
//!
//! It is the only place that owns the agent's state. Its `fetch` re-checks
//! the agent id the Worker forwarded (an object never acts for an id that is
//! not valid, nor for a second id), routes with the shared table, and calls
//! one small `handle_*` method per operation. State lives in SQLite
//! (`storage`), never only in memory.

mod storage;

use serde::Serialize;
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use crate::agent_id::{AgentId, AGENT_ID_HEADER};
use crate::errors::{ApiError, ErrorCode};
use crate::http::{error_response, ok_json};
use crate::router::{self, Route, RouteMatch};

#[durable_object]
pub struct HermesAgent {
    state: State,
    #[allow(dead_code)]
    env: Env,
    /// Set once the schema has been migrated in this instance. Losing it
    /// (eviction from memory) only costs one cheap version check.
    schema_ready: std::cell::Cell<bool>,
}

impl DurableObject for HermesAgent {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            schema_ready: std::cell::Cell::new(false),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let agent = match AgentId::parse(req.headers().get(AGENT_ID_HEADER)?.as_deref()) {
            Ok(agent) => agent,
            Err(e) => return error_response(&ApiError::from(e)),
        };
        match self.dispatch(req, &agent).await {
            Ok(response) => Ok(response),
            Err(err) => {
                worker::console_error!("agent {agent}: internal error: {err}");
                error_response(&ApiError::internal("internal error").for_agent(agent.as_str()))
            }
        }
    }
}

impl HermesAgent {
    async fn dispatch(&self, req: Request, agent: &AgentId) -> Result<Response> {
        self.ensure_schema()?;
        if let Err(refusal) = storage::claim_agent(&self.state.storage().sql(), agent) {
            return error_response(&refusal);
        }
        let path = req.path();
        match router::route(req.method().as_ref(), &path) {
            RouteMatch::Found(Route::ProbeWrite) => self.handle_probe_write(agent),
            RouteMatch::Found(Route::ProbeRead) => self.handle_probe_read(agent),
            RouteMatch::MethodNotAllowed(allowed) => {
                error_response(&ApiError::method_not_allowed(allowed).for_agent(agent.as_str()))
            }
            RouteMatch::NotFound => {
                error_response(&ApiError::not_found().for_agent(agent.as_str()))
            }
        }
    }

    fn ensure_schema(&self) -> Result<()> {
        if self.schema_ready.get() {
            return Ok(());
        }
        storage::migrate(&self.state.storage())?;
        self.schema_ready.set(true);
        Ok(())
    }

    /// `POST /hosted/agent/probe`: write a fresh marker and read it back.
    fn handle_probe_write(&self, agent: &AgentId) -> Result<Response> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Written<'a> {
            ok: bool,
            agent_id: &'a str,
            wrote: String,
            read: String,
            isolated: bool,
        }
        let nonce = random_hex(8).map_err(|e| worker::Error::RustError(e.message.clone()))?;
        let marker = format!("marker-for-{agent}-{nonce}");
        let sql = self.state.storage().sql();
        storage::write_marker(&sql, &marker)?;
        let read = storage::read_marker(&sql)?.unwrap_or_else(|| "(none)".to_owned());
        let isolated = read == marker;
        ok_json(&Written {
            ok: true,
            agent_id: agent.as_str(),
            wrote: marker,
            read,
            isolated,
        })
    }

    /// `GET /hosted/agent/probe`: the stored marker, or `(none)`.
    fn handle_probe_read(&self, agent: &AgentId) -> Result<Response> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Read<'a> {
            ok: bool,
            agent_id: &'a str,
            read: String,
        }
        let read = storage::read_marker(&self.state.storage().sql())?
            .unwrap_or_else(|| "(none)".to_owned());
        ok_json(&Read {
            ok: true,
            agent_id: agent.as_str(),
            read,
        })
    }
}

/// `n` random bytes from the runtime's CSPRNG, hex-encoded.
pub fn random_hex(n: usize) -> std::result::Result<String, ApiError> {
    let mut bytes = vec![0u8; n];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("randomness unavailable: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
