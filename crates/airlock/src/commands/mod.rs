//! One module per subcommand: parse results in, rendered output and an exit code out.

pub mod agents;
pub mod bridge;
pub mod completion;
pub mod config;
pub mod credentials;
pub mod doctor;
pub mod explain;
pub mod filters;
pub mod forward;
pub mod herdr;
pub mod logs;
pub mod monitor;
pub mod overlay;
pub mod overlay_changes;
pub mod overrides;
pub mod run;
pub mod sandboxes;
pub mod scratchpad;
pub mod sessions;
pub mod suggest;
pub mod tools;
pub mod trust;
pub mod worktree;
