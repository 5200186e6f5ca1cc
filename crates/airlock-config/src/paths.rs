//! Where airlock keeps its files on the host, per the XDG Base Directory spec.

use std::path::{Path, PathBuf};

use crate::ConfigError;

/// The name of a project's config file, in the project root.
pub const PROJECT_FILE_NAME: &str = ".airlock.toml";

/// The host's home and XDG base directories, all absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdgPaths {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config_home: PathBuf,
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub data_home: PathBuf,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    pub state_home: PathBuf,
    /// `$XDG_CACHE_HOME`, else `~/.cache`.
    pub cache_home: PathBuf,
}

impl XdgPaths {
    /// Reads `HOME` and the `XDG_*_HOME` variables of this process.
    pub fn from_env() -> Result<XdgPaths, ConfigError> {
        if let Some(home) = std::env::var_os("HOME")
            && !home.is_empty()
            && home.to_str().is_none()
        {
            return Err(ConfigError::HomeInvalid {
                value: home.to_string_lossy().into_owned(),
                reason: "is not valid UTF-8",
            });
        }
        XdgPaths::from_vars(|name| std::env::var_os(name).and_then(|v| v.into_string().ok()))
    }

    /// Builds the paths from a variable lookup (pure; `from_env` passes the process environment).
    ///
    /// `HOME` must be set and absolute. An `XDG_*_HOME` value is used only when it is set, non-empty
    /// and absolute; the spec says a relative one is invalid and must be ignored.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<XdgPaths, ConfigError> {
        let home = match get("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h),
            _ => return Err(ConfigError::HomeMissing),
        };
        if !home.is_absolute() {
            return Err(ConfigError::HomeInvalid {
                value: home.to_string_lossy().into_owned(),
                reason: "is not an absolute path",
            });
        }
        let xdg = |name: &str, fallback: &str| match get(name).map(PathBuf::from) {
            Some(p) if p.is_absolute() => p,
            _ => home.join(fallback),
        };
        Ok(XdgPaths {
            config_home: xdg("XDG_CONFIG_HOME", ".config"),
            data_home: xdg("XDG_DATA_HOME", ".local/share"),
            state_home: xdg("XDG_STATE_HOME", ".local/state"),
            cache_home: xdg("XDG_CACHE_HOME", ".cache"),
            home,
        })
    }

    /// The global config file: `$XDG_CONFIG_HOME/airlock/config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.config_home.join("airlock").join("config.toml")
    }

    /// The per-project sandbox roots: `$XDG_DATA_HOME/airlock/sandboxes`.
    pub fn sandboxes_dir(&self) -> PathBuf {
        self.data_home.join("airlock").join("sandboxes")
    }

    /// The scratchpads' workspaces (`airlock scratchpad`): `$XDG_DATA_HOME/airlock/scratchpads`.
    pub fn scratchpads_dir(&self) -> PathBuf {
        self.data_home.join("airlock").join("scratchpads")
    }

    /// Ask mode's sockets, one per session (`airlock network monitor` connects to them):
    /// `$XDG_STATE_HOME/airlock/monitor`, never mounted in a sandbox.
    pub fn monitor_dir(&self) -> PathBuf {
        self.state_dir().join("monitor")
    }

    /// Host-trusted state that no sandbox may write: `$XDG_STATE_HOME/airlock`.
    pub fn state_dir(&self) -> PathBuf {
        self.state_home.join("airlock")
    }

    /// The project-file trust store: `<state_dir>/trust.json`.
    pub fn trust_file(&self) -> PathBuf {
        self.state_dir().join("trust.json")
    }

    /// Session lock files: `<state_dir>/locks`.
    pub fn locks_dir(&self) -> PathBuf {
        self.state_dir().join("locks")
    }

    /// Supervisors' control sockets and session records (`airlock forward`, `airlock sessions`):
    /// `<state_dir>/run`, host-only (0700, never mounted into a sandbox).
    pub fn run_dir(&self) -> PathBuf {
        self.state_dir().join("run")
    }

    /// Shared temporary files: `$XDG_CACHE_HOME/airlock`.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_home.join("airlock")
    }

    /// Expands a leading `~` or `~/` to the home directory; anything else (including `~user`, which
    /// is not supported) is returned unchanged. The caller checks that the result is absolute.
    pub fn expand_tilde(&self, s: &str) -> PathBuf {
        match s.strip_prefix('~') {
            Some("") => self.home.clone(),
            Some(rest) => match rest.strip_prefix('/') {
                Some(rel) => home_join(&self.home, rel),
                None => PathBuf::from(s),
            },
            None => PathBuf::from(s),
        }
    }
}

/// `home.join(rel)` without the trailing slash that `~/` would otherwise leave.
fn home_join(home: &Path, rel: &str) -> PathBuf {
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        home.to_path_buf()
    } else {
        home.join(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_under_home() {
        let p = XdgPaths::from_vars(vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(p.home, PathBuf::from("/home/u"));
        assert_eq!(
            p.config_file(),
            PathBuf::from("/home/u/.config/airlock/config.toml")
        );
        assert_eq!(
            p.sandboxes_dir(),
            PathBuf::from("/home/u/.local/share/airlock/sandboxes")
        );
        assert_eq!(
            p.scratchpads_dir(),
            PathBuf::from("/home/u/.local/share/airlock/scratchpads")
        );
        assert_eq!(p.state_dir(), PathBuf::from("/home/u/.local/state/airlock"));
        assert_eq!(
            p.trust_file(),
            PathBuf::from("/home/u/.local/state/airlock/trust.json")
        );
        assert_eq!(
            p.locks_dir(),
            PathBuf::from("/home/u/.local/state/airlock/locks")
        );
        assert_eq!(p.cache_dir(), PathBuf::from("/home/u/.cache/airlock"));
    }

    #[test]
    fn absolute_xdg_overrides_are_used() {
        let p = XdgPaths::from_vars(vars(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/c"),
            ("XDG_DATA_HOME", "/d"),
            ("XDG_STATE_HOME", "/s"),
            ("XDG_CACHE_HOME", "/k"),
        ]))
        .unwrap();
        assert_eq!(p.config_file(), PathBuf::from("/c/airlock/config.toml"));
        assert_eq!(p.sandboxes_dir(), PathBuf::from("/d/airlock/sandboxes"));
        assert_eq!(p.trust_file(), PathBuf::from("/s/airlock/trust.json"));
        assert_eq!(p.cache_dir(), PathBuf::from("/k/airlock"));
    }

    #[test]
    fn relative_and_empty_xdg_values_are_ignored() {
        let p = XdgPaths::from_vars(vars(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "rel/config"),
            ("XDG_DATA_HOME", ""),
            ("XDG_STATE_HOME", "./state"),
            ("XDG_CACHE_HOME", "~/cache"),
        ]))
        .unwrap();
        assert_eq!(p.config_home, PathBuf::from("/home/u/.config"));
        assert_eq!(p.data_home, PathBuf::from("/home/u/.local/share"));
        assert_eq!(p.state_home, PathBuf::from("/home/u/.local/state"));
        assert_eq!(p.cache_home, PathBuf::from("/home/u/.cache"));
    }

    #[test]
    fn home_missing_or_relative_is_an_error() {
        let err = XdgPaths::from_vars(vars(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::HomeMissing), "{err}");
        assert!(err.to_string().contains("HOME is not set"), "{err}");

        let err = XdgPaths::from_vars(vars(&[("HOME", "")])).unwrap_err();
        assert!(matches!(err, ConfigError::HomeMissing), "{err}");

        let err = XdgPaths::from_vars(vars(&[("HOME", "home/u")])).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("\"home/u\"") && msg.contains("absolute"),
            "{msg}"
        );
    }

    #[test]
    fn tilde_expansion() {
        let p = XdgPaths::from_vars(vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(p.expand_tilde("~"), PathBuf::from("/home/u"));
        assert_eq!(p.expand_tilde("~/"), PathBuf::from("/home/u"));
        assert_eq!(p.expand_tilde("~/x"), PathBuf::from("/home/u/x"));
        assert_eq!(p.expand_tilde("~/x/y/"), PathBuf::from("/home/u/x/y/"));
        assert_eq!(p.expand_tilde("~//x"), PathBuf::from("/home/u/x"));
        assert_eq!(p.expand_tilde("~user/x"), PathBuf::from("~user/x"));
        assert_eq!(p.expand_tilde("/abs/~/x"), PathBuf::from("/abs/~/x"));
        assert_eq!(p.expand_tilde("rel/x"), PathBuf::from("rel/x"));
        assert_eq!(p.expand_tilde(""), PathBuf::from(""));
    }
}
