//! Where a terminal path points: the pure `/workspace` containment rule of
//! SPEC §8, decided on the string before any I/O.
//!
//! trim → reject empty and NUL → join a relative path to the workspace →
//! normalise lexically (`.` dropped, `..` pops, `..` above `/` is an error)
//! → the result must be the workspace itself or start with `<workspace>/`.
//! This check cannot see symlinks; it does not have to: every file
//! operation runs as the terminal uid under Landlock, so the kernel refuses
//! what a symlink inside the workspace would otherwise reach.

use std::path::{Component, Path, PathBuf};

/// Why a path was refused; the text is returned to the caller (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path climbs above the filesystem root")]
    AboveRoot,
    #[error("path resolves outside the workspace")]
    OutsideWorkspace,
}

/// Resolve `raw` (absolute, or relative to `workspace`) to a normalised
/// absolute path inside `workspace`. `workspace` must itself be absolute
/// and normalised.
pub fn resolve_in_workspace(workspace: &Path, raw: &str) -> Result<PathBuf, PathError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(PathError::Empty);
    }
    if trimmed.contains('\0') {
        return Err(PathError::Nul);
    }
    let joined = if trimmed.starts_with('/') {
        PathBuf::from(trimmed)
    } else {
        workspace.join(trimmed)
    };
    let normal = normalise(&joined)?;
    // Component-wise: `/workspace-evil` does not start with `/workspace`.
    if normal.starts_with(workspace) {
        Ok(normal)
    } else {
        Err(PathError::OutsideWorkspace)
    }
}

/// Lexical normalisation of an absolute path.
pub fn normalise(path: &Path) -> Result<PathBuf, PathError> {
    let mut out: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Prefix(_) => return Err(PathError::OutsideWorkspace),
            Component::ParentDir => {
                if out.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    let mut result = PathBuf::from("/");
    result.extend(out);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WS: &str = "/workspace";

    fn resolve(raw: &str) -> Result<String, PathError> {
        resolve_in_workspace(Path::new(WS), raw).map(|p| p.display().to_string())
    }

    #[test]
    fn table() {
        let ok = |s: &str| Ok::<String, PathError>(s.to_owned());
        let rows: Vec<(&str, Result<String, PathError>)> = vec![
            ("", Err(PathError::Empty)),
            ("   ", Err(PathError::Empty)),
            (".", ok("/workspace")),
            ("a\0b", Err(PathError::Nul)),
            ("a", ok("/workspace/a")),
            (" a/b.txt ", ok("/workspace/a/b.txt")),
            ("/workspace", ok("/workspace")),
            ("/workspace/", ok("/workspace")),
            ("/workspace/a/../b", ok("/workspace/b")),
            ("/workspace/./a//b", ok("/workspace/a/b")),
            ("a/../..", Err(PathError::OutsideWorkspace)),
            ("..", Err(PathError::OutsideWorkspace)),
            ("../workspace/a", ok("/workspace/a")),
            ("../workspace-evil/a", Err(PathError::OutsideWorkspace)),
            ("/workspace-evil", Err(PathError::OutsideWorkspace)),
            ("/workspace/../etc/passwd", Err(PathError::OutsideWorkspace)),
            ("/etc/passwd", Err(PathError::OutsideWorkspace)),
            ("/", Err(PathError::OutsideWorkspace)),
            ("/..", Err(PathError::AboveRoot)),
            ("../../../../..", Err(PathError::AboveRoot)),
            (
                "/home/hermes/.hermes/.env",
                Err(PathError::OutsideWorkspace),
            ),
            ("/proc/1/environ", Err(PathError::OutsideWorkspace)),
            ("~/x", ok("/workspace/~/x")),
            ("...", ok("/workspace/...")),
        ];
        for (raw, want) in rows {
            assert_eq!(resolve(raw), want, "{raw:?}");
        }
    }

    proptest! {
        #[test]
        fn result_is_always_inside(raw in "[a-z./~ -]{0,40}") {
            if let Ok(p) = resolve_in_workspace(Path::new(WS), &raw) {
                let s = p.display().to_string();
                prop_assert!(s == WS || s.starts_with("/workspace/"), "{}", s);
                prop_assert!(!p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)));
            }
        }

        #[test]
        fn idempotent(raw in "[a-z./]{1,40}") {
            if let Ok(p) = resolve_in_workspace(Path::new(WS), &raw) {
                let again = resolve_in_workspace(Path::new(WS), &p.display().to_string());
                prop_assert_eq!(again, Ok(p));
            }
        }

        #[test]
        fn dotdot_escape_never_accepted(prefix in "[a-z]{1,8}", depth in 1usize..6) {
            let climb = "../".repeat(depth + 1);
            let raw = format!("{prefix}/{climb}etc/passwd");
            prop_assert!(resolve_in_workspace(Path::new(WS), &raw).is_err());
        }
    }
}
