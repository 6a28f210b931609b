//! Google Workspace access through the contained terminal (issue 7): the
//! control path, the header carrying the caller's OAuth access token, the
//! request body, the limits and the egress hosts the feature adds.
//!
//! The answer is a [`crate::terminal::ExecResult`] (the `gws` process's exit
//! code and output; a non-zero exit is a normal 200). Failures are
//! [`crate::ControlError`] JSON: 404 [`ERROR_WORKSPACE_CLI_DISABLED`] when
//! the feature is off, 400 `bad_request` (missing or malformed token, bad
//! `args`, bad `cwd`), 503 `terminal_unavailable`, 502 `terminal_error`.
//! The token travels only in [`TOKEN_HEADER`], never in the JSON body, and
//! is never echoed, logged or written anywhere by the supervisor.
//!
//! Never retried by the edge or the object: `gws` calls create drafts,
//! events and files, and a repeat duplicates real side effects.

use serde::{Deserialize, Serialize};

/// `POST` [`WorkspaceRequest`] + [`TOKEN_HEADER`] → [`crate::terminal::ExecResult`].
pub const PATH: &str = "/_control/terminal/workspace";
/// Request header with the OAuth access token for this one invocation.
pub const TOKEN_HEADER: &str = "x-workspace-token";
/// Error code when `HERMES_WORKSPACE_CLI_ENABLED` is not exactly `true`.
pub const ERROR_WORKSPACE_CLI_DISABLED: &str = "workspace_cli_disabled";

/// Supervisor environment: the feature is on only when this is exactly
/// `true` (no trimming, no other spellings).
pub const ENABLED_ENV: &str = "HERMES_WORKSPACE_CLI_ENABLED";
/// Supervisor environment: the `gws` executable (default [`GWS_BIN_DEFAULT`]).
pub const GWS_BIN_ENV: &str = "HERMES_GWS_BIN";
/// Where the image installs the pinned `gws` binary.
pub const GWS_BIN_DEFAULT: &str = "/usr/local/bin/gws";
/// The pinned `@googleworkspace/cli` (npm) / `google-workspace-cli`
/// (crates.io) version the image installs.
pub const GWS_VERSION: &str = "0.22.5";
/// The variable `gws` reads a raw OAuth access token from (highest
/// priority, bypasses every credential file and cache: upstream
/// `crates/google-workspace-cli/src/auth.rs`, `get_token`).
pub const GWS_TOKEN_ENV: &str = "GOOGLE_WORKSPACE_CLI_TOKEN";

/// Longest `args` string, in characters.
pub const ARGS_MAX_CHARS: usize = 4_000;
/// Longest token, in bytes.
pub const TOKEN_MAX_BYTES: usize = 4_096;

/// Egress allowlist entries added (container-wide) when the feature is on.
/// Exact matches only (`=`): no other `*.googleapis.com` host is opened.
pub const GOOGLE_API_HOSTS: [&str; 12] = [
    "=oauth2.googleapis.com",
    "=www.googleapis.com",
    "=gmail.googleapis.com",
    "=drive.googleapis.com",
    "=sheets.googleapis.com",
    "=docs.googleapis.com",
    "=slides.googleapis.com",
    "=calendar-json.googleapis.com",
    "=chat.googleapis.com",
    "=tasks.googleapis.com",
    "=people.googleapis.com",
    "=forms.googleapis.com",
];

/// `POST /_control/terminal/workspace` body. The token is NOT here: it is
/// the [`TOKEN_HEADER`] header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceRequest {
    /// Arguments for `gws`, split by the documented quoting rule (POSIX-like:
    /// whitespace separates, `'…'` literal, `"…"` with `\"` and `\\`
    /// escapes); 1..4 000 characters; no shell metacharacters
    /// (`; | & $ \` < >`), no newlines or other control characters.
    pub args: String,
    /// Working directory, resolved inside `/workspace` (default `/workspace`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Default 120 000, clamped to 1 000..600 000 (as `exec`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape() {
        let r: WorkspaceRequest =
            serde_json::from_str(r#"{"args":"drive files list","timeoutMs":5000}"#).unwrap();
        assert_eq!(r.args, "drive files list");
        assert_eq!(r.timeout_ms, Some(5000));
        assert_eq!(r.cwd, None);
        // A token smuggled into the body is refused, not silently ignored.
        assert!(serde_json::from_str::<WorkspaceRequest>(r#"{"args":"x","token":"t"}"#).is_err());
    }

    #[test]
    fn hosts_are_exact_google_api_hosts() {
        for h in GOOGLE_API_HOSTS {
            assert!(h.starts_with('=') && h.ends_with(".googleapis.com"), "{h}");
        }
    }
}
