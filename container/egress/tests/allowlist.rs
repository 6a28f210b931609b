//! Allowlist parsing and matching tables. Every dropped entry has a kept
//! twin; every non-matching host has a matching twin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hermes_egress::allowlist::{parse_entry, Allowlist, MatchKind, Source, DEFAULT_HOSTS};

/// (entry, expected): `Ok(display form)` or `Err(reason)`.
const ENTRY_ROWS: &[(&str, Result<&str, &str>)] = &[
    ("github.com", Ok("github.com")),
    ("=github.com", Ok("=github.com")),
    ("= github.com", Ok("=github.com")),
    ("GitHub.COM.", Ok("github.com")),
    ("ⓖithub.com", Ok("github.com")),
    ("bücher.example", Ok("xn--bcher-kva.example")),
    ("", Err("empty entry")),
    ("=", Err("empty entry")),
    (
        "*.github.com",
        Err("wildcards are not supported (an entry already matches its subdomains)"),
    ),
    (
        "git*hub.com",
        Err("wildcards are not supported (an entry already matches its subdomains)"),
    ),
    (
        "=*",
        Err("wildcards are not supported (an entry already matches its subdomains)"),
    ),
    ("10.0.0.1", Err("IP literals are not allowed")),
    ("10.0.0.x", Ok("10.0.0.x")),
    ("2130706433", Err("IP literals are not allowed")),
    ("[::1]", Err("IP literals are not allowed")),
    ("::1", Err("IP literals are not allowed")),
    ("=0x7f.1", Err("IP literals are not allowed")),
    (
        "com",
        Err("single-label names are not allowed (they would cover a whole top-level domain)"),
    ),
    (
        "localhost",
        Err("single-label names are not allowed (they would cover a whole top-level domain)"),
    ),
    ("example.com", Ok("example.com")),
    ("https://github.com", Err("invalid host name")),
    ("github.com:443", Err("invalid host name")),
    ("git hub.com", Err("invalid host name")),
    ("github..com", Err("invalid host name")),
];

#[test]
fn entries() {
    for (input, expected) in ENTRY_ROWS {
        let got = parse_entry(input).map(|entry| entry.to_string());
        assert_eq!(got.as_deref().map_err(|e| *e), *expected, "entry {input:?}");
    }
}

/// (allowlist, host, expected match). Each `false` row has a `true` twin.
const MATCH_ROWS: &[(&str, &str, bool)] = &[
    ("github.com", "github.com", true),
    ("github.com", "api.github.com", true),
    ("github.com", "a.b.github.com", true),
    ("github.com", "evilgithub.com", false),
    ("github.com", "github.com.evil.test", false),
    ("github.com", "github.co", false),
    ("github.com", "ithub.com", false),
    ("github.com", "com", false),
    ("=github.com", "github.com", true),
    ("=github.com", "api.github.com", false),
    ("api.github.com", "api.github.com", true),
    ("api.github.com", "github.com", false),
    ("api.github.com", "xapi.github.com", false),
    ("api.github.com", "x.api.github.com", true),
    ("pypi.org,=crates.io", "crates.io", true),
    ("pypi.org,=crates.io", "static.crates.io", false),
    ("pypi.org,=crates.io", "files.pypi.org", true),
];

#[test]
fn matching() {
    for (list, host, expected) in MATCH_ROWS {
        let (allowlist, dropped) = Allowlist::parse(list);
        assert!(dropped.is_empty(), "{list:?}: {dropped:?}");
        assert_eq!(
            allowlist.find(host).is_some(),
            *expected,
            "list {list:?} host {host:?}"
        );
    }
}

#[test]
fn list_parsing_trims_drops_and_dedups() {
    let (list, dropped) =
        Allowlist::parse(" GitHub.com , ,*.evil.test,10.0.0.1, github.com., =pypi.org\nnpmjs.org ");
    let names: Vec<String> = list.entries().iter().map(ToString::to_string).collect();
    assert_eq!(names, ["github.com", "=pypi.org", "npmjs.org"]);
    let reasons: Vec<(&str, &str)> = dropped
        .iter()
        .map(|d| (d.entry.as_str(), d.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("", "empty entry"),
            (
                "*.evil.test",
                "wildcards are not supported (an entry already matches its subdomains)"
            ),
            ("10.0.0.1", "IP literals are not allowed"),
        ]
    );
    assert_eq!(list.source(), Source::Configured);
    assert_eq!(list.entries()[1].kind(), MatchKind::Exact);
}

#[test]
fn unset_means_defaults_and_empty_means_deny_all() {
    let (unset, dropped) = Allowlist::from_env_value(None);
    assert!(dropped.is_empty());
    assert_eq!(unset.source(), Source::Default);
    assert_eq!(unset.entries().len(), DEFAULT_HOSTS.len());
    assert!(unset.find("codeload.github.com").is_some());
    assert!(unset.find("evil.test").is_none());

    for value in ["", "  ", ",", " , ", "*", "127.0.0.1"] {
        let (list, _) = Allowlist::from_env_value(Some(value));
        assert!(list.is_empty(), "{value:?}");
        assert_eq!(list.source(), Source::Configured);
        assert!(list.find("github.com").is_none());
    }
    let (list, _) = Allowlist::from_env_value(Some("github.com"));
    assert!(list.find("github.com").is_some());
}

#[test]
fn every_default_host_is_valid() {
    for host in DEFAULT_HOSTS {
        assert_eq!(parse_entry(host).unwrap().name(), *host);
    }
}
