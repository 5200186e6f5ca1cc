//! `airlock overlay diff|apply` (being built).

use airlock_config::XdgPaths;

/// `airlock overlay …`.
#[derive(Debug, clap::Subcommand)]
pub enum OverlayCommand {
    /// Show what overlay-mode tool directories kept in this project's sandbox
    Diff,
}

pub fn run(_paths: &XdgPaths, _command: &OverlayCommand) -> anyhow::Result<i32> {
    anyhow::bail!("airlock overlay: not built yet")
}
