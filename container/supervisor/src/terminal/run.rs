//! Running one process inside the boundary and collecting what it printed.
//!
//! The child is spawned from the runtime thread (its parent-death signal is
//! tied to that thread), its `Child` handle is dropped at once and its exit
//! status comes from the supervisor's reaper — the only code that waits.
//! Each output stream keeps its first `cap` bytes and is drained (and
//! dropped) beyond that, so a chatty command never blocks on a full pipe.
//! On timeout the whole process group and every descendant found through
//! `/proc` get SIGKILL; the result is exit 124 with `timed_out`.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::sandbox::{self, ChildSandbox};
use crate::app::App;
use crate::procfs;

/// Exit code reported when the timeout killed the command (as `timeout(1)`).
pub const TIMEOUT_EXIT: i32 = 124;
/// After the main process exits, how long to keep reading output that
/// background children still hold open.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// One stream's kept bytes.
#[derive(Debug, Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

#[derive(Debug)]
pub struct RunOutput {
    pub exit_code: i32,
    pub stdout: Captured,
    pub stderr: Captured,
    pub timed_out: bool,
    pub duration: Duration,
}

/// What to run.
pub struct RunSpec<'a> {
    pub program: &'a Path,
    pub args: Vec<&'a OsStr>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub output_cap: usize,
    /// SIGKILL the process group (and every descendant still linked to it)
    /// as soon as the main process exits, so nothing it started outlives
    /// it — for invocations whose environment holds a secret.
    pub kill_group_after_exit: bool,
}

type Shared = std::sync::Arc<std::sync::Mutex<Captured>>;

async fn capture(pipe: Option<pipe::Receiver>, cap: usize, shared: Shared) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let Ok(mut out) = shared.lock() else {
                    return;
                };
                let room = cap.saturating_sub(out.bytes.len());
                if n > room {
                    out.truncated = true;
                }
                out.bytes.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

fn receiver<T: Into<std::os::fd::OwnedFd>>(stream: Option<T>) -> Option<pipe::Receiver> {
    stream.and_then(|s| pipe::Receiver::from_owned_fd(s.into()).ok())
}

fn kill_group_and_tree(root: u32) {
    let mut pids = procfs::tree_and_group(root);
    pids.insert(root);
    let Ok(pgid) = libc::pid_t::try_from(root) else {
        return;
    };
    signal_group(pgid);
    for pid in pids {
        if let Ok(p) = libc::pid_t::try_from(pid) {
            if p > 1 {
                signal_pid(p);
            }
        }
    }
}

fn signal_group(pgid: libc::pid_t) {
    // SAFETY: negative pid = the process group we created with setsid.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

fn signal_pid(pid: libc::pid_t) {
    // SAFETY: a PID from our own child's tree (via /proc parent links).
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Spawn `spec` inside `sandbox` and wait for it (or its timeout).
pub async fn run(
    app: &App,
    sandbox: &ChildSandbox,
    spec: RunSpec<'_>,
) -> std::io::Result<RunOutput> {
    let mut cmd = Command::new(spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child_sandbox = sandbox.clone();
    // SAFETY: `sandbox::enter` makes only async-signal-safe syscalls and
    // allocates nothing (everything was prepared before fork).
    unsafe {
        cmd.pre_exec(move || sandbox::enter(&child_sandbox));
    }
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    // No await between spawn and forget: the reaper runs on this thread,
    // so it cannot have reaped the child yet; a stale record of a reused
    // PID goes.
    app.reaper.forget(pid);
    let stdin = child.stdin.take();
    let stdout = receiver(child.stdout.take());
    let stderr = receiver(child.stderr.take());
    drop(child);

    let feed = async move {
        if let (Some(input), Some(stdin)) = (spec.stdin, stdin) {
            if let Ok(mut tx) = pipe::Sender::from_owned_fd(stdin.into()) {
                let _ = tx.write_all(&input).await;
            }
        }
    };
    let cap = spec.output_cap;
    let kill_after_exit = spec.kill_group_after_exit;
    let out_buf = Shared::default();
    let err_buf = Shared::default();
    let out_task = tokio::spawn(capture(stdout, cap, Shared::clone(&out_buf)));
    let err_task = tokio::spawn(capture(stderr, cap, Shared::clone(&err_buf)));
    let waited = async {
        feed.await;
        app.reaper.wait_exit(pid, spec.timeout).await
    };
    let (exit_code, timed_out) = match tokio::time::timeout(spec.timeout, waited).await {
        Ok(Some(code)) => {
            if kill_after_exit {
                kill_group_and_tree(pid);
            }
            (code, false)
        }
        Ok(None) | Err(_) => {
            kill_group_and_tree(pid);
            let _ = app.reaper.wait_exit(pid, Duration::from_secs(5)).await;
            // Stragglers that were mid-fork during the first round.
            kill_group_and_tree(pid);
            (TIMEOUT_EXIT, true)
        }
    };
    let duration = started.elapsed();
    let stdout = finish(out_task, &out_buf).await;
    let stderr = finish(err_task, &err_buf).await;
    Ok(RunOutput {
        exit_code,
        stdout,
        stderr,
        timed_out,
        duration,
    })
}

async fn finish(task: tokio::task::JoinHandle<()>, shared: &Shared) -> Captured {
    let abort = task.abort_handle();
    if tokio::time::timeout(DRAIN_GRACE, task).await.is_err() {
        // A background child still holds the pipe open: stop reading; the
        // child gets EPIPE/SIGPIPE on its next write.
        abort.abort();
    }
    shared
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default()
}
