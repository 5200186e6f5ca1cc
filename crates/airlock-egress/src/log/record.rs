//! One line of the decision log, and the times it carries.
//!
//! Fields (a public contract, see `docs/network.md`): `time` (RFC 3339, UTC, milliseconds), `host`,
//! `port`, `method`, `decision` (`allowed` / `denied` / `error`), `status`, `rule`, `bytes_up`,
//! `bytes_down`, `duration_ms`, `reason` for denials and errors, `via`. Never bodies, paths, query
//! strings or header values, so no credential can reach the file.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogDecision {
    /// The policy allowed it and it was forwarded (`reason` is set if the upstream failed midway).
    Allowed,
    /// The policy or the address check refused it (403).
    Denied,
    /// Refused before a decision (bad request, unresolvable name, upstream unreachable, timeout).
    Error,
}

impl LogDecision {
    /// Every decision, in the order they are shown.
    pub const ALL: [LogDecision; 3] = [
        LogDecision::Allowed,
        LogDecision::Denied,
        LogDecision::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LogDecision::Allowed => "allowed",
            LogDecision::Denied => "denied",
            LogDecision::Error => "error",
        }
    }
}

/// One line of the decision log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-29T18:22:34.123Z`.
    pub time: String,
    /// The canonical host (empty when the request was too malformed to name one).
    pub host: String,
    pub port: u16,
    /// `CONNECT`, `GET`, …; empty when the request line could not be read.
    pub method: String,
    pub decision: LogDecision,
    /// The HTTP status the client got: the upstream's for a forwarded plain-HTTP request, the
    /// proxy's own for a refusal; `None` for an established CONNECT tunnel (the proxy never sees
    /// the status inside it) and for a client that closed before any answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The rule that decided, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Bytes sent by the client after the request head (the tunnel's or the body's).
    pub bytes_up: u64,
    /// Bytes sent to the client from upstream (a plain response includes its head).
    pub bytes_down: u64,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The upstream proxy (`host:port`) the connection went through, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The `[network.credentials]` rules whose header the proxy set on a request of this
    /// connection (names only, never a value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_from_unix_millis(since.as_millis() as i64)
}

/// Unix milliseconds of an RFC 3339 UTC time such as a record's `time`.
pub fn unix_millis_from_rfc3339(text: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339(text).ok()?;
    Some(unix_millis(time))
}

/// Unix milliseconds of `time` (negative before 1970).
pub fn unix_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Formats unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
pub fn rfc3339_from_unix_millis(ms: i64) -> String {
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_formats() {
        for ms in [0, 1_796_000_554_123, 951_782_400_000] {
            let text = rfc3339_from_unix_millis(ms);
            assert_eq!(unix_millis_from_rfc3339(&text), Some(ms), "{text}");
        }
        assert_eq!(unix_millis_from_rfc3339("2026-11-29"), None);
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339_from_unix_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_from_unix_millis(1_796_000_554_123),
            "2026-11-30T01:02:34.123Z"
        );
        assert_eq!(
            rfc3339_from_unix_millis(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn record_round_trips_and_omits_empty_fields() {
        let r = LogRecord {
            time: "1970-01-01T00:00:00.000Z".into(),
            host: "evil.com".into(),
            port: 443,
            method: "CONNECT".into(),
            decision: LogDecision::Denied,
            status: Some(403),
            rule: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 1,
            reason: Some("no rule allows it".into()),
            via: None,
            credentials: Vec::new(),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains("\"rule\""), "{line}");
        assert!(
            line.contains("\"decision\":\"denied\",\"status\":403"),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<LogRecord>(&line).unwrap(), r);
    }
}
