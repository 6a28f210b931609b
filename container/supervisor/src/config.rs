//! Start-up configuration read from the environment, once, before any thread
//! or child exists.
//!
//! The per-boot `CONTROL_TOKEN` is taken out of the process environment here
//! (`std::env::remove_var` is only sound while the process is single-threaded,
//! which is why this runs before the tokio runtime is built) so no child —
//! Hermes, its MCP servers, `hermes --version` — can inherit it. All other
//! settings are non-secret paths and ports with production defaults and
//! overrides for devhost and tests.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use hermes_protocol::ports::{self, env};

/// uid/gid of the `hermes` user in the image.
pub const HERMES_UID: u32 = 10001;

/// A secret byte string whose `Debug` never shows the value.
#[derive(Clone, Default)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Everything the supervisor learns from its environment at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub control_token: Secret,
    pub boot_id: String,
    pub agent_id: String,
    pub control_addr: SocketAddr,
    pub hermes_api_port: u16,
    /// Home of the `hermes` user; Hermes' state is `<home>/.hermes`.
    pub home_dir: PathBuf,
    pub hermes_bin: PathBuf,
    pub requirements: PathBuf,
    pub state_dir: PathBuf,
    /// `HERMES_MOCK_MODEL_URL`: model provider when no key is provisioned.
    pub mock_model_url: Option<String>,
    /// `HERMES_WORKSPACE_DIR` (default `/workspace`): the terminal's files.
    pub workspace_dir: PathBuf,
    /// `EGRESS_ALLOWED_HOSTS` as set (unset = default list, set but empty
    /// = deny all), handed to the egress guard unchanged.
    pub egress_allowlist: Option<String>,
    /// `HERMES_TERMINAL_MAX_FILE_BYTES` (default 1 GiB): RLIMIT_FSIZE of
    /// terminal processes.
    pub terminal_max_file_bytes: u64,
    /// `HERMES_EGRESS_RESOLVE` (tests, devhost): `host=ip,...` fixed
    /// answers for the guard's resolver; still classified like DNS answers,
    /// so it cannot open a path to a private address.
    pub egress_resolve: Option<String>,
    /// `HERMES_LANDLOCK_CANARY_DIR` (default
    /// `/var/tmp/hermes-edge-landlock-canary`): a world-writable directory
    /// outside the workspace that the self-test must fail to write into.
    pub landlock_canary_dir: PathBuf,
    /// `HERMES_WORKSPACE_CLI_ENABLED` is exactly `true`: the Google
    /// Workspace route answers, and `egress_allowlist` above already
    /// includes the Google API hosts (container-wide).
    pub workspace_cli_enabled: bool,
    /// `HERMES_GWS_BIN` (default `/usr/local/bin/gws`).
    pub gws_bin: PathBuf,
}

/// Why the supervisor refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is not set or empty")]
    Missing(&'static str),
    #[error("{0} is not a valid {1}")]
    Invalid(&'static str, &'static str),
}

/// Overwrite the bytes of `name`'s value in place. `remove_var` only drops
/// the pointer from `environ`; the string itself stays in the initial
/// environment block that `/proc/<pid>/environ` shows, so it is zeroed here.
/// Must run while the process is single-threaded.
fn scrub_initial_env_value(name: &str) {
    let Ok(c_name) = std::ffi::CString::new(name) else {
        return;
    };
    // SAFETY: single-threaded (documented precondition), so no other thread
    // reads or changes the environment; getenv returns a pointer to the
    // NUL-terminated value inside the writable environment block, and we
    // write only within its length.
    unsafe {
        let value = libc::getenv(c_name.as_ptr());
        if value.is_null() {
            return;
        }
        let len = libc::strlen(value);
        for i in 0..len {
            std::ptr::write_volatile(value.add(i), 0);
        }
    }
}

/// An absolute, already-normalised path (the workspace check compares
/// components, so `..` or a relative root would defeat it).
fn absolute(name: &'static str, p: PathBuf) -> Result<PathBuf, ConfigError> {
    match crate::terminal::paths::normalise(&p) {
        Ok(n) if p.is_absolute() && n == p => Ok(n),
        Ok(_) | Err(_) => Err(ConfigError::Invalid(name, "normalised absolute path")),
    }
}

impl Settings {
    /// Read the environment and remove `CONTROL_TOKEN` from it. Must be called
    /// while the process has exactly one thread.
    pub fn from_env() -> Result<Self, ConfigError> {
        let token = std::env::var_os(env::CONTROL_TOKEN);
        // Wiped and removed before validation, so even a refused start
        // leaves no copy.
        scrub_initial_env_value(env::CONTROL_TOKEN);
        std::env::remove_var(env::CONTROL_TOKEN);
        let control_token = token
            .map(|t| Secret::new(t.into_encoded_bytes()))
            .filter(|t| !t.is_empty())
            .ok_or(ConfigError::Missing(env::CONTROL_TOKEN))?;
        Self::from_lookup(control_token, |name| std::env::var(name).ok())
    }

    /// Pure part of [`Settings::from_env`]: everything but the token, from
    /// any lookup function (tests pass a map).
    pub fn from_lookup(
        control_token: Secret,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let port = |name: &'static str, default: u16| -> Result<u16, ConfigError> {
            match get(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u16>()
                    .map_err(|_| ConfigError::Invalid(name, "port")),
            }
        };
        let host: IpAddr = match get(env::CONTROL_HOST) {
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| ConfigError::Invalid(env::CONTROL_HOST, "IP address"))?,
        };
        let path = |name: &str, default: &str| {
            PathBuf::from(get(name).unwrap_or_else(|| default.to_owned()))
        };
        let workspace_cli_enabled =
            lookup(hermes_protocol::workspace::ENABLED_ENV).as_deref() == Some("true");
        let configured_allowlist = lookup(hermes_egress::allowlist::ENV_VAR);
        let egress_allowlist = if workspace_cli_enabled {
            Some(crate::terminal::workspace::widen_allowlist(
                configured_allowlist.as_deref(),
            ))
        } else {
            configured_allowlist
        };
        Ok(Self {
            control_token,
            boot_id: get(env::BOOT_ID).unwrap_or_default(),
            agent_id: get(env::AGENT_ID).unwrap_or_default(),
            control_addr: SocketAddr::new(host, port(env::CONTROL_PORT, ports::CONTROL_PORT)?),
            hermes_api_port: match port(env::HERMES_API_PORT, ports::HERMES_API_PORT)? {
                0 => return Err(ConfigError::Invalid(env::HERMES_API_PORT, "non-zero port")),
                p => p,
            },
            home_dir: path(env::HOME_DIR, "/home/hermes"),
            hermes_bin: path(env::HERMES_BIN, "/opt/hermes/venv/bin/hermes"),
            requirements: path(env::REQUIREMENTS, "/opt/hermes/requirements.txt"),
            state_dir: path(env::STATE_DIR, "/var/lib/hermes-edge"),
            mock_model_url: get(env::MOCK_MODEL_URL),
            workspace_dir: absolute(env::WORKSPACE_DIR, path(env::WORKSPACE_DIR, "/workspace"))?,
            egress_allowlist,
            workspace_cli_enabled,
            gws_bin: path(
                hermes_protocol::workspace::GWS_BIN_ENV,
                hermes_protocol::workspace::GWS_BIN_DEFAULT,
            ),
            egress_resolve: get(env::EGRESS_RESOLVE),
            terminal_max_file_bytes: match get(env::TERMINAL_MAX_FILE_BYTES) {
                None => 1 << 30,
                Some(v) => {
                    v.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or(ConfigError::Invalid(
                            env::TERMINAL_MAX_FILE_BYTES,
                            "byte count",
                        ))?
                }
            },
            landlock_canary_dir: path(
                env::LANDLOCK_CANARY_DIR,
                "/var/tmp/hermes-edge-landlock-canary",
            ),
        })
    }

    /// `HERMES_HOME` of the gateway.
    pub fn hermes_home(&self) -> PathBuf {
        self.home_dir.join(".hermes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(Secret::new(b"t".to_vec()), |k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_image_layout() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.control_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(s.hermes_api_port, 8642);
        assert_eq!(s.hermes_home(), PathBuf::from("/home/hermes/.hermes"));
        assert_eq!(s.hermes_bin, PathBuf::from("/opt/hermes/venv/bin/hermes"));
        assert_eq!(
            s.requirements,
            PathBuf::from("/opt/hermes/requirements.txt")
        );
        assert!(s.mock_model_url.is_none());
    }

    #[test]
    fn overrides_and_invalid_values() {
        let s = settings(&[
            ("HERMES_CONTROL_HOST", "127.0.0.1"),
            ("HERMES_CONTROL_PORT", "0"),
        ])
        .unwrap();
        assert_eq!(s.control_addr.to_string(), "127.0.0.1:0");
        assert!(settings(&[("HERMES_CONTROL_PORT", "80x")]).is_err());
        assert!(settings(&[("HERMES_API_PORT", "0")]).is_err());
        assert!(settings(&[("HERMES_CONTROL_HOST", "localhost")]).is_err());
    }

    #[test]
    fn workspace_cli_is_on_only_for_exactly_true() {
        for (value, on) in [
            (Some("true"), true),
            (Some("TRUE"), false),
            (Some(" true"), false),
            (Some("1"), false),
            (Some("yes"), false),
            (Some(""), false),
            (None, false),
        ] {
            let mut pairs = vec![("EGRESS_ALLOWED_HOSTS", "github.com")];
            if let Some(v) = value {
                pairs.push(("HERMES_WORKSPACE_CLI_ENABLED", v));
            }
            let s = settings(&pairs).unwrap();
            assert_eq!(s.workspace_cli_enabled, on, "{value:?}");
            let list = s.egress_allowlist.unwrap();
            assert_eq!(list.contains("=gmail.googleapis.com"), on, "{value:?}");
            assert!(list.starts_with("github.com"));
        }
        let s = settings(&[]).unwrap();
        assert_eq!(s.gws_bin, PathBuf::from("/usr/local/bin/gws"));
        assert!(s.egress_allowlist.is_none());
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret::new(b"hunter2".to_vec());
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
