//! airlock's configuration.
//!
//! Owns the TOML schema of `~/.config/airlock/config.toml` and a project's `.airlock.toml`, how the two
//! layer into one [`Profile`], the trust store that decides whether a project file is loaded at all, and
//! the XDG paths of airlock's state on the host. It does no sandboxing and knows nothing of backends.

mod error;
pub mod hostfs;
mod load;
mod paths;
mod schema;
mod template;
mod text;
mod tools_section;
mod trust;

pub use error::ConfigError;
#[doc(hidden)]
pub use load::parse_bytes;
pub use load::{LoadedConfig, ProjectFile, load, parse_file, parse_str};
pub use paths::{PROJECT_FILE_NAME, XdgPaths};
pub use schema::*;
pub use template::{init_template, render_profile};
pub use text::{printable, without_userinfo};
pub use tools_section::{
    OverlayDefault, OverlaySection, ToolSetting, ToolSettingsMap, ToolTables, ToolValue,
};
pub use trust::{EntryStatus, TrustEntry, TrustRecord, TrustStatus, TrustStore, sha256_hex};
