//! The child side of every terminal process: what happens between `fork`
//! and `exec` to put it inside all four layers.
//!
//! Everything that allocates or can fail in complex ways (the Landlock
//! ruleset, C strings, the namespace descriptor) is prepared in the parent;
//! the child makes only async-signal-safe syscalls, each in a tiny function
//! with its own SAFETY note, in this order:
//!
//! 1. `setns` into the terminal network namespace (needs our capabilities);
//! 2. a private mount namespace whose `/tmp` is the terminal's own tmp dir;
//! 3. `setsid` (own session and group, no controlling terminal: no TIOCSTI);
//! 4. resource limits;
//! 5. drop the bounding set, `setgroups([])`, gid, uid — verified;
//! 6. clear ambient and inheritable capabilities, `no_new_privs`,
//!    parent-death signal;
//! 7. `landlock_restrict_self` with the prepared ruleset (fails closed),
//!    then the seccomp filters ([`super::seccomp`]);
//! 8. mark every descriptor above 2 close-on-exec (`close_range`);
//! 9. `chdir` — last, as the terminal user under Landlock, so a symlinked
//!    working directory cannot lead anywhere the user could not go anyway.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// A resource limit to set (soft = hard).
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub resource: libc::__rlimit_resource_t,
    pub value: u64,
}

/// Everything the child needs, prepared before `fork`. Borrowed raw
/// descriptors stay valid because the owning [`super::boundary::Boundary`]
/// outlives every spawn.
#[derive(Debug, Clone)]
pub struct ChildSandbox {
    pub netns_fd: RawFd,
    /// `(source, target)` of the private tmp bind mount.
    pub tmp_bind: (CString, CString),
    pub ruleset_fd: RawFd,
    pub uid: u32,
    pub gid: u32,
    pub limits: Vec<Limit>,
    /// Seccomp programs ([`super::seccomp`]), installed in order.
    pub seccomp: std::sync::Arc<Vec<seccompiler::BpfProgram>>,
    pub cwd: CString,
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn setns_net(fd: RawFd) -> io::Result<()> {
    // SAFETY: `fd` is an open network-namespace descriptor owned by the
    // boundary; setns only changes this (child) process.
    check(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })
}

fn unshare_mounts() -> io::Result<()> {
    // SAFETY: constant flag; affects only this child.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })
}

fn make_mounts_private() -> io::Result<()> {
    // SAFETY: NUL-terminated literal paths, null fs type and data: the
    // documented form of "make the tree private" (no propagation out).
    check(unsafe {
        libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

fn bind_mount(source: &CString, target: &CString) -> io::Result<()> {
    // SAFETY: NUL-terminated paths prepared before fork; null fs type and
    // data as documented for MS_BIND.
    check(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    })
}

fn new_session() -> io::Result<()> {
    // SAFETY: no arguments; fails only if already a group leader, which a
    // freshly forked child is not.
    check(unsafe { libc::setsid() })
}

fn set_limit(limit: Limit) -> io::Result<()> {
    let value = libc::rlimit {
        rlim_cur: limit.value,
        rlim_max: limit.value,
    };
    // SAFETY: valid pointer to a local rlimit.
    check(unsafe { libc::setrlimit(limit.resource, &value) })
}

fn drop_bounding_set() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: integer arguments; EINVAL past the last capability is
        // the expected end of the loop.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(err);
        }
    }
    Ok(())
}

fn clear_groups() -> io::Result<()> {
    // SAFETY: zero-length list, null pointer allowed by setgroups(2).
    check(unsafe { libc::setgroups(0, std::ptr::null()) })
}

fn set_ids(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: integer arguments; gid first, while we still may.
    check(unsafe { libc::setresgid(gid, gid, gid) })?;
    // SAFETY: integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) })?;
    // SAFETY: getters cannot fail.
    let (ruid, euid, egid) = unsafe { (libc::getuid(), libc::geteuid(), libc::getegid()) };
    if ruid != uid || euid != uid || egid != gid {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit data words.
const CAP_VERSION_3: u32 = 0x2008_0522;

/// Empty effective, permitted *and inheritable* sets. The uid switch
/// clears the first two; a container runtime (bubblewrap) may hand us a
/// non-empty inheritable set, which would otherwise survive.
fn clear_capability_sets() -> io::Result<()> {
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) with a valid v3 header and two data words on the
    // stack; lowering capabilities is always permitted.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn prctl_set(option: libc::c_int, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::prctl(option, arg, 0, 0, 0) })
}

fn clear_ambient() -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })
}

fn landlock_restrict_self(ruleset_fd: RawFd) -> io::Result<()> {
    // SAFETY: raw syscall with an open ruleset descriptor and flags 0, as
    // landlock_restrict_self(2) documents; requires no_new_privs (set).
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn install_seccomp(program: &[seccompiler::sock_filter]) -> io::Result<()> {
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at a BPF program that lives in the parent's
    // (copied) memory for the duration of the call; no_new_privs is set.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    })
}

fn cloexec_above_stdio() -> io::Result<()> {
    // SAFETY: raw close_range(3, ~0, CLOSE_RANGE_CLOEXEC): marks every
    // descriptor above stdio close-on-exec, closing nothing now (std's
    // exec-error pipe keeps working).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn change_dir(dir: &CString) -> io::Result<()> {
    // SAFETY: NUL-terminated path prepared before fork.
    check(unsafe { libc::chdir(dir.as_ptr()) })
}

/// Runs in the child after `fork`: async-signal-safe calls only, no
/// allocation. Any failure aborts the exec (the spawn returns the error).
pub fn enter(spec: &ChildSandbox) -> io::Result<()> {
    setns_net(spec.netns_fd)?;
    unshare_mounts()?;
    make_mounts_private()?;
    bind_mount(&spec.tmp_bind.0, &spec.tmp_bind.1)?;
    new_session()?;
    for limit in &spec.limits {
        set_limit(*limit)?;
    }
    drop_bounding_set()?;
    clear_groups()?;
    set_ids(spec.uid, spec.gid)?;
    clear_ambient()?;
    clear_capability_sets()?;
    prctl_set(libc::PR_SET_NO_NEW_PRIVS, 1)?;
    prctl_set(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)?;
    landlock_restrict_self(spec.ruleset_fd)?;
    for program in spec.seccomp.iter() {
        install_seccomp(program)?;
    }
    cloexec_above_stdio()?;
    change_dir(&spec.cwd)
}

/// Processes the terminal uid may have at once (all commands together).
pub const NPROC_LIMIT: u64 = 256;

/// The resource limits of terminal processes.
pub fn default_limits(max_file_bytes: u64) -> Vec<Limit> {
    vec![
        // Per uid, across every running terminal command: a fork bomb
        // stops here.
        Limit {
            resource: libc::RLIMIT_NPROC,
            value: NPROC_LIMIT,
        },
        Limit {
            resource: libc::RLIMIT_NOFILE,
            value: 1024,
        },
        // Largest file a command can write (SIGXFSZ / EFBIG beyond it).
        Limit {
            resource: libc::RLIMIT_FSIZE,
            value: max_file_bytes,
        },
        Limit {
            resource: libc::RLIMIT_AS,
            value: 8 << 30,
        },
        // CPU seconds per process: the wall-clock timeout (≤ 600 s) kills
        // first; this is the backstop for anything that escaped it.
        Limit {
            resource: libc::RLIMIT_CPU,
            value: 660,
        },
        Limit {
            resource: libc::RLIMIT_CORE,
            value: 0,
        },
    ]
}
