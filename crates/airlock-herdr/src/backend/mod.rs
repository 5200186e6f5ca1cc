//! The sandbox backend behind the plugin: create / exec / attach / stop / remove / list / ports /
//! copy. Two implementations: Docker Sandboxes (`sbx`) and airlock's own sandbox (`airlock run`);
//! `choose` picks one for config.json's `backend`.

pub mod airlock;
pub mod airlock_record;
pub mod choose;
pub mod mixed;
pub mod sbx;
pub mod sbx_parse;

use serde::Serialize;

use crate::error::Result;
use crate::proc::Captured;

/// One sandbox as the backend lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxInfo {
    pub name: String,
    pub status: Option<String>,
    pub agent: Option<String>,
    pub workspaces: Vec<String>,
    pub ports: Vec<PortMapping>,
}

/// A published port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    pub host_port: Option<u16>,
    pub sandbox_port: u16,
}

/// What to create.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateRequest {
    pub name: String,
    /// The sbx agent or kit reference.
    pub agent: String,
    /// The worktree first, then extra workspaces (`PATH[:ro]`).
    pub paths: Vec<String>,
    pub clone: bool,
    pub template: Option<String>,
    pub kits: Vec<String>,
    pub kit_args: Vec<String>,
    pub env: Vec<String>,
    pub env_files: Vec<String>,
    pub publish: Vec<String>,
    pub cpus: Option<String>,
    pub memory: Option<String>,
    pub deny_network: Vec<String>,
}

/// A command inside a sandbox.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecRequest {
    pub name: String,
    pub workdir: Option<String>,
    /// `KEY=VALUE` entries.
    pub env: Vec<String>,
    pub argv: Vec<String>,
}

/// Version and daemon health, for `doctor`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendStatus {
    /// The backend's own version document (`sbx version --json` as printed).
    pub version: serde_json::Value,
    /// The client version found in it, for the human line and the version check.
    pub client_version: Option<String>,
    pub version_warning: Option<String>,
    pub daemon: serde_json::Value,
}

/// A sandbox implementation the plugin drives. Every captured call has a timeout; a call past it is
/// a `daemon` failure. Errors are classified from the CLI output.
pub trait SandboxBackend: Send + Sync {
    /// Every sandbox; an unreadable listing is an error, never an empty list.
    fn list(&self) -> Result<Vec<SandboxInfo>>;
    /// `name` if the listing has it.
    fn find(&self, name: &str) -> Result<Option<SandboxInfo>> {
        Ok(self.list()?.into_iter().find(|s| s.name == name))
    }
    /// Creates a sandbox (the slow timeout: the first create pulls an image).
    fn create(&self, request: &CreateRequest) -> Result<Captured>;
    /// Runs a command, capturing its output; a non-zero exit is returned, not an error.
    fn exec(&self, request: &ExecRequest, slow: bool) -> Result<Captured>;
    /// Runs a command attached to this process's terminal, without a timeout; its exit code.
    fn attach(&self, request: &ExecRequest, host_env: &[(String, String)]) -> Result<i32>;
    fn stop(&self, name: &str) -> Result<()>;
    fn remove(&self, name: &str) -> Result<()>;
    fn ports(&self, name: &str) -> Result<Vec<PortMapping>>;
    /// Copies between host and sandbox; `NAME:/path` names a path inside a sandbox.
    fn copy(&self, source: &str, destination: &str) -> Result<()>;
    fn status(&self) -> Result<BackendStatus>;
    /// Whether the backend answers at all (daemon reachable, signed in): what start-agent checks
    /// before it opens a pane. A failure is classified like any other call.
    fn check(&self) -> Result<()>;
    /// Where the mapping's checkout is inside the sandbox (clone mode: sbx keeps the host path).
    fn checkout_path(&self, name: &str, local_path: &str) -> Result<String> {
        let _ = name;
        Ok(local_path.to_owned())
    }
    /// A path inside the sandbox for a file the host copies out afterwards.
    fn scratch_file(&self, name: &str, file: &str) -> Result<String> {
        let _ = name;
        Ok(format!("/tmp/{file}"))
    }
    /// What a fetch-changes bundle carries: `git bundle create` arguments selecting the refs, and
    /// the refspec that maps them under `refs/remotes/<remote>/` on the host.
    fn bundle_refs(&self, remote: &str) -> (Vec<String>, String) {
        (
            vec!["--branches".to_owned()],
            format!("+refs/heads/*:refs/remotes/{remote}/*"),
        )
    }
    /// Whether preparing a sandbox probes for the agent's program inside it first.
    fn probes_agent(&self) -> bool {
        true
    }
    fn kind(&self) -> crate::store::BackendKind {
        crate::store::BackendKind::Sbx
    }
}
