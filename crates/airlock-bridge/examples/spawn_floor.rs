//! The floor under one shim call, for `scripts/bench-bridge`: this process starts, runs one
//! program to its exit the way the daemon runs the opener (stdin and stdout to /dev/null, stderr
//! piped), and exits. No socket, no HTTP, no token, no checks: what a shim call costs on this
//! machine before the bridge does any work of its own.
//!
//! Usage: spawn_floor PROGRAM [ARG...]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let program = args.next().expect("usage: spawn_floor PROGRAM [ARG...]");
    let status = Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .status()
        .expect("spawn");
    std::process::exit(if status.success() { 0 } else { 1 });
}
