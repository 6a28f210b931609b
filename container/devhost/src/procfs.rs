//! Small, thin syscalls and `/proc` reads used to find and kill a container's
//! processes. Each unsafe call sits alone in a tiny function.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The pid-namespace inode of `pid`, from `/proc/<pid>/ns/pid` (`pid:[N]`).
pub fn pid_namespace(pid: u32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
    let text = link.to_string_lossy();
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Host pids of every process whose pid namespace is `ns`.
pub fn pids_in_namespace(ns: u64) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| pid_namespace(*pid) == Some(ns))
        .collect()
}

/// Host pids of every process in process group `pgid` (reduced isolation).
pub fn pids_in_group(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group(*pid) == Some(pgid))
        .collect()
}

/// Field 5 (pgrp) of `/proc/<pid>/stat`; the command name may contain
/// spaces and parentheses, so parse after the last `)`.
pub fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// `pidfd_open(pid)`: a handle that keeps naming this process even if the
/// pid is reused, so a later signal cannot hit a stranger.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_send_signal(fd, sig)`.
pub fn pidfd_signal(fd: &OwnedFd, signal: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: valid descriptor, null siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `kill(pid, sig)`; only used on processes we hold unreaped (no pid reuse).
pub fn kill(pid: u32, signal: i32) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall with integer arguments.
    if unsafe { libc::kill(pid, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `kill(-pgid, sig)`: the whole process group.
pub fn kill_group(pgid: u32, signal: i32) -> io::Result<()> {
    let pgid =
        libc::pid_t::try_from(pgid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall with integer arguments.
    if unsafe { libc::kill(-pgid, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A close-on-exec pipe for bwrap's `--info-fd`. The write end reaches only
/// the one child, through [`install_fd_in_child`] after fork, so a container
/// started concurrently never inherits another container's descriptor.
pub fn info_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned these descriptors; we own them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In a forked child before exec: make `fd` available as `target` without
/// close-on-exec. Only async-signal-safe calls.
pub fn install_fd_in_child(fd: RawFd, target: RawFd) -> io::Result<()> {
    if fd == target {
        // SAFETY: valid descriptor; F_SETFD with 0 clears FD_CLOEXEC.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    // SAFETY: dup2 on descriptors owned by this (child) process; the copy
    // it makes has close-on-exec cleared.
    if unsafe { libc::dup2(fd, target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True when running as uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn own_namespace_and_group_are_readable() {
        let me = std::process::id();
        let ns = pid_namespace(me).unwrap_or(0);
        assert!(ns > 0);
        assert!(pids_in_namespace(ns).contains(&me));
        let pg = process_group(me).unwrap_or(0);
        assert!(pids_in_group(pg).contains(&me));
    }
}
