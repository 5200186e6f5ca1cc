//! What stays hidden in the project while a sandbox runs: the rules, the spec the builder writes,
//! and the index that carries hidden paths from one session to the next.
//!
//! Masks are bind mounts over files, and a bind mount belongs to the file it covers: when the host
//! replaces that file by a rename (`sed -i`, an editor, `git checkout`), the kernel drops the mask
//! and the new file shows. So masking is not a scan frozen at launch but a rule kept for the whole
//! session by the sandbox's init (`native::keeper`): it walks the project at launch, watches every
//! directory it walked, and hides what matches the moment it appears. The walk skips a few bulky
//! directories ([`SKIP`]); the index records where masks ended up (they follow a moved parent,
//! even into a skipped directory), and the next launch hides those first.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The names hidden when `[sandbox] hide_env_files` is on (the default).
pub const ENV_PATTERNS: &[&str] = &[".env", ".env.*", ".envrc", "/.airlock.toml"];

/// Directory names the keeper neither walks nor watches: bulky, rebuilt by tools, and not where a
/// developer keeps secrets. A mask that ends up inside one is still recorded in the index.
pub const SKIP: &[&str] = &[".git", "node_modules", "target", ".venv", "vendor"];

/// Where the empty read-only file every keeper mask is cloned from sits inside the sandbox.
pub const EMPTY: &str = "/run/airlock/hidden/empty";

/// The source name of the keeper's empty directories, which finds them in mountinfo.
pub const HIDDEN_SOURCE: &std::ffi::CStr = c"airlock-hidden";

/// Where the sources of pinned files sit inside the sandbox (`<dir>/<n>`).
pub const PINNED_DIR: &str = "/run/airlock/hidden";

/// The index's file name in the sandbox's state root.
pub const INDEX: &str = "hidden.json";

/// Most masks one session keeps; past this the sandbox is stopped rather than leave one out.
pub const MAX_HIDDEN: usize = 4096;

/// The keeper's part of a [`SandboxSpec`](crate::SandboxSpec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HideSpec {
    /// The tree the rules apply to: the project.
    pub root: PathBuf,
    /// Globs: one without `/` matches a name at any depth, one with `/` a path from `root`.
    pub patterns: Vec<String>,
    /// Directory names not walked or watched ([`SKIP`]).
    pub skip: Vec<String>,
    /// Where the last session's masks were (from the index), hidden before the walk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<HiddenPath>,
    /// Read-only files bound over project files (the sanitised `.git/config`), bound again when
    /// the host replaces the file under them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<Pin>,
    /// The index on the host, rewritten by the supervisor while the session runs.
    pub index: PathBuf,
}

/// A path kept hidden, relative to the project.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HiddenPath {
    pub path: PathBuf,
    /// An empty read-only directory hides it (else an empty read-only file).
    #[serde(default)]
    pub dir: bool,
}

/// A file bind the keeper holds in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The covered project file, as seen inside.
    pub target: PathBuf,
    /// The same content bound read-only under [`PINNED_DIR`], where the host cannot replace it.
    pub source: PathBuf,
}

/// Compiled hide patterns.
#[derive(Debug, Clone)]
pub struct Rules {
    names: Vec<glob::Pattern>,
    paths: Vec<glob::Pattern>,
}

const PATH_MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

impl Rules {
    /// Compiles `patterns`; one that is not a glob is an error naming it (the config loader
    /// refuses those first, so this only fails on a hand-written spec).
    pub fn new(patterns: &[String]) -> Result<Rules, String> {
        let mut rules = Rules {
            names: Vec::new(),
            paths: Vec::new(),
        };
        for pattern in patterns {
            let body = pattern.strip_prefix('/').unwrap_or(pattern);
            let compiled = glob::Pattern::new(body)
                .map_err(|e| format!("hide pattern {pattern:?} is not a glob: {}", e.msg))?;
            if pattern.contains('/') {
                rules.paths.push(compiled);
            } else {
                rules.names.push(compiled);
            }
        }
        Ok(rules)
    }

    /// Whether `rel` (a path relative to the project) is hidden by a rule.
    pub fn matches(&self, rel: &Path) -> bool {
        let Some(name) = rel.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        if self.names.iter().any(|p| p.matches(name)) {
            return true;
        }
        let Some(rel) = rel.to_str() else {
            return false;
        };
        self.paths.iter().any(|p| p.matches_with(rel, PATH_MATCH))
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.paths.is_empty()
    }
}

/// The index file format: `{"hidden": [{"path": "web/.env"}, {"path": "secrets", "dir": true}]}`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Index {
    pub hidden: Vec<HiddenPath>,
}

/// The largest index read back; a bigger one is ignored (the walk still finds what it can reach).
const INDEX_CAP: u64 = 1 << 20;

/// Whether `rel` is a plain relative path (no `..`, no root, not empty).
pub fn is_plain_relative(rel: &Path) -> bool {
    !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Reads the index at `path` (a file in the state root, written by the supervisor): entries that
/// are not plain relative paths are dropped. A missing or unreadable index is empty.
pub fn read_index(path: &Path) -> Vec<HiddenPath> {
    let Ok(bytes) = airlock_config::hostfs::read_regular(path, INDEX_CAP) else {
        return Vec::new();
    };
    let Ok(index) = serde_json::from_slice::<Index>(&bytes) else {
        return Vec::new();
    };
    let mut hidden: Vec<HiddenPath> = index
        .hidden
        .into_iter()
        .filter(|h| is_plain_relative(&h.path))
        .take(MAX_HIDDEN)
        .collect();
    hidden.sort();
    hidden.dedup();
    hidden
}

/// Writes `body` (an [`Index`] as JSON, from the keeper) to `path` through a temporary file and a
/// rename, so a reader sees the old index or the new one.
pub fn write_index(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let index: Index = serde_json::from_slice(body)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let text = serde_json::to_vec_pretty(&index)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(patterns: &[&str]) -> Rules {
        Rules::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn env_names_match_at_any_depth() {
        let r = rules(ENV_PATTERNS);
        for hidden in [
            ".env",
            "web/.env",
            "a/b/c/d/e/.env.local",
            ".envrc",
            "x/.env.production",
            ".airlock.toml",
        ] {
            assert!(r.matches(Path::new(hidden)), "{hidden} should be hidden");
        }
        for shown in [
            "env",
            ".environment",
            "src/main.rs",
            "sub/.airlock.toml",
            ".env/x",
        ] {
            assert!(!r.matches(Path::new(shown)), "{shown} should be shown");
        }
    }

    #[test]
    fn path_patterns_start_at_the_project() {
        let r = rules(&["/config/master.key", "secrets/**", "*.pem"]);
        assert!(r.matches(Path::new("config/master.key")));
        assert!(!r.matches(Path::new("app/config/master.key")));
        assert!(r.matches(Path::new("secrets/a/b")));
        assert!(!r.matches(Path::new("app/secrets/a")));
        assert!(r.matches(Path::new("deep/down/server.pem")));
    }

    #[test]
    fn a_bad_glob_names_itself() {
        let err = Rules::new(&["[oops".to_string()]).unwrap_err();
        assert!(err.contains("[oops"), "{err}");
    }

    #[test]
    fn the_index_drops_paths_that_climb_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hidden.json");
        let body = br#"{"hidden":[{"path":"web/.env"},{"path":"../x"},{"path":"/etc/passwd"},{"path":"s","dir":true}]}"#;
        write_index(&path, body).unwrap();
        let read = read_index(&path);
        assert_eq!(
            read,
            vec![
                HiddenPath {
                    path: "s".into(),
                    dir: true
                },
                HiddenPath {
                    path: "web/.env".into(),
                    dir: false
                },
            ]
        );
        assert!(write_index(&path, b"not json").is_err());
        assert_eq!(
            read_index(&path).len(),
            2,
            "a bad body leaves the index as it was"
        );
    }
}
