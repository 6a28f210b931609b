//! `hermes-devhost` entry point: parse the configuration, run the server.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .unwrap_or_default();
    let config = match hermes_devhost::config::from_sources(
        &args,
        &|k| std::env::var(k).ok(),
        hermes_devhost::procfs::is_root(),
        &exe_dir,
    ) {
        Ok(c) => c,
        Err(msg) => {
            hermes_devhost::log!("{msg}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            hermes_devhost::log!("hermes-devhost: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(hermes_devhost::server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            hermes_devhost::log!("hermes-devhost: {msg}");
            ExitCode::FAILURE
        }
    }
}
