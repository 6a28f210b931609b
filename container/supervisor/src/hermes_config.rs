//! What provisioning writes, decided purely: the `.env` text, the hardened
//! `config.yaml`, and the read-back check of the written config.
//!
//! `config.yaml` is written as JSON, which is valid YAML: every list is a
//! `[...]` flow sequence and every string is double-quoted, so no YAML
//! implicit typing can turn `off` into `false` or a list into a string, and
//! serde_json can parse the file back to prove it. Hermes 0.19 keys used
//! (checked in the wheel): `approvals.mode`/`cron_mode`, `command_allowlist`,
//! `agent.disabled_toolsets` (gateway and cron agents), `platform_toolsets.
//! api_server` (the API server resolves its tools only from this list and
//! ignores `disabled_toolsets`), `security.tirith_enabled`, `model`.

use std::collections::BTreeMap;
use std::path::Path;

use hermes_protocol::Provision;
use serde_json::{json, Value};

/// Hermes' own toolsets that run code or touch files as the Hermes uid —
/// which can read its own credentials. Commands go through the contained
/// terminal (MCP) instead.
pub const DISABLED_TOOLSETS: [&str; 3] = ["terminal", "file", "code_execution"];

/// The API server's toolsets: explicit, so nothing is enabled by default
/// inference. No terminal, file, code execution, browser, cron or delegation.
pub const API_SERVER_TOOLSETS: [&str; 6] = [
    "web",
    "vision",
    "skills",
    "todo",
    "memory",
    "session_search",
];

/// Provider variables the object may send (SPEC §6). Anything else is
/// refused: an unknown name could be `LD_PRELOAD` or `HERMES_YOLO_MODE`.
pub const PROVIDER_VARS: [&str; 10] = [
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "NOUS_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "CLOUDFLARE_API_KEY",
    "CLOUDFLARE_ACCOUNT_ID",
    "VERTEXAI_PROJECT",
    "VERTEXAI_LOCATION",
];

/// Placeholder key for the local mock model. Not a secret; Hermes' client
/// merely wants a non-empty key.
pub const MOCK_MODEL_API_KEY: &str = "mock-model-no-secret";
pub const MOCK_MODEL_DEFAULT: &str = "mock-model";

/// File name of the Vertex service-account JSON inside `HERMES_HOME`.
pub const VERTEX_FILE: &str = "vertex-sa.json";

/// Why a provisioning request is refused (the caller's fault → 400).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidProvision {
    #[error("apiServerKey must be 32..512 printable ASCII characters without spaces")]
    ApiServerKey,
    #[error("providerEnv name {0:?} is not an accepted provider variable")]
    UnknownVar(String),
    #[error("providerEnv value of {0} must be 1..4096 printable characters")]
    BadValue(String),
    #[error("vertexSaJson must be a JSON object")]
    VertexJson,
    #[error("defaultModel must be 1..200 printable characters")]
    DefaultModel,
    #[error("keyFingerprint must be at most 200 printable ASCII characters")]
    Fingerprint,
}

fn printable_ascii_no_space(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_graphic())
}

fn no_control(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

/// Refuse anything that could break out of a `.env` line or the config.
pub fn validate(p: &Provision) -> Result<(), InvalidProvision> {
    let key = &p.api_server_key;
    if !(32..=512).contains(&key.len()) || !printable_ascii_no_space(key) {
        return Err(InvalidProvision::ApiServerKey);
    }
    for (name, value) in &p.provider_env {
        if !PROVIDER_VARS.contains(&name.as_str()) {
            return Err(InvalidProvision::UnknownVar(
                name.chars().take(64).collect(),
            ));
        }
        if value.is_empty() || value.len() > 4096 || !no_control(value) {
            return Err(InvalidProvision::BadValue(name.clone()));
        }
    }
    if let Some(raw) = &p.vertex_sa_json {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(_)) => {}
            _ => return Err(InvalidProvision::VertexJson),
        }
    }
    if let Some(model) = &p.default_model {
        if model.is_empty() || model.len() > 200 || !no_control(model) {
            return Err(InvalidProvision::DefaultModel);
        }
    }
    if p.key_fingerprint.len() > 200 || !printable_ascii_no_space(&p.key_fingerprint) {
        return Err(InvalidProvision::Fingerprint);
    }
    Ok(())
}

/// Single-quoted python-dotenv value: only `\` and `'` are escapes there.
fn dotenv_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\\' || c == '\'' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// The `.env` text. `.env` is loaded by Hermes with override, so these beat
/// anything in the gateway's (already minimal) process environment.
pub fn render_env(p: &Provision, api_port: u16, vertex_path: Option<&Path>) -> String {
    let mut vars: BTreeMap<&str, String> = BTreeMap::new();
    for (name, value) in &p.provider_env {
        vars.insert(name.as_str(), value.clone());
    }
    if let Some(path) = vertex_path {
        vars.insert("GOOGLE_APPLICATION_CREDENTIALS", path.display().to_string());
    }
    vars.insert("API_SERVER_ENABLED", "true".into());
    vars.insert("API_SERVER_KEY", p.api_server_key.clone());
    vars.insert("API_SERVER_HOST", "127.0.0.1".into());
    vars.insert("API_SERVER_PORT", api_port.to_string());
    let mut out = String::from("# Written by hermes-supervisor at provisioning. Do not edit.\n");
    for (name, value) in vars {
        out.push_str(name);
        out.push('=');
        out.push_str(&dotenv_quote(&value));
        out.push('\n');
    }
    out
}

/// The `model` section: the mock model when no provider key was sent and
/// devhost set `HERMES_MOCK_MODEL_URL`, else the default model, else none.
fn model_section(p: &Provision, mock_model_url: Option<&str>) -> Option<Value> {
    match (p.provider_env.is_empty(), mock_model_url) {
        (true, Some(url)) => Some(json!({
            "default": p.default_model.as_deref().unwrap_or(MOCK_MODEL_DEFAULT),
            "provider": "custom",
            "base_url": url,
            "api_key": MOCK_MODEL_API_KEY,
        })),
        _ => p.default_model.as_ref().map(|m| json!({ "default": m })),
    }
}

/// The hardened `config.yaml` (JSON-flavoured YAML).
pub fn render_config(p: &Provision, mock_model_url: Option<&str>) -> String {
    let mut config = json!({
        "approvals": { "mode": p.approvals_mode.as_str(), "cron_mode": "deny" },
        "command_allowlist": [],
        "agent": { "disabled_toolsets": DISABLED_TOOLSETS },
        "platform_toolsets": { "api_server": API_SERVER_TOOLSETS },
        "security": { "tirith_enabled": false },
    });
    if let (Some(model), Value::Object(map)) = (model_section(p, mock_model_url), &mut config) {
        map.insert("model".into(), model);
    }
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    text
}

/// Name of the terminal MCP server in `mcp_servers`.
pub const TERMINAL_MCP_NAME: &str = "hermes_terminal";

/// `config` with the terminal MCP server registered (stdio: `command
/// __terminal-mcp`, socket path in its environment). Only called when the
/// terminal boundary is up (SPEC §7).
pub fn with_terminal_mcp(
    config: &str,
    command: &std::path::Path,
    socket: &std::path::Path,
) -> String {
    let Ok(mut root) = serde_json::from_str::<Value>(config) else {
        return config.to_owned();
    };
    if let Value::Object(map) = &mut root {
        map.insert(
            "mcp_servers".into(),
            json!({ TERMINAL_MCP_NAME: {
                "command": command.display().to_string(),
                "args": [crate::terminal::mcp_stdio::MCP_ARG],
                "env": { crate::terminal::mcp_stdio::SOCKET_ENV: socket.display().to_string() },
            }}),
        );
    }
    let mut text = serde_json::to_string_pretty(&root).unwrap_or_default();
    text.push('\n');
    text
}

fn at<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, key| v.get(key))
}

fn string_list(root: &Value, path: &[&str]) -> Result<Vec<String>, String> {
    let dotted = path.join(".");
    match at(root, path) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{dotted} has a non-string item"))
            })
            .collect(),
        Some(_) => Err(format!("{dotted} did not land as a list")),
        None => Err(format!("{dotted} is missing")),
    }
}

/// Parse the config as written and check every hardened value landed with
/// the right type. `Err` names the offending key.
pub fn verify_config(written: &str, p: &Provision) -> Result<(), String> {
    let root: Value = serde_json::from_str(written)
        .map_err(|e| format!("config.yaml does not parse back: {e}"))?;
    if !string_list(&root, &["command_allowlist"])?.is_empty() {
        return Err("command_allowlist is not empty".into());
    }
    let disabled = string_list(&root, &["agent", "disabled_toolsets"])?;
    if let Some(missing) = DISABLED_TOOLSETS
        .iter()
        .find(|t| !disabled.iter().any(|d| d == *t))
    {
        return Err(format!("agent.disabled_toolsets lacks {missing}"));
    }
    let api = string_list(&root, &["platform_toolsets", "api_server"])?;
    if let Some(bad) = api.iter().find(|t| DISABLED_TOOLSETS.contains(&t.as_str())) {
        return Err(format!("platform_toolsets.api_server enables {bad}"));
    }
    match at(&root, &["approvals", "mode"]) {
        Some(Value::String(m)) if m == p.approvals_mode.as_str() => {}
        _ => return Err("approvals.mode did not land as the requested string".into()),
    }
    match at(&root, &["approvals", "cron_mode"]) {
        Some(Value::String(m)) if m == "deny" => {}
        _ => return Err("approvals.cron_mode is not \"deny\"".into()),
    }
    match at(&root, &["security", "tirith_enabled"]) {
        Some(Value::Bool(false)) => Ok(()),
        _ => Err("security.tirith_enabled is not false".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_protocol::ApprovalsMode;

    fn provision() -> Provision {
        Provision {
            api_server_key: "k".repeat(40),
            approvals_mode: ApprovalsMode::Off,
            key_fingerprint: "fp-1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn terminal_mcp_registration() {
        let base = render_config(&provision(), None);
        let with = with_terminal_mcp(
            &base,
            std::path::Path::new("/usr/local/bin/hermes-supervisor"),
            std::path::Path::new("/home/hermes/.terminal-mcp.sock"),
        );
        let v: Value = serde_json::from_str(&with).unwrap();
        let server = &v["mcp_servers"]["hermes_terminal"];
        assert_eq!(server["command"], "/usr/local/bin/hermes-supervisor");
        assert_eq!(server["args"], json!(["__terminal-mcp"]));
        assert_eq!(
            server["env"]["HERMES_TERMINAL_SOCKET"],
            "/home/hermes/.terminal-mcp.sock"
        );
        assert_eq!(verify_config(&with, &provision()), Ok(()));
        assert!(serde_json::from_str::<Value>(&base)
            .unwrap()
            .get("mcp_servers")
            .is_none());
    }

    #[test]
    fn validation_table() {
        assert_eq!(validate(&provision()), Ok(()));
        let mut p = provision();
        p.api_server_key = "short".into();
        assert_eq!(validate(&p), Err(InvalidProvision::ApiServerKey));
        let mut p = provision();
        p.api_server_key = format!("{} x", "k".repeat(40));
        assert_eq!(validate(&p), Err(InvalidProvision::ApiServerKey));
        let mut p = provision();
        p.provider_env
            .insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        assert_eq!(
            validate(&p),
            Err(InvalidProvision::UnknownVar("LD_PRELOAD".into()))
        );
        let mut p = provision();
        p.provider_env
            .insert("OPENAI_API_KEY".into(), "sk-abc".into());
        assert_eq!(validate(&p), Ok(()));
        p.provider_env
            .insert("OPENAI_API_KEY".into(), "sk-abc\nHERMES_YOLO_MODE=1".into());
        assert_eq!(
            validate(&p),
            Err(InvalidProvision::BadValue("OPENAI_API_KEY".into()))
        );
        let mut p = provision();
        p.vertex_sa_json = Some("[1]".into());
        assert_eq!(validate(&p), Err(InvalidProvision::VertexJson));
        p.vertex_sa_json = Some("{\"type\":\"service_account\"}".into());
        assert_eq!(validate(&p), Ok(()));
    }

    #[test]
    fn env_quotes_and_sets_api_server() {
        let mut p = provision();
        p.provider_env
            .insert("OPENAI_API_KEY".into(), r"a'b\c".into());
        let env = render_env(
            &p,
            8642,
            Some(Path::new("/home/hermes/.hermes/vertex-sa.json")),
        );
        assert!(env.contains(r"OPENAI_API_KEY='a\'b\\c'"), "{env}");
        assert!(env.contains("API_SERVER_ENABLED='true'\n"));
        assert!(env.contains("API_SERVER_HOST='127.0.0.1'\n"));
        assert!(env.contains("API_SERVER_PORT='8642'\n"));
        assert!(
            env.contains("GOOGLE_APPLICATION_CREDENTIALS='/home/hermes/.hermes/vertex-sa.json'\n")
        );
    }

    #[test]
    fn config_is_hardened_and_verifies() {
        let p = provision();
        let text = render_config(&p, None);
        assert_eq!(verify_config(&text, &p), Ok(()));
        assert!(
            text.contains("\"mode\": \"off\""),
            "approvals mode must be a quoted string: {text}"
        );
        assert!(
            !text.contains("\"model\""),
            "no model without a default or mock: {text}"
        );
    }

    #[test]
    fn verify_rejects_lists_that_did_not_land() {
        let p = provision();
        let good: Value = serde_json::from_str(&render_config(&p, None)).unwrap();
        let cases: [(&str, Value); 5] = [
            ("/command_allowlist", json!("[]")),
            ("/command_allowlist", json!(["rm"])),
            (
                "/agent/disabled_toolsets",
                json!("terminal,file,code_execution"),
            ),
            ("/platform_toolsets/api_server", json!(["web", "terminal"])),
            ("/approvals/mode", json!(false)),
        ];
        for (pointer, replacement) in cases {
            let mut bad = good.clone();
            *bad.pointer_mut(pointer).unwrap() = replacement;
            assert!(verify_config(&bad.to_string(), &p).is_err(), "{pointer}");
        }
    }

    #[test]
    fn model_section_choice() {
        let mut p = provision();
        let mock = render_config(&p, Some("http://127.0.0.1:9/v1"));
        let v: Value = serde_json::from_str(&mock).unwrap();
        assert_eq!(v["model"]["provider"], "custom");
        assert_eq!(v["model"]["default"], MOCK_MODEL_DEFAULT);
        assert_eq!(v["model"]["base_url"], "http://127.0.0.1:9/v1");
        p.provider_env
            .insert("OPENAI_API_KEY".into(), "sk-abc".into());
        p.default_model = Some("gpt-x".into());
        let real: Value =
            serde_json::from_str(&render_config(&p, Some("http://127.0.0.1:9/v1"))).unwrap();
        assert_eq!(real["model"], json!({ "default": "gpt-x" }));
    }
}
