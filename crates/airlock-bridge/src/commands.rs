//! The host commands `/command` may run: the built-in `proximo` entry and `[bridge.commands.<name>]`
//! from the global config, and the pure check of one invocation against them.

use std::collections::BTreeMap;
use std::time::Duration;

use airlock_config::HostCommandEntry;

use crate::shims::SHIM_NAMES;

/// How long a host command may run unless its entry says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// One allowed host command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCommand {
    /// The program as configured: an absolute path or a name on the daemon's PATH.
    pub program: String,
    pub verbs: Vec<String>,
    pub refused_flags: Vec<String>,
    /// `(verb, argument)` pairs refused outright.
    pub refused: Vec<(String, String)>,
    pub timeout: Duration,
}

/// Every host command by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandTable {
    pub commands: BTreeMap<String, HostCommand>,
}

/// Why a `[bridge.commands]` entry cannot be used; the daemon refuses to start on one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CommandConfigError {
    #[error(
        "[bridge.commands.{name}]: the name {problem}; use letters, digits, `.`, `_` and `-`, not starting with `-` or `.`"
    )]
    BadName { name: String, problem: &'static str },
    #[error(
        "[bridge.commands.{0}]: {0} is one of the bridge's own shim names; choose another name"
    )]
    Reserved(String),
    #[error("[bridge.commands.{name}]: {field} value {value:?} {problem}")]
    BadValue {
        name: String,
        field: &'static str,
        value: String,
        problem: &'static str,
    },
}

/// The built-in `proximo` entry the seed describes.
pub fn proximo() -> HostCommand {
    HostCommand {
        program: "proximo".into(),
        verbs: ["up", "down", "status", "errors", "skill"]
            .map(String::from)
            .to_vec(),
        refused_flags: ["-o", "--out", "--output"].map(String::from).to_vec(),
        refused: vec![("errors".into(), "dom".into())],
        timeout: DEFAULT_TIMEOUT,
    }
}

impl CommandTable {
    /// The built-in entries, then the configured ones (a configured `proximo` replaces the built-in).
    pub fn from_config(
        entries: &BTreeMap<String, HostCommandEntry>,
    ) -> Result<CommandTable, CommandConfigError> {
        let mut commands = BTreeMap::from([("proximo".to_owned(), proximo())]);
        for (name, entry) in entries {
            commands.insert(name.clone(), convert(name, entry)?);
        }
        Ok(CommandTable { commands })
    }

    /// The shim names these commands get inside a sandbox.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.commands.keys().map(String::as_str)
    }
}

/// Whether `name` can be a command (and so a file name in the shim dir).
pub fn check_name(name: &str) -> Result<(), CommandConfigError> {
    let problem = if name.is_empty() {
        Some("is empty")
    } else if name.len() > 64 {
        Some("is longer than 64 characters")
    } else if name.starts_with(['-', '.']) {
        Some("starts with `-` or `.`")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        Some("has a character other than letters, digits, `.`, `_` and `-`")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(CommandConfigError::BadName {
            name: name.to_owned(),
            problem,
        });
    }
    if SHIM_NAMES.iter().any(|(shim, _)| *shim == name) || name == "airlock" {
        return Err(CommandConfigError::Reserved(name.to_owned()));
    }
    Ok(())
}

fn convert(name: &str, entry: &HostCommandEntry) -> Result<HostCommand, CommandConfigError> {
    check_name(name)?;
    let bad = |field, value: &str, problem| CommandConfigError::BadValue {
        name: name.to_owned(),
        field,
        value: value.to_owned(),
        problem,
    };
    let program = entry.program.clone().unwrap_or_else(|| name.to_owned());
    if program.is_empty() || program.contains('\0') {
        return Err(bad("program", &program, "is empty or has a NUL byte"));
    }
    if program.contains('/') && !program.starts_with('/') {
        return Err(bad("program", &program, "must be absolute or a bare name"));
    }
    if entry.verbs.is_empty() {
        return Err(bad(
            "verbs",
            "[]",
            "is empty; list the verbs the sandbox may run",
        ));
    }
    for verb in &entry.verbs {
        if verb.is_empty() || verb.starts_with('-') {
            return Err(bad("verbs", verb, "must be a non-empty word, not a flag"));
        }
    }
    for flag in &entry.refused_flags {
        let short_ok = flag.len() == 2 && flag.starts_with('-') && flag != "--";
        let long_ok = flag.len() > 2 && flag.starts_with("--") && !flag.contains('=');
        if !short_ok && !long_ok {
            return Err(bad("refused_flags", flag, "must be `-x` or `--word`"));
        }
    }
    let mut refused = Vec::new();
    for pair in &entry.refused {
        match pair.split_whitespace().collect::<Vec<_>>().as_slice() {
            [verb, arg] => refused.push(((*verb).to_owned(), (*arg).to_owned())),
            _ => return Err(bad("refused", pair, "must be `\"verb argument\"`")),
        }
    }
    let timeout = match entry.timeout_secs {
        None => DEFAULT_TIMEOUT,
        Some(0) => return Err(bad("timeout_secs", "0", "must be at least 1")),
        Some(secs) => Duration::from_secs(secs),
    };
    Ok(HostCommand {
        program,
        verbs: entry.verbs.clone(),
        refused_flags: entry.refused_flags.clone(),
        refused,
        timeout,
    })
}

/// Checks one invocation: the first argument is an allowed verb, no refused flag appears anywhere
/// (as `-x`, inside a short cluster like `-jx` or `-x/path`, as `--word` or `--word=value`), and no
/// refused verb/argument pair. Returns the plain reason on refusal.
pub fn check_invocation(command: &HostCommand, args: &[String]) -> Result<(), String> {
    let Some(verb) = args.first() else {
        return Err(format!(
            "no verb given; allowed: {}",
            command.verbs.join(", ")
        ));
    };
    if !command.verbs.contains(verb) {
        return Err(format!(
            "verb {} is not allowed; allowed: {}",
            quote(verb),
            command.verbs.join(", ")
        ));
    }
    for arg in args {
        if let Some(flag) = refused_flag(command, arg) {
            return Err(format!(
                "argument {} uses the refused flag {flag}: it would write to the host; \
                 redirect the output inside the sandbox instead",
                quote(arg)
            ));
        }
    }
    for (refused_verb, refused_arg) in &command.refused {
        if verb == refused_verb && args[1..].iter().any(|a| a == refused_arg) {
            return Err(format!(
                "`{refused_verb} {refused_arg}` is refused: it writes a host file"
            ));
        }
    }
    Ok(())
}

fn refused_flag<'a>(command: &'a HostCommand, arg: &str) -> Option<&'a str> {
    command
        .refused_flags
        .iter()
        .map(String::as_str)
        .find(|flag| {
            if let Some(long) = flag.strip_prefix("--") {
                // getopt_long takes any unambiguous prefix: `--outp` is `--output`.
                arg.strip_prefix("--").is_some_and(|rest| {
                    let name = rest.split_once('=').map_or(rest, |(name, _)| name);
                    !name.is_empty() && long.starts_with(name)
                })
            } else {
                let letter = &flag[1..];
                // A short cluster: `-o`, `-jo`, `-o/tmp/x`. Conservative: any letter after one dash.
                !arg.starts_with("--")
                    && arg.len() > 1
                    && arg.starts_with('-')
                    && arg[1..].contains(letter)
            }
        })
}

/// A value for a reason string: printable, escaped, at most 64 characters.
pub(crate) fn quote(value: &str) -> String {
    crate::audit::clip(value, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn proximo_allows_its_verbs_with_arguments() {
        let p = proximo();
        for ok in [
            &["up"][..],
            &["status", "--json"],
            &["errors", "--since", "5m"],
            &["skill", "list"],
            &["down", "-v"],
        ] {
            assert_eq!(check_invocation(&p, &args(ok)), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn proximo_refusals() {
        let p = proximo();
        for bad in [
            &[][..],
            &["install"],
            &["Up"],
            &["up", "-o/tmp/x"],
            &["up", "-o", "/tmp/x"],
            &["status", "-jo"],
            &["status", "--output=x"],
            &["status", "--out", "x"],
            &["status", "--output"],
            &["status", "--outp", "x"],
            &["status", "--ou=x"],
            &["status", "--o"],
            &["errors", "dom"],
            &["errors", "--since", "1m", "dom"],
        ] {
            assert!(check_invocation(&p, &args(bad)).is_err(), "{bad:?}");
        }
        // Words that merely contain a refused flag's name are arguments, not flags.
        assert_eq!(
            check_invocation(&p, &args(&["status", "--outline"])),
            Ok(())
        );
        assert_eq!(check_invocation(&p, &args(&["status", "output"])), Ok(()));
    }

    #[test]
    fn configured_entries_are_checked() {
        let entry = |verbs: &[&str]| HostCommandEntry {
            verbs: args(verbs),
            ..HostCommandEntry::default()
        };
        let table =
            CommandTable::from_config(&BTreeMap::from([("mytool".into(), entry(&["logs"]))]))
                .unwrap();
        assert_eq!(table.names().collect::<Vec<_>>(), ["mytool", "proximo"]);
        for (name, e) in [
            ("xdg-open", entry(&["x"])),
            ("../x", entry(&["x"])),
            ("-x", entry(&["x"])),
            ("ok", entry(&[])),
            ("ok", entry(&["--flag"])),
            (
                "ok",
                HostCommandEntry {
                    refused_flags: args(&["o"]),
                    ..entry(&["x"])
                },
            ),
            (
                "ok",
                HostCommandEntry {
                    program: Some("rel/path".into()),
                    ..entry(&["x"])
                },
            ),
            (
                "ok",
                HostCommandEntry {
                    timeout_secs: Some(0),
                    ..entry(&["x"])
                },
            ),
        ] {
            let err = CommandTable::from_config(&BTreeMap::from([(name.to_owned(), e)]));
            assert!(err.is_err(), "{name}");
        }
    }
}
