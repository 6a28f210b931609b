//! The audit line: one JSON object per decision.
//!
//! `{"ts":"2026-11-30T10:00:00.123Z","decision":"deny","host":"evil.test",
//! "port":443,"proto":"connect","reason":"host is not on the allowlist",
//! "addrs":[]}` — `ts`, `decision`, `host`, `port`, `proto` and `reason` as
//! SPEC §9 requires, plus `addrs`, the resolved addresses that were checked
//! (empty when the request was refused before resolution). Formatting is
//! pure; where the line goes is the server's business.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::decide::Decision;
use crate::target::Proto;

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// RFC 3339 UTC time with milliseconds.
    pub ts: String,
    /// `allow` or `deny`.
    pub decision: &'static str,
    /// The normalised host, or the raw host when the target was refused.
    pub host: String,
    /// The port, when one was given (0 when unknown).
    pub port: u16,
    /// `connect` or `http`.
    pub proto: &'static str,
    /// Why.
    pub reason: String,
    /// Addresses the name resolved to (all checked).
    pub addrs: Vec<IpAddr>,
}

impl AuditRecord {
    /// Builds the record for `decision` at time `now`.
    pub fn new(
        now: SystemTime,
        decision: &Decision,
        host: &str,
        port: u16,
        proto: Proto,
        addrs: &[IpAddr],
    ) -> Self {
        AuditRecord {
            ts: rfc3339_utc(now),
            decision: match decision {
                Decision::Allow { .. } => "allow",
                Decision::Deny { .. } => "deny",
            },
            host: host.to_owned(),
            port,
            proto: proto.as_str(),
            reason: decision.reason().to_owned(),
            addrs: addrs.to_vec(),
        }
    }

    /// The record as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> String {
        // Serialising plain strings, numbers and addresses cannot fail; keep
        // a fixed line rather than panic if it ever did.
        serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"decision":"deny","reason":"audit serialisation failed"}"#.to_owned()
        })
    }
}

/// Formats `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn rfc3339_utc(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
