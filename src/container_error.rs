//! Classification of the container runtime's error texts (workers-rs 0.8.7,
//! Cloudflare Containers). The runtime reports failures only as messages,
//! so the decision "wait and retry" versus "give up now" is made here, from
//! the documented texts, case-insensitively. Unknown text is treated as
//! transient during boot (bounded by the boot budget) — never as success.

/// What a runtime failure means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerFailure {
    /// Still starting or a passing network fault: retry.
    Transient,
    /// No capacity right now: retry later, report 503.
    Capacity,
    /// Will not get better by waiting (no image, OOM, misconfiguration).
    Permanent,
    /// Not a text we know.
    Unknown,
}

const TRANSIENT: &[&str] = &[
    "the container is not listening",
    "container port not found",
    "network connection lost",
    "monitor failed to find container",
    "connection refused",
];
const CAPACITY: &[&str] = &[
    "there is no container instance that can be provided",
    "you are requesting too many containers per second",
    "maximum number of running container instances exceeded",
];
const PERMANENT: &[&str] = &[
    "no such image",
    "ran out of memory",
    "no application that matches",
    "no container application assigned",
];

pub fn classify(message: &str) -> ContainerFailure {
    let m = message.to_ascii_lowercase();
    let has = |list: &[&str]| list.iter().any(|needle| m.contains(needle));
    if has(PERMANENT) {
        ContainerFailure::Permanent
    } else if has(CAPACITY) {
        ContainerFailure::Capacity
    } else if has(TRANSIENT) {
        ContainerFailure::Transient
    } else {
        ContainerFailure::Unknown
    }
}

impl ContainerFailure {
    /// May a readiness poll try again after this failure?
    pub fn retryable(self) -> bool {
        match self {
            Self::Transient | Self::Capacity | Self::Unknown => true,
            Self::Permanent => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let rows = [
            (
                "Error: The container is not listening in the TCP address 10.0.0.1:8080",
                ContainerFailure::Transient,
            ),
            ("container port not found", ContainerFailure::Transient),
            ("Network connection lost.", ContainerFailure::Transient),
            (
                "Monitor failed to find container",
                ContainerFailure::Transient,
            ),
            (
                "There is no Container instance that can be provided to this Durable Object",
                ContainerFailure::Capacity,
            ),
            (
                "You are requesting too many containers per second",
                ContainerFailure::Capacity,
            ),
            (
                "Maximum number of running container instances exceeded",
                ContainerFailure::Capacity,
            ),
            (
                "No such image available named hermes-edge:abc",
                ContainerFailure::Permanent,
            ),
            (
                "container exited: ran out of memory",
                ContainerFailure::Permanent,
            ),
            (
                "there is no application that matches the class",
                ContainerFailure::Permanent,
            ),
            (
                "No container application assigned to this Durable Object",
                ContainerFailure::Permanent,
            ),
            ("something else entirely", ContainerFailure::Unknown),
        ];
        for (text, want) in rows {
            assert_eq!(classify(text), want, "{text}");
        }
        assert!(!ContainerFailure::Permanent.retryable());
        assert!(ContainerFailure::Transient.retryable());
    }
}
