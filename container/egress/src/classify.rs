//! Classification of resolved addresses: may the guard dial this `IpAddr`?
//!
//! A pure function of the address, run on every address a name resolves to,
//! before dialling (smokescreen's model). Only global unicast is allowed.
//! Everything that reaches this machine, the container's neighbours, a cloud
//! metadata service or an IPv4 address hidden inside an IPv6 form is denied
//! with a reason. Order matters where ranges nest: metadata addresses are
//! checked before the link-local, CGNAT and private ranges that contain them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address this is. Every variant but [`AddressClass::Global`]
/// is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Global unicast: allowed.
    Global,
    /// 127/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// fec0::/10 (deprecated site-local).
    SiteLocal,
    /// 100.64/10 (carrier-grade NAT shared space).
    SharedCgnat,
    /// 224/4, ff00::/8.
    Multicast,
    /// 0.0.0.0, ::.
    Unspecified,
    /// 0/8 other than 0.0.0.0.
    ThisNetwork,
    /// 255.255.255.255.
    Broadcast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// 198.18/15, 2001:2::/48.
    Benchmarking,
    /// 240/4, 192.0.0/24, 192.88.99/24, 100::/64, non-2000::/3 IPv6.
    Reserved,
    /// 169.254.169.254, fd00:ec2::254, 100.100.100.200.
    Metadata,
    /// ::ffff:0:0/96.
    Ipv4Mapped,
    /// ::/96 (other than :: and ::1).
    Ipv4Compatible,
    /// 64:ff9b::/96, 64:ff9b:1::/48.
    Nat64,
    /// 2002::/16.
    SixToFour,
    /// 2001::/32.
    Teredo,
}

impl AddressClass {
    /// Whether the guard may dial an address of this class.
    pub fn is_allowed(self) -> bool {
        match self {
            AddressClass::Global => true,
            AddressClass::Loopback
            | AddressClass::Private
            | AddressClass::LinkLocal
            | AddressClass::SiteLocal
            | AddressClass::SharedCgnat
            | AddressClass::Multicast
            | AddressClass::Unspecified
            | AddressClass::ThisNetwork
            | AddressClass::Broadcast
            | AddressClass::Documentation
            | AddressClass::Benchmarking
            | AddressClass::Reserved
            | AddressClass::Metadata
            | AddressClass::Ipv4Mapped
            | AddressClass::Ipv4Compatible
            | AddressClass::Nat64
            | AddressClass::SixToFour
            | AddressClass::Teredo => false,
        }
    }

    /// A noun phrase for reasons: "resolved address X is `description`".
    pub fn description(self) -> &'static str {
        match self {
            AddressClass::Global => "a global unicast address",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::SiteLocal => "a site-local address",
            AddressClass::SharedCgnat => "a shared (CGNAT) address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Unspecified => "the unspecified address",
            AddressClass::ThisNetwork => "a this-network address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Documentation => "a documentation address",
            AddressClass::Benchmarking => "a benchmarking address",
            AddressClass::Reserved => "a reserved address",
            AddressClass::Metadata => "a cloud metadata address",
            AddressClass::Ipv4Mapped => "an IPv4-mapped IPv6 address",
            AddressClass::Ipv4Compatible => "an IPv4-compatible IPv6 address",
            AddressClass::Nat64 => "a NAT64 IPv6 address",
            AddressClass::SixToFour => "a 6to4 IPv6 address",
            AddressClass::Teredo => "a Teredo IPv6 address",
        }
    }
}

/// Classifies one address.
pub fn classify(addr: IpAddr) -> AddressClass {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(addr: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(addr) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(addr: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    let net = Ipv6Addr::new(
        net[0], net[1], net[2], net[3], net[4], net[5], net[6], net[7],
    );
    (u128::from(addr) & mask) == (u128::from(net) & mask)
}

/// IPv4 ranges in check order: the first match wins.
const V4_RANGES: &[([u8; 4], u32, AddressClass)] = &[
    ([169, 254, 169, 254], 32, AddressClass::Metadata),
    ([100, 100, 100, 200], 32, AddressClass::Metadata),
    ([0, 0, 0, 0], 32, AddressClass::Unspecified),
    ([255, 255, 255, 255], 32, AddressClass::Broadcast),
    ([0, 0, 0, 0], 8, AddressClass::ThisNetwork),
    ([10, 0, 0, 0], 8, AddressClass::Private),
    ([100, 64, 0, 0], 10, AddressClass::SharedCgnat),
    ([127, 0, 0, 0], 8, AddressClass::Loopback),
    ([169, 254, 0, 0], 16, AddressClass::LinkLocal),
    ([172, 16, 0, 0], 12, AddressClass::Private),
    ([192, 0, 0, 0], 24, AddressClass::Reserved),
    ([192, 0, 2, 0], 24, AddressClass::Documentation),
    ([192, 88, 99, 0], 24, AddressClass::Reserved),
    ([192, 168, 0, 0], 16, AddressClass::Private),
    ([198, 18, 0, 0], 15, AddressClass::Benchmarking),
    ([198, 51, 100, 0], 24, AddressClass::Documentation),
    ([203, 0, 113, 0], 24, AddressClass::Documentation),
    ([224, 0, 0, 0], 4, AddressClass::Multicast),
    ([240, 0, 0, 0], 4, AddressClass::Reserved),
];

fn classify_v4(addr: Ipv4Addr) -> AddressClass {
    V4_RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(addr, *net, *prefix))
        .map_or(AddressClass::Global, |(_, _, class)| *class)
}

/// IPv6 ranges in check order: the first match wins.
const V6_RANGES: &[([u16; 8], u32, AddressClass)] = &[
    (
        [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254],
        128,
        AddressClass::Metadata,
    ),
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, AddressClass::Unspecified),
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, AddressClass::Loopback),
    ([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, AddressClass::Ipv4Mapped),
    ([0, 0, 0, 0, 0, 0, 0, 0], 96, AddressClass::Ipv4Compatible),
    ([0x0064, 0xff9b, 0, 0, 0, 0, 0, 0], 96, AddressClass::Nat64),
    ([0x0064, 0xff9b, 1, 0, 0, 0, 0, 0], 48, AddressClass::Nat64),
    ([0x0100, 0, 0, 0, 0, 0, 0, 0], 64, AddressClass::Reserved),
    ([0x2001, 0x0000, 0, 0, 0, 0, 0, 0], 32, AddressClass::Teredo),
    (
        [0x2001, 0x0002, 0, 0, 0, 0, 0, 0],
        48,
        AddressClass::Benchmarking,
    ),
    (
        [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0],
        32,
        AddressClass::Documentation,
    ),
    ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, AddressClass::SixToFour),
    (
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        AddressClass::Documentation,
    ),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, AddressClass::Private),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, AddressClass::LinkLocal),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, AddressClass::SiteLocal),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, AddressClass::Multicast),
];

fn classify_v6(addr: Ipv6Addr) -> AddressClass {
    if let Some((_, _, class)) = V6_RANGES
        .iter()
        .find(|(net, prefix, _)| in_v6(addr, *net, *prefix))
    {
        return *class;
    }
    // Only 2000::/3 is allocated for global unicast; the rest is reserved.
    if in_v6(addr, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        AddressClass::Global
    } else {
        AddressClass::Reserved
    }
}
