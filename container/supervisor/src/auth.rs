//! Control-token check: pure, constant time, length not leaked.
//!
//! Both the presented and the expected token are hashed with SHA-256 first and
//! the fixed-size digests compared with `subtle`, so neither an early exit nor
//! the length check of a slice comparison tells an attacker how much of a
//! guess was right or how long the token is.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// True when `authorization` is `Bearer <token>` with exactly the expected
/// token. A missing header, another scheme or an empty token is false.
pub fn bearer_matches(authorization: Option<&[u8]>, expected: &[u8]) -> bool {
    let Some(value) = authorization else {
        return false;
    };
    let Some(presented) = value.strip_prefix(b"Bearer ") else {
        return false;
    };
    if presented.is_empty() || expected.is_empty() {
        return false;
    }
    let a = Sha256::digest(presented);
    let b = Sha256::digest(expected);
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::bearer_matches;

    #[test]
    fn bearer_table() {
        let expected = b"per-boot-token-0123456789abcdef";
        let rows: [(Option<&[u8]>, bool); 9] = [
            (Some(b"Bearer per-boot-token-0123456789abcdef"), true),
            (None, false),
            (Some(b""), false),
            (Some(b"Bearer "), false),
            (Some(b"bearer per-boot-token-0123456789abcdef"), false),
            (Some(b"Basic per-boot-token-0123456789abcdef"), false),
            (Some(b"Bearer per-boot-token-0123456789abcde"), false),
            (Some(b"Bearer per-boot-token-0123456789abcdef "), false),
            (Some(b"Bearer  per-boot-token-0123456789abcdef"), false),
        ];
        for (header, want) in rows {
            assert_eq!(bearer_matches(header, expected), want, "{header:?}");
        }
        assert!(!bearer_matches(Some(b"Bearer x"), b""));
    }
}
