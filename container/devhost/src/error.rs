//! The runtime API's errors, and the one place they become status codes.

use crate::http::{json_error, Body};
use hyper::{Response, StatusCode};

/// Text Cloudflare's runtime uses when nothing listens on a container port;
/// the Durable Object classifies errors by it, so it is kept verbatim.
pub const NOT_LISTENING: &str = "the container is not listening";

/// Every way a runtime API call can fail. Who caused it decides the status:
/// the caller (4xx), the container (502/503) or devhost itself (500).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadId(#[from] crate::id::IdError),
    #[error("{0}")]
    BadRequest(String),
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("the container is already running")]
    AlreadyRunning,
    #[error("the container is not running")]
    NotRunning,
    /// Container stopped, not started, or nothing accepts on the port.
    #[error("{NOT_LISTENING} on port {0}")]
    NotListening(u16),
    /// A port the container does not map (the runtime only maps its own ports).
    #[error("container port not found: {0} ({NOT_LISTENING})")]
    PortNotFound(u16),
    /// The upstream accepted the connection and then failed.
    #[error("network connection lost: {0}")]
    Upstream(String),
    #[error("container failed to start: {0}")]
    StartFailed(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadId(_) => (StatusCode::BAD_REQUEST, "invalid_container_id"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::AlreadyRunning => (StatusCode::CONFLICT, "already_running"),
            Self::NotRunning => (StatusCode::CONFLICT, "not_running"),
            Self::NotListening(_) => (StatusCode::SERVICE_UNAVAILABLE, "container_not_listening"),
            Self::PortNotFound(_) => (StatusCode::SERVICE_UNAVAILABLE, "container_port_not_found"),
            Self::Upstream(_) => (StatusCode::BAD_GATEWAY, "upstream_error"),
            Self::StartFailed(_) => (StatusCode::INTERNAL_SERVER_ERROR, "start_failed"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    pub fn into_response(self) -> Response<Body> {
        let (status, code) = self.status_and_code();
        json_error(status, code, &self.to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn not_listening_texts_match_cloudflare() {
        for err in [ApiError::NotListening(8080), ApiError::PortNotFound(9)] {
            assert!(err.to_string().contains(NOT_LISTENING), "{err}");
            assert_eq!(err.status_and_code().0, StatusCode::SERVICE_UNAVAILABLE);
        }
        assert!(ApiError::PortNotFound(9)
            .to_string()
            .contains("container port not found"));
    }
}
