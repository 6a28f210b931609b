//! Host-name normalisation shared by the allowlist and the target parser.
//!
//! Every host the guard compares — allowlist entries and request targets —
//! goes through [`normalise_host`], which runs the WHATWG host parser of the
//! `url` crate (percent-decoding, IDNA/UTS-46 mapping, lowercasing, and the
//! IPv4 number forms `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `0`) and
//! then applies our own stricter rules: a trailing dot is stripped, empty
//! labels are refused, and any host that is — or merely looks like — an IP
//! literal is refused. Using one parser for both sides means `ⓖithub.com`,
//! `GitHub.com.` and `github%2ecom` all become `github.com` everywhere, so no
//! spelling can match differently in the allowlist and in the target.

use url::Host;

/// Longest DNS name we accept (RFC 1035, without the root dot).
const MAX_HOST_LEN: usize = 253;

/// Why a host string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRejection {
    /// An IPv4 or IPv6 literal in any encoding.
    IpLiteral,
    /// Not a valid host name after normalisation.
    Invalid,
}

impl HostRejection {
    /// The reason string used in decisions and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            HostRejection::IpLiteral => "IP literals are not allowed",
            HostRejection::Invalid => "invalid host name",
        }
    }
}

/// Normalises `raw` to a lowercase ASCII (punycode) DNS name without a
/// trailing dot, or says why it is not an acceptable host name.
pub fn normalise_host(raw: &str) -> Result<String, HostRejection> {
    // Brackets, or more than one colon, can only mean IPv6 (the port was
    // split off before). A single colon (`github.com:443`) is just invalid.
    if raw.contains('[') || raw.contains(']') || raw.matches(':').count() > 1 {
        return Err(HostRejection::IpLiteral);
    }
    if raw.contains(':') {
        return Err(HostRejection::Invalid);
    }
    match Host::parse(raw) {
        Ok(Host::Ipv4(_)) | Ok(Host::Ipv6(_)) => Err(HostRejection::IpLiteral),
        Ok(Host::Domain(domain)) => check_domain(&domain),
        // The WHATWG parser refuses e.g. `1.2.3.256` or `0x7g.1`. If the raw
        // spelling looks numeric it was meant as an address: say so.
        Err(_) if last_label_is_numeric(&raw.to_ascii_lowercase()) => Err(HostRejection::IpLiteral),
        Err(_) => Err(HostRejection::Invalid),
    }
}

fn check_domain(domain: &str) -> Result<String, HostRejection> {
    let name = domain.strip_suffix('.').unwrap_or(domain);
    if name.is_empty() || name.len() > MAX_HOST_LEN {
        return Err(HostRejection::Invalid);
    }
    if name
        .split('.')
        .any(|label| label.is_empty() || label.len() > 63)
    {
        return Err(HostRejection::Invalid);
    }
    // Belt and braces over the WHATWG IPv4 parser: the system resolver
    // turns numeric-looking names into addresses without asking DNS.
    if last_label_is_numeric(name) {
        return Err(HostRejection::IpLiteral);
    }
    if !name.bytes().all(|b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'_'
    }) {
        return Err(HostRejection::Invalid);
    }
    Ok(name.to_owned())
}

/// True when the last label (ignoring one trailing dot) is decimal digits or
/// `0x` followed by hex digits: the shapes resolvers read as IPv4 numbers.
pub fn last_label_is_numeric(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or(host);
    if last.is_empty() {
        return false;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match last.strip_prefix("0x").or_else(|| last.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}
