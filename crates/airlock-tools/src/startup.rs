//! What the user's shell startup files use that the sandbox does not have: a file they source under
//! the home (`. ~/.sdkman/bin/sdkman-init.sh`) or a program they run under the home
//! (`eval "$(pyenv init -)"`), neither mounted nor guarded (`[ -f … ]`, `command -v …`). Inside, each
//! prints an error at every shell start ("No such file", "command not found"); airlock names them
//! once, with the key that adds them.
//!
//! A reading of the common forms, not a shell: lines are split at `;`, `&&`, `||` and `|`, quotes
//! are dropped, and `~`, `$HOME` and variables assigned earlier in the file (or set on the host) are
//! expanded. Anything else (a sourced path built by a command, a function) is left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::host::HostView;

/// Startup files read at the start of an interactive shell, by the shell's file name.
fn startup_files(view: &HostView, shell: &str) -> Vec<PathBuf> {
    match shell {
        "bash" => vec![view.home_path(".bashrc")],
        "zsh" => {
            let dir = view
                .path_var("ZDOTDIR")
                .unwrap_or_else(|| view.home_path(""));
            vec![dir.join(".zshenv"), dir.join(".zshrc")]
        }
        "fish" => vec![view.xdg_config().join("fish/config.fish")],
        _ => Vec::new(),
    }
}

/// What one file uses: paths it sources, programs whose output it evaluates, and what it tests
/// for first.
#[derive(Default, Debug, PartialEq, Eq)]
struct Uses {
    sourced: Vec<String>,
    evaluated: Vec<String>,
    guarded: BTreeSet<String>,
}

fn unquote(token: &str) -> &str {
    token.trim_matches(|c| c == '"' || c == '\'')
}

/// Expands `~/`, `$NAME` and `${NAME}` from `vars`; `None` when a variable is unknown.
fn expand(word: &str, vars: &BTreeMap<String, String>) -> Option<String> {
    let word = match word.strip_prefix("~/") {
        Some(rest) => format!("${{HOME}}/{rest}"),
        None => word.to_owned(),
    };
    let mut out = String::new();
    let mut rest = word.as_str();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        let (name, after) = match rest.strip_prefix('{') {
            Some(braced) => braced.split_once('}')?,
            None => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        out.push_str(vars.get(name)?);
        rest = after;
    }
    out.push_str(rest);
    Some(out)
}

fn read_uses(text: &str, vars: &mut BTreeMap<String, String>) -> Uses {
    let mut uses = Uses::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let line = line.split(" #").next().unwrap_or(line);
        let line = line.replace("&&", ";").replace("||", ";").replace('|', ";");
        for command in line.split(';') {
            read_command(command, vars, &mut uses);
        }
    }
    uses
}

fn read_command(command: &str, vars: &mut BTreeMap<String, String>, uses: &mut Uses) {
    let mut tokens: Vec<&str> = command.split_whitespace().collect();
    // `if …; then . x; fi`: the command after a keyword.
    let keywords = ["then", "else", "do", "if", "elif", "!", "{", "("];
    let lead = tokens.iter().take_while(|t| keywords.contains(t)).count();
    tokens.drain(..lead);
    let mut words = tokens.iter().map(|t| unquote(t));
    let Some(first) = words.next() else {
        return;
    };
    let first = first.trim_start_matches(['(', '[', '{']);
    match first {
        "source" | "." | "\\." => {
            if let Some(path) = words.next().and_then(|w| expand(w, vars))
                && !path.contains("$(")
                && !path.starts_with('<')
            {
                uses.sourced.push(path);
            }
        }
        "eval" => {
            let rest = tokens[1..].join(" ");
            let inner = rest.trim_start_matches('"').trim_start_matches('\'');
            if let Some(program) = inner
                .strip_prefix("$(")
                .and_then(|p| p.split_whitespace().next())
                .map(|p| p.trim_end_matches(')'))
                .and_then(|p| expand(p, vars))
            {
                uses.evaluated.push(program);
            }
        }
        "export" | "set" => {
            for w in words {
                assign(w, vars);
            }
        }
        _ => {
            if first.contains('=') {
                assign(first, vars);
            }
        }
    }
    // Guards anywhere: `[ -f X ]`, `test -s X`, `command -v NAME`, `type NAME`, zsh's
    // `$+commands[NAME]`.
    let plain: Vec<&str> = tokens.iter().map(|t| unquote(t)).collect();
    for pair in plain.windows(2) {
        match pair[0] {
            "-f" | "-e" | "-r" | "-s" | "-x" | "-d" => {
                if let Some(path) = expand(pair[1], vars) {
                    uses.guarded.insert(path);
                }
            }
            "-v" | "type" | "which" | "hash" => {
                uses.guarded.insert(pair[1].to_owned());
            }
            _ => {}
        }
    }
    for token in &plain {
        if let Some(name) = token
            .split("commands[")
            .nth(1)
            .and_then(|r| r.split(']').next())
        {
            uses.guarded.insert(name.to_owned());
        }
    }
}

fn assign(word: &str, vars: &mut BTreeMap<String, String>) {
    if let Some((name, value)) = word.split_once('=')
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && let Some(value) = expand(unquote(value), vars)
    {
        vars.insert(name.to_owned(), value);
    }
}

/// One line naming what the startup files of `shell` use under the home that `visible` says the
/// sandbox lacks; `None` when nothing is missing.
pub fn missing(view: &HostView, shell: &Path, visible: &dyn Fn(&Path) -> bool) -> Option<String> {
    let name = shell.file_name()?.to_str()?;
    let home = view.home_path("");
    let mut vars: BTreeMap<String, String> =
        ["HOME", "ZDOTDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME"]
            .iter()
            .filter_map(|k| view.var(k).map(|v| ((*k).to_owned(), v.to_owned())))
            .collect();
    vars.insert(
        "HOME".into(),
        home.to_string_lossy().trim_end_matches('/').to_owned(),
    );
    let mut files = Vec::new();
    let mut lacking = Vec::new();
    for file in startup_files(view, name) {
        // The user's own files, often links into a dotfiles checkout (which may be a project a
        // sandbox writes): followed, but never blocking on a FIFO or device, and capped.
        let Ok(bytes) = airlock_config::hostfs::read_regular_following(&file, 1 << 20) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let uses = read_uses(&text, &mut vars);
        let before = lacking.len();
        for path in &uses.sourced {
            let p = Path::new(path);
            if p.starts_with(&home) && p.exists() && !uses.guarded.contains(path) && !visible(p) {
                lacking.push(view.tilde(p));
            }
        }
        for program in &uses.evaluated {
            if uses.guarded.contains(program) {
                continue;
            }
            let found = if program.contains('/') {
                Some(PathBuf::from(program))
            } else {
                view.find_binary(program)
            };
            if let Some(found) = found.filter(|f| f.starts_with(&home) && !visible(f)) {
                let base = Path::new(program)
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
                lacking.push(format!("{base} ({})", view.tilde(&found)));
            }
        }
        if lacking.len() > before {
            files.push(view.tilde(&file));
        }
    }
    if lacking.is_empty() {
        return None;
    }
    lacking.dedup();
    let verb = if files.len() == 1 { "uses" } else { "use" };
    Some(format!(
        "{} {verb} what this sandbox does not have: {}; each shell start inside prints an error for \
         it. Add it with a [[sandbox.mounts]] entry in airlock's config, or guard the line \
         (`[ -f … ] && . …`, `command -v … >/dev/null && eval …`)",
        files.join(" and "),
        lacking.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(text: &str) -> Uses {
        let mut vars = BTreeMap::from([("HOME".to_owned(), "/h".to_owned())]);
        read_uses(text, &mut vars)
    }

    #[test]
    fn sourced_files_programs_and_guards_are_read_in_their_common_forms() {
        let u = uses(
            "# a comment: . ~/.ignored\n\
             . \"$HOME/.cargo/env\"\n\
             source ~/.sdkman/bin/sdkman-init.sh # init\n\
             export NVM_DIR=\"$HOME/.nvm\"\n\
             [ -s \"$NVM_DIR/nvm.sh\" ] && \\. \"$NVM_DIR/nvm.sh\"\n\
             eval \"$(pyenv init -)\"\n\
             command -v zoxide >/dev/null && eval \"$(zoxide init bash)\"\n\
             eval \"$(~/.local/bin/mise activate bash)\"\n\
             . \"$UNKNOWN/x.sh\"\n\
             . <(kubectl completion bash)\n",
        );
        assert_eq!(
            u.sourced,
            vec![
                "/h/.cargo/env",
                "/h/.sdkman/bin/sdkman-init.sh",
                "/h/.nvm/nvm.sh",
            ]
        );
        assert_eq!(u.evaluated, vec!["pyenv", "zoxide", "/h/.local/bin/mise"]);
        assert!(u.guarded.contains("/h/.nvm/nvm.sh"));
        assert!(u.guarded.contains("zoxide"));
        assert!(!u.guarded.contains("pyenv"));
    }

    #[test]
    fn a_startup_file_that_is_a_fifo_is_skipped_without_blocking() {
        let home = tempfile::tempdir().unwrap();
        let rc = home.path().join(".bashrc");
        let c = std::ffi::CString::new(rc.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a fresh path in a temp dir.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let view = HostView::new(home.path(), BTreeMap::new());
        // Opening a FIFO for reading would wait for a writer; this returns at once.
        assert_eq!(missing(&view, Path::new("/bin/bash"), &|_| false), None);
    }

    #[test]
    fn zsh_command_checks_guard_too() {
        let u = uses("if (( $+commands[direnv] )); then eval \"$(direnv hook zsh)\"; fi\n");
        assert!(u.guarded.contains("direnv"), "{u:?}");
        assert_eq!(
            u.evaluated,
            vec!["direnv"],
            "the command after `then` is read"
        );
    }
}
