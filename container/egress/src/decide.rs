//! The decisions: is this target allowed by the list, and are the addresses
//! its name resolved to safe to dial?
//!
//! [`decide`] runs before resolution (a name that is not on the list is
//! never looked up); [`decide_resolved`] runs on the addresses the guard's
//! own resolver returned, and refuses the whole request when *any* address
//! is denied, because the guard must not pick among them in a way a
//! rebinding attacker could steer. Both are pure.

use std::net::IpAddr;

use crate::allowlist::{Allowlist, Source};
use crate::classify::classify;
use crate::target::Target;

/// An allow or deny, always with the reason that is logged and returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The request may proceed.
    Allow {
        /// Why (e.g. the matching allowlist entry).
        reason: String,
    },
    /// The request is refused.
    Deny {
        /// Why; shown to the client as `Egress denied: <reason>`.
        reason: String,
    },
}

impl Decision {
    /// The reason, whichever way the decision went.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow { reason } | Decision::Deny { reason } => reason,
        }
    }

    /// True for [`Decision::Allow`].
    pub fn is_allow(&self) -> bool {
        match self {
            Decision::Allow { .. } => true,
            Decision::Deny { .. } => false,
        }
    }

    fn deny(reason: impl Into<String>) -> Decision {
        Decision::Deny {
            reason: reason.into(),
        }
    }
}

/// Decides a parsed target against the allowlist (before any resolution).
pub fn decide(allowlist: &Allowlist, target: &Target) -> Decision {
    if allowlist.is_empty() {
        return match allowlist.source() {
            Source::Configured => Decision::deny("allowlist is empty: all egress is denied"),
            Source::Default => Decision::deny("default allowlist is empty: all egress is denied"),
        };
    }
    match allowlist.find(target.host()) {
        Some(entry) => Decision::Allow {
            reason: format!("host matches allowlist entry {entry}"),
        },
        None => Decision::deny("host is not on the allowlist"),
    }
}

/// Decides the addresses a name resolved to: every one must be global
/// unicast, and there must be at least one.
pub fn decide_resolved(addrs: &[IpAddr]) -> Decision {
    if addrs.is_empty() {
        return Decision::deny("host did not resolve to any address");
    }
    for addr in addrs {
        let class = classify(*addr);
        if !class.is_allowed() {
            return Decision::deny(format!(
                "resolved address {addr} is {}",
                class.description()
            ));
        }
    }
    Decision::Allow {
        reason: "all resolved addresses are global unicast".to_owned(),
    }
}
