//! Spawning a child with a cleared environment, in its own session, with no
//! capabilities and `no_new_privs`, as the `hermes` uid when we are root.
//!
//! The identity switch happens between `fork` and `exec` (`pre_exec`), so
//! only async-signal-safe calls are made there: `setsid`, `prctl`,
//! `setgroups`, `setresgid`, `setresuid`. The order matters: the capability
//! bounding set is dropped while we still hold `CAP_SETPCAP`, groups and gid
//! before the uid (afterwards we could not), `no_new_privs` last, and the
//! switch is verified, so a failed drop aborts the exec instead of running
//! Hermes as root.

use std::ffi::OsStr;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Who the child runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// Switch to this uid/gid (we are root).
    User { uid: u32, gid: u32 },
    /// Not root: the child keeps our uid (reported honestly by boot-check).
    Current,
}

impl RunAs {
    /// `User` when the supervisor is root, else `Current`.
    pub fn for_uid(uid: u32) -> Self {
        if is_root() {
            Self::User { uid, gid: uid }
        } else {
            Self::Current
        }
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Runs in the child after fork. Async-signal-safe calls only.
fn drop_privileges(run_as: RunAs) -> io::Result<()> {
    // SAFETY (whole function): plain syscalls with integer arguments or null
    // pointers, as the kernel ABI documents them.
    unsafe {
        // Own session and process group: stop signals the whole group, and
        // there is no controlling terminal to inject input into.
        check(libc::setsid())?;
        if let RunAs::User { uid, gid } = run_as {
            for cap in 0..64 {
                // EINVAL past the kernel's last capability is expected.
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                {
                    return Err(io::Error::last_os_error());
                }
            }
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setresgid(gid, gid, gid))?;
            check(libc::setresuid(uid, uid, uid))?;
            if libc::getuid() != uid || libc::geteuid() != uid || libc::getegid() != gid {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        check(libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ))?;
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        // Set after the uid switch (a credential change clears it): if the
        // supervisor dies, Hermes dies with it instead of running unmanaged.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
    }
    Ok(())
}

/// A command for `program` with only the allowlisted environment, stdin from
/// `/dev/null`, in `cwd`, dropping privileges to `run_as` at spawn.
pub fn contained_command<I, K, V>(
    program: &Path,
    args: &[&str],
    env: I,
    cwd: &Path,
    run_as: RunAs,
) -> Command
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null());
    // SAFETY: the closure only makes async-signal-safe syscalls (see
    // `drop_privileges`) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || drop_privileges(run_as));
    }
    cmd
}
