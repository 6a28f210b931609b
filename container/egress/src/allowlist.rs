//! The host allowlist: parsing `EGRESS_ALLOWED_HOSTS` and matching names.
//!
//! An entry `host` matches the host itself and every subdomain on a dot
//! boundary (`github.com` matches `api.github.com`, never `evilgithub.com`
//! or `github.com.evil.test`); `=host` matches exactly. Entries are
//! normalised by [`crate::host::normalise_host`] exactly like targets are.
//! Entries containing `*`, empty entries, IP literals, invalid names and
//! single-label names (which would allow a whole TLD) are dropped, each with
//! a reason the caller logs. An unset variable means [`DEFAULT_HOSTS`]; a
//! variable that is set but yields no usable entry denies everything.

use crate::host::{normalise_host, HostRejection};

/// Name of the environment variable holding the allowlist.
pub const ENV_VAR: &str = "EGRESS_ALLOWED_HOSTS";

/// Hosts allowed when `EGRESS_ALLOWED_HOSTS` is unset: code hosts and
/// package registries, each with its subdomains.
pub const DEFAULT_HOSTS: &[&str] = &[
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "deb.debian.org",
    "security.debian.org",
];

/// How an entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// The name itself and its subdomains on a dot boundary.
    WithSubdomains,
    /// `=name`: the name only.
    Exact,
}

/// One normalised allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    name: String,
    kind: MatchKind,
}

impl Entry {
    /// The normalised name (without the `=` prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the entry matches.
    pub fn kind(&self) -> MatchKind {
        self.kind
    }

    /// Whether `host` (already normalised) is covered by this entry.
    pub fn matches(&self, host: &str) -> bool {
        match self.kind {
            MatchKind::Exact => host == self.name,
            MatchKind::WithSubdomains => {
                // A dot boundary and a non-empty label before it: never
                // `evilgithub.com` for `github.com`.
                host == self.name
                    || host
                        .strip_suffix(self.name.as_str())
                        .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
            }
        }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            MatchKind::Exact => write!(f, "={}", self.name),
            MatchKind::WithSubdomains => f.write_str(&self.name),
        }
    }
}

/// Where the list came from; decides the reason of a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The variable was unset: [`DEFAULT_HOSTS`].
    Default,
    /// The variable (or a reloaded file) supplied the list.
    Configured,
}

/// An entry that was not used, and why (to be logged by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedEntry {
    /// The entry as written (trimmed).
    pub entry: String,
    /// Why it was dropped.
    pub reason: &'static str,
}

/// A parsed allowlist. An empty list denies everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
    source: Source,
}

impl Allowlist {
    /// The list used when the variable is unset.
    pub fn default_hosts() -> Allowlist {
        let (list, _dropped) = Self::parse_entries(DEFAULT_HOSTS.iter().copied(), Source::Default);
        list
    }

    /// A list that denies everything (used when a reload fails).
    pub fn deny_all() -> Allowlist {
        Allowlist {
            entries: Vec::new(),
            source: Source::Configured,
        }
    }

    /// Builds the list from the variable's value: `None` (unset) gives the
    /// defaults, `Some("")` denies everything.
    pub fn from_env_value(value: Option<&str>) -> (Allowlist, Vec<DroppedEntry>) {
        match value {
            None => (Self::default_hosts(), Vec::new()),
            Some(value) => Self::parse(value),
        }
    }

    /// Parses a configured list: comma- (or newline-) separated entries.
    pub fn parse(value: &str) -> (Allowlist, Vec<DroppedEntry>) {
        if value.trim().is_empty() {
            return (Self::deny_all(), Vec::new());
        }
        Self::parse_entries(value.split([',', '\n']), Source::Configured)
    }

    fn parse_entries<'a>(
        raw: impl Iterator<Item = &'a str>,
        source: Source,
    ) -> (Allowlist, Vec<DroppedEntry>) {
        let mut entries: Vec<Entry> = Vec::new();
        let mut dropped = Vec::new();
        for piece in raw {
            let piece = piece.trim();
            match parse_entry(piece) {
                Ok(entry) => {
                    if !entries.contains(&entry) {
                        entries.push(entry);
                    }
                }
                Err(reason) => dropped.push(DroppedEntry {
                    entry: piece.to_owned(),
                    reason,
                }),
            }
        }
        (Allowlist { entries, source }, dropped)
    }

    /// The usable entries, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Where the list came from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// True when nothing is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first entry covering `host` (already normalised), if any.
    pub fn find(&self, host: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.matches(host))
    }
}

/// Parses one trimmed entry or returns the reason it is dropped.
pub fn parse_entry(piece: &str) -> Result<Entry, &'static str> {
    if piece.is_empty() {
        return Err("empty entry");
    }
    if piece.contains('*') {
        return Err("wildcards are not supported (an entry already matches its subdomains)");
    }
    let (kind, name) = match piece.strip_prefix('=') {
        Some(rest) => (MatchKind::Exact, rest.trim()),
        None => (MatchKind::WithSubdomains, piece),
    };
    if name.is_empty() {
        return Err("empty entry");
    }
    let name = normalise_host(name).map_err(|rejection| match rejection {
        HostRejection::IpLiteral => "IP literals are not allowed",
        HostRejection::Invalid => "invalid host name",
    })?;
    if !name.contains('.') {
        return Err(
            "single-label names are not allowed (they would cover a whole top-level domain)",
        );
    }
    Ok(Entry { name, kind })
}
