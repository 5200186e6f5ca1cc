//! The `launch_overlay` capability: open a tab on the host, type one command into it, close it.
//!
//! This is host code execution by design (revdiff's launchers open a tab and run their script in
//! it), so each step is narrowed to what a launcher needs:
//! - `tab.create` starts a host shell, so nothing the sandbox chose may shape that shell: no
//!   `env` (an `LD_PRELOAD` or `BASH_ENV` would run sandbox code on the host), a `cwd` that is
//!   the project directory or absent (a prompt in a sandbox-prepared subdirectory runs git on a
//!   planted `.git`), the sandbox's own workspace or none;
//! - `tab.close` and `pane.send_input` only on what herdr said those `tab.create`s made
//!   ([`Owned`]);
//! - `pane.send_input` is one line of text and Enter, as `herdr pane run` sends it, and the line
//!   typed is the one the policy's [`ScriptLauncher`] makes of it (a validated copy of the
//!   script, outside the sandbox's reach), never the sandbox's text.

use std::path::Path;

use serde_json::{Map, Value};

use super::owned::Owned;
use super::params::{PaneSendInputParams, TabCreateParams, TabTargetParams};
use super::policy::{Checked, LaunchOverlay, schema};

/// The longest tab label accepted, in characters.
pub const LABEL_MAX_CHARS: usize = 80;
/// The longest command line `pane.send_input` may type, in bytes.
pub const COMMAND_MAX_BYTES: usize = 4096;
/// The one key `pane.send_input` must send after its text (herdr's spelling).
pub const ENTER: &str = "Enter";

pub(super) fn tab_create(
    params: Map<String, Value>,
    launch: &LaunchOverlay,
) -> Result<Checked, &'static str> {
    let mut params: TabCreateParams = schema(params)?;
    if params.env.as_ref().is_some_and(|env| !env.is_empty()) {
        return Err("tab.create env must be empty");
    }
    // Dropped rather than forwarded empty: what herdr gets never carries an env.
    params.env = None;
    if let Some(cwd) = &params.cwd
        && Path::new(cwd).as_os_str() != launch.project.as_os_str()
    {
        return Err("tab.create cwd must be the project directory");
    }
    if let Some(workspace) = &params.workspace_id
        && launch.workspace_id.as_ref() != Some(workspace)
    {
        return Err("tab.create names another workspace");
    }
    if let Some(label) = &params.label {
        if label.chars().count() > LABEL_MAX_CHARS {
            return Err("tab label over 80 characters");
        }
        if label.chars().any(char::is_control) {
            return Err("tab label has a control character");
        }
    }
    Ok(Checked::TabCreate(params))
}

pub(super) fn tab_close(
    params: Map<String, Value>,
    owned: &Owned,
) -> Result<Checked, &'static str> {
    let params: TabTargetParams = schema(params)?;
    if !owned.owns_tab(&params.tab_id) {
        return Err("tab not created by this sandbox");
    }
    Ok(Checked::TabTarget(params))
}

pub(super) fn send_input(
    params: Map<String, Value>,
    launch: &LaunchOverlay,
    owned: &Owned,
) -> Result<Checked, &'static str> {
    let params: PaneSendInputParams = schema(params)?;
    if !owned.owns_pane(&params.pane_id) {
        return Err("pane not created by this sandbox");
    }
    if !matches!(params.keys.as_deref(), Some([key]) if key == ENTER) {
        return Err("pane.send_input keys must be exactly Enter");
    }
    let text = params.text.as_deref().unwrap_or_default();
    check_command(text)?;
    // Only a request that passed every other rule reaches the launcher.
    let command = launch.launcher.relocate(text)?;
    // The launcher is airlock's, but what it returns is typed into a host shell all the same.
    check_command(&command).map_err(|_| "the launcher's command is not one line")?;
    Ok(Checked::SendInput(PaneSendInputParams {
        pane_id: params.pane_id,
        text: Some(command),
        keys: Some(vec![ENTER.to_owned()]),
    }))
}

/// One line a shell runs as one command once Enter follows: not empty, at most
/// [`COMMAND_MAX_BYTES`], and no control character (a newline or carriage return would be a second
/// command, an escape sequence would drive the terminal).
fn check_command(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        return Err("pane.send_input needs text");
    }
    if text.len() > COMMAND_MAX_BYTES {
        return Err("pane.send_input text over 4096 bytes");
    }
    if text.chars().any(char::is_control) {
        return Err("pane.send_input text has a control character");
    }
    Ok(())
}

/// revdiff's overlay as herdr's launcher: `sh <script in the shared temp directory>` becomes
/// `/bin/sh '<airlock's own script>'` (see `airlock_sockets::overlay`).
impl super::ScriptLauncher for airlock_sockets::overlay::RevdiffOverlay {
    fn relocate(&self, command: &str) -> Result<String, &'static str> {
        self.relocate_command(command)
    }
}
