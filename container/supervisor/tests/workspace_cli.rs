//! The Google Workspace route against the real supervisor binary, with a
//! stand-in `gws` on `HERMES_GWS_BIN` that records what it received (argv
//! NUL-separated, its whole environment, uid/gid/groups, cwd) into the
//! workspace. What is under test is our handling of the token and the
//! arguments, not Google.
//!
//! The gate and the token checks run without root (they answer before the
//! boundary is needed); everything that runs `gws` needs root and prints
//! `SKIP` loudly without it. The last test installs the real pinned package
//! from the npm registry (and runs the real binary when one is at hand).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{is_root, random_token, repo_root, skip, write_exec, SUPERVISOR};
use hermes_protocol::workspace::{GOOGLE_API_HOSTS, GWS_TOKEN_ENV, GWS_VERSION, TOKEN_HEADER};
use serde_json::{json, Value};

const PATH: &str = "/_control/terminal/workspace";

/// Records everything into the workspace (HOME), prints nothing secret,
/// and behaves per its first argument: `leak` prints the token to stderr
/// (the supervisor must redact it), `spawn` leaves a background child
/// holding the token in its environment (it must be killed), `slow` sleeps.
const STAND_IN: &str = r#"#!/bin/sh
rec="$HOME/.gws-record"
printf '%s\0' "$@" > "$rec.argv"
{ echo "uid=$(id -u)"; echo "gid=$(id -g)"; echo "groups=$(id -G)"; echo "cwd=$(pwd)"; } > "$rec.id"
env -0 > "$rec.env"
echo "stand-in gws: $# args"
case "$1" in
  leak) echo "token is $GOOGLE_WORKSPACE_CLI_TOKEN" >&2 ;;
  spawn) sleep 60 </dev/null >/dev/null 2>&1 & ;;
  slow) sleep 3 ;;
esac
exit 3
"#;

struct Sup {
    child: Child,
    port: u16,
    token: String,
    root: PathBuf,
    stderr_log: PathBuf,
}

impl Drop for Sup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Sup {
    /// A supervisor with its own directories under /var/tmp (terminal
    /// commands get a private /tmp) and the stand-in as `HERMES_GWS_BIN`.
    fn start(tag: &str, enabled: Option<&str>) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = PathBuf::from("/var/tmp").join(format!(
            "hermes-gws-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        for d in [&root, &root.join("bin")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Outside the workspace the terminal's Landlock rules allow no
        // execution; the real binary lives under /usr. The stand-in sits in
        // the workspace, which the supervisor creates (0700, uid 10002).
        let gws = root.join("workspace/.stand-in/gws");
        let gateway = root.join("bin/gateway");
        write_exec(&gateway, "#!/bin/sh\nexec sleep 300\n");
        let token = random_token();
        let stderr_log = root.join("supervisor.stderr");
        let mut cmd = Command::new(SUPERVISOR);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("CONTROL_TOKEN", &token)
            .env("BOOT_ID", format!("boot-{tag}"))
            .env("HERMES_CONTROL_HOST", "127.0.0.1")
            .env("HERMES_CONTROL_PORT", "0")
            .env("HERMES_API_PORT", common::free_port().to_string())
            .env("HERMES_HOME_DIR", root.join("home"))
            .env("HERMES_STATE_DIR", root.join("state"))
            .env("HERMES_WORKSPACE_DIR", root.join("workspace"))
            .env("HERMES_LANDLOCK_CANARY_DIR", root.join("canary"))
            .env("HERMES_BIN", &gateway)
            .env(
                "HERMES_REQUIREMENTS",
                repo_root().join("container/requirements.txt"),
            )
            .env("HERMES_GWS_BIN", &gws)
            .env("EGRESS_ALLOWED_HOSTS", "github.com");
        if let Some(v) = enabled {
            cmd.env("HERMES_WORKSPACE_CLI_ENABLED", v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line.trim().rsplit(':').next().unwrap().parse().unwrap();
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stdout.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        let s = Sup {
            child,
            port,
            token,
            root,
            stderr_log,
        };
        // Wait for the boundary self-test, then install the stand-in.
        for _ in 0..200 {
            let (_, st) = s.call("GET", "/_control/terminal/status", None, None);
            if st["layers"]["identity"] != "not_established: self-test in progress" {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        if root_is_usable() {
            let dir = gws.parent().unwrap();
            std::fs::create_dir_all(dir).unwrap();
            write_exec(&gws, STAND_IN);
            std::os::unix::fs::chown(dir, Some(10002), Some(10002)).unwrap();
        }
        s
    }

    fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    /// `(status, JSON)`; `ws_token` goes into the token header when given.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        ws_token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = ureq::request(method, &format!("http://127.0.0.1:{}{path}", self.port))
            .timeout(Duration::from_secs(60))
            .set("Authorization", &format!("Bearer {}", self.token));
        if let Some(t) = ws_token {
            req = req.set(TOKEN_HEADER, t);
        }
        let result = match body {
            Some(b) => req
                .set("content-type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = response.status();
        let text = response.into_string().unwrap();
        (status, serde_json::from_str(&text).unwrap())
    }

    fn gws(&self, args: &str, ws_token: Option<&str>) -> (u16, Value) {
        self.call(
            "POST",
            PATH,
            Some(&json!({"args": args, "timeoutMs": 20_000})),
            ws_token,
        )
    }

    fn exec(&self, command: &str) -> Value {
        let (status, v) = self.call(
            "POST",
            "/_control/terminal/exec",
            Some(&json!({"command": command, "timeoutMs": 20_000})),
            None,
        );
        assert_eq!(status, 200, "{v}");
        v
    }

    fn record(&self, what: &str) -> Option<Vec<u8>> {
        std::fs::read(self.workspace().join(format!(".gws-record.{what}"))).ok()
    }

    fn clear_record(&self) {
        for what in ["argv", "id", "env"] {
            let _ = std::fs::remove_file(self.workspace().join(format!(".gws-record.{what}")));
        }
    }

    fn argv(&self) -> Vec<String> {
        let raw = self.record("argv").expect("gws did not run");
        let mut v: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8(a.to_vec()).unwrap())
            .collect();
        v.pop(); // after the last NUL
        v
    }

    fn env_pairs(&self) -> Vec<(String, String)> {
        let raw = self.record("env").expect("gws did not run");
        raw.split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| {
                let text = String::from_utf8(e.to_vec()).unwrap();
                let (k, v) = text.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }
}

fn root_is_usable() -> bool {
    is_root()
}

/// A token in the RFC 6750 alphabet with a marker the leak searches find.
fn oauth_token() -> String {
    format!("ya29.GWSLEAKCANARY-{}_x~y+z/w==", random_token())
}

fn assert_bad_request(status: u16, body: &Value, token: Option<&str>) {
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "bad_request", "{body}");
    if let Some(t) = token {
        assert!(!body.to_string().contains(t), "token echoed: {body}");
    }
}

#[test]
fn disabled_unless_exactly_true() {
    for value in [None, Some("1"), Some("TRUE"), Some("yes"), Some("true ")] {
        let s = Sup::start("off", value);
        let token = oauth_token();
        let (status, body) = s.gws("drive files list", Some(&token));
        assert_eq!(status, 404, "{value:?}: {body}");
        assert_eq!(body["error"], "workspace_cli_disabled", "{body}");
        // Not even a missing token or a bad body gets past the gate.
        let (status, body) = s.call("POST", PATH, Some(&json!({"bogus": 1})), None);
        assert_eq!(
            (status, body["error"].as_str()),
            (404, Some("workspace_cli_disabled"))
        );
        // The allowlist stays as configured.
        let (_, st) = s.call("GET", "/_control/terminal/status", None, None);
        assert_eq!(st["allowlist"], json!(["github.com"]), "{st}");
        assert!(s.record("argv").is_none());
    }
}

#[test]
fn token_is_required_validated_and_never_echoed() {
    let s = Sup::start("token", Some("true"));
    let (status, body) = s.gws("drive files list", None);
    assert_bad_request(status, &body, None);
    assert!(body["message"].as_str().unwrap().contains(TOKEN_HEADER));
    let long = "a".repeat(4_097);
    for bad in [
        "Bearer ya29.abc",
        "ya29.abc def",
        "ya29=abc",
        "ya29.abc;id",
        "ya29.$(id)",
        "==",
        &long,
    ] {
        let (status, body) = s.gws("drive files list", Some(bad));
        assert_bad_request(status, &body, Some(bad));
    }
    // A token in the body is refused, never used.
    let token = oauth_token();
    let (status, body) = s.call(
        "POST",
        PATH,
        Some(&json!({"args": "drive files list", "token": token})),
        Some(&token),
    );
    assert_bad_request(status, &body, Some(&token));
    // Widened, exactly: the configured list plus the Google API hosts.
    let (_, st) = s.call("GET", "/_control/terminal/status", None, None);
    let mut want = vec!["github.com".to_owned()];
    want.extend(GOOGLE_API_HOSTS.iter().map(|h| (*h).to_owned()));
    assert_eq!(st["allowlist"], json!(want), "{st}");
    assert!(s.record("argv").is_none());
    let log = std::fs::read_to_string(&s.stderr_log).unwrap();
    assert!(
        !log.contains("GWSLEAKCANARY"),
        "token in the supervisor log"
    );
}

#[test]
fn argv_environment_and_identity_reach_gws_exactly() {
    if !root_is_usable() {
        skip(
            "argv_environment_and_identity_reach_gws_exactly",
            "needs root (uid switch, namespaces, Landlock)",
        );
        return;
    }
    let s = Sup::start("argv", Some("true"));
    let token = oauth_token();
    let args = r#"gmail users drafts create --params '{"userId": "me"}' --json "{\"subject\": \"a b\"}" plain\ word '' x"#;
    let (status, body) = s.gws(args, Some(&token));
    assert_eq!(status, 200, "{body}");
    // gws's own exit code is a normal answer.
    assert_eq!(body["exitCode"], 3, "{body}");
    assert_eq!(body["stdout"], "stand-in gws: 11 args\n", "{body}");
    assert_eq!(body["timedOut"], false);
    assert!(!body.to_string().contains(&token));
    let want_argv = [
        "gmail",
        "users",
        "drafts",
        "create",
        "--params",
        r#"{"userId": "me"}"#,
        "--json",
        r#"{"subject": "a b"}"#,
        "plain word",
        "",
        "x",
    ];
    assert_eq!(s.argv(), want_argv);
    let id = String::from_utf8(s.record("id").unwrap()).unwrap();
    assert!(id.contains("uid=10002\n"), "{id}");
    assert!(id.contains("gid=10002\n"), "{id}");
    assert!(id.contains("groups=10002\n"), "{id}");
    assert!(
        id.contains(&format!("cwd={}\n", s.workspace().display())),
        "{id}"
    );
    // The environment: SPEC §8's twelve variables plus the token, under
    // the name gws reads, and nothing else.
    let env = s.env_pairs();
    // PWD/SHLVL/_ are the stand-in shell's own additions.
    let mut names: Vec<&str> = env
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !matches!(*k, "PWD" | "OLDPWD" | "SHLVL" | "_"))
        .collect();
    names.sort_unstable();
    let mut want = vec![
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TERM",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
        "DO_NOT_TRACK",
        GWS_TOKEN_ENV,
    ];
    want.sort_unstable();
    assert_eq!(names, want);
    let holders: Vec<&str> = env
        .iter()
        .filter(|(_, v)| v.contains(&token))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(holders, [GWS_TOKEN_ENV]);
    assert_eq!(
        env.iter().find(|(k, _)| k == GWS_TOKEN_ENV).unwrap().1,
        token
    );

    // cwd inside the workspace.
    s.exec("mkdir -p sub/dir");
    let (status, body) = s.call(
        "POST",
        PATH,
        Some(&json!({"args": "x", "cwd": "sub/dir"})),
        Some(&token),
    );
    assert_eq!(status, 200, "{body}");
    let id = String::from_utf8(s.record("id").unwrap()).unwrap();
    assert!(id.contains("/sub/dir\n"), "{id}");
    for cwd in ["../..", "/etc"] {
        let (status, body) = s.call(
            "POST",
            PATH,
            Some(&json!({"args": "x", "cwd": cwd})),
            Some(&token),
        );
        assert_bad_request(status, &body, Some(&token));
    }

    // No shell: metacharacters and control characters are refused before
    // anything runs.
    s.clear_record();
    for bad in [
        "drive files list; id",
        "drive files list | cat",
        "drive && id",
        "drive $(id)",
        "drive `id`",
        "drive > /workspace/x",
        "drive < /etc/passwd",
        "'quoted;still refused'",
        "drive\nid",
        "drive\tid",
        "'unterminated",
        "",
    ] {
        let (status, body) = s.gws(bad, Some(&token));
        assert_bad_request(status, &body, Some(&token));
    }
    let (status, body) = s.gws(&"a".repeat(4_001), Some(&token));
    assert_bad_request(status, &body, Some(&token));
    assert!(s.record("argv").is_none(), "gws ran for a refused request");
}

#[test]
fn the_token_does_not_outlive_the_invocation() {
    if !root_is_usable() {
        skip(
            "the_token_does_not_outlive_the_invocation",
            "needs root (uid switch, namespaces, Landlock)",
        );
        return;
    }
    let s = Sup::start("leak", Some("true"));
    let token = oauth_token();
    // A terminal user who planted a reader before the call: it scans every
    // environment it can open while gws runs.
    let reader = s.exec(
        "nohup sh -c 'while :; do cat /proc/[0-9]*/environ 2>/dev/null | tr \"\\0\" \"\\n\" \
         | grep GWSLEAK >> /workspace/.reader.out; sleep 0.05; done' >/dev/null 2>&1 & echo started",
    );
    assert_eq!(reader["exitCode"], 0, "{reader}");

    // gws prints the token: the answer carries [redacted] instead.
    let (status, body) = s.gws("leak", Some(&token));
    assert_eq!(status, 200, "{body}");
    assert!(!body.to_string().contains(&token), "{body}");
    assert!(
        body["stderr"]
            .as_str()
            .unwrap()
            .contains("token is [redacted]"),
        "{body}"
    );
    // gws leaves a background child holding the token: it is killed.
    let (status, body) = s.gws("spawn", Some(&token));
    assert_eq!(status, 200, "{body}");
    // A slow gws gives the reader time.
    let (status, body) = s.gws("slow", Some(&token));
    assert_eq!(status, 200, "{body}");
    // The stand-in's own records hold the token by design of this test;
    // remove them before looking for leaks.
    s.clear_record();
    std::thread::sleep(Duration::from_millis(300));

    // From the host, as root: no process anywhere still has it.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(environ) = std::fs::read(entry.path().join("environ")) {
            // This test's own token: other tests run their own in parallel.
            let text = String::from_utf8_lossy(&environ);
            assert!(
                !text.contains(&token),
                "process {:?} holds the token",
                entry.file_name()
            );
        }
    }
    // A later exec: not in its environment, not in any /proc/*/environ it
    // can read, not on disk under the workspace or /tmp. The pattern is
    // assembled in the shell so the command text itself does not hold it.
    let later = s.exec(
        "p=GWSLEAK; p=${p}CANARY; \
         env | grep -c \"$p\"; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c \"$p\"; \
         grep -rl --exclude=.reader.out \"$p\" /workspace /tmp 2>/dev/null | wc -l; \
         ls /proc | grep -c '^[0-9]'",
    );
    let lines: Vec<&str> = later["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(&lines[..3], ["0", "0", "0"], "{later}");
    assert!(
        lines[3].parse::<u32>().unwrap() > 3,
        "the scan saw processes"
    );
    // The reader, running all along as the same uid, never saw it either
    // (every terminal process has its own Landlock domain, so /proc/<gws>/
    // environ is closed to it).
    let seen = std::fs::read_to_string(s.workspace().join(".reader.out")).unwrap_or_default();
    assert!(!seen.contains("GWSLEAKCANARY"), "reader saw: {seen}");
    // The scan method works (a child of the same command is readable) and
    // a sibling command's environment is not: each terminal process has its
    // own Landlock domain, so the kernel refuses cross-command ptrace reads.
    s.exec("GWSSIBLING=marker1 sleep 5 </dev/null >/dev/null 2>&1 &");
    let same = s.exec(
        "GWSSAME=marker2 sleep 5 </dev/null >/dev/null 2>&1 & sleep 0.3; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^GWSSAME=marker2$'; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^GWSSIBLING=marker1$'",
    );
    let lines: Vec<&str> = same["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(lines, ["1", "0"], "{same}");
    // Nor did any file the supervisor or the guard wrote.
    assert_not_on_disk(&s.root, &token);
}

/// No regular file under `root` contains `token`.
fn assert_not_on_disk(root: &std::path::Path, token: &str) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let data = std::fs::read(&p).unwrap_or_default();
                assert!(
                    !String::from_utf8_lossy(&data).contains(token),
                    "token on disk in {}",
                    p.display()
                );
            }
        }
    }
}

/// Install the pinned package exactly as the image does (`npm ci
/// --ignore-scripts` from the committed lockfile) and check what arrived.
/// The package is a JavaScript wrapper whose postinstall downloads the
/// binary from GitHub releases; the binary itself comes from crates.io
/// (`google-workspace-cli`). When a built binary is at hand
/// (`HERMES_TEST_GWS_REAL_BIN`, or `/usr/local/bin/gws`) it is placed where
/// the wrapper looks and run through it: `gws --version` must print the pin.
#[test]
fn the_pinned_package_installs_and_prints_its_version() {
    let test = "the_pinned_package_installs_and_prints_its_version";
    if Command::new("npm").arg("--version").output().is_err() {
        skip(test, "npm is not installed");
        return;
    }
    let dir = common::temp_dir("gws-npm");
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(repo_root().join("container/gws").join(f), dir.join(f)).unwrap();
    }
    let out = Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if [
            "ENOTFOUND",
            "EAI_AGAIN",
            "ECONNREFUSED",
            "ETIMEDOUT",
            "network",
        ]
        .iter()
        .any(|m| err.contains(m))
        {
            skip(test, &format!("npm registry unreachable: {err}"));
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        panic!("npm ci failed: {err}");
    }
    let pkg_dir = dir.join("node_modules/@googleworkspace/cli");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(pkg_dir.join("package.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["version"], GWS_VERSION);
    assert_eq!(manifest["bin"]["gws"], "run.js");
    assert!(
        !pkg_dir.join("bin/gws").exists(),
        "--ignore-scripts: no downloaded binary"
    );
    let real = std::env::var_os("HERMES_TEST_GWS_REAL_BIN")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/local/bin/gws")))
        .filter(|p| p.is_file());
    let Some(real) = real else {
        skip(
            test,
            "npm package verified; no gws binary at hand to run (build one with \
             `cargo install --locked google-workspace-cli@0.22.5` and set HERMES_TEST_GWS_REAL_BIN)",
        );
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    std::fs::create_dir_all(pkg_dir.join("bin")).unwrap();
    std::fs::copy(&real, pkg_dir.join("bin/gws")).unwrap();
    std::fs::write(pkg_dir.join("bin/.version"), GWS_VERSION).unwrap();
    let out = Command::new("node")
        .arg(pkg_dir.join("run.js"))
        .arg("--version")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // A disclaimer line follows the version.
    assert_eq!(
        text.lines().next(),
        Some(format!("gws {GWS_VERSION}").as_str())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real binary (when one is at hand) through the route, as the terminal
/// user: it runs, and its API traffic goes to the egress guard (no other
/// way out of the namespace), which lets the Google API host through.
#[test]
fn the_real_gws_runs_inside_the_boundary() {
    let test = "the_real_gws_runs_inside_the_boundary";
    if !root_is_usable() {
        skip(test, "needs root (uid switch, namespaces, Landlock)");
        return;
    }
    let Some(real) = std::env::var_os("HERMES_TEST_GWS_REAL_BIN")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/local/bin/gws")))
        .filter(|p| p.is_file())
    else {
        skip(test, "no gws binary at hand (HERMES_TEST_GWS_REAL_BIN)");
        return;
    };
    let s = Sup::start("real", Some("true"));
    // In place of the stand-in (Landlock allows execution there).
    std::fs::copy(&real, s.workspace().join(".stand-in/gws")).unwrap();
    let token = oauth_token();
    let (status, body) = s.gws("--version", Some(&token));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["exitCode"], 0, "{body}");
    assert!(
        body["stdout"]
            .as_str()
            .unwrap()
            .starts_with(&format!("gws {GWS_VERSION}\n")),
        "{body}"
    );
    // A real call: gws sends it to the guard (www.googleapis.com, the
    // Discovery document, first); whether Google is reachable from here
    // does not matter.
    let (status, body) = s.gws(
        "drive files list --params '{\"pageSize\": 1}'",
        Some(&token),
    );
    assert_eq!(status, 200, "{body}");
    assert!(!body.to_string().contains(&token), "{body}");
    let log = std::fs::read_to_string(&s.stderr_log).unwrap();
    assert!(!log.contains(&token), "token in the supervisor log");
    // gws itself stores nothing of it (the variable bypasses its caches).
    assert_not_on_disk(&s.root, &token);
    let seen: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["host"]
                .as_str()
                .is_some_and(|h| h.ends_with("googleapis.com"))
        })
        .collect();
    assert!(!seen.is_empty(), "gws did not go through the guard: {log}");
    // Allowed by the widened list; without DNS here (tests) the guard may
    // then fail to resolve it, which is not an allowlist refusal.
    assert!(
        seen.iter()
            .all(|v| v["reason"] != "host is not on the allowlist"),
        "Google API host refused by the allowlist: {seen:?}"
    );
}
