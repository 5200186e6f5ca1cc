//! Which decisions a reader keeps: a time window, host globs, methods and decisions, all ANDed
//! (values of one filter ORed). Pure: records in, yes or no out.

use std::time::SystemTime;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::record::{LogDecision, LogRecord, unix_millis};

/// A filter value that cannot be used, naming the flag and what it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error(
        "{flag} {value:?} is not a time: give an RFC 3339 UTC time (2026-11-29T18:22:00Z, \
         2026-11-29T18:22 or 2026-11-29) or a duration back from now (10m, 2h, 3d)"
    )]
    BadTime { flag: String, value: String },
    #[error(
        "--host {value:?} is not a glob ({reason}); write a host or a pattern such as *.github.com"
    )]
    BadGlob { value: String, reason: String },
}

/// The filters of `airlock logs network` and `airlock network suggest`. The default keeps all.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Unix ms; a record at or after it is kept.
    pub since: Option<i64>,
    /// Unix ms; a record before it is kept.
    pub until: Option<i64>,
    hosts: Option<GlobSet>,
    methods: Vec<String>,
    decisions: Vec<LogDecision>,
}

impl Query {
    /// Keeps hosts that match any of `globs` (`*` any run of characters, `?` one, `[ab]`, `{a,b}`;
    /// case-insensitive). No glob: every host.
    pub fn hosts(mut self, globs: &[String]) -> Result<Query, QueryError> {
        if globs.is_empty() {
            self.hosts = None;
            return Ok(self);
        }
        let mut set = GlobSetBuilder::new();
        for value in globs {
            let glob = GlobBuilder::new(value)
                .case_insensitive(true)
                .build()
                .map_err(|e| QueryError::BadGlob {
                    value: value.clone(),
                    reason: e.kind().to_string(),
                })?;
            set.add(glob);
        }
        self.hosts = Some(set.build().map_err(|e| QueryError::BadGlob {
            value: globs.join(" "),
            reason: e.to_string(),
        })?);
        Ok(self)
    }

    /// Keeps the methods named (any case). None named: every method.
    pub fn methods(mut self, methods: &[String]) -> Query {
        self.methods = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        self
    }

    /// Keeps the decisions named. None named: every decision.
    pub fn decisions(mut self, decisions: &[LogDecision]) -> Query {
        self.decisions = decisions.to_vec();
        self
    }

    /// Whether `record`, logged at unix ms `time`, passes every filter.
    pub fn keeps(&self, record: &LogRecord, time: i64) -> bool {
        self.since.is_none_or(|since| time >= since)
            && self.until.is_none_or(|until| time < until)
            && self
                .hosts
                .as_ref()
                .is_none_or(|globs| globs.is_match(&record.host))
            && (self.methods.is_empty() || self.methods.contains(&record.method))
            && (self.decisions.is_empty() || self.decisions.contains(&record.decision))
    }
}

/// `--since` or `--until` (named by `flag` in the error): an RFC 3339 UTC time, with or without
/// `T`, `Z`, seconds or the time of day (a date alone is its midnight, UTC), or a duration back
/// from `now` as humantime reads it (`10m`, `2h`, `3d`, `1h 30m`). Unix milliseconds.
pub fn parse_time(flag: &str, value: &str, now: SystemTime) -> Result<i64, QueryError> {
    let bad = || QueryError::BadTime {
        flag: flag.to_owned(),
        value: value.to_owned(),
    };
    let text = value.trim();
    if let Ok(ago) = humantime::parse_duration(text) {
        let then = now.checked_sub(ago).ok_or_else(bad)?;
        return Ok(unix_millis(then));
    }
    let full = match text.len() {
        10 => format!("{text}T00:00:00"),
        16 => format!("{text}:00"),
        _ => text.to_owned(),
    };
    humantime::parse_rfc3339_weak(&full)
        .map(unix_millis)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::record::unix_millis_from_rfc3339;
    use std::time::Duration;

    fn record(host: &str, method: &str, decision: LogDecision) -> LogRecord {
        let mut r = crate::log::read::tests::record(0, host);
        (r.method, r.decision) = (method.into(), decision);
        r
    }

    fn at(text: &str) -> i64 {
        unix_millis_from_rfc3339(text).unwrap()
    }

    #[test]
    fn times_absolute_and_relative() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_554);
        for (text, want) in [
            ("2026-11-29T18:22:00Z", "2026-11-29T18:22:00Z"),
            ("2026-11-29T18:22:00.250Z", "2026-11-29T18:22:00.250Z"),
            ("2026-11-29 18:22:00", "2026-11-29T18:22:00Z"),
            ("2026-11-29T18:22", "2026-11-29T18:22:00Z"),
            ("2026-11-29", "2026-11-29T00:00:00Z"),
        ] {
            assert_eq!(parse_time("--since", text, now), Ok(at(want)), "{text}");
        }
        let now_ms = unix_millis(now);
        assert_eq!(parse_time("--since", "10m", now), Ok(now_ms - 600_000));
        assert_eq!(parse_time("--since", "2h", now), Ok(now_ms - 7_200_000));
        assert_eq!(parse_time("--until", "3d", now), Ok(now_ms - 259_200_000));
        assert_eq!(parse_time("--since", "1h 30m", now), Ok(now_ms - 5_400_000));
    }

    #[test]
    fn a_bad_time_names_the_flag_and_the_forms() {
        let now = SystemTime::now();
        for bad in [
            "yesterday-ish",
            "",
            "2026-13-01",
            "2026-11-29T18:22:00+02:00",
            "10 parsecs",
        ] {
            let e = parse_time("--since", bad, now).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--since {bad:?} is not a time")),
                "{e}"
            );
            assert!(
                e.contains("2026-11-29T18:22:00Z") && e.contains("10m, 2h, 3d"),
                "{e}"
            );
        }
    }

    #[test]
    fn each_filter_alone_and_together() {
        let gh = record("api.github.com", "CONNECT", LogDecision::Allowed);
        let evil = record("evil.example", "GET", LogDecision::Denied);
        let all = Query::default();
        assert!(all.keeps(&gh, 0) && all.keeps(&evil, 0));

        let hosts = Query::default().hosts(&["*.GitHub.com".into()]).unwrap();
        assert!(hosts.keeps(&gh, 0) && !hosts.keeps(&evil, 0));
        let prefix = Query::default().hosts(&["api.*".into()]).unwrap();
        assert!(prefix.keeps(&gh, 0) && !prefix.keeps(&evil, 0));
        let either = Query::default()
            .hosts(&["nothing.test".into(), "evil.*".into()])
            .unwrap();
        assert!(!either.keeps(&gh, 0) && either.keeps(&evil, 0));
        // `*.github.com` is subdomains only, as in rules.
        let bare = record("github.com", "GET", LogDecision::Allowed);
        assert!(!hosts.keeps(&bare, 0));

        let get = Query::default().methods(&["get".into()]);
        assert!(!get.keeps(&gh, 0) && get.keeps(&evil, 0));
        let denied = Query::default().decisions(&[LogDecision::Denied, LogDecision::Error]);
        assert!(!denied.keeps(&gh, 0) && denied.keeps(&evil, 0));

        let window = Query {
            since: Some(100),
            until: Some(200),
            ..Query::default()
        };
        assert!(!window.keeps(&gh, 99) && window.keeps(&gh, 100) && !window.keeps(&gh, 200));

        let combined = Query {
            since: Some(100),
            ..Query::default()
        }
        .hosts(&["*.example".into()])
        .unwrap()
        .methods(&["GET".into()])
        .decisions(&[LogDecision::Denied]);
        assert!(combined.keeps(&evil, 150));
        assert!(!combined.keeps(&evil, 50));
        assert!(!combined.keeps(&record("evil.example", "POST", LogDecision::Denied), 150));
        assert!(!combined.keeps(&record("evil.example", "GET", LogDecision::Error), 150));
    }

    #[test]
    fn a_bad_glob_is_an_error_naming_it() {
        let e = Query::default().hosts(&["[abc".into()]).unwrap_err();
        assert!(
            e.to_string().starts_with("--host \"[abc\" is not a glob"),
            "{e}"
        );
    }
}
