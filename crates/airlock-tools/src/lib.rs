//! airlock's tool catalog.
//!
//! Owns the tools and agents a sandbox carries (one file per tool under `tools/`, git under `git/`):
//! how each is detected on the host, which host paths it mounts and how (the mount modes and their
//! precedence), the environment and generated files it adds, its shell init, its `[tools.<name>]`
//! settings, and the rows of `airlock tools check`. [`plan`] turns all of it into the sandbox's
//! [`Contributions`](airlock_sandbox::Contributions); it does not mount anything itself.

pub mod catalog;
pub mod git;
pub mod host;
pub mod plan;
pub mod report;
pub mod resolve;
pub mod settings;
pub mod shell;
pub mod startup;
pub mod tool;
mod tools;
pub mod wrappers;

pub use catalog::Catalog;
pub use git::session::GitSession;
pub use host::{HostView, PathState};
pub use plan::{Detection, Status, detect, plan, plan_for, resolve_mode, shell_init};
pub use settings::{Settings, ToolConfig, ToolConfigError};
pub use tool::{Category, DefaultMode, MountDecl, Shell, Tool};
