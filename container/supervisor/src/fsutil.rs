//! Symlink-safe file writes into directories owned by another user.
//!
//! The supervisor runs as root and writes into `~hermes/.hermes`, a
//! directory the `hermes` uid controls. A path-based `open` there could be
//! redirected by a planted symlink (`.env -> /etc/shadow`). So every step is
//! relative to a directory descriptor opened with `O_NOFOLLOW`, files are
//! created fresh (`O_EXCL`) under a temporary name, owned and chmod-ed through
//! the descriptor, then renamed over the final name — `rename` replaces a
//! symlink itself, never its target. Each libc call sits in a tiny wrapper.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Owner to give created files; `None` when not running as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

fn cstring(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a single path component",
        ));
    }
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in file name"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Open an existing directory without following a final symlink.
pub fn open_dir_nofollow(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn openat(dir: &File, name: &CString, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    // SAFETY: `name` is a valid NUL-terminated string and `dir` a live fd;
    // the returned fd is owned by nobody else.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is not used elsewhere.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn fchown(file: &File, owner: Option<Owner>) -> io::Result<()> {
    match owner {
        Some(o) => std::os::unix::fs::fchown(file, Some(o.uid), Some(o.gid)),
        None => Ok(()),
    }
}

fn fchmod(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Create (if missing) and open `dir/name` as a directory with `mode`, owned
/// by `owner`. A symlink or a non-directory in its place is an error.
pub fn ensure_subdir(dir: &File, name: &str, mode: u32, owner: Option<Owner>) -> io::Result<File> {
    let c = cstring(name)?;
    // SAFETY: valid fd and NUL-terminated name.
    match check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) }) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let sub = openat(
        dir,
        &c,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )?;
    fchown(&sub, owner)?;
    fchmod(&sub, mode)?;
    Ok(sub)
}

/// Atomically replace `dir/name` with `bytes`, `mode`, `owner`.
pub fn write_file_at(
    dir: &File,
    name: &str,
    bytes: &[u8],
    mode: u32,
    owner: Option<Owner>,
) -> io::Result<()> {
    let final_name = cstring(name)?;
    let tmp_name = cstring(&format!(".{name}.tmp-{}", std::process::id()))?;
    // A stale temp file from a crashed write is removed first (unlinkat
    // removes a symlink itself, never its target).
    // SAFETY: valid fd and NUL-terminated name.
    let _ = unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_name.as_ptr(), 0) };
    let mut file = openat(
        dir,
        &tmp_name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        0o600,
    )?;
    fchown(&file, owner)?;
    fchmod(&file, mode)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    // SAFETY: valid fds and NUL-terminated names.
    check(unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            tmp_name.as_ptr(),
            dir.as_raw_fd(),
            final_name.as_ptr(),
        )
    })?;
    Ok(())
}

/// Read `dir/name`, refusing a symlink.
pub fn read_file_at(dir: &File, name: &str) -> io::Result<Vec<u8>> {
    let mut file = openat(dir, &cstring(name)?, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(out)
}

/// `create_dir_all` for a root-owned path whose last component is given
/// `mode` and `owner` (used for the home and state directories).
pub fn ensure_dir_path(path: &Path, mode: u32, owner: Option<Owner>) -> io::Result<File> {
    if std::fs::symlink_metadata(path).is_err() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: NUL-terminated path.
        match check(unsafe { libc::mkdir(c.as_ptr(), mode as libc::mode_t) }) {
            Ok(_) => {
                let dir = open_dir_nofollow(path)?;
                fchown(&dir, owner)?;
                fchmod(&dir, mode)?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    open_dir_nofollow(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn tempdir(tag: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("hermes-fsutil-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn write_replaces_a_planted_symlink_instead_of_following_it() {
        let root = tempdir("symlink");
        let victim = root.join("victim");
        std::fs::write(&victim, b"original").unwrap();
        let dir_path = root.join("d");
        std::fs::create_dir(&dir_path).unwrap();
        std::os::unix::fs::symlink(&victim, dir_path.join(".env")).unwrap();
        let dir = open_dir_nofollow(&dir_path).unwrap();
        write_file_at(&dir, ".env", b"new", 0o600, None).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"original");
        let meta = std::fs::symlink_metadata(dir_path.join(".env")).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(read_file_at(&dir, ".env").unwrap(), b"new");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn symlinked_directories_are_refused() {
        let root = tempdir("dirlink");
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(open_dir_nofollow(&root.join("link")).is_err());
        let dir = open_dir_nofollow(&root).unwrap();
        assert!(ensure_subdir(&dir, "link", 0o700, None).is_err());
        let sub = ensure_subdir(&dir, "fresh", 0o700, None).unwrap();
        assert_eq!(sub.metadata().unwrap().mode() & 0o777, 0o700);
        assert!(cstring("a/b").is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}
