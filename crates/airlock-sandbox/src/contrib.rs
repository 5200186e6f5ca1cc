//! What tools contribute to a sandbox: computed by `airlock-tools` from the host and the config,
//! consumed by the spec builder. Plain data, so both sides are tested without launching anything.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the detected tools add to one launch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contributions {
    pub mounts: Vec<ToolMount>,
    /// Environment variables; they override the base environment but not airlock's own variables.
    pub env: BTreeMap<String, String>,
    /// Files generated on the host (a safe gitconfig, a starship config copy, ...), bound read-only.
    pub files: Vec<GeneratedFile>,
    /// Lines airlock prints once before the launch (a tool dir that could not be read, ...).
    pub warnings: Vec<String>,
    /// Arguments added when airlock starts the user's shell itself (no command given), by the
    /// shell's file name: e.g. `bash` → `--rcfile <airlock's rc>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shell_args: BTreeMap<String, Vec<String>>,
    /// Paths in the project that host programs run code from (the hook dir the host's
    /// `core.hooksPath` names) and that did not exist at launch: checked when the session ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_executed: Vec<PathBuf>,
    /// Command names the airlock binary answers as inside, first on PATH (beside the bridge's
    /// shims): `git` when `.git` is read-only, to say why a commit failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shims: Vec<String>,
}

/// One host path a tool wants inside, already resolved to a mount mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolMount {
    /// The tool that asked for it (for messages and upper-dir names).
    pub tool: String,
    /// The host path (it exists; detection checked).
    pub source: PathBuf,
    /// Where it appears inside (usually the same path).
    pub target: PathBuf,
    pub mode: ToolMountMode,
    /// Whether the host path is a directory (else a regular file).
    pub is_dir: bool,
}

/// How a tool mount behaves, after `[tools.<name>] mount_mode` > `[overlay] default` > `split`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolMountMode {
    /// Host content visible; writes kept in the sandbox's state root across runs, never on the host.
    Overlay,
    /// Host content visible; writes discarded at exit.
    Tmpoverlay,
    Readonly,
    /// Writes reach the host (explicit opt-in).
    Readwrite,
    /// Host content visible; writes kept in a layer of the tool's own (`layers/<tool>` in the
    /// state root), which the tool's session code locks, reads back and clears. Never leased or
    /// demoted like `overlay`. Only the git tool uses it, for `.git`; not a config value.
    Layer,
    /// An empty writable directory in place of the host's, discarded at exit: a tool's own temp
    /// dir, whose host content (leftovers of host runs) the sandbox has no use for, and whose
    /// host-made subdirectories an overlay could not rename (EXDEV). Not a config value.
    Scratch,
}

/// A file a tool generates for the sandbox, written under the state root and bound read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratedFile {
    pub tool: String,
    /// Where it appears inside.
    pub target: PathBuf,
    pub content: String,
}
