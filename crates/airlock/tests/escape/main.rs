//! The escape suite: real escape attempts against the real `airlock` binary.
//!
//! One executable, two roles. Called as `<exe> probe <action> [args]` it is the probe that runs
//! inside the sandbox ([`probe`]). Otherwise it runs every case in [`cases`] twice: as the
//! current user, and (when root) as an unprivileged user (`AIRLOCK_TEST_USER`, default
//! `airlock-test`), printing `ok`, `FAIL` or `skip (reason)` per case and a final
//! `N passed, N failed, N skipped` line. Arguments not starting with `-` filter cases by name;
//! `AIRLOCK_ESCAPE_BIN` points the suite at another binary (e.g. a deliberately broken one);
//! `AIRLOCK_ESCAPE_BACKEND` runs the modes of one backend only (`native`, `bwrap`, `container`).
//! A container mode of a user other than root runs that user's own rootless podman
//! (`harness/rootless.rs`).

mod cases;
mod harness;
mod probe;

use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};

use harness::{Failure, Mode, User};

const DEFAULT_TEST_USER: &str = "airlock-test";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("probe") {
        std::process::exit(probe::run(&args[1..]));
    }
    std::process::exit(suite(&args));
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

fn suite(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "--list") {
        for case in cases::CASES {
            println!("{}: test", case.name);
        }
        return 0;
    }
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let selected: Vec<&cases::Case> = cases::CASES
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f)))
        .collect();

    println!(
        "escape suite: {} cases against {}",
        selected.len(),
        harness::airlock_under_test().display()
    );
    let mut tally = Tally::default();
    for (label, mode) in modes() {
        run_mode(&label, mode, &selected, &mut tally);
    }
    println!(
        "{} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.skipped
    );
    i32::from(tally.failed > 0)
}

/// The modes: per backend available here (native always, bwrap when bubblewrap is installed),
/// the current user, then the unprivileged user; or why a mode cannot run (`Skip`: not possible
/// here, printed per case; `Fail`: the harness itself broke).
fn modes() -> Vec<(String, Result<Mode, Failure>)> {
    let mut modes = Vec::new();
    // `AIRLOCK_ESCAPE_BACKEND=container` (say) runs one backend's modes only.
    let only = std::env::var("AIRLOCK_ESCAPE_BACKEND").ok();
    for backend in ["native", "bwrap", "container"] {
        if only.as_deref().is_some_and(|b| b != backend) {
            continue;
        }
        let missing = match backend {
            "bwrap" if !bwrap_installed() => Some(
                "bubblewrap is not installed (as root: apt-get install bubblewrap; scripts/test does)"
                    .to_owned(),
            ),
            "container" => podman_missing(),
            _ => None,
        };
        for (name, mode) in users(backend) {
            // A container mode of a user other than root runs that user's rootless podman.
            let rootless = mode.as_ref().ok().and_then(Mode::rootless_missing);
            let mode = match missing.clone().or(rootless) {
                Some(why) => Err(Failure::Skip(why)),
                None => match mode.as_ref().ok().and_then(Mode::rootless_broken) {
                    Some(why) => Err(Failure::Fail(why)),
                    None => mode,
                },
            };
            modes.push((format!("{name} {backend}"), mode));
        }
    }
    modes
}

/// Why the container mode cannot run here, if it cannot: podman missing. (Root runs root's
/// podman; another user runs rootless podman of its own, see `harness/rootless.rs`.)
fn podman_missing() -> Option<String> {
    (!std::path::Path::new("/usr/bin/podman").is_file())
        .then(|| "podman is not installed (as root: apt-get install podman)".to_owned())
}

/// A case that failed only because its backend refused to launch its spec (bwrap: a mount beneath
/// an overlay; container: what the engine cannot honour): the launch failed closed, so the attack
/// did not run, and the case says so instead of failing. An escape is never read as this.
fn refused_by_backend(mode: &Mode, reason: &str) -> bool {
    // Escape reports start "ESCAPE:" (a variable named AIRLOCK_ESCAPE_... in a command is not one).
    !reason.contains("ESCAPE:")
        && match mode.backend {
            "bwrap" => reason.contains("is mounted beneath the overlay on"),
            "container" => container_refusal(reason).is_some(),
            _ => false,
        }
}

/// What the container backend refused in a failed case's launch (it names each feature).
fn container_refusal(reason: &str) -> Option<&'static str> {
    [
        ("cannot forward ports", "port forwards"),
        (
            "mounts parents before children",
            "a mount over an earlier one",
        ),
        (
            "container engine's socket",
            "a mount holding the engine's socket",
        ),
        (
            "has the engine's /proc and /dev only",
            "its own /proc or /dev",
        ),
    ]
    .iter()
    .find(|(text, _)| reason.contains(text))
    .map(|(_, what)| *what)
}

fn bwrap_installed() -> bool {
    ["/usr/local/bin/bwrap", "/usr/bin/bwrap", "/bin/bwrap"]
        .iter()
        .any(|p| std::path::Path::new(p).is_file())
}

/// The current user, then the unprivileged user, each with `backend`.
fn users(backend: &'static str) -> Vec<(String, Result<Mode, Failure>)> {
    let mut modes = Vec::new();
    let current = Mode::new(None, backend).map_err(prepare_failed);
    let label = current
        .as_ref()
        .map_or_else(|_| "current-user".to_owned(), |m| m.label.clone());
    modes.push((label, current));

    let name = std::env::var("AIRLOCK_TEST_USER").unwrap_or_else(|_| DEFAULT_TEST_USER.to_owned());
    // SAFETY: geteuid cannot fail.
    let unprivileged = if unsafe { libc::geteuid() } != 0 {
        Err(Failure::Skip("not running as root, so the suite cannot switch to an unprivileged user (scripts/test as root runs this mode)".to_owned()))
    } else {
        match User::lookup(&name) {
            None => Err(Failure::Skip(format!(
                "user {name:?} does not exist; scripts/test creates it (useradd --system --no-create-home --shell /usr/sbin/nologin {name})"
            ))),
            Some(u) if u.uid == 0 => Err(Failure::Fail(format!(
                "AIRLOCK_TEST_USER={name} is uid 0, not an unprivileged user"
            ))),
            Some(u) => Mode::new(Some(u), backend).map_err(prepare_failed),
        }
    };
    modes.push((name, unprivileged));
    modes
}

fn prepare_failed(e: std::io::Error) -> Failure {
    Failure::Fail(format!(
        "cannot copy the binaries under test ({}) into a temp dir: {e}",
        harness::airlock_under_test().display()
    ))
}

fn run_mode(
    label: &str,
    mode: Result<Mode, Failure>,
    selected: &[&cases::Case],
    tally: &mut Tally,
) {
    let width = selected.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for case in selected {
        print!("[{label}] {:width$} ... ", case.name);
        let _ = std::io::stdout().flush();
        let outcome = match &mode {
            Err(Failure::Skip(reason)) => Err(Failure::Skip(reason.clone())),
            Err(Failure::Fail(reason)) => Err(Failure::Fail(reason.clone())),
            Ok(mode) => {
                catch_unwind(AssertUnwindSafe(|| (case.run)(mode))).unwrap_or_else(|panic| {
                    Err(Failure::Fail(format!(
                        "the case panicked: {}",
                        panic_text(&panic)
                    )))
                })
            }
        };
        let outcome = match (outcome, &mode) {
            (Err(Failure::Fail(reason)), Ok(mode)) if refused_by_backend(mode, &reason) => {
                Err(Failure::Skip(match container_refusal(&reason) {
                    Some(what) if mode.backend == "container" => format!(
                        "the container backend refuses this sandbox (fail closed): it needs \
                         {what}, which the engine cannot honour"
                    ),
                    _ => format!(
                        "the {} backend refuses this sandbox (fail closed): a mount beneath an \
                         overlay",
                        mode.backend
                    ),
                }))
            }
            (outcome, _) => outcome,
        };
        match outcome {
            Ok(()) => {
                tally.passed += 1;
                println!("ok");
            }
            Err(Failure::Skip(reason)) => {
                tally.skipped += 1;
                println!("skip ({reason})");
            }
            Err(Failure::Fail(reason)) => {
                tally.failed += 1;
                println!("FAIL\n      {reason}");
            }
        }
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".to_owned())
}
