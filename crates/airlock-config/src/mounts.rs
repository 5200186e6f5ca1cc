//! `[[sandbox.mounts]]` entries: what one names (a host path or a glob of them), the checks the
//! TOML types alone cannot make, and how an entry is named in messages and in the sandbox spec.
//!
//! Globs are only checked here; they are expanded at launch, on the host, by `airlock-sandbox`.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{ConfigError, MountEntry, ProfileMount};

/// What one `[[sandbox.mounts]]` entry names: `path = "…"` or `pattern = "…"`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountSelector {
    /// One host path, absolute or `~/…`, mounted at the same path inside.
    Path(String),
    /// A glob expanded at launch: relative to the project, `~/…` under the home, or absolute.
    /// Each match is mounted on its own; a trailing `/` matches directories only.
    Pattern(String),
}

impl MountSelector {
    /// The TOML key that names it (`path` or `pattern`).
    pub fn key(&self) -> &'static str {
        match self {
            MountSelector::Path(_) => "path",
            MountSelector::Pattern(_) => "pattern",
        }
    }

    /// The path or the glob, as written.
    pub fn value(&self) -> &str {
        match self {
            MountSelector::Path(s) | MountSelector::Pattern(s) => s,
        }
    }
}

impl MountEntry {
    /// The entry's path or pattern; None when it gives neither or both (which
    /// [`ConfigFile::validate`](crate::ConfigFile::validate) refuses).
    pub fn selector(&self) -> Option<MountSelector> {
        match (&self.path, &self.pattern) {
            (Some(path), None) => Some(MountSelector::Path(path.clone())),
            (None, Some(pattern)) => Some(MountSelector::Pattern(pattern.clone())),
            _ => None,
        }
    }
}

impl ProfileMount {
    /// The entry as messages and the spec name it:
    /// `<file>: [[sandbox.mounts]] #2 (pattern = "**/*.key", mode = "hidden")`.
    pub fn label(&self) -> EntryLabel<'_> {
        EntryLabel(self)
    }
}

/// [`ProfileMount::label`]: the file, the entry's number in it, its path or pattern and its mode.
pub struct EntryLabel<'a>(&'a ProfileMount);

impl fmt::Display for EntryLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        // `{:?}` quotes and escapes, so a hostile glob cannot forge the rest of a message.
        write!(
            f,
            "{}: [[sandbox.mounts]] #{} ({} = {:?}, mode = {:?})",
            m.origin.display(),
            m.entry,
            m.selector.key(),
            m.selector.value(),
            m.mode.as_str()
        )
    }
}

/// Checks each entry of one file: exactly one of `path` and `pattern`, and a usable value.
pub(crate) fn check(origin: &Path, entries: &[MountEntry]) -> Result<(), ConfigError> {
    for (n, entry) in entries.iter().enumerate() {
        let file = || origin.to_path_buf();
        match (&entry.path, &entry.pattern) {
            (None, None) => {
                return Err(ConfigError::MountNeitherPathNorPattern {
                    path: file(),
                    entry: n + 1,
                });
            }
            (Some(path), Some(pattern)) => {
                return Err(ConfigError::MountPathAndPattern {
                    path: file(),
                    entry: n + 1,
                    mount_path: path.clone(),
                    pattern: pattern.clone(),
                });
            }
            (Some(path), None) => {
                if let Some(reason) = path_problem(path) {
                    return Err(ConfigError::MountPath {
                        path: file(),
                        value: path.clone(),
                        reason,
                    });
                }
            }
            (None, Some(pattern)) => {
                if let Some(reason) = mount_pattern_problem(pattern) {
                    return Err(ConfigError::MountPattern {
                        path: file(),
                        value: pattern.clone(),
                        reason,
                    });
                }
            }
        }
    }
    Ok(())
}

fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        Some("it is empty")
    } else if path.contains('\0') {
        Some("it contains a NUL byte")
    } else {
        None
    }
}

/// Why `pattern` cannot be a `[[sandbox.mounts]]` glob, if it cannot.
pub fn mount_pattern_problem(pattern: &str) -> Option<String> {
    if pattern.contains('\0') {
        return Some("it contains a NUL byte".into());
    }
    if pattern.starts_with('~') && !pattern.starts_with("~/") {
        return Some("only a leading `~/` means the home (`~user` is not supported)".into());
    }
    let body = pattern
        .strip_prefix("~/")
        .or_else(|| pattern.strip_prefix('/'))
        .unwrap_or(pattern);
    // A trailing `/` asks for directories only; it is not a path part.
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Some("it names no file".into());
    }
    if body
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some("a path part is empty, `.` or `..`".into());
    }
    glob::Pattern::new(body).err().map(|e| e.msg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MountMode, parse_str};

    fn parse_err(text: &str) -> String {
        parse_str(text, Path::new("/proj/.airlock.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_entry_gives_exactly_one_of_path_and_pattern() {
        let both = parse_err(
            "[[sandbox.mounts]]\npath = \"~/a\"\nmode = \"readonly\"\n\
             [[sandbox.mounts]]\npath = \"~/x\"\npattern = \"**/*.key\"\nmode = \"hidden\"\n",
        );
        assert_eq!(
            both,
            "/proj/.airlock.toml: [[sandbox.mounts]] #2 gives both path \"~/x\" and pattern \
             \"**/*.key\"; keep one: an entry mounts one host path or each match of one glob"
        );
        let neither = parse_err("[[sandbox.mounts]]\nmode = \"hidden\"\n");
        assert_eq!(
            neither,
            "/proj/.airlock.toml: [[sandbox.mounts]] #1 gives neither path nor pattern; add \
             path = \"~/dir\" for one host path or pattern = \"**/*.key\" for each match of a glob"
        );
    }

    #[test]
    fn bad_patterns_are_errors_naming_file_and_value() {
        for (bad, why) in [
            ("", "names no file"),
            ("~/", "names no file"),
            ("/", "names no file"),
            ("~root/x", "only a leading `~/`"),
            ("a/../b", "`..`"),
            ("a//b", "empty"),
            ("./*.key", "`.`"),
            ("[oops", "invalid range pattern"),
            ("a**", "recursive wildcards"),
            ("a\0b", "NUL"),
        ] {
            let text = format!(
                "[[sandbox.mounts]]\npattern = {}\nmode = \"hidden\"\n",
                toml::Value::from(bad)
            );
            let msg = parse_err(&text);
            assert!(
                msg.starts_with(&format!(
                    "/proj/.airlock.toml: [[sandbox.mounts]] pattern {bad:?} is not usable ("
                )),
                "{bad}: {msg}"
            );
            assert!(msg.contains(why), "{bad}: {msg}");
        }
    }

    #[test]
    fn good_patterns_and_every_mode_parse() {
        let cfg = parse_str(
            "[[sandbox.mounts]]\npattern = \"**/*.key\"\nmode = \"hidden\"\n\
             [[sandbox.mounts]]\npattern = \"~/.config/*/token\"\nmode = \"readonly\"\n\
             [[sandbox.mounts]]\npattern = \"/srv/data/[ab]?/\"\nmode = \"tmpfs\"\n\
             [[sandbox.mounts]]\npath = \"~/cache\"\nmode = \"overlay\"\n\
             [[sandbox.mounts]]\npattern = \"build/*\"\nmode = \"tmpoverlay\"\n",
            Path::new("/c.toml"),
        )
        .unwrap();
        let got: Vec<(Option<MountSelector>, MountMode)> = cfg
            .sandbox
            .mounts
            .iter()
            .map(|m| (m.selector(), m.mode))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Some(MountSelector::Pattern("**/*.key".into())),
                    MountMode::Hidden
                ),
                (
                    Some(MountSelector::Pattern("~/.config/*/token".into())),
                    MountMode::Readonly
                ),
                (
                    Some(MountSelector::Pattern("/srv/data/[ab]?/".into())),
                    MountMode::Tmpfs
                ),
                (
                    Some(MountSelector::Path("~/cache".into())),
                    MountMode::Overlay
                ),
                (
                    Some(MountSelector::Pattern("build/*".into())),
                    MountMode::Tmpoverlay
                ),
            ]
        );
    }

    #[test]
    fn the_label_names_file_number_and_selector() {
        let m = ProfileMount {
            selector: MountSelector::Pattern("**/*.key\"\n".into()),
            mode: MountMode::Hidden,
            origin: "/home/u/.config/airlock/config.toml".into(),
            entry: 2,
        };
        assert_eq!(
            m.label().to_string(),
            "/home/u/.config/airlock/config.toml: [[sandbox.mounts]] #2 \
             (pattern = \"**/*.key\\\"\\n\", mode = \"hidden\")"
        );
    }
}
