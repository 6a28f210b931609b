//! Agent ids and the Durable Object name they map to (SPEC §2 step 4).
//!
//! An id is 8..=64 characters of `[a-z0-9-]`, starting and ending with a
//! letter or digit: `^[a-z0-9](?:[a-z0-9-]{6,62}[a-z0-9])$`. The check is
//! written out by hand (no regex engine in the wasm bundle) and fuzzed
//! against that definition in the tests. [`AgentId`] can only be built
//! through [`AgentId::parse`], so every object name derived from it is valid;
//! there is no default or shared object.

use crate::errors::{ApiError, ErrorCode};

/// Header that carries the agent id from public-api.
pub const AGENT_ID_HEADER: &str = "x-divinci-agent-id";

const MIN_LEN: usize = 8;
const MAX_LEN: usize = 64;

/// A validated agent id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentId(String);

/// Why a raw id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentIdError {
    Missing,
    Invalid,
}

impl From<AgentIdError> for ApiError {
    fn from(e: AgentIdError) -> Self {
        match e {
            AgentIdError::Missing => ApiError::new(
                ErrorCode::MissingAgentId,
                "header x-divinci-agent-id is required",
            ),
            AgentIdError::Invalid => ApiError::new(
                ErrorCode::InvalidAgentId,
                "agent id must match ^[a-z0-9](?:[a-z0-9-]{6,62}[a-z0-9])$",
            ),
        }
    }
}

fn is_edge_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn is_inner_char(b: u8) -> bool {
    is_edge_char(b) || b == b'-'
}

/// True when `s` (already trimmed) is a valid agent id.
pub fn is_valid_agent_id(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < MIN_LEN || b.len() > MAX_LEN {
        return false;
    }
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_edge_char(first)
                && is_edge_char(last)
                && b[1..b.len() - 1].iter().all(|&c| is_inner_char(c))
        }
        _ => false,
    }
}

impl AgentId {
    /// Parse the raw header value: trimmed; empty or absent → `Missing`;
    /// anything not matching the id grammar → `Invalid`.
    pub fn parse(raw: Option<&str>) -> Result<Self, AgentIdError> {
        let trimmed = raw.map(str::trim).unwrap_or("");
        if trimmed.is_empty() {
            return Err(AgentIdError::Missing);
        }
        if !is_valid_agent_id(trimmed) {
            return Err(AgentIdError::Invalid);
        }
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The Durable Object name: `agent:<id>`.
    pub fn object_name(&self) -> String {
        format!("agent:{}", self.0)
    }

    /// Inverse of [`Self::object_name`], re-validating the id: an object
    /// refuses to act for a name that is not exactly `agent:<valid id>`.
    pub fn from_object_name(name: &str) -> Result<Self, AgentIdError> {
        match name.strip_prefix("agent:") {
            Some(id) if is_valid_agent_id(id) => Ok(Self(id.to_owned())),
            _ => Err(AgentIdError::Invalid),
        }
    }
}

impl std::fmt::Display for AgentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(s: &str) -> bool {
        AgentId::parse(Some(s)).is_ok()
    }

    #[test]
    fn boundary_table() {
        let rows: &[(&str, Result<(), AgentIdError>)] = &[
            ("", Err(AgentIdError::Missing)),
            ("   ", Err(AgentIdError::Missing)),
            ("abcdefg", Err(AgentIdError::Invalid)), // 7
            ("abcdefgh", Ok(())),                    // 8
            (&"a".repeat(64), Ok(())),               // 64
            (&"a".repeat(65), Err(AgentIdError::Invalid)), // 65
            ("-bcdefgh", Err(AgentIdError::Invalid)),
            ("abcdefg-", Err(AgentIdError::Invalid)),
            ("a-cdefgh", Ok(())),
            ("abcdef-h", Ok(())),
            ("a------h", Ok(())),
            ("Abcdefgh", Err(AgentIdError::Invalid)),
            ("abcdEfgh", Err(AgentIdError::Invalid)),
            ("abcdéfgh", Err(AgentIdError::Invalid)),
            ("abcdefgé", Err(AgentIdError::Invalid)),
            ("../evil", Err(AgentIdError::Invalid)),
            ("../evil-agent", Err(AgentIdError::Invalid)),
            ("abcd\0efgh", Err(AgentIdError::Invalid)),
            ("abcd efgh", Err(AgentIdError::Invalid)),
            ("abcd_efgh", Err(AgentIdError::Invalid)),
            ("abcd.efgh", Err(AgentIdError::Invalid)),
            ("abcd/efgh", Err(AgentIdError::Invalid)),
            ("agent:abcdefgh", Err(AgentIdError::Invalid)),
            ("  abcdefgh  ", Ok(())),
            ("\tabcdefgh\n", Ok(())),
            ("01234567", Ok(())),
        ];
        for (raw, want) in rows {
            let got = AgentId::parse(Some(raw)).map(|_| ());
            assert_eq!(&got, want, "input {raw:?}");
        }
        assert_eq!(AgentId::parse(None), Err(AgentIdError::Missing));
    }

    #[test]
    fn errors_map_to_spec_codes() {
        let e: ApiError = AgentIdError::Missing.into();
        assert_eq!((e.status(), e.code.as_str()), (400, "missing_agent_id"));
        let e: ApiError = AgentIdError::Invalid.into();
        assert_eq!((e.status(), e.code.as_str()), (400, "invalid_agent_id"));
    }

    #[test]
    fn object_name_round_trip() {
        let id = AgentId::parse(Some(" team-agent-01 ")).unwrap();
        assert_eq!(id.object_name(), "agent:team-agent-01");
        assert_eq!(
            AgentId::from_object_name("agent:team-agent-01").unwrap(),
            id
        );
        assert!(AgentId::from_object_name("agent:../evil").is_err());
        assert!(AgentId::from_object_name("team-agent-01").is_err());
        assert!(AgentId::from_object_name("agent:").is_err());
    }

    /// Reference implementation of the SPEC regex, written independently of
    /// the production check, to fuzz against.
    fn reference(s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        (8..=64).contains(&chars.len())
            && edge(chars[0])
            && edge(chars[chars.len() - 1])
            && chars[1..chars.len() - 1]
                .iter()
                .all(|&c| edge(c) || c == '-')
    }

    proptest! {
        #[test]
        fn matches_reference_on_near_valid_input(s in "[a-z0-9A-Z_. \\-é/\\x00]{0,70}") {
            let trimmed = s.trim();
            prop_assert_eq!(ok(&s), !trimmed.is_empty() && reference(trimmed));
        }

        #[test]
        fn matches_reference_on_arbitrary_input(s in any::<String>()) {
            let trimmed = s.trim();
            prop_assert_eq!(ok(&s), !trimmed.is_empty() && reference(trimmed));
        }

        #[test]
        fn valid_ids_always_accepted(s in "[a-z0-9][a-z0-9-]{6,62}[a-z0-9]") {
            prop_assert!(ok(&s));
            let id = AgentId::parse(Some(&s)).unwrap();
            prop_assert_eq!(AgentId::from_object_name(&id.object_name()).unwrap(), id);
        }
    }
}
