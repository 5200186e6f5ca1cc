//! A finished command and the probe's verdict read from its output.

use std::fs;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, ExitStatus};

use super::{Failure, Outcome, RUN_DEADLINE, fail, wait_deadline};
use crate::check;

/// One finished command: its status and output.
pub struct Run {
    pub described: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// For a run on a pty: the permission bits of the pty's slave on the host afterwards.
    pub terminal_mode: Option<u32>,
}

impl Run {
    /// The command, its status and its output, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "{}\n      -> {}\n      stdout: {}\n      stderr: {}",
            self.described,
            status_text(self.status),
            clip(&self.stdout),
            clip(&self.stderr)
        )
    }

    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

pub fn status_text(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => format!("{status:?}"),
    }
}

fn clip(s: &str) -> String {
    let s = s.trim_end();
    if s.is_empty() {
        return "(empty)".into();
    }
    let mut shown: String = s.chars().take(1500).collect();
    if shown.len() < s.len() {
        shown.push_str(" …");
    }
    shown.replace('\n', "\n              ")
}

/// Waits for `child` with [`RUN_DEADLINE`], killing it on expiry, and collects its output.
pub fn finish(mut child: Child, described: String, out: &Path, err: &Path) -> Result<Run, Failure> {
    let status = match wait_deadline(&mut child, RUN_DEADLINE)? {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "{described}\n      did not finish within {RUN_DEADLINE:?}\n      stdout: {}\n      stderr: {}",
                clip(&fs::read_to_string(out).unwrap_or_default()),
                clip(&fs::read_to_string(err).unwrap_or_default())
            )));
        }
    };
    Ok(Run {
        described,
        status,
        stdout: String::from_utf8_lossy(&fs::read(out)?).into_owned(),
        stderr: String::from_utf8_lossy(&fs::read(err)?).into_owned(),
        terminal_mode: None,
    })
}

/// The probe's verdict on one attempt, with the run that produced it.
pub struct Probe {
    pub run: Run,
    /// `Ok(detail)` or `Err((errno name, detail))`.
    pub result: Result<String, (String, String)>,
}

impl Probe {
    /// Reads the `PROBE …` line. Anything else (airlock failing with 125, a crash, no line) is a
    /// failure of the case: a sandbox that cannot start must not count as one that denies.
    pub(super) fn parse(run: Run) -> Result<Probe, Failure> {
        // Not anchored at the line start: on a pty, an injected and echoed byte may precede it.
        let line = run
            .stdout
            .lines()
            .find_map(|l| l.find("PROBE ").map(|i| &l[i + "PROBE ".len()..]));
        let result = match (run.code(), line) {
            (Some(0), Some(l)) if l.starts_with("ok") => {
                Ok(l.trim_start_matches("ok").trim().to_owned())
            }
            (Some(1), Some(l)) if l.starts_with("denied ") => {
                let rest = &l["denied ".len()..];
                let (name, what) = rest.split_once(' ').unwrap_or((rest, ""));
                Err((name.to_owned(), what.to_owned()))
            }
            _ => {
                return Err(fail(format!(
                    "the probe did not report a result (airlock failed to run it?):\n      {}",
                    run.describe()
                )));
            }
        };
        Ok(Probe { run, result })
    }

    /// Passes when the attempt was refused with one of `errnos` (any refusal when empty).
    pub fn denied(&self, errnos: &[&str]) -> Outcome {
        match &self.result {
            Err((name, _)) if errnos.is_empty() || errnos.contains(&name.as_str()) => Ok(()),
            Err((name, _)) => Err(fail(format!(
                "refused, but with {name} instead of {}:\n      {}",
                errnos.join("/"),
                self.run.describe()
            ))),
            Ok(_) => Err(fail(format!(
                "ESCAPE: the attempt succeeded:\n      {}",
                self.run.describe()
            ))),
        }
    }

    /// Passes when the attempt succeeded (a control).
    pub fn succeeded(&self) -> Outcome {
        match &self.result {
            Ok(_) => Ok(()),
            Err(_) => Err(fail(format!(
                "control failed, it must succeed:\n      {}",
                self.run.describe()
            ))),
        }
    }

    /// The errno name of a refusal, `None` on success.
    pub fn errno(&self) -> Option<&str> {
        self.result.as_ref().err().map(|(n, _)| n.as_str())
    }

    /// Passes unless `secret` shows up anywhere in what the run printed.
    pub fn leaks_nothing(&self, secret: &str) -> Outcome {
        check!(
            !self.run.stdout.contains(secret) && !self.run.stderr.contains(secret),
            "LEAK: the planted secret {secret:?} came out of the sandbox:\n      {}",
            self.run.describe()
        );
        Ok(())
    }

    pub fn stdout_has(&self, needle: &str) -> bool {
        self.run.stdout.contains(needle)
    }
}
