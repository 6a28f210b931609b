//! Start-up and shutdown: decide the isolation mode, bind the API and the
//! mock model, serve until SIGTERM/SIGINT, then destroy every container.

use crate::api::Api;
use crate::config::{Config, Isolation, IsolationRequest};
use crate::http;
use crate::mockllm::MockModel;
use crate::procfs;
use crate::runtime::{Runtime, RuntimeSettings};
use crate::sandbox::{self, SYSTEM_DIRS};
use hermes_protocol::ports::env as penv;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Picks the isolation mode; reduced isolation is announced loudly.
pub fn decide_isolation(
    req: IsolationRequest,
    root: bool,
    bwrap_present: bool,
) -> Result<Isolation, String> {
    match (req, root, bwrap_present) {
        (IsolationRequest::Reduced, _, _) => Ok(Isolation::Reduced),
        (IsolationRequest::Namespaces | IsolationRequest::Auto, true, true) => {
            Ok(Isolation::Namespaces)
        }
        (IsolationRequest::Namespaces, false, _) => Err("--isolation namespaces needs root".into()),
        (IsolationRequest::Namespaces, true, false) => {
            Err("--isolation namespaces needs bubblewrap (apt-get install bubblewrap)".into())
        }
        (IsolationRequest::Auto, _, _) => Ok(Isolation::Reduced),
    }
}

fn warn_reduced(requested: IsolationRequest, root: bool, bwrap: &Path) {
    let why = if requested == IsolationRequest::Reduced {
        "requested with --isolation reduced".to_owned()
    } else if !root {
        "not running as root".to_owned()
    } else {
        format!("{} not found (apt-get install bubblewrap)", bwrap.display())
    };
    crate::log!("################################################################");
    crate::log!("# hermes-devhost: REDUCED ISOLATION ({why}).");
    crate::log!("# Containers share one filesystem view and one PID namespace;");
    crate::log!("# /home/hermes, /workspace and /tmp are NOT separate, and a");
    crate::log!("# process that leaves its process group survives destroy.");
    crate::log!("################################################################");
}

/// Host paths every container needs read-only at the same path: the
/// supervisor, the Hermes venv with the interpreter it links to, the
/// requirements file, and whatever the user added.
pub fn ro_binds(config: &Config) -> Vec<PathBuf> {
    let mut binds = vec![config.supervisor_bin.clone()];
    // HERMES_BIN is <venv>/bin/hermes.
    if let Some(venv) = config.hermes_bin.parent().and_then(Path::parent) {
        if venv.is_dir() {
            binds.push(venv.to_path_buf());
            // A venv's python is a symlink to the base interpreter, which
            // may live in a tmpfs-covered place such as /root/.pyenv.
            if let Ok(real) = std::fs::canonicalize(venv.join("bin/python")) {
                if let Some(prefix) = real.parent().and_then(Path::parent) {
                    binds.push(prefix.to_path_buf());
                }
            }
        }
    }
    if config.hermes_requirements.is_file() {
        binds.push(config.hermes_requirements.clone());
    }
    binds.extend(config.extra_ro_binds.iter().cloned());
    binds.retain(|b| {
        let in_system = SYSTEM_DIRS
            .iter()
            .any(|d| b.starts_with(Path::new("/").join(d)));
        b.is_absolute() && !in_system && b.exists()
    });
    binds.sort();
    binds.dedup();
    binds
}

/// Paths among `binds` that a container with its own uid range could not
/// read: the path or one of its parents is not readable/searchable by
/// "others" on the host.
pub fn unreadable_for_others(binds: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0)
    };
    binds
        .iter()
        .filter(|b| {
            let own = if b.is_dir() { 0o005 } else { 0o004 };
            mode(b) & own != own || b.ancestors().skip(1).any(|a| mode(a) & 0o001 == 0)
        })
        .cloned()
        .collect()
}

fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Runs devhost until SIGTERM/SIGINT.
pub async fn run(config: Config) -> Result<(), String> {
    let root = procfs::is_root();
    let isolation = decide_isolation(config.isolation, root, config.bwrap.is_file())?;
    if isolation == Isolation::Reduced {
        warn_reduced(config.isolation, root, &config.bwrap);
    }
    if !config.supervisor_bin.is_file() {
        crate::log!(
            "devhost: WARNING supervisor binary {} does not exist yet; starts will fail until it does",
            config.supervisor_bin.display()
        );
    }
    if !config.hermes_bin.is_file() {
        crate::log!(
            "devhost: note: HERMES_BIN {} does not exist (run scripts/setup-hermes.sh)",
            config.hermes_bin.display()
        );
    }
    if isolation == Isolation::Namespaces {
        for mount_point in sandbox::host_mount_points() {
            // An empty, root-only directory: the only change devhost makes
            // outside its state dir, needed because bwrap cannot create a
            // mount point inside a read-only bind.
            if !Path::new(mount_point).exists() {
                create_private_dir(Path::new(mount_point))
                    .map_err(|e| format!("cannot create mount point {mount_point}: {e}"))?;
                crate::log!("devhost: created empty mount point {mount_point} on the host");
            }
        }
    }
    std::fs::create_dir_all(&config.state_dir)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            // Traversable by the containers' user namespaces (see
            // Runtime::clean_stale_state), whatever the caller's umask.
            std::fs::set_permissions(&config.state_dir, std::fs::Permissions::from_mode(0o711))
        })
        .map_err(|e| format!("state dir {}: {e}", config.state_dir.display()))?;

    let mock_listener = TcpListener::bind(config.mock_listen)
        .await
        .map_err(|e| format!("mock model bind: {e}"))?;
    let mock_addr = mock_listener.local_addr().map_err(|e| e.to_string())?;
    let mock_url = format!("http://{mock_addr}/v1");
    let api_listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("bind {}: {e}", config.listen))?;
    let api_addr = api_listener.local_addr().map_err(|e| e.to_string())?;

    let mut runtime_env = vec![
        (
            penv::HERMES_BIN.to_owned(),
            config.hermes_bin.to_string_lossy().into_owned(),
        ),
        (
            penv::REQUIREMENTS.to_owned(),
            config.hermes_requirements.to_string_lossy().into_owned(),
        ),
        (
            hermes_protocol::ports::env::MOCK_MODEL_URL.to_owned(),
            mock_url.clone(),
        ),
    ];
    for name in ["RUST_LOG", "RUST_BACKTRACE"] {
        if let Ok(v) = std::env::var(name) {
            runtime_env.push((name.to_owned(), v));
        }
    }
    let binds = ro_binds(&config);
    if isolation == Isolation::Namespaces && config.uid_ranges {
        let mut check = binds.clone();
        check.push(config.state_dir.clone());
        for path in unreadable_for_others(&check) {
            crate::log!(
                "devhost: WARNING {} is not readable by other users; containers (own uid range) cannot use it \
                 (chmod o+rX it and its parents, or DEVHOST_UID_RANGES=off)",
                path.display()
            );
        }
    }
    let settings = RuntimeSettings {
        isolation,
        bwrap: config.bwrap.clone(),
        state_dir: config.state_dir.clone(),
        supervisor_bin: config.supervisor_bin.clone(),
        ro_binds: binds,
        file_overlays: match isolation {
            Isolation::Namespaces => crate::image::write_user_db(&config.state_dir.join("etc"))
                .map_err(|e| format!("user database: {e}"))?,
            Isolation::Reduced => Vec::new(),
        },
        runtime_env,
        uid_ranges: config.uid_ranges,
        root_entries: sandbox::read_root_entries().map_err(|e| format!("reading /: {e}"))?,
    };
    let runtime = Arc::new(Runtime::new(settings));
    runtime
        .clean_stale_state()
        .map_err(|e| format!("state dir: {e}"))?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mock = tokio::spawn(http::serve(
        mock_listener,
        Arc::new(MockModel::default()),
        stop_rx.clone(),
    ));
    let api = Arc::new(Api {
        runtime: runtime.clone(),
        mock_model_url: mock_url.clone(),
    });
    let server = tokio::spawn(http::serve(api_listener, api, stop_rx));

    crate::log!(
        "hermes-devhost: API http://{api_addr}  mock model {mock_url}  isolation {}{}  state {}",
        isolation.as_str(),
        if isolation == Isolation::Namespaces && config.uid_ranges {
            " + uid ranges"
        } else {
            ""
        },
        config.state_dir.display()
    );
    // Machine-readable line for scripts and tests that bind port 0.
    crate::out!("DEVHOST_READY http://{api_addr} {mock_url}");

    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    crate::log!("hermes-devhost: shutting down, destroying containers");
    let _ = stop_tx.send(true);
    runtime.destroy_all().await;
    let _ = server.await;
    let _ = mock.await;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn isolation_table() {
        use IsolationRequest as R;
        assert_eq!(
            decide_isolation(R::Auto, true, true),
            Ok(Isolation::Namespaces)
        );
        assert_eq!(
            decide_isolation(R::Auto, false, true),
            Ok(Isolation::Reduced)
        );
        assert_eq!(
            decide_isolation(R::Auto, true, false),
            Ok(Isolation::Reduced)
        );
        assert_eq!(
            decide_isolation(R::Reduced, true, true),
            Ok(Isolation::Reduced)
        );
        assert!(decide_isolation(R::Namespaces, false, true).is_err());
        assert!(decide_isolation(R::Namespaces, true, false).is_err());
        assert_eq!(
            decide_isolation(R::Namespaces, true, true),
            Ok(Isolation::Namespaces)
        );
    }
}
