//! `decide` table: allowlist × target, reasons word for word; each deny row
//! has an allow twin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hermes_egress::{decide, parse_connect, Allowlist, Decision};

fn allow(reason: &str) -> Decision {
    Decision::Allow {
        reason: reason.to_owned(),
    }
}

fn deny(reason: &str) -> Decision {
    Decision::Deny {
        reason: reason.to_owned(),
    }
}

#[test]
fn decisions() {
    const NOT_LISTED: &str = "host is not on the allowlist";
    let rows: &[(Option<&str>, &str, Decision)] = &[
        (
            Some("github.com"),
            "github.com:443",
            allow("host matches allowlist entry github.com"),
        ),
        (
            Some("github.com"),
            "api.github.com:443",
            allow("host matches allowlist entry github.com"),
        ),
        (Some("github.com"), "evilgithub.com:443", deny(NOT_LISTED)),
        (
            Some("github.com"),
            "github.com.evil.test:443",
            deny(NOT_LISTED),
        ),
        (
            Some("=github.com"),
            "github.com:443",
            allow("host matches allowlist entry =github.com"),
        ),
        (Some("=github.com"), "api.github.com:443", deny(NOT_LISTED)),
        (
            Some("github.com,=api.github.com"),
            "api.github.com:80",
            allow("host matches allowlist entry github.com"),
        ),
        (
            Some(""),
            "github.com:443",
            deny("allowlist is empty: all egress is denied"),
        ),
        (
            Some("*,10.0.0.1"),
            "github.com:443",
            deny("allowlist is empty: all egress is denied"),
        ),
        (
            None,
            "github.com:443",
            allow("host matches allowlist entry github.com"),
        ),
        (
            None,
            "codeload.github.com:443",
            allow("host matches allowlist entry github.com"),
        ),
        (
            None,
            "files.pythonhosted.org:443",
            allow("host matches allowlist entry files.pythonhosted.org"),
        ),
        (None, "evil.test:443", deny(NOT_LISTED)),
        (
            Some("ⓖithub.com"),
            "GITHUB.com.:443",
            allow("host matches allowlist entry github.com"),
        ),
        (
            Some("github.com"),
            "github%2ecom:443",
            allow("host matches allowlist entry github.com"),
        ),
    ];
    for (list, target, expected) in rows {
        let (allowlist, _) = Allowlist::from_env_value(*list);
        let target = parse_connect(target).unwrap();
        assert_eq!(
            &decide(&allowlist, &target),
            expected,
            "list {list:?} target {target:?}"
        );
    }
}
