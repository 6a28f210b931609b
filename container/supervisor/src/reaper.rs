//! The one place that waits for child processes.
//!
//! As PID 1 (and as a child subreaper outside a container) the supervisor
//! inherits every orphan of the Hermes tree — MCP servers whose parent died —
//! and must reap them or they stay zombies. Reaping with `waitpid(-1)` would
//! steal exit statuses from anyone else waiting on a specific child, so no
//! other code waits: children are spawned with `std::process::Command`, their
//! `Child` handles dropped, and interested callers ask this registry for the
//! exit status by PID.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Exit statuses of reaped children, by PID.
pub struct Reaper {
    exits: Mutex<HashMap<u32, i32>>,
    generation: watch::Sender<u64>,
}

impl Reaper {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            exits: Mutex::new(HashMap::new()),
            generation: watch::channel(0).0,
        })
    }

    /// Become the reaper of orphaned descendants (no-op effect as PID 1).
    pub fn become_subreaper() -> std::io::Result<()> {
        // SAFETY: plain prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Start the background task that reaps on every `SIGCHLD` (and once a
    /// second, in case a signal was coalesced before the handler existed).
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let mut sigchld = signal(SignalKind::child())?;
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                this.reap_all();
                tokio::select! {
                    _ = sigchld.recv() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
        Ok(())
    }

    /// Reap every child that has exited.
    pub fn reap_all(&self) {
        let mut reaped = false;
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: valid pointer to a local int.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                -1
            };
            if let Ok(mut exits) = self.exits.lock() {
                // Bounded: orphans nobody asks about are forgotten.
                if exits.len() > 4096 {
                    exits.clear();
                }
                exits.insert(pid.unsigned_abs(), code);
            }
            reaped = true;
        }
        if reaped {
            self.generation.send_modify(|g| *g = g.wrapping_add(1));
        }
    }

    /// The exit code of `pid` if it has been reaped (128+N for signal N).
    pub fn exit_status(&self, pid: u32) -> Option<i32> {
        self.exits.lock().ok().and_then(|e| e.get(&pid).copied())
    }

    /// Forget a PID before it is reused for a new child.
    pub fn forget(&self, pid: u32) {
        if let Ok(mut exits) = self.exits.lock() {
            exits.remove(&pid);
        }
    }

    /// Wait up to `timeout` for `pid` to be reaped.
    pub async fn wait_exit(&self, pid: u32, timeout: Duration) -> Option<i32> {
        let mut rx = self.generation.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            self.reap_all();
            if let Some(code) = self.exit_status(pid) {
                return Some(code);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                // Sender never drops while `self` lives; poll instead.
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(_) => return self.exit_status(pid),
            }
        }
    }
}
