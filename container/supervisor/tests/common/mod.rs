//! Shared harness of the supervisor's integration tests: start the real
//! binary on a free port with its own temp directories, speak HTTP to it,
//! and clean up by PID.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const SUPERVISOR: &str = env!("CARGO_BIN_EXE_hermes-supervisor");

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Print a loud skip line; the caller returns right after.
/// Written to the real stderr, not through `eprintln!`, so the test
/// harness's output capture cannot hide it.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP: {test}: {why}");
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The Hermes venv from scripts/setup-hermes.sh, if it is there.
pub fn hermes_venv_bin() -> Option<PathBuf> {
    let bin = repo_root().join(".venv/hermes/bin/hermes");
    bin.exists().then_some(bin)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh directory under /tmp, world-searchable so the hermes uid can
/// reach the home directory the supervisor creates inside it.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hermes-sup-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

pub fn random_token() -> String {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut bytes)
        .unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write an executable file (0755).
pub fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub struct Supervisor {
    pub child: Child,
    pub port: u16,
    pub api_port: u16,
    pub token: String,
    pub root: PathBuf,
}

pub struct Options {
    pub hermes_bin: PathBuf,
    pub mock_model_url: Option<String>,
    pub api_port: Option<u16>,
    pub requirements: Option<PathBuf>,
}

impl Options {
    pub fn with_bin(bin: &Path) -> Self {
        Self {
            hermes_bin: bin.to_owned(),
            mock_model_url: None,
            api_port: None,
            requirements: None,
        }
    }
}

impl Supervisor {
    pub fn start(tag: &str, opts: Options) -> Self {
        let root = temp_dir(tag);
        let token = random_token();
        let api_port = opts.api_port.unwrap_or_else(free_port);
        let mut cmd = Command::new(SUPERVISOR);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("CONTROL_TOKEN", &token)
            .env("BOOT_ID", format!("boot-{tag}"))
            .env("AGENT_ID", "agent-test")
            .env("HERMES_CONTROL_HOST", "127.0.0.1")
            .env("HERMES_CONTROL_PORT", "0")
            .env("HERMES_API_PORT", api_port.to_string())
            .env("HERMES_HOME_DIR", root.join("home"))
            .env("HERMES_STATE_DIR", root.join("state"))
            .env("HERMES_WORKSPACE_DIR", root.join("workspace"))
            .env("HERMES_LANDLOCK_CANARY_DIR", root.join("canary"))
            .env("HERMES_BIN", &opts.hermes_bin)
            .env(
                "HERMES_REQUIREMENTS",
                opts.requirements
                    .unwrap_or_else(|| repo_root().join("container/requirements.txt")),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(url) = &opts.mock_model_url {
            cmd.env("HERMES_MOCK_MODEL_URL", url);
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        assert!(
            line.starts_with("hermes-supervisor: control API listening on 127.0.0.1:"),
            "{line}"
        );
        // Keep draining stdout so Hermes' output never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stdout.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        Self {
            child,
            port,
            api_port,
            token,
            root,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    pub fn hermes_home(&self) -> PathBuf {
        self.root.join("home/.hermes")
    }

    /// `(status, JSON body)` of a control call with the right token.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call_with(
            method,
            path,
            body.map(|b| b.to_string()).as_deref(),
            Some(&format!("Bearer {}", self.token)),
        )
    }

    /// `(status, JSON body)` with any raw body and authorization.
    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        auth: Option<&str>,
    ) -> (u16, Value) {
        let mut req = ureq::request(method, &self.url(path)).timeout(Duration::from_secs(60));
        if let Some(a) = auth {
            req = req.set("Authorization", a);
        }
        let result = match body {
            Some(b) => req.set("content-type", "application/json").send_string(b),
            None => req.call(),
        };
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = response.status();
        let text = response.into_string().unwrap();
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("non-JSON answer {status}: {text}"));
        (status, value)
    }

    pub fn provision(&self, extra: Value) -> (u16, Value) {
        let mut body = json!({
            "apiServerKey": random_token(),
            "providerEnv": {},
            "vertexSaJson": null,
            "defaultModel": null,
            "approvalsMode": "manual",
            "keyFingerprint": "fp-test-1",
        });
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        self.call("POST", "/_control/provision", Some(&body))
    }

    /// Poll readiness until `ready == want` or `within` passes.
    pub fn wait_ready(&self, want: bool, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let (status, state) = self.call("GET", "/_control/hermes/ready", None);
            assert_eq!(status, 200, "{state}");
            if state["ready"] == want || Instant::now() > deadline {
                return state;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Stop Hermes through the API first so its tree is reaped, then the
        // supervisor itself, by PID.
        let _ = ureq::post(&self.url("/_control/hermes/stop"))
            .set("Authorization", &format!("Bearer {}", self.token))
            .timeout(Duration::from_secs(15))
            .call();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Run `argv` as `uid` (via setpriv) and report whether it succeeded.
pub fn run_as(uid: u32, argv: &[&str]) -> bool {
    Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ])
        .args(argv)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A value of `/proc/<pid>/status`, e.g. `CapEff`.
pub fn proc_status_field(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_owned())
    })
}

/// Is `pid` alive and not a zombie?
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

/// Every live PID whose process group is `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .map(|r| r.split_whitespace().nth(2) == Some(&pgid.to_string()))
                })
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}
