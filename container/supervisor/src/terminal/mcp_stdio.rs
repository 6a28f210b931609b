//! `hermes-terminal-mcp` (also `hermes-supervisor __terminal-mcp`): the
//! stdio MCP server Hermes spawns as its own uid. It speaks newline-
//! delimited JSON-RPC 2.0 (MCP stdio transport) — `initialize`, `ping`,
//! `tools/list`, `tools/call` — and forwards each tool call to the
//! supervisor's Unix socket (`HERMES_TERMINAL_SOCKET`), which checks the
//! peer uid and runs the operation as the terminal user. It holds no
//! secret and no policy: limits and validation are the supervisor's.
//!
//! Hand-written rather than the official Rust SDK: five tools and four
//! methods over blocking stdio, no async runtime, ~200 lines; the SDK would
//! add a tokio runtime and a macro layer to a process that forwards lines.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use serde_json::{json, Value};

use super::mcp_socket::{ToolCall, ToolReply};

/// argv\[1\] of the supervisor's MCP mode.
pub const MCP_ARG: &str = "__terminal-mcp";
/// Environment variable with the supervisor's socket path.
pub const SOCKET_ENV: &str = "HERMES_TERMINAL_SOCKET";
const PROTOCOL_VERSION: &str = "2025-06-18";

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The tools (SPEC §10) with the limits of SPEC §8 in their descriptions.
pub fn tools() -> Value {
    json!([
        {"name": "terminal_exec",
         "description": "Run a shell command (/bin/sh -c) in the sandboxed workspace /workspace as an unprivileged user. Network only through an allowlisting HTTP(S) proxy. Timeout default 120000 ms (1000..600000). First 100000 bytes of stdout/stderr. A non-zero exit is reported as [exit N].",
         "inputSchema": schema(json!({
            "command": {"type": "string", "minLength": 1, "maxLength": 20000},
            "cwd": {"type": "string", "description": "inside /workspace"},
            "timeoutMs": {"type": "integer", "minimum": 1000, "maximum": 600000}}), &["command"])},
        {"name": "git_clone",
         "description": "Clone an https git repository (allowlisted hosts only) into /workspace.",
         "inputSchema": schema(json!({
            "repoUrl": {"type": "string"},
            "branch": {"type": "string"},
            "targetDir": {"type": "string"},
            "depth": {"type": "integer", "minimum": 1, "maximum": 1000}}), &["repoUrl"])},
        {"name": "read_file",
         "description": "Read the first bytes of a file in /workspace (default 200000, at most 2000000).",
         "inputSchema": schema(json!({
            "path": {"type": "string"},
            "maxBytes": {"type": "integer", "minimum": 1, "maximum": 2000000}}), &["path"])},
        {"name": "write_file",
         "description": "Write a file in /workspace (at most 5000000 bytes; parents created).",
         "inputSchema": schema(json!({
            "path": {"type": "string"},
            "content": {"type": "string"},
            "encoding": {"type": "string", "enum": ["utf8", "base64"]}}), &["path", "content"])},
        {"name": "list_files",
         "description": "List a directory in /workspace (default /workspace).",
         "inputSchema": schema(json!({"path": {"type": "string"}}), &[])}
    ])
}

fn call_supervisor(socket: &str, call: &ToolCall) -> ToolReply {
    let attempt = || -> std::io::Result<ToolReply> {
        let mut stream = UnixStream::connect(socket)?;
        let mut line = serde_json::to_vec(call)?;
        line.push(b'\n');
        stream.write_all(&line)?;
        let mut reply = Vec::new();
        BufReader::new(stream).read_until(b'\n', &mut reply)?;
        Ok(serde_json::from_slice(&reply)?)
    };
    attempt().unwrap_or_else(|e| ToolReply {
        text: format!("error: terminal unavailable ({})", e.kind()),
        is_error: true,
    })
}

/// The JSON-RPC answer to one message (`None` for notifications).
pub fn handle(message: &Value, socket: &str) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let result = match method {
        "initialize" => {
            let version = message
                .pointer("/params/protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(PROTOCOL_VERSION);
            json!({"protocolVersion": version,
                   "capabilities": {"tools": {"listChanged": false}},
                   "serverInfo": {"name": "hermes-terminal", "version": env!("CARGO_PKG_VERSION")}})
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools()}),
        "tools/call" => {
            let call = ToolCall {
                tool: message
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                arguments: message
                    .pointer("/params/arguments")
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            };
            let reply = call_supervisor(socket, &call);
            json!({"content": [{"type": "text", "text": reply.text}], "isError": reply.is_error})
        }
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}))
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Entry point: serve stdin/stdout until EOF.
pub fn main() -> ExitCode {
    let Ok(socket) = std::env::var(SOCKET_ENV) else {
        eprintln!("hermes-terminal-mcp: {SOCKET_ENV} is not set");
        return ExitCode::from(2);
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            return ExitCode::FAILURE;
        };
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Value>(&line) {
            Ok(message) => handle(&message, &socket),
            Err(_) => Some(json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "parse error"}})),
        };
        if let Some(answer) = answer {
            let mut out = answer.to_string();
            out.push('\n');
            if stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_basics() {
        let init = handle(
            &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}),
            "/nonexistent",
        )
        .unwrap();
        assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
        assert!(handle(
            &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            "/x"
        )
        .is_none());
        let list = handle(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}), "/x").unwrap();
        let names: Vec<&str> = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "terminal_exec",
                "git_clone",
                "read_file",
                "write_file",
                "list_files"
            ]
        );
        let unknown = handle(&json!({"jsonrpc":"2.0","id":3,"method":"nope"}), "/x").unwrap();
        assert_eq!(unknown["error"]["code"], -32601);
        let call = handle(
            &json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"terminal_exec","arguments":{"command":"true"}}}),
            "/nonexistent/socket",
        )
        .unwrap();
        assert_eq!(call["result"]["isError"], true);
    }
}
