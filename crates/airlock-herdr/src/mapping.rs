//! The mapping record: one herdr pane tied to one sandbox, with its lifecycle state and the
//! processes (bridge, shells, deletion) that currently own it.

use serde::{Deserialize, Serialize};

use crate::error::PluginError;
use crate::proc;

/// The only mapping file version this build reads and writes.
pub const MAPPING_VERSION: u32 = 1;

/// Where a mapping's sandbox is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleState {
    Provisional,
    Creating,
    Created,
    Prepared,
    Ready,
    Stopped,
    Missing,
    Failed,
}

impl LifecycleState {
    /// The sandbox exists and the agent can be attached.
    pub fn connectable(self) -> bool {
        matches!(
            self,
            LifecycleState::Prepared | LifecycleState::Ready | LifecycleState::Stopped
        )
    }

    /// No sandbox exists for the mapping, so not even a shell can open.
    pub fn without_sandbox(self) -> bool {
        matches!(self, LifecycleState::Provisional | LifecycleState::Missing)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleState::Provisional => "provisional",
            LifecycleState::Creating => "creating",
            LifecycleState::Created => "created",
            LifecycleState::Prepared => "prepared",
            LifecycleState::Ready => "ready",
            LifecycleState::Stopped => "stopped",
            LifecycleState::Missing => "missing",
            LifecycleState::Failed => "failed",
        }
    }
}

/// How the worktree reaches the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// Bind-mounted read-write at the same absolute path.
    #[default]
    Mount,
    /// A private clone inside the sandbox; the host checkout is read-only.
    Clone,
}

/// Which sandbox runs a mapping's agent: Docker Sandboxes, or airlock's own (`airlock run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Sbx,
    Airlock,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Sbx => "sbx",
            BackendKind::Airlock => "airlock",
        }
    }
}

impl WorkspaceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Mount => "mount",
            WorkspaceMode::Clone => "clone",
        }
    }
}

/// The last failure recorded on a mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastError {
    pub kind: String,
    pub message: String,
    pub at: String,
}

/// The bridge process that prepares the sandbox or has the agent attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeOwner {
    pub pid: Option<u32>,
    pub token: Option<String>,
    pub launch_id: Option<String>,
    pub started_at: Option<String>,
    pub exited_at: Option<String>,
}

/// An open-shell session attached to the mapping's sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellOwner {
    pub pid: u32,
    pub token: String,
    pub since: String,
    pub pane_id: String,
}

/// A deletion in progress: the process that claimed the mapping before its first `rm`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletionClaim {
    pub pid: u32,
    pub token: String,
    pub since: String,
}

/// One herdr pane tied to one sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PaneMapping {
    pub version: u32,
    pub pane_id: String,
    pub sandbox_name: String,
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub agent_kind: String,
    pub sbx_agent: String,
    pub local_path: String,
    pub workdir: String,
    pub workspace_mode: WorkspaceMode,
    pub lifecycle_state: LifecycleState,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub revision: String,
    #[serde(default)]
    pub source_pane_id: Option<String>,
    #[serde(default)]
    pub replaces_sandbox_names: Vec<String>,
    #[serde(default)]
    pub deleted_sandbox_names: Vec<String>,
    #[serde(default)]
    pub last_error: Option<LastError>,
    #[serde(default)]
    pub setup_script_ran_at: Option<String>,
    #[serde(default)]
    pub last_connected_at: Option<String>,
    #[serde(default)]
    pub adopted_from: Option<String>,
    #[serde(default)]
    pub bridge: Option<BridgeOwner>,
    #[serde(default)]
    pub shells: Vec<ShellOwner>,
    #[serde(default)]
    pub deletion: Option<DeletionClaim>,
    /// The backend that made the sandbox; absent means sbx (mappings written before there was a
    /// choice), so a config change never points a mapping at another backend's sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
}

impl PaneMapping {
    /// The sandboxes this mapping still owns: its current one plus every predecessor it replaced,
    /// minus those already deleted. Exactly what a deletion removes and its popup lists.
    pub fn deletion_targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for name in std::iter::once(&self.sandbox_name).chain(&self.replaces_sandbox_names) {
            if !name.is_empty() && !self.deleted_sandbox_names.contains(name) && !out.contains(name)
            {
                out.push(name.clone());
            }
        }
        out
    }

    /// Every sandbox name the mapping is responsible for, deleted or not: its current one first,
    /// then the ones it replaced.
    pub fn tracked_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for name in std::iter::once(&self.sandbox_name).chain(&self.replaces_sandbox_names) {
            if !name.is_empty() && !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    }

    /// The live bridge process, if its record names one that still runs for this pane.
    pub fn bridge_running(&self) -> bool {
        self.bridge
            .as_ref()
            .is_some_and(|b| match (b.pid, &b.token) {
                (Some(pid), token) => proc::process_owns(
                    pid,
                    token.as_deref().unwrap_or("-"),
                    "bridge",
                    Some(&self.pane_id),
                ),
                _ => false,
            })
    }

    /// The open-shell sessions still alive.
    pub fn live_shells(&self) -> Vec<&ShellOwner> {
        self.shells
            .iter()
            .filter(|s| proc::process_owns(s.pid, &s.token, "bridge", Some(&s.pane_id)))
            .collect()
    }

    /// Whether another live process is deleting this mapping's sandboxes.
    pub fn deletion_in_progress(&self) -> bool {
        self.deletion.as_ref().is_some_and(|d| {
            d.pid != std::process::id() && proc::process_owns(d.pid, &d.token, "action", None)
                || d.pid != std::process::id() && proc::process_owns(d.pid, &d.token, "event", None)
        })
    }

    /// Records `error` as the mapping's last error.
    pub fn record_error(&mut self, error: &PluginError) {
        self.last_error = Some(LastError {
            kind: error.kind.as_str().to_owned(),
            message: error.message.clone(),
            at: proc::now_iso(),
        });
    }
}

/// A plain mapping for unit tests: pane `pane` tied to a claude-code sandbox mounting `/repo`,
/// nothing running.
#[cfg(test)]
pub(crate) fn sample(pane: &str) -> PaneMapping {
    PaneMapping {
        version: MAPPING_VERSION,
        pane_id: pane.to_owned(),
        sandbox_name: "herdr-claude-code-0123456789ab".to_owned(),
        workspace_id: Some("w1".to_owned()),
        agent_kind: "claude-code".to_owned(),
        sbx_agent: "claude".to_owned(),
        local_path: "/repo".to_owned(),
        workdir: "/repo".to_owned(),
        workspace_mode: WorkspaceMode::Mount,
        lifecycle_state: LifecycleState::Provisional,
        created_at: None,
        updated_at: String::new(),
        revision: String::new(),
        source_pane_id: None,
        replaces_sandbox_names: vec![],
        deleted_sandbox_names: vec![],
        last_error: None,
        setup_script_ran_at: None,
        last_connected_at: None,
        adopted_from: None,
        bridge: None,
        shells: vec![],
        deletion: None,
        backend: None,
    }
}
