//! The Google Workspace CLI route's edge-side checks (issue 7): whether the
//! feature is on, and the shape of the per-call OAuth token. The token is
//! only ever forwarded in a header to the supervisor, which hands it to one
//! `gws` invocation through its environment; the edge never logs or echoes
//! it.

use crate::errors::{ApiError, ErrorCode};

/// Header carrying the caller's OAuth access token.
pub const WORKSPACE_TOKEN_HEADER: &str = "x-workspace-token";
/// Longest token accepted.
pub const TOKEN_MAX: usize = 4096;

/// On only when `HERMES_WORKSPACE_CLI_ENABLED` is exactly `true`.
pub fn enabled(raw: Option<&str>) -> bool {
    raw == Some("true")
}

/// RFC 6750 `b64token` (token68): `[A-Za-z0-9-._~+/]+ =*`.
pub fn is_token68(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && token.len() <= TOKEN_MAX
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// The token from the header, or a 400 that never quotes it.
pub fn check_token(raw: Option<&str>) -> Result<&str, ApiError> {
    match raw {
        None => Err(ApiError::new(
            ErrorCode::BadRequest,
            "header x-workspace-token is required",
        )),
        Some(t) if is_token68(t) => Ok(t),
        Some(_) => Err(ApiError::new(
            ErrorCode::BadRequest,
            "x-workspace-token must be an RFC 6750 token (A-Z a-z 0-9 - . _ ~ + / and trailing =)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enabled_only_for_exact_true() {
        assert!(enabled(Some("true")));
        for no in ["TRUE", "1", "yes", " true", "true ", ""] {
            assert!(!enabled(Some(no)), "{no:?}");
        }
        assert!(!enabled(None));
    }

    #[test]
    fn token68_table() {
        for ok in ["ya29.a0AfH6SM-abc_def~g+h/i", "abc=", "abc==", "A"] {
            assert!(check_token(Some(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "=",
            "abc=d",
            "a b",
            "a\nb",
            "a;b",
            "tok$en",
            "é",
            &"a".repeat(TOKEN_MAX + 1),
        ] {
            let e = check_token(Some(bad)).unwrap_err();
            assert_eq!(
                (e.status(), e.code.as_str()),
                (400, "bad_request"),
                "{bad:?}"
            );
            assert!(bad.len() < 3 || !e.to_json().contains(bad), "token echoed");
        }
        assert_eq!(check_token(None).unwrap_err().status(), 400);
    }
}
