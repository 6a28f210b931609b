//! The egress guard process: the supervisor re-executed as
//! `hermes-supervisor __egress-guard`, uid 10003, in the container's own
//! network namespace (it dials upstream from there), serving a listening
//! socket that the supervisor created inside the terminal's namespace and
//! handed over as descriptor 3.
//!
//! The allowlist comes from `EGRESS_ALLOWED_HOSTS` exactly as the
//! standalone `hermes-egress-guard` reads it (unset = default list, set but
//! empty = deny all). Audit lines go to stderr (the container log).

use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;

use hermes_egress::allowlist::ENV_VAR;
use hermes_egress::host::normalise_host;
use hermes_egress::server::{
    Guard, GuardConfig, Resolve, StaticResolver, StderrAudit, SystemResolver,
};
use hermes_egress::Allowlist;

/// argv\[1\] that selects this mode.
pub const GUARD_ARG: &str = "__egress-guard";
const LISTENER_FD: RawFd = 3;
const RESOLVE_ENV: &str = hermes_protocol::ports::env::EGRESS_RESOLVE;

/// The resolver: the system's, behind fixed `host=ip` answers if given.
/// Malformed pairs are skipped (and logged); answers are still classified.
fn resolver(fixed: Option<&str>) -> Arc<dyn Resolve> {
    let Some(fixed) = fixed else {
        return Arc::new(SystemResolver);
    };
    let mut table = StaticResolver::new();
    for pair in fixed.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = pair.split_once('=').and_then(|(host, ip)| {
            Some((
                normalise_host(host).ok()?,
                ip.trim().parse::<std::net::IpAddr>().ok()?,
            ))
        });
        match parsed {
            Some((host, ip)) => table = table.with(&host, ip),
            None => eprintln!(
                "{}",
                serde_json::json!({"event": "resolve_entry_dropped", "entry": pair})
            ),
        }
    }
    Arc::new(table.with_fallback(Arc::new(SystemResolver)))
}

fn move_fd_to_3(fd: RawFd) -> std::io::Result<()> {
    if fd == LISTENER_FD {
        // dup2(3, 3) would keep CLOEXEC: clear it instead.
        // SAFETY: F_SETFD with 0 on a live descriptor.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        return Ok(());
    }
    // SAFETY: dup2 of a live descriptor onto 3; the copy has no CLOEXEC,
    // so exactly this socket survives exec.
    if unsafe { libc::dup2(fd, LISTENER_FD) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn drop_to(uid: u32) -> std::io::Result<()> {
    // SAFETY (whole block): integer-argument syscalls between fork and
    // exec, async-signal-safe; the uid switch is verified.
    unsafe {
        if libc::setsid() < 0
            || libc::setgroups(0, std::ptr::null()) < 0
            || libc::setresgid(uid, uid, uid) < 0
            || libc::setresuid(uid, uid, uid) < 0
            || libc::getuid() != uid
            || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
            || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Spawn the guard as `uid` serving `listener`; returns its PID.
pub fn spawn(
    exe: &Path,
    listener: &std::net::TcpListener,
    uid: u32,
    allowlist_env: Option<&str>,
    resolve_env: Option<&str>,
) -> std::io::Result<u32> {
    let mut cmd = Command::new(exe);
    cmd.arg(GUARD_ARG)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some(value) = allowlist_env {
        cmd.env(ENV_VAR, value);
    }
    if let Some(value) = resolve_env {
        cmd.env(RESOLVE_ENV, value);
    }
    let fd = listener.as_raw_fd();
    // SAFETY: the closure makes only async-signal-safe syscalls.
    unsafe {
        cmd.pre_exec(move || {
            move_fd_to_3(fd)?;
            drop_to(uid)
        });
    }
    let child = cmd.spawn()?;
    Ok(child.id())
}

/// Entry point of the guard mode.
pub fn main() -> ExitCode {
    // SAFETY: descriptor 3 was set up by `spawn` and is owned by nobody
    // else in this fresh process.
    let std_listener = unsafe { std::net::TcpListener::from_raw_fd(LISTENER_FD) };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hermes-egress-guard: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async move {
        std_listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let value = std::env::var(ENV_VAR).ok();
        let (allowlist, dropped) = Allowlist::from_env_value(value.as_deref());
        for entry in dropped {
            eprintln!(
                "{}",
                serde_json::json!({"event":"allowlist_entry_dropped","entry":entry.entry,"reason":entry.reason})
            );
        }
        let guard = Guard::new(
            GuardConfig::default(),
            allowlist,
            resolver(std::env::var(RESOLVE_ENV).ok().as_deref()),
            Arc::new(StderrAudit),
        );
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        guard
            .serve(listener, async move {
                terminate.recv().await;
            })
            .await;
        Ok::<(), std::io::Error>(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes-egress-guard: {e}");
            ExitCode::FAILURE
        }
    }
}
