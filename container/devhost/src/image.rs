//! What the image provides that the host may not: the three service users
//! and the ownership of the private directories (see `container/Dockerfile`).
//!
//! Containers see the host's `/etc` read-only; devhost overlays `/etc/passwd`
//! and `/etc/group` with copies that also name the image's users, so
//! `getpwuid(10001)` answers `hermes` inside a container as it does in
//! production (boot-check reports the user name from it).

use std::path::Path;

/// `(name, uid=gid, home)` of the image's users.
pub const USERS: [(&str, u32, &str); 3] = [
    ("hermes", 10001, "/home/hermes"),
    ("hermes-term", 10002, "/workspace"),
    ("hermes-egress", 10003, "/nonexistent"),
];

fn has_entry(db: &str, name: &str, id: u32) -> bool {
    db.lines().any(|line| {
        let mut f = line.split(':');
        let n = f.next();
        let _ = f.next();
        let i = f.next().and_then(|v| v.parse::<u32>().ok());
        n == Some(name) || i == Some(id)
    })
}

fn with_trailing_newline(db: &str) -> String {
    let mut out = db.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The host's passwd plus the image users it lacks (by name or uid).
pub fn passwd_with_image_users(host: &str) -> String {
    let mut out = with_trailing_newline(host);
    for (name, id, home) in USERS {
        if !has_entry(host, name, id) {
            out.push_str(&format!("{name}:x:{id}:{id}::{home}:/usr/sbin/nologin\n"));
        }
    }
    out
}

/// The host's group file plus the image groups it lacks.
pub fn group_with_image_groups(host: &str) -> String {
    let mut out = with_trailing_newline(host);
    for (name, id, _) in USERS {
        if !has_entry(host, name, id) {
            out.push_str(&format!("{name}:x:{id}:\n"));
        }
    }
    out
}

/// Writes the overlay files into `dir`; returns `(host file, container path)`.
pub fn write_user_db(dir: &Path) -> std::io::Result<Vec<(std::path::PathBuf, std::path::PathBuf)>> {
    std::fs::create_dir_all(dir)?;
    let passwd =
        passwd_with_image_users(&std::fs::read_to_string("/etc/passwd").unwrap_or_default());
    let group = group_with_image_groups(&std::fs::read_to_string("/etc/group").unwrap_or_default());
    let (p, g) = (dir.join("passwd"), dir.join("group"));
    std::fs::write(&p, passwd)?;
    std::fs::write(&g, group)?;
    Ok(vec![(p, "/etc/passwd".into()), (g, "/etc/group".into())])
}

/// Gives the private directories of container dir `dir` the image's owners
/// and modes: `/home/hermes` 10001 0700, `/workspace` 10002, `/tmp` and
/// `/var/lib/hermes-edge` root; every id shifted by `base` (the host id of
/// the container's uid 0, or 0 without a uid range). Needs root.
pub fn own_private_dirs(dir: &Path, base: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{chown, PermissionsExt};
    for (sub, id) in [
        ("home", 10001),
        ("workspace", 10002),
        ("tmp", 0),
        ("state", 0),
    ] {
        chown(dir.join(sub), Some(base + id), Some(base + id))?;
    }
    std::fs::set_permissions(dir.join("home"), std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn adds_missing_users_only() {
        let host =
            "root:x:0:0:root:/root:/bin/bash\nhermes:x:10001:10001::/home/hermes:/usr/sbin/nologin";
        let out = passwd_with_image_users(host);
        assert_eq!(out.matches("hermes:x:10001").count(), 1, "{out}");
        assert!(out.contains("hermes-term:x:10002:10002::/workspace:/usr/sbin/nologin\n"));
        assert!(out.contains("hermes-egress:x:10003:10003::/nonexistent:/usr/sbin/nologin\n"));
        assert!(out.starts_with("root:x:0:0"));
        // A different name on the same uid is not shadowed.
        let taken = "someone:x:10002:10002::/x:/bin/sh\n";
        assert!(!passwd_with_image_users(taken).contains("hermes-term"));
        let groups = group_with_image_groups("root:x:0:\n");
        assert!(
            groups.contains("hermes:x:10001:\n") && groups.contains("hermes-egress:x:10003:\n")
        );
    }
}
