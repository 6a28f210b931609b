//! `hermes-devhost`: a local stand-in for Cloudflare's container runtime, so
//! `wrangler dev` runs the whole system on one machine without Docker.
//!
//! The Durable Object calls the HTTP API in [`api`] where production calls
//! the container primitive (`start`, `running`, `get_tcp_port(..).fetch`,
//! `signal`, `destroy`). Each container is one `hermes-supervisor` in its own
//! sandbox ([`sandbox`], [`instance`]), with its own loopback ports
//! ([`ports`]). A mock OpenAI-compatible model ([`mockllm`]) runs in the same
//! process and is every container's default provider.

/// `eprintln!` that never panics: a closed or broken stderr (devhost piped
/// into `head`, a supervisor that floods its output) must not take a
/// request or the server down.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that never panics (the machine-readable ready lines).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, $($arg)*);
        let _ = stdout.flush();
    }};
}

pub mod api;
pub mod config;
pub mod env;
pub mod error;
pub mod http;
pub mod id;
pub mod image;
pub mod instance;
pub mod mockllm;
pub mod ports;
pub mod procfs;
pub mod proxy;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod userns;
