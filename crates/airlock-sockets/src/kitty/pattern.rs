//! The commands `launch_*` may start on the host (security invariant 4).
//!
//! A launch is host code execution, so its command line must match a tool's declared pattern
//! exactly: the program is compared with the tool's resolved absolute path byte for byte,
//! never by basename. Basename matching would accept `/tmp/revdiff` for `revdiff`, and the
//! shared temp directory is a write-through bind shared with the host at the same path, so the
//! sandbox could plant its own `revdiff` there and have kitty run it on the host. A tool whose
//! binary could not be resolved has no program, and every launch of it is denied rather than
//! falling back to a name.

use std::path::{Component, Path, PathBuf};

/// The longest command line a launch may carry, in arguments (program included).
pub const MAX_LAUNCH_ARGS: usize = 64;
/// The longest free argument, in bytes.
pub const MAX_FREE_ARG_BYTES: usize = 4096;

/// One tool's launchable command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPattern {
    /// The tool that declared it (`revdiff`), for diagnostics.
    pub tool: String,
    /// The program's resolved absolute path (PATH lookup plus symlink resolution, done on the
    /// host outside every sandbox-writable directory); `None` when it could not be resolved.
    pub program: Option<PathBuf>,
    /// What may follow the program.
    pub args: ArgShape,
    /// The resolved absolute path of a shell that may run this command as `<shell> -c
    /// "<program> <args>"`; `None` refuses the `sh -c` form for this tool.
    pub shell: Option<PathBuf>,
}

/// The arguments a [`LaunchPattern`] accepts after its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgShape {
    /// Exactly these arguments.
    Exact(Vec<String>),
    /// `leading` exactly, then at most `max_free` free arguments, each a plain word (see
    /// [`is_plain_word`]); one starting with `-` only when `allow_options`.
    Trailing {
        leading: Vec<String>,
        max_free: usize,
        allow_options: bool,
    },
}

impl LaunchPattern {
    /// Whether `argv` (program first) is this pattern's command.
    pub fn matches(&self, argv: &[String]) -> bool {
        let Some((program, args)) = argv.split_first() else {
            return false;
        };
        self.program
            .as_deref()
            .is_some_and(|pinned| same_program(pinned, program))
            && self.args.matches(args)
    }

    fn runs_under(&self, shell: &str) -> bool {
        self.shell
            .as_deref()
            .is_some_and(|pinned| same_program(pinned, shell))
    }
}

impl ArgShape {
    fn matches(&self, args: &[String]) -> bool {
        match self {
            ArgShape::Exact(expected) => args == expected.as_slice(),
            ArgShape::Trailing {
                leading,
                max_free,
                allow_options,
            } => {
                let Some(free) = args.strip_prefix(leading.as_slice()) else {
                    return false;
                };
                free.len() <= *max_free
                    && free
                        .iter()
                        .all(|arg| is_plain_word(arg) && (*allow_options || !arg.starts_with('-')))
            }
        }
    }
}

/// A free argument kitty and a shell both take literally: ASCII letters, digits and
/// `_ . / : = % + , -`. That leaves out everything a shell expands or splits on (`$`, quotes,
/// `\`, globs, `~`, spaces) and `@`, which starts kitty's own placeholders (`@selection` is
/// replaced by the text selected in the user's window).
pub fn is_plain_word(arg: &str) -> bool {
    !arg.is_empty()
        && arg.len() <= MAX_FREE_ARG_BYTES
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=%+,-".contains(&b))
}

/// `pinned` must be an absolute path in canonical spelling (no `.` or `..` component, no
/// doubled or trailing slash), and `requested` exactly it.
fn same_program(pinned: &Path, requested: &str) -> bool {
    let only_names = pinned
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    // `components()` drops interior `.` and extra slashes; a spelling it changes is not canonical.
    let canonical = pinned.components().collect::<PathBuf>().as_os_str() == pinned.as_os_str();
    pinned.is_absolute() && only_names && canonical && pinned.to_str() == Some(requested)
}

const NO_MATCH: &str = "no launch pattern matches the command";

/// Checks a launch's command line (`args` of kitty's launch payload) against `patterns`.
pub(super) fn check_command(
    args: &[String],
    patterns: &[LaunchPattern],
) -> Result<(), &'static str> {
    if args.is_empty() {
        // kitty runs the user's login shell for an empty command line.
        return Err("launch without a command runs the host shell");
    }
    if args.len() > MAX_LAUNCH_ARGS {
        return Err("launch command has too many arguments");
    }
    // Whatever the program, a `-c` payload is checked first: a shell would run it as a script.
    if args.get(1).is_some_and(|flag| flag == "-c") {
        for payload in &args[2..] {
            check_shell_payload(payload)?;
        }
    }
    if patterns.iter().any(|p| p.matches(args)) {
        return Ok(());
    }
    if let [shell, flag, script] = args
        && flag == "-c"
    {
        let under_shell: Vec<&LaunchPattern> =
            patterns.iter().filter(|p| p.runs_under(shell)).collect();
        if under_shell.is_empty() {
            return Err(NO_MATCH);
        }
        let argv = plain_command_line(script)?;
        if under_shell.iter().any(|p| p.matches(&argv)) {
            return Ok(());
        }
    }
    Err(NO_MATCH)
}

/// Shell control syntax in a `-c` payload: command separators, pipes, command substitution,
/// redirections, line breaks. Any of them would let a matching command carry a second one.
fn check_shell_payload(payload: &str) -> Result<(), &'static str> {
    let control = payload
        .chars()
        .any(|c| matches!(c, ';' | '&' | '|' | '`' | '<' | '>' | '\n' | '\r'));
    if control || payload.contains("$(") {
        return Err("shell metacharacter in sh -c payload");
    }
    Ok(())
}

/// A `-c` script that is exactly a command line of plain words separated by spaces, so the
/// argv the shell will run is known without a shell's parser.
fn plain_command_line(script: &str) -> Result<Vec<String>, &'static str> {
    let words: Vec<String> = script
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    if words.is_empty() || !words.iter().all(|w| is_plain_word(w)) {
        return Err("sh -c payload is not a plain command line");
    }
    Ok(words)
}
