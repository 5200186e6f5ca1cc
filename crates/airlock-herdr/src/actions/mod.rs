//! The plugin's actions, one per file. Each returns its result-line fields; [`run`] prints the
//! `HERDR_SANDBOX_RESULT:` line first, whatever happens.

mod doctor;
mod fetch_changes;
mod info;
mod install_keybindings;
mod list_sandboxes;
mod open_port;
mod open_shell;
mod prune_mappings;
mod reconnect;
mod remove;
mod sandboxes;
mod start_agent;
mod stop;
pub mod target;

use serde_json::Value;

use crate::app::{App, Outcome};
use crate::context::PLUGIN_ID;
use crate::error::{PluginError, Result};
use crate::result;
use crate::store::PaneMapping;

pub use list_sandboxes::list_rows;
pub use open_port::parse_link;
pub use remove::{confirm_batch, delete_one, deleted_names, failure_json};

/// Every action id, as in herdr-plugin.toml.
pub const ACTIONS: &[&str] = &[
    "doctor",
    "install-keybindings",
    "start-agent",
    "reconnect",
    "open-shell",
    "fetch-changes",
    "stop",
    "info",
    "list-sandboxes",
    "prune-mappings",
    "sandboxes",
    "open-port",
    "replace-sandbox",
    "forget-mapping",
];

fn dispatch(app: &App, action: &str) -> Result<Outcome> {
    match action {
        "doctor" => doctor::run(app),
        "install-keybindings" => install_keybindings::run(app),
        "start-agent" => start_agent::run(app),
        "reconnect" => reconnect::run(app),
        "open-shell" => open_shell::run(app),
        "fetch-changes" => fetch_changes::run(app),
        "stop" => stop::run(app),
        "info" => info::run(app),
        "list-sandboxes" => list_sandboxes::run(app),
        "prune-mappings" => prune_mappings::run(app),
        "sandboxes" => sandboxes::run(app),
        "open-port" => open_port::run(app),
        "replace-sandbox" => remove::replace(app),
        "forget-mapping" => remove::forget(app),
        other => Err(PluginError::target(format!(
            "Unknown action {other:?}. Actions: {}.",
            ACTIONS.join(", ")
        ))),
    }
}

/// Runs `action` and prints its result line, then its human lines; returns the exit code.
pub fn run(action: &str) -> i32 {
    let app = App::from_env(None, None);
    let plugin = app
        .as_ref()
        .map_or(PLUGIN_ID, |a| a.plugin_id.as_str())
        .to_owned();
    // herdr's context is read once up front: garbage there fails every action the same way.
    match app.and_then(|app| app.context().and_then(|_| dispatch(&app, action))) {
        Ok(outcome) => {
            println!("{}", result::success(&plugin, action, outcome.fields));
            for line in outcome.text {
                println!("{line}");
            }
            0
        }
        Err(e) => {
            println!("{}", result::failure(&plugin, action, &e));
            eprintln!("{action} failed ({}): {}", e.kind, e.message);
            1
        }
    }
}

/// The mapping a pane action targets (see [`target::resolve`]).
pub fn target_mapping(app: &App) -> Result<PaneMapping> {
    let herdr = app.herdr()?;
    Ok(target::resolve(app, &herdr)?.mapping)
}

/// A mapping as result lines show it.
pub fn mapping_json(m: &PaneMapping) -> Value {
    serde_json::to_value(m).expect("a mapping serialises")
}
