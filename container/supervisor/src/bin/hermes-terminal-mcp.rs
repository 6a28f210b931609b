//! `hermes-terminal-mcp`: the stdio MCP server for Hermes; all logic lives
//! in `hermes_supervisor::terminal::mcp_stdio`.
fn main() -> std::process::ExitCode {
    hermes_supervisor::terminal::mcp_stdio::main()
}
