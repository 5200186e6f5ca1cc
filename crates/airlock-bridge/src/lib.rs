//! The host bridge: the only way a sandbox reaches the host's browser, editor, git credential
//! helper, speakers and a few allowlisted host commands.
//!
//! Owns the daemon (`airlock bridge daemon`: routes, bearer-token auth, body caps, rate buckets,
//! the audit log), the client the in-sandbox shims use (unix socket first, TCP fallback), the shims
//! themselves (names of `airlock-shim`, or of the airlock binary when it is missing), and install/status/uninstall of the per-user supervisor
//! unit (systemd user unit or LaunchAgent). It does not build sandboxes: the spec builder mounts the
//! state dir and the shim dir described in [`paths`].

pub mod audit;
pub mod callback;
pub mod client;
pub mod commands;
pub mod daemon;
pub mod gate;
pub mod install;
pub mod launcher;
pub mod paths;
pub mod rate;
pub mod routes;
pub mod scope;
pub mod server;
pub mod shims;
pub mod state;
pub mod status;
pub mod supervisor;
pub mod token;

pub use paths::BridgePaths;
pub use token::{Token, TokenError};
