//! Provider keys for Hermes (SPEC §6) and the per-request BYOK overlay
//! (SPEC §4), decided purely.
//!
//! Only complete sets are kept: Hermes fails whole turns on a dead
//! credential, so a half-configured provider is worse than none. Dropped
//! sets are reported by variable *name* so the object can log why, never by
//! value. [`KeySet::canonical`] is the input of the keyed fingerprint the
//! object compares to decide whether the running gateway must be
//! re-provisioned.

use std::collections::BTreeMap;

use crate::errors::{ApiError, ErrorCode};

/// Single-variable providers, forwarded when set.
const SINGLE: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "NOUS_API_KEY",
];
/// Multi-variable providers: all or nothing.
const CLOUDFLARE_SET: &[&str] = &["CLOUDFLARE_API_KEY", "CLOUDFLARE_ACCOUNT_ID"];
const VERTEX_SET: &[&str] = &["VERTEXAI_PROJECT", "VERTEXAI_LOCATION", "VERTEX_SA_JSON"];

/// Header names of the BYOK overlay.
pub const BYOK_PROVIDER_HEADER: &str = "x-hermes-provider";
pub const BYOK_KEY_HEADER: &str = "x-hermes-provider-key";

/// The provider environment the gateway should run with.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct KeySet {
    /// Variables for Hermes' `.env`.
    pub env: BTreeMap<String, String>,
    /// The Vertex service-account JSON (materialised as a file).
    pub vertex_sa_json: Option<String>,
    /// Names of variables that were set but dropped as an incomplete set.
    pub dropped: Vec<String>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("vertex_sa_json", &self.vertex_sa_json.is_some())
            .field("dropped", &self.dropped)
            .finish()
    }
}

impl KeySet {
    /// Collect from the Worker's secrets (`lookup` returns a binding's
    /// value; empty counts as unset).
    pub fn from_secrets(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let mut set = KeySet::default();
        for name in SINGLE {
            if let Some(v) = get(name) {
                set.env.insert((*name).to_owned(), v);
            }
        }
        if let Some(v) = get("GEMINI_API_KEY") {
            set.env.insert("GEMINI_API_KEY".into(), v.clone());
            set.env.insert("GOOGLE_API_KEY".into(), v);
        }
        let complete = |names: &[&str], set: &mut KeySet| -> Option<Vec<String>> {
            let values: Vec<Option<String>> = names.iter().map(|n| get(n)).collect();
            if values.iter().all(Option::is_some) {
                Some(values.into_iter().flatten().collect())
            } else {
                set.dropped.extend(
                    names
                        .iter()
                        .zip(&values)
                        .filter(|(_, v)| v.is_some())
                        .map(|(n, _)| (*n).to_owned()),
                );
                None
            }
        };
        if let Some(v) = complete(CLOUDFLARE_SET, &mut set) {
            set.env.insert("CLOUDFLARE_API_KEY".into(), v[0].clone());
            set.env.insert("CLOUDFLARE_ACCOUNT_ID".into(), v[1].clone());
        }
        if let Some(v) = complete(VERTEX_SET, &mut set) {
            set.env.insert("VERTEXAI_PROJECT".into(), v[0].clone());
            set.env.insert("VERTEXAI_LOCATION".into(), v[1].clone());
            set.vertex_sa_json = Some(v[2].clone());
        }
        set
    }

    /// Overlay a customer's own key for one provider.
    pub fn with_byok(mut self, byok: &Byok) -> Self {
        for var in byok.provider.env_vars() {
            self.env.insert((*var).to_owned(), byok.key.clone());
        }
        self
    }

    /// Deterministic serialisation of the set, the input to the keyed
    /// fingerprint. Length-prefixed so no two sets share a serialisation.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.env {
            out.push_str(&format!("{}:{}={}:{};", k.len(), k, v.len(), v));
        }
        if let Some(json) = &self.vertex_sa_json {
            out.push_str(&format!("vertex={}:{};", json.len(), json));
        }
        out
    }
}

/// Providers a customer may bring a key for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    OpenRouter,
    Gemini,
}

impl Provider {
    fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "openai" => Some(Self::OpenAi),
            "anthropic" => Some(Self::Anthropic),
            "openrouter" => Some(Self::OpenRouter),
            "gemini" => Some(Self::Gemini),
            _ => None,
        }
    }

    fn env_vars(self) -> &'static [&'static str] {
        match self {
            Self::OpenAi => &["OPENAI_API_KEY"],
            Self::Anthropic => &["ANTHROPIC_API_KEY"],
            Self::OpenRouter => &["OPENROUTER_API_KEY"],
            Self::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }
}

/// A validated bring-your-own-key overlay.
#[derive(Clone, PartialEq, Eq)]
pub struct Byok {
    pub provider: Provider,
    pub key: String,
}

impl std::fmt::Debug for Byok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Byok")
            .field("provider", &self.provider)
            .field("key", &"<redacted>")
            .finish()
    }
}

fn invalid(message: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidByok, message)
}

/// Parse the two BYOK headers. Neither → `None`; one without the other,
/// an unknown provider, or a key that is not 8..=512 printable ASCII
/// characters without spaces → 400 `invalid_byok` (the key is never echoed).
pub fn parse_byok(provider: Option<&str>, key: Option<&str>) -> Result<Option<Byok>, ApiError> {
    match (provider, key) {
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(invalid(
            "x-hermes-provider and x-hermes-provider-key must be sent together",
        )),
        (Some(p), Some(k)) => {
            let provider = Provider::parse(p).ok_or_else(|| {
                invalid("x-hermes-provider must be one of openai, anthropic, openrouter, gemini")
            })?;
            let printable = k.bytes().all(|b| (0x21..=0x7e).contains(&b));
            if !(8..=512).contains(&k.len()) || !printable {
                return Err(invalid("x-hermes-provider-key must be 8..512 printable ASCII characters without spaces"));
            }
            Ok(Some(Byok {
                provider,
                key: k.to_owned(),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn singles_gemini_mirror_and_complete_sets() {
        let set = KeySet::from_secrets(lookup(&[
            ("OPENAI_API_KEY", "sk-openai"),
            ("NOUS_API_KEY", ""),
            ("GEMINI_API_KEY", "g-key"),
            ("CLOUDFLARE_API_KEY", "cf-key"),
            ("CLOUDFLARE_ACCOUNT_ID", "cf-acct"),
            ("VERTEXAI_PROJECT", "proj"),
            ("VERTEXAI_LOCATION", "us-central1"),
            ("VERTEX_SA_JSON", "{\"type\":\"service_account\"}"),
        ]));
        let names: Vec<&str> = set.env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "CLOUDFLARE_ACCOUNT_ID",
                "CLOUDFLARE_API_KEY",
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "OPENAI_API_KEY",
                "VERTEXAI_LOCATION",
                "VERTEXAI_PROJECT"
            ]
        );
        assert_eq!(set.env["GOOGLE_API_KEY"], "g-key");
        assert_eq!(
            set.vertex_sa_json.as_deref(),
            Some("{\"type\":\"service_account\"}")
        );
        assert!(
            !set.env.contains_key("VERTEX_SA_JSON"),
            "the JSON goes to a file, not the env"
        );
        assert!(set.dropped.is_empty());
    }

    #[test]
    fn incomplete_sets_are_dropped_by_name() {
        let set = KeySet::from_secrets(lookup(&[
            ("CLOUDFLARE_API_KEY", "cf-key"),
            ("VERTEXAI_PROJECT", "proj"),
            ("VERTEX_SA_JSON", "{}"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
        ]));
        assert_eq!(
            set.env.keys().collect::<Vec<_>>(),
            vec!["ANTHROPIC_API_KEY"]
        );
        assert_eq!(set.vertex_sa_json, None);
        assert_eq!(
            set.dropped,
            vec!["CLOUDFLARE_API_KEY", "VERTEXAI_PROJECT", "VERTEX_SA_JSON"]
        );
        assert!(!format!("{set:?}").contains("sk-ant"));
    }

    #[test]
    fn byok_table() {
        fn ok(p: &str, k: &str) -> Result<Option<Provider>, ApiError> {
            parse_byok(Some(p), Some(k)).map(|b| b.map(|b| b.provider))
        }
        assert_eq!(parse_byok(None, None), Ok(None));
        assert_eq!(ok("openai", "sk-12345678"), Ok(Some(Provider::OpenAi)));
        assert_eq!(
            ok(" Anthropic ", "sk-ant-123"),
            Ok(Some(Provider::Anthropic))
        );
        assert_eq!(ok("gemini", &"x".repeat(512)), Ok(Some(Provider::Gemini)));
        assert_eq!(ok("openrouter", "12345678"), Ok(Some(Provider::OpenRouter)));
        for (p, k) in [
            ("openai", "1234567"),
            ("openai", "sk 12345678"),
            ("openai", "sk-1234567\u{7f}"),
            ("openai", "sk-12345é78"),
            ("openai", "sk-\t2345678"),
            ("mistral", "sk-12345678"),
            ("", "sk-12345678"),
        ] {
            let e = parse_byok(Some(p), Some(k)).unwrap_err();
            assert_eq!(
                (e.status(), e.code.as_str()),
                (400, "invalid_byok"),
                "{p:?} {k:?}"
            );
            assert!(!e.to_json().contains(k) || k.is_empty(), "key echoed");
        }
        assert!(ok("openai", &"x".repeat(513)).is_err());
        assert!(parse_byok(Some("openai"), None).is_err());
        assert!(parse_byok(None, Some("sk-12345678")).is_err());
    }

    #[test]
    fn byok_overlay_changes_the_canonical_form() {
        let base = KeySet::from_secrets(lookup(&[("OPENAI_API_KEY", "platform-key")]));
        let byok = parse_byok(Some("openai"), Some("customer-key"))
            .unwrap()
            .unwrap();
        let over = base.clone().with_byok(&byok);
        assert_eq!(over.env["OPENAI_API_KEY"], "customer-key");
        assert_ne!(base.canonical(), over.canonical());
        let gem = base.clone().with_byok(
            &parse_byok(Some("gemini"), Some("gem-key-1"))
                .unwrap()
                .unwrap(),
        );
        assert_eq!(gem.env["GOOGLE_API_KEY"], "gem-key-1");
        assert_eq!(
            base.canonical(),
            KeySet::from_secrets(lookup(&[("OPENAI_API_KEY", "platform-key")])).canonical()
        );
    }

    #[test]
    fn canonical_is_unambiguous() {
        let mut a = KeySet::default();
        a.env.insert("A".into(), "x;B=y".into());
        let mut b = KeySet::default();
        b.env.insert("A".into(), "x".into());
        b.env.insert("B".into(), "y".into());
        assert_ne!(a.canonical(), b.canonical());
    }
}
