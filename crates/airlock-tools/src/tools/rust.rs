//! Rust: rustup's toolchains read-only, cargo's registry and git caches as overlays (crates the
//! host has already downloaded resolve offline, new ones download into the sandbox), and never
//! `~/.cargo/credentials.toml`.

use airlock_sandbox::ToolMountMode;

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Rust;

/// `RUSTUP_HOME` and `CARGO_HOME` (their defaults under the home), with the variable to pass in
/// when the host sets one.
fn homes(host: &HostView) -> [(std::path::PathBuf, Option<(String, String)>); 2] {
    [
        env_dir(host, "RUSTUP_HOME", host.home_path(".rustup")),
        env_dir(host, "CARGO_HOME", host.home_path(".cargo")),
    ]
}

impl Tool for Rust {
    fn name(&self) -> &'static str {
        "rust"
    }
    fn description(&self) -> &'static str {
        "Rust toolchains (rustup, read-only) and cargo's caches (overlays)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["cargo", "rustc", "rustup"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let [(rustup, _), (cargo, _)] = homes(host);
        let readonly = |path| MountDecl::same(path, Category::Data).fixed(ToolMountMode::Readonly);
        let overlay = |path| MountDecl::same(path, Category::Cache).fixed(ToolMountMode::Overlay);
        vec![
            readonly(rustup),
            readonly(cargo.join("bin")),
            // Sourced by the user's shell rc files; only sets PATH.
            readonly(cargo.join("env")),
            readonly(cargo.join("config.toml")),
            readonly(cargo.join("config")),
            overlay(cargo.join("registry")),
            overlay(cargo.join("git")),
        ]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        Extras {
            env: homes(ctx.host)
                .into_iter()
                .filter_map(|(_, env)| env)
                .collect(),
            ..Extras::default()
        }
    }
}
