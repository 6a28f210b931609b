//! Address classification table (smokescreen-style): ranges are probed at
//! and just outside their edges, so every denied row has an allowed twin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use hermes_egress::{classify, decide_resolved, AddressClass, Decision};

use AddressClass::*;

const ROWS: &[(&str, AddressClass)] = &[
    // Loopback.
    ("127.0.0.1", Loopback),
    ("127.255.255.255", Loopback),
    ("128.0.0.1", Global),
    ("126.255.255.255", Global),
    ("::1", Loopback),
    // Private.
    ("10.0.0.1", Private),
    ("10.255.255.255", Private),
    ("11.0.0.1", Global),
    ("9.255.255.255", Global),
    ("172.16.0.1", Private),
    ("172.31.255.255", Private),
    ("172.15.255.255", Global),
    ("172.32.0.0", Global),
    ("192.168.0.1", Private),
    ("192.169.0.1", Global),
    ("fc00::1", Private),
    ("fdff:ffff::1", Private),
    // Link-local and metadata.
    ("169.254.0.1", LinkLocal),
    ("169.255.0.1", Global),
    ("169.254.169.254", Metadata),
    ("169.254.169.253", LinkLocal),
    ("fe80::1", LinkLocal),
    ("febf::1", LinkLocal),
    ("fec0::1", SiteLocal),
    ("fd00:ec2::254", Metadata),
    ("fd00:ec2::253", Private),
    ("100.100.100.200", Metadata),
    ("100.100.100.201", SharedCgnat),
    // CGNAT.
    ("100.64.0.1", SharedCgnat),
    ("100.127.255.255", SharedCgnat),
    ("100.63.255.255", Global),
    ("100.128.0.0", Global),
    // Unspecified, this network, broadcast, multicast, reserved.
    ("0.0.0.0", Unspecified),
    ("0.1.2.3", ThisNetwork),
    ("1.0.0.1", Global),
    ("::", Unspecified),
    ("255.255.255.255", Broadcast),
    ("240.0.0.1", Reserved),
    ("239.255.255.255", Multicast),
    ("224.0.0.1", Multicast),
    ("223.255.255.255", Global),
    ("ff02::1", Multicast),
    ("192.0.0.8", Reserved),
    ("192.0.1.1", Global),
    ("192.88.99.1", Reserved),
    ("192.88.100.1", Global),
    ("100::1", Reserved),
    ("4000::1", Reserved),
    ("1fff::1", Reserved),
    // Documentation and benchmarking.
    ("192.0.2.1", Documentation),
    ("198.51.100.1", Documentation),
    ("203.0.113.1", Documentation),
    ("203.0.114.1", Global),
    ("2001:db8::1", Documentation),
    ("2001:db9::1", Global),
    ("3fff::1", Documentation),
    ("198.18.0.1", Benchmarking),
    ("198.19.255.255", Benchmarking),
    ("198.20.0.1", Global),
    ("198.17.255.255", Global),
    ("2001:2::1", Benchmarking),
    // IPv4-embedding IPv6 forms.
    ("::ffff:127.0.0.1", Ipv4Mapped),
    ("::ffff:8.8.8.8", Ipv4Mapped),
    ("::127.0.0.1", Ipv4Compatible),
    ("::8.8.8.8", Ipv4Compatible),
    ("64:ff9b::7f00:1", Nat64),
    ("64:ff9b:1::1", Nat64),
    ("64:ff9c::1", Reserved),
    ("2002:7f00:1::", SixToFour),
    ("2003::1", Global),
    ("2001::1", Teredo),
    ("2001:0:4136:e378::1", Teredo),
    ("2001:1::1", Global),
    // Global unicast.
    ("8.8.8.8", Global),
    ("140.82.121.4", Global),
    ("2606:4700::1111", Global),
    ("2a00:1450:4001::200e", Global),
];

#[test]
fn classification_table() {
    assert!(ROWS.len() >= 40);
    for (addr, expected) in ROWS {
        let ip: IpAddr = addr.parse().unwrap();
        assert_eq!(classify(ip), *expected, "address {addr}");
        assert_eq!(expected.is_allowed(), *expected == Global);
    }
}

#[test]
fn resolved_set_is_denied_if_any_address_is() {
    let public: IpAddr = "140.82.121.4".parse().unwrap();
    let private: IpAddr = "10.0.0.5".parse().unwrap();
    let metadata: IpAddr = "169.254.169.254".parse().unwrap();
    let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
    let cases: &[(&[IpAddr], Decision)] = &[
        (
            &[public],
            Decision::Allow {
                reason: "all resolved addresses are global unicast".into(),
            },
        ),
        (
            &[public, private],
            Decision::Deny {
                reason: "resolved address 10.0.0.5 is a private address".into(),
            },
        ),
        (
            &[private, public],
            Decision::Deny {
                reason: "resolved address 10.0.0.5 is a private address".into(),
            },
        ),
        (
            &[metadata],
            Decision::Deny {
                reason: "resolved address 169.254.169.254 is a cloud metadata address".into(),
            },
        ),
        (
            &[mapped],
            Decision::Deny {
                reason: "resolved address ::ffff:127.0.0.1 is an IPv4-mapped IPv6 address".into(),
            },
        ),
        (
            &[],
            Decision::Deny {
                reason: "host did not resolve to any address".into(),
            },
        ),
    ];
    for (addrs, expected) in cases {
        assert_eq!(&decide_resolved(addrs), expected, "{addrs:?}");
    }
}
