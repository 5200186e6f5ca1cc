//! `[overlay]` and `[tools.<name>]` from the layered profile, checked against each tool's schema.

use std::collections::BTreeMap;
use std::path::PathBuf;

use airlock_config::{OverlayDefault, Profile, ToolSetting, ToolValue};

use crate::catalog::Catalog;
use crate::tool::{KeyKind, Tool};

/// A `[tools]` table the catalog cannot accept. Each message names the file, the table, the key
/// or value, and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolConfigError {
    #[error(
        "{}: [tools.{tool}] is not a known tool; known tools: {known}; rename or remove the table",
        origin.display()
    )]
    UnknownTool {
        tool: String,
        origin: PathBuf,
        known: String,
    },
    #[error(
        "{}: [tools.{tool}] has no key {key:?}; valid keys for {tool}: {valid}",
        origin.display()
    )]
    UnknownKey {
        tool: String,
        key: String,
        origin: PathBuf,
        valid: String,
    },
    #[error(
        "{}: [tools.{tool}] {key} = {value} is not valid; expected {expected}",
        origin.display()
    )]
    BadValue {
        tool: String,
        key: String,
        value: String,
        origin: PathBuf,
        expected: String,
    },
}

/// One tool's validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolConfig {
    /// `enabled` (default true).
    pub enabled: bool,
    /// `mount_mode`, when set.
    pub mount_mode: Option<OverlayDefault>,
    /// The tool-specific keys that were set, already type-checked.
    pub values: BTreeMap<String, ToolValue>,
}

impl Default for ToolConfig {
    fn default() -> Self {
        ToolConfig {
            enabled: true,
            mount_mode: None,
            values: BTreeMap::new(),
        }
    }
}

impl ToolConfig {
    /// A boolean key, or `default` when unset.
    pub fn flag(&self, key: &str, default: bool) -> bool {
        match self.values.get(key) {
            Some(ToolValue::Bool(b)) => *b,
            _ => default,
        }
    }

    /// A string key, when set.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.values.get(key) {
            Some(ToolValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// A list key, or empty when unset.
    pub fn list(&self, key: &str) -> &[String] {
        match self.values.get(key) {
            Some(ToolValue::Strings(items)) => items,
            _ => &[],
        }
    }

    /// A string key, or `default` when unset.
    pub fn choice<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        match self.values.get(key) {
            Some(ToolValue::String(s)) => s,
            _ => default,
        }
    }
}

/// The validated `[overlay]` and `[tools]` settings of one launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub overlay_default: OverlayDefault,
    /// Per tool; a tool without a table has [`ToolConfig::default`].
    pub tools: BTreeMap<String, ToolConfig>,
}

const COMMON_KEYS: [&str; 2] = ["enabled", "mount_mode"];

impl Settings {
    /// The config for `tool` (defaults when it has no table).
    pub fn tool(&self, tool: &str) -> ToolConfig {
        self.tools.get(tool).cloned().unwrap_or_default()
    }

    /// Checks every `[tools.<name>]` table of `profile` against `catalog`.
    pub fn from_profile(profile: &Profile, catalog: &Catalog) -> Result<Settings, ToolConfigError> {
        let mut tools = BTreeMap::new();
        for (name, keys) in &profile.tools {
            let Some(tool) = catalog.get(name) else {
                let origin = keys.values().next().map(|s| s.origin.clone());
                return Err(ToolConfigError::UnknownTool {
                    tool: name.clone(),
                    origin: origin.unwrap_or_default(),
                    known: catalog.names().join(", "),
                });
            };
            tools.insert(name.clone(), validate_tool(tool, keys)?);
        }
        for tool in catalog.iter().filter(|t| !t.enabled_by_default()) {
            tools
                .entry(tool.name().to_owned())
                .or_insert_with(|| ToolConfig {
                    enabled: false,
                    ..ToolConfig::default()
                });
        }
        Ok(Settings {
            overlay_default: profile.overlay_default,
            tools,
        })
    }
}

fn validate_tool(
    tool: &dyn Tool,
    keys: &BTreeMap<String, ToolSetting>,
) -> Result<ToolConfig, ToolConfigError> {
    let mut config = ToolConfig {
        enabled: tool.enabled_by_default(),
        ..ToolConfig::default()
    };
    for (key, setting) in keys {
        let bad = |expected: String| ToolConfigError::BadValue {
            tool: tool.name().to_owned(),
            key: key.clone(),
            value: setting.value.to_toml(),
            origin: setting.origin.clone(),
            expected,
        };
        match (key.as_str(), &setting.value) {
            ("enabled", ToolValue::Bool(b)) => config.enabled = *b,
            ("enabled", _) => return Err(bad("true or false".into())),
            ("mount_mode", value) if tool.has_mount_mode() => {
                let mode = match value {
                    ToolValue::String(s) => OverlayDefault::parse(s),
                    _ => None,
                };
                let choices: Vec<&str> = OverlayDefault::ALL.iter().map(|m| m.as_str()).collect();
                config.mount_mode = Some(mode.ok_or_else(|| bad(one_of(&choices)))?);
            }
            _ => {
                let Some(spec) = tool.keys().iter().find(|k| k.name == key) else {
                    return Err(ToolConfigError::UnknownKey {
                        tool: tool.name().to_owned(),
                        key: key.clone(),
                        origin: setting.origin.clone(),
                        valid: valid_keys(tool).join(", "),
                    });
                };
                match (spec.kind, &setting.value) {
                    (KeyKind::Bool, ToolValue::Bool(_)) => {}
                    (KeyKind::Bool, _) => return Err(bad("true or false".into())),
                    (KeyKind::Choice(choices), ToolValue::String(s))
                        if choices.contains(&s.as_str()) => {}
                    (KeyKind::Choice(choices), _) => return Err(bad(one_of(choices))),
                    (KeyKind::List(choices, refused), ToolValue::Strings(items)) => {
                        for item in items {
                            if let Some((_, why)) = refused.iter().find(|(r, _)| r == item) {
                                return Err(bad(format!("a list without \"{item}\" ({why})")));
                            }
                            if !choices.contains(&item.as_str()) {
                                return Err(bad(format!("a list of {}", one_of(choices))));
                            }
                        }
                    }
                    (KeyKind::Path, ToolValue::String(s)) if s.starts_with('/') => {}
                    (KeyKind::Path, _) => return Err(bad("an absolute path".into())),
                    (KeyKind::List(choices, _), _) => {
                        return Err(bad(format!("a list of {}", one_of(choices))));
                    }
                }
                config.values.insert(key.clone(), setting.value.clone());
            }
        }
    }
    Ok(config)
}

/// Every key `[tools.<tool>]` accepts.
pub fn valid_keys(tool: &dyn Tool) -> Vec<&'static str> {
    COMMON_KEYS
        .into_iter()
        .filter(|k| *k != "mount_mode" || tool.has_mount_mode())
        .chain(tool.keys().iter().map(|k| k.name))
        .collect()
}

fn one_of(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
    format!("one of {}", quoted.join(", "))
}
