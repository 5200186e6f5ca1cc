//! What the `airlock logs network` test files share: a temp HOME with a project, decision logs
//! written as the proxy writes them, and readers for `--json` output.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{TestHome, stdout};

pub const ALLOWED: &str = r#"{"time":"2026-11-29T18:22:35.002Z","host":"api.github.com","port":443,"method":"CONNECT","decision":"allowed","rule":"github.com","bytes_up":1234,"bytes_down":49152,"duration_ms":312}"#;
pub const DENIED: &str = r#"{"time":"2026-11-29T18:22:34.123Z","host":"example.org","port":443,"method":"CONNECT","decision":"denied","bytes_up":0,"bytes_down":0,"duration_ms":0,"reason":"no rule allows it"}"#;
pub const ERROR: &str = r#"{"time":"2026-11-29T18:22:36.000Z","host":"","port":0,"method":"BREW","decision":"error","bytes_up":0,"bytes_down":0,"duration_ms":1,"reason":"method not accepted"}"#;

/// A temp HOME with a project directory in it (`~/code/app`).
pub struct World(TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    pub fn new() -> World {
        World(TestHome::new("home/code/app"))
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.0.airlock(args);
        cmd.env("PATH", "/usr/bin:/bin");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("spawn airlock")
    }

    /// Writes `lines` as the decision log of sandbox `name` and returns the log's path.
    pub fn log(&self, name: &str, lines: &[&str]) -> PathBuf {
        let path = self.sandboxes().join(name).join("logs/network.jsonl");
        super::write(
            &path,
            &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        );
        path
    }
}

/// A decision record as the proxy writes it.
pub fn rec(time: &str, host: &str, method: &str, decision: &str, status: Option<u16>) -> String {
    let mut r = serde_json::json!({
        "time": time, "host": host, "port": 443, "method": method, "decision": decision,
        "bytes_up": 10, "bytes_down": 100, "duration_ms": 5,
    });
    if let Some(status) = status {
        r["status"] = status.into();
    }
    r.to_string()
}

/// The hosts of `--json` output, in order.
pub fn hosts(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["host"].as_str().unwrap().to_owned()
        })
        .collect()
}

pub fn project_sandbox(project: &Path) -> String {
    airlock_sandbox::state::sandbox_name(project)
}
