//! The boot self-test: a probe process started exactly like a terminal
//! command (same sandbox, same environment) reports what it can see and
//! do; [`evaluate`] (pure) turns those facts into a status per layer.
//!
//! A layer is `established` only if every fact it depends on is exactly
//! what the boundary promises — a direct connection succeeding, an extra
//! environment variable, a readable credential directory or a writable
//! path outside the workspace each fail their layer, with the reason.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use hermes_protocol::terminal::LAYER_ESTABLISHED;

/// What the probe must try.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRequest {
    /// Addresses that must be unreachable (supervisor, Hermes, v4 and v6).
    pub forbidden: Vec<SocketAddr>,
    /// The guard, which must answer (a literal-IP CONNECT → 403).
    pub guard: SocketAddr,
    pub hermes_home: PathBuf,
    /// A world-writable directory outside the workspace: only Landlock
    /// stops a write there.
    pub canary_dir: PathBuf,
    pub workspace: PathBuf,
}

/// What the probe saw. Results are `ok` or `error:<kind>`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeFacts {
    /// `Uid:`, `Gid:`, `Groups:`, `Cap*:`, `NoNewPrivs:` lines of
    /// `/proc/self/status`, by key.
    pub status: BTreeMap<String, String>,
    pub session_leader: bool,
    pub controlling_tty: String,
    pub open_fds: Vec<i32>,
    pub nproc_limit: u64,
    /// `unshare(CLONE_NEWUSER|CLONE_NEWNET)` (must be refused by seccomp).
    pub unshare: String,
    pub env: Vec<String>,
    pub connects: Vec<(SocketAddr, String)>,
    pub dns_udp: String,
    pub guard_status_line: String,
    pub list_hermes_home: String,
    pub read_env_file: String,
    pub write_canary: String,
    pub write_workspace: String,
    pub write_tmp: String,
}

fn result<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("error:{:?}", e.kind()),
    }
}

fn fd_is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD on any integer is harmless; -1/EBADF means closed.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

fn session_leader() -> bool {
    // SAFETY: getsid(0)/getpid cannot fail for the calling process.
    unsafe { libc::getsid(0) == libc::getpid() }
}

fn nproc_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to a local rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) };
    limit.rlim_cur
}

fn try_unshare() -> String {
    // SAFETY: a refused unshare changes nothing; if it were allowed it
    // would only move this short-lived probe into new namespaces.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) };
    if rc == 0 {
        "ok".into()
    } else {
        format!("error:{:?}", std::io::Error::last_os_error().kind())
    }
}

fn guard_answer(guard: SocketAddr) -> String {
    let attempt = || -> std::io::Result<String> {
        let mut s = TcpStream::connect_timeout(&guard, Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")?;
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf)?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        Ok(text.lines().next().unwrap_or_default().to_owned())
    };
    attempt().unwrap_or_else(|e| format!("error:{:?}", e.kind()))
}

fn try_create(path: PathBuf) -> String {
    let r = std::fs::File::create(&path);
    if r.is_ok() {
        let _ = std::fs::remove_file(&path);
    }
    result(r)
}

/// Runs in the helper, inside the boundary.
pub fn collect(req: &ProbeRequest) -> ProbeFacts {
    // First, before this function opens anything itself.
    let open_fds = (0..1024).filter(|fd| fd_is_open(*fd)).collect();
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| {
            matches!(*k, "Uid" | "Gid" | "Groups" | "NoNewPrivs") || k.starts_with("Cap")
        })
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    let pid = std::process::id();
    ProbeFacts {
        status,
        session_leader: session_leader(),
        controlling_tty: result(std::fs::File::open("/dev/tty")),
        open_fds,
        nproc_limit: nproc_limit(),
        unshare: try_unshare(),
        env: std::env::vars_os()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect(),
        connects: req
            .forbidden
            .iter()
            .map(|a| {
                (
                    *a,
                    result(TcpStream::connect_timeout(a, Duration::from_secs(1))),
                )
            })
            .collect(),
        dns_udp: result(UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"\0", "8.8.8.8:53"))),
        guard_status_line: guard_answer(req.guard),
        list_hermes_home: result(std::fs::read_dir(&req.hermes_home)),
        read_env_file: result(std::fs::read(req.hermes_home.join(".env"))),
        write_canary: try_create(req.canary_dir.join(format!("probe-{pid}"))),
        write_workspace: try_create(req.workspace.join(format!(".hermes-probe-{pid}"))),
        write_tmp: try_create(PathBuf::from(format!("/tmp/.hermes-probe-{pid}"))),
    }
}

/// What the layers promise, for [`evaluate`].
#[derive(Debug, Clone)]
pub struct Expected {
    pub uid: u32,
    pub env: Vec<String>,
    pub nproc_limit: u64,
}

fn verdict(failures: Vec<String>) -> String {
    if failures.is_empty() {
        LAYER_ESTABLISHED.to_owned()
    } else {
        format!("not_established: self-test failed: {}", failures.join("; "))
    }
}

fn identity_failures(f: &ProbeFacts, want: &Expected) -> Vec<String> {
    let mut bad = Vec::new();
    let ids = [want.uid; 4].map(|u| u.to_string()).join(" ");
    for key in ["Uid", "Gid"] {
        if f.status.get(key) != Some(&ids) {
            bad.push(format!("{key} is not {}", want.uid));
        }
    }
    if f.status.get("Groups").is_none_or(|g| !g.is_empty()) {
        bad.push("supplementary groups present".into());
    }
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        if f.status.get(key).map(String::as_str) != Some("0000000000000000") {
            bad.push(format!("{key} not empty"));
        }
    }
    if f.status.get("NoNewPrivs").map(String::as_str) != Some("1") {
        bad.push("no_new_privs not set".into());
    }
    if !f.session_leader {
        bad.push("not in its own session".into());
    }
    if f.controlling_tty == "ok" {
        bad.push("has a controlling terminal".into());
    }
    if f.open_fds != [0, 1, 2] {
        bad.push(format!("inherited descriptors {:?}", f.open_fds));
    }
    if f.nproc_limit != want.nproc_limit {
        bad.push("process limit not applied".into());
    }
    if f.unshare == "ok" {
        bad.push("could create namespaces (seccomp filter missing)".into());
    }
    bad
}

fn network_failures(f: &ProbeFacts) -> Vec<String> {
    let mut bad: Vec<String> = f
        .connects
        .iter()
        .filter(|(_, r)| r == "ok")
        .map(|(a, _)| format!("direct connection to {a} succeeded"))
        .collect();
    if f.dns_udp == "ok" {
        bad.push("UDP to 8.8.8.8:53 could be sent".into());
    }
    if !f.guard_status_line.starts_with("HTTP/1.1 403") {
        bad.push(format!(
            "egress guard did not refuse a literal CONNECT ({})",
            f.guard_status_line
        ));
    }
    bad
}

fn filesystem_failures(f: &ProbeFacts) -> Vec<String> {
    let mut bad = Vec::new();
    if f.list_hermes_home == "ok" {
        bad.push("Hermes home is listable".into());
    }
    if f.read_env_file == "ok" {
        bad.push("Hermes .env is readable".into());
    }
    if f.write_canary == "ok" {
        bad.push("a world-writable directory outside the workspace is writable".into());
    }
    if f.write_workspace != "ok" {
        bad.push(format!("workspace not writable ({})", f.write_workspace));
    }
    if f.write_tmp != "ok" {
        bad.push(format!("private /tmp not writable ({})", f.write_tmp));
    }
    bad
}

/// Layer → `established` or why not.
pub fn evaluate(f: &ProbeFacts, want: &Expected) -> BTreeMap<String, String> {
    let mut env = f.env.clone();
    env.sort();
    let mut want_env = want.env.clone();
    want_env.sort();
    let env_failures = if env == want_env {
        Vec::new()
    } else {
        vec!["environment differs from the allowlist".to_owned()]
    };
    BTreeMap::from([
        ("identity".to_owned(), verdict(identity_failures(f, want))),
        ("environment".to_owned(), verdict(env_failures)),
        ("network".to_owned(), verdict(network_failures(f))),
        ("filesystem".to_owned(), verdict(filesystem_failures(f))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> (ProbeFacts, Expected) {
        let zero = "0000000000000000".to_owned();
        let mut status = BTreeMap::new();
        status.insert("Uid".into(), "10002 10002 10002 10002".into());
        status.insert("Gid".into(), "10002 10002 10002 10002".into());
        status.insert("Groups".into(), String::new());
        for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            status.insert(k.into(), zero.clone());
        }
        status.insert("NoNewPrivs".into(), "1".into());
        let facts = ProbeFacts {
            status,
            session_leader: true,
            controlling_tty: "error:Other".into(),
            open_fds: vec![0, 1, 2],
            nproc_limit: 256,
            unshare: "error:PermissionDenied".into(),
            env: vec!["B=2".into(), "A=1".into()],
            connects: vec![(
                "127.0.0.1:8080".parse().unwrap(),
                "error:ConnectionRefused".into(),
            )],
            dns_udp: "error:NetworkUnreachable".into(),
            guard_status_line: "HTTP/1.1 403 Forbidden".into(),
            list_hermes_home: "error:PermissionDenied".into(),
            read_env_file: "error:PermissionDenied".into(),
            write_canary: "error:PermissionDenied".into(),
            write_workspace: "ok".into(),
            write_tmp: "ok".into(),
        };
        let want = Expected {
            uid: 10002,
            env: vec!["A=1".into(), "B=2".into()],
            nproc_limit: 256,
        };
        (facts, want)
    }

    #[test]
    fn all_good_is_established() {
        let (f, w) = good();
        for (layer, status) in evaluate(&f, &w) {
            assert_eq!(status, "established", "{layer}");
        }
    }

    #[test]
    fn each_failure_fails_its_layer() {
        type Mutation = fn(&mut ProbeFacts);
        let rows: [(&str, Mutation, &str); 11] = [
            (
                "identity",
                |f| {
                    f.status.insert("Uid".into(), "0 0 0 0".into());
                },
                "Uid is not 10002",
            ),
            ("identity", |f| f.open_fds.push(7), "inherited descriptors"),
            ("identity", |f| f.session_leader = false, "own session"),
            ("identity", |f| f.unshare = "ok".into(), "seccomp"),
            (
                "identity",
                |f| {
                    f.status.insert("CapBnd".into(), "000001ffffffffff".into());
                },
                "CapBnd",
            ),
            (
                "environment",
                |f| f.env.push("CONTROL_TOKEN=x".into()),
                "differs",
            ),
            (
                "network",
                |f| f.connects[0].1 = "ok".into(),
                "127.0.0.1:8080 succeeded",
            ),
            (
                "network",
                |f| f.guard_status_line = "error:ConnectionRefused".into(),
                "guard",
            ),
            (
                "filesystem",
                |f| f.read_env_file = "ok".into(),
                ".env is readable",
            ),
            (
                "filesystem",
                |f| f.write_canary = "ok".into(),
                "world-writable",
            ),
            (
                "filesystem",
                |f| f.write_workspace = "error:PermissionDenied".into(),
                "workspace not writable",
            ),
        ];
        for (layer, mutate, reason) in rows {
            let (mut f, w) = good();
            mutate(&mut f);
            let layers = evaluate(&f, &w);
            assert!(
                layers[layer].starts_with("not_established"),
                "{layer}: {}",
                layers[layer]
            );
            assert!(layers[layer].contains(reason), "{layer}: {}", layers[layer]);
            let others = layers.iter().filter(|(l, _)| l.as_str() != layer);
            for (l, s) in others {
                assert_eq!(s, "established", "{l} after mutating {layer}");
            }
        }
    }
}
