//! Worker configuration values, parsed purely from their raw strings.
//!
//! Each parser says what it does with garbage: `HERMES_SLEEP_AFTER` refuses
//! it (the object logs the reason and uses the default), the turn timeout
//! falls back to its default and clamps, flags accept only an explicit
//! "yes".

use std::time::Duration;

use hermes_protocol::limits;

/// Default idle period before the container is put to sleep.
pub const SLEEP_AFTER_DEFAULT: Duration = Duration::from_secs(30 * 60);

/// Parse `Ns`, `Nm` or `Nh` (N a positive integer). Anything else is an
/// error with a message saying what was expected.
pub fn parse_sleep_after(raw: &str) -> Result<Duration, String> {
    let s = raw.trim();
    let (digits, unit) = s.split_at(s.len().saturating_sub(1));
    let seconds_per_unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            return Err(format!(
                "HERMES_SLEEP_AFTER={raw:?}: expected <N>s, <N>m or <N>h"
            ))
        }
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "HERMES_SLEEP_AFTER={raw:?}: expected <N>s, <N>m or <N>h"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("HERMES_SLEEP_AFTER={raw:?}: number too large"))?;
    if n == 0 {
        return Err(format!("HERMES_SLEEP_AFTER={raw:?}: must be positive"));
    }
    n.checked_mul(seconds_per_unit)
        .filter(|&secs| secs <= 7 * 24 * 3600)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("HERMES_SLEEP_AFTER={raw:?}: longer than 7 days"))
}

/// `HERMES_TURN_TIMEOUT_MS`: default 600 000, clamped to 30 000..=900 000;
/// anything unparsable → the default.
pub fn turn_timeout(raw: Option<&str>) -> Duration {
    let ms = raw
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(limits::TURN_TIMEOUT_DEFAULT_MS)
        .clamp(limits::TURN_TIMEOUT_MIN_MS, limits::TURN_TIMEOUT_MAX_MS);
    Duration::from_millis(ms)
}

/// A boolean flag: true only for `1`, `true`, `yes` (trimmed, any case).
pub fn flag(raw: Option<&str>) -> bool {
    matches!(
        raw.map(|s| s.trim().to_ascii_lowercase()).as_deref(),
        Some("1" | "true" | "yes")
    )
}

/// Which container runtime the object drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeChoice {
    /// Cloudflare Containers through the object's container binding.
    Cloudflare,
    /// `hermes-devhost` at this base URL (local `wrangler dev`).
    Devhost { base_url: String },
}

/// `HERMES_CONTAINER_RUNTIME` = `cloudflare` (default) | `devhost`, the
/// latter with `DEVHOST_URL` (an `http://127.0.0.1:<port>` loopback URL:
/// the object never sends control tokens anywhere else).
pub fn runtime_choice(
    kind: Option<&str>,
    devhost_url: Option<&str>,
) -> Result<RuntimeChoice, String> {
    match kind.map(str::trim).unwrap_or("cloudflare") {
        "" | "cloudflare" => Ok(RuntimeChoice::Cloudflare),
        "devhost" => {
            let url = devhost_url
                .map(str::trim)
                .unwrap_or("")
                .trim_end_matches('/');
            let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
            let port_ok = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
            if loopback
                .iter()
                .any(|p| url.strip_prefix(p).is_some_and(port_ok))
            {
                Ok(RuntimeChoice::Devhost {
                    base_url: url.to_owned(),
                })
            } else {
                Err(format!("DEVHOST_URL must be http://127.0.0.1:<port> when HERMES_CONTAINER_RUNTIME=devhost, got {url:?}"))
            }
        }
        other => Err(format!(
            "HERMES_CONTAINER_RUNTIME={other:?}: expected cloudflare or devhost"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_after_table() {
        let ok = [
            ("30m", 1800),
            ("45s", 45),
            ("2h", 7200),
            (" 5m ", 300),
            ("168h", 604_800),
        ];
        for (raw, secs) in ok {
            assert_eq!(
                parse_sleep_after(raw),
                Ok(Duration::from_secs(secs)),
                "{raw}"
            );
        }
        for raw in [
            "",
            "m",
            "30",
            "30x",
            "-5m",
            "0s",
            "1.5h",
            "5 m",
            "169h",
            "99999999999999999999s",
            "30M",
            "ms",
        ] {
            assert!(parse_sleep_after(raw).is_err(), "{raw:?} must be refused");
        }
    }

    #[test]
    fn turn_timeout_clamps_and_defaults() {
        let ms = |d: Duration| d.as_millis() as u64;
        assert_eq!(ms(turn_timeout(None)), 600_000);
        assert_eq!(ms(turn_timeout(Some("garbage"))), 600_000);
        assert_eq!(ms(turn_timeout(Some("-1"))), 600_000);
        assert_eq!(ms(turn_timeout(Some("1"))), 30_000);
        assert_eq!(ms(turn_timeout(Some("30000"))), 30_000);
        assert_eq!(ms(turn_timeout(Some("29999"))), 30_000);
        assert_eq!(ms(turn_timeout(Some("120000"))), 120_000);
        assert_eq!(ms(turn_timeout(Some("900001"))), 900_000);
        assert_eq!(ms(turn_timeout(Some("99999999999999999999999"))), 600_000);
    }

    #[test]
    fn flags() {
        for yes in ["1", "true", "TRUE", " yes "] {
            assert!(flag(Some(yes)), "{yes}");
        }
        for no in ["0", "false", "", "y", "on", "enabled"] {
            assert!(!flag(Some(no)), "{no}");
        }
        assert!(!flag(None));
    }

    #[test]
    fn runtime_choice_table() {
        assert_eq!(runtime_choice(None, None), Ok(RuntimeChoice::Cloudflare));
        assert_eq!(
            runtime_choice(Some("cloudflare"), Some("http://127.0.0.1:1")),
            Ok(RuntimeChoice::Cloudflare)
        );
        assert_eq!(
            runtime_choice(Some("devhost"), Some("http://127.0.0.1:8788/")),
            Ok(RuntimeChoice::Devhost {
                base_url: "http://127.0.0.1:8788".into()
            })
        );
        assert!(runtime_choice(Some("devhost"), None).is_err());
        assert!(runtime_choice(Some("devhost"), Some("http://evil.example:8788")).is_err());
        assert!(
            runtime_choice(Some("devhost"), Some("http://127.0.0.1:8788@evil.example")).is_err()
        );
        assert!(runtime_choice(Some("docker"), None).is_err());
    }
}
