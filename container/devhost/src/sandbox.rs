//! The filesystem and process view of one container, as a bubblewrap argv.
//!
//! Built by a pure function from a [`SandboxPlan`], so the exact mounts are
//! unit-tested without running anything. The view mirrors the image:
//!
//! * system directories (`/usr`, `/etc`, `/opt`, `/var`, `/srv`, `/sys`) are
//!   bound read-only, root-level symlinks (`/bin -> usr/bin`) recreated;
//! * `/home/hermes`, `/workspace` and `/tmp` are per-container host
//!   directories, bound read-write at the image's paths;
//! * `/root`, `/run`, `/var/tmp` and `/home` are fresh tmpfs, so nothing of
//!   the developer's home or other users leaks in;
//! * devhost's state directory is covered by a tmpfs wherever it would be
//!   visible, so no container can reach another container's directories;
//! * the few host paths the supervisor needs (its binary, the Hermes venv and
//!   its interpreter, the requirements file) are bound read-only at the same
//!   path.
//!
//! Own PID namespace with the supervisor as PID 1 (`--as-pid-1`, like the
//! real image): killing it makes the kernel kill every process of the
//! container. Own mount, IPC and UTS namespaces. The network namespace is
//! shared with the host (ports are remapped instead); devhost never touches
//! the host firewall. Nothing secret is put in this argv: the environment is
//! inherited through the process environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Paths inside the container, as in the image.
pub const HOME_DIR: &str = "/home/hermes";
pub const WORKSPACE_DIR: &str = "/workspace";
pub const TMP_DIR: &str = "/tmp";
/// The supervisor's private state (`HERMES_STATE_DIR` default in the image).
/// It sits under the read-only `/var`, so devhost creates the empty mount
/// point on the host once (see [`host_mount_points`]).
pub const STATE_DIR: &str = "/var/lib/hermes-edge";

/// Top-level host directories bound read-only into every container.
pub const SYSTEM_DIRS: &[&str] = &["usr", "etc", "opt", "var", "srv", "sys"];

/// What a top-level entry of the host's `/` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootKind {
    Dir,
    /// A symlink and its target as stored (`usr/bin`).
    Symlink(PathBuf),
    Other,
}

/// One entry of the host's `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEntry {
    pub name: String,
    pub kind: RootKind,
}

/// Everything that decides one container's view.
#[derive(Debug, Clone)]
pub struct SandboxPlan {
    pub root_entries: Vec<RootEntry>,
    /// Host directories behind `/home/hermes`, `/workspace`, `/tmp`.
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub state: PathBuf,
    pub hostname: String,
    /// Host paths that must not be visible inside (devhost's state dir).
    pub hidden: Vec<PathBuf>,
    /// Host paths bound read-only at the same path (absolute).
    pub ro_binds: Vec<PathBuf>,
    /// Host files bound read-only over system files (`/etc/passwd`).
    pub file_overlays: Vec<(PathBuf, PathBuf)>,
    /// Descriptor on which bwrap reports the child pid and namespaces.
    pub info_fd: i32,
    /// The program to run as PID 1 and its arguments (never secrets).
    pub command: Vec<OsString>,
}

fn push(args: &mut Vec<OsString>, parts: &[&str]) {
    args.extend(parts.iter().map(OsString::from));
}

fn push_paths(args: &mut Vec<OsString>, flag: &str, a: &Path, b: &Path) {
    args.push(flag.into());
    args.push(a.as_os_str().to_owned());
    args.push(b.as_os_str().to_owned());
}

/// Is `path` visible through the read-only system binds or extra binds?
fn visible_inside(plan: &SandboxPlan, path: &Path) -> bool {
    let system = plan.root_entries.iter().any(|e| {
        e.kind == RootKind::Dir
            && SYSTEM_DIRS.contains(&e.name.as_str())
            && path.starts_with(Path::new("/").join(&e.name))
    });
    system
        || plan
            .ro_binds
            .iter()
            .any(|b| b != Path::new("/") && path.starts_with(b))
}

/// The bwrap arguments for `plan` (without the `bwrap` program itself).
pub fn bwrap_args(plan: &SandboxPlan) -> Vec<OsString> {
    let mut args = Vec::new();
    push(
        &mut args,
        &[
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--as-pid-1",
            // bwrap drops every capability of a root caller by default; the
            // supervisor needs them to drop privileges and build the
            // terminal's namespaces, as PID 1 of the real image can.
            "--cap-add",
            "ALL",
            "--hostname",
            &plan.hostname,
            "--info-fd",
            &plan.info_fd.to_string(),
        ],
    );
    for entry in &plan.root_entries {
        let at = Path::new("/").join(&entry.name);
        match &entry.kind {
            RootKind::Dir if SYSTEM_DIRS.contains(&entry.name.as_str()) => {
                push_paths(&mut args, "--ro-bind", &at, &at);
            }
            RootKind::Symlink(target) => push_paths(&mut args, "--symlink", target, &at),
            RootKind::Dir | RootKind::Other => {}
        }
    }
    push(
        &mut args,
        &[
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/root", "--tmpfs", "/run", "--tmpfs",
            "/home",
        ],
    );
    // World-writable with the sticky bit, as in the image (Python's
    // multiprocessing needs a writable /dev/shm for the Hermes user).
    push(&mut args, &["--perms", "1777", "--tmpfs", "/dev/shm"]);
    push(&mut args, &["--perms", "1777", "--tmpfs", "/var/tmp"]);
    for (host, inside) in &plan.file_overlays {
        push_paths(&mut args, "--ro-bind", host, inside);
    }
    push_paths(&mut args, "--bind", &plan.home, Path::new(HOME_DIR));
    push_paths(
        &mut args,
        "--bind",
        &plan.workspace,
        Path::new(WORKSPACE_DIR),
    );
    push_paths(&mut args, "--bind", &plan.tmp, Path::new(TMP_DIR));
    push_paths(&mut args, "--bind", &plan.state, Path::new(STATE_DIR));
    for hidden in &plan.hidden {
        if visible_inside(plan, hidden) {
            args.push("--tmpfs".into());
            args.push(hidden.as_os_str().to_owned());
        }
    }
    let mut made: Vec<PathBuf> = Vec::new();
    for bind in &plan.ro_binds {
        // `/` or a relative path would undo the whole view.
        if !bind.is_absolute() || bind == Path::new("/") {
            continue;
        }
        // bwrap creates missing parents 0700, which the Hermes uid could
        // not traverse: create them 0755 first, outermost first.
        let mut parents: Vec<&Path> = bind
            .ancestors()
            .skip(1)
            .filter(|a| *a != Path::new("/"))
            .collect();
        parents.reverse();
        for parent in parents {
            if visible_inside(plan, parent) || made.iter().any(|m| m == parent) {
                continue;
            }
            push(&mut args, &["--perms", "0755", "--dir"]);
            args.push(parent.as_os_str().to_owned());
            made.push(parent.to_path_buf());
        }
        push_paths(&mut args, "--ro-bind", bind, bind);
    }
    push(&mut args, &["--chdir", "/", "--"]);
    args.extend(plan.command.iter().cloned());
    args
}

/// Private image paths that lie inside a read-only system bind and so need
/// an (empty) mount point on the host.
pub fn host_mount_points() -> [&'static str; 1] {
    [STATE_DIR]
}

/// Reads the host's `/` into [`RootEntry`]s (the thin I/O half).
pub fn read_root_entries() -> std::io::Result<Vec<RootEntry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/")? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ft = entry.file_type()?;
        let kind = if ft.is_symlink() {
            RootKind::Symlink(std::fs::read_link(entry.path())?)
        } else if ft.is_dir() {
            RootKind::Dir
        } else {
            RootKind::Other
        };
        out.push(RootEntry { name, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn plan() -> SandboxPlan {
        SandboxPlan {
            root_entries: vec![
                RootEntry {
                    name: "bin".into(),
                    kind: RootKind::Symlink("usr/bin".into()),
                },
                RootEntry {
                    name: "etc".into(),
                    kind: RootKind::Dir,
                },
                RootEntry {
                    name: "root".into(),
                    kind: RootKind::Dir,
                },
                RootEntry {
                    name: "usr".into(),
                    kind: RootKind::Dir,
                },
                RootEntry {
                    name: "var".into(),
                    kind: RootKind::Dir,
                },
                RootEntry {
                    name: "work".into(),
                    kind: RootKind::Dir,
                },
                RootEntry {
                    name: "x.json".into(),
                    kind: RootKind::Other,
                },
            ],
            home: "/var/lib/dh/containers/a/home".into(),
            workspace: "/var/lib/dh/containers/a/workspace".into(),
            tmp: "/var/lib/dh/containers/a/tmp".into(),
            state: "/var/lib/dh/containers/a/state".into(),
            hostname: "a".into(),
            hidden: vec!["/var/lib/dh".into(), "/tmp/elsewhere".into()],
            ro_binds: vec![
                "/work/main/target/debug/hermes-supervisor".into(),
                "/".into(),
            ],
            file_overlays: vec![("/var/lib/dh/etc/passwd".into(), "/etc/passwd".into())],
            info_fd: 7,
            command: vec!["/work/main/target/debug/hermes-supervisor".into()],
        }
    }

    fn text(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn binds_system_dirs_only_and_mounts_private_dirs_at_image_paths() {
        let t = text(&bwrap_args(&plan()));
        assert!(t.contains("--ro-bind /usr /usr"), "{t}");
        assert!(t.contains("--ro-bind /etc /etc"), "{t}");
        assert!(t.contains("--symlink usr/bin /bin"), "{t}");
        assert!(
            !t.contains("--ro-bind /root"),
            "developer home must not leak: {t}"
        );
        assert!(!t.contains("--ro-bind /work /work"), "{t}");
        assert!(!t.contains("x.json"), "{t}");
        assert!(
            t.contains("--bind /var/lib/dh/containers/a/home /home/hermes"),
            "{t}"
        );
        assert!(
            t.contains("--bind /var/lib/dh/containers/a/workspace /workspace"),
            "{t}"
        );
        assert!(
            t.contains("--bind /var/lib/dh/containers/a/state /var/lib/hermes-edge"),
            "{t}"
        );
        assert!(
            t.contains("--bind /var/lib/dh/containers/a/tmp /tmp"),
            "{t}"
        );
        assert!(
            t.contains("--unshare-pid") && t.contains("--as-pid-1"),
            "{t}"
        );
        assert!(t.contains("--info-fd 7"), "{t}");
        let etc = t.find("--ro-bind /etc /etc").unwrap_or(usize::MAX);
        let passwd = t
            .find("--ro-bind /var/lib/dh/etc/passwd /etc/passwd")
            .unwrap_or(0);
        assert!(etc < passwd, "overlay must come after /etc: {t}");
        assert!(
            t.ends_with("--chdir / -- /work/main/target/debug/hermes-supervisor"),
            "{t}"
        );
    }

    #[test]
    fn state_dir_is_hidden_when_visible_and_root_bind_is_refused() {
        let t = text(&bwrap_args(&plan()));
        assert!(t.contains("--tmpfs /var/lib/dh"), "{t}");
        // /tmp is the container's own; nothing to hide there.
        assert!(!t.contains("/tmp/elsewhere"), "{t}");
        assert!(
            t.contains("--ro-bind /work/main/target/debug/hermes-supervisor"),
            "{t}"
        );
        assert!(!t.contains("--ro-bind / /"), "{t}");
        // Parents of a bind are made traversable, each once.
        assert!(
            t.contains("--perms 0755 --dir /work --perms 0755 --dir /work/main --perms 0755 --dir /work/main/target --perms 0755 --dir /work/main/target/debug --ro-bind"),
            "{t}"
        );
        // The private binds come after the tmpfs they sit on.
        let home_tmpfs = t.find("--tmpfs /home").unwrap_or(usize::MAX);
        let home_bind = t.find("/home/hermes").unwrap_or(0);
        assert!(home_tmpfs < home_bind, "{t}");
    }
}
