//! `[[include]]`: more config files of the user's, each loaded when the project's path matches a
//! glob. Honoured in the global config only, and one level deep.
//!
//! A matching include is a layer between the global file and the project's `.airlock.toml`, in
//! the order the entries appear. Included files are the user's own, like the global file: they are
//! not pinned by `airlock trust`, so one may not live where a sandbox can write.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::load::{parse_bytes, read_optional};
use crate::{ConfigError, ConfigFile, XdgPaths};

/// The one condition form, as the error messages spell it.
const DIR_FORM: &str = "if = \"dir:<glob>\" (e.g. if = \"dir:~/work/**\")";

/// One `[[include]]` entry as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncludeEntry {
    /// `if = "dir:<glob>"`: the glob the project's path must match (`~/` is the home, `*` stays
    /// within one path part, `**` matches any depth).
    #[serde(rename = "if")]
    pub condition: String,
    /// The file to load: absolute, `~/...`, or relative to the global config's directory.
    pub path: String,
}

impl IncludeEntry {
    /// The glob of a `dir:` condition, or why the condition is not one.
    fn glob(&self) -> Result<&str, String> {
        let Some(glob) = self.condition.strip_prefix("dir:") else {
            return Err(match self.condition.split_once(':') {
                Some((kind, _)) => format!("`{kind}:` is not a condition airlock knows"),
                None => "it has no `dir:` prefix".to_owned(),
            });
        };
        if glob.is_empty() {
            return Err("the glob after `dir:` is empty".to_owned());
        }
        if !(glob.starts_with('/') || glob == "~" || glob.starts_with("~/")) {
            return Err(
                "the glob must be an absolute path or start with `~/`, as it is matched \
                 against the project's absolute path"
                    .to_owned(),
            );
        }
        Ok(glob)
    }

    /// Whether the project at `project` (canonical) matches, with `~` as any of `homes`.
    pub fn matches(&self, project: &Path, homes: &[&Path]) -> bool {
        let Ok(glob) = self.glob() else {
            return false;
        };
        homes
            .iter()
            .filter_map(|home| matcher(glob, home).ok())
            .any(|m| m.is_match(project))
    }

    /// The host path of the included file.
    pub fn file(&self, paths: &XdgPaths, global: &Path) -> PathBuf {
        let expanded = paths.expand_tilde(&self.path);
        let path = if expanded.is_absolute() {
            expanded
        } else {
            global.parent().unwrap_or(Path::new("/")).join(expanded)
        };
        crate::environment::normalize(&path)
    }
}

/// The glob with `~` expanded to `home` (escaped, so a `[` in the home is no class), compiled so
/// that `*` stays within one path part and `**` crosses any number. A trailing `/` is ignored.
fn matcher(glob: &str, home: &Path) -> Result<GlobMatcher, String> {
    let home = globset::escape(&home.to_string_lossy());
    let expanded = match glob.strip_prefix('~') {
        Some(rest) => format!("{}{rest}", home.trim_end_matches('/')),
        None => glob.to_owned(),
    };
    let trimmed = match expanded.trim_end_matches('/') {
        "" => "/",
        t => t,
    };
    GlobBuilder::new(trimmed)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

/// Checks one file's `[[include]]` entries: the condition's form and glob, and a usable path.
pub(crate) fn validate(file: &ConfigFile, origin: &Path) -> Result<(), ConfigError> {
    for entry in &file.include {
        let glob = entry
            .glob()
            .map_err(|reason| ConfigError::IncludeCondition {
                path: origin.to_path_buf(),
                value: entry.condition.clone(),
                reason,
                form: DIR_FORM,
            })?;
        matcher(glob, Path::new("/home")).map_err(|reason| ConfigError::IncludeCondition {
            path: origin.to_path_buf(),
            value: entry.condition.clone(),
            reason: format!("the glob is not valid: {reason}"),
            form: DIR_FORM,
        })?;
        let reason = if entry.path.is_empty() {
            Some("it is empty")
        } else if entry.path.contains('\0') {
            Some("it contains a NUL byte")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(ConfigError::IncludePath {
                path: origin.to_path_buf(),
                value: entry.path.clone(),
                reason,
            });
        }
    }
    Ok(())
}

/// The global file's includes that match `project`, read and parsed, in order of appearance.
///
/// A matching include whose file is missing, is inside a tree a sandbox writes (the project, the
/// sandboxes' state, the scratchpads), includes more files or holds `[bridge]` is an error naming
/// both files.
pub(crate) fn load_matching(
    paths: &XdgPaths,
    global_path: &Path,
    global: &ConfigFile,
    project: &Path,
) -> Result<Vec<(PathBuf, ConfigFile)>, ConfigError> {
    if global.include.is_empty() {
        return Ok(Vec::new());
    }
    // The project path is canonical; `~` in a glob may be written against either spelling of home.
    let canonical_home = crate::canonicalize(&paths.home).ok();
    let mut homes = vec![paths.home.as_path()];
    if let Some(home) = canonical_home.as_deref().filter(|h| *h != paths.home) {
        homes.push(home);
    }
    let mut loaded = Vec::new();
    for entry in &global.include {
        if !entry.matches(project, &homes) {
            continue;
        }
        let file = entry.file(paths, global_path);
        let writable = [
            project.to_path_buf(),
            paths.sandboxes_dir(),
            paths.scratchpads_dir(),
        ]
        .into_iter()
        .find(|tree| file.starts_with(tree));
        if let Some(tree) = writable {
            return Err(ConfigError::IncludeWritable {
                global: global_path.to_path_buf(),
                file,
                tree,
            });
        }
        let bytes = match read_optional(&file) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(ConfigError::IncludeMissing {
                    global: global_path.to_path_buf(),
                    written: entry.path.clone(),
                    condition: entry.condition.clone(),
                    file,
                });
            }
            Err(e) => return Err(e),
        };
        let cfg = parse_bytes(&bytes, &file)?;
        if !cfg.include.is_empty() {
            return Err(ConfigError::IncludeNested {
                global: global_path.to_path_buf(),
                file,
            });
        }
        if !cfg.bridge.is_empty() {
            return Err(ConfigError::HostOnly {
                path: file,
                section: "[bridge]",
            });
        }
        loaded.push((file, cfg));
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(condition: &str) -> IncludeEntry {
        IncludeEntry {
            condition: condition.into(),
            path: "work.toml".into(),
        }
    }

    #[test]
    fn dir_globs_match_the_project_path() {
        let home = [Path::new("/home/u")];
        let m = |cond: &str, project: &str| entry(cond).matches(Path::new(project), &home);
        assert!(m("dir:~/work/**", "/home/u/work/app"));
        assert!(m("dir:~/work/**", "/home/u/work/a/b/c"));
        assert!(!m("dir:~/work/**", "/home/u/other/app"));
        assert!(!m("dir:~/work/**", "/home/u/work"), "** needs a part below");
        assert!(!m("dir:~/work/**", "/home/u/workshop/app"));
        assert!(m("dir:~/work/*", "/home/u/work/app"));
        assert!(
            !m("dir:~/work/*", "/home/u/work/a/b"),
            "* stays in one part"
        );
        assert!(m("dir:/srv/**/api", "/srv/x/y/api"));
        assert!(
            m("dir:~/work/app/", "/home/u/work/app"),
            "trailing / ignored"
        );
        assert!(m("dir:~/work/app", "/home/u/work/app"));
        assert!(!m("dir:~/work/app", "/home/u/work/app2"));
        assert!(m("dir:/home/u/{work,play}/*", "/home/u/play/x"));
        assert!(!m("branch:main", "/home/u/work/app"));
    }

    #[test]
    fn a_home_with_glob_characters_is_matched_literally() {
        let home = [Path::new("/home/u[1]")];
        assert!(entry("dir:~/w/*").matches(Path::new("/home/u[1]/w/a"), &home));
        assert!(!entry("dir:~/w/*").matches(Path::new("/home/u1/w/a"), &home));
    }

    #[test]
    fn include_paths_resolve_against_the_global_files_directory() {
        let paths = XdgPaths::from_vars(|k| (k == "HOME").then(|| "/home/u".to_owned())).unwrap();
        let global = Path::new("/home/u/.config/airlock/config.toml");
        let file = |p: &str| {
            IncludeEntry {
                condition: "dir:/x".into(),
                path: p.into(),
            }
            .file(&paths, global)
        };
        assert_eq!(
            file("work.toml"),
            Path::new("/home/u/.config/airlock/work.toml")
        );
        assert_eq!(
            file("../shared/a.toml"),
            Path::new("/home/u/.config/shared/a.toml")
        );
        assert_eq!(file("~/cfg/w.toml"), Path::new("/home/u/cfg/w.toml"));
        assert_eq!(
            file("/etc/airlock/w.toml"),
            Path::new("/etc/airlock/w.toml")
        );
    }
}
