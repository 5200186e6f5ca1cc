//! The TOML schema of `config.toml` and `.airlock.toml`, and the resolved [`Profile`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One config file as written: every key optional, unknown keys rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigFile {
    pub sandbox: SandboxSection,
    pub network: NetworkSection,
    /// `[bridge]`: host-side settings of the bridge daemon, honoured in the global file only.
    #[serde(skip_serializing_if = "BridgeSection::is_empty")]
    pub bridge: BridgeSection,
    /// `[overlay]`: the default mount mode of tool mounts.
    #[serde(skip_serializing_if = "crate::OverlaySection::is_empty")]
    pub overlay: crate::OverlaySection,
    /// `[tools.<name>]`: per-tool settings, validated against the catalog by `airlock-tools`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: crate::ToolTables,
    /// `[[include]]`: more files loaded when the project's path matches (global file only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<crate::IncludeEntry>,
}

/// The `[bridge]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeSection {
    /// `[bridge.commands.<name>]`: host commands a sandbox may run through the bridge's `/command`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub commands: BTreeMap<String, HostCommandEntry>,
    /// `[bridge] shared_token`: also accept the install-time token, with no sandbox scope, from
    /// any caller (toolbox containers, Docker Sandboxes, scripts). Default false: only the tokens
    /// `airlock run` registers per session work.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared_token: bool,
    /// `[bridge] credential_hosts`: hosts `/credential` answers for besides those the project's
    /// git remotes name (still only where the sandbox's network policy reaches).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub credential_hosts: Vec<String>,
}

impl BridgeSection {
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && !self.shared_token && self.credential_hosts.is_empty()
    }
}

/// One `[bridge.commands.<name>]` entry: which verbs of which host program the sandbox may run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCommandEntry {
    /// The program: an absolute path, or a name looked up on the daemon's PATH (default: `<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// The allowed first arguments.
    pub verbs: Vec<String>,
    /// Flags refused anywhere in the arguments: `-o` refuses every short cluster containing `o`,
    /// `--out` refuses `--out` and `--out=...`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_flags: Vec<String>,
    /// Verb and argument pairs refused outright, written `"verb arg"` (e.g. `"errors dom"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// How long one run may take, in seconds (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// The `[sandbox]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSection {
    /// `backend = "native" | "bwrap" | "container" | "sbx"`: what launches the sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// `[sandbox.container]`: the container backend's engine, image and `keep`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<crate::container::ContainerSection>,
    /// `network = "host" | "none" | "proxy"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    /// Mask `.env*` files and `.airlock.toml` in the project (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hide_env_files: Option<bool>,
    /// More files and directories kept hidden in the project: globs, a name (`*.pem`) or a path
    /// from the project root (`/config/master.key`, `secrets/**`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hide: Vec<String>,
    /// Host environment variables copied into the sandbox.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_passthrough: Vec<String>,
    /// `[sandbox.environment.<NAME>]`: variables set inside from a literal, a host variable or a file.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, crate::EnvironmentEntry>,
    /// Allow namespace creation (and mounts in those namespaces) inside the sandbox (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested_namespaces: Option<bool>,
    /// Give the sandbox the host bridge: its state dir, the shims first on PATH (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge: Option<bool>,
    /// `[[sandbox.mounts]]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountEntry>,
    /// `[sandbox.resources]`: memory, CPU, process and tmpfs limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<crate::resources::ResourcesSection>,
}

/// What launches a sandbox: airlock's own namespaces (`native`), bubblewrap (`bwrap`) or a
/// container engine, podman or docker (`container`), or a Docker Sandboxes microVM (`sbx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    Native,
    Bwrap,
    Container,
    Sbx,
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Native,
        BackendKind::Bwrap,
        BackendKind::Container,
        BackendKind::Sbx,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Native => "native",
            BackendKind::Bwrap => "bwrap",
            BackendKind::Container => "container",
            BackendKind::Sbx => "sbx",
        }
    }

    /// The backend named `name` (`AIRLOCK_BACKEND`, `--backend`).
    pub fn parse(name: &str) -> Option<BackendKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// How the sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Share the host's network namespace.
    Host,
    /// A new network namespace with only `lo`.
    None,
    /// Only `lo`, plus the allowlisting egress proxy served by the supervisor.
    Proxy,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Host => "host",
            NetworkMode::None => "none",
            NetworkMode::Proxy => "proxy",
        }
    }
}

/// One `[[sandbox.mounts]]` entry: `path` or `pattern` (exactly one; see [`MountEntry::selector`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountEntry {
    /// Host path, mounted at the same path inside; `~` expands to the host home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A glob expanded at launch (relative to the project, `~/…`, or absolute); each match is
    /// mounted on its own with `mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
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
    /// A directory's host content visible; writes kept in the sandbox's state across runs.
    Overlay,
    /// A directory's host content visible; writes discarded at exit.
    Tmpoverlay,
}

impl MountMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MountMode::Readonly => "readonly",
            MountMode::Readwrite => "readwrite",
            MountMode::Hidden => "hidden",
            MountMode::Tmpfs => "tmpfs",
            MountMode::Overlay => "overlay",
            MountMode::Tmpoverlay => "tmpoverlay",
        }
    }
}

/// A custom mount with the file it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileMount {
    /// `path = "…"` or `pattern = "…"`, as written.
    #[serde(flatten)]
    pub selector: crate::MountSelector,
    pub mode: MountMode,
    /// The config file that declared it (for error messages).
    pub origin: std::path::PathBuf,
    /// The entry's number among that file's `[[sandbox.mounts]]`, from 1.
    pub entry: usize,
}

/// The resolved settings: global file, then the trusted project file on top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// `[sandbox] backend`; `None`: the default (`AIRLOCK_BACKEND`, else native).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// `[sandbox.container]`, layered key by key (project over global).
    #[serde(default)]
    pub container: crate::container::ContainerSettings,
    pub network: NetworkMode,
    pub hide_env_files: bool,
    /// `[sandbox] hide` of both files, global first, without duplicates.
    pub hide: Vec<String>,
    pub env_passthrough: Vec<String>,
    /// `[sandbox.environment]` of every file, per NAME the later file's entry (project over global).
    pub environment: crate::EnvironmentMap,
    pub nested_namespaces: bool,
    pub mounts: Vec<ProfileMount>,
    /// `[sandbox] bridge`: mount the host bridge's state dir and shims (default true).
    pub bridge: bool,
    /// The names of `[bridge.commands]` in the global file (each gets a shim inside).
    pub bridge_commands: Vec<String>,
    /// `[bridge] credential_hosts` of the global file.
    pub bridge_credential_hosts: Vec<String>,
    /// The `[network]` policy of the egress proxy (used in `proxy` mode).
    pub egress: EgressSettings,
    /// `[overlay] default`: how tool mounts behave unless a tool's `mount_mode` says otherwise.
    pub overlay_default: crate::OverlayDefault,
    /// `[tools.<name>]` settings, layered key by key (project over global).
    pub tools: crate::ToolSettingsMap,
    /// `[sandbox.resources]`, layered key by key (project over global).
    pub resources: crate::resources::Resources,
    /// `[network.credentials]`, by name (global config and includes only).
    pub credentials: crate::credentials::CredentialMap,
    /// `[[network.ports]]` of every file, global first; an entry the same as an earlier one
    /// counts once.
    #[serde(default)]
    pub ports: Vec<crate::ports::PortRule>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            backend: None,
            container: Default::default(),
            network: NetworkMode::Proxy,
            hide_env_files: true,
            hide: Vec::new(),
            env_passthrough: Vec::new(),
            environment: BTreeMap::new(),
            nested_namespaces: false,
            mounts: Vec::new(),
            bridge: true,
            bridge_commands: Vec::new(),
            bridge_credential_hosts: Vec::new(),
            egress: EgressSettings::default(),
            overlay_default: crate::OverlayDefault::Split,
            tools: BTreeMap::new(),
            resources: crate::resources::Resources::default(),
            credentials: Default::default(),
            ports: Vec::new(),
        }
    }
}

/// The `[network]` table: the egress proxy's policy. Rule syntax is checked by `airlock-egress`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkSection {
    /// `preset = "balanced" | "allow-all" | "deny-all"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<EgressPreset>,
    /// Host rules to allow: `host`, `*.suffix`, either with `:port`, or an IP address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Host rules to deny; a deny rule wins over every allow rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// Let allowed names resolve to loopback, private, link-local or this host's addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_private: Option<bool>,
    /// Static name → address map used instead of DNS for these names (like curl's `--resolve`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub resolve: BTreeMap<String, IpAddr>,
    /// Send allowed traffic through this proxy (`http://[user:password@]host:port`); default: the
    /// host's `HTTPS_PROXY` / `HTTP_PROXY`. `""` turns that off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_proxy: Option<String>,
    /// `unmatched = "deny" | "ask"`: what a request no rule matches gets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched: Option<Unmatched>,
    /// How long an asked request waits for `airlock network monitor`, in seconds (1 to 600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_timeout: Option<u64>,
    /// Also ask as a desktop notification (the session bus) while no monitor is connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_notify: Option<bool>,
    /// `[network.credentials.<name>]`: secrets the proxy adds at the edge (global config only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub credentials: BTreeMap<String, crate::credentials::CredentialEntry>,
    /// `[[network.ports]]`: forwards between the host's loopback and the sandbox's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<crate::ports::PortEntry>,
}

/// What a request no rule matches gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unmatched {
    /// 403 at once.
    #[default]
    Deny,
    /// It waits for a decision in `airlock network monitor` (denied when nobody answers in time).
    Ask,
}

impl Unmatched {
    pub fn as_str(self) -> &'static str {
        match self {
            Unmatched::Deny => "deny",
            Unmatched::Ask => "ask",
        }
    }
}

/// `[network] ask_timeout` when unset, in seconds.
pub const DEFAULT_ASK_TIMEOUT: u64 = 60;

/// The base allowlist the `allow` and `deny` rules are added to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EgressPreset {
    /// Model provider APIs, package registries and code hosts (listed in `docs/network.md`).
    #[default]
    Balanced,
    /// Every host (the address check still applies).
    AllowAll,
    /// No host; only the `allow` rules.
    DenyAll,
}

impl EgressPreset {
    pub fn as_str(self) -> &'static str {
        match self {
            EgressPreset::Balanced => "balanced",
            EgressPreset::AllowAll => "allow-all",
            EgressPreset::DenyAll => "deny-all",
        }
    }
}

/// A host rule with the config file that declared it (for error messages and `config show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRule {
    pub rule: String,
    pub origin: PathBuf,
}

/// The resolved `[network]` settings: global file, then the trusted project file on top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressSettings {
    pub preset: EgressPreset,
    pub allow: Vec<EgressRule>,
    pub deny: Vec<EgressRule>,
    pub allow_private: bool,
    /// Name → address; the project file's entry wins for a name both files map.
    pub resolve: BTreeMap<String, IpAddr>,
    /// `[network] upstream_proxy` as written (the later file wins); None: use the host's variables.
    /// Never serialised: it may hold a password.
    #[serde(default, skip_serializing)]
    pub upstream_proxy: Option<String>,
    #[serde(default)]
    pub unmatched: Unmatched,
    /// Seconds ([`DEFAULT_ASK_TIMEOUT`] unless a file sets it).
    #[serde(default = "default_ask_timeout")]
    pub ask_timeout: u64,
    /// Questions also go to the desktop (true unless a file sets it false).
    #[serde(default = "default_ask_notify")]
    pub ask_notify: bool,
}

fn default_ask_notify() -> bool {
    true
}

fn default_ask_timeout() -> u64 {
    DEFAULT_ASK_TIMEOUT
}

impl Default for EgressSettings {
    fn default() -> Self {
        EgressSettings {
            preset: EgressPreset::default(),
            allow: Vec::new(),
            deny: Vec::new(),
            allow_private: false,
            resolve: BTreeMap::new(),
            upstream_proxy: None,
            unmatched: Unmatched::default(),
            ask_timeout: DEFAULT_ASK_TIMEOUT,
            ask_notify: true,
        }
    }
}
