//! A configured host command (e.g. `proximo status`): POST /command with the arguments as they
//! are, print the host command's output, exit with its exit code.

use std::ffi::OsString;
use std::io::Write as _;
use std::time::Duration;

use super::post;

/// Exit code when the bridge refused or could not run the command (the host command never ran).
const EXIT_BRIDGE: i32 = 125;
/// How long the shim waits for an answer. The daemon enforces each command's own deadline
/// (`timeout_secs`, any length), so this only guards against a daemon that stopped answering.
const WAIT: Duration = Duration::from_secs(24 * 3600);

pub fn run(name: &str, args: &[OsString]) -> i32 {
    let mut argv = Vec::with_capacity(args.len());
    for arg in args {
        match arg.to_str() {
            Some(a) => argv.push(a.to_owned()),
            None => {
                eprintln!(
                    "{name}: argument {arg:?} is not valid UTF-8; the bridge carries text only"
                );
                return EXIT_BRIDGE;
            }
        }
    }
    let body = serde_json::json!({ "command": name, "args": argv });
    let answer = match post("/command", &body, WAIT) {
        Ok(answer) => answer,
        Err(e) => {
            eprintln!("{name}: {e}");
            return EXIT_BRIDGE;
        }
    };
    if answer.status != 200 {
        eprintln!(
            "{name}: refused by the host bridge (HTTP {}): {}",
            answer.status,
            answer.text()
        );
        return EXIT_BRIDGE;
    }
    let reply: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    if let Some(output) = reply["output"].as_str() {
        let _ = std::io::stdout().write_all(output.as_bytes());
    }
    reply["exit"]
        .as_i64()
        .and_then(|e| i32::try_from(e).ok())
        .unwrap_or(EXIT_BRIDGE)
}
