//! Provisioning: turn a validated [`Provision`] into Hermes' files.
//!
//! Writes, under `HERMES_HOME` (mode 0700, owner `hermes` when we are root):
//! `.env` (0600) with the provider variables and the API server settings,
//! the Vertex service-account JSON (0600) when sent, and `config.yaml`
//! (0600). Then reads `config.yaml` back from disk and refuses the
//! provisioning if any hardened value did not land with the right type.
//! The decisions live in [`crate::hermes_config`]; this file only does I/O.

use hermes_protocol::{Provision, Provisioned};

use crate::app::{App, ProvisionedState};
use crate::config::{Secret, HERMES_UID};
use crate::error::SupervisorError;
use crate::fsutil::{self, Owner};
use crate::hermes_config::{self, VERTEX_FILE};
use crate::privdrop;

/// Owner of Hermes' files: `hermes` when we can chown, else ourselves.
pub fn hermes_owner() -> Option<Owner> {
    privdrop::is_root().then_some(Owner {
        uid: HERMES_UID,
        gid: HERMES_UID,
    })
}

fn io_failure(what: &str) -> impl Fn(std::io::Error) -> SupervisorError + '_ {
    move |e| SupervisorError::ProvisionFailed(format!("{what}: {}", e.kind()))
}

/// Validate, write, verify, remember. `terminal_mcp` is the terminal MCP
/// socket when the boundary is up (then Hermes gets the MCP server).
pub fn apply(
    app: &App,
    p: &Provision,
    terminal_mcp: Option<&std::path::Path>,
) -> Result<Provisioned, SupervisorError> {
    hermes_config::validate(p).map_err(|e| SupervisorError::BadRequest(e.to_string()))?;
    let owner = hermes_owner();
    let home = fsutil::ensure_dir_path(&app.settings.home_dir, 0o700, owner)
        .map_err(io_failure("home directory"))?;
    let hermes_home = fsutil::ensure_subdir(&home, ".hermes", 0o700, owner)
        .map_err(io_failure("HERMES_HOME directory"))?;

    let vertex_path = match &p.vertex_sa_json {
        Some(json) => {
            fsutil::write_file_at(&hermes_home, VERTEX_FILE, json.as_bytes(), 0o600, owner)
                .map_err(io_failure("vertex credentials"))?;
            Some(app.settings.hermes_home().join(VERTEX_FILE))
        }
        None => None,
    };
    let env_text =
        hermes_config::render_env(p, app.settings.hermes_api_port, vertex_path.as_deref());
    fsutil::write_file_at(&hermes_home, ".env", env_text.as_bytes(), 0o600, owner)
        .map_err(io_failure(".env"))?;

    let mut config = hermes_config::render_config(p, app.settings.mock_model_url.as_deref());
    if let Some(socket) = terminal_mcp {
        let exe = std::fs::read_link("/proc/self/exe").map_err(io_failure("own executable"))?;
        config = hermes_config::with_terminal_mcp(&config, &exe, socket);
    }
    fsutil::write_file_at(&hermes_home, "config.yaml", config.as_bytes(), 0o600, owner)
        .map_err(io_failure("config.yaml"))?;
    let written = fsutil::read_file_at(&hermes_home, "config.yaml")
        .map_err(io_failure("config.yaml read-back"))?;
    let written = String::from_utf8(written).map_err(|_| {
        SupervisorError::ProvisionFailed("config.yaml read-back is not UTF-8".into())
    })?;
    hermes_config::verify_config(&written, p).map_err(SupervisorError::ProvisionFailed)?;
    let registered = serde_json::from_str::<serde_json::Value>(&written)
        .ok()
        .and_then(|v| {
            v.get("mcp_servers")?
                .get(hermes_config::TERMINAL_MCP_NAME)
                .cloned()
        })
        .is_some();
    if registered != terminal_mcp.is_some() {
        return Err(SupervisorError::ProvisionFailed(
            "terminal MCP registration did not land as intended".into(),
        ));
    }

    let mut provider_vars: Vec<String> = p.provider_env.keys().cloned().collect();
    if vertex_path.is_some() {
        provider_vars.push("GOOGLE_APPLICATION_CREDENTIALS".into());
    }
    provider_vars.sort();
    if let Ok(mut state) = app.provisioned.lock() {
        *state = Some(ProvisionedState {
            api_key: Secret::new(p.api_server_key.as_bytes().to_vec()),
            key_fingerprint: p.key_fingerprint.clone(),
        });
    }
    Ok(Provisioned {
        ok: true,
        key_fingerprint: p.key_fingerprint.clone(),
        provider_vars,
    })
}
