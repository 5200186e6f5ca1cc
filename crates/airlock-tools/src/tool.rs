//! What a tool is: the [`Tool`] trait every catalog entry implements, and the plain data it returns.

use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;
use airlock_sandbox::{GeneratedFile, ToolMountMode};
use serde::Serialize;

use crate::host::HostView;
use crate::settings::ToolConfig;

/// What kind of files a mount holds; decides its mode under `split`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    Config,
    Data,
    Cache,
    State,
    Runtime,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Config => "config",
            Category::Data => "data",
            Category::Cache => "cache",
            Category::State => "state",
            Category::Runtime => "runtime",
        }
    }

    /// The `split` mode: settings and sockets are shielded (writes discarded), the rest persists.
    pub fn split_mode(self) -> ToolMountMode {
        match self {
            Category::Config | Category::Runtime => ToolMountMode::Tmpoverlay,
            Category::Data | Category::Cache | Category::State => ToolMountMode::Overlay,
        }
    }
}

/// A mount's mode when neither the tool's `mount_mode` nor `[overlay] default` chooses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "mode")]
pub enum DefaultMode {
    /// By category ([`Category::split_mode`]).
    Split,
    /// The tool's documented default (mise, shells, nvim: read-only; agents' homes: overlay).
    Fixed(ToolMountMode),
    /// Always this mode, whatever the config says (git's credentials: read-only).
    Locked(ToolMountMode),
}

/// One host path a tool wants inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountDecl {
    /// The host path (env overrides and the host's XDG dirs applied).
    pub source: PathBuf,
    /// Where it appears inside (the host path, or its place under the home for XDG paths).
    pub target: PathBuf,
    pub category: Category,
    /// A required path that is missing makes the tool's check fail.
    pub required: bool,
    pub default: DefaultMode,
}

impl MountDecl {
    /// An optional mount at the same path inside, moded by category.
    pub fn same(path: PathBuf, category: Category) -> MountDecl {
        MountDecl {
            target: path.clone(),
            source: path,
            category,
            required: false,
            default: DefaultMode::Split,
        }
    }

    /// This mount with a fixed default mode.
    pub fn fixed(mut self, mode: ToolMountMode) -> MountDecl {
        self.default = DefaultMode::Fixed(mode);
        self
    }

    /// This mount with a mode the config cannot change.
    pub fn locked(mut self, mode: ToolMountMode) -> MountDecl {
        self.default = DefaultMode::Locked(mode);
        self
    }
}

/// A shell whose startup a tool can hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

    pub fn as_str(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Zsh => "zsh",
            Shell::Fish => "fish",
        }
    }

    /// Why the shell `self` is not used: it is not the user's `$SHELL` (when `$SHELL` is set).
    pub fn not_login_shell(self, host: &HostView) -> Option<String> {
        let login = host.var("SHELL")?;
        (Shell::from_path(login) != Some(self)).then(|| {
            format!(
                "{} is not your $SHELL ({login}); its startup files are not mounted",
                self.as_str()
            )
        })
    }

    /// The shell named by a `$SHELL` value (its base name).
    pub fn from_path(shell: &str) -> Option<Shell> {
        let name = shell.rsplit('/').next()?;
        Shell::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// The type of a `[tools.<name>]` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Bool,
    /// A string, one of these.
    Choice(&'static [&'static str]),
    /// An absolute path (`[tools.docker] socket`).
    Path,
    /// A list of strings, each one of the first list; the second names values that are refused
    /// with their own reason (`launch_*` in `[tools.kitty] extra_capabilities`).
    List(
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
    ),
}

/// One key a tool accepts in its `[tools.<name>]` table (besides `enabled` and `mount_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    pub name: &'static str,
    pub kind: KeyKind,
    /// The default, as TOML text.
    pub default: &'static str,
    pub help: &'static str,
}

/// What a tool sees when it plans its contribution.
pub struct ToolContext<'a> {
    pub host: &'a HostView,
    /// The tool's validated `[tools.<name>]` settings.
    pub config: &'a ToolConfig,
    /// The sandbox's network mode (after `--network`).
    pub network: NetworkMode,
    /// The project root on the host (canonical).
    pub project: &'a Path,
    /// Only describe (for `tools info`): change nothing on the host.
    pub dry_run: bool,
}

/// What a tool adds besides its home mounts: environment, generated files, extra warnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras {
    pub env: Vec<(String, String)>,
    /// Directories put in front of `PATH`.
    pub path_prepend: Vec<PathBuf>,
    pub files: Vec<GeneratedFile>,
    /// Mounts outside the home (git's `.git`, the SSH agent socket), already moded.
    pub fixed_mounts: Vec<airlock_sandbox::ToolMount>,
    pub warnings: Vec<String>,
    /// See [`airlock_sandbox::Contributions::host_executed`].
    pub host_executed: Vec<PathBuf>,
    /// See [`airlock_sandbox::Contributions::shims`].
    pub shims: Vec<String>,
}

/// One catalog entry. Implementations are plain values; the catalog owns them.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// Binaries whose presence on `PATH` makes the tool available (the first found is shown).
    /// The arguments that make the tool's binary print its version and exit (`tools check` runs
    /// it inside a sandbox to prove the tool works there).
    fn version_args(&self) -> &'static [&'static str] {
        &["--version"]
    }
    fn binaries(&self) -> &'static [&'static str] {
        &[]
    }
    /// The host paths the tool wants inside, whether or not they exist.
    fn mounts(&self, _host: &HostView) -> Vec<MountDecl> {
        Vec::new()
    }
    /// Host paths that depend on the tool's settings (git's credentials in `readwrite` mode).
    fn config_mounts(&self, _host: &HostView, _config: &ToolConfig) -> Vec<MountDecl> {
        Vec::new()
    }
    /// Environment, generated files and fixed mounts. Called only for an available, enabled tool.
    fn extras(&self, _ctx: &ToolContext) -> Extras {
        Extras::default()
    }
    /// A line for the shell's startup, if the tool hooks it.
    fn shell_init(&self, _shell: Shell) -> Option<&'static str> {
        None
    }
    /// The tool-specific `[tools.<name>]` keys.
    fn keys(&self) -> &'static [KeySpec] {
        &[]
    }
    /// Creates what the tool's mounts need on the host before a launch (an empty `sessions/` in an
    /// existing agent home, so sessions persist from the first run); true when it created anything.
    /// Called by [`plan`](crate::plan) only, never by the read-only commands.
    fn prepare_host(&self, _host: &HostView) -> bool {
        false
    }
    /// Why the tool is not used on this host although present (a shell that is not `$SHELL`).
    fn not_used_because(&self, _host: &HostView) -> Option<String> {
        None
    }
    /// Whether `mount_mode` applies (tools without home mounts do not accept it).
    fn has_mount_mode(&self) -> bool {
        true
    }
    /// `enabled` when the tool has no table: false for the opt-in ones (docker, zellij), which
    /// hand the sandbox a host daemon.
    fn enabled_by_default(&self) -> bool {
        true
    }
}
