//! The terminal operations of SPEC §8: validate (pure, 400 on bad input),
//! run inside the boundary, shape the answer. A non-zero exit of the
//! user's command is a normal result.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use hermes_protocol::limits::{
    EXEC_COMMAND_MAX_CHARS, EXEC_OUTPUT_MAX_BYTES, EXEC_TIMEOUT_DEFAULT_MS, EXEC_TIMEOUT_MAX_MS,
    EXEC_TIMEOUT_MIN_MS, FILE_READ_DEFAULT_BYTES, FILE_READ_MAX_BYTES, FILE_WRITE_MAX_BYTES,
};
use hermes_protocol::terminal::{
    ExecRequest, ExecResult, FileContent, FileEncoding, FileListRequest, FileListing,
    FileReadRequest, FileWriteRequest, FileWritten,
};

use super::boundary::Ready;
use super::helper::{is_client_kind, HelperFailure, HelperReply, HelperRequest, HELPER_ARG};
use super::paths::resolve_in_workspace;
use super::run::{self, RunSpec};
use super::{env, ready};
use crate::app::App;
use crate::error::SupervisorError;

/// The running supervisor binary, valid in any mount namespace.
const SELF_EXE: &str = "/proc/self/exe";

const HELPER_TIMEOUT: Duration = Duration::from_secs(60);
/// Helper answers carry at most 2 MB of file as base64 plus JSON.
const HELPER_OUTPUT_CAP: usize = 8 * 1024 * 1024;

fn bad(msg: impl Into<String>) -> SupervisorError {
    SupervisorError::BadRequest(msg.into())
}

/// Resolve a caller's path inside the workspace (400 when it is not).
pub fn workspace_path(ready: &Ready, raw: &str) -> Result<PathBuf, SupervisorError> {
    resolve_in_workspace(&ready.workspace, raw).map_err(|e| bad(format!("path: {e}")))
}

/// `timeoutMs` → the clamped timeout.
pub fn exec_timeout(requested: Option<u64>) -> Duration {
    Duration::from_millis(
        requested
            .unwrap_or(EXEC_TIMEOUT_DEFAULT_MS)
            .clamp(EXEC_TIMEOUT_MIN_MS, EXEC_TIMEOUT_MAX_MS),
    )
}

pub fn validate_command(command: &str) -> Result<(), SupervisorError> {
    let n = command.chars().count();
    if n == 0 || n > EXEC_COMMAND_MAX_CHARS || command.trim().is_empty() {
        return Err(bad(format!(
            "command must be 1..{EXEC_COMMAND_MAX_CHARS} characters"
        )));
    }
    if command.contains('\0') {
        return Err(bad("command contains a NUL byte"));
    }
    Ok(())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Run `program args` as the terminal user in `cwd`.
pub async fn run_command(
    app: &App,
    ready: &Ready,
    program: &Path,
    args: &[&OsStr],
    cwd: &Path,
    timeout: Duration,
    extra_env: &[(&str, &str)],
) -> Result<run::RunOutput, SupervisorError> {
    let sandbox = ready.sandbox(cwd).map_err(bad)?;
    let mut command_env: Vec<(String, String)> = env::command_env(&ready.workspace)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    command_env.extend(
        extra_env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    run::run(
        app,
        &sandbox,
        RunSpec {
            program,
            args: args.to_vec(),
            env: command_env,
            stdin: None,
            timeout,
            output_cap: EXEC_OUTPUT_MAX_BYTES,
            kill_group_after_exit: false,
        },
    )
    .await
    .map_err(|e| match e.raw_os_error() {
        // The working directory (chdir is the last step in the child).
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::EACCES) => {
            bad(format!("cwd is not an accessible directory: {e}"))
        }
        _ => SupervisorError::Terminal(format!("could not start the command: {}", e.kind())),
    })
}

pub async fn exec(app: &App, req: &ExecRequest) -> Result<ExecResult, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    validate_command(&req.command)?;
    let cwd = match &req.cwd {
        Some(raw) => workspace_path(ready, raw)?,
        None => ready.workspace.clone(),
    };
    let out = run_command(
        app,
        ready,
        Path::new("/bin/sh"),
        &[OsStr::new("-c"), OsStr::new(&req.command)],
        &cwd,
        exec_timeout(req.timeout_ms),
        &[],
    )
    .await?;
    Ok(ExecResult {
        ok: true,
        exit_code: out.exit_code,
        stdout: String::from_utf8_lossy(&out.stdout.bytes).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr.bytes).into_owned(),
        stdout_truncated: out.stdout.truncated,
        stderr_truncated: out.stderr.truncated,
        truncated: out.stdout.truncated || out.stderr.truncated,
        timed_out: out.timed_out,
        duration_ms: millis(out.duration),
    })
}

/// Run the file helper (the supervisor re-executed) inside the boundary.
pub async fn run_helper(
    app: &App,
    ready: &Ready,
    request: &HelperRequest,
    content: &[u8],
    timeout: Duration,
) -> Result<HelperReply, SupervisorError> {
    let sandbox = ready.sandbox(&ready.workspace).map_err(bad)?;
    let mut input =
        serde_json::to_vec(request).map_err(|e| SupervisorError::internal("helper request", e))?;
    input.push(b'\n');
    input.extend_from_slice(content);
    let out = run::run(
        app,
        &sandbox,
        RunSpec {
            // Through the magic link, not the path: the helper runs in a
            // mount namespace with its own /tmp, which hides a supervisor
            // binary that lives under /tmp (a checkout there, in devhost).
            program: Path::new(SELF_EXE),
            args: vec![OsStr::new(HELPER_ARG)],
            env: env::command_env(&ready.workspace)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            stdin: Some(input),
            timeout,
            output_cap: HELPER_OUTPUT_CAP,
            kill_group_after_exit: false,
        },
    )
    .await
    .map_err(|e| {
        SupervisorError::Terminal(format!("could not start the file helper: {}", e.kind()))
    })?;
    if out.timed_out || out.exit_code != 0 {
        return Err(SupervisorError::Terminal(format!(
            "file helper failed (exit {}{})",
            out.exit_code,
            if out.timed_out { ", timed out" } else { "" }
        )));
    }
    if let Ok(failure) = serde_json::from_slice::<HelperFailure>(&out.stdout.bytes) {
        let msg = format!("{}: {}", failure.kind, failure.message);
        return Err(if is_client_kind(&failure.kind) {
            SupervisorError::BadRequest(msg)
        } else {
            SupervisorError::Terminal(msg)
        });
    }
    serde_json::from_slice::<HelperReply>(&out.stdout.bytes)
        .map_err(|_| SupervisorError::Terminal("file helper gave no answer".into()))
}

fn unexpected() -> SupervisorError {
    SupervisorError::Terminal("file helper gave an unexpected answer".into())
}

pub async fn file_read(app: &App, req: &FileReadRequest) -> Result<FileContent, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    let path = workspace_path(ready, &req.path)?;
    let max_bytes = req.max_bytes.unwrap_or(FILE_READ_DEFAULT_BYTES);
    if max_bytes == 0 || max_bytes > FILE_READ_MAX_BYTES {
        return Err(bad(format!("maxBytes must be 1..{FILE_READ_MAX_BYTES}")));
    }
    let request = HelperRequest::Read {
        path: path.clone(),
        max_bytes,
    };
    let HelperReply::Read { size, content_b64 } =
        run_helper(app, ready, &request, &[], HELPER_TIMEOUT).await?
    else {
        return Err(unexpected());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content_b64.as_bytes())
        .map_err(|_| unexpected())?;
    let count = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    let (encoding, content) = match String::from_utf8(bytes) {
        Ok(text) => (FileEncoding::Utf8, text),
        Err(e) => (
            FileEncoding::Base64,
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
        ),
    };
    Ok(FileContent {
        ok: true,
        path: path.display().to_string(),
        bytes: count,
        size,
        truncated: size > count,
        encoding,
        content,
    })
}

/// Decode `content` per `encoding`; at most 5 000 000 bytes.
pub fn decode_content(content: &str, encoding: FileEncoding) -> Result<Vec<u8>, SupervisorError> {
    let bytes = match encoding {
        FileEncoding::Utf8 => content.as_bytes().to_vec(),
        FileEncoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(content.trim().as_bytes())
            .map_err(|_| bad("content is not valid base64"))?,
    };
    if bytes.len() > FILE_WRITE_MAX_BYTES {
        return Err(bad(format!(
            "content is {} bytes after decoding; the limit is {FILE_WRITE_MAX_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

pub async fn file_write(app: &App, req: &FileWriteRequest) -> Result<FileWritten, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    let path = workspace_path(ready, &req.path)?;
    if path == ready.workspace {
        return Err(bad("path is the workspace directory itself"));
    }
    let bytes = decode_content(&req.content, req.encoding.unwrap_or_default())?;
    let request = HelperRequest::Write { path: path.clone() };
    let HelperReply::Write { bytes_written } =
        run_helper(app, ready, &request, &bytes, HELPER_TIMEOUT).await?
    else {
        return Err(unexpected());
    };
    Ok(FileWritten {
        ok: true,
        path: path.display().to_string(),
        bytes_written,
    })
}

pub async fn file_list(app: &App, req: &FileListRequest) -> Result<FileListing, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    let path = match &req.path {
        Some(p) => workspace_path(ready, p)?,
        None => ready.workspace.clone(),
    };
    let request = HelperRequest::List { path: path.clone() };
    let HelperReply::List { entries } =
        run_helper(app, ready, &request, &[], HELPER_TIMEOUT).await?
    else {
        return Err(unexpected());
    };
    Ok(FileListing {
        ok: true,
        path: path.display().to_string(),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_clamp() {
        assert_eq!(exec_timeout(None), Duration::from_secs(120));
        assert_eq!(exec_timeout(Some(0)), Duration::from_secs(1));
        assert_eq!(exec_timeout(Some(999)), Duration::from_secs(1));
        assert_eq!(exec_timeout(Some(5_000)), Duration::from_secs(5));
        assert_eq!(exec_timeout(Some(10_000_000)), Duration::from_secs(600));
    }

    #[test]
    fn command_length() {
        assert!(validate_command("").is_err());
        assert!(validate_command("   ").is_err());
        assert!(validate_command("a\0b").is_err());
        assert!(validate_command("true").is_ok());
        assert!(validate_command(&"é".repeat(20_000)).is_ok());
        assert!(validate_command(&"a".repeat(20_001)).is_err());
    }

    #[test]
    fn content_decoding() {
        assert_eq!(decode_content("hi", FileEncoding::Utf8).unwrap(), b"hi");
        assert_eq!(decode_content("aGk=", FileEncoding::Base64).unwrap(), b"hi");
        assert!(decode_content("!!", FileEncoding::Base64).is_err());
        assert_eq!(
            decode_content(&"a".repeat(5_000_000), FileEncoding::Utf8)
                .unwrap()
                .len(),
            5_000_000
        );
        assert!(decode_content(&"a".repeat(5_000_001), FileEncoding::Utf8).is_err());
    }
}
