//! The environment a container starts with: a short image-like base, then
//! what the object sent, then the runtime's own variables (remapped ports,
//! local paths, the mock model), which always win.
//!
//! The result is handed to the child through the process environment, never
//! through argv: it carries `CONTROL_TOKEN`, and any uid can read another
//! process's `/proc/<pid>/cmdline`.

use std::collections::BTreeMap;

/// Most variables the object may send.
pub const MAX_VARS: usize = 256;
/// Longest value accepted.
pub const MAX_VALUE_LEN: usize = 64 * 1024;
/// Longest name accepted.
pub const MAX_NAME_LEN: usize = 128;

/// `PATH` of the image.
pub const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Why an environment from the object was refused. Never includes a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("too many environment variables (max {MAX_VARS})")]
    TooMany,
    #[error("invalid environment variable name {0:?}")]
    BadName(String),
    #[error("environment variable {0} has a value that is too long or contains NUL")]
    BadValue(String),
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`, at most [`MAX_NAME_LEN`].
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    match b.first() {
        Some(f) if f.is_ascii_alphabetic() || *f == b'_' => {}
        _ => return false,
    }
    b.len() <= MAX_NAME_LEN && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Base of every container's environment, like the image's `ENV` lines.
pub fn image_base() -> Vec<(String, String)> {
    vec![
        ("PATH".into(), IMAGE_PATH.into()),
        ("HOME".into(), "/root".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ]
}

/// Layers `base`, then `from_object` (validated), then `runtime`; later
/// layers replace earlier values of the same name.
pub fn compose(
    base: &[(String, String)],
    from_object: &BTreeMap<String, String>,
    runtime: &[(String, String)],
) -> Result<BTreeMap<String, String>, EnvError> {
    if from_object.len() > MAX_VARS {
        return Err(EnvError::TooMany);
    }
    for (name, value) in from_object {
        if !valid_name(name) {
            // Names are not secret; cap what we echo anyway.
            return Err(EnvError::BadName(name.chars().take(64).collect()));
        }
        if value.len() > MAX_VALUE_LEN || value.contains('\0') {
            return Err(EnvError::BadValue(name.clone()));
        }
    }
    let mut out: BTreeMap<String, String> = base.iter().cloned().collect();
    out.extend(from_object.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.extend(runtime.iter().cloned());
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn runtime_wins_over_object_and_object_over_base() {
        let base = vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("LANG".to_string(), "C".to_string()),
        ];
        let obj = m(&[
            ("LANG", "de"),
            ("HERMES_CONTROL_PORT", "1"),
            ("CONTROL_TOKEN", "t"),
        ]);
        let rt = vec![("HERMES_CONTROL_PORT".to_string(), "40000".to_string())];
        let env = compose(&base, &obj, &rt).unwrap();
        assert_eq!(env["PATH"], "/bin");
        assert_eq!(env["LANG"], "de");
        assert_eq!(env["HERMES_CONTROL_PORT"], "40000");
        assert_eq!(env["CONTROL_TOKEN"], "t");
    }

    #[test]
    fn names_table() {
        for ok in ["A", "_", "CONTROL_TOKEN", "a1_b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A=B", "A B", "Ä", "A\0"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn bad_values_are_refused_without_echoing_them() {
        let err = compose(&[], &m(&[("SECRET", "x\0y")]), &[]).unwrap_err();
        assert_eq!(err, EnvError::BadValue("SECRET".into()));
        assert!(!err.to_string().contains("x\0y"));
        let big = "v".repeat(MAX_VALUE_LEN + 1);
        assert!(compose(&[], &m(&[("K", &big)]), &[]).is_err());
        assert!(compose(&[], &m(&[("BAD-NAME", "1")]), &[]).is_err());
    }
}
