//! The virtual terminal (DESIGN "The virtual terminal", SPEC §8): commands
//! and file operations run as uid 10002 under four OS-enforced layers —
//! identity, environment, network, filesystem — established and
//! self-tested once per boot ([`boundary`]), recorded per layer, and
//! required for every operation (503 `terminal_unavailable` otherwise).
//!
//! Modules, in the order a request meets them: [`paths`] (pure `/workspace`
//! containment), [`ops`] and [`git`] (validate, run, answer), [`run`]
//! (spawn, capture, timeout), [`sandbox`] (the child between fork and
//! exec), [`fsrules`] (Landlock), [`netns`] and [`guard`] (network),
//! [`env`], [`helper`] and [`probe`] (the re-executed supervisor that does
//! file work and the self-test as the terminal user).

pub mod boundary;
pub mod env;
pub mod fsrules;
pub mod git;
pub mod guard;
pub mod helper;
pub mod mcp_socket;
pub mod mcp_stdio;
pub mod mcp_text;
pub mod netns;
pub mod ops;
pub mod paths;
pub mod ports;
pub mod probe;
pub mod run;
pub mod sandbox;
pub mod seccomp;
pub mod workspace;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use hermes_egress::Allowlist;
use hermes_protocol::terminal::{
    exposable_port, ExposePortRequest, PortExposed, TerminalStatus, LAYERS, LAYER_ESTABLISHED,
    TERMINAL_UID,
};

use crate::app::App;
use crate::error::SupervisorError;
use boundary::{Boundary, Ready};

/// Terminal processes (commands, file helpers) running at once; more wait.
pub const MAX_CONCURRENT: usize = 16;

/// Per-boot terminal state held by [`App`].
pub struct TerminalState {
    /// Bounds concurrent terminal processes (memory and PIDs of a small
    /// container are finite; RLIMIT_NPROC bounds each command's own tree).
    pub slots: tokio::sync::Semaphore,
    boundary: tokio::sync::OnceCell<Arc<Boundary>>,
    /// The bound control port (the self-test must not reach it).
    pub control_port: OnceLock<u16>,
    exposed: Mutex<BTreeSet<u16>>,
    /// The MCP Unix socket, once started (only when every layer is up).
    mcp_socket: Mutex<Option<std::path::PathBuf>>,
}

impl Default for TerminalState {
    fn default() -> Self {
        Self {
            slots: tokio::sync::Semaphore::new(MAX_CONCURRENT),
            boundary: tokio::sync::OnceCell::new(),
            control_port: OnceLock::new(),
            exposed: Mutex::new(BTreeSet::new()),
            mcp_socket: Mutex::new(None),
        }
    }
}

/// The MCP socket path when the boundary is up (starting the socket on
/// first use); `None` when the terminal is unavailable — then Hermes gets
/// no terminal MCP server at all.
pub async fn mcp_socket(app: &Arc<App>) -> Option<std::path::PathBuf> {
    let b = boundary(app).await;
    ready(app, &b).ok()?;
    let mut slot = app.terminal.mcp_socket.lock().ok()?;
    if let Some(path) = slot.as_ref() {
        return Some(path.clone());
    }
    match mcp_socket::start(app) {
        Ok(path) => {
            *slot = Some(path.clone());
            Some(path)
        }
        Err(e) => {
            eprintln!(
                "hermes-supervisor: terminal MCP socket not started: {}",
                e.kind()
            );
            None
        }
    }
}

/// The boundary of this boot, established on first use (the server starts
/// that right after binding the control port).
pub async fn boundary(app: &App) -> Arc<Boundary> {
    let state = &app.terminal;
    Arc::clone(
        state
            .boundary
            .get_or_init(|| async {
                let port = state.control_port.get().copied().unwrap_or(0);
                let b = boundary::establish(app, port).await;
                for (layer, status) in &b.layers {
                    eprintln!("hermes-supervisor: terminal layer {layer}: {status}");
                }
                Arc::new(b)
            })
            .await,
    )
}

/// Layer statuses now: the recorded ones, with the network layer marked
/// down if the guard has since exited.
pub fn current_layers(app: &App, b: &Boundary) -> BTreeMap<String, String> {
    let mut layers = b.layers.clone();
    if let Some(ready) = &b.ready {
        if let Some(code) = app.reaper.exit_status(ready.guard_pid) {
            layers.insert(
                "network".into(),
                format!("not_established: the egress guard exited (status {code})"),
            );
        }
    }
    layers
}

/// The ready boundary, or 503 naming the first layer that is not up.
pub fn ready<'a>(app: &App, b: &'a Boundary) -> Result<&'a Ready, SupervisorError> {
    let layers = current_layers(app, b);
    for layer in LAYERS {
        match layers.get(layer) {
            Some(status) if status == LAYER_ESTABLISHED => {}
            Some(status) => {
                return Err(SupervisorError::TerminalUnavailable(format!(
                    "layer {layer}: {status}"
                )))
            }
            None => {
                return Err(SupervisorError::TerminalUnavailable(format!(
                    "layer {layer}: not recorded"
                )))
            }
        }
    }
    b.ready
        .as_ref()
        .ok_or_else(|| SupervisorError::TerminalUnavailable("boundary not established".into()))
}

/// Layer map for boot-check (does not wait for establishment).
pub fn boot_check_layers(app: &App) -> BTreeMap<String, String> {
    match app.terminal.boundary.get() {
        Some(b) => current_layers(app, b),
        None => LAYERS
            .iter()
            .map(|l| {
                (
                    (*l).to_owned(),
                    "not_established: self-test in progress".to_owned(),
                )
            })
            .collect(),
    }
}

pub async fn status(app: &App) -> TerminalStatus {
    let b = boundary(app).await;
    let layers = current_layers(app, &b);
    let available = layers.values().all(|v| v == LAYER_ESTABLISHED) && b.ready.is_some();
    let (allowlist, _) = Allowlist::from_env_value(app.settings.egress_allowlist.as_deref());
    TerminalStatus {
        ok: true,
        available,
        uid: TERMINAL_UID,
        layers,
        allowlist: allowlist
            .entries()
            .iter()
            .map(ToString::to_string)
            .collect(),
        boot_id: app.settings.boot_id.clone(),
        exposed_ports: app
            .terminal
            .exposed
            .lock()
            .map(|p| p.iter().copied().collect())
            .unwrap_or_default(),
    }
}

/// Was `port` exposed in this boot?
pub fn is_exposed(app: &App, port: u16) -> bool {
    app.terminal
        .exposed
        .lock()
        .map(|p| p.contains(&port))
        .unwrap_or(false)
}

pub async fn expose_port(
    app: &App,
    req: &ExposePortRequest,
) -> Result<PortExposed, SupervisorError> {
    let b = boundary(app).await;
    ready(app, &b)?;
    if !exposable_port(req.port) {
        return Err(SupervisorError::BadRequest(
            "port must be 1024..65535 and not reserved by the platform".into(),
        ));
    }
    if let Ok(mut ports) = app.terminal.exposed.lock() {
        ports.insert(req.port);
    }
    Ok(PortExposed {
        ok: true,
        port: req.port,
    })
}
