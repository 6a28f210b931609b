//! Typed client of the supervisor's control API (`hermes-protocol`).
//!
//! Every call carries the boot's bearer token, runs against the runtime's
//! port mapping with its own timeout, and reports failures as
//! [`ControlFailure`] so the caller can decide whether a retry is safe.

use std::time::Duration;

use hermes_protocol::{ports, ControlError};
use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::{AbortController, Headers, Response};

use super::net::{abort_on_timeout, race, CallError};
use super::runtime::Runtime;
use crate::container_error::{classify, ContainerFailure};
use crate::retry::AttemptError;

/// Timeout of one control call (the retry policy's per-attempt timeout
/// bounds it again).
pub const CONTROL_CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlFailure {
    pub retryable: bool,
    /// HTTP status of the supervisor's answer, when there was one.
    pub status: Option<u16>,
    /// The supervisor's error code and message, when it answered with one.
    pub code: Option<String>,
    pub detail: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ControlFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ControlFailure {
    fn from_call(e: CallError) -> Self {
        match e {
            CallError::TimedOut => Self {
                code: None,
                detail: None,
                retryable: true,
                status: None,
                message: "control call timed out".into(),
            },
            CallError::Failed(m) => Self {
                code: None,
                detail: None,
                retryable: classify(&m) != ContainerFailure::Permanent,
                status: None,
                message: m,
            },
        }
    }

    pub fn into_attempt(self) -> AttemptError<ControlFailure> {
        if self.retryable {
            AttemptError::Retryable(self)
        } else {
            AttemptError::Fatal(self)
        }
    }
}

pub struct ControlClient<'a> {
    pub runtime: &'a Runtime,
    pub token: &'a str,
}

impl ControlClient<'_> {
    fn headers(&self, json_body: bool) -> worker::Result<Headers> {
        let headers = Headers::new();
        headers.set("authorization", &format!("Bearer {}", self.token))?;
        if json_body {
            headers.set("content-type", "application/json")?;
        }
        Ok(headers)
    }

    /// A JSON call. Non-2xx answers become failures: 5xx and the runtime's
    /// "not listening" 503 are retryable, 4xx are not.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        control_path: &str,
        body: Option<String>,
    ) -> Result<T, ControlFailure> {
        self.call_timed(method, control_path, body, CONTROL_CALL_TIMEOUT)
            .await
    }

    /// [`Self::call`] with an explicit timeout (terminal operations run
    /// user commands for up to minutes).
    pub async fn call_timed<T: DeserializeOwned>(
        &self,
        method: &str,
        control_path: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> Result<T, ControlFailure> {
        self.call_with_headers(method, control_path, body, timeout, &[])
            .await
    }

    /// [`Self::call_timed`] with extra request headers (the Workspace token).
    pub async fn call_with_headers<T: DeserializeOwned>(
        &self,
        method: &str,
        control_path: &str,
        body: Option<String>,
        timeout: Duration,
        extra: &[(&str, &str)],
    ) -> Result<T, ControlFailure> {
        let fail = |m: String| ControlFailure {
            code: None,
            detail: None,
            retryable: false,
            status: None,
            message: m,
        };
        let headers = self
            .headers(body.is_some())
            .map_err(|e| fail(e.to_string()))?;
        for (name, value) in extra {
            headers.set(name, value).map_err(|e| fail(e.to_string()))?;
        }
        let controller = AbortController::default();
        let call = self.runtime.fetch(
            ports::CONTROL_PORT,
            method,
            control_path,
            &headers,
            body.map(|b| JsValue::from_str(&b)),
            &controller,
        );
        let outcome = race(call, timeout).await;
        let mut resp = abort_on_timeout(outcome, controller).map_err(ControlFailure::from_call)?;
        let status = resp.status_code();
        let text = resp.text().await.map_err(|e| ControlFailure {
            code: None,
            detail: None,
            retryable: true,
            status: Some(status),
            message: e.to_string(),
        })?;
        if (200..300).contains(&status) {
            return serde_json::from_str(&text).map_err(|e| ControlFailure {
                status: Some(status),
                ..fail(format!("{control_path}: unexpected answer: {e}"))
            });
        }
        let detail = serde_json::from_str::<ControlError>(&text)
            .map(|e| format!("{}: {}", e.error, e.message))
            .unwrap_or_else(|_| text.chars().take(200).collect());
        let retryable = status >= 500 || classify(&detail) == ContainerFailure::Transient;
        Err(ControlFailure {
            code: None,
            detail: None,
            retryable,
            status: Some(status),
            message: format!("{control_path}: {status} {detail}"),
        })
    }

    /// Forward a request through the supervisor (Hermes' API or an exposed
    /// terminal port; `control_target` is the full control path), streaming
    /// both bodies. One attempt; `deadline` bounds the whole exchange inside
    /// the container; `header_timeout` bounds the wait for response headers
    /// here.
    #[allow(clippy::too_many_arguments)]
    pub async fn forward(
        &self,
        method: &str,
        control_target: &str,
        forwarded: &Headers,
        body: Option<JsValue>,
        deadline: Duration,
        header_timeout: Duration,
    ) -> Result<Response, CallError> {
        let headers = forwarded.clone();
        let auth = self
            .headers(false)
            .map_err(|e| CallError::Failed(e.to_string()))?;
        for (k, v) in auth.entries() {
            headers
                .set(&k, &v)
                .map_err(|e| CallError::Failed(e.to_string()))?;
        }
        headers
            .set(
                hermes_protocol::header::DEADLINE_MS,
                &deadline.as_millis().to_string(),
            )
            .map_err(|e| CallError::Failed(e.to_string()))?;
        let target = control_target;
        let controller = AbortController::default();
        let call = self.runtime.fetch(
            ports::CONTROL_PORT,
            method,
            target,
            &headers,
            body,
            &controller,
        );
        let outcome = race(call, header_timeout).await;
        abort_on_timeout(outcome, controller)
    }
}
