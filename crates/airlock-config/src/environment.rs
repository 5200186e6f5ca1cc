//! `[sandbox.environment.<NAME>]`: variables set in the sandbox from a literal, a host variable or a
//! file's contents.
//!
//! This module parses, checks and layers the tables, renders them for `airlock config show` and
//! reads the `file` sources at launch ([`read_files`]). The spec builder in `airlock-sandbox` puts
//! the values into the sandbox's environment and refuses the names airlock sets itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::AsFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{ConfigError, ConfigFile, Profile, XdgPaths, hostfs};

/// The most a `file` source may hold: an environment value, not a document.
pub const ENV_FILE_BYTES: u64 = 64 * 1024;

/// One `[sandbox.environment.<NAME>]` table as written: exactly one of the three keys (checked by
/// [`ConfigFile::validate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentEntry {
    /// `value = "..."`: the text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `env = "HOST_VAR"`: the host's variable of that name, read at launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// `file = "path"`: the file's contents at launch, one trailing newline removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl EnvironmentEntry {
    /// The one source the entry names; `None` when it names none or several.
    pub fn source(&self) -> Option<EnvSource> {
        match (&self.value, &self.env, &self.file) {
            (Some(v), None, None) => Some(EnvSource::Value(v.clone())),
            (None, Some(v), None) => Some(EnvSource::Env(v.clone())),
            (None, None, Some(v)) => Some(EnvSource::File(v.clone())),
            _ => None,
        }
    }

    fn keys_set(&self) -> Vec<&'static str> {
        [
            ("value", self.value.is_some()),
            ("env", self.env.is_some()),
            ("file", self.file.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect()
    }
}

/// Where a sandbox variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvSource {
    /// `value`: the text itself.
    Value(String),
    /// `env`: the named host variable.
    Env(String),
    /// `file`: a path as written (`~/`, absolute, or relative to the file that declared it).
    File(String),
}

impl EnvSource {
    /// The key as spelled in the files.
    pub fn key(&self) -> &'static str {
        match self {
            EnvSource::Value(_) => "value",
            EnvSource::Env(_) => "env",
            EnvSource::File(_) => "file",
        }
    }

    /// The value of the key as written.
    pub fn text(&self) -> &str {
        match self {
            EnvSource::Value(s) | EnvSource::Env(s) | EnvSource::File(s) => s,
        }
    }
}

/// One layered `[sandbox.environment.<NAME>]` entry with the file that set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentVar {
    pub source: EnvSource,
    pub origin: PathBuf,
}

impl EnvironmentVar {
    /// The host path of a `file` source: `~` is the home, a relative path starts at the directory
    /// of the file that declared it; `.` and `..` are resolved lexically.
    pub fn file_path(&self, paths: &XdgPaths) -> Option<PathBuf> {
        let EnvSource::File(written) = &self.source else {
            return None;
        };
        let expanded = paths.expand_tilde(written);
        let path = if expanded.is_absolute() {
            expanded
        } else {
            self.origin
                .parent()
                .unwrap_or(Path::new("/"))
                .join(expanded)
        };
        Some(normalize(&path))
    }
}

/// `[sandbox.environment]` after layering: NAME → entry (the later file's entry wins).
pub type EnvironmentMap = BTreeMap<String, EnvironmentVar>;

/// Why `name` is not a portable environment variable name (`[A-Za-z_][A-Za-z0-9_]*`), if it is not.
pub fn env_var_name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(c) if c.is_ascii_digit() => Some("it starts with a digit"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            Some("only letters, digits and `_` are allowed")
        }
        _ if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => None,
        _ => Some("only letters, digits and `_` are allowed"),
    }
}

/// The table header of `name`, quoted as TOML needs (`[sandbox.environment."bad name"]`).
pub fn table_name(name: &str) -> String {
    format!("[sandbox.environment.{}]", crate::template::key(name))
}

/// Checks one file's entries: each NAME, exactly one source, a usable host variable name or path,
/// and no NAME the same file also lists in `env_passthrough`.
pub(crate) fn validate(file: &ConfigFile, origin: &Path) -> Result<(), ConfigError> {
    for (name, entry) in &file.sandbox.environment {
        if let Some(reason) = env_var_name_problem(name) {
            return Err(ConfigError::EnvironmentName {
                path: origin.to_path_buf(),
                key: table_name(name),
                name: name.clone(),
                reason,
            });
        }
        let problem = |problem: String| ConfigError::EnvironmentSource {
            path: origin.to_path_buf(),
            key: table_name(name),
            problem,
        };
        let Some(source) = entry.source() else {
            let set = entry.keys_set();
            return Err(problem(if set.is_empty() {
                "sets none of `value`, `env` and `file`".to_owned()
            } else {
                format!("sets both `{}`", set.join("` and `"))
            }));
        };
        match &source {
            EnvSource::Value(v) if v.contains('\0') => {
                return Err(problem(
                    "`value` contains a NUL byte, which no environment value can hold".to_owned(),
                ));
            }
            EnvSource::Env(var) => {
                if let Some(reason) = env_var_name_problem(var) {
                    return Err(problem(format!(
                        "env = {var:?} is not a valid host variable name ({reason})"
                    )));
                }
            }
            EnvSource::File(path) if path.is_empty() || path.contains('\0') => {
                return Err(problem(format!(
                    "file = {path:?} names no file ({})",
                    if path.is_empty() {
                        "it is empty"
                    } else {
                        "it contains a NUL byte"
                    }
                )));
            }
            _ => {}
        }
    }
    check_passthrough(&[(origin, file)])
}

/// A NAME that one layer sets in `[sandbox.environment]` and one lists in `env_passthrough`: the
/// two would fight over the value, so neither file is taken to win.
pub(crate) fn check_passthrough(layers: &[(&Path, &ConfigFile)]) -> Result<(), ConfigError> {
    for (environment, file) in layers {
        for name in file.sandbox.environment.keys() {
            let passthrough = layers
                .iter()
                .find(|(_, f)| f.sandbox.env_passthrough.contains(name));
            if let Some((passthrough, _)) = passthrough {
                return Err(ConfigError::EnvironmentPassthrough {
                    name: name.clone(),
                    key: table_name(name),
                    environment: environment.to_path_buf(),
                    passthrough: passthrough.to_path_buf(),
                });
            }
        }
    }
    Ok(())
}

/// Layers one file's entries over `into`: an entry replaces the earlier file's entry of that NAME.
pub(crate) fn layer(
    into: &mut EnvironmentMap,
    origin: &Path,
    entries: &BTreeMap<String, EnvironmentEntry>,
) {
    for (name, entry) in entries {
        if let Some(source) = entry.source() {
            let origin = origin.to_path_buf();
            into.insert(name.clone(), EnvironmentVar { source, origin });
        }
    }
}

/// One warning per `env` source whose host variable `is_set` says is missing: the variable is then
/// not set in the sandbox, and the launch goes on.
pub fn missing_host_variables(profile: &Profile, is_set: impl Fn(&str) -> bool) -> Vec<String> {
    profile
        .environment
        .iter()
        .filter_map(|(name, var)| match &var.source {
            EnvSource::Env(host) if !is_set(host) => Some(format!(
                "{}: {} env = {host:?}: the host has no {host} (or it is not UTF-8), so {name} is \
                 not set in the sandbox; export {host} before running airlock, or remove the entry",
                var.origin.display(),
                table_name(name),
            )),
            _ => None,
        })
        .collect()
}

/// The `[sandbox.environment]` tables of `config show`; each notes the file it came from. Only a
/// `value` is shown as it is: the others name a variable or a path, never what they hold.
pub(crate) fn render(out: &mut String, map: &EnvironmentMap) {
    for (name, var) in map {
        // Writing to a String cannot fail. `{:?}` escapes newlines, so a hostile file name cannot
        // end the comment.
        let _ = writeln!(out, "\n# from {:?}", var.origin);
        let _ = writeln!(out, "{}", table_name(name));
        let _ = writeln!(
            out,
            "{} = {}",
            var.source.key(),
            crate::template::quote(var.source.text())
        );
    }
}

/// A `file` source read at launch: the host path and its contents or why they cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileValue {
    /// The host path (after `~` and relative-path resolution).
    pub path: PathBuf,
    /// The value (one trailing newline removed), or why the file cannot be used (never its bytes).
    pub value: Result<String, String>,
}

/// Reads every `file` source of `profile` for a launch in `project`: NAME → what was read.
pub fn read_files(
    profile: &Profile,
    paths: &XdgPaths,
    project: &Path,
) -> BTreeMap<String, FileValue> {
    profile
        .environment
        .iter()
        .filter_map(|(name, var)| {
            let path = var.file_path(paths)?;
            let value = read_file_value(&path, project);
            Some((name.clone(), FileValue { path, value }))
        })
        .collect()
}

/// The value held by the file at `path` (absolute, lexically normal): a regular file of at most
/// [`ENV_FILE_BYTES`] of UTF-8 without NUL, one trailing newline removed.
///
/// Inside `project`, which the sandbox can write, no symlink is followed at all: a link planted
/// there must not make airlock read one of the user's files into the sandbox. Elsewhere symlinks
/// are followed (the user's own files, as for the global config). FIFOs never block the launch.
pub fn read_file_value(path: &Path, project: &Path) -> Result<String, String> {
    let opened = match path.strip_prefix(project) {
        Ok(rel) if !rel.as_os_str().is_empty() => File::open(project).and_then(|dir| {
            hostfs::open_beneath(dir.as_fd(), rel, libc::O_RDONLY | libc::O_NONBLOCK)
                .map(File::from)
        }),
        _ => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path),
    };
    let file = opened.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => "it does not exist".to_owned(),
        Some(libc::ELOOP | libc::EXDEV) => format!(
            "it is reached through a symlink inside the project {}, which the sandbox can write; \
             airlock follows no symlink there, so name the file's real path",
            project.display()
        ),
        Some(libc::EACCES) => "it cannot be read (permission denied)".to_owned(),
        _ => format!("it cannot be opened ({e})"),
    })?;
    let kind = hostfs::kind(file.as_fd()).map_err(|e| format!("it cannot be examined ({e})"))?;
    if kind != hostfs::Kind::File {
        return Err(format!(
            "it is {}, not a regular file",
            hostfs::describe(kind)
        ));
    }
    let mut bytes = Vec::new();
    file.take(ENV_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e: io::Error| format!("it cannot be read ({e})"))?;
    if bytes.len() as u64 > ENV_FILE_BYTES {
        return Err(format!(
            "it is larger than {ENV_FILE_BYTES} bytes (64 KiB), the most a value read from a file may be"
        ));
    }
    let mut text = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
    if text.contains('\0') {
        return Err("it contains a NUL byte, which no environment value can hold".to_owned());
    }
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// `path` with `.` removed and `..` applied to the part before it, without touching the disk.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
