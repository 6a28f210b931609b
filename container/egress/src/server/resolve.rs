//! Name resolution, done by the guard itself and pluggable for tests.
//!
//! The guard never lets the client or the upstream resolve: it asks a
//! [`Resolve`] implementation once, classifies every address returned and
//! dials one of exactly those addresses, so a DNS answer that changes
//! between check and connect (rebinding) cannot matter. [`StaticResolver`]
//! maps fixed names to addresses (tests, and `--resolve` in the binary, like
//! curl's); its addresses are classified like any other, so it cannot be
//! used to reach a private address.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

/// The future a resolver returns.
pub type ResolveFuture<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a normalised host name into addresses.
pub trait Resolve: Send + Sync + 'static {
    /// All addresses for `host` (already normalised, never an IP literal).
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a>;
}

/// The system resolver (`getaddrinfo` via `tokio::net::lookup_host`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            let mut addrs: Vec<IpAddr> = tokio::net::lookup_host((host, 0))
                .await?
                .map(|sa| sa.ip())
                .collect();
            dedup_in_order(&mut addrs);
            Ok(addrs)
        })
    }
}

/// Fixed answers for some names; other names go to `fallback` (or fail).
#[derive(Clone, Default)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
    fallback: Option<Arc<dyn Resolve>>,
}

impl StaticResolver {
    /// A resolver that knows no names and has no fallback.
    pub fn new() -> Self {
        StaticResolver::default()
    }

    /// Adds `addr` to the answers for `host` (a normalised name).
    pub fn with(mut self, host: &str, addr: IpAddr) -> Self {
        self.names.entry(host.to_owned()).or_default().push(addr);
        self
    }

    /// Sends names it does not know to `fallback`.
    pub fn with_fallback(mut self, fallback: Arc<dyn Resolve>) -> Self {
        self.fallback = Some(fallback);
        self
    }
}

impl Resolve for StaticResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            if let Some(addrs) = self.names.get(host) {
                return Ok(addrs.clone());
            }
            match &self.fallback {
                Some(fallback) => fallback.resolve(host).await,
                None => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "name not known to the static resolver",
                )),
            }
        })
    }
}

fn dedup_in_order(addrs: &mut Vec<IpAddr>) {
    let mut seen = Vec::with_capacity(addrs.len());
    addrs.retain(|addr| {
        if seen.contains(addr) {
            false
        } else {
            seen.push(*addr);
            true
        }
    });
}
