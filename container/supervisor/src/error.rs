//! The one error type of the control API and the one place it becomes an
//! HTTP status.
//!
//! Every variant says who caused it — the caller (4xx), Hermes (502/503/504)
//! or the supervisor itself (500) — because that decides the status code.
//! Messages are written for the object's logs and never contain a secret:
//! variants carry only fixed text, variable names or OS error kinds.

use bytes::Bytes;
use hermes_protocol::ControlError;
use hyper::{header, Response, StatusCode};

use crate::body::{full, ResponseBody};

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// Missing or wrong control token.
    #[error("missing or invalid control token")]
    Unauthorized,
    /// The caller sent something we cannot parse or will not accept.
    #[error("{0}")]
    BadRequest(String),
    #[error("request body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    #[error("no such control route")]
    NotFound,
    /// The Google Workspace route while `HERMES_WORKSPACE_CLI_ENABLED` is
    /// not exactly `true`.
    #[error("Google Workspace access is not enabled for this container")]
    WorkspaceCliDisabled,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// Hermes cannot be started or proxied to before provisioning.
    #[error("not provisioned yet: POST /_control/provision first")]
    NotProvisioned,
    /// Writing or verifying Hermes' configuration failed.
    #[error("provisioning failed: {0}")]
    ProvisionFailed(String),
    /// Hermes could not be spawned.
    #[error("could not start Hermes: {0}")]
    SpawnFailed(String),
    /// Hermes is unreachable or failed mid-request.
    #[error("Hermes gateway error: {0}")]
    Gateway(String),
    /// The caller's deadline expired before Hermes answered.
    #[error("the turn deadline expired before Hermes answered")]
    TurnTimeout,
    /// A terminal containment layer is not established for this boot.
    #[error("terminal unavailable: {0}")]
    TerminalUnavailable(String),
    /// A terminal operation failed for a reason other than bad input.
    #[error("terminal operation failed: {0}")]
    Terminal(String),
    /// A bug or an OS failure inside the supervisor.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SupervisorError {
    /// Status and stable error code. Matched exhaustively on purpose.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Self::WorkspaceCliDisabled => (
                StatusCode::NOT_FOUND,
                hermes_protocol::workspace::ERROR_WORKSPACE_CLI_DISABLED,
            ),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::NotProvisioned => (StatusCode::CONFLICT, "not_provisioned"),
            Self::ProvisionFailed(_) => (StatusCode::INTERNAL_SERVER_ERROR, "provision_failed"),
            Self::SpawnFailed(_) => (StatusCode::INTERNAL_SERVER_ERROR, "spawn_failed"),
            Self::Gateway(_) => (StatusCode::BAD_GATEWAY, "gateway_error"),
            Self::TurnTimeout => (StatusCode::GATEWAY_TIMEOUT, "turn_timeout"),
            Self::TerminalUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                hermes_protocol::terminal::ERROR_TERMINAL_UNAVAILABLE,
            ),
            Self::Terminal(_) => (
                StatusCode::BAD_GATEWAY,
                hermes_protocol::terminal::ERROR_TERMINAL_ERROR,
            ),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The JSON [`ControlError`] response.
    pub fn into_response(self) -> Response<ResponseBody> {
        let (status, code) = self.status_and_code();
        let body = ControlError {
            ok: false,
            error: code.to_owned(),
            message: self.to_string(),
        };
        json_response(status, &body)
    }

    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        Self::Internal(format!("{context}: {err}"))
    }
}

/// A JSON response; serialisation of our own types cannot fail, but if it
/// ever did the caller still gets valid JSON, not a panic.
pub fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<ResponseBody> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| {
        br#"{"ok":false,"error":"internal","message":"serialisation failed"}"#.to_vec()
    });
    let mut response = Response::new(full(Bytes::from(bytes)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_by_cause() {
        let rows: [(SupervisorError, u16, &str); 8] = [
            (
                SupervisorError::WorkspaceCliDisabled,
                404,
                "workspace_cli_disabled",
            ),
            (SupervisorError::Unauthorized, 401, "unauthorized"),
            (SupervisorError::BadRequest("x".into()), 400, "bad_request"),
            (SupervisorError::NotFound, 404, "not_found"),
            (SupervisorError::MethodNotAllowed, 405, "method_not_allowed"),
            (SupervisorError::Gateway("x".into()), 502, "gateway_error"),
            (SupervisorError::TurnTimeout, 504, "turn_timeout"),
            (SupervisorError::Internal("x".into()), 500, "internal"),
        ];
        for (err, status, code) in rows {
            let (s, c) = err.status_and_code();
            assert_eq!((s.as_u16(), c), (status, code));
        }
    }
}
