//! The service gate of SPEC §2: who may call `/hosted/*`, and for which agent.
//!
//! Checked in this order, each step failing closed:
//! 1. `SERVICE_AUTH_SECRET` unset or empty → 503 `hosted_mode_not_configured`;
//! 2. `Authorization` is not `Bearer <non-empty token>` → 401;
//! 3. the token equals neither the primary secret nor, when non-empty, the
//!    rotation secret `SERVICE_AUTH_SECRET_NEXT` → 401 (NEXT alone never
//!    authenticates: without a primary, step 1 already refused);
//! 4. the agent id header → 400 `missing_agent_id` / `invalid_agent_id`.
//!
//! The comparison runs in time that depends only on the configured secrets'
//! lengths: no early exit on the first differing byte, and the candidate's
//! length is compared with `subtle` like every byte.

use subtle::{Choice, ConstantTimeEq};

use crate::agent_id::AgentId;
use crate::errors::{ApiError, ErrorCode};

/// The two service secrets as configured in the Worker's environment.
#[derive(Clone, Copy, Default)]
pub struct ServiceSecrets<'a> {
    pub primary: Option<&'a str>,
    pub next: Option<&'a str>,
}

impl std::fmt::Debug for ServiceSecrets<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSecrets")
            .field("primary_set", &self.primary.is_some_and(|s| !s.is_empty()))
            .field("next_set", &self.next.is_some_and(|s| !s.is_empty()))
            .finish()
    }
}

/// Extract the token of `Bearer <token>`. The scheme is matched
/// case-insensitively (RFC 7235); the token must be non-empty and contain no
/// whitespace.
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return None;
    }
    Some(token)
}

/// Constant-time equality of `candidate` with `secret`: the loop runs over
/// the secret's bytes whatever the candidate is, and the lengths are
/// compared in constant time too. Only the (attacker-chosen) candidate's own
/// length influences which branch `get` takes.
pub fn secret_matches(candidate: &[u8], secret: &[u8]) -> Choice {
    let mut equal = Choice::from(1u8);
    for (i, s) in secret.iter().enumerate() {
        let c = candidate.get(i).copied().unwrap_or(0);
        equal &= c.ct_eq(s);
    }
    equal & (candidate.len() as u64).ct_eq(&(secret.len() as u64))
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|v| !v.is_empty())
}

/// Steps 1–3: is this caller public-api?
pub fn check_service_auth(
    secrets: ServiceSecrets<'_>,
    authorization: Option<&str>,
) -> Result<(), ApiError> {
    let Some(primary) = non_empty(secrets.primary) else {
        return Err(ApiError::new(
            ErrorCode::HostedModeNotConfigured,
            "hosted mode is not configured: SERVICE_AUTH_SECRET is not set",
        ));
    };
    let Some(token) = bearer_token(authorization) else {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "expected Authorization: Bearer <service secret>",
        ));
    };
    let token = token.as_bytes();
    // Both comparisons always run; results are combined without branching.
    let primary_ok = secret_matches(token, primary.as_bytes());
    let next_ok = match non_empty(secrets.next) {
        Some(next) => secret_matches(token, next.as_bytes()),
        None => Choice::from(0u8),
    };
    if bool::from(primary_ok | next_ok) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            "invalid service credentials",
        ))
    }
}

/// The whole gate: steps 1–4. Returns the validated agent id.
pub fn admit(
    secrets: ServiceSecrets<'_>,
    authorization: Option<&str>,
    agent_header: Option<&str>,
) -> Result<AgentId, ApiError> {
    check_service_auth(secrets, authorization)?;
    AgentId::parse(agent_header).map_err(ApiError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: &str = "primary-secret-0123456789";
    const N: &str = "next-secret-abcdefghijklmn";

    fn secrets(p: Option<&'static str>, n: Option<&'static str>) -> ServiceSecrets<'static> {
        ServiceSecrets {
            primary: p,
            next: n,
        }
    }

    fn code(r: Result<AgentId, ApiError>) -> Result<String, (u16, &'static str)> {
        r.map(|id| id.to_string())
            .map_err(|e| (e.status(), e.code.as_str()))
    }

    type Row = (
        ServiceSecrets<'static>,
        Option<String>,
        Option<&'static str>,
        Result<String, (u16, &'static str)>,
    );

    #[test]
    fn gate_table() {
        let bearer = |t: &str| format!("Bearer {t}");
        let rows: Vec<Row> = vec![
            // Step 1: not configured wins over everything else.
            (
                secrets(None, None),
                Some(bearer(S)),
                Some("agent-0001"),
                Err((503, "hosted_mode_not_configured")),
            ),
            (
                secrets(Some(""), Some(N)),
                Some(bearer(N)),
                Some("agent-0001"),
                Err((503, "hosted_mode_not_configured")),
            ),
            (
                secrets(None, Some(N)),
                Some(bearer(N)),
                None,
                Err((503, "hosted_mode_not_configured")),
            ),
            // Step 2: shape of the header.
            (
                secrets(Some(S), None),
                None,
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some("Bearer".into()),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some("Bearer ".into()),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(format!("Basic {S}")),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(S.into()),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(format!("Bearer {S} extra")),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            // Step 3: value.
            (
                secrets(Some(S), None),
                Some(bearer("wrong")),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(&S[..S.len() - 1])),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(&format!("{S}x"))),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(N)),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), Some("")),
                Some(bearer("")),
                Some("agent-0001"),
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(S)),
                Some("agent-0001"),
                Ok("agent-0001".into()),
            ),
            (
                secrets(Some(S), None),
                Some(format!("bearer {S}")),
                Some("agent-0001"),
                Ok("agent-0001".into()),
            ),
            (
                secrets(Some(S), Some(N)),
                Some(bearer(N)),
                Some("agent-0001"),
                Ok("agent-0001".into()),
            ),
            (
                secrets(Some(S), Some(N)),
                Some(bearer(S)),
                Some("agent-0001"),
                Ok("agent-0001".into()),
            ),
            // Step 4: only after authentication.
            (
                secrets(Some(S), None),
                Some(bearer("wrong")),
                None,
                Err((401, "unauthorized")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(S)),
                None,
                Err((400, "missing_agent_id")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(S)),
                Some("  "),
                Err((400, "missing_agent_id")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(S)),
                Some("../evil"),
                Err((400, "invalid_agent_id")),
            ),
            (
                secrets(Some(S), None),
                Some(bearer(S)),
                Some(" agent-0001 "),
                Ok("agent-0001".into()),
            ),
        ];
        for (i, (sec, auth, agent, want)) in rows.into_iter().enumerate() {
            let got = code(admit(sec, auth.as_deref(), agent));
            assert_eq!(got, want, "row {i}: auth={auth:?} agent={agent:?}");
        }
    }

    #[test]
    fn secrets_debug_does_not_leak() {
        let shown = format!("{:?}", secrets(Some(S), Some(N)));
        assert!(!shown.contains(S) && !shown.contains(N), "{shown}");
    }

    #[test]
    fn error_messages_do_not_echo_tokens() {
        let e = check_service_auth(secrets(Some(S), None), Some("Bearer attacker-token-xyz"))
            .unwrap_err();
        assert!(!e.to_json().contains("attacker-token-xyz"));
        assert!(!e.to_json().contains(S));
    }

    proptest! {
        #[test]
        fn secret_matches_is_equality(a in proptest::collection::vec(any::<u8>(), 0..40),
                                      b in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(bool::from(secret_matches(&a, &b)), a == b);
            prop_assert!(bool::from(secret_matches(&a, &a)));
        }

        #[test]
        fn prefixes_and_extensions_never_match(s in "[!-~]{1,40}", extra in "[!-~]{1,5}") {
            prop_assert!(!bool::from(secret_matches(&s.as_bytes()[..s.len() - 1], s.as_bytes())));
            let longer = [s.as_bytes(), extra.as_bytes()].concat();
            prop_assert!(!bool::from(secret_matches(&longer, s.as_bytes())));
        }
    }
}
