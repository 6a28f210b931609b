//! Container ids: the only part of a request path that becomes a directory
//! name on the host, so it is validated strictly before anything else runs.

use std::fmt;

/// Longest accepted id.
pub const MAX_ID_LEN: usize = 128;

/// A validated container id: `^[a-z0-9][a-z0-9:_-]{0,127}$`.
///
/// The first character is alphanumeric so an id can never be `.`/`..` or
/// look like an option; no `/`, `.` or uppercase, so the id maps to exactly
/// one directory name and one registry key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId(String);

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("container id is empty")]
    Empty,
    #[error("container id is longer than {MAX_ID_LEN} characters")]
    TooLong,
    #[error("container id must start with a lowercase letter or digit")]
    BadFirst,
    #[error("container id may only contain a-z, 0-9, ':', '_' and '-'")]
    BadChar,
}

impl ContainerId {
    /// Validates `raw` exactly as given (no trimming, no decoding).
    pub fn parse(raw: &str) -> Result<Self, IdError> {
        let bytes = raw.as_bytes();
        let Some(&first) = bytes.first() else {
            return Err(IdError::Empty);
        };
        if bytes.len() > MAX_ID_LEN {
            return Err(IdError::TooLong);
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(IdError::BadFirst);
        }
        let ok = bytes.iter().all(|&b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b':' | b'_' | b'-')
        });
        if !ok {
            return Err(IdError::BadChar);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn id_table() {
        let long_ok = "a".repeat(MAX_ID_LEN);
        let long_bad = "a".repeat(MAX_ID_LEN + 1);
        let rows: &[(&str, Result<(), IdError>)] = &[
            ("a", Ok(())),
            ("0", Ok(())),
            ("agent:abc-123_x", Ok(())),
            ("0f3a9c", Ok(())),
            (&long_ok, Ok(())),
            (&long_bad, Err(IdError::TooLong)),
            ("", Err(IdError::Empty)),
            ("-a", Err(IdError::BadFirst)),
            (":a", Err(IdError::BadFirst)),
            ("A", Err(IdError::BadFirst)),
            ("aB", Err(IdError::BadChar)),
            ("..", Err(IdError::BadFirst)),
            ("a..b", Err(IdError::BadChar)),
            ("a/b", Err(IdError::BadChar)),
            ("a b", Err(IdError::BadChar)),
            ("a\0", Err(IdError::BadChar)),
            ("a%2f", Err(IdError::BadChar)),
            ("aé", Err(IdError::BadChar)),
        ];
        for (raw, want) in rows {
            let got = ContainerId::parse(raw).map(|_| ());
            assert_eq!(&got, want, "id {raw:?}");
        }
    }
}
