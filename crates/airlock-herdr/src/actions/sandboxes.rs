//! sandboxes: opens the live overlay of every sandbox (the `sandboxes` pane of the manifest).

use crate::app::{App, Outcome};
use crate::error::Result;

/// The overlay's entrypoint id in herdr-plugin.toml.
pub const OVERLAY_ENTRYPOINT: &str = "sandboxes";

pub fn run(app: &App) -> Result<Outcome> {
    let herdr = app.herdr()?;
    herdr.open_plugin_pane(&app.plugin_id, OVERLAY_ENTRYPOINT, &[])?;
    Ok(Outcome::default()
        .field("entrypoint", OVERLAY_ENTRYPOINT)
        .line("Opened the sandboxes overlay; q closes it."))
}
