//! `hermes-egress-guard`: the egress proxy process the supervisor spawns as
//! its own uid. All logic lives in `hermes_egress::server::cli`.

use std::process::ExitCode;

use hermes_egress::server::cli::{parse_options, run};

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().skip(1), |name| std::env::var(name).ok()) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
