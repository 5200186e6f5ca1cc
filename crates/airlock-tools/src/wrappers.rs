//! Agent wrappers: shell functions that send the installed agents through `airlock run-agent`, so
//! typing `claude` runs it sandboxed. `airlock agent-wrappers activate [SHELL]` prints them (nothing
//! is written); the user evaluates that output from a startup file, behind the guarded line
//! [`activation_line`] gives.
//!
//! Every definition is inside a test of `$AIRLOCK`, which the sandbox sets: nothing is wrapped
//! inside a sandbox (where the startup files are mounted too), so a wrapper cannot recurse. The
//! wrapper runs airlock by the absolute path the generating airlock resolved for itself, never
//! through `PATH` (a project's `bin/` on `PATH` is writable by the sandbox); when that path is gone it
//! fails with exit 127 instead of looking airlock up.

use std::fmt::Write as _;
use std::path::Path;

/// The agents a wrapper is made for, when they are on the host's `PATH`.
pub const AGENTS: &[&str] = &[
    "claude",
    "codex",
    "pi",
    "opencode",
    "copilot",
    "gemini",
    "cursor-agent",
    "aider",
];

/// The shells wrappers are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrapperShell {
    Bash,
    Zsh,
    Fish,
}

impl WrapperShell {
    pub const NAMES: &[&str] = &["bash", "zsh", "fish"];

    /// By name or path (`/usr/bin/zsh`): the file name decides.
    pub fn parse(name: &str) -> Option<WrapperShell> {
        match Path::new(name).file_name()?.to_str()? {
            "bash" => Some(WrapperShell::Bash),
            "zsh" => Some(WrapperShell::Zsh),
            "fish" => Some(WrapperShell::Fish),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WrapperShell::Bash => "bash",
            WrapperShell::Zsh => "zsh",
            WrapperShell::Fish => "fish",
        }
    }

    /// The startup file the activation line goes in.
    pub fn startup_file(self) -> &'static str {
        match self {
            WrapperShell::Bash => "~/.bashrc",
            WrapperShell::Zsh => "~/.zshrc",
            WrapperShell::Fish => "~/.config/fish/config.fish",
        }
    }
}

/// The line to paste into the shell's startup file. It repeats the `$AIRLOCK` test because the
/// startup files are mounted into the sandbox, where `airlock` need not be on `PATH`; it finds
/// airlock through `PATH` because it runs once per shell start and a fixed path would break when
/// an upgrade moves the binary (the functions it defines then use the absolute path).
pub fn activation_line(shell: WrapperShell) -> String {
    match shell {
        WrapperShell::Bash | WrapperShell::Zsh => format!(
            "if [ -z \"${{AIRLOCK:-}}\" ] && command -v airlock >/dev/null 2>&1; then eval \"$(airlock agent-wrappers activate {})\"; fi",
            shell.name()
        ),
        WrapperShell::Fish => "if not set -q AIRLOCK; and command -q airlock; airlock agent-wrappers activate fish | source; end".to_owned(),
    }
}

/// Single-quotes `text` for the shell.
fn quoted(shell: WrapperShell, text: &str) -> String {
    match shell {
        WrapperShell::Bash | WrapperShell::Zsh => format!("'{}'", text.replace('\'', r"'\''")),
        WrapperShell::Fish => format!("'{}'", text.replace('\\', r"\\").replace('\'', r"\'")),
    }
}

/// The message of a wrapper whose airlock is gone.
fn missing_message(airlock: &str) -> String {
    format!(
        "airlock: no executable at {airlock} - reinstall airlock, then start a new shell to refresh the wrappers"
    )
}

/// The wrappers for the agents among [`AGENTS`] that `installed` says are on the host, calling
/// `airlock` (an absolute path). With none installed, a comment (still valid shell).
pub fn activate(shell: WrapperShell, airlock: &Path, installed: &dyn Fn(&str) -> bool) -> String {
    let agents: Vec<&str> = AGENTS.iter().copied().filter(|a| installed(a)).collect();
    let mut out = format!(
        "# airlock agent wrappers for {}, from `airlock agent-wrappers activate {}` (nothing is written to disk).\n",
        shell.name(),
        shell.name()
    );
    if agents.is_empty() {
        let _ = writeln!(
            out,
            "# None of {} is installed: nothing to wrap.",
            AGENTS.join(", ")
        );
        return out;
    }
    let exe = airlock.to_string_lossy();
    let path = quoted(shell, &exe);
    let message = quoted(shell, &missing_message(&exe));
    match shell {
        WrapperShell::Bash | WrapperShell::Zsh => {
            out.push_str("if [ -z \"${AIRLOCK:-}\" ]; then\n");
            for agent in &agents {
                let _ = write!(
                    out,
                    "{agent}() {{\n    if [ ! -x {path} ]; then\n        printf '%s\\n' {message} >&2\n        return 127\n    fi\n    {path} run-agent {agent} \"$@\"\n}}\n\
                     {agent}-no-airlock() {{ command {agent} \"$@\"; }}\n"
                );
            }
            out.push_str("fi\n");
        }
        WrapperShell::Fish => {
            out.push_str("if not set -q AIRLOCK\n");
            for agent in &agents {
                let _ = write!(
                    out,
                    "    function {agent} --description '{agent} in an airlock sandbox'\n        if not test -x {path}\n            printf '%s\\n' {message} >&2\n            return 127\n        end\n        {path} run-agent {agent} $argv\n    end\n\
                     \x20   function {agent}-no-airlock --wraps {agent} --description '{agent}, not sandboxed'\n        command {agent} $argv\n    end\n"
                );
            }
            out.push_str("end\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_installed_agents_are_wrapped_and_none_is_a_comment() {
        let only_claude = |a: &str| a == "claude";
        let out = activate(
            WrapperShell::Bash,
            Path::new("/opt/air lock/airlock"),
            &only_claude,
        );
        assert!(out.contains("claude() {"), "{out}");
        assert!(
            out.contains("'/opt/air lock/airlock' run-agent claude \"$@\""),
            "{out}"
        );
        assert!(
            out.contains("claude-no-airlock() { command claude \"$@\"; }"),
            "{out}"
        );
        assert!(!out.contains("codex"), "{out}");
        let none = activate(WrapperShell::Fish, Path::new("/a"), &|_| false);
        assert!(none.lines().all(|l| l.starts_with('#')), "{none}");
    }

    #[test]
    fn quoting_survives_quotes_in_the_path() {
        assert_eq!(quoted(WrapperShell::Bash, "/it's"), r"'/it'\''s'");
        assert_eq!(quoted(WrapperShell::Fish, r"/it's\x"), r"'/it\'s\\x'");
    }

    #[test]
    fn shells_parse_by_file_name() {
        assert_eq!(WrapperShell::parse("/usr/bin/zsh"), Some(WrapperShell::Zsh));
        assert_eq!(WrapperShell::parse("fish"), Some(WrapperShell::Fish));
        assert_eq!(WrapperShell::parse("tcsh"), None);
    }
}
