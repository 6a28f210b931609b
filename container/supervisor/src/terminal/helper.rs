//! The supervisor re-executed as `hermes-supervisor __terminal-helper`:
//! file operations and the boot self-test probe, performed *by the
//! terminal user inside every layer*, so the kernel — not a string check —
//! decides what a path (symlinks included) may reach.
//!
//! Input on stdin: one JSON line ([`HelperRequest`]), then for writes the
//! raw content bytes. Output on stdout: one JSON value ([`HelperReply`]
//! fields or a [`HelperFailure`]). Exit status 0 either way; anything else
//! is a crash the supervisor reports as `terminal_error`.

use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::Engine;
use serde::{Deserialize, Serialize};

use hermes_protocol::terminal::{EntryType, FileEntry};

/// argv\[1\] that selects this mode.
pub const HELPER_ARG: &str = "__terminal-helper";

/// What the supervisor asks the helper to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum HelperRequest {
    Read {
        path: PathBuf,
        max_bytes: u64,
    },
    /// Content follows the JSON line on stdin.
    Write {
        path: PathBuf,
    },
    List {
        path: PathBuf,
    },
    Probe(super::probe::ProbeRequest),
}

/// Successful answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum HelperReply {
    /// The first bytes, base64 (compact and lossless over JSON).
    Read {
        size: u64,
        content_b64: String,
    },
    Write {
        bytes_written: u64,
    },
    List {
        entries: Vec<FileEntry>,
    },
    Probe(Box<super::probe::ProbeFacts>),
}

/// A failed operation: `kind` is the OS error kind, never file content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HelperFailure {
    pub failed: bool,
    pub kind: String,
    pub message: String,
}

/// Error kinds that are the caller's fault (missing file, no permission,
/// wrong type): answered 400. Everything else is a terminal error.
pub fn is_client_kind(kind: &str) -> bool {
    matches!(
        kind,
        "not_found"
            | "permission_denied"
            | "is_a_directory"
            | "not_a_directory"
            | "not_a_regular_file"
            | "already_exists"
            | "file_too_large"
            | "invalid_input"
    )
}

fn kind_of(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "not_found",
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => "permission_denied",
        Some(libc::EISDIR) => "is_a_directory",
        Some(libc::ENOTDIR) => "not_a_directory",
        Some(libc::EEXIST) => "already_exists",
        Some(libc::EFBIG) | Some(libc::ENOSPC) | Some(libc::EDQUOT) => "file_too_large",
        Some(libc::ELOOP) | Some(libc::EINVAL) | Some(libc::ENAMETOOLONG) => "invalid_input",
        _ => "io_error",
    }
}

fn failure(e: &io::Error) -> HelperFailure {
    HelperFailure {
        failed: true,
        kind: kind_of(e).to_owned(),
        message: e.to_string(),
    }
}

fn read_file(path: &Path, max_bytes: u64) -> io::Result<HelperReply> {
    // O_NONBLOCK: opening a FIFO must not hang the helper; non-regular
    // files are refused right after.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not_a_regular_file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(HelperReply::Read {
        size: meta.len(),
        content_b64: base64::engine::general_purpose::STANDARD.encode(&bytes),
    })
}

fn write_file(path: &Path, content: &[u8]) -> io::Result<HelperReply> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not_a_regular_file",
        ));
    }
    file.write_all(content)?;
    file.sync_data()?;
    Ok(HelperReply::Write {
        bytes_written: u64::try_from(content.len()).unwrap_or(u64::MAX),
    })
}

fn entry_type(ft: std::fs::FileType) -> EntryType {
    if ft.is_symlink() {
        EntryType::Symlink
    } else if ft.is_dir() {
        EntryType::Dir
    } else if ft.is_file() {
        EntryType::File
    } else {
        EntryType::Other
    }
}

fn list_dir(path: &Path) -> io::Result<HelperReply> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        entries.push(FileEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            kind: entry_type(meta.file_type()),
            size: meta.len(),
            mode: meta.permissions().mode() & 0o7777,
            mtime: meta.mtime(),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(HelperReply::List { entries })
}

fn dispatch(request: HelperRequest, content: &[u8]) -> io::Result<HelperReply> {
    match request {
        HelperRequest::Read { path, max_bytes } => read_file(&path, max_bytes),
        HelperRequest::Write { path } => write_file(&path, content),
        HelperRequest::List { path } => list_dir(&path),
        HelperRequest::Probe(probe) => {
            Ok(HelperReply::Probe(Box::new(super::probe::collect(&probe))))
        }
    }
}

fn emit<T: Serialize>(value: &T) -> ExitCode {
    let mut out = io::stdout().lock();
    let written = serde_json::to_writer(&mut out, value).map_err(std::io::Error::from);
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(3),
    }
}

/// Entry point of the helper mode.
pub fn main() -> ExitCode {
    let mut input = Vec::new();
    if io::stdin().lock().read_to_end(&mut input).is_err() {
        return ExitCode::from(3);
    }
    let split = input
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or(input.len());
    let (head, rest) = input.split_at(split);
    let content = rest.get(1..).unwrap_or(&[]);
    let request: HelperRequest = match serde_json::from_slice(head) {
        Ok(r) => r,
        Err(_) => return ExitCode::from(3),
    };
    match dispatch(request, content) {
        Ok(reply) => emit(&reply),
        Err(e)
            if e.kind() == io::ErrorKind::InvalidInput && e.to_string() == "not_a_regular_file" =>
        {
            emit(&HelperFailure {
                failed: true,
                kind: "not_a_regular_file".into(),
                message: "not a regular file".into(),
            })
        }
        Err(e) => emit(&failure(&e)),
    }
}
