//! Entry point; everything lives in the library.
fn main() -> std::process::ExitCode {
    hermes_supervisor::run()
}
