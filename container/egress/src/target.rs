//! Request targets: the CONNECT `host:port` authority and the absolute-form
//! `http://host[:port]/...` URI, parsed into a [`Target`] or refused.
//!
//! Only ports 80 and 443 exist in a [`Target`] (the [`Port`] enum has no
//! other values); userinfo is refused outright (`user@github.com:443`, or
//! `http://github.com:80@evil.com/`, whose real host is `evil.com`); the
//! host goes through [`crate::host::normalise_host`], which refuses IP
//! literals in every encoding. A rejected target still reports the raw host
//! and port it carried so the audit line can show what was asked for.

use crate::host::{normalise_host, HostRejection};

/// Which kind of proxy request carried the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// `CONNECT host:port` (a tunnel, usually TLS).
    Connect,
    /// An absolute-form `http://` request that the guard forwards.
    Http,
}

impl Proto {
    /// The audit spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Connect => "connect",
            Proto::Http => "http",
        }
    }
}

/// The only ports a target may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// 80.
    Http,
    /// 443.
    Https,
}

impl Port {
    /// The port number.
    pub fn number(self) -> u16 {
        match self {
            Port::Http => 80,
            Port::Https => 443,
        }
    }

    fn from_number(port: u16) -> Option<Port> {
        match port {
            80 => Some(Port::Http),
            443 => Some(Port::Https),
            // Spelled out rather than `_`: every other port is refused.
            0..=79 | 81..=442 | 444..=u16::MAX => None,
        }
    }
}

/// A syntactically acceptable destination: normalised DNS name, allowed port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    host: String,
    port: Port,
    proto: Proto,
}

impl Target {
    /// The normalised host name (lowercase ASCII, no trailing dot).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> Port {
        self.port
    }

    /// The request kind.
    pub fn proto(&self) -> Proto {
        self.proto
    }

    /// `host` or `host:port` as it belongs in a `Host` header.
    pub fn host_header(&self) -> String {
        match (self.proto, self.port) {
            (Proto::Http, Port::Http) | (Proto::Connect, Port::Https) => self.host.clone(),
            (Proto::Http, Port::Https) | (Proto::Connect, Port::Http) => {
                format!("{}:{}", self.host, self.port.number())
            }
        }
    }
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetRejection {
    /// `user[:password]@` before the host.
    Userinfo,
    /// The host is an IP literal.
    IpLiteral,
    /// The host is not a valid name.
    InvalidHost,
    /// CONNECT without `:port`.
    MissingPort,
    /// A port that is not a number in 1..=65535.
    InvalidPort,
    /// A valid port other than 80 or 443.
    PortNotAllowed(u16),
    /// An absolute URI with a scheme other than `http`.
    SchemeNotAllowed,
    /// Neither a CONNECT authority nor an absolute-form URI.
    NotAbsolute,
}

impl TargetRejection {
    /// The reason string used in decisions, audit lines and 403 bodies.
    pub fn reason(&self) -> String {
        match self {
            TargetRejection::Userinfo => "userinfo is not allowed".to_owned(),
            TargetRejection::IpLiteral => "IP literals are not allowed".to_owned(),
            TargetRejection::InvalidHost => "invalid host name".to_owned(),
            TargetRejection::MissingPort => "CONNECT target must include a port".to_owned(),
            TargetRejection::InvalidPort => "invalid port".to_owned(),
            TargetRejection::PortNotAllowed(port) => {
                format!("port {port} is not allowed (only 80 and 443)")
            }
            TargetRejection::SchemeNotAllowed => {
                "only http:// URIs are forwarded (use CONNECT for https)".to_owned()
            }
            TargetRejection::NotAbsolute => {
                "request target must be an absolute http:// URI".to_owned()
            }
        }
    }
}

/// A refused target with what it asked for, for the audit line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The host as written (or the whole authority when it could not be split).
    pub raw_host: String,
    /// The port as written, when it was a number.
    pub port: Option<u16>,
    /// Why.
    pub why: TargetRejection,
}

/// Parses a CONNECT request target (`host:port`, port required).
pub fn parse_connect(authority: &str) -> Result<Target, Rejected> {
    parse_authority(authority, None, Proto::Connect)
}

/// Parses an absolute-form request target (`http://host[:port]/path`).
pub fn parse_absolute(uri: &str) -> Result<Target, Rejected> {
    let reject = |why| Rejected {
        raw_host: String::new(),
        port: None,
        why,
    };
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(reject(TargetRejection::NotAbsolute));
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(reject(TargetRejection::SchemeNotAllowed));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    parse_authority(&rest[..end], Some(80), Proto::Http)
}

fn parse_authority(
    authority: &str,
    default_port: Option<u16>,
    proto: Proto,
) -> Result<Target, Rejected> {
    let (raw_host, raw_port) = split_host_port(authority);
    let port = raw_port.and_then(parse_port_number);
    let reject = |why| Rejected {
        raw_host: raw_host.to_owned(),
        port,
        why,
    };
    // `http://github.com:80@evil.com/` goes to evil.com: never guess.
    if authority.contains('@') {
        return Err(reject(TargetRejection::Userinfo));
    }
    let host = normalise_host(raw_host).map_err(|rejection| match rejection {
        HostRejection::IpLiteral => reject(TargetRejection::IpLiteral),
        HostRejection::Invalid => reject(TargetRejection::InvalidHost),
    })?;
    let number = match (raw_port, default_port) {
        (None, None) => return Err(reject(TargetRejection::MissingPort)),
        (None, Some(default)) => default,
        (Some(text), _) => {
            parse_port_number(text).ok_or_else(|| reject(TargetRejection::InvalidPort))?
        }
    };
    let port =
        Port::from_number(number).ok_or_else(|| reject(TargetRejection::PortNotAllowed(number)))?;
    Ok(Target { host, port, proto })
}

/// Splits `host[:port]` / `[v6][:port]`; an empty port counts as absent.
fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        if let Some(close) = authority.find(']') {
            let (host, rest) = authority.split_at(close + 1);
            return (host, rest.strip_prefix(':').filter(|port| !port.is_empty()));
        }
        return (authority, None);
    }
    match authority.rsplit_once(':') {
        // More than one colon is a bare IPv6 address, not host:port.
        Some((host, _)) if host.contains(':') => (authority, None),
        Some((host, port)) => (host, Some(port).filter(|port| !port.is_empty())),
        None => (authority, None),
    }
}

fn parse_port_number(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|port| *port != 0)
}
