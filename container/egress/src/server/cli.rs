//! The `hermes-egress-guard` command line: options from arguments and
//! environment, then [`run`].
//!
//! Nothing here is secret, so arguments are fine (`/proc/<pid>/cmdline` is
//! readable by other uids). The allowlist comes from `--allowlist-file`
//! (re-read on SIGHUP; an unreadable file on reload denies everything) or,
//! without a file, from `EGRESS_ALLOWED_HOSTS` (unset: the default list).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::{
    log_event, AllowlistHandle, Guard, GuardConfig, GuardError, Resolve, StaticResolver,
    StderrAudit, SystemResolver,
};
use crate::allowlist::{self, Allowlist, DroppedEntry, Source};
use crate::host::normalise_host;

/// Usage text.
pub const USAGE: &str = "usage: hermes-egress-guard [--listen ADDR] [--allowlist-file PATH] \
[--max-tunnels N] [--max-clients N] [--idle-timeout-secs N] [--connect-timeout-secs N] [--resolve HOST=IP]...\n\
env: EGRESS_ALLOWED_HOSTS (when no --allowlist-file), EGRESS_LISTEN, HERMES_EGRESS_GUARD_PORT";

/// Everything the binary needs.
#[derive(Debug, Clone)]
pub struct GuardOptions {
    /// Listen address (default `127.0.0.1:3128`).
    pub listen: SocketAddr,
    /// Allowlist file, re-read on SIGHUP.
    pub allowlist_file: Option<PathBuf>,
    /// Value of `EGRESS_ALLOWED_HOSTS` (`None` = unset).
    pub allowlist_env: Option<String>,
    /// Limits and timeouts.
    pub config: GuardConfig,
    /// Fixed name → address answers (still classified).
    pub resolve: Vec<(String, IpAddr)>,
}

/// Parses arguments (without argv\[0\]) and the environment lookup `env`.
pub fn parse_options(
    args: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<GuardOptions, GuardError> {
    let usage = |message: String| GuardError::Usage(format!("{message}\n{USAGE}"));
    let port = match env(hermes_protocol::ports::env::EGRESS_GUARD_PORT) {
        Some(text) => text
            .parse::<u16>()
            .map_err(|_| usage(format!("bad port {text:?}")))?,
        None => hermes_protocol::ports::EGRESS_GUARD_PORT,
    };
    let mut options = GuardOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        allowlist_file: env("EGRESS_ALLOWLIST_FILE").map(PathBuf::from),
        allowlist_env: env(allowlist::ENV_VAR),
        config: GuardConfig::default(),
        resolve: Vec::new(),
    };
    if let Some(listen) = env("EGRESS_LISTEN") {
        options.listen = listen
            .parse()
            .map_err(|_| usage(format!("bad listen address {listen:?}")))?;
    }
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--listen" => {
                let text = value()?;
                options.listen = text
                    .parse()
                    .map_err(|_| usage(format!("bad listen address {text:?}")))?;
            }
            "--allowlist-file" => options.allowlist_file = Some(PathBuf::from(value()?)),
            "--max-tunnels" => {
                options.config.max_tunnels = parse_number(&value()?).map_err(usage)?
            }
            "--max-clients" => {
                options.config.max_clients = parse_number(&value()?).map_err(usage)?
            }
            "--idle-timeout-secs" => {
                options.config.idle_timeout =
                    Duration::from_secs(parse_number(&value()?).map_err(usage)? as u64)
            }
            "--connect-timeout-secs" => {
                options.config.connect_timeout =
                    Duration::from_secs(parse_number(&value()?).map_err(usage)? as u64);
            }
            "--resolve" => {
                let text = value()?;
                let (host, addr) = text
                    .split_once('=')
                    .ok_or_else(|| usage(format!("bad --resolve {text:?}")))?;
                let host = normalise_host(host)
                    .map_err(|_| usage(format!("bad --resolve host {host:?}")))?;
                let addr = addr
                    .parse()
                    .map_err(|_| usage(format!("bad --resolve address {addr:?}")))?;
                options.resolve.push((host, addr));
            }
            "--help" | "-h" => return Err(GuardError::Usage(USAGE.to_owned())),
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(options)
}

fn parse_number(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) | Err(_) => Err(format!("bad number {text:?}")),
    }
}

fn log_dropped(dropped: &[DroppedEntry]) {
    for entry in dropped {
        log_event(
            "allowlist_entry_dropped",
            json!({ "entry": entry.entry, "reason": entry.reason }),
        );
    }
}

fn log_loaded(list: &Allowlist) {
    let entries: Vec<String> = list.entries().iter().map(ToString::to_string).collect();
    let source = match list.source() {
        Source::Default => "default",
        Source::Configured => "configured",
    };
    log_event(
        "allowlist_loaded",
        json!({ "source": source, "entries": entries }),
    );
}

fn read_allowlist_file(path: &PathBuf) -> Result<Allowlist, GuardError> {
    let text = std::fs::read_to_string(path).map_err(|source| GuardError::AllowlistFile {
        path: path.display().to_string(),
        source,
    })?;
    let (list, dropped) = Allowlist::parse(&text);
    log_dropped(&dropped);
    Ok(list)
}

/// Re-reads the file on every SIGHUP. A failed read installs deny-all: a
/// reload can narrow egress or fail closed, never fail open.
async fn reload_on_sighup(mut hangups: Signal, path: PathBuf, handle: AllowlistHandle) {
    while hangups.recv().await.is_some() {
        match read_allowlist_file(&path) {
            Ok(list) => {
                log_loaded(&list);
                handle.replace(list);
            }
            Err(error) => {
                handle.replace(Allowlist::deny_all());
                log_event(
                    "allowlist_reload_failed",
                    json!({ "error": error.to_string(), "now": "deny-all" }),
                );
            }
        }
    }
}

/// Runs the guard until SIGTERM or SIGINT.
pub async fn run(options: GuardOptions) -> Result<(), GuardError> {
    let allowlist = match &options.allowlist_file {
        Some(path) => read_allowlist_file(path)?,
        None => {
            let (list, dropped) = Allowlist::from_env_value(options.allowlist_env.as_deref());
            log_dropped(&dropped);
            list
        }
    };
    log_loaded(&allowlist);
    let resolver: Arc<dyn Resolve> = if options.resolve.is_empty() {
        Arc::new(SystemResolver)
    } else {
        let fixed = options
            .resolve
            .iter()
            .fold(StaticResolver::new(), |resolver, (host, addr)| {
                resolver.with(host, *addr)
            });
        Arc::new(fixed.with_fallback(Arc::new(SystemResolver)))
    };
    let listener =
        TcpListener::bind(options.listen)
            .await
            .map_err(|source| GuardError::Listen {
                addr: options.listen.to_string(),
                source,
            })?;
    let local = listener.local_addr().map_err(|source| GuardError::Listen {
        addr: options.listen.to_string(),
        source,
    })?;
    let guard = Guard::new(
        options.config.clone(),
        allowlist,
        resolver,
        Arc::new(StderrAudit),
    );
    if let Some(path) = options.allowlist_file.clone() {
        // Installed before "listening" is logged: a SIGHUP that arrived
        // before the handler existed would kill the process.
        let hangups = signal(SignalKind::hangup()).map_err(|error| {
            GuardError::Usage(format!("cannot install SIGHUP handler: {error}"))
        })?;
        tokio::spawn(reload_on_sighup(hangups, path, guard.allowlist_handle()));
    }
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|error| GuardError::Usage(format!("cannot install SIGTERM handler: {error}")))?;
    log_event("listening", json!({ "addr": local.to_string() }));
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    guard.serve(listener, shutdown).await;
    Ok(())
}
