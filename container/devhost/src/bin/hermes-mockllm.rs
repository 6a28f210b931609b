//! `hermes-mockllm`: the mock OpenAI-compatible model on its own, for use
//! without devhost. `--listen ADDR` (env `MOCKLLM_LISTEN`, default
//! 127.0.0.1:8789, loopback only).

use hermes_devhost::{http, mockllm::MockModel};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

fn listen_addr() -> Result<SocketAddr, String> {
    let mut args = std::env::args().skip(1);
    let mut raw = std::env::var("MOCKLLM_LISTEN").unwrap_or_else(|_| "127.0.0.1:8789".into());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => raw = args.next().ok_or("--listen needs a value")?,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: hermes-mockllm [--listen ADDR]"
                ))
            }
        }
    }
    let addr: SocketAddr = raw
        .parse()
        .map_err(|e| format!("bad address {raw:?}: {e}"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("refusing non-loopback address {addr}"));
    }
    Ok(addr)
}

async fn run(addr: SocketAddr) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| e.to_string())?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    hermes_devhost::out!("MOCKLLM_READY http://{local}/v1");
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(http::serve(
        listener,
        Arc::new(MockModel::default()),
        stop_rx,
    ));
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        r = server => r.map_err(|e| e.to_string()),
    }
}

fn main() -> ExitCode {
    let addr = match listen_addr() {
        Ok(a) => a,
        Err(e) => {
            hermes_devhost::log!("{e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            hermes_devhost::log!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(addr)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            hermes_devhost::log!("hermes-mockllm: {e}");
            ExitCode::FAILURE
        }
    }
}
