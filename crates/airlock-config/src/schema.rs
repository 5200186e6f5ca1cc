//! The TOML schema of `config.toml` and `.airlock.toml`, and the resolved [`Profile`].

use serde::{Deserialize, Serialize};

/// One config file as written: every key optional, unknown keys rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigFile {
    pub sandbox: SandboxSection,
}

/// The `[sandbox]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSection {
    /// `network = "host" | "none"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    /// Mask `.env*` files and `.airlock.toml` in the project (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hide_env_files: Option<bool>,
    /// Host environment variables copied into the sandbox.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_passthrough: Vec<String>,
    /// Allow namespace creation (and mounts in those namespaces) inside the sandbox (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested_namespaces: Option<bool>,
    /// `[[sandbox.mounts]]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountEntry>,
}

/// How the sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Share the host's network namespace.
    Host,
    /// A new network namespace with only `lo`.
    None,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Host => "host",
            NetworkMode::None => "none",
        }
    }
}

/// One `[[sandbox.mounts]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountEntry {
    /// Host path, mounted at the same path inside; `~` expands to the host home.
    pub path: String,
    pub mode: MountMode,
}

/// What a custom mount does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountMode {
    Readonly,
    Readwrite,
    /// An empty read-only directory (or an empty file) over the path.
    Hidden,
    /// An empty writable tmpfs over the path, discarded at exit.
    Tmpfs,
}

impl MountMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MountMode::Readonly => "readonly",
            MountMode::Readwrite => "readwrite",
            MountMode::Hidden => "hidden",
            MountMode::Tmpfs => "tmpfs",
        }
    }
}

/// A custom mount with the file it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileMount {
    pub path: String,
    pub mode: MountMode,
    /// The config file that declared it (for error messages).
    pub origin: std::path::PathBuf,
}

/// The resolved settings: global file, then the trusted project file on top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub network: NetworkMode,
    pub hide_env_files: bool,
    pub env_passthrough: Vec<String>,
    pub nested_namespaces: bool,
    pub mounts: Vec<ProfileMount>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            network: NetworkMode::Host,
            hide_env_files: true,
            env_passthrough: Vec::new(),
            nested_namespaces: false,
            mounts: Vec::new(),
        }
    }
}
