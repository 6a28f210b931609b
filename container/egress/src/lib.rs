//! `hermes-egress`: the allowlisting HTTP/CONNECT egress guard (SPEC §9).
//!
//! The crate is split by trust in the code, not by size. The policy modules
//! — [`host`], [`allowlist`], [`target`], [`mod@classify`], [`mod@decide`] and
//! [`audit`] — are pure: no sockets, no async, no clock except a
//! `SystemTime` handed in, so every decision and its reason is tested as a
//! table. The [`server`] module (behind the default `server` feature) is the
//! thin tokio/hyper shell that parses proxy requests, asks the policy,
//! resolves names itself, classifies every address and dials exactly the
//! address it checked. `cargo tree -p hermes-egress --no-default-features
//! -e normal` shows the policy half pulls in no tokio or hyper.

pub mod allowlist;
pub mod audit;
pub mod classify;
pub mod decide;
pub mod host;
pub mod target;

#[cfg(feature = "server")]
pub mod server;

pub use allowlist::{Allowlist, DroppedEntry};
pub use classify::{classify, AddressClass};
pub use decide::{decide, decide_resolved, Decision};
pub use target::{parse_absolute, parse_connect, Port, Proto, Target};
