//! Target parsing table: every refused row has an accepted twin that differs
//! only in the property under test. Reasons are asserted word for word.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hermes_egress::target::{parse_absolute, parse_connect, Port, Proto};

/// (input, expected): `Ok((host, port))` or `Err(reason)`.
type Row = (&'static str, Result<(&'static str, u16), &'static str>);

const IP: &str = "IP literals are not allowed";
const USERINFO: &str = "userinfo is not allowed";
const INVALID: &str = "invalid host name";

const CONNECT_ROWS: &[Row] = &[
    // Plain names and ports.
    ("github.com:443", Ok(("github.com", 443))),
    ("github.com:80", Ok(("github.com", 80))),
    (
        "github.com:22",
        Err("port 22 is not allowed (only 80 and 443)"),
    ),
    (
        "github.com:8443",
        Err("port 8443 is not allowed (only 80 and 443)"),
    ),
    ("github.com", Err("CONNECT target must include a port")),
    ("github.com:", Err("CONNECT target must include a port")),
    ("github.com:https", Err("invalid port")),
    ("github.com:99999", Err("invalid port")),
    ("github.com:+443", Err("invalid port")),
    ("github.com:0", Err("invalid port")),
    // Userinfo.
    ("user@github.com:443", Err(USERINFO)),
    ("user:pw@github.com:443", Err(USERINFO)),
    ("github.com:443@evil.test:443", Err(USERINFO)),
    // Normalisation: case, trailing dot, IDNA, percent-encoding.
    ("GitHub.COM:443", Ok(("github.com", 443))),
    ("github.com.:443", Ok(("github.com", 443))),
    ("github.com..:443", Err(INVALID)),
    ("ⓖithub.com:443", Ok(("github.com", 443))),
    ("github%2ecom:443", Ok(("github.com", 443))),
    ("bücher.example:443", Ok(("xn--bcher-kva.example", 443))),
    ("git hub.com:443", Err(INVALID)),
    ("git\\hub.com:443", Err(INVALID)),
    ("github..com:443", Err(INVALID)),
    (".github.com:443", Err(INVALID)),
    (":443", Err(INVALID)),
    // IP literals in every encoding, each next to a name that looks alike.
    ("127.0.0.1:443", Err(IP)),
    ("127.0.0.1.:443", Err(IP)),
    ("127.0.0.x:443", Ok(("127.0.0.x", 443))),
    ("2130706433:443", Err(IP)),
    ("2130706433x:443", Ok(("2130706433x", 443))),
    ("0x7f.1:443", Err(IP)),
    ("0x7f.one:443", Ok(("0x7f.one", 443))),
    ("0x7f000001:443", Err(IP)),
    ("0177.0.0.1:443", Err(IP)),
    ("0177.0.0.a:443", Ok(("0177.0.0.a", 443))),
    ("127.1:443", Err(IP)),
    ("0:443", Err(IP)),
    ("0x:443", Err(IP)),
    ("1.2.3.256:443", Err(IP)),
    ("1.2.3.4.5:443", Err(IP)),
    ("github.123:443", Err(IP)),
    ("github.0x1f:443", Err(IP)),
    ("github.0x1g:443", Ok(("github.0x1g", 443))),
    ("%31%32%37.0.0.1:443", Err(IP)),
    ("１２７.0.0.1:443", Err(IP)),
    ("[::1]:443", Err(IP)),
    ("[::ffff:127.0.0.1]:443", Err(IP)),
    ("[::ffff:7f00:1]:443", Err(IP)),
    ("[fe80::1%25eth0]:443", Err(IP)),
    ("::1:443", Err(IP)),
    ("[::1]", Err(IP)),
];

#[test]
fn connect_targets() {
    for (input, expected) in CONNECT_ROWS {
        let got = parse_connect(input);
        match (expected, &got) {
            (Ok((host, port)), Ok(target)) => {
                assert_eq!(
                    (target.host(), target.port().number()),
                    (*host, *port),
                    "input {input:?}"
                );
                assert_eq!(target.proto(), Proto::Connect);
            }
            (Err(reason), Err(rejected)) => {
                assert_eq!(rejected.why.reason(), *reason, "input {input:?}")
            }
            _ => panic!("input {input:?}: expected {expected:?}, got {got:?}"),
        }
    }
}

const ABSOLUTE_ROWS: &[Row] = &[
    ("http://github.com/", Ok(("github.com", 80))),
    ("http://github.com", Ok(("github.com", 80))),
    ("HTTP://GitHub.com/x?y#z", Ok(("github.com", 80))),
    ("http://github.com:443/", Ok(("github.com", 443))),
    (
        "http://github.com:8080/",
        Err("port 8080 is not allowed (only 80 and 443)"),
    ),
    (
        "https://github.com/",
        Err("only http:// URIs are forwarded (use CONNECT for https)"),
    ),
    (
        "ftp://github.com/",
        Err("only http:// URIs are forwarded (use CONNECT for https)"),
    ),
    (
        "/index.html",
        Err("request target must be an absolute http:// URI"),
    ),
    ("http://github.com:80@evil.test/", Err(USERINFO)),
    ("http://user@github.com/", Err(USERINFO)),
    ("http://evil.test/?@github.com", Ok(("evil.test", 80))),
    ("http://github.com./", Ok(("github.com", 80))),
    ("http://2130706433/", Err(IP)),
    ("http://0x7f.1/", Err(IP)),
    ("http://[::ffff:127.0.0.1]/", Err(IP)),
    ("http://[::ffff:127.0.0.1]:80/", Err(IP)),
    ("http:///path", Err(INVALID)),
];

#[test]
fn absolute_targets() {
    for (input, expected) in ABSOLUTE_ROWS {
        let got = parse_absolute(input);
        match (expected, &got) {
            (Ok((host, port)), Ok(target)) => {
                assert_eq!(
                    (target.host(), target.port().number()),
                    (*host, *port),
                    "input {input:?}"
                );
                assert_eq!(target.proto(), Proto::Http);
            }
            (Err(reason), Err(rejected)) => {
                assert_eq!(rejected.why.reason(), *reason, "input {input:?}")
            }
            _ => panic!("input {input:?}: expected {expected:?}, got {got:?}"),
        }
    }
}

#[test]
fn rejected_targets_keep_what_was_asked_for() {
    let rejected = parse_connect("user@github.com:443").unwrap_err();
    assert_eq!(
        (rejected.raw_host.as_str(), rejected.port),
        ("user@github.com", Some(443))
    );
    let rejected = parse_connect("[::1]:22").unwrap_err();
    assert_eq!(
        (rejected.raw_host.as_str(), rejected.port),
        ("[::1]", Some(22))
    );
    let rejected = parse_connect("github.com:22").unwrap_err();
    assert_eq!(
        (rejected.raw_host.as_str(), rejected.port),
        ("github.com", Some(22))
    );
}

#[test]
fn host_header_omits_default_ports() {
    assert_eq!(
        parse_absolute("http://github.com/").unwrap().host_header(),
        "github.com"
    );
    assert_eq!(
        parse_absolute("http://github.com:443/")
            .unwrap()
            .host_header(),
        "github.com:443"
    );
    assert_eq!(parse_connect("github.com:443").unwrap().port(), Port::Https);
}
