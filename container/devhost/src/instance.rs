//! One running container: spawning its supervisor inside the sandbox,
//! watching it exit, signalling it and killing every process it started.
//!
//! In namespace mode the supervisor is PID 1 of its own PID namespace; the
//! kernel kills the whole namespace when PID 1 dies, so `kill` is one
//! SIGKILL through a pidfd (which cannot hit a recycled pid), followed by a
//! check in `/proc` that nothing of that namespace is left. In reduced mode
//! it is a process group, and a process that left the group (setsid) can
//! escape: that is why reduced mode is announced loudly.

use crate::config::Isolation;
use crate::procfs;
use crate::sandbox::{self, SandboxPlan};
use crate::userns;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::watch;

/// Lines of container output kept for `GET /containers/{id}/logs`.
const LOG_LINES: usize = 500;
/// Descriptor number bwrap writes its info JSON to.
const INFO_FD: i32 = 3;
/// How long bwrap may take to set up the sandbox.
const SANDBOX_SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the kernel may take to tear down a killed container.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// How a container's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code; `128 + n` when killed by signal `n`.
    pub code: i32,
    pub signal: Option<i32>,
}

/// Everything needed to spawn one container.
pub struct SpawnSpec<'a> {
    pub id: &'a str,
    pub isolation: Isolation,
    pub bwrap: &'a Path,
    pub supervisor_bin: &'a Path,
    /// Host directory of this container (holds home/, workspace/, tmp/).
    pub dir: &'a Path,
    pub env: BTreeMap<String, String>,
    pub root_entries: &'a [sandbox::RootEntry],
    pub hidden: Vec<PathBuf>,
    pub ro_binds: Vec<PathBuf>,
    pub file_overlays: Vec<(PathBuf, PathBuf)>,
    /// Host uid/gid that is 0 inside, when the container gets its own range.
    pub uid_base: Option<u32>,
}

/// The kill handle of the container's processes.
enum Handle {
    Namespace {
        /// pidfd of the outer bwrap process (our child).
        bwrap: OwnedFd,
        /// pidfd of PID 1 of the container (the supervisor).
        init: OwnedFd,
        init_host_pid: u32,
        pid_ns: u64,
    },
    Group {
        leader: OwnedFd,
        pgid: u32,
    },
}

/// A started container.
pub struct Instance {
    handle: Handle,
    exit: watch::Receiver<Option<ExitInfo>>,
    logs: Arc<Mutex<VecDeque<String>>>,
    pub started_at: Instant,
}

/// Host subdirectories of a container directory, in image order.
pub fn private_dirs(dir: &Path) -> [(PathBuf, u32); 4] {
    [
        (dir.join("home"), 0o755),
        (dir.join("workspace"), 0o755),
        (dir.join("state"), 0o700),
        (dir.join("tmp"), 0o1777),
    ]
}

/// Creates a fresh, empty container directory.
pub fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    for (path, mode) in private_dirs(dir) {
        std::fs::create_dir_all(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

impl Instance {
    /// Spawns the supervisor. Returns once the sandbox is set up (namespace
    /// mode) or the process exists (reduced mode); it does not wait for the
    /// supervisor to listen, like Cloudflare's `start`.
    pub async fn spawn(spec: SpawnSpec<'_>) -> Result<Self, String> {
        let logs = Arc::new(Mutex::new(VecDeque::new()));
        match spec.isolation {
            Isolation::Namespaces => Self::spawn_namespaced(spec, logs).await,
            Isolation::Reduced => Self::spawn_group(spec, logs),
        }
    }

    async fn spawn_namespaced(
        spec: SpawnSpec<'_>,
        logs: Arc<Mutex<VecDeque<String>>>,
    ) -> Result<Self, String> {
        let (info_read, info_write) = procfs::info_pipe().map_err(|e| format!("pipe: {e}"))?;
        let plan = SandboxPlan {
            root_entries: spec.root_entries.to_vec(),
            home: spec.dir.join("home"),
            workspace: spec.dir.join("workspace"),
            tmp: spec.dir.join("tmp"),
            state: spec.dir.join("state"),
            hostname: spec.id.chars().take(63).collect(),
            hidden: spec.hidden,
            ro_binds: spec.ro_binds,
            file_overlays: spec.file_overlays,
            info_fd: INFO_FD,
            command: vec![OsString::from(spec.supervisor_bin)],
        };
        let mut cmd = Command::new(spec.bwrap);
        cmd.args(sandbox::bwrap_args(&plan));
        configure_common(&mut cmd, &spec.env, spec.dir);
        let raw_write = info_write.as_raw_fd();
        // SAFETY: the closure only calls dup2/fcntl, which are
        // async-signal-safe, on a descriptor this process owns.
        unsafe {
            cmd.pre_exec(move || procfs::install_fd_in_child(raw_write, INFO_FD));
        }
        let handshake = match spec.uid_base {
            Some(base) => {
                Some(userns::Handshake::start(base).map_err(|e| format!("uid map helper: {e}"))?)
            }
            None => None,
        };
        if let Some(h) = &handshake {
            let (report, wait) = h.child_fds();
            // SAFETY: only async-signal-safe syscalls (see userns).
            unsafe {
                cmd.pre_exec(move || userns::enter_in_child(report, wait));
            }
        }
        let spawned = cmd.spawn();
        drop(info_write);
        let mapped = handshake.map(userns::Handshake::finish);
        let mut child = spawned.map_err(|e| format!("cannot run {}: {e}", spec.bwrap.display()))?;
        if let Some(Err(e)) = mapped {
            let _ = child.start_kill();
            return Err(format!("uid map: {e}"));
        }
        let bwrap_pid = child.id().ok_or("bwrap exited at once")?;
        let bwrap = procfs::pidfd_open(bwrap_pid).map_err(|e| format!("pidfd_open(bwrap): {e}"))?;
        forward_output(spec.id, &mut child, &logs);

        let info = tokio::time::timeout(SANDBOX_SETUP_TIMEOUT, read_info(info_read)).await;
        let (init_host_pid, pid_ns) = match info {
            Ok(Some(pair)) => pair,
            Ok(None) | Err(_) => {
                let _ = procfs::pidfd_signal(&bwrap, libc::SIGKILL);
                let _ = tokio::time::timeout(TEARDOWN_TIMEOUT, child.wait()).await;
                // Give the output forwarders a moment to drain bwrap's error.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let tail = tail_lines(&logs, 5).join(" | ");
                return Err(format!("sandbox setup failed: {tail}"));
            }
        };
        let init =
            procfs::pidfd_open(init_host_pid).map_err(|e| format!("pidfd_open(init): {e}"))?;
        // The pidfd names whatever process has that pid now; if it is not in
        // the container's namespace, PID 1 already died (and the pid may be
        // a stranger's): never signal through it.
        if procfs::pid_namespace(init_host_pid) != Some(pid_ns) {
            let _ = procfs::pidfd_signal(&bwrap, libc::SIGKILL);
            let _ = tokio::time::timeout(TEARDOWN_TIMEOUT, child.wait()).await;
            let tail = tail_lines(&logs, 5).join(" | ");
            return Err(format!("the supervisor exited during start: {tail}"));
        }
        let exit = watch_exit(child);
        Ok(Self {
            handle: Handle::Namespace {
                bwrap,
                init,
                init_host_pid,
                pid_ns,
            },
            exit,
            logs,
            started_at: Instant::now(),
        })
    }

    fn spawn_group(
        spec: SpawnSpec<'_>,
        logs: Arc<Mutex<VecDeque<String>>>,
    ) -> Result<Self, String> {
        let mut cmd = Command::new(spec.supervisor_bin);
        configure_common(&mut cmd, &spec.env, &spec.dir.join("workspace"));
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", spec.supervisor_bin.display()))?;
        let pid = child.id().ok_or("supervisor exited at once")?;
        let leader = procfs::pidfd_open(pid).map_err(|e| format!("pidfd_open: {e}"))?;
        forward_output(spec.id, &mut child, &logs);
        let exit = watch_exit(child);
        Ok(Self {
            handle: Handle::Group { leader, pgid: pid },
            exit,
            logs,
            started_at: Instant::now(),
        })
    }

    /// `None` while running.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    pub fn running(&self) -> bool {
        self.exit_info().is_none()
    }

    /// Host pid of the container's main process (the supervisor).
    pub fn host_pid(&self) -> u32 {
        match &self.handle {
            Handle::Namespace { init_host_pid, .. } => *init_host_pid,
            Handle::Group { pgid, .. } => *pgid,
        }
    }

    pub fn logs(&self) -> Vec<String> {
        self.logs
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Sends `signal` to the container's main process, like the runtime's
    /// `signal(n)` (PID 1 ignores signals it has no handler for).
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        match &self.handle {
            Handle::Namespace { init, .. } => procfs::pidfd_signal(init, signal),
            Handle::Group { leader, .. } => procfs::pidfd_signal(leader, signal),
        }
    }

    /// Kills every process of the container and waits until none is left.
    /// Returns the pids that survived the deadline (empty on success).
    pub async fn kill_all(&self) -> Vec<u32> {
        match &self.handle {
            Handle::Namespace {
                bwrap,
                init,
                pid_ns,
                ..
            } => {
                // PID 1 dying takes the whole namespace with it; bwrap (its
                // parent) reaps it at once and exits. Killing bwrap first
                // would leave PID 1 a zombie for the host's init to reap,
                // which can take long.
                let _ = procfs::pidfd_signal(init, libc::SIGKILL);
                self.wait_exit().await;
                if self.running() {
                    let _ = procfs::pidfd_signal(bwrap, libc::SIGKILL);
                    self.wait_exit().await;
                }
                let ns = *pid_ns;
                wait_until_empty(|| procfs::pids_in_namespace(ns)).await
            }
            Handle::Group { leader, pgid } => {
                let pgid = *pgid;
                let _ = procfs::pidfd_signal(leader, libc::SIGKILL);
                if !procfs::pids_in_group(pgid).is_empty() {
                    let _ = procfs::kill_group(pgid, libc::SIGKILL);
                }
                self.wait_exit().await;
                wait_until_empty(|| {
                    let left = procfs::pids_in_group(pgid);
                    if !left.is_empty() {
                        let _ = procfs::kill_group(pgid, libc::SIGKILL);
                    }
                    left
                })
                .await
            }
        }
    }

    async fn wait_exit(&self) {
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(TEARDOWN_TIMEOUT, exit.wait_for(|e| e.is_some())).await;
    }
}

/// Environment, stdio and process group shared by both modes. The
/// environment is *replaced*, never inherited from devhost.
fn configure_common(cmd: &mut Command, env: &BTreeMap<String, String>, cwd: &Path) {
    cmd.env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a Ctrl-C in devhost's terminal reaches devhost
        // (which destroys containers in order), not the containers directly.
        .process_group(0)
        .kill_on_drop(true);
}

/// Parses bwrap's info JSON (`{"child-pid": N, "pid-namespace": M, ..}`).
/// Reads until a complete object parses; does not wait for EOF.
async fn read_info(fd: OwnedFd) -> Option<(u32, u64)> {
    let mut file = tokio::fs::File::from_std(std::fs::File::from(fd));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let n = file.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&buf) {
            let pid = u32::try_from(v.get("child-pid")?.as_u64()?).ok()?;
            let ns = v.get("pid-namespace")?.as_u64()?;
            return Some((pid, ns));
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
}

/// Reaps the child on its own task and publishes how it ended.
fn watch_exit(mut child: tokio::process::Child) -> watch::Receiver<Option<ExitInfo>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        use std::os::unix::process::ExitStatusExt;
        let info = match child.wait().await {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => ExitInfo { code, signal: None },
                (None, Some(sig)) => ExitInfo {
                    code: 128 + sig,
                    signal: Some(sig),
                },
                (None, None) => ExitInfo {
                    code: -1,
                    signal: None,
                },
            },
            Err(_) => ExitInfo {
                code: -1,
                signal: None,
            },
        };
        let _ = tx.send(Some(info));
    });
    rx
}

/// Copies the container's stdout/stderr to devhost's stderr, each line
/// prefixed with the container id, keeping the last lines for `/logs`.
fn forward_output(
    id: &str,
    child: &mut tokio::process::Child,
    logs: &Arc<Mutex<VecDeque<String>>>,
) {
    if let Some(out) = child.stdout.take() {
        spawn_forwarder(id.to_owned(), out, logs.clone());
    }
    if let Some(err) = child.stderr.take() {
        spawn_forwarder(id.to_owned(), err, logs.clone());
    }
}

fn spawn_forwarder<R: AsyncRead + Unpin + Send + 'static>(
    id: String,
    stream: R,
    logs: Arc<Mutex<VecDeque<String>>>,
) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            crate::log!("[{id}] {line}");
            if let Ok(mut logs) = logs.lock() {
                if logs.len() == LOG_LINES {
                    logs.pop_front();
                }
                logs.push_back(line);
            }
        }
    });
}

fn tail_lines(logs: &Arc<Mutex<VecDeque<String>>>, n: usize) -> Vec<String> {
    logs.lock()
        .map(|l| l.iter().rev().take(n).rev().cloned().collect())
        .unwrap_or_default()
}

async fn wait_until_empty(mut left: impl FnMut() -> Vec<u32>) -> Vec<u32> {
    let deadline = Instant::now() + TEARDOWN_TIMEOUT;
    loop {
        let pids = left();
        if pids.is_empty() || Instant::now() >= deadline {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
