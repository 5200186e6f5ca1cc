//! The host's global git config read without starting git, when it is plain.
//!
//! Starting the host's git (`git config --global --includes --list`) is the one host process a
//! launch waits for (~1.5 ms here). Most global configs are a handful of sections and keys with no
//! includes, so airlock reads those itself, with git's syntax: sections (`[name]`,
//! `[name "sub"]`, `[name.sub]`), keys (`name = value`, or `name` alone for true), values with
//! quotes, the escapes `\\ \" \n \t \b`, a backslash continuing the line, `#` and `;` comments, and
//! blanks as git keeps them (dropped at the ends, kept inside; an unquoted tab inside is left to
//! git, whose versions differ there). Any
//! include (`[include]`, `[includeIf …]`) or anything this reader does not take exactly (a CR, a
//! byte-order mark, a key after a section header on the same line, an unknown escape, a file it
//! cannot read as a regular file) gives `None`, and the caller asks git, which stays the
//! reference. `tests` checks the two agree on a corpus of configs with the real git.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::host::HostView;

/// A global config file larger than this is left to git.
const MAX_FILE: u64 = 1 << 20;

/// The file `git config --global --list` reads: `$GIT_CONFIG_GLOBAL` when set, else
/// `~/.gitconfig` when it exists, else the XDG file (git reads one of the two for `--global`, not
/// both). `Ok(None)`: no file; `Err(())`: git must decide.
fn global_file(host: &HostView) -> Result<Option<PathBuf>, ()> {
    if let Some(global) = host.env.get("GIT_CONFIG_GLOBAL") {
        // Empty or relative: git's own rules (relative to its working directory).
        let path = Path::new(global);
        return if path.is_absolute() {
            Ok(Some(path.to_owned()))
        } else {
            Err(())
        };
    }
    let home_file = host.home.join(".gitconfig");
    match std::fs::symlink_metadata(&home_file) {
        Ok(_) => return Ok(Some(home_file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return Err(()),
    }
    let xdg = match host.var("XDG_CONFIG_HOME") {
        Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
        Some(_) => return Err(()),
        None => host.home.join(".config"),
    };
    Ok(Some(xdg.join("git/config")))
}

/// The global config as `git config --global --includes --list` gives it (keys lower-cased but
/// for subsections, the last value per key), or `None` when it is not plain.
pub(crate) fn read(host: &HostView) -> Option<BTreeMap<String, String>> {
    let mut values = BTreeMap::new();
    let Some(file) = global_file(host).ok()? else {
        return Some(values);
    };
    let bytes = match airlock_config::hostfs::read_regular_following(&file, MAX_FILE) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(values),
        Err(_) => return None,
    };
    parse(std::str::from_utf8(&bytes).ok()?, &mut values)?;
    Some(values)
}

/// Adds the entries of one config file to `values`; `None` when the text is not plain.
fn parse(text: &str, values: &mut BTreeMap<String, String>) -> Option<()> {
    if text.contains(['\r', '\0', '\u{b}', '\u{c}', '\u{feff}']) {
        return None;
    }
    let mut section: Option<String> = None;
    let mut lines = text.split('\n');
    while let Some(line) = lines.next() {
        let line = line.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            section = Some(parse_header(header)?);
            continue;
        }
        let section = section.as_deref()?;
        let name_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(line.len());
        let name = &line[..name_end];
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return None;
        }
        let rest = line[name_end..].trim_start_matches([' ', '\t']);
        let value = if rest.is_empty() {
            "true".to_owned()
        } else {
            parse_value(rest.strip_prefix('=')?, &mut lines)?
        };
        values.insert(format!("{section}.{}", name.to_ascii_lowercase()), value);
    }
    Some(())
}

/// `name]`, `name "sub"]` or `name.sub]` (the rest of a `[` line) as git names the section in
/// `--list`; `None` for an include or anything else on the line.
fn parse_header(header: &str) -> Option<String> {
    let (inside, after) = header.split_once(']')?;
    let after = after.trim_start_matches([' ', '\t']);
    if !(after.is_empty() || after.starts_with(['#', ';'])) {
        return None;
    }
    let (name, sub) = match inside.split_once(' ') {
        Some((name, quoted)) => {
            let sub = quoted.strip_prefix('"')?.strip_suffix('"')?;
            if sub.contains(['"', '\\']) {
                return None;
            }
            (name, Some(sub.to_owned()))
        }
        None => match inside.split_once('.') {
            Some((name, sub)) => (name, Some(sub.to_ascii_lowercase())),
            None => (inside, None),
        },
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    };
    if !valid(name) || sub.as_deref().is_some_and(|s| s.is_empty()) {
        return None;
    }
    let name = name.to_ascii_lowercase();
    if name == "include" || name == "includeif" {
        return None;
    }
    Some(match sub {
        Some(sub) => format!("{name}.{sub}"),
        None => name,
    })
}

/// A value after its `=`, continued over the next lines by a trailing backslash.
fn parse_value<'a>(first: &'a str, lines: &mut impl Iterator<Item = &'a str>) -> Option<String> {
    let mut value = String::new();
    // Blanks after text, kept only when more text follows (git drops them at the end).
    let mut blanks = String::new();
    let mut quoted = false;
    let mut line = first.chars();
    loop {
        let Some(c) = line.next() else {
            // End of line: a quote left open is an error git reports.
            return (!quoted).then_some(value);
        };
        match c {
            ' ' | '\t' if !quoted => {
                if !value.is_empty() {
                    blanks.push(c);
                }
            }
            '#' | ';' if !quoted => return (!quoted).then_some(value),
            _ => {
                // A tab inside a value: older gits (2.39) turn it into a space, newer ones (2.47)
                // keep it, so which git the host has decides.
                if blanks.contains('\t') {
                    return None;
                }
                value.push_str(&blanks);
                blanks.clear();
                match c {
                    '"' => quoted = !quoted,
                    '\\' => match line.next() {
                        None => line = lines.next()?.chars(),
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        Some('t') => value.push('\t'),
                        Some('b') => value.push('\u{8}'),
                        Some(_) => return None,
                    },
                    c => value.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
