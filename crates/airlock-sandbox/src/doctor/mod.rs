//! Host checks for `airlock doctor`: can this machine run the native backend, and with which layers?
//!
//! Each check that needs a kernel feature tries it for real in a forked child (a probe) rather than
//! guessing from version numbers, and reads the relevant sysctls only to explain a failure. Probes are
//! killed after a deadline, so `doctor` never hangs.
//!
//! This file holds the row type and the row order ([`run_checks`]); `namespaces` has the checks that
//! enter a user namespace (user namespaces, proc in a pid namespace, overlayfs), `kernel` those of the
//! kernel's other security layers and host facts (Landlock, seccomp, cgroup, TIOCSTI), and `probe` the
//! forked-child machinery they share.

mod kernel;
mod namespaces;
mod probe;

use serde::Serialize;

use kernel::{check_cgroup, check_landlock, check_seccomp, check_tiocsti};
use namespaces::{check_overlay, check_proc_in_pid_namespace, check_user_namespaces};

/// How a check came out. Serialises as `ok`, `warn`, `fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works (or is informational only).
    Ok,
    /// Works with a weaker or missing layer; airlock still runs.
    Warn,
    /// The native backend cannot run until this is fixed.
    Fail,
}

/// One row of `airlock doctor` (also its `--json` object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// What to do about a `warn` or `fail`.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn problem(
        name: &'static str,
        status: Status,
        detail: String,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status,
            detail,
            fix: Some(fix.into()),
        }
    }
}

/// Runs every host check, in display order.
pub fn run_checks() -> Vec<Check> {
    vec![
        check_user_namespaces(),
        check_proc_in_pid_namespace(),
        check_landlock(),
        check_seccomp(),
        check_overlay(),
        check_cgroup(),
        check_tiocsti(),
    ]
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn run_checks_gives_every_row_quickly() {
        let start = Instant::now();
        let checks = run_checks();
        let elapsed = start.elapsed();
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "user namespaces",
                "proc in a pid namespace",
                "landlock",
                "seccomp",
                "overlayfs in a user namespace",
                "cgroup",
                "tiocsti",
            ]
        );
        for check in &checks {
            eprintln!(
                "{:<32} {:?} {} {:?}",
                check.name, check.status, check.detail, check.fix
            );
            assert!(!check.detail.is_empty());
            assert_eq!(check.status == Status::Ok, check.fix.is_none(), "{check:?}");
        }
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        let leftovers: Vec<_> = fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("airlock-doctor-{}-", std::process::id()))
            })
            .collect();
        assert!(
            leftovers.is_empty(),
            "scratch dirs left behind: {leftovers:?}"
        );
    }

    #[test]
    fn check_serialises_with_lowercase_status() {
        let check = Check::problem("x", Status::Warn, "d".to_string(), "f");
        assert_eq!(
            serde_json::to_value(&check).unwrap(),
            serde_json::json!({"name": "x", "status": "warn", "detail": "d", "fix": "f"})
        );
        let json = serde_json::to_value(Check::ok("y", "fine")).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["fix"], serde_json::Value::Null);
    }
}
