//! airlock's herdr plugin: one coding agent per sandbox, driven from herdr.
//!
//! Owns the plugin's actions, the pane-side bridge, the mapping store (one JSON file per herdr
//! pane, guarded by per-mapping lock files), the plugin config, the herdr CLI client and the
//! sandbox backend trait with its first implementation, Docker Sandboxes (`sbx`); and the herdr
//! socket filter (`filter`: what a sandbox may ask of the host's herdr, on a listener whose life
//! airlock-sockets owns). The sbx driver also backs `airlock run --backend sbx` (`sbx_run`: an
//! `airlock_sandbox::backend::Backend`). It does not own airlock's own sandbox (airlock-sandbox).

pub mod actions;
pub mod agents;
pub mod app;
pub mod backend;
pub mod bridge;
pub mod classify;
pub mod config;
pub mod confirm;
pub mod context;
pub mod error;
pub mod event;
pub mod filter;
pub mod git;
pub mod herdr;
pub mod launch;
pub mod lifecycle;
pub mod lock;
pub mod mapping;
pub mod naming;
pub mod panes;
pub mod prepare;
pub mod proc;
pub mod restore;
pub mod result;
pub mod run_action;
pub mod sbx_run;
pub mod store;

#[cfg(test)]
mod fuzz_tests;

pub use error::{ErrorKind, PluginError};
