//! airlock's configuration.
//!
//! Owns the TOML schema of `~/.config/airlock/config.toml` and a project's `.airlock.toml`, how the two
//! (with the global file's matching `[[include]]` files between them) layer into one [`Profile`], the
//! trust store that decides whether a project file is loaded at all, reading `[sandbox.environment]`
//! files at launch, the XDG paths of airlock's state on the host, and the rotating line logs kept
//! there ([`logfile`]). It does no sandboxing and knows nothing of backends.

mod canonical;
pub mod container;
pub mod credentials;
mod edit;
mod environment;
mod error;
pub mod hostfs;
mod include;
mod load;
pub mod logfile;
mod mounts;
mod paths;
pub mod ports;
pub mod resources;
mod schema;
mod template;
mod text;
mod tools_section;
mod trust;

pub use canonical::canonicalize;
pub use edit::add_allow_rule;
pub use environment::{
    ENV_FILE_BYTES, EnvSource, EnvironmentEntry, EnvironmentMap, EnvironmentVar, FileValue,
    env_var_name_problem, read_file_value, read_files as read_environment_files,
};
pub use error::ConfigError;
pub use include::IncludeEntry;
#[doc(hidden)]
pub use load::parse_bytes;
pub use load::{LoadedConfig, ProjectFile, load, load_global, parse_file, parse_str};
pub use mounts::{EntryLabel, MountSelector, mount_pattern_problem};
pub use paths::{PROJECT_FILE_NAME, XdgPaths};
pub use schema::*;
pub use template::{init_template, render_profile};
pub use text::{printable, without_userinfo};
pub use tools_section::{
    OverlayDefault, OverlaySection, ToolSetting, ToolSettingsMap, ToolTables, ToolValue,
};
pub use trust::{EntryStatus, TrustEntry, TrustRecord, TrustStatus, TrustStore, sha256_hex};
