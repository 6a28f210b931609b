//! The JSON error model of SPEC §1, in one place.
//!
//! Every failure the edge reports is an [`ApiError`]: a stable machine code,
//! the HTTP status that code maps to, a human message and, once the agent is
//! known, its id. The mapping from code to status lives in
//! [`ErrorCode::status`] and nowhere else, so a route cannot invent its own.

use serde::Serialize;

/// Every error code the edge can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    HostedModeNotConfigured,
    Unauthorized,
    MissingAgentId,
    InvalidAgentId,
    NotFound,
    MethodNotAllowed,
    BadRequest,
    BadPath,
    ReservedSessionKey,
    InvalidByok,
    PayloadTooLarge,
    ContainerNotReady,
    GatewayError,
    TurnTimeout,
    ServerMisconfigured,
    TerminalUnavailable,
    TerminalError,
    WorkspaceCliDisabled,
    Internal,
}

impl ErrorCode {
    /// The wire code (`"error"` field).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::HostedModeNotConfigured => "hosted_mode_not_configured",
            Self::Unauthorized => "unauthorized",
            Self::MissingAgentId => "missing_agent_id",
            Self::InvalidAgentId => "invalid_agent_id",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::BadRequest => "bad_request",
            Self::BadPath => "bad_path",
            Self::ReservedSessionKey => "reserved_session_key",
            Self::InvalidByok => "invalid_byok",
            Self::PayloadTooLarge => "payload_too_large",
            Self::ContainerNotReady => "container_not_ready",
            Self::GatewayError => "gateway_error",
            Self::TurnTimeout => "turn_timeout",
            Self::ServerMisconfigured => "server_misconfigured",
            Self::TerminalUnavailable => "terminal_unavailable",
            Self::TerminalError => "terminal_error",
            Self::WorkspaceCliDisabled => "workspace_cli_disabled",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status of the code. Client mistakes are 4xx, container or
    /// Hermes failures 502/503/504, bugs 500.
    pub const fn status(self) -> u16 {
        match self {
            Self::BadRequest
            | Self::BadPath
            | Self::ReservedSessionKey
            | Self::InvalidByok
            | Self::MissingAgentId
            | Self::InvalidAgentId => 400,
            Self::Unauthorized => 401,
            Self::NotFound | Self::WorkspaceCliDisabled => 404,
            Self::MethodNotAllowed => 405,
            Self::PayloadTooLarge => 413,
            Self::Internal => 500,
            Self::GatewayError | Self::TerminalError => 502,
            Self::HostedModeNotConfigured
            | Self::ContainerNotReady
            | Self::ServerMisconfigured
            | Self::TerminalUnavailable => 503,
            Self::TurnTimeout => 504,
        }
    }
}

/// An error answer: `{"ok":false,"error":..,"message":..[, "agentId":..]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub agent_id: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorBody<'a> {
    ok: bool,
    error: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            agent_id: None,
        }
    }

    /// Attach the (validated) agent id once it is known.
    pub fn for_agent(mut self, agent_id: &str) -> Self {
        self.agent_id = Some(agent_id.to_owned());
        self
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The JSON body. Serialising plain strings cannot fail; should it ever,
    /// a fixed, valid body is returned instead of panicking.
    pub fn to_json(&self) -> String {
        let body = ErrorBody {
            ok: false,
            error: self.code.as_str(),
            message: &self.message,
            agent_id: self.agent_id.as_deref(),
        };
        serde_json::to_string(&body).unwrap_or_else(|_| {
            r#"{"ok":false,"error":"internal","message":"error serialisation failed"}"#.to_owned()
        })
    }

    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such route")
    }

    pub fn method_not_allowed(allowed: &[&str]) -> Self {
        Self::new(
            ErrorCode::MethodNotAllowed,
            format!("method not allowed; use {}", allowed.join(", ")),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.as_str(),
            self.status(),
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_shape_without_and_with_agent() {
        let e = ApiError::new(ErrorCode::Unauthorized, "missing bearer");
        let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ok":false,"error":"unauthorized","message":"missing bearer"})
        );
        let e = ApiError::new(ErrorCode::GatewayError, "down").for_agent("agent-0001");
        let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(v["agentId"], "agent-0001");
        assert_eq!(e.status(), 502);
    }

    #[test]
    fn message_is_escaped() {
        let e = ApiError::new(ErrorCode::BadRequest, "quote \" and \n newline");
        let v: serde_json::Value = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(v["message"], "quote \" and \n newline");
    }

    #[test]
    fn status_table() {
        let rows = [
            (
                ErrorCode::HostedModeNotConfigured,
                503,
                "hosted_mode_not_configured",
            ),
            (ErrorCode::Unauthorized, 401, "unauthorized"),
            (ErrorCode::MissingAgentId, 400, "missing_agent_id"),
            (ErrorCode::InvalidAgentId, 400, "invalid_agent_id"),
            (ErrorCode::NotFound, 404, "not_found"),
            (ErrorCode::MethodNotAllowed, 405, "method_not_allowed"),
            (ErrorCode::ContainerNotReady, 503, "container_not_ready"),
            (ErrorCode::GatewayError, 502, "gateway_error"),
            (ErrorCode::ServerMisconfigured, 503, "server_misconfigured"),
            (ErrorCode::TurnTimeout, 504, "turn_timeout"),
            (ErrorCode::Internal, 500, "internal"),
        ];
        for (code, status, text) in rows {
            assert_eq!(code.status(), status, "{text}");
            assert_eq!(code.as_str(), text);
        }
    }
}
