//! Boot-check facts: who the gateway runs as (read from `/proc`), the Hermes
//! version (asked of the installed `hermes`), the image marker (computed from
//! bytes, never written by hand) and the terminal boundary status.
//!
//! `hermes --version` prints its version on the first line and then checks
//! for updates over the network, which cannot succeed in a closed container;
//! so only the first line is read and the process group is killed. It runs
//! with the same dropped identity and minimal environment as the gateway.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hermes_protocol::BootCheck;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::app::App;
use crate::config::HERMES_UID;
use crate::privdrop::{self, RunAs};
use crate::{gateway, procfs};

const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Containment layers of the virtual terminal (DESIGN "The virtual terminal").
pub const TERMINAL_LAYERS: [&str; 4] = hermes_protocol::terminal::LAYERS;

/// `"0.19.0"` from `"Hermes Agent v0.19.0 (2026.7.20)"`.
pub fn parse_version(first_line: &str) -> Option<String> {
    let word = first_line.split_whitespace().find(|w| {
        let w = w.strip_prefix('v').unwrap_or(w);
        w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.')
    })?;
    let v = word.strip_prefix('v').unwrap_or(word);
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+')
        .then(|| v.to_owned())
}

/// Hex SHA-256 prefix over the supervisor executable and the requirements
/// file: changes whenever either the supervisor or the Hermes pin does.
pub fn image_marker(exe: &[u8], requirements: Option<&[u8]>) -> String {
    let mut h = Sha256::new();
    h.update(b"hermes-edge image marker v1\0");
    h.update((exe.len() as u64).to_be_bytes());
    h.update(exe);
    match requirements {
        Some(r) => {
            h.update(b"\x01");
            h.update(r);
        }
        None => h.update(b"\x00"),
    }
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    match requirements {
        Some(_) => hex,
        None => format!("{hex}-no-requirements"),
    }
}

fn compute_marker(app: &App) -> String {
    let mut exe = Vec::new();
    let exe_ok = std::fs::File::open("/proc/self/exe").and_then(|mut f| f.read_to_end(&mut exe));
    let requirements = std::fs::read(&app.settings.requirements).ok();
    let marker = image_marker(&exe, requirements.as_deref());
    match exe_ok {
        Ok(_) => marker,
        Err(_) => format!("{marker}-no-exe"),
    }
}

async fn ask_version(app: &App) -> Option<String> {
    let mut cmd = privdrop::contained_command(
        &app.settings.hermes_bin,
        &["--version"],
        gateway::child_env(app),
        &app.settings.home_dir,
        RunAs::for_uid(HERMES_UID),
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().ok()?;
    let pid = child.id();
    app.reaper.forget(pid);
    let stdout = child.stdout.take()?;
    drop(child);
    let read = async {
        let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout.into()).ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        while !buf.contains(&b'\n') && buf.len() < 4096 {
            match pipe.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        Some(buf)
    };
    let out = tokio::time::timeout(VERSION_TIMEOUT, read)
        .await
        .ok()
        .flatten();
    // Its own session: the group id is its PID. Kill the update check.
    if let Ok(pgid) = libc::pid_t::try_from(pid) {
        // SAFETY: signals only the process group of the child we spawned.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let _ = app.reaper.wait_exit(pid, Duration::from_secs(2)).await;
    let text = String::from_utf8_lossy(&out?).into_owned();
    parse_version(text.lines().next()?)
}

/// Hermes' version, asked once and cached after the first success.
pub async fn hermes_version(app: &App) -> Option<String> {
    if let Some(v) = app.hermes_version.lock().ok().and_then(|v| v.clone()) {
        return Some(v);
    }
    let v = ask_version(app).await?;
    if let Ok(mut cache) = app.hermes_version.lock() {
        *cache = Some(v.clone());
    }
    Some(v)
}

/// Ask for the version in the background once Hermes is ready, so the first
/// boot-check does not pay for a Python start (~1–2 s). Not earlier: on a
/// small machine it would compete with Hermes' own start for the CPU.
pub fn warm_version_cache(app: &Arc<App>) {
    let cached = app
        .hermes_version
        .lock()
        .map(|v| v.is_some())
        .unwrap_or(true);
    if cached || app.version_warming.swap(true, Ordering::AcqRel) {
        return;
    }
    // One background attempt per supervisor: a failure is not retried here
    // (boot-check itself still asks when nothing is cached).
    let app = Arc::clone(app);
    tokio::spawn(async move {
        let _ = hermes_version(&app).await;
    });
}

/// The whole boot-check report.
pub async fn report(app: &App) -> BootCheck {
    let pid = gateway::live_pid(app);
    let uids = pid.and_then(procfs::uids);
    let uid = uids.map(|u| u[0]);
    let terminal_boundary: BTreeMap<String, String> = crate::terminal::boot_check_layers(app);
    BootCheck {
        ok: true,
        gateway_pid: pid,
        gateway_uid: uid,
        gateway_user: uid.and_then(procfs::user_name),
        non_root: uids.is_some_and(|u| u.iter().all(|id| *id != 0)),
        hermes_version: hermes_version(app).await,
        image_marker: app.image_marker.get_or_init(|| compute_marker(app)).clone(),
        boot_id: app.settings.boot_id.clone(),
        uptime_ms: app.uptime_ms(),
        key_fingerprint: app.gateway_snapshot().key_fingerprint,
        terminal_boundary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_parsing() {
        assert_eq!(
            parse_version("Hermes Agent v0.19.0 (2026.7.20)").as_deref(),
            Some("0.19.0")
        );
        assert_eq!(
            parse_version("hermes 1.2.3rc1").as_deref(),
            Some("1.2.3rc1")
        );
        assert_eq!(parse_version("Hermes Agent dev"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn marker_depends_on_both_inputs() {
        let a = image_marker(b"exe-1", Some(b"req-1"));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, image_marker(b"exe-2", Some(b"req-1")));
        assert_ne!(a, image_marker(b"exe-1", Some(b"req-2")));
        assert!(image_marker(b"exe-1", None).ends_with("-no-requirements"));
        assert_eq!(a, image_marker(b"exe-1", Some(b"req-1")));
    }
}
