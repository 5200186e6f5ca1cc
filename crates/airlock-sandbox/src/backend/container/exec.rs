//! airlock's exec wrapper, the command the container runs: the second layer native's workload
//! gets (Landlock write rules, airlock's own seccomp filter over the engine's profile), then
//! `execvp` of the spec's argv.
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

/// What the wrapper was told on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    pub policy: SeccompPolicy,
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
    // SAFETY: a plain prctl on this thread; the engine already set it, this makes it certain.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        die(125, "airlock: cannot set no_new_privs in the container");
    }
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
    let e = nix::unistd::execvp(&argv[0], &argv).unwrap_err();
    let code = if e == nix::errno::Errno::ENOENT {
        127
    } else {
        126
    };
    die(
        code,
        &format!("airlock: cannot run {:?}: {e}", args.argv[0]),
    )
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
            "--writable=/tmp",
            "--",
            "sh",
            "--writable=x",
        ]))
        .unwrap();
        assert!(a.policy.nested_namespaces);
        assert_eq!(a.writable, [PathBuf::from("/tmp")]);
        assert_eq!(a.argv, os(&["sh", "--writable=x"]));
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(parse(os(&["--writable=/a"])).is_err());
        assert!(parse(os(&["--bogus", "--", "sh"])).is_err());
        assert!(parse(os(&["--"])).is_err());
    }
}
