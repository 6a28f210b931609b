//! scripts/deploy.sh and scripts/rotate-secret.sh against a fake `wrangler`
//! (tests/fixtures/fake-wrangler, which logs its argv and the key names of
//! the secrets it receives, never their values) and a fake deployed Worker:
//! a small HTTP server on 127.0.0.1:0 with the gate of SPEC §2 (reading the
//! secrets the fake wrangler stored), a propagation delay, and just enough
//! of the hosted routes for the smoke scripts — including a "leaky" mode in
//! which agents see each other's markers, so the isolation smoke must fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::{repo_root, TempDir};

// ------------------------------------------------------------ fake Worker

#[derive(Default)]
struct WorkerState {
    /// Requests answered as if the secrets were not deployed yet.
    stale_requests: usize,
    /// Every request to the gate with no agent id: (authorization, had agent header).
    gate_polls: Vec<(String, u16)>,
    /// Requests that carried an agent id (these would reach an object).
    agent_requests: usize,
    markers: HashMap<String, String>,
    leaky: bool,
    counter: u64,
}

struct FakeWorker {
    url: String,
    state: Arc<Mutex<WorkerState>>,
}

fn valid_agent(id: &str) -> bool {
    let b = id.as_bytes();
    (8..=64).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn json_error(status: u16, code: &str) -> (u16, String) {
    (
        status,
        serde_json::json!({"ok": false, "error": code, "message": "fake"}).to_string(),
    )
}

impl FakeWorker {
    fn start(secrets_store: PathBuf, stale_requests: usize, leaky: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(WorkerState {
            stale_requests,
            leaky,
            ..Default::default()
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                let store = secrets_store.clone();
                std::thread::spawn(move || handle(stream, &state, &store));
            }
        });
        Self { url, state }
    }
}

fn handle(mut stream: TcpStream, state: &Mutex<WorkerState>, store: &Path) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let (status, text) = respond(state, store, &method, &path, &headers);
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn respond(
    state: &Mutex<WorkerState>,
    store: &Path,
    method: &str,
    path: &str,
    headers: &HashMap<String, String>,
) -> (u16, String) {
    let mut st = state.lock().unwrap();
    let auth = headers.get("authorization").cloned().unwrap_or_default();
    let agent = headers
        .get("x-divinci-agent-id")
        .map(|a| a.trim().to_owned());
    let answer = (|| {
        if !path.starts_with("/hosted/") {
            return json_error(404, "not_found");
        }
        // Gate (SPEC §2), with the secrets as the fake wrangler stored them.
        let secrets: serde_json::Value = std::fs::read_to_string(store)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let primary = secrets["SERVICE_AUTH_SECRET"].as_str().unwrap_or("");
        let next = secrets["SERVICE_AUTH_SECRET_NEXT"].as_str().unwrap_or("");
        if st.stale_requests > 0 || primary.is_empty() {
            st.stale_requests = st.stale_requests.saturating_sub(1);
            return json_error(503, "hosted_mode_not_configured");
        }
        let token = auth.strip_prefix("Bearer ").unwrap_or("");
        if token.is_empty() || (token != primary && (next.is_empty() || token != next)) {
            return json_error(401, "unauthorized");
        }
        let Some(agent) = agent.clone().filter(|a| !a.is_empty()) else {
            return json_error(400, "missing_agent_id");
        };
        if !valid_agent(&agent) {
            return json_error(400, "invalid_agent_id");
        }
        st.agent_requests += 1;
        let slot = if st.leaky {
            "shared".to_owned()
        } else {
            agent.clone()
        };
        let ok = |v: serde_json::Value| (200, v.to_string());
        match (method, path) {
            ("POST", "/hosted/agent/probe") => {
                st.counter += 1;
                let marker = format!("marker-for-{agent}-{:08x}", st.counter);
                st.markers.insert(slot, marker.clone());
                ok(
                    serde_json::json!({"ok": true, "agentId": agent, "wrote": marker, "read": marker, "isolated": true}),
                )
            }
            ("GET", "/hosted/agent/probe") => {
                let read = st
                    .markers
                    .get(&slot)
                    .cloned()
                    .unwrap_or_else(|| "(none)".into());
                ok(serde_json::json!({"ok": true, "agentId": agent, "read": read}))
            }
            ("GET", "/hosted/agent/boot-check") => ok(
                serde_json::json!({"ok": true, "agentId": agent, "nonRoot": true, "gatewayUser": "hermes"}),
            ),
            ("POST", "/hosted/agent/v1/chat/completions") => ok(serde_json::json!({
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}}]
            })),
            ("POST", "/hosted/agent/evict") => {
                ok(serde_json::json!({"ok": true, "agentId": agent, "status": "evicted"}))
            }
            _ => json_error(404, "not_found"),
        }
    })();
    if agent.is_none() {
        st.gate_polls.push((auth, answer.0));
    }
    answer
}

// --------------------------------------------------------------- harness

struct Run {
    code: i32,
    output: String,
}

struct Env {
    dir: TempDir,
    extra: Vec<(String, String)>,
}

impl Env {
    fn new() -> Self {
        let dir = TempDir::new("deploy");
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        Self { dir, extra: vec![] }
    }
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("wrangler.log")
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("cloudflare-secrets.json")
    }
    fn secrets_dir(&self) -> PathBuf {
        self.dir.path().join("secrets")
    }
    fn set(&mut self, k: &str, v: &str) -> &mut Self {
        self.extra.push((k.into(), v.into()));
        self
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
    /// The `call <step>` lines of the log, as steps.
    fn calls(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter_map(|l| l.strip_prefix("call "))
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    }
    fn secret_in_file(&self, env: &str, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.secrets_dir().join(format!("{env}.env"))).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
    }

    fn run(&self, script: &str, args: &[&str], stdin: Option<&str>) -> Run {
        self.run_with(script, args, stdin, &[])
    }

    /// Run a script with this environment plus `more` variables.
    fn run_with(
        &self,
        script: &str,
        args: &[&str],
        stdin: Option<&str>,
        more: &[(&str, &str)],
    ) -> Run {
        let log = self.log_path();
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("scripts").join(script))
            .args(args)
            .current_dir(repo_root())
            .env("FAKE_WRANGLER_LOG", &log)
            .env("FAKE_WRANGLER_SECRETS_STATE", self.store())
            .env(
                "WRANGLER_BIN",
                repo_root().join("tests/fixtures/fake-wrangler"),
            )
            .env("HERMES_SECRETS_DIR", self.secrets_dir())
            .env("HERMES_DEPLOY_STATE_DIR", self.dir.path().join("state"))
            .env("HERMES_DEPLOY_DOCKER", "no")
            .env(
                "HERMES_DEPLOY_BUILD_CMD",
                format!("echo 'call build' >> '{}'", log.display()),
            )
            .env(
                "HERMES_DEPLOY_CONFIG_TEST_CMD",
                format!("echo 'call config-test' >> '{}'", log.display()),
            )
            .env("HERMES_DEPLOY_POLL_INTERVAL", "0.05")
            .env("HERMES_DEPLOY_LIVE_TIMEOUT", "20")
            .env("SMOKE_TIMEOUT", "10")
            .env("TMPDIR", self.dir.path().join("tmp"))
            .env_remove("HERMES_EDGE_URL")
            .env_remove("SERVICE_AUTH_SECRET")
            .env_remove("SERVICE_AUTH_SECRET_FILE")
            .env_remove("FAKE_WRANGLER_FAIL")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.extra {
            cmd.env(k, v);
        }
        for (k, v) in more {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Run {
            code: out.status.code().unwrap_or(-1),
            output,
        }
    }

    /// No scratch files (header files with secrets) are left behind.
    fn assert_scratch_removed(&self) {
        let left: Vec<_> = std::fs::read_dir(self.dir.path().join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "scratch left behind: {left:?}");
    }
}

fn tools_available() -> Result<(), String> {
    for tool in ["jq", "curl"] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!("{tool} is not installed (apt-get install {tool})"));
        }
    }
    Ok(())
}

fn assert_order(calls: &[String], want: &[&str]) {
    let got: Vec<&str> = calls.iter().map(String::as_str).collect();
    assert_eq!(got, want, "wrangler/check calls in order");
}

fn assert_not_leaked(env: &Env, run: &Run, secret: &str) {
    assert!(
        secret.len() >= 16,
        "secret too short to grep for: {secret:?}"
    );
    assert!(
        !env.log().contains(secret),
        "secret value in wrangler's argv/log:\n{}",
        env.log()
    );
    assert!(!run.output.contains(secret), "secret value in the output");
}

// ----------------------------------------------------------------- tests

#[test]
fn staging_all_deploys_sets_secrets_waits_until_live_smokes_and_tears_down() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    let worker = FakeWorker::start(env.store(), 3, false);
    env.set("HERMES_EDGE_URL", &worker.url);
    let run = env.run("deploy.sh", &["staging", "all"], None);
    assert_eq!(run.code, 0, "{}", run.output);

    assert_order(
        &env.calls(),
        &[
            "build",
            "config-test",
            "dry-run",
            "deploy",
            "secret-bulk",
            "delete",
            "containers-list",
            "containers-delete",
        ],
    );
    let log = env.log();
    // Bundle-only dry run (no Docker engine), said so, config without containers.
    assert!(
        log.contains("config dry-run containers=0"),
        "dry run must use a config without [[containers]]:\n{log}"
    );
    assert!(
        run.output
            .contains("container image (container/Dockerfile) is NOT checked"),
        "{}",
        run.output
    );
    assert!(
        log.contains("call deploy argv: deploy --env staging\n"),
        "{log}"
    );
    assert!(log.contains("call secret-bulk argv: secret bulk --env staging\n"));
    assert!(log.contains("keys=SERVICE_AUTH_SECRET\n"), "{log}");
    // The staging containers application, not production's.
    assert!(log.contains("containers delete 11111111-1111-4111-8111-111111111111"));
    assert!(!log.contains("22222222-2222-4222-8222-222222222222"));

    // A generated secret, saved 0600, never in argv or output.
    let secret = env
        .secret_in_file("staging", "SERVICE_AUTH_SECRET")
        .expect("generated secret saved");
    assert_eq!(secret.len(), 64, "32 random bytes, hex");
    let mode = std::fs::metadata(env.secrets_dir().join("staging.env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_not_leaked(&env, &run, &secret);

    // The wait: 503 (not live) first, then 400 missing_agent_id, every poll
    // with the new bearer and without an agent id (no container started).
    let st = worker.state.lock().unwrap();
    let codes: Vec<u16> = st.gate_polls.iter().map(|p| p.1).collect();
    let first_400 = codes.iter().position(|c| *c == 400).expect("went live");
    assert!(
        first_400 >= 3,
        "polled through the stale answers: {codes:?}"
    );
    assert!(codes[..first_400].iter().all(|c| *c == 503), "{codes:?}");
    assert!(st.gate_polls[..=first_400]
        .iter()
        .all(|(auth, _)| auth == &format!("Bearer {secret}")));
    // Smoke ran against the deployment: both smoke scripts reported.
    assert!(st.agent_requests > 0);
    drop(st);
    assert!(run.output.contains("9 passed, 0 failed"), "{}", run.output);
    assert!(run.output.contains("6 passed, 0 failed"), "{}", run.output);
    assert!(
        !env.store().exists(),
        "the Worker (and its secrets) were deleted"
    );
    env.assert_scratch_removed();
}

#[test]
fn all_tears_down_when_deploy_fails() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    env.set("FAKE_WRANGLER_FAIL", "deploy");
    env.set("HERMES_EDGE_URL", "http://127.0.0.1:9");
    let run = env.run("deploy.sh", &["staging", "all"], None);
    assert_ne!(run.code, 0, "{}", run.output);
    assert_order(
        &env.calls(),
        &[
            "build",
            "config-test",
            "dry-run",
            "deploy",
            "delete",
            "containers-list",
            "containers-delete",
        ],
    );
    assert!(
        run.output.contains("error: wrangler deploy failed") && run.output.contains("next:"),
        "{}",
        run.output
    );
    assert!(run.output.contains("tearing down anyway"));
    env.assert_scratch_removed();
}

#[test]
fn all_tears_down_when_smoke_fails_and_isolation_smoke_catches_leaks() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    let worker = FakeWorker::start(env.store(), 0, true);
    env.set("HERMES_EDGE_URL", &worker.url);
    let run = env.run("deploy.sh", &["staging", "all"], None);
    assert_ne!(run.code, 0, "{}", run.output);
    assert!(
        run.output
            .contains("FAIL - agent B does not see A's marker"),
        "{}",
        run.output
    );
    assert!(run.output.contains("error: a smoke test failed"));
    let calls = env.calls();
    assert_eq!(
        &calls[calls.len() - 3..],
        ["delete", "containers-list", "containers-delete"],
        "{calls:?}"
    );
}

#[test]
fn deploy_fails_with_advice_when_the_secrets_never_go_live() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    let worker = FakeWorker::start(env.store(), usize::MAX, false);
    env.set("HERMES_EDGE_URL", &worker.url)
        .set("HERMES_DEPLOY_LIVE_TIMEOUT", "1");
    let run = env.run("deploy.sh", &["staging", "deploy"], None);
    assert_ne!(run.code, 0, "{}", run.output);
    assert!(
        run.output
            .contains("did not accept the new SERVICE_AUTH_SECRET in time")
            && run.output.contains("next:"),
        "{}",
        run.output
    );
    assert!(
        worker.state.lock().unwrap().agent_requests == 0,
        "no agent request"
    );
    // deploy alone never tears down.
    assert!(!env.calls().contains(&"delete".to_owned()));
}

#[test]
fn production_refuses_teardown_and_unconfirmed_deploys() {
    require_or_skip!(tools_available());
    let env = Env::new();
    for (args, needle) in [
        (
            vec!["production", "teardown"],
            "refusing to 'teardown' production",
        ),
        (vec!["production", "all"], "refusing to 'all' production"),
        (vec!["production", "deploy"], "without --yes-production"),
    ] {
        let run = env.run("deploy.sh", &args, None);
        assert_ne!(run.code, 0, "{args:?}: {}", run.output);
        assert!(run.output.contains(needle), "{args:?}: {}", run.output);
    }
    assert!(env.calls().is_empty(), "nothing ran: {:?}", env.calls());

    // Confirmed, but production never gets a generated secret.
    let run = env.run(
        "deploy.sh",
        &["production", "deploy", "--yes-production"],
        None,
    );
    assert_ne!(run.code, 0);
    assert!(
        run.output.contains("production needs SERVICE_AUTH_SECRET"),
        "{}",
        run.output
    );
    assert!(env.calls().is_empty(), "refused before building");
    assert!(!env.secrets_dir().join("production.env").exists());
}

#[test]
fn production_deploy_with_confirmation_and_secrets_from_stdin() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    let worker = FakeWorker::start(env.store(), 1, false);
    env.set("HERMES_EDGE_URL", &worker.url);
    let primary = common::random_hex(24);
    let openai = format!("sk-test-{}", common::random_hex(12));
    let input =
        serde_json::json!({"SERVICE_AUTH_SECRET": primary, "OPENAI_API_KEY": openai}).to_string();
    let run = env.run(
        "deploy.sh",
        &[
            "production",
            "deploy",
            "--yes-production",
            "--secrets-stdin",
        ],
        Some(&input),
    );
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(env
        .log()
        .contains("keys=OPENAI_API_KEY,SERVICE_AUTH_SECRET\n"));
    assert!(env.log().contains("deploy --env production"));
    assert_not_leaked(&env, &run, &primary);
    assert_not_leaked(&env, &run, &openai);
    assert!(
        !env.secrets_dir().exists(),
        "nothing generated or saved for production"
    );
}

#[test]
fn secrets_files_must_be_gitignored_private_and_well_formed() {
    require_or_skip!(tools_available());
    let env = Env::new();
    // A tracked file: git would commit it.
    let run = env.run(
        "deploy.sh",
        &["staging", "deploy", "--secrets-file", "wrangler.toml"],
        None,
    );
    assert_ne!(run.code, 0);
    assert!(run.output.contains("not gitignored"), "{}", run.output);

    // Readable by others.
    let loose = env.dir.path().join("loose.env");
    std::fs::write(&loose, "SERVICE_AUTH_SECRET=abcdefabcdefabcdef\n").unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = env.run(
        "deploy.sh",
        &[
            "staging",
            "deploy",
            "--secrets-file",
            loose.to_str().unwrap(),
        ],
        None,
    );
    assert_ne!(run.code, 0);
    assert!(run.output.contains("chmod 600"), "{}", run.output);

    // A malformed line: named by number, its content not shown.
    let bad = env.dir.path().join("bad.env");
    std::fs::write(
        &bad,
        "SERVICE_AUTH_SECRET=abcdefabcdefabcdef\nthis-is-a-secret-looking-line\n",
    )
    .unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = env.run(
        "deploy.sh",
        &["staging", "deploy", "--secrets-file", bad.to_str().unwrap()],
        None,
    );
    assert_ne!(run.code, 0);
    assert!(
        run.output.contains("line 2 is not KEY=VALUE"),
        "{}",
        run.output
    );
    assert!(!run.output.contains("this-is-a-secret-looking-line"));
    assert!(
        env.calls().is_empty(),
        "refused before any build or wrangler call"
    );
}

#[test]
fn config_check_failure_stops_before_any_deploy() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    env.set("HERMES_DEPLOY_CONFIG_TEST_CMD", "exit 1");
    let run = env.run("deploy.sh", &["staging", "deploy"], None);
    assert_ne!(run.code, 0);
    assert!(run.output.contains("wrangler.toml breaks an invariant"));
    assert_order(&env.calls(), &["build"]);

    let mut env = Env::new();
    env.set("FAKE_WRANGLER_FAIL", "dry-run");
    let run = env.run("deploy.sh", &["staging", "deploy"], None);
    assert_ne!(run.code, 0);
    assert!(run.output.contains("dry run failed"), "{}", run.output);
    assert_order(&env.calls(), &["build", "config-test", "dry-run"]);
}

#[test]
fn with_a_docker_engine_the_dry_run_checks_the_real_config() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    env.set("HERMES_DEPLOY_DOCKER", "yes")
        .set("FAKE_WRANGLER_FAIL", "deploy");
    let run = env.run("deploy.sh", &["staging", "deploy"], None);
    assert_ne!(run.code, 0);
    let log = env.log();
    assert!(
        log.lines()
            .any(|l| l.starts_with("call dry-run argv: deploy --dry-run --env staging --outdir ")),
        "{log}"
    );
    assert!(
        !log.contains("--config"),
        "the real wrangler.toml, containers included: {log}"
    );
    assert!(!run.output.contains("NOT checked"));
    assert!(run.output.contains("Worker bundle AND container image"));
}

#[test]
fn url_comes_from_wrangler_output_and_standalone_smoke_uses_it() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    // Secrets fail to set: deploy stops after saving the printed URL.
    env.set("FAKE_WRANGLER_FAIL", "secret-bulk");
    let run = env.run("deploy.sh", &["staging", "deploy"], None);
    assert_ne!(run.code, 0);
    assert!(run.output.contains("setting the secrets failed"));
    let saved = std::fs::read_to_string(env.dir.path().join("state/staging.url")).unwrap();
    assert_eq!(
        saved.trim(),
        "https://hermes-edge-staging.fake-account.workers.dev"
    );

    // `smoke` alone: the saved URL, the secret from the environment.
    let worker = FakeWorker::start(env.store(), 0, false);
    std::fs::write(env.dir.path().join("state/staging.url"), &worker.url).unwrap();
    let secret = common::random_hex(20);
    std::fs::write(
        env.store(),
        serde_json::json!({"SERVICE_AUTH_SECRET": secret}).to_string(),
    )
    .unwrap();
    let run = env.run_with(
        "deploy.sh",
        &["staging", "smoke"],
        None,
        &[("SERVICE_AUTH_SECRET", &secret), ("FAKE_WRANGLER_FAIL", "")],
    );
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(run.output.contains("smoke passed"));
}

#[test]
fn teardown_reports_failures_with_next_steps() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    env.set("FAKE_WRANGLER_FAIL", "containers-list");
    let run = env.run("deploy.sh", &["staging", "teardown"], None);
    assert_ne!(run.code, 0);
    assert!(
        run.output.contains("teardown of staging was incomplete") && run.output.contains("next:")
    );
    assert_order(&env.calls(), &["delete", "containers-list"]);

    // No application left: nothing to delete, success.
    let mut env = Env::new();
    env.set("FAKE_WRANGLER_APPS", "[]");
    let run = env.run("deploy.sh", &["staging", "teardown"], None);
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(run.output.contains("already deleted"));
    assert_order(&env.calls(), &["delete", "containers-list"]);
}

#[test]
fn rotation_begin_promote_finish_verified_against_the_gate() {
    require_or_skip!(tools_available());
    let mut env = Env::new();
    let old = common::random_hex(24);
    std::fs::create_dir(env.secrets_dir()).unwrap();
    let file = env.secrets_dir().join("staging.env");
    std::fs::write(&file, format!("SERVICE_AUTH_SECRET={old}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        env.store(),
        serde_json::json!({"SERVICE_AUTH_SECRET": old}).to_string(),
    )
    .unwrap();
    let worker = FakeWorker::start(env.store(), 0, false);
    env.set("HERMES_EDGE_URL", &worker.url);

    // Production needs confirmation.
    let run = env.run("rotate-secret.sh", &["production", "begin"], None);
    assert_ne!(run.code, 0);
    assert!(run.output.contains("--yes-production"));

    let run = env.run("rotate-secret.sh", &["staging", "begin"], None);
    assert_eq!(run.code, 0, "{}", run.output);
    let new = env
        .secret_in_file("staging", "SERVICE_AUTH_SECRET_NEXT")
        .unwrap();

    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET"),
        Some(old.clone())
    );
    assert!(run.output.contains(&format!(
        "saved as SERVICE_AUTH_SECRET_NEXT in {}",
        file.display()
    )));
    assert_not_leaked(&env, &run, &new);
    assert!(run.output.contains("the new value authenticates"));

    // begin again: never a new value while NEXT is unpromoted (callers may
    // already use it); the saved value is re-sent instead.
    let run = env.run("rotate-secret.sh", &["staging", "begin"], None);
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(run
        .output
        .contains("re-sending the saved SERVICE_AUTH_SECRET_NEXT"));
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET_NEXT"),
        Some(new.clone())
    );
    let other = common::random_hex(20);
    let run = env.run(
        "rotate-secret.sh",
        &["staging", "begin", "--from-stdin"],
        Some(&format!("{other}\n")),
    );
    assert_ne!(run.code, 0);
    assert!(
        run.output.contains("a rotation is in progress"),
        "{}",
        run.output
    );
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET_NEXT"),
        Some(new.clone())
    );
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.store()).unwrap()).unwrap();
    assert_eq!(stored["SERVICE_AUTH_SECRET_NEXT"], new.as_str());

    // Finishing before promoting would lock switched callers out.
    let run = env.run("rotate-secret.sh", &["staging", "finish"], None);
    assert_ne!(run.code, 0);
    assert!(run.output.contains("has not been promoted"));

    // A failed promote changes nothing locally.
    let run = env.run_with(
        "rotate-secret.sh",
        &["staging", "promote"],
        None,
        &[("FAKE_WRANGLER_FAIL", "secret-bulk")],
    );
    assert_ne!(run.code, 0);
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET"),
        Some(old.clone())
    );

    let run = env.run("rotate-secret.sh", &["staging", "promote"], None);
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(
        run.output.contains("the old value no longer authenticates"),
        "{}",
        run.output
    );
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET"),
        Some(new.clone())
    );

    let run = env.run("rotate-secret.sh", &["staging", "finish"], None);
    assert_eq!(run.code, 0, "{}", run.output);
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET_NEXT"),
        None
    );
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.store()).unwrap()).unwrap();
    assert_eq!(stored, serde_json::json!({"SERVICE_AUTH_SECRET": new}));

    let log = env.log();
    assert!(log.contains("keys=SERVICE_AUTH_SECRET_NEXT\n"), "{log}");
    assert!(log
        .contains("call secret-delete argv: secret delete SERVICE_AUTH_SECRET_NEXT --env staging"));
    assert!(!log.contains(&old) && !log.contains(&new), "{log}");
    let polls = worker.state.lock().unwrap().gate_polls.clone();
    assert!(polls
        .iter()
        .any(|(a, c)| a == &format!("Bearer {old}") && *c == 401));
    assert!(polls.iter().all(|(_, c)| *c != 503));
}

#[test]
fn rotation_from_stdin_refuses_weak_values() {
    require_or_skip!(tools_available());
    let env = Env::new();
    let run = env.run(
        "rotate-secret.sh",
        &["staging", "begin", "--from-stdin"],
        Some("short\n"),
    );
    assert_ne!(run.code, 0);
    assert!(run.output.contains("at least 16 printable characters"));
    assert!(env.calls().is_empty());
    let value = common::random_hex(20);
    let run = env.run(
        "rotate-secret.sh",
        &["staging", "begin", "--from-stdin"],
        Some(&format!("{value}\n")),
    );
    assert_eq!(run.code, 0, "{}", run.output);
    assert_eq!(
        env.secret_in_file("staging", "SERVICE_AUTH_SECRET_NEXT"),
        Some(value.clone())
    );
    assert_not_leaked(&env, &run, &value);
}
