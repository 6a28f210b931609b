//! The virtual terminal's control bodies (SPEC §8): what the object sends to
//! `/_control/terminal/*` and what the supervisor answers.
//!
//! Field names are camelCase on the wire. Optional request fields may be
//! omitted or `null`. Every answer carries `ok:true`; failures are
//! [`crate::ControlError`] JSON: 400 `bad_request`, 503
//! `terminal_unavailable` (the message names the containment layer that is
//! not established), 502 `terminal_error`. A non-zero exit of the user's
//! command is a normal 200 answer.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Error code: a containment layer is not established for this boot.
pub const ERROR_TERMINAL_UNAVAILABLE: &str = "terminal_unavailable";
/// Error code: the operation failed for a reason other than bad input.
pub const ERROR_TERMINAL_ERROR: &str = "terminal_error";

/// The containment layers, in the order they are established and reported.
pub const LAYERS: [&str; 4] = ["identity", "environment", "network", "filesystem"];
/// Status text of a layer that is up; anything else is the reason it is not.
pub const LAYER_ESTABLISHED: &str = "established";

/// The uid (and gid) terminal commands run as.
pub const TERMINAL_UID: u32 = 10002;
/// The uid of the egress guard.
pub const EGRESS_UID: u32 = 10003;

/// `POST /_control/terminal/exec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecRequest {
    /// Run as `/bin/sh -c <command>` by the terminal user; 1..20 000 chars.
    pub command: String,
    /// Working directory, resolved inside `/workspace` (default `/workspace`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Default 120 000, clamped to 1 000..600 000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// Result of a command. Output is the first 100 000 bytes of each stream,
/// decoded as UTF-8 with invalid sequences replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    pub ok: bool,
    /// The command's exit status; 128+N when killed by signal N; 124 on
    /// timeout.
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Either stream was truncated.
    pub truncated: bool,
    /// The timeout expired and the whole process group was killed.
    pub timed_out: bool,
    pub duration_ms: u64,
}

/// `POST /_control/terminal/git-clone`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitCloneRequest {
    /// `https://host/path` only; no userinfo; host on the egress allowlist.
    pub repo_url: String,
    /// `^[\w.\-/]{1,255}$`, not starting with `-`.
    #[serde(default)]
    pub branch: Option<String>,
    /// Inside `/workspace`; default `/workspace/<repository name>`.
    #[serde(default)]
    pub target_dir: Option<String>,
    /// 1..1000, default 1.
    #[serde(default)]
    pub depth: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitCloneResult {
    pub ok: bool,
    /// The clone succeeded (exit 0).
    pub cloned: bool,
    /// Absolute path of the clone.
    pub target_dir: String,
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    pub timed_out: bool,
    /// The egress guard refused the connection (git reported a 403 from the
    /// proxy).
    pub egress_denied: bool,
    pub duration_ms: u64,
}

/// Content encoding of file bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FileEncoding {
    #[default]
    Utf8,
    Base64,
}

/// `POST /_control/terminal/file/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReadRequest {
    pub path: String,
    /// Default 200 000, at most 2 000 000.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    pub ok: bool,
    /// The resolved absolute path.
    pub path: String,
    /// Number of bytes returned (before encoding).
    pub bytes: u64,
    /// Size of the whole file.
    pub size: u64,
    /// The file has more bytes than were returned.
    pub truncated: bool,
    /// `utf8` when the returned bytes are valid UTF-8, else `base64`.
    pub encoding: FileEncoding,
    pub content: String,
}

/// `POST /_control/terminal/file/write`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWriteRequest {
    pub path: String,
    /// At most 5 000 000 bytes after decoding.
    pub content: String,
    /// Default `utf8`.
    #[serde(default)]
    pub encoding: Option<FileEncoding>,
}

impl std::fmt::Debug for FileWriteRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriteRequest")
            .field("path", &self.path)
            .field("content_len", &self.content.len())
            .field("encoding", &self.encoding)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    pub ok: bool,
    pub path: String,
    pub bytes_written: u64,
}

/// `POST /_control/terminal/file/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct FileListRequest {
    /// Default `/workspace`.
    #[serde(default)]
    pub path: Option<String>,
}

/// Kind of a directory entry (the entry itself; symlinks are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileListing {
    pub ok: bool,
    pub path: String,
    /// Sorted by name.
    pub entries: Vec<FileEntry>,
}

/// `POST /_control/terminal/expose-port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExposePortRequest {
    /// 1024..65535 and not in [`crate::ports::RESERVED_PORTS`].
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortExposed {
    pub ok: bool,
    pub port: u16,
}

/// `GET /_control/terminal/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalStatus {
    pub ok: bool,
    /// Every layer is established: terminal operations are accepted.
    pub available: bool,
    /// The uid commands run as.
    pub uid: u32,
    /// Layer → `established` or the reason it is not (same map as
    /// boot-check's `terminalBoundary`).
    pub layers: BTreeMap<String, String>,
    /// The egress allowlist in force (normalised entries, `=host` exact).
    pub allowlist: Vec<String>,
    pub boot_id: String,
    /// Ports recorded by `expose-port` in this boot.
    pub exposed_ports: Vec<u16>,
}

/// Is `port` one a terminal user may expose?
pub fn exposable_port(port: u16) -> bool {
    port >= crate::limits::EXPOSE_PORT_MIN && !crate::ports::RESERVED_PORTS.contains(&port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_camel_case() {
        let r: ExecRequest =
            serde_json::from_str(r#"{"command":"ls","timeoutMs":5000,"cwd":null}"#).unwrap();
        assert_eq!(r.timeout_ms, Some(5000));
        let v = serde_json::to_value(ExecResult {
            ok: true,
            exit_code: 1,
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            truncated: false,
            timed_out: false,
            duration_ms: 3,
        })
        .unwrap();
        for key in ["exitCode", "stdoutTruncated", "timedOut", "durationMs"] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        let e = serde_json::to_value(FileEntry {
            name: "a".into(),
            kind: EntryType::Dir,
            size: 0,
            mode: 0o755,
            mtime: 0,
        })
        .unwrap();
        assert_eq!(e["type"], "dir");
        let w: FileWriteRequest =
            serde_json::from_str(r#"{"path":"a","content":"aGk=","encoding":"base64"}"#).unwrap();
        assert_eq!(w.encoding, Some(FileEncoding::Base64));
        assert!(!format!("{w:?}").contains("aGk="));
    }

    #[test]
    fn exposable_ports() {
        for (port, ok) in [
            (1023, false),
            (1024, true),
            (3000, true),
            (65535, true),
            (8080, false),
            (8642, false),
            (9119, false),
            (3128, false),
            (8081, true),
        ] {
            assert_eq!(exposable_port(port), ok, "{port}");
        }
    }
}
