//! Establishing the four layers once per boot, self-testing them and
//! recording the result per layer.
//!
//! Order: directories (workspace, private tmp, Hermes home, Landlock
//! canary) → terminal network namespace with the guard's listener → the
//! guard process (uid 10003) → the Landlock ruleset → a probe process run
//! exactly like a command → [`super::probe::evaluate`]. Any step that fails
//! marks the layers that depend on it `not_established: <why>`; terminal
//! operations are refused unless all four are `established` (and the guard
//! is still alive). There is no degraded mode.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_protocol::ports::EGRESS_GUARD_PORT;
use hermes_protocol::terminal::{EGRESS_UID, LAYERS, LAYER_ESTABLISHED, TERMINAL_UID};

use super::helper::{HelperReply, HelperRequest};
use super::probe::{self, Expected, ProbeRequest};
use super::sandbox::{self, ChildSandbox};
use super::{env, fsrules, guard, netns, seccomp};
use crate::app::App;
use crate::config::HERMES_UID;
use crate::fsutil::{self, Owner};
use crate::privdrop;

/// Everything a terminal spawn needs; exists only when every layer is up.
pub struct Ready {
    /// Kept open: the namespace lives as long as this descriptor.
    _netns: File,
    _guard_listener: std::net::TcpListener,
    _ruleset: OwnedFd,
    pub guard_pid: u32,
    pub exe: PathBuf,
    pub workspace: PathBuf,
    sandbox_template: ChildSandbox,
}

impl Ready {
    /// The terminal network namespace (for connecting to exposed ports).
    pub fn netns_fd(&self) -> &File {
        &self._netns
    }

    /// The child sandbox for a process whose working directory is `cwd`.
    pub fn sandbox(&self, cwd: &Path) -> Result<ChildSandbox, String> {
        let mut s = self.sandbox_template.clone();
        s.cwd = cstring(cwd)?;
        Ok(s)
    }
}

/// The boundary of this boot.
pub struct Boundary {
    pub layers: BTreeMap<String, String>,
    pub ready: Option<Ready>,
}

fn cstring(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| "path contains NUL".to_owned())
}

fn all_layers(reason: &str) -> BTreeMap<String, String> {
    LAYERS
        .iter()
        .map(|l| ((*l).to_owned(), format!("not_established: {reason}")))
        .collect()
}

fn chown_chmod(path: &Path, uid: u32, mode: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(uid))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Directories the layers rely on; returns the private tmp.
fn prepare_dirs(app: &App) -> std::io::Result<PathBuf> {
    let s = &app.settings;
    std::fs::create_dir_all(&s.workspace_dir)?;
    chown_chmod(&s.workspace_dir, TERMINAL_UID, 0o700)?;
    let state = fsutil::ensure_dir_path(&s.state_dir, 0o700, None)?;
    let tmp = s.state_dir.join("terminal-tmp");
    fsutil::ensure_subdir(
        &state,
        "terminal-tmp",
        0o700,
        Some(Owner {
            uid: TERMINAL_UID,
            gid: TERMINAL_UID,
        }),
    )?;
    // The credential directory exists (0700, hermes) before the first
    // provisioning, so the self-test checks real permissions.
    let hermes = Some(Owner {
        uid: HERMES_UID,
        gid: HERMES_UID,
    });
    let home = fsutil::ensure_dir_path(&s.home_dir, 0o700, hermes)?;
    fsutil::ensure_subdir(&home, ".hermes", 0o700, hermes)?;
    std::fs::create_dir_all(&s.landlock_canary_dir)?;
    std::fs::set_permissions(
        &s.landlock_canary_dir,
        std::fs::Permissions::from_mode(0o1777),
    )?;
    Ok(tmp)
}

/// Establish and self-test the boundary. `control_port` is the bound
/// control API port (the probe must not reach it).
pub async fn establish(app: &App, control_port: u16) -> Boundary {
    if !privdrop::is_root() {
        return Boundary {
            layers: all_layers("the supervisor is not root (cannot switch to the terminal uid)"),
            ready: None,
        };
    }
    let failed = |reason: String| Boundary {
        layers: all_layers(&reason),
        ready: None,
    };
    let private_tmp = match prepare_dirs(app) {
        Ok(t) => t,
        Err(e) => return failed(format!("preparing directories: {e}")),
    };
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => return failed(format!("own executable: {e}")),
    };
    let guard_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, EGRESS_GUARD_PORT));
    let ns = match netns::create(guard_addr) {
        Ok(ns) => ns,
        Err(e) => {
            let mut layers = all_layers("network layer missing");
            layers.insert(
                "network".into(),
                format!("not_established: terminal network namespace: {e}"),
            );
            return Boundary {
                layers,
                ready: None,
            };
        }
    };
    let ruleset = match fsrules::build(&app.settings.workspace_dir, &private_tmp, &exe) {
        Ok(r) => r,
        Err(e) => {
            let mut layers = all_layers("filesystem layer missing");
            layers.insert("filesystem".into(), format!("not_established: {e}"));
            return Boundary {
                layers,
                ready: None,
            };
        }
    };
    let seccomp = match seccomp::build() {
        Ok(p) => std::sync::Arc::new(p),
        Err(e) => {
            let mut layers = all_layers("identity layer missing");
            layers.insert("identity".into(), format!("not_established: {e}"));
            return Boundary {
                layers,
                ready: None,
            };
        }
    };
    let guard_pid = match guard::spawn(
        &exe,
        &ns.guard_listener,
        EGRESS_UID,
        app.settings.egress_allowlist.as_deref(),
        app.settings.egress_resolve.as_deref(),
    ) {
        Ok(pid) => pid,
        Err(e) => {
            let mut layers = all_layers("network layer missing");
            layers.insert(
                "network".into(),
                format!("not_established: egress guard: {e}"),
            );
            return Boundary {
                layers,
                ready: None,
            };
        }
    };
    app.reaper.forget(guard_pid);
    let template = ChildSandbox {
        netns_fd: ns.ns.as_raw_fd(),
        tmp_bind: match (cstring(&private_tmp), cstring(Path::new("/tmp"))) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return failed(e),
        },
        ruleset_fd: ruleset.as_raw_fd(),
        uid: TERMINAL_UID,
        gid: TERMINAL_UID,
        limits: sandbox::default_limits(app.settings.terminal_max_file_bytes),
        seccomp,
        cwd: CString::default(),
    };
    let ready = Ready {
        _netns: ns.ns,
        _guard_listener: ns.guard_listener,
        _ruleset: ruleset,
        guard_pid,
        exe,
        workspace: app.settings.workspace_dir.clone(),
        sandbox_template: template,
    };
    let layers = self_test(app, &ready, control_port).await;
    let all_up = layers.values().all(|v| v == LAYER_ESTABLISHED);
    Boundary {
        layers,
        ready: all_up.then_some(ready),
    }
}

async fn self_test(app: &App, ready: &Ready, control_port: u16) -> BTreeMap<String, String> {
    let s = &app.settings;
    let mut forbidden = Vec::new();
    for port in [control_port, s.hermes_api_port] {
        forbidden.push(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
        forbidden.push(SocketAddr::from((Ipv6Addr::LOCALHOST, port)));
        forbidden.push(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port)));
    }
    let request = HelperRequest::Probe(ProbeRequest {
        forbidden,
        guard: SocketAddr::from((Ipv4Addr::LOCALHOST, EGRESS_GUARD_PORT)),
        hermes_home: s.hermes_home(),
        canary_dir: s.landlock_canary_dir.clone(),
        workspace: s.workspace_dir.clone(),
    });
    match super::ops::run_helper(app, ready, &request, &[], Duration::from_secs(30)).await {
        Ok(HelperReply::Probe(facts)) => probe::evaluate(
            &facts,
            &Expected {
                uid: TERMINAL_UID,
                env: env::command_env(&s.workspace_dir)
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
                nproc_limit: sandbox::NPROC_LIMIT,
            },
        ),
        Ok(_) => all_layers("self-test probe gave an unexpected answer"),
        Err(e) => all_layers(&format!("self-test probe failed: {e}")),
    }
}
