//! Canonicalisation of the Hermes API sub-path and the header allowlists of
//! the proxy and chat routes (SPEC §4).
//!
//! The sub-path is percent-decoded exactly once. Anything whose meaning
//! could differ between this check and the upstream router is refused with
//! `bad_path`: dot segments (however encoded), encoded slashes that would
//! split a segment, backslashes, NUL and control characters, invalid
//! escapes, invalid or overlong UTF-8, empty segments, and a `%` surviving
//! the decode (double encoding like `%252e`). What is forwarded is rebuilt
//! from the decoded segments, so the upstream sees exactly what was checked.

use crate::errors::{ApiError, ErrorCode};

/// Route prefix of the proxy.
pub const PROXY_PREFIX: &str = "/hosted/agent/proxy";

/// Headers the proxy forwards; everything else (the caller's authorization
/// included) is dropped.
pub const PROXY_FORWARDED_HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "x-hermes-session-id",
    "x-hermes-session-key",
];
/// Headers the chat route forwards (never a caller's session key).
pub const CHAT_FORWARDED_HEADERS: &[&str] = &["content-type", "accept", "x-hermes-session-id"];
pub const SESSION_KEY_HEADER: &str = "x-hermes-session-key";
pub const TRIGGER_HEADER: &str = "x-divinci-trigger";
/// Session key the edge sets for proactive turns.
pub const PROACTIVE_SESSION_KEY: &str = "divinci-internal-proactive";
const RESERVED_SESSION_PREFIX: &str = "divinci-internal-";

fn bad_path(why: &str) -> ApiError {
    ApiError::new(ErrorCode::BadPath, format!("refused proxy path: {why}"))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode_once(raw: &str) -> Result<String, ApiError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex);
            let lo = bytes.get(i + 2).copied().and_then(hex);
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h * 16 + l),
                _ => return Err(bad_path("invalid percent escape")),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    // Rust's UTF-8 validation rejects overlong forms (`%C0%AE`).
    String::from_utf8(out).map_err(|_| bad_path("not valid UTF-8"))
}

/// Characters kept as they are when re-encoding a segment (RFC 3986 pchar
/// minus `%`).
fn is_pchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c)
}

fn encode_segment(seg: &str, out: &mut String) {
    for c in seg.chars() {
        if is_pchar(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
}

/// Canonicalise the raw (still percent-encoded) sub-path that follows
/// [`PROXY_PREFIX`]. Empty → `/`. Returns the path to forward.
pub fn canonical_subpath(raw: &str) -> Result<String, ApiError> {
    if raw.is_empty() || raw == "/" {
        return Ok("/".to_owned());
    }
    let Some(rest) = raw.strip_prefix('/') else {
        return Err(bad_path("must start with /"));
    };
    let raw_segments: Vec<&str> = rest.split('/').collect();
    let mut out = String::with_capacity(raw.len());
    for (i, raw_seg) in raw_segments.iter().enumerate() {
        let is_last = i + 1 == raw_segments.len();
        if raw_seg.is_empty() && !is_last {
            return Err(bad_path("empty segment"));
        }
        let seg = decode_once(raw_seg)?;
        if seg.contains('/') {
            return Err(bad_path("encoded slash inside a segment"));
        }
        if seg.contains('\\') {
            return Err(bad_path("backslash"));
        }
        if seg.chars().any(char::is_control) {
            return Err(bad_path("control character"));
        }
        if seg.contains('%') {
            return Err(bad_path("percent sign after decoding (double encoding)"));
        }
        if seg == "." || seg == ".." {
            return Err(bad_path("dot segment"));
        }
        out.push('/');
        encode_segment(&seg, &mut out);
    }
    Ok(out)
}

/// The sub-path of a request path under the proxy route, if it is one:
/// `/hosted/agent/proxy` and `/hosted/agent/proxy/...` but not
/// `/hosted/agent/proxyx`.
pub fn proxy_subpath(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(PROXY_PREFIX)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// Route prefix of exposed terminal ports.
pub const PORTS_PREFIX: &str = "/hosted/agent/ports/";

/// `/hosted/agent/ports/<port>[/<rest>]` → the raw port text and the raw
/// rest (empty or starting with `/`).
pub fn port_route(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(PORTS_PREFIX)?;
    Some(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    })
}

/// A port a terminal user may expose: 1024..=65535, not one of the
/// platform's own.
pub fn parse_exposable_port(raw: &str) -> Result<u16, ApiError> {
    let bad = || {
        ApiError::new(
            ErrorCode::BadRequest,
            "port must be 1024..65535 and not a reserved platform port",
        )
    };
    if raw.is_empty() || raw.len() > 5 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let port: u16 = raw.parse().map_err(|_| bad())?;
    if port < 1024 || hermes_protocol::ports::RESERVED_PORTS.contains(&port) {
        return Err(bad());
    }
    Ok(port)
}

/// Refuse session keys in the platform's reserved namespace.
pub fn check_session_key(value: Option<&str>) -> Result<(), ApiError> {
    match value {
        Some(v)
            if v.trim()
                .to_ascii_lowercase()
                .starts_with(RESERVED_SESSION_PREFIX) =>
        {
            Err(ApiError::new(
                ErrorCode::ReservedSessionKey,
                "session keys starting with divinci-internal- are reserved",
            ))
        }
        _ => Ok(()),
    }
}

/// Session key the chat route sets: the proactive key for a proactive
/// trigger unless proactive tools are disabled; otherwise none.
pub fn chat_session_key(
    trigger: Option<&str>,
    proactive_tools_disabled: bool,
) -> Option<&'static str> {
    let proactive = trigger.is_some_and(|t| t.trim().eq_ignore_ascii_case("proactive"));
    (proactive && !proactive_tools_disabled).then_some(PROACTIVE_SESSION_KEY)
}

/// Path and query exactly as the client sent them. `Url` parsing would
/// resolve dot segments (including `%2e%2e`) before any check could see
/// them; the proxy route must refuse those, not silently rewrite them.
pub fn raw_path_and_query(url: &str) -> (&str, Option<&str>) {
    let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
    let from_path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    let without_fragment = from_path.split('#').next().unwrap_or("/");
    match without_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (without_fragment, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepted_paths() {
        let rows = [
            ("", "/"),
            ("/", "/"),
            ("/v1/models", "/v1/models"),
            ("/v1/models/", "/v1/models/"),
            ("/api/sessions/abc-123", "/api/sessions/abc-123"),
            ("/v1/runs/r%31", "/v1/runs/r1"),
            ("/a%20b", "/a%20b"),
            ("/caf%C3%A9", "/caf%C3%A9"),
            ("/v1/..x", "/v1/..x"),
            ("/.well-known", "/.well-known"),
        ];
        for (raw, want) in rows {
            assert_eq!(canonical_subpath(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn refused_paths() {
        let rows = [
            "/..",
            "/.",
            "/v1/../admin",
            "/%2e%2e/admin",
            "/%2E%2e",
            "/.%2e",
            "/%252e%252e/admin",
            "/%252e",
            "/a%2F..%2Fb",
            "/a%2fb",
            "/a%5Cb",
            "/a\\b",
            "/a%00b",
            "/a%0ab",
            "/%C0%AE%C0%AE/x",
            "/%E0%80%AE",
            "/%zz",
            "/%4",
            "/%",
            "//v1/models",
            "/v1//models",
            "v1/models",
        ];
        for raw in rows {
            let e = canonical_subpath(raw).unwrap_err();
            assert_eq!((e.status(), e.code.as_str()), (400, "bad_path"), "{raw}");
        }
    }

    #[test]
    fn raw_path_is_not_normalised() {
        let rows = [
            (
                "http://h:1/hosted/agent/proxy/%2e%2e/x?a=1#f",
                ("/hosted/agent/proxy/%2e%2e/x", Some("a=1")),
            ),
            ("https://h/hosted/../x", ("/hosted/../x", None)),
            ("http://h:1", ("/", None)),
            ("http://h:1?q", ("/", None)),
            ("http://h/p?", ("/p", Some(""))),
        ];
        for (url, want) in rows {
            assert_eq!(raw_path_and_query(url), want, "{url}");
        }
    }

    #[test]
    fn port_routes() {
        assert_eq!(
            port_route("/hosted/agent/ports/3000/x/y"),
            Some(("3000", "/x/y"))
        );
        assert_eq!(port_route("/hosted/agent/ports/3000"), Some(("3000", "")));
        assert_eq!(port_route("/hosted/agent/portsx/3000"), None);
        assert_eq!(parse_exposable_port("3000").unwrap(), 3000);
        assert_eq!(parse_exposable_port("1024").unwrap(), 1024);
        assert_eq!(parse_exposable_port("65535").unwrap(), 65535);
        for bad in [
            "", "1023", "65536", "8080", "8642", "9119", "3128", "+3000", "3000a", "03000a",
            "999999",
        ] {
            let e = parse_exposable_port(bad).unwrap_err();
            assert_eq!((e.status(), e.code.as_str()), (400, "bad_request"), "{bad}");
        }
    }

    #[test]
    fn prefix_is_segment_bounded() {
        assert_eq!(proxy_subpath("/hosted/agent/proxy"), Some(""));
        assert_eq!(
            proxy_subpath("/hosted/agent/proxy/v1/models"),
            Some("/v1/models")
        );
        assert_eq!(proxy_subpath("/hosted/agent/proxyx"), None);
        assert_eq!(proxy_subpath("/hosted/agent/prox"), None);
    }

    #[test]
    fn session_keys_and_trigger() {
        assert!(check_session_key(None).is_ok());
        assert!(check_session_key(Some("user-123")).is_ok());
        assert!(check_session_key(Some("divinci-internalx")).is_ok());
        for bad in [
            "divinci-internal-proactive",
            " DIVINCI-INTERNAL-x",
            "Divinci-Internal-",
        ] {
            let e = check_session_key(Some(bad)).unwrap_err();
            assert_eq!(
                (e.status(), e.code.as_str()),
                (400, "reserved_session_key"),
                "{bad}"
            );
        }
        assert_eq!(
            chat_session_key(Some(" Proactive "), false),
            Some(PROACTIVE_SESSION_KEY)
        );
        assert_eq!(chat_session_key(Some("proactive"), true), None);
        assert_eq!(chat_session_key(Some("user"), false), None);
        assert_eq!(chat_session_key(None, false), None);
    }

    proptest! {
        /// Whatever is accepted has no dot segment, backslash, NUL or
        /// encoded slash once decoded, and is a fixed point.
        #[test]
        fn accepted_output_is_safe_and_stable(raw in "(/([a-zA-Z0-9.%\\\\]|%2[eEfF]|%5[cC]|%00|%25){0,6}){1,4}") {
            if let Ok(out) = canonical_subpath(&raw) {
                let decoded = decode_once(&out).unwrap();
                for seg in decoded.split('/').skip(1) {
                    prop_assert!(seg != "." && seg != "..", "{raw} -> {out}");
                    prop_assert!(!seg.contains('\\') && !seg.contains('\0') && !seg.contains('%'));
                }
                prop_assert_eq!(canonical_subpath(&out).unwrap(), out.clone());
            }
        }
    }
}
