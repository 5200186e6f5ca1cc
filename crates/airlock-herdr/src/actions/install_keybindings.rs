//! install-keybindings: appends the four key bindings to herdr's config.toml when missing, checks
//! the result with `herdr config check` (restoring the backup if it is rejected), then reloads.

use std::path::PathBuf;

use serde_json::json;

use crate::app::{App, Outcome};
use crate::error::{PluginError, Result};

/// `(chord, action, description)`: chords herdr 0.9 leaves unused.
pub const BINDINGS: &[(&str, &str, &str)] = &[
    (
        "prefix+shift+a",
        "start-agent",
        "start an agent in a sandbox",
    ),
    (
        "prefix+shift+b",
        "reconnect",
        "reconnect the sandboxed agent",
    ),
    (
        "prefix+shift+s",
        "open-shell",
        "open a shell in the sandbox",
    ),
    ("prefix+shift+o", "sandboxes", "show every sandbox"),
];

/// Chords herdr itself uses, and what for: never taken, and a binding found on one is reported.
const RESERVED: &[(&str, &str)] = &[
    ("prefix+shift+d", "closes the workspace"),
    ("prefix+shift+r", "reloads the config"),
];

/// herdr's config.toml: `HERDR_CONFIG_PATH`, else `$XDG_CONFIG_HOME/herdr/config.toml`, else
/// `~/.config/herdr/config.toml` (where herdr itself looks).
fn herdr_config_path(app: &App) -> PathBuf {
    if let Some(p) = std::env::var("HERDR_CONFIG_PATH")
        .ok()
        .filter(|v| !v.is_empty())
    {
        return PathBuf::from(p);
    }
    std::env::var("XDG_CONFIG_HOME")
        .ok()
        .filter(|v| v.starts_with('/'))
        .map_or_else(|| app.home.join(".config"), PathBuf::from)
        .join("herdr")
        .join("config.toml")
}

/// Existing `[[keys.command]]` entries as (key, command).
fn existing_bindings(text: &str) -> Result<Vec<(String, String)>> {
    let doc: toml::Value = toml::from_str(text)
        .map_err(|e| PluginError::config(format!("herdr's config.toml does not parse: {e}")))?;
    let entries = doc
        .get("keys")
        .and_then(|k| k.get("command"))
        .and_then(toml::Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(entries
        .iter()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(toml::Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            (s("key"), s("command"))
        })
        .collect())
}

pub fn run(app: &App) -> Result<Outcome> {
    let herdr = app.herdr()?;
    let path = herdr_config_path(app);
    let original = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(PluginError::config(format!(
                "Could not read {}: {e}.",
                path.display()
            )));
        }
    };
    let existing = existing_bindings(original.as_deref().unwrap_or(""))?;
    let (mut added, mut present, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    let mut block = String::new();
    for (key, action, description) in BINDINGS {
        let command = format!("{}.{action}", app.plugin_id);
        // An action bound already (on any chord) is never bound twice.
        if let Some((bound, _)) = existing.iter().find(|(_, c)| *c == command) {
            match RESERVED.iter().find(|(k, _)| k == bound) {
                Some((_, what)) => warnings.push(format!(
                    "{action} is bound to {bound}, which herdr uses itself ({what}); left alone, move it to another chord by hand."
                )),
                None => present.push(json!({"key": bound, "action": action})),
            }
        } else if let Some((_, other)) = existing.iter().find(|(k, _)| k == key) {
            warnings.push(format!("{key} is already bound to {other}; left alone, bind {action} to another chord by hand."));
        } else if RESERVED.iter().any(|(k, _)| k == key) {
            warnings.push(format!("{key} is a herdr chord; not taken."));
        } else {
            block.push_str(&format!(
                "\n[[keys.command]]\nkey = \"{key}\"\ntype = \"plugin_action\"\ncommand = \"{command}\"\ndescription = \"{description}\"\n"
            ));
            added.push(json!({"key": key, "action": action}));
        }
    }
    let mut reloaded = false;
    if !added.is_empty() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                PluginError::config(format!("Could not create {}: {e}.", parent.display()))
            })?;
        }
        let backup = path.with_extension("toml.airlock-backup");
        if let Some(text) = &original {
            std::fs::write(&backup, text).map_err(|e| {
                PluginError::config(format!("Could not back up {}: {e}.", path.display()))
            })?;
        }
        let new_text = format!("{}{block}", original.clone().unwrap_or_default());
        std::fs::write(&path, new_text).map_err(|e| {
            PluginError::config(format!("Could not write {}: {e}.", path.display()))
        })?;
        if let Err(e) = herdr.run(&["config", "check"], "checking the config") {
            match &original {
                Some(_) => {
                    let _ = std::fs::rename(&backup, &path);
                }
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
            return Err(PluginError::config(format!(
                "herdr config check rejected the new key bindings; {} was restored to its previous content and herdr was not reloaded.",
                path.display()
            ))
            .with_output(e.output.unwrap_or(e.message)));
        }
        let _ = std::fs::remove_file(&backup);
        reloaded = herdr
            .run(&["server", "reload-config"], "reloading the config")
            .is_ok();
    }
    let line = format!(
        "added {}, already present {}, warnings {}",
        added.len(),
        present.len(),
        warnings.len()
    );
    Ok(Outcome::default()
        .field("configPath", path.display().to_string())
        .field("added", added)
        .field("existing", present)
        .field("warnings", warnings)
        .field("reloaded", reloaded)
        .line(line))
}
