//! Property tests for normalisation and matching.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hermes_egress::allowlist::{parse_entry, Allowlist};
use hermes_egress::host::normalise_host;
use hermes_egress::{decide, parse_connect};
use proptest::prelude::*;

/// An ASCII LDH label. `xn--` labels are punycode and must decode, which
/// random text does not: those are covered by the IDNA table rows instead.
fn label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,10}[a-z]".prop_filter("not an A-label", |label| !label.starts_with("xn--"))
}

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 2..5).prop_map(|labels| labels.join("."))
}

proptest! {
    /// Normalising is idempotent and case/trailing-dot insensitive.
    #[test]
    fn normalise_is_idempotent(host in name(), upper in any::<bool>(), dot in any::<bool>()) {
        let mut spelled = if upper { host.to_uppercase() } else { host.clone() };
        if dot { spelled.push('.'); }
        let once = normalise_host(&spelled).unwrap();
        prop_assert_eq!(&once, &host);
        prop_assert_eq!(normalise_host(&once).unwrap(), once);
    }

    /// An entry covers exactly itself and names ending in "." + itself.
    #[test]
    fn subdomain_matching_is_dot_anchored(entry in name(), prefix in label(), glue in "[a-z0-9-]{0,3}") {
        let (list, _) = Allowlist::parse(&entry);
        prop_assert!(list.find(&entry).is_some());
        let sub = format!("{prefix}.{entry}");
        prop_assert!(list.find(&sub).is_some());
        let glued = format!("{prefix}{glue}{entry}");
        prop_assert!(list.find(&glued).is_none(), "{glued} matched {entry}");
        let suffixed = format!("{entry}.{prefix}");
        prop_assert!(list.find(&suffixed).is_none(), "{suffixed} matched {entry}");
        let (exact, _) = Allowlist::parse(&format!("={entry}"));
        prop_assert!(exact.find(&entry).is_some());
        prop_assert!(exact.find(&sub).is_none());
    }

    /// Any IPv4 address, in dotted, decimal or hex form, is refused.
    #[test]
    fn ipv4_literals_are_refused_in_any_encoding(addr in any::<u32>()) {
        let octets = addr.to_be_bytes();
        let spellings = [
            format!("{}.{}.{}.{}", octets[0], octets[1], octets[2], octets[3]),
            format!("{addr}"),
            format!("0x{addr:x}"),
            format!("0{:o}.0{:o}.0{:o}.0{:o}", octets[0], octets[1], octets[2], octets[3]),
            format!("{}.{}", octets[0], addr & 0x00ff_ffff),
        ];
        for spelling in spellings {
            let rejected = parse_connect(&format!("{spelling}:443")).unwrap_err();
            prop_assert_eq!(rejected.why.reason(), "IP literals are not allowed", "{}", spelling);
        }
    }

    /// Any IPv6 address, bracketed, is refused.
    #[test]
    fn ipv6_literals_are_refused(addr in any::<u128>()) {
        let ip = std::net::Ipv6Addr::from(addr);
        let rejected = parse_connect(&format!("[{ip}]:443")).unwrap_err();
        prop_assert_eq!(rejected.why.reason(), "IP literals are not allowed");
    }

    /// Whatever the allowlist and target strings, decide never panics, and
    /// an allow always names an entry that really covers the host.
    #[test]
    fn decide_is_total(list in "[a-z.,=*0-9 ]{0,40}", target in "[a-zA-Z0-9.%@:\\[\\]-]{0,30}") {
        let (allowlist, _) = Allowlist::parse(&list);
        if let Ok(target) = parse_connect(&target) {
            if decide(&allowlist, &target).is_allow() {
                prop_assert!(allowlist.entries().iter().any(|e| e.matches(target.host())));
            }
        }
    }

    /// Entries and targets use one normaliser: an entry allows its own
    /// spelling however it was written.
    #[test]
    fn entry_and_target_normalise_alike(host in name(), upper in any::<bool>()) {
        let spelled = if upper { host.to_uppercase() } else { host.clone() };
        let entry = parse_entry(&spelled).unwrap();
        let target = parse_connect(&format!("{spelled}.:443")).unwrap();
        prop_assert!(entry.matches(target.host()));
    }
}
