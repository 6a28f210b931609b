//! Hermes gateway lifecycle: start as the `hermes` uid, readiness, stop.
//!
//! The gateway is tracked by the PID `spawn` returned — never by process
//! name — and runs in its own session, so its PID is also its process group.
//! Stop signals the group *and* every descendant found through `/proc`
//! parent links (an MCP server that called `setsid` left the group but not
//! the tree), waits a grace period, then `SIGKILL`s what is left; the reaper
//! collects the bodies. Readiness requires three things: the tracked process
//! is alive, the loopback listener on the API port is a socket held by a
//! process of that tree, and `GET /health` answers 200 with Hermes' own JSON.
//! An unrelated listener on the port therefore never counts.

use std::collections::HashSet;
use std::time::Duration;

use hermes_protocol::HermesState;

use crate::app::{App, GatewaySlot};
use crate::config::HERMES_UID;
use crate::error::SupervisorError;
use crate::privdrop::{self, RunAs};
use crate::{procfs, upstream};

/// Grace period between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
const KILL_WAIT: Duration = Duration::from_secs(3);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Minimal environment of every Hermes process. No token, no provider key:
/// those reach Hermes only through its 0600 `.env`.
pub fn child_env(app: &App) -> Vec<(&'static str, String)> {
    let bin_dir = app
        .settings
        .hermes_bin
        .parent()
        .map(|p| format!("{}:", p.display()))
        .unwrap_or_default();
    vec![
        ("HOME", app.settings.home_dir.display().to_string()),
        (
            "HERMES_HOME",
            app.settings.hermes_home().display().to_string(),
        ),
        ("PATH", format!("{bin_dir}/usr/local/bin:/usr/bin:/bin")),
        ("LANG", "C.UTF-8".to_owned()),
    ]
}

/// Is `body` the answer of Hermes' `/health`?
pub fn is_hermes_health(body: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => {
            v.get("status").and_then(|s| s.as_str()) == Some("ok")
                && v.get("platform").and_then(|s| s.as_str()) == Some("hermes-agent")
        }
        Err(_) => false,
    }
}

fn state(status: &str, pid: Option<u32>, ready: bool) -> HermesState {
    HermesState {
        ok: true,
        status: status.to_owned(),
        pid,
        ready,
    }
}

fn spawn_gateway(app: &App) -> Result<u32, SupervisorError> {
    let run_as = RunAs::for_uid(HERMES_UID);
    let mut cmd = privdrop::contained_command(
        &app.settings.hermes_bin,
        // `--external-supervisor`: we own restarts (Hermes must not spawn a
        // detached replacement we cannot track). No `--replace`: it makes
        // Hermes scan for and kill "orphaned gateways" by process name; we
        // stop the previous gateway ourselves, by PID, before every start.
        &["gateway", "run", "--external-supervisor"],
        child_env(app),
        &app.settings.home_dir,
        run_as,
    );
    let child = cmd.spawn().map_err(|e| {
        SupervisorError::SpawnFailed(format!(
            "{}: {}",
            app.settings.hermes_bin.display(),
            e.kind()
        ))
    })?;
    let pid = child.id();
    // The reaper owns waiting; a stale exit record of a reused PID must go.
    drop(child);
    app.reaper.forget(pid);
    Ok(pid)
}

/// Start Hermes, stopping a running one first (restart with new config).
pub async fn start(app: &App) -> Result<HermesState, SupervisorError> {
    let provisioned = app.provisioned().ok_or(SupervisorError::NotProvisioned)?;
    let mut slot = app.gateway.lock().await;
    if let Some(pid) = slot.pid.take() {
        stop_tree(app, pid).await;
    }
    *slot = GatewaySlot::default();
    app.publish_gateway(&slot);
    let pid = spawn_gateway(app)?;
    *slot = GatewaySlot {
        pid: Some(pid),
        api_key: provisioned.api_key,
        key_fingerprint: Some(provisioned.key_fingerprint),
    };
    app.publish_gateway(&slot);
    Ok(state("starting", Some(pid), false))
}

/// Stop Hermes and everything it started.
pub async fn stop(app: &App) -> HermesState {
    let mut slot = app.gateway.lock().await;
    if let Some(pid) = slot.pid.take() {
        stop_tree(app, pid).await;
    }
    *slot = GatewaySlot::default();
    app.publish_gateway(&slot);
    state("stopped", None, false)
}

/// Current state, probing readiness.
pub async fn ready_state(app: &App) -> HermesState {
    let Some(pid) = app.gateway_snapshot().pid else {
        return state("stopped", None, false);
    };
    if app.reaper.exit_status(pid).is_some() {
        return state("stopped", None, false);
    }
    if is_ready(app, pid).await {
        state("running", Some(pid), true)
    } else {
        state("starting", Some(pid), false)
    }
}

/// The gateway PID when it is alive (not yet reaped).
pub fn live_pid(app: &App) -> Option<u32> {
    app.gateway_snapshot()
        .pid
        .filter(|pid| app.reaper.exit_status(*pid).is_none())
}

async fn is_ready(app: &App, pid: u32) -> bool {
    let port = app.settings.hermes_api_port;
    let Some(inode) = procfs::loopback_listener(port) else {
        return false;
    };
    if !procfs::any_holds_socket(&procfs::tree_and_group(pid), inode) {
        return false;
    }
    match upstream::get(port, "/health", HEALTH_TIMEOUT).await {
        Ok((status, body)) => status == hyper::StatusCode::OK && is_hermes_health(&body),
        Err(_) => false,
    }
}

/// The uid gateway processes run as.
fn gateway_uid() -> u32 {
    match RunAs::for_uid(HERMES_UID) {
        RunAs::User { uid, .. } => uid,
        // SAFETY: getuid cannot fail.
        RunAs::Current => unsafe { libc::getuid() },
    }
}

fn signal_all(root: u32, pids: &HashSet<u32>, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(root) else {
        return;
    };
    // SAFETY: kill with a negative pid signals that process group only; the
    // PIDs come from our own tracking and /proc parent links.
    unsafe {
        libc::kill(-pgid, signal);
        for pid in pids {
            if let Ok(p) = libc::pid_t::try_from(*pid) {
                if p > 1 {
                    libc::kill(p, signal);
                }
            }
        }
    }
}

async fn wait_gone(app: &App, root: u32, pids: &HashSet<u32>, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        app.reaper.reap_all();
        let mut remaining = procfs::still_running(pids);
        remaining.extend(procfs::tree_and_group(root));
        if app.reaper.exit_status(root).is_some() {
            remaining.remove(&root);
        }
        if remaining.is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// SIGTERM the tree, grace period, SIGKILL, reap.
async fn stop_tree(app: &App, root: u32) {
    // Snapshot while the root is alive: once it dies, its children are
    // reparented and can no longer be found through it — except as our own
    // children, which is where orphans of a crashed gateway end up.
    let mut pids = procfs::tree_and_group(root);
    pids.extend(procfs::own_children_with_uid(gateway_uid()));
    if app.reaper.exit_status(root).is_some() && pids.is_empty() {
        return;
    }
    signal_all(root, &pids, libc::SIGTERM);
    if wait_gone(app, root, &pids, STOP_GRACE).await {
        return;
    }
    pids.extend(procfs::tree_and_group(root));
    pids.extend(procfs::own_children_with_uid(gateway_uid()));
    signal_all(root, &pids, libc::SIGKILL);
    let _ = wait_gone(app, root, &pids, KILL_WAIT).await;
}

#[cfg(test)]
mod tests {
    use super::is_hermes_health;

    #[test]
    fn health_body_must_be_hermes() {
        assert!(is_hermes_health(
            br#"{"status":"ok","platform":"hermes-agent","version":"0.19.0"}"#
        ));
        assert!(!is_hermes_health(br#"{"status":"ok"}"#));
        assert!(!is_hermes_health(b"OK"));
        assert!(!is_hermes_health(b""));
        assert!(!is_hermes_health(
            br#"{"status":"starting","platform":"hermes-agent"}"#
        ));
    }
}
