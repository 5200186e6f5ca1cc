//! The one error type of this crate.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong reading airlock's configuration, its paths or its trust store.
///
/// Each message is complete on its own (what failed, the offending file or value, what to do), so the
/// underlying I/O or TOML error is part of the text rather than a separate `source()`: printing the
/// chain with `{:#}` does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {error}; check that it exists and that you can read it", path.display())]
    Read { path: PathBuf, error: io::Error },

    /// A file or directory could not be written.
    #[error(
        "cannot write {}: {error}; check the permissions of its directory and the free space",
        path.display()
    )]
    Write { path: PathBuf, error: io::Error },

    /// A config file is not UTF-8, so it cannot be TOML.
    #[error("{} is not valid UTF-8, so it is not a TOML config file; save it as UTF-8", path.display())]
    NotUtf8 { path: PathBuf },

    /// A config file is not valid TOML, or has an unknown key or a value of the wrong type.
    ///
    /// toml's message carries the line, the column, the offending line and (for an unknown key) the
    /// valid keys.
    #[error(
        "{}: invalid airlock config: {}\nfix the file; every valid key and value is documented, with its default, in the template printed by `airlock config init`",
        path.display(),
        error.to_string().trim_end()
    )]
    Parse {
        path: PathBuf,
        error: Box<toml::de::Error>,
    },

    /// An `env_passthrough` entry that cannot be an environment variable name.
    #[error(
        "{}: env_passthrough entry {value:?} is not a valid environment variable name ({reason}); list bare names such as \"TERM\"",
        path.display()
    )]
    EnvName {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// A `[[sandbox.mounts]]` path that cannot name a file.
    #[error(
        "{}: [[sandbox.mounts]] path {value:?} is not usable ({reason}); give an absolute path or one starting with `~/`",
        path.display()
    )]
    MountPath {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// A `[sandbox] hide` pattern that is not a usable glob.
    #[error(
        "{}: [sandbox] hide pattern {value:?} is not usable ({reason}); write a name glob such as \"*.pem\" or a project path such as \"/config/master.key\"",
        path.display()
    )]
    HidePattern {
        path: PathBuf,
        value: String,
        reason: String,
    },

    /// A host-only section (read by host daemons) in a project file.
    #[error(
        "{}: {section} is a host setting and is honoured only in the global config; move it to \
         ~/.config/airlock/config.toml",
        path.display()
    )]
    HostOnly {
        path: PathBuf,
        section: &'static str,
    },

    /// `HOME` is unset or empty.
    #[error("HOME is not set; set it to your home directory (an absolute path) and try again")]
    HomeMissing,

    /// `HOME` is set to something airlock cannot use.
    #[error(
        "HOME={value:?} {reason}; set HOME to your home directory as an absolute path and try again"
    )]
    HomeInvalid { value: String, reason: &'static str },

    /// The trust store exists but cannot be understood.
    #[error(
        "the trust store {} is corrupt ({reason}); remove it and re-trust your projects with `airlock trust add <dir>`",
        path.display()
    )]
    TrustStoreCorrupt { path: PathBuf, reason: String },

    /// `trust add` on a directory without a `.airlock.toml`.
    #[error(
        "cannot trust {}: {} does not exist; create it first (or check the directory)",
        dir.display(),
        file.display()
    )]
    NoProjectFile { dir: PathBuf, file: PathBuf },

    /// A trust-store directory that is not absolute.
    #[error("cannot trust {}: not an absolute path; pass the project directory as an absolute path", dir.display())]
    RelativeDir { dir: PathBuf },

    /// A trust-store directory that is not UTF-8 (the store is JSON).
    #[error(
        "cannot trust {}: the path is not valid UTF-8 and the trust store is JSON; move the project to a UTF-8 path",
        dir.display()
    )]
    NonUtf8Dir { dir: PathBuf },
}
