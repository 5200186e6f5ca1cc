//! airlock's sandbox.
//!
//! Owns the [`SandboxSpec`] (the one contract between what is sandboxed and how), the pure builder that
//! turns a config [`Profile`](airlock_config::Profile) and [`HostFacts`] into a spec, the backends
//! that launch a spec (`backend`: native, bwrap), one launch's session from state to cleanup
//! (`session`), the supervisor that waits for it (with its port forwards and
//! control socket, `ports`), the per-project state roots with their session locks, and what their
//! overlays kept, brought back on request (`overlay_changes`). It does not know which tools exist
//! or how the network gates work.

pub mod backend;
pub mod builder;
pub mod contrib;
pub mod doctor;
pub mod hide;
pub mod host;
pub mod mount_patterns;
pub mod native;
pub mod overlay_changes;
pub mod ports;
pub mod session;
pub mod spec;
pub mod state;
pub mod trust;

pub use builder::{RunRequest, SpecError, build, build_with_tools};
pub use contrib::{Contributions, GeneratedFile, ToolMount, ToolMountMode};
pub use host::HostFacts;
pub use overlay_changes::Overlays;
pub use spec::*;
