//! The control API against the real binary: authentication, bad input,
//! provisioning files (modes, owners, who can read them), the probe marker,
//! and the token's absence from every environment a process could read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};

fn idle_supervisor(tag: &str) -> Supervisor {
    // No Hermes is started in these tests; the binary is never executed.
    Supervisor::start(tag, Options::with_bin(Path::new("/nonexistent/hermes")))
}

#[test]
fn missing_or_wrong_token_is_401_on_every_path() {
    let s = idle_supervisor("auth");
    let wrong = format!("Bearer {}x", s.token);
    let basic = format!("Basic {}", s.token);
    let lower = format!("bearer {}", s.token);
    let paths = [
        "/_control/health",
        "/_control/provision",
        "/_control/hermes-api/v1/models",
        "/_control/nope",
        "/",
    ];
    for path in paths {
        for auth in [
            None,
            Some("Bearer "),
            Some(wrong.as_str()),
            Some(basic.as_str()),
            Some(lower.as_str()),
        ] {
            let (status, body) = s.call_with("GET", path, None, auth);
            assert_eq!(status, 401, "{path} with {auth:?}");
            assert_eq!(
                body,
                json!({"ok": false, "error": "unauthorized", "message": "missing or invalid control token"})
            );
        }
    }
    // The allow twin: the right token on the same paths.
    assert_eq!(s.call("GET", "/_control/health", None).0, 200);
    let (status, health) = s.call("GET", "/_control/health", None);
    assert_eq!(status, 200);
    assert_eq!(health["bootId"], "boot-auth");
}

#[test]
fn unknown_paths_404_and_wrong_methods_405() {
    let s = idle_supervisor("routes");
    for path in [
        "/",
        "/_control",
        "/_control/",
        "/_control/healthz",
        "/_control/hermes-apix",
        "/_control/hermes/restart",
    ] {
        let (status, body) = s.call("GET", path, None);
        assert_eq!(
            (status, body["error"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    let rows = [
        ("POST", "/_control/health"),
        ("GET", "/_control/provision"),
        ("GET", "/_control/hermes/start"),
        ("GET", "/_control/hermes/stop"),
        ("POST", "/_control/hermes/ready"),
        ("POST", "/_control/boot-check"),
        ("DELETE", "/_control/probe"),
        ("PUT", "/_control/activity"),
    ];
    for (method, path) in rows {
        let (status, body) = s.call(method, path, None);
        assert_eq!(
            (status, body["error"].as_str()),
            (405, Some("method_not_allowed")),
            "{method} {path}"
        );
    }
}

#[test]
fn malformed_bodies_are_400_and_never_echo_values() {
    let s = idle_supervisor("bodies");
    let auth = format!("Bearer {}", s.token);
    let bad_bodies = [
        "",
        "{",
        "[]",
        "null",
        r#"{"apiServerKey": 5}"#,
        r#"{"providerEnv": {}}"#,
        r#"{"apiServerKey":"k","providerEnv":{},"approvalsMode":"yolo","keyFingerprint":"f"}"#,
    ];
    for body in bad_bodies {
        let (status, answer) = s.call_with("POST", "/_control/provision", Some(body), Some(&auth));
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("bad_request")),
            "{body:?} → {answer}"
        );
    }
    for body in [
        "",
        "{}",
        r#"{"marker": 7}"#,
        r#"{"marker": ""}"#,
        r#"{"marker": "has space"}"#,
    ] {
        let (status, answer) = s.call_with("POST", "/_control/probe", Some(body), Some(&auth));
        assert_eq!(
            (status, answer["error"].as_str()),
            (400, Some("bad_request")),
            "{body:?} → {answer}"
        );
    }
    // Semantically invalid provisioning: refused, named, value not echoed.
    let secret_value = "sk-this-value-must-not-come-back";
    let (status, answer) = s.provision(json!({"providerEnv": {"LD_PRELOAD": secret_value}}));
    assert_eq!(status, 400);
    assert!(
        answer["message"].as_str().unwrap().contains("LD_PRELOAD"),
        "{answer}"
    );
    assert!(!answer.to_string().contains(secret_value));
    let (status, answer) = s.provision(
        json!({"providerEnv": {"OPENAI_API_KEY": format!("{secret_value}\nHERMES_YOLO_MODE=1")}}),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(!answer.to_string().contains(secret_value));
    let (status, _) = s.provision(json!({"apiServerKey": "too-short"}));
    assert_eq!(status, 400);
    // Oversized body.
    let huge = format!(r#"{{"marker":"{}"}}"#, "a".repeat(2 * 1024 * 1024));
    let (status, answer) = s.call_with("POST", "/_control/probe", Some(&huge), Some(&auth));
    assert_eq!(
        (status, answer["error"].as_str()),
        (413, Some("payload_too_large"))
    );
    // Nothing crashed.
    assert_eq!(s.call("GET", "/_control/health", None).0, 200);
}

#[test]
fn token_is_not_in_the_supervisors_environ() {
    let s = idle_supervisor("environ");
    let environ = std::fs::read(format!("/proc/{}/environ", s.pid())).unwrap();
    let text = String::from_utf8_lossy(&environ);
    assert!(
        !text.contains(&s.token),
        "control token visible in /proc/<supervisor>/environ"
    );
    // Twin: the non-secret variables are still there, so the read worked.
    assert!(text.contains("BOOT_ID=boot-environ"));
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn provisioning_writes_private_files_and_lists_only_names() {
    let s = idle_supervisor("provision");
    let key = random_token();
    let vertex = r#"{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\nvertex-secret\n"}"#;
    let (status, answer) = s.provision(json!({
        "apiServerKey": key,
        "providerEnv": {"OPENAI_API_KEY": "sk-openai-provision-secret", "VERTEXAI_PROJECT": "proj", "VERTEXAI_LOCATION": "us"},
        "vertexSaJson": vertex,
        "defaultModel": "gpt-test",
        "approvalsMode": "off",
        "keyFingerprint": "fp-abc",
    }));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"ok": true, "keyFingerprint": "fp-abc", "providerVars":
            ["GOOGLE_APPLICATION_CREDENTIALS", "OPENAI_API_KEY", "VERTEXAI_LOCATION", "VERTEXAI_PROJECT"]})
    );
    let text = answer.to_string();
    assert!(!text.contains(&key) && !text.contains("sk-openai") && !text.contains("vertex-secret"));

    let home = s.hermes_home();
    assert_eq!(mode(&home), 0o700);
    for file in [".env", "config.yaml", "vertex-sa.json"] {
        assert_eq!(mode(&home.join(file)), 0o600, "{file}");
    }
    let env = std::fs::read_to_string(home.join(".env")).unwrap();
    for line in [
        "API_SERVER_ENABLED='true'",
        "API_SERVER_HOST='127.0.0.1'",
        &format!("API_SERVER_PORT='{}'", s.api_port),
        &format!("API_SERVER_KEY='{key}'"),
        "OPENAI_API_KEY='sk-openai-provision-secret'",
        &format!(
            "GOOGLE_APPLICATION_CREDENTIALS='{}'",
            home.join("vertex-sa.json").display()
        ),
    ] {
        assert!(env.lines().any(|l| l == line), "missing {line}");
    }
    assert!(!env.contains(&s.token), "control token leaked into .env");
    assert_eq!(
        std::fs::read_to_string(home.join("vertex-sa.json")).unwrap(),
        vertex
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("config.yaml")).unwrap()).unwrap();
    assert_eq!(
        config["approvals"],
        json!({"mode": "off", "cron_mode": "deny"})
    );
    assert_eq!(config["command_allowlist"], json!([]));
    assert_eq!(config["model"], json!({"default": "gpt-test"}));

    if !is_root() {
        skip(
            "provisioning owner and uid 10002 checks",
            "not running as root (cannot chown or switch uid)",
        );
        return;
    }
    for file in ["", ".env", "config.yaml", "vertex-sa.json"] {
        let meta = std::fs::metadata(home.join(file)).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (10001, 10001),
            "owner of {file:?}"
        );
    }
    let env_path = home.join(".env");
    let env_path = env_path.to_str().unwrap();
    assert!(
        run_as(10001, &["cat", env_path]),
        "the hermes uid must read its .env"
    );
    assert!(
        !run_as(10002, &["cat", env_path]),
        ".env readable by the terminal uid 10002"
    );
    let vertex_path = home.join("vertex-sa.json");
    assert!(
        !run_as(10002, &["cat", vertex_path.to_str().unwrap()]),
        "vertex key readable by uid 10002"
    );
    assert!(
        !run_as(10002, &["ls", home.to_str().unwrap()]),
        "HERMES_HOME listable by uid 10002"
    );
}

#[test]
fn provisioning_replaces_a_planted_symlink_without_following_it() {
    let s = idle_supervisor("symlink");
    assert_eq!(s.provision(json!({})).0, 200);
    let victim = s.root.join("victim");
    std::fs::write(&victim, "do not overwrite").unwrap();
    let env = s.hermes_home().join(".env");
    std::fs::remove_file(&env).unwrap();
    std::os::unix::fs::symlink(&victim, &env).unwrap();
    assert_eq!(s.provision(json!({})).0, 200);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "do not overwrite"
    );
    assert!(std::fs::symlink_metadata(&env)
        .unwrap()
        .file_type()
        .is_file());
}

#[test]
fn mock_model_is_configured_only_without_provider_keys() {
    let s = Supervisor::start(
        "mockcfg",
        Options {
            mock_model_url: Some("http://127.0.0.1:9/v1".into()),
            ..Options::with_bin(Path::new("/nonexistent"))
        },
    );
    assert_eq!(s.provision(json!({})).0, 200);
    let read = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(s.hermes_home().join("config.yaml")).unwrap())
            .unwrap()
    };
    let model = read()["model"].clone();
    assert_eq!(model["provider"], "custom");
    assert_eq!(model["base_url"], "http://127.0.0.1:9/v1");
    assert_eq!(model["default"], "mock-model");
    assert_eq!(
        s.provision(
            json!({"providerEnv": {"ANTHROPIC_API_KEY": "sk-ant-x"}, "defaultModel": "claude-x"})
        )
        .0,
        200
    );
    assert_eq!(read()["model"], json!({"default": "claude-x"}));
}

#[test]
fn hermes_reads_the_written_config_as_intended() {
    let Some(bin) = hermes_venv_bin() else {
        skip(
            "hermes_reads_the_written_config_as_intended",
            "no .venv/hermes (run scripts/setup-hermes.sh)",
        );
        return;
    };
    let python = bin.parent().unwrap().join("python");
    let s = idle_supervisor("pyyaml");
    assert_eq!(s.provision(json!({"approvalsMode": "off"})).0, 200);
    // Parsed by PyYAML exactly as Hermes loads it, then resolved by Hermes'
    // own toolset logic for the API server platform.
    let script = r#"
import json, sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
from hermes_cli.tools_config import _get_platform_tools
out = {
    "allowlist_is_list": isinstance(cfg["command_allowlist"], list),
    "disabled_is_list": isinstance(cfg["agent"]["disabled_toolsets"], list),
    "api_is_list": isinstance(cfg["platform_toolsets"]["api_server"], list),
    "mode": cfg["approvals"]["mode"],
    "cron_mode": cfg["approvals"]["cron_mode"],
    "tirith": cfg["security"]["tirith_enabled"],
    "api_server_tools": sorted(_get_platform_tools(cfg, "api_server")),
}
print(json.dumps(out))
"#;
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(s.hermes_home().join("config.yaml"))
        .env_clear()
        .env("HOME", s.home())
        .env("HERMES_HOME", s.root.join("pyhome"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(
        out.stdout
            .rsplit(|b| *b == b'\n')
            .find(|l| !l.is_empty())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["allowlist_is_list"], true);
    assert_eq!(v["disabled_is_list"], true);
    assert_eq!(v["api_is_list"], true);
    assert_eq!(
        v["mode"], "off",
        "approvals.mode must stay the string off, not false"
    );
    assert_eq!(v["cron_mode"], "deny");
    assert_eq!(v["tirith"], false);
    let tools: Vec<&str> = v["api_server_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for forbidden in [
        "terminal",
        "file",
        "code_execution",
        "browser",
        "cronjob",
        "delegation",
    ] {
        assert!(
            !tools.contains(&forbidden),
            "{forbidden} enabled for the API server: {tools:?}"
        );
    }
    assert!(
        tools.contains(&"memory"),
        "allow twin: memory stays enabled: {tools:?}"
    );
}

#[test]
fn probe_marker_lives_in_the_state_dir() {
    let s = idle_supervisor("probe");
    assert_eq!(
        s.call("GET", "/_control/probe", None),
        (200, json!({"ok": true, "read": "(none)"}))
    );
    let (status, wrote) = s.call(
        "POST",
        "/_control/probe",
        Some(&json!({"marker": "marker-for-agent-test-n1"})),
    );
    assert_eq!(
        (status, wrote),
        (200, json!({"ok": true, "read": "marker-for-agent-test-n1"}))
    );
    assert_eq!(
        s.call("GET", "/_control/probe", None).1["read"],
        "marker-for-agent-test-n1"
    );
    let file = s.root.join("state/probe-marker");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "marker-for-agent-test-n1"
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&s.root.join("state")), 0o700);
    // A second container (its own state dir) does not see it.
    let other = idle_supervisor("probe-other");
    assert_eq!(
        other.call("GET", "/_control/probe", None).1["read"],
        "(none)"
    );
}

#[test]
fn start_before_provision_is_refused_and_activity_is_reported() {
    let s = idle_supervisor("order");
    let (status, body) = s.call("POST", "/_control/hermes/start", None);
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("not_provisioned"))
    );
    let (status, body) = s.call("GET", "/_control/hermes/ready", None);
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "status": "stopped", "pid": null, "ready": false})
        )
    );
    let (status, body) = s.call("GET", "/_control/hermes-api/v1/models", None);
    assert_eq!(
        (status, body["error"].as_str()),
        (502, Some("gateway_error"))
    );
    let (status, body) = s.call("GET", "/_control/activity", None);
    assert_eq!(status, 200);
    assert_eq!(body["inFlight"], 0);
}

#[test]
fn version_flag_prints_and_exits_without_a_token() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-supervisor"))
        .arg("--version")
        .env_remove("CONTROL_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("hermes-supervisor {}", env!("CARGO_PKG_VERSION"))
    );
}
