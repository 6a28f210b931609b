//! Control API of the supervisor: paths, headers and bodies.
//!
//! Every request carries `Authorization: Bearer <CONTROL_TOKEN>`. Errors are
//! [`ControlError`] JSON with a 4xx/5xx status.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Path prefix of every control route.
pub const CONTROL_PREFIX: &str = "/_control";

pub mod path {
    /// `GET`: liveness of the supervisor itself → [`super::Health`].
    pub const HEALTH: &str = "/_control/health";
    /// `POST` [`super::Provision`] → [`super::Provisioned`].
    pub const PROVISION: &str = "/_control/provision";
    /// `POST`: start (or restart) Hermes → [`super::HermesState`].
    pub const HERMES_START: &str = "/_control/hermes/start";
    /// `POST`: stop Hermes and its children → [`super::HermesState`].
    pub const HERMES_STOP: &str = "/_control/hermes/stop";
    /// `GET`: is Hermes' API answering `/health`? → [`super::HermesState`].
    pub const HERMES_READY: &str = "/_control/hermes/ready";
    /// `GET` → [`super::BootCheck`].
    pub const BOOT_CHECK: &str = "/_control/boot-check";
    /// `POST` [`super::ProbeWrite`] / `GET` → [`super::ProbeRead`].
    pub const PROBE: &str = "/_control/probe";
    /// `GET` → [`super::Activity`].
    pub const ACTIVITY: &str = "/_control/activity";
    /// `ANY /_control/hermes-api/<path>`: streamed reverse proxy to the
    /// Hermes API; the supervisor drops the caller's `authorization` and
    /// injects the per-boot gateway key.
    pub const HERMES_API_PREFIX: &str = "/_control/hermes-api";
    /// `POST` [`crate::terminal::ExecRequest`] → [`crate::terminal::ExecResult`].
    pub const TERMINAL_EXEC: &str = "/_control/terminal/exec";
    /// `POST` [`crate::terminal::GitCloneRequest`] → [`crate::terminal::GitCloneResult`].
    pub const TERMINAL_GIT_CLONE: &str = "/_control/terminal/git-clone";
    /// `POST` [`crate::terminal::FileReadRequest`] → [`crate::terminal::FileContent`].
    pub const TERMINAL_FILE_READ: &str = "/_control/terminal/file/read";
    /// `POST` [`crate::terminal::FileWriteRequest`] → [`crate::terminal::FileWritten`].
    pub const TERMINAL_FILE_WRITE: &str = "/_control/terminal/file/write";
    /// `POST` [`crate::terminal::FileListRequest`] → [`crate::terminal::FileListing`].
    pub const TERMINAL_FILE_LIST: &str = "/_control/terminal/file/list";
    /// `POST` [`crate::terminal::ExposePortRequest`] → [`crate::terminal::PortExposed`].
    pub const TERMINAL_EXPOSE_PORT: &str = "/_control/terminal/expose-port";
    /// `ANY /_control/terminal/ports/<port>/<path>?<query>`: HTTP to a
    /// server the terminal user runs on an exposed port (only ports
    /// recorded by `expose-port` in this boot; streamed both ways; the
    /// caller's `authorization` is not forwarded).
    pub const TERMINAL_PORTS_PREFIX: &str = "/_control/terminal/ports/";
    /// `GET` → [`crate::terminal::TerminalStatus`] (answers even when the
    /// boundary is down: it says which layer failed).
    pub const TERMINAL_STATUS: &str = "/_control/terminal/status";
    /// `POST` [`crate::workspace::WorkspaceRequest`] with the token in the
    /// [`crate::workspace::TOKEN_HEADER`] header → [`crate::terminal::ExecResult`].
    pub const TERMINAL_WORKSPACE: &str = crate::workspace::PATH;
}

/// Headers of the control API.
pub mod header {
    /// On proxied requests: the deadline of the whole exchange, in
    /// milliseconds from receipt. On expiry the supervisor aborts the
    /// upstream request; mid-stream it ends an SSE body with an error event.
    pub const DEADLINE_MS: &str = "x-hermes-deadline-ms";
}

/// Error body of every failed control call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlError {
    pub ok: bool,
    pub error: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub ok: bool,
    pub boot_id: String,
    pub uptime_ms: u64,
}

/// Approval mode written to Hermes' config (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalsMode {
    #[default]
    Manual,
    Smart,
    Off,
}

impl ApprovalsMode {
    /// `manual|smart|off`, anything else → `manual` (the stricter reading).
    pub fn parse_or_manual(raw: Option<&str>) -> Self {
        match raw.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            Some("smart") => Self::Smart,
            Some("off") => Self::Off,
            _ => Self::Manual,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Smart => "smart",
            Self::Off => "off",
        }
    }
}

/// Everything the supervisor needs to configure Hermes for this boot.
/// Contains secrets: never log it, never echo it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Provision {
    /// Per-boot key of Hermes' API server (≥ 32 random bytes, hex/base64).
    pub api_server_key: String,
    /// Provider environment (SPEC §6), complete sets only, already expanded
    /// (`GOOGLE_API_KEY` mirrors `GEMINI_API_KEY`). Written to `.env`.
    pub provider_env: BTreeMap<String, String>,
    /// The Vertex service-account JSON, materialised as a 0600 file and
    /// pointed to by `GOOGLE_APPLICATION_CREDENTIALS`.
    pub vertex_sa_json: Option<String>,
    /// `HERMES_DEFAULT_MODEL`.
    pub default_model: Option<String>,
    pub approvals_mode: ApprovalsMode,
    /// Keyed fingerprint of the provider key set, echoed by boot-check so
    /// the object can tell whether the running gateway has current keys.
    pub key_fingerprint: String,
}

impl std::fmt::Debug for Provision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provision")
            .field("api_server_key", &"<redacted>")
            .field(
                "provider_env",
                &self.provider_env.keys().collect::<Vec<_>>(),
            )
            .field(
                "vertex_sa_json",
                &self.vertex_sa_json.as_ref().map(|_| "<redacted>"),
            )
            .field("default_model", &self.default_model)
            .field("approvals_mode", &self.approvals_mode)
            .field("key_fingerprint", &self.key_fingerprint)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provisioned {
    pub ok: bool,
    pub key_fingerprint: String,
    /// Names (never values) of the provider variables written.
    pub provider_vars: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HermesState {
    pub ok: bool,
    /// `running` | `stopped` | `starting`.
    pub status: String,
    pub pid: Option<u32>,
    /// True when Hermes' API answered `/health`.
    pub ready: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootCheck {
    pub ok: bool,
    pub gateway_pid: Option<u32>,
    pub gateway_uid: Option<u32>,
    pub gateway_user: Option<String>,
    pub non_root: bool,
    pub hermes_version: Option<String>,
    pub image_marker: String,
    pub boot_id: String,
    pub uptime_ms: u64,
    pub key_fingerprint: Option<String>,
    /// Containment layer → status (`established` or the reason it is not).
    pub terminal_boundary: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeWrite {
    pub marker: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRead {
    pub ok: bool,
    /// The stored marker, or `(none)`.
    pub read: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    pub ok: bool,
    pub in_flight: u32,
    pub last_activity_ms_ago: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports;

    #[test]
    fn provision_debug_redacts_secrets() {
        let mut p = Provision {
            api_server_key: "sk-super-secret-gateway-key-0000".into(),
            ..Default::default()
        };
        p.provider_env
            .insert("OPENAI_API_KEY".into(), "sk-openai-secret".into());
        p.vertex_sa_json = Some("{\"private_key\":\"pk\"}".into());
        let shown = format!("{p:?}");
        assert!(!shown.contains("super-secret"), "{shown}");
        assert!(!shown.contains("sk-openai-secret"), "{shown}");
        assert!(!shown.contains("private_key"), "{shown}");
        assert!(shown.contains("OPENAI_API_KEY"));
    }

    #[test]
    fn approvals_mode_defaults_to_manual() {
        assert_eq!(ApprovalsMode::parse_or_manual(None), ApprovalsMode::Manual);
        assert_eq!(
            ApprovalsMode::parse_or_manual(Some("yolo")),
            ApprovalsMode::Manual
        );
        assert_eq!(
            ApprovalsMode::parse_or_manual(Some(" Smart ")),
            ApprovalsMode::Smart
        );
        assert_eq!(
            ApprovalsMode::parse_or_manual(Some("off")),
            ApprovalsMode::Off
        );
        assert_eq!(
            ApprovalsMode::parse_or_manual(Some("")),
            ApprovalsMode::Manual
        );
    }

    #[test]
    fn reserved_ports_are_distinct() {
        let mut v = ports::RESERVED_PORTS.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), ports::RESERVED_PORTS.len());
    }
}
