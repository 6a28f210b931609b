//! `hermes-supervisor`: PID 1 of the Hermes container and its only
//! non-loopback listener.
//!
//! It owns the authenticated control API the `HermesAgent` Durable Object
//! talks to (typed by `hermes-protocol`), provisioning of Hermes' keys and
//! hardened configuration, the Hermes gateway's lifecycle under a dropped
//! identity, the streaming proxy to Hermes' API, the isolation probe and the
//! boot-check report. [`run`] is the whole program; `main` only calls it.

pub mod app;
pub mod auth;
pub mod body;
pub mod bootcheck;
pub mod config;
pub mod error;
pub mod fsutil;
pub mod gateway;
pub mod hermes_config;
pub mod privdrop;
pub mod probe;
pub mod procfs;
pub mod provision;
pub mod proxy;
pub mod reaper;
pub mod server;
pub mod terminal;
pub mod upstream;

use std::process::ExitCode;

use tokio::signal::unix::{signal, SignalKind};

async fn shut_down(app: &app::App) -> std::io::Result<()> {
    eprintln!("hermes-supervisor: termination signal; stopping Hermes");
    gateway::stop(app).await;
    Ok(())
}

/// Read the environment (removing the control token from it while still
/// single-threaded), then serve the control API on a single-threaded
/// runtime. Single-threaded on purpose: the parent-death signal of a child
/// is tied to the thread that forked it, and the one runtime thread lives as
/// long as the process; it also keeps the supervisor small.
pub fn run() -> ExitCode {
    // Re-executed helper modes (terminal file work and self-test as the
    // terminal user; the egress guard as its uid) never read the control
    // token and never serve the control API.
    match std::env::args_os()
        .nth(1)
        .as_deref()
        .and_then(|a| a.to_str())
    {
        Some(terminal::helper::HELPER_ARG) => return terminal::helper::main(),
        Some(terminal::guard::GUARD_ARG) => return terminal::guard::main(),
        Some(terminal::mcp_stdio::MCP_ARG) => return terminal::mcp_stdio::main(),
        // For image checks: prints the version and exits, touching nothing.
        Some("--version") => {
            println!("hermes-supervisor {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some(_) | None => {}
    }
    let settings = match config::Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hermes-supervisor: refusing to start: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hermes-supervisor: cannot build runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        if let Err(e) = reaper::Reaper::become_subreaper() {
            eprintln!("hermes-supervisor: cannot become child subreaper: {e}");
        }
        let reaper = reaper::Reaper::new();
        reaper.start()?;
        let app = app::App::new(settings, reaper);
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        tokio::select! {
            served = server::serve(std::sync::Arc::clone(&app)) => served,
            // The container runtime stops a container with SIGTERM. As PID 1
            // nothing happens unless we act: stop Hermes and its children
            // gracefully (the same path as the stop route), then exit.
            _ = terminate.recv() => shut_down(&app).await,
            _ = interrupt.recv() => shut_down(&app).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes-supervisor: {e}");
            ExitCode::from(1)
        }
    }
}
