//! Per-container uid ranges: each container runs in its own user namespace
//! where uids 0..65535 map to a host range of its own, so container root is
//! not host root, and uid 10001 in one container is a different host uid
//! from uid 10001 in another (a file of one container's Hermes is foreign
//! to every other container's Hermes, on any shared path).
//!
//! bubblewrap cannot set a range map itself, so devhost does it around the
//! `exec` of bwrap: the forked child `unshare(CLONE_NEWUSER)`s, reports its
//! pid on a pipe and waits; a helper thread in devhost (host root) writes
//! `/proc/<pid>/{uid,gid}_map`; the child then becomes uid/gid 0 of the new
//! namespace (full capabilities there, none on the host) and execs bwrap,
//! which sees itself as root and builds the sandbox inside that namespace.
//! A helper *thread* is needed because `spawn` blocks until the exec.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// First host uid handed to containers (above any normal host account).
pub const BASE_START: u32 = 0x10_0000;
/// Ids per container (0..65535 inside).
pub const RANGE: u32 = 0x1_0000;
/// Most containers with a uid range at once.
pub const MAX_RANGES: u32 = 4096;

/// Where range claims are recorded, machine-wide.
const CLAIM_DIR: &str = "/run/hermes-devhost/uid-ranges";

/// Hands out disjoint host ranges — disjoint across every devhost process
/// on the machine, not just this one: several devhosts (parallel test
/// suites, a developer's stack) must never give two containers the same
/// host uids. A range is claimed by holding an exclusive `flock` on its
/// claim file; the kernel drops the lock when the range is released or the
/// process dies, so a crashed devhost leaks nothing.
#[derive(Default)]
pub struct RangePool {
    used: Mutex<std::collections::BTreeMap<u32, std::fs::File>>,
}

/// Try to take the exclusive lock without waiting.
fn try_lock(file: &std::fs::File) -> bool {
    // SAFETY: flock(2) on a descriptor we own; no memory is involved.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

impl RangePool {
    /// The host uid that is uid 0 of a fresh range.
    pub fn allocate(&self) -> Option<u32> {
        let mut used = self.used.lock().ok()?;
        std::fs::create_dir_all(CLAIM_DIR).ok()?;
        for index in 0..MAX_RANGES {
            if used.contains_key(&index) {
                continue;
            }
            let Ok(file) = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(format!("{CLAIM_DIR}/{index}"))
            else {
                continue;
            };
            if try_lock(&file) {
                used.insert(index, file);
                return Some(BASE_START + index * RANGE);
            }
        }
        None
    }

    pub fn release(&self, base: u32) {
        if let Ok(mut used) = self.used.lock() {
            // Dropping the file releases the lock.
            used.remove(&((base - BASE_START) / RANGE));
        }
    }
}

/// `"<inside> <outside> <count>\n"` for a range starting at `base`.
pub fn id_map(base: u32) -> String {
    format!("0 {base} {RANGE}\n")
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::procfs::info_pipe()
}

/// Both ends of the handshake: the child's (used after fork) and the
/// parent's helper thread.
pub struct Handshake {
    child_report: OwnedFd,
    child_wait: OwnedFd,
    helper: std::thread::JoinHandle<io::Result<()>>,
}

impl Handshake {
    /// Starts the helper thread that maps `base` for whichever child reports.
    pub fn start(base: u32) -> io::Result<Self> {
        let (report_read, report_write) = pipe()?;
        let (go_read, go_write) = pipe()?;
        let helper = std::thread::spawn(move || map_reported_child(report_read, go_write, base));
        Ok(Self {
            child_report: report_write,
            child_wait: go_read,
            helper,
        })
    }

    /// Raw descriptors for the pre-exec closure.
    pub fn child_fds(&self) -> (RawFd, RawFd) {
        (self.child_report.as_raw_fd(), self.child_wait.as_raw_fd())
    }

    /// After `spawn` returned: close our copies of the child's ends (so the
    /// helper sees EOF if the child died early) and collect the helper.
    pub fn finish(self) -> io::Result<()> {
        drop(self.child_report);
        drop(self.child_wait);
        self.helper
            .join()
            .map_err(|_| io::Error::other("uid map helper panicked"))?
    }
}

fn map_reported_child(report: OwnedFd, go: OwnedFd, base: u32) -> io::Result<()> {
    let mut report = std::fs::File::from(report);
    let mut pid = [0u8; 4];
    report.read_exact(&mut pid)?;
    let pid = u32::from_le_bytes(pid);
    let map = id_map(base);
    std::fs::write(format!("/proc/{pid}/uid_map"), &map)?;
    std::fs::write(format!("/proc/{pid}/gid_map"), &map)?;
    // Only now may the child continue; dropping `go` unwritten makes it fail.
    std::fs::File::from(go).write_all(b"1")
}

/// In the forked child, before exec: new user namespace, report, wait for
/// the map, become 0:0 inside. Only async-signal-safe calls.
pub fn enter_in_child(report: RawFd, wait: RawFd) -> io::Result<()> {
    // SAFETY: plain syscalls on descriptors this process owns; no allocation.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER) != 0 {
            return Err(io::Error::last_os_error());
        }
        let pid = (libc::getpid() as u32).to_le_bytes();
        if libc::write(report, pid.as_ptr().cast(), pid.len()) != 4 {
            return Err(io::Error::last_os_error());
        }
        let mut byte = 0u8;
        if libc::read(wait, (&mut byte as *mut u8).cast(), 1) != 1 {
            return Err(io::Error::other("uid map was not written"));
        }
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(0, 0, 0) != 0
            || libc::setresuid(0, 0, 0) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_disjoint_across_pools_and_reused() {
        if std::fs::create_dir_all(CLAIM_DIR).is_err() {
            eprintln!("SKIP ranges test: cannot create {CLAIM_DIR} (needs root)");
            return;
        }
        // Two pools behave like two devhost processes: flock claims are per
        // open file, so they conflict even within one process.
        let one = RangePool::default();
        let two = RangePool::default();
        let a = one.allocate().unwrap();
        let b = two.allocate().unwrap();
        let c = one.allocate().unwrap();
        assert!(a != b && b != c && a != c, "{a} {b} {c}");
        for base in [a, b, c] {
            assert!(base >= BASE_START && (base - BASE_START).is_multiple_of(RANGE));
        }
        one.release(a);
        let d = two.allocate().unwrap();
        assert!(
            d != b && d != c,
            "released ranges are reusable, held ones are not"
        );
        assert_eq!(id_map(b), format!("0 {b} 65536\n"));
    }
}
