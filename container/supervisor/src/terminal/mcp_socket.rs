//! The supervisor's end of the MCP terminal server: a Unix socket that only
//! Hermes' uid may use (SO_PEERCRED), one JSON request line → one JSON
//! reply line, each operation run as the terminal user exactly like the
//! control routes (same validation, same limits, same boundary).
//!
//! The socket lives in Hermes' home (`<home>/.terminal-mcp.sock`, 0600,
//! owner hermes; the home is 0700), so the terminal user cannot even reach
//! the path, and a connection from any other uid is closed unanswered.

use std::path::PathBuf;
use std::sync::Arc;

use hermes_protocol::terminal::{
    EntryType, ExecRequest, FileEncoding, FileListRequest, FileReadRequest, FileWriteRequest,
    GitCloneRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::mcp_text::{defang, exec_text};
use crate::app::App;
use crate::config::HERMES_UID;
use crate::error::SupervisorError;

/// Name of the socket inside Hermes' home.
pub const SOCKET_NAME: &str = ".terminal-mcp.sock";
/// Largest request line (a 5 MB file as base64 plus JSON).
const MAX_LINE: usize = hermes_protocol::limits::TERMINAL_BODY_MAX;

/// One tool call.
#[derive(Debug, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
}

/// Its answer as MCP text content.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReply {
    pub text: String,
    pub is_error: bool,
}

pub fn socket_path(app: &App) -> PathBuf {
    app.settings.home_dir.join(SOCKET_NAME)
}

fn args<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, SupervisorError> {
    serde_json::from_value(v).map_err(|e| SupervisorError::BadRequest(format!("arguments: {e}")))
}

async fn run_tool(app: &App, call: ToolCall) -> Result<String, SupervisorError> {
    match call.tool.as_str() {
        "terminal_exec" => {
            let r = super::ops::exec(app, &args::<ExecRequest>(call.arguments)?).await?;
            Ok(exec_text(&r))
        }
        "git_clone" => {
            let r = super::git::clone(app, &args::<GitCloneRequest>(call.arguments)?).await?;
            let mut text = format!("{}{}", r.stdout, r.stderr);
            if r.egress_denied {
                text.push_str("\n[egress denied]");
            }
            if r.cloned {
                text.push_str(&format!("\n[cloned into {}]", r.target_dir));
            }
            text.push_str(&format!("\n[exit {}]", r.exit_code));
            Ok(defang(&text))
        }
        "read_file" => {
            let r = super::ops::file_read(app, &args::<FileReadRequest>(call.arguments)?).await?;
            let mut text = match r.encoding {
                FileEncoding::Utf8 => r.content,
                FileEncoding::Base64 => {
                    format!("[binary, {} bytes, base64]\n{}", r.bytes, r.content)
                }
            };
            if r.truncated {
                text.push_str(&format!(
                    "\n[truncated: first {} of {} bytes]",
                    r.bytes, r.size
                ));
            }
            Ok(defang(&text))
        }
        "write_file" => {
            let r = super::ops::file_write(app, &args::<FileWriteRequest>(call.arguments)?).await?;
            Ok(format!("wrote {} bytes to {}", r.bytes_written, r.path))
        }
        "list_files" => {
            let r = super::ops::file_list(app, &args::<FileListRequest>(call.arguments)?).await?;
            let mut text = format!("{}:\n", r.path);
            for e in r.entries {
                let kind = match e.kind {
                    EntryType::File => "file",
                    EntryType::Dir => "dir",
                    EntryType::Symlink => "symlink",
                    EntryType::Other => "other",
                };
                text.push_str(&format!(
                    "{kind}\t{}\t{:o}\t{}\t{}\n",
                    e.size, e.mode, e.mtime, e.name
                ));
            }
            Ok(defang(&text))
        }
        other => Err(SupervisorError::BadRequest(format!(
            "unknown tool {:?}",
            other.chars().take(64).collect::<String>()
        ))),
    }
}

async fn serve_connection(app: Arc<App>, stream: UnixStream) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == HERMES_UID => {}
        Ok(_) | Err(_) => return,
    }
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) if line.len() > MAX_LINE => return,
            Ok(_) => {}
        }
        let reply = match serde_json::from_slice::<ToolCall>(&line) {
            Ok(call) => match run_tool(&app, call).await {
                Ok(text) => ToolReply {
                    text,
                    is_error: false,
                },
                Err(e) => {
                    let (_, code) = e.status_and_code();
                    ToolReply {
                        text: defang(&format!("error ({code}): {e}")),
                        is_error: true,
                    }
                }
            },
            Err(_) => ToolReply {
                text: "error: malformed tool call".into(),
                is_error: true,
            },
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_default();
        out.push(b'\n');
        if write.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// Bind the socket (replacing a stale one) and serve it in the background.
pub fn start(app: &Arc<App>) -> std::io::Result<PathBuf> {
    let path = socket_path(app);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&path)?;
    std::os::unix::fs::chown(&path, Some(HERMES_UID), Some(HERMES_UID))?;
    std::fs::set_permissions(
        &path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600),
    )?;
    let app = Arc::clone(app);
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(serve_connection(Arc::clone(&app), stream));
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
    });
    Ok(path)
}
