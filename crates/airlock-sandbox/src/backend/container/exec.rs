//! airlock's exec wrapper, the command the container runs: the second layer native's workload
//! gets (Landlock write rules, airlock's own seccomp filter over the engine's profile), then the
//! container's init (`init.rs`), which forks the spec's argv under those layers.
//!
//! `airlock-container-exec [--nested-namespaces] [--writable=PATH]... -- ARGV...`: the airlock
//! binary bound read-only at [`EXEC_PATH`], started under that name. Exit 125 when a layer cannot
//! be applied (fail closed), 126/127 when the command cannot run.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::native::landlock::{self, LandlockOutcome};
use crate::spec::SeccompPolicy;

/// The name the wrapper answers to (`argv[0]`'s file name).
pub const EXEC_NAME: &str = "airlock-container-exec";
/// Where the airlock binary is bound in the container.
pub const EXEC_PATH: &str = "/run/airlock/airlock-container-exec";
/// Where the supervisor's go socket is bound: the wrapper connects first thing, and the
/// supervisor writes `G` on the connection once the container's gates run (the egress listener,
/// the port forwards, the keeper with every rule applied; `go.rs`, `launch.rs`).
pub const GO_PATH: &str = "/run/airlock/go";

/// What the wrapper was told on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    pub policy: SeccompPolicy,
    /// Wait until `127.0.0.1:PORT` accepts (the supervisor's egress listener) before the command.
    pub egress_port: Option<u16>,
    /// Connect to [`GO_PATH`] and wait for the supervisor's `G` there before the command.
    pub wait_go: bool,
    pub writable: Vec<PathBuf>,
    pub argv: Vec<OsString>,
}

/// Parses the wrapper's arguments (after `argv[0]`); anything else is an error naming it.
pub fn parse(args: Vec<OsString>) -> Result<ExecArgs, String> {
    let mut out = ExecArgs {
        policy: SeccompPolicy {
            nested_namespaces: false,
        },
        writable: Vec::new(),
        egress_port: None,
        wait_go: false,
        argv: Vec::new(),
    };
    let mut args = args.into_iter();
    for a in args.by_ref() {
        let bytes = a.as_bytes();
        if bytes == b"--" {
            out.argv = args.collect();
            if out.argv.is_empty() {
                return Err("no command after --".into());
            }
            return Ok(out);
        } else if bytes == b"--nested-namespaces" {
            out.policy.nested_namespaces = true;
        } else if bytes == b"--wait-go" {
            out.wait_go = true;
        } else if let Some(port) = bytes.strip_prefix(b"--egress-port=") {
            let port = std::str::from_utf8(port).ok().and_then(|p| p.parse().ok());
            out.egress_port = Some(port.ok_or_else(|| format!("bad port in {a:?}"))?);
        } else if let Some(path) = bytes.strip_prefix(b"--writable=") {
            out.writable
                .push(PathBuf::from(std::ffi::OsStr::from_bytes(path)));
        } else {
            return Err(format!("unknown argument {a:?}"));
        }
    }
    Err("no -- before the command".into())
}

/// The wrapper's entry point; never returns.
pub fn main() -> ! {
    let args = match parse(std::env::args_os().skip(1).collect()) {
        Ok(args) => args,
        Err(e) => die(125, &format!("{EXEC_NAME}: {e}")),
    };
    // The go first: the connection is how the supervisor learns which process to start the
    // egress listener beside.
    if args.wait_go {
        wait_for_go();
    }
    if let Some(port) = args.egress_port {
        wait_for_proxy(port);
    }
    // Before Landlock, which would refuse it: the init's end of the supervisor's status FIFO.
    let status = super::init::Channel::open();
    // SAFETY: a plain prctl on this thread; the engine already set it, this makes it certain.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        die(125, "airlock: cannot set no_new_privs in the container");
    }
    // As native (`native::child::uses_landlock`): no Landlock write layer when a caller other
    // than root asked for nested namespaces, since Landlock refuses mount(2) and the uid_map
    // writes of a nested sandbox to every process it restricts. The engine's read-only binds
    // stay, locked in any namespace nested below; as root the layer stays.
    // SAFETY: getuid cannot fail.
    let nested_unprivileged = args.policy.nested_namespaces && unsafe { libc::getuid() } != 0;
    if !nested_unprivileged {
        match landlock::restrict_writes(&args.writable) {
            Ok(LandlockOutcome::NotSupported) => eprintln!(
                "airlock: warning: this kernel has no Landlock, so writes in the container are \
                 confined by its read-only mounts alone"
            ),
            Ok(_) => {}
            Err(e) => die(
                125,
                &format!("airlock: cannot apply Landlock in the container: {e}"),
            ),
        }
    }
    let argv: Vec<CString> = match args
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect()
    {
        Ok(argv) => argv,
        Err(_) => die(125, "airlock: the command has a NUL byte"),
    };
    if let Err(e) = crate::native::seccomp::build(args.policy).install() {
        die(
            125,
            &format!("airlock: cannot install the seccomp filter: {e}"),
        );
    }
    // The layers are this process's; the workload inherits them (`init.rs`).
    super::init::run(status, &argv, &args.argv[0])
}

/// Waits until the supervisor's listener is in place, so the workload's first request finds
/// the proxy; fails closed after a deadline. It reads the namespace's socket table rather than
/// connecting, so the proxy's log gets no empty connection.
fn wait_for_proxy(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !listening(
        &std::fs::read_to_string("/proc/self/net/tcp").unwrap_or_default(),
        port,
    ) {
        if std::time::Instant::now() > deadline {
            die(
                125,
                "airlock: the egress proxy did not come up in the container within 30 s",
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits until the supervisor has started the container's gates (it writes `G` on the go
/// socket, as native's supervisor sends "G" to init); when it could not, it closes the
/// connection without a word (or kills the container) and the command does not run. No
/// deadline, since a supervisor that fails kills the container.
fn wait_for_go() {
    if super::go::wait(std::path::Path::new(GO_PATH)).is_err() {
        die(
            125,
            "airlock: the supervisor did not start this container's gates (the egress proxy, the \
             port forwards, the keeper of hidden files), so the command does not run (fail closed)",
        );
    }
}

/// Whether `/proc/net/tcp` text has a socket listening (state `0A`) on `127.0.0.1:port`.
fn listening(table: &str, port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A")
    })
}

fn die(code: i32, message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_wrapper_reads_its_layers_then_the_command_verbatim() {
        let a = parse(os(&[
            "--nested-namespaces",
            "--egress-port=3128",
            "--wait-go",
            "--writable=/tmp",
            "--",
            "sh",
            "--writable=x",
        ]))
        .unwrap();
        assert!(a.policy.nested_namespaces);
        assert_eq!(a.egress_port, Some(3128));
        assert!(a.wait_go);
        assert_eq!(a.writable, [PathBuf::from("/tmp")]);
        assert_eq!(a.argv, os(&["sh", "--writable=x"]));
    }

    #[test]
    fn the_proxy_port_counts_only_when_listening_on_loopback() {
        let head = "  sl  local_address rem_address   st tx_queue rx_queue\n";
        let listen = "   0: 0100007F:0C38 00000000:0000 0A 00000000:00000000\n";
        let other = "   1: 00000000:0C38 00000000:0000 0A 00000000:00000000\n";
        let connected = "   2: 0100007F:0C38 0100007F:9C40 01 00000000:00000000\n";
        assert!(listening(&format!("{head}{listen}"), 3128));
        assert!(!listening(&format!("{head}{other}{connected}"), 3128));
        assert!(!listening(head, 3128));
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(parse(os(&["--writable=/a"])).is_err());
        assert!(parse(os(&["--bogus", "--", "sh"])).is_err());
        assert!(parse(os(&["--"])).is_err());
        assert!(parse(os(&["--egress-port=x", "--", "sh"])).is_err());
    }
}
