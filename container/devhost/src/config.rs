//! devhost's configuration: command-line flags first, then environment
//! variables, then defaults. Parsing is pure (`from_sources`), so it is
//! tested without touching the real environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// How containers are isolated from each other and from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// bubblewrap: own mount, PID, IPC and UTS namespaces (needs root).
    Namespaces,
    /// A plain process group with per-container directories passed through
    /// the environment. Two containers share the filesystem view.
    Reduced,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::Reduced => "reduced",
        }
    }
}

/// What the user asked for with `--isolation` / `DEVHOST_ISOLATION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationRequest {
    /// Namespaces when root and bwrap is installed, reduced otherwise (loudly).
    Auto,
    Namespaces,
    Reduced,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub mock_listen: SocketAddr,
    pub state_dir: PathBuf,
    pub supervisor_bin: PathBuf,
    pub isolation: IsolationRequest,
    pub bwrap: PathBuf,
    /// Host paths bound read-only into every container (besides the ones
    /// derived from the supervisor and Hermes paths).
    pub extra_ro_binds: Vec<PathBuf>,
    /// Passed to containers as `HERMES_BIN`, `HERMES_REQUIREMENTS`.
    pub hermes_bin: PathBuf,
    pub hermes_requirements: PathBuf,
    /// `DEVHOST_UID_RANGES` (default on): each namespaced container in its
    /// own user namespace with its own host uid range.
    pub uid_ranges: bool,
}

pub const USAGE: &str = "\
hermes-devhost: local stand-in for Cloudflare's container runtime

  --listen ADDR          API address (env DEVHOST_LISTEN, default 127.0.0.1:8788; loopback only)
  --mock-listen ADDR     mock model address (env DEVHOST_MOCK_LISTEN, default 127.0.0.1:0)
  --state-dir DIR        per-container files (env DEVHOST_STATE_DIR)
  --supervisor-bin PATH  env HERMES_SUPERVISOR_BIN, default: hermes-supervisor next to devhost
  --isolation MODE       auto|namespaces|reduced (env DEVHOST_ISOLATION, default auto)
env: DEVHOST_BWRAP (bwrap path), DEVHOST_RO_BINDS (colon-separated host paths),
     DEVHOST_UID_RANGES=on|off (own user namespace and uid range per container, default on),
     HERMES_BIN, HERMES_REQUIREMENTS (paths handed to every container)
";

/// Where this crate's repository is (the defaults point into it).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Lexically removes `..` segments so paths print and bind cleanly.
fn tidy(path: PathBuf) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Builds the configuration from argv (without the program name), a
/// variable lookup, whether we are root and where our executable lives.
pub fn from_sources(
    args: &[String],
    var: &dyn Fn(&str) -> Option<String>,
    root: bool,
    exe_dir: &Path,
) -> Result<Config, String> {
    let mut flags = std::collections::HashMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--listen" | "--mock-listen" | "--state-dir" | "--supervisor-bin" | "--isolation" => {
                let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
                flags.insert(flag.trim_start_matches("--").to_owned(), value.clone());
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let pick = |flag: &str, env: &str| {
        flags
            .get(flag)
            .cloned()
            .or_else(|| var(env))
            .filter(|v| !v.is_empty())
    };

    let listen: SocketAddr = pick("listen", "DEVHOST_LISTEN")
        .unwrap_or_else(|| "127.0.0.1:8788".into())
        .parse()
        .map_err(|e| format!("bad listen address: {e}"))?;
    let mock_listen: SocketAddr = pick("mock-listen", "DEVHOST_MOCK_LISTEN")
        .unwrap_or_else(|| "127.0.0.1:0".into())
        .parse()
        .map_err(|e| format!("bad mock listen address: {e}"))?;
    // The API has no authentication: anyone who reaches it can run
    // processes as this user. Loopback only.
    for addr in [listen, mock_listen] {
        if !addr.ip().is_loopback() {
            return Err(format!("refusing to listen on non-loopback address {addr}"));
        }
    }
    let state_dir = pick("state-dir", "DEVHOST_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            if root {
                PathBuf::from("/var/lib/hermes-devhost")
            } else {
                std::env::temp_dir().join(format!(
                    "hermes-devhost-{}",
                    var("USER").unwrap_or_default()
                ))
            }
        });
    if !state_dir.is_absolute() {
        return Err("state dir must be an absolute path".into());
    }
    let isolation = match pick("isolation", "DEVHOST_ISOLATION").as_deref() {
        None | Some("auto") => IsolationRequest::Auto,
        Some("namespaces") => IsolationRequest::Namespaces,
        Some("reduced") => IsolationRequest::Reduced,
        Some(other) => return Err(format!("unknown isolation mode {other:?}")),
    };
    let supervisor_bin = pick("supervisor-bin", "HERMES_SUPERVISOR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| exe_dir.join("hermes-supervisor"));
    let bwrap = var("DEVHOST_BWRAP")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/bwrap".into());
    let extra_ro_binds = var("DEVHOST_RO_BINDS")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect::<Vec<_>>();
    if let Some(bad) = extra_ro_binds.iter().find(|p| !p.is_absolute()) {
        return Err(format!(
            "DEVHOST_RO_BINDS entries must be absolute: {}",
            bad.display()
        ));
    }
    let hermes_bin = var(hermes_protocol::ports::env::HERMES_BIN)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| tidy(repo_root().join(".venv/hermes/bin/hermes")));
    let hermes_requirements = var(hermes_protocol::ports::env::REQUIREMENTS)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| tidy(repo_root().join("container/requirements.txt")));
    let uid_ranges = match var("DEVHOST_UID_RANGES").as_deref().map(str::trim) {
        None | Some("") | Some("on") | Some("1") | Some("true") => true,
        Some("off") | Some("0") | Some("false") => false,
        Some(other) => {
            return Err(format!(
                "DEVHOST_UID_RANGES must be on or off, got {other:?}"
            ))
        }
    };
    Ok(Config {
        listen,
        mock_listen,
        state_dir,
        supervisor_bin,
        isolation,
        bwrap,
        extra_ro_binds,
        hermes_bin,
        hermes_requirements,
        uid_ranges,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn cfg(args: &[&str], vars: &[(&str, &str)], root: bool) -> Result<Config, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        from_sources(&args, &lookup, root, Path::new("/opt/bin"))
    }

    #[test]
    fn defaults() {
        let c = cfg(&[], &[], true).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8788");
        assert_eq!(c.state_dir, PathBuf::from("/var/lib/hermes-devhost"));
        assert_eq!(
            c.supervisor_bin,
            PathBuf::from("/opt/bin/hermes-supervisor")
        );
        assert_eq!(c.isolation, IsolationRequest::Auto);
        assert!(c.hermes_bin.ends_with(".venv/hermes/bin/hermes"));
        assert!(!c.hermes_bin.to_string_lossy().contains(".."));
        assert!(c.uid_ranges);
        assert!(
            !cfg(&[], &[("DEVHOST_UID_RANGES", "off")], true)
                .unwrap()
                .uid_ranges
        );
        assert!(cfg(&[], &[("DEVHOST_UID_RANGES", "maybe")], true).is_err());
    }

    #[test]
    fn flags_beat_env() {
        let c = cfg(
            &["--listen", "127.0.0.1:9000"],
            &[("DEVHOST_LISTEN", "127.0.0.1:9001")],
            true,
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9000);
        let c = cfg(&[], &[("DEVHOST_LISTEN", "127.0.0.1:9001")], true).unwrap();
        assert_eq!(c.listen.port(), 9001);
    }

    #[test]
    fn refuses_public_addresses_and_garbage() {
        assert!(cfg(&["--listen", "0.0.0.0:8788"], &[], true).is_err());
        assert!(cfg(&["--mock-listen", "10.0.0.1:1"], &[], true).is_err());
        assert!(cfg(&["--isolation", "weak"], &[], true).is_err());
        assert!(cfg(&["--state-dir", "rel"], &[], true).is_err());
        assert!(cfg(&["--bogus"], &[], true).is_err());
        assert!(cfg(&[], &[("DEVHOST_RO_BINDS", "/a:rel")], true).is_err());
    }
}
