//! Overlay launches: a host terminal (kitty, herdr) running revdiff for a sandboxed agent.
//!
//! revdiff's launcher (a script the agent runs inside the sandbox) writes its scratch files in
//! `$TMPDIR` (the session's shared temp directory, the same path on both sides), then asks the
//! terminal to run, on the host, either a `sh -c` payload (kitty) or `sh <script>` (herdr):
//!
//! ```text
//! [cd '<project>' &&] [/usr/bin/env 'EDITOR=…'] '<revdiff>' '--output=<shared>/<out>' <args…>[; touch '<shared>/<done>']
//! ```
//!
//! [`RevdiffOverlay`] reads that line (no shell: [`words`]), checks every part ([`revdiff`]),
//! and writes airlock's own script for it ([`script`]); the terminal is told to run that script
//! instead. Nothing the sandbox wrote is executed or trusted by the host: the program is the
//! host's resolved revdiff, the directory the project, the environment pinned, and the output
//! reaches the shared directory through [`handoff`], which follows no link the sandbox made.

pub mod handoff;
pub mod revdiff;
pub mod script;
mod words;

#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use handoff::handoff;
pub use revdiff::Invocation;
pub use script::{Pins, ScriptDir};
use words::{Token, commands, quote};

/// The shells a launcher may name for its payload (kitty resolves a bare `sh` on the host's
/// PATH; the rewritten launch always names `/bin/sh`).
const SHELLS: &[&str] = &["sh", "/bin/sh", "/usr/bin/sh"];
/// The first lines a launch script may start with.
const SHEBANGS: &[&str] = &[
    "#!/bin/sh",
    "#!/usr/bin/env sh",
    "#!/bin/bash",
    "#!/usr/bin/env bash",
];
/// The largest launch script read from the shared temp directory.
pub const MAX_SCRIPT_BYTES: u64 = 64 << 10;

/// What one session allows to be launched as an overlay, and where its scripts go.
#[derive(Debug)]
pub struct RevdiffOverlay {
    pub pins: Pins,
    /// The spellings of revdiff's path a launcher may use: the host's PATH entry and its
    /// resolved target (both outside every sandbox-writable directory).
    pub program_names: Vec<String>,
    pub scripts: ScriptDir,
}

/// A checked launch: revdiff's arguments and the shared files' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub invocation: Invocation,
    pub sentinel: Option<String>,
}

impl RevdiffOverlay {
    /// kitty: a launch's `args`, as the argv kitty should run instead.
    pub fn relocate_argv(&self, args: &[String]) -> Result<Vec<String>, &'static str> {
        let launch = match args {
            [shell, flag, payload] if SHELLS.contains(&shell.as_str()) && flag == "-c" => {
                self.parse_line(payload)?
            }
            [program, rest @ ..] if self.is_program(program) => Launch {
                invocation: revdiff::check_args(rest, &self.pins.shared)?,
                sentinel: None,
            },
            _ => return Err("launch command is not revdiff"),
        };
        let script = self.write(&launch)?;
        Ok(vec![
            "/bin/sh".into(),
            script.to_string_lossy().into_owned(),
        ])
    }

    /// herdr: the text of a `pane.send_input` (`sh <script in the shared temp directory>`), as
    /// the text to type instead (`/bin/sh '<airlock's script>'`).
    pub fn relocate_command(&self, command: &str) -> Result<String, &'static str> {
        let words = match commands(command)?.as_slice() {
            [(None, words)] => words.clone(),
            _ => return Err("pane input is not one command"),
        };
        let [shell, path] = words.as_slice() else {
            return Err("pane input is not sh <launch script>");
        };
        if !SHELLS.contains(&shell.as_str()) {
            return Err("pane input is not sh <launch script>");
        }
        let name = revdiff::shared_child(path, &self.pins.shared)?;
        let text = read_shared(&self.pins.shared, &name)?;
        let launch = self.parse_script(&text)?;
        let script = self.write(&launch)?;
        Ok(format!("/bin/sh {}", quote(&script.to_string_lossy())))
    }

    fn is_program(&self, word: &str) -> bool {
        self.program_names.iter().any(|p| p == word)
    }

    fn write(&self, launch: &Launch) -> Result<PathBuf, &'static str> {
        self.scripts.write(
            &self.pins,
            &launch.invocation.args,
            &launch.invocation.output,
            launch.sentinel.as_deref(),
        )
    }

    /// A launch script's text: an optional shebang, then exactly one command line.
    pub fn parse_script(&self, text: &str) -> Result<Launch, &'static str> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let mut first = lines.next().ok_or("launch script is empty")?;
        if first.starts_with("#!") {
            if !SHEBANGS.contains(&first.trim_end()) {
                return Err("launch script has an unknown interpreter");
            }
            first = lines.next().ok_or("launch script has no command")?;
        }
        if lines.next().is_some() {
            return Err("launch script has more than one command line");
        }
        self.parse_line(first)
    }

    /// `[cd <project> &&] [env EDITOR=… VISUAL=…] <revdiff> <args…> [; touch <sentinel>]`.
    pub fn parse_line(&self, line: &str) -> Result<Launch, &'static str> {
        let mut parts = commands(line)?.into_iter().peekable();
        if let Some((_, words)) = parts.peek()
            && words.first().is_some_and(|w| w == "cd")
        {
            let (_, words) = parts.next().expect("peeked");
            match words.as_slice() {
                [_, dir] if Path::new(dir) == self.pins.project => {}
                [_, _] => return Err("launch cd is not the project directory"),
                _ => return Err("launch cd takes one directory"),
            }
            if !matches!(parts.peek(), Some((Some(Token::And), _))) {
                return Err("launch cd must be followed by &&");
            }
        }
        let (_, words) = parts.next().ok_or("launch has no revdiff command")?;
        let invocation = self.revdiff_command(&words)?;
        let sentinel = match parts.next() {
            None => None,
            Some((Some(Token::Then), words)) => match words.as_slice() {
                [touch, path] if touch == "touch" => {
                    Some(revdiff::shared_child(path, &self.pins.shared)?)
                }
                _ => return Err("only touch <sentinel> may follow revdiff"),
            },
            Some(_) => return Err("only ; touch <sentinel> may follow revdiff"),
        };
        if parts.next().is_some() {
            return Err("launch has more commands than revdiff and its sentinel");
        }
        Ok(Launch {
            invocation,
            sentinel,
        })
    }

    /// revdiff's words, after an optional `env` prefix setting only EDITOR / VISUAL. Their
    /// values are dropped: the script sets the host's own (a sandbox-chosen editor would be a
    /// program revdiff starts on the host).
    fn revdiff_command(&self, words: &[String]) -> Result<Invocation, &'static str> {
        let mut rest = words;
        if rest
            .first()
            .is_some_and(|w| w == "env" || w == "/usr/bin/env")
        {
            rest = &rest[1..];
            while let Some((name, _)) = rest.first().and_then(|w| w.split_once('=')) {
                if name != "EDITOR" && name != "VISUAL" {
                    return Err("launch env may set only EDITOR and VISUAL");
                }
                rest = &rest[1..];
            }
        }
        match rest {
            [program, args @ ..] if self.is_program(program) => {
                revdiff::check_args(args, &self.pins.shared)
            }
            _ => Err("launch program is not the host's revdiff"),
        }
    }
}

/// Reads `shared/name` once: not through a link, not a FIFO or device, capped.
fn read_shared(shared: &Path, name: &str) -> Result<String, &'static str> {
    const UNREADABLE: &str = "launch script is not a readable regular file";
    let path = CString::new(shared.join(name).as_os_str().as_bytes()).map_err(|_| UNREADABLE)?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: valid C string; the result is checked. The shared directory itself is a mount
    // point inside the sandbox, so the sandbox cannot swap it for a link.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(UNREADABLE);
    }
    // SAFETY: `fd` was just opened and is owned here.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(UNREADABLE);
    }
    let mut text = String::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| UNREADABLE)?;
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err("launch script over 64 KiB");
    }
    Ok(text)
}
