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

#[test]
fn audit_line_shape_and_timestamp() {
    use hermes_egress::audit::{rfc3339_utc, AuditRecord};
    use hermes_egress::Proto;
    use std::time::{Duration, UNIX_EPOCH};

    assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        rfc3339_utc(UNIX_EPOCH + Duration::from_millis(951_782_400_123)),
        "2000-02-29T00:00:00.123Z"
    );
    assert_eq!(
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(1_796_083_199)),
        "2026-11-30T23:59:59.000Z"
    );

    let record = AuditRecord::new(
        UNIX_EPOCH,
        &deny("host is not on the allowlist"),
        "evil.test",
        443,
        Proto::Connect,
        &[],
    );
    assert_eq!(
        record.to_json_line(),
        r#"{"ts":"1970-01-01T00:00:00.000Z","decision":"deny","host":"evil.test","port":443,"proto":"connect","reason":"host is not on the allowlist","addrs":[]}"#
    );
    let addr = "140.82.121.4".parse().unwrap();
    let record = AuditRecord::new(
        UNIX_EPOCH,
        &allow("host matches allowlist entry github.com"),
        "github.com",
        80,
        Proto::Http,
        &[addr],
    );
    assert!(record
        .to_json_line()
        .contains(r#""decision":"allow","host":"github.com","port":80,"proto":"http""#));
    assert!(record
        .to_json_line()
        .ends_with(r#""addrs":["140.82.121.4"]}"#));
}
