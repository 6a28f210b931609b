//! Test harness: the real `wrangler dev` (workerd) started on free loopback
//! ports, secrets passed through a 0600 env file (never argv), stopped with
//! its whole process group when the handle drops.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A random lowercase hex string from the kernel's CSPRNG.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut buf)
        .unwrap();
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random valid agent id.
pub fn random_agent() -> String {
    format!("agent-{}", random_hex(6))
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hermes-edge-{tag}-{}", random_hex(6)));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Is the local toolchain for the Worker present? End-to-end tests skip
/// loudly (never pass silently) when it is not.
pub fn wrangler_available() -> Result<PathBuf, String> {
    let wrangler = repo_root().join("node_modules/.bin/wrangler");
    if !wrangler.exists() {
        return Err(format!(
            "{} missing: run scripts/setup.sh",
            wrangler.display()
        ));
    }
    if !repo_root().join("build/worker/shim.mjs").exists() {
        return Err("build/worker/shim.mjs missing: run scripts/build-worker.sh".into());
    }
    Ok(wrangler)
}

/// Skip the current test with a printed reason unless `HERMES_EDGE_REQUIRE_E2E=1`
/// (set by scripts/test.sh and CI), in which case a missing prerequisite fails.
#[macro_export]
macro_rules! require_or_skip {
    ($check:expr) => {
        match $check {
            Ok(v) => v,
            Err(reason) => {
                if std::env::var("HERMES_EDGE_REQUIRE_E2E").as_deref() == Ok("1") {
                    panic!("end-to-end prerequisite missing: {reason}");
                }
                eprintln!("SKIP {}: {reason}", module_path!());
                return;
            }
        }
    };
}

/// wrangler.toml as the tests run it: the same Worker bundle, bindings and
/// migrations, with absolute paths and without the `[build]` step. The
/// build's file watcher re-runs the build and reloads the Worker at a
/// moment of its choosing, failing requests in flight ("Your worker
/// restarted mid-request"); the harness builds once beforehand instead
/// (scripts/test.sh runs scripts/build-worker.sh).
pub fn test_config(bundle_dir: &Path) -> Result<String, String> {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("wrangler.toml")).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let mut in_build = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            in_build = trimmed == "[build]";
        }
        if in_build {
            continue;
        }
        let line = line
            .replace(
                "main = \"build/",
                &format!("main = \"{}/", bundle_dir.display()),
            )
            .replace(
                "image = \"./container/",
                &format!("image = \"{}/container/", root.display()),
            );
        out.push_str(&line);
        out.push('\n');
    }
    if out.contains("[build]")
        || !out.contains(&format!("{}/worker/shim.mjs", bundle_dir.display()))
    {
        return Err("could not derive the test wrangler config".into());
    }
    Ok(out)
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// A running `wrangler dev`.
pub struct WranglerDev {
    child: Child,
    pub base: String,
    _state: TempDir,
    log: PathBuf,
}

impl WranglerDev {
    /// Start wrangler dev with `env_file` contents (KEY=VALUE lines: the
    /// Worker's secrets and vars for this instance) and wait until it
    /// answers HTTP.
    pub fn start(env_file: &str) -> Result<Self, String> {
        let wrangler = wrangler_available()?;
        let state = TempDir::new("wrangler");
        let env_path = state.path().join("secrets.env");
        std::fs::write(&env_path, env_file).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&env_path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
        let port = free_port();
        let inspector = free_port();
        let log = state.path().join("wrangler.log");
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
        // A private copy of the bundle: a rebuild of build/ while the test
        // runs (another checkout's tests, a developer) must not reload
        // this Worker or hand workerd a half-written wasm file.
        let bundle = state.path().join("bundle");
        copy_dir(&repo_root().join("build"), &bundle)?;
        // The config sits alone in its own directory: wrangler watches the
        // config's directory (for .env files) and would reload the Worker
        // on every SQLite write if the persisted state lived below it.
        let config_dir = state.path().join("config");
        std::fs::create_dir_all(&config_dir).map_err(|e| e.to_string())?;
        let config = config_dir.join("wrangler.toml");
        std::fs::write(&config, test_config(&bundle)?).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(wrangler);
        cmd.current_dir(repo_root())
            .args(["dev", "--ip", "127.0.0.1", "--port", &port.to_string()])
            .arg("--config")
            .arg(&config)
            .args(["--inspector-port", &inspector.to_string()])
            .arg("--env-file")
            .arg(&env_path)
            .arg("--persist-to")
            .arg(state.path().join("state"))
            .args([
                "--show-interactive-dev-session=false",
                "--log-level",
                "info",
            ])
            .env("WRANGLER_SEND_METRICS", "false")
            .env("CI", "true")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .process_group(0);
        let child = cmd.spawn().map_err(|e| format!("spawn wrangler: {e}"))?;
        let dev = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _state: state,
            log,
        };
        dev.wait_ready(Duration::from_secs(120))?;
        Ok(dev)
    }

    fn wait_ready(&self, budget: Duration) -> Result<(), String> {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            // Any HTTP answer from the Worker (our 404 JSON) means ready.
            if let Ok(resp) = Response::get(&format!("{}/", self.base), &[]) {
                if resp.status == 404 && resp.json()["error"] == "not_found" {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!(
            "wrangler dev not ready within {budget:?}; log:\n{}",
            self.log_tail()
        ))
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for WranglerDev {
    fn drop(&mut self) {
        // wrangler spawns workerd: kill the whole group.
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on a process group we created; no memory involved.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A response read fully, whatever its status.
pub struct Response {
    pub status: u16,
    pub body: String,
    pub content_type: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn send(
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Result<Self, String> {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        let mut req = agent.request(method, url);
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let result = match body {
            Some(b) => req.send_string(b),
            None => req.call(),
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(e.to_string()),
        };
        let status = resp.status();
        let content_type = resp.header("content-type").unwrap_or("").to_owned();
        let body = resp.into_string().map_err(|e| e.to_string())?;
        Ok(Self {
            status,
            body,
            content_type,
        })
    }

    pub fn get(url: &str, headers: &[(&str, &str)]) -> Result<Self, String> {
        Self::send("GET", url, headers, None)
    }
}

/// A running `hermes-devhost` (the local container runtime).
pub struct Devhost {
    child: Child,
    pub url: String,
    pub state_dir: TempDir,
    log: PathBuf,
}

pub fn devhost_available() -> Result<PathBuf, String> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target"));
    let bin = target.join("debug/hermes-devhost");
    let sup = target.join("debug/hermes-supervisor");
    if !bin.exists() || !sup.exists() {
        return Err(
            "hermes-devhost/hermes-supervisor not built: cargo build --workspace --bins".into(),
        );
    }
    if !repo_root().join(".venv/hermes/bin/hermes").exists() {
        return Err(".venv/hermes missing: run scripts/setup.sh".into());
    }
    Ok(bin)
}

impl Devhost {
    pub fn start() -> Result<Self, String> {
        let bin = devhost_available()?;
        let state_dir = TempDir::new("devhost");
        let log = state_dir.path().join("devhost.log");
        let port = free_port();
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--state-dir")
            .arg(state_dir.path().join("state"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("spawn devhost: {e}"))?;
        let dh = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            state_dir,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if Response::get(&format!("{}/healthz", dh.url), &[]).is_ok_and(|r| r.status == 200) {
                return Ok(dh);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("devhost not ready: {}", dh.log_tail()))
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Is the agent's container running, according to the runtime?
    pub fn running(&self, agent: &str) -> bool {
        let r = Response::get(&format!("{}/containers/agent:{agent}", self.url), &[]).unwrap();
        r.status == 200 && r.json()["running"] == true
    }
}

impl Drop for Devhost {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SIGTERM: devhost destroys every container it started.
        // SAFETY: kill(2) on the process group we created.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// The whole local stack: devhost + wrangler dev wired to it.
pub struct Stack {
    // Field order: wrangler stops before devhost.
    pub dev: WranglerDev,
    pub devhost: Devhost,
    pub secret: String,
}

impl Stack {
    /// `extra` are additional KEY=VALUE lines for the Worker's environment.
    pub fn start(extra: &str) -> Result<Self, String> {
        let devhost = Devhost::start()?;
        let secret = random_hex(24);
        let env = format!(
            "SERVICE_AUTH_SECRET={secret}\nHERMES_CONTAINER_RUNTIME=devhost\nDEVHOST_URL={}\n{extra}",
            devhost.url
        );
        let dev = WranglerDev::start(&env)?;
        Ok(Self {
            dev,
            devhost,
            secret,
        })
    }

    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.secret)
    }

    /// Call a hosted route for `agent` with optional JSON body and extra headers.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        agent: &str,
        body: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Response {
        let bearer = self.bearer();
        let mut headers = vec![
            ("authorization", bearer.as_str()),
            ("x-divinci-agent-id", agent),
        ];
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        headers.extend_from_slice(extra);
        let body = body.or(if method == "POST" { Some("") } else { None });
        Response::send(method, &self.dev.url(path), &headers, body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: {e}\n{}\n{}",
                self.dev.log_tail(),
                self.devhost.log_tail()
            )
        })
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// First file named `name` below `dir` (depth-first).
pub fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        let ft = entry.file_type().ok()?;
        if ft.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}
