//! The developer's terminal: no descriptor of it enters the sandbox. The workload gets a pty of
//! the sandbox's own devpts, in a session of its own, and airlock relays; so what the workload
//! does to "its" terminal (inject input, chmod it) never reaches the one airlock was started from.

use std::os::unix::fs::MetadataExt as _;

use crate::check;
use crate::harness::{Mode, Outcome, PTY_COLS, PTY_ROWS, World};

/// TIOCSTI on stdin inside, started from a developer's terminal: refused (seccomp), and it could
/// only reach the sandbox's own pty anyway. The terminal itself must keep working (window size
/// included).
pub fn tiocsti_inherited_terminal(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for action in ["tiocsti-stdin", "tiocsti-stdin-high"] {
        w.probe_on_pty(&[action])?.denied(&["EPERM"])?;
        let host = w.host_probe_on_pty(&[action])?;
        check!(
            host.errno() != Some("EPERM"),
            "host control: `{action}` is refused with EPERM on the host too:\n      {}",
            host.run.describe()
        );
    }
    let p = w.probe_on_pty(&["winsize-stdin"])?;
    p.succeeded()?;
    let want = format!("winsize={PTY_ROWS}x{PTY_COLS}");
    check!(
        p.stdout_has(&want),
        "control: the terminal must report {want} inside:\n      {}",
        p.run.describe()
    );
    Ok(())
}

/// A number the probe printed as `name=value`.
fn field(detail: &str, name: &str) -> Option<u64> {
    detail
        .split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Inside, stdin is a terminal with a name (`tty` works) on a devpts that is not the host's.
pub fn terminal_is_the_sandboxs_pty(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let host_devpts = std::fs::metadata("/dev/pts/ptmx")?.dev();
    let inside = w.probe_on_pty(&["tty-stdin"])?;
    inside.succeeded()?;
    let detail = inside.result.as_ref().cloned().unwrap_or_default();
    check!(
        detail.contains("ttyname=/dev/pts/"),
        "stdin inside must be a named pty (tty, ttyname, GPG_TTY):\n      {}",
        inside.run.describe()
    );
    check!(
        field(&detail, "dev") != Some(host_devpts),
        "ESCAPE: stdin inside is a pty of the host's devpts (dev {host_devpts}):\n      {}",
        inside.run.describe()
    );
    // Control: the same probe unsandboxed sees the host's devpts, so the check can fail.
    let host = w.host_probe_on_pty(&["tty-stdin"])?;
    host.succeeded()?;
    let host_detail = host.result.as_ref().cloned().unwrap_or_default();
    check!(
        field(&host_detail, "dev") == Some(host_devpts),
        "control: on the host the probe's stdin must be on the host's devpts (dev {host_devpts}):\n      {}",
        host.run.describe()
    );
    Ok(())
}

/// `chmod 0666` on the terminal: the developer's pty keeps its mode (0620), whatever the sandbox
/// does to its own. On the host the same call changes it.
pub fn terminal_chmod_stays_inside(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let inside = w.probe_on_pty(&["fchmod-stdin", "666"])?;
    check!(
        inside.run.terminal_mode == Some(0o620),
        "ESCAPE: the developer's terminal changed mode to {} while the sandbox chmod-ed its stdin:\n      {}",
        octal(inside.run.terminal_mode),
        inside.run.describe()
    );
    // Control: unsandboxed, the owner's fchmod reaches that very terminal.
    let host = w.host_probe_on_pty(&["fchmod-stdin", "666"])?;
    host.succeeded()?;
    check!(
        host.run.terminal_mode == Some(0o666),
        "control: fchmod(0, 0666) on the host must change the terminal's mode (now {}):\n      {}",
        octal(host.run.terminal_mode),
        host.run.describe()
    );
    Ok(())
}

fn octal(mode: Option<u32>) -> String {
    mode.map_or_else(|| "unknown".to_owned(), |m| format!("{m:o}"))
}
