//! config.json: every key of the plugin, strictly decoded, then validated with the key named.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agents::{self, Agent, CustomAgent};
use crate::error::{PluginError, Result};
use crate::store::{BackendKind, WorkspaceMode};

/// Where start-agent splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PaneDirection {
    #[default]
    Right,
    Down,
}

/// Where start-agent puts the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OpenIn {
    #[default]
    Split,
    Tab,
}

/// The plugin configuration (`config.json` in the plugin's config directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PluginConfig {
    pub agent_kind: String,
    pub agent_args: BTreeMap<String, Vec<String>>,
    pub agent_env: Vec<String>,
    pub custom_agents: BTreeMap<String, CustomAgent>,
    pub workspace_mode: WorkspaceMode,
    pub template: Option<String>,
    pub kits: Vec<String>,
    pub kit_args: Vec<String>,
    pub env: Vec<String>,
    pub env_files: Vec<String>,
    pub publish: Vec<String>,
    pub cpus: Option<serde_json::Number>,
    pub memory: Option<String>,
    pub deny_network: Vec<String>,
    pub extra_workspaces: Vec<String>,
    pub sbx_bin: Option<String>,
    pub shell: String,
    pub pane_direction: PaneDirection,
    pub pane_ratio: f64,
    pub open_in: OpenIn,
    pub report_agent_status: bool,
    pub sandbox_name_prefix: String,
    pub cleanup_on_worktree_removed: bool,
    /// `"airlock"` or `"sbx"`; unset: sbx when it is installed and signed in, else airlock.
    pub backend: Option<BackendKind>,
}

impl Default for PluginConfig {
    fn default() -> PluginConfig {
        PluginConfig {
            agent_kind: "claude-code".to_owned(),
            agent_args: BTreeMap::new(),
            agent_env: Vec::new(),
            custom_agents: BTreeMap::new(),
            workspace_mode: WorkspaceMode::Mount,
            template: None,
            kits: Vec::new(),
            kit_args: Vec::new(),
            env: Vec::new(),
            env_files: Vec::new(),
            publish: Vec::new(),
            cpus: None,
            memory: None,
            deny_network: Vec::new(),
            extra_workspaces: Vec::new(),
            sbx_bin: None,
            shell: "bash".to_owned(),
            pane_direction: PaneDirection::Right,
            pane_ratio: 0.5,
            open_in: OpenIn::Split,
            report_agent_status: true,
            sandbox_name_prefix: "herdr".to_owned(),
            cleanup_on_worktree_removed: true,
            backend: None,
        }
    }
}

/// `config.json` inside `config_dir`.
pub fn config_path(config_dir: &Path) -> PathBuf {
    config_dir.join("config.json")
}

/// Loads and validates `config_dir/config.json`; a missing file means the defaults.
pub fn load(config_dir: &Path) -> Result<PluginConfig> {
    let path = config_path(config_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PluginConfig::default()),
        Err(e) => {
            return Err(PluginError::config(format!(
                "Could not read {}: {e}.",
                path.display()
            )));
        }
    };
    parse(&text).map_err(|e| PluginError::config(format!("{}: {}", path.display(), e.message)))
}

/// Parses and validates config text (errors name the key, and the line for syntax errors).
pub fn parse(text: &str) -> Result<PluginConfig> {
    // serde_json would keep the last of two equal keys inside a map (agentArgs, customAgents) and
    // would read a struct from an array: both are refused before decoding.
    serde_json::from_str::<strict::NoDuplicateKeys>(text).map_err(|e| {
        PluginError::config(format!(
            "{e}. Fix the file; see docs/herdr-plugin.md for every key."
        ))
    })?;
    if !text.trim_start().starts_with('{') {
        return Err(PluginError::config(
            "config.json must hold one JSON object ({\"agentKind\": ...}), not an array or a bare value. See docs/herdr-plugin.md for every key.",
        ));
    }
    let config: PluginConfig = serde_json::from_str(text).map_err(|e| {
        PluginError::config(format!(
            "{e}. Fix the key or remove it; see docs/herdr-plugin.md for every key."
        ))
    })?;
    config.validate()?;
    Ok(config)
}

fn bad(key: &str, value: impl std::fmt::Debug, why: &str) -> PluginError {
    PluginError::config(format!("config key {key} = {value:?} {why}."))
}

/// A POSIX variable name: a letter or `_`, then letters, digits and `_`.
pub(crate) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Letters, digits, '.', '-', starting alphanumeric: what a sandbox name may contain.
pub(crate) fn valid_name_part(part: &str) -> bool {
    part.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

impl PluginConfig {
    /// Checks every value the types cannot.
    pub fn validate(&self) -> Result<()> {
        if !(self.pane_ratio > 0.0 && self.pane_ratio < 1.0) {
            return Err(bad(
                "paneRatio",
                self.pane_ratio,
                "must be between 0 and 1 (exclusive)",
            ));
        }
        if self.shell.trim().is_empty() {
            return Err(bad(
                "shell",
                &self.shell,
                "must name a shell inside the sandbox, e.g. \"bash\"",
            ));
        }
        if !valid_name_part(&self.sandbox_name_prefix) {
            return Err(bad(
                "sandboxNamePrefix",
                &self.sandbox_name_prefix,
                "may only contain letters, digits, '.' and '-', starting with a letter or digit",
            ));
        }
        for (key, list, bare_ok) in [
            ("env", &self.env, true),
            ("agentEnv", &self.agent_env, false),
        ] {
            for entry in list {
                let name = entry.split_once('=').map_or(entry.as_str(), |(k, _)| k);
                if !valid_env_name(name) || (!bare_ok && !entry.contains('=')) {
                    let form = if bare_ok {
                        "KEY=VALUE or KEY"
                    } else {
                        "KEY=VALUE"
                    };
                    return Err(bad(key, entry, &format!("is not of the form {form}")));
                }
            }
        }
        for entry in &self.kit_args {
            if !entry.contains('=') {
                return Err(bad("kitArgs", entry, "is not of the form name=value"));
            }
        }
        for (name, spec) in &self.custom_agents {
            let key = format!("customAgents.{name}");
            if agents::built_in(name, None).is_some() {
                return Err(bad(
                    &key,
                    name,
                    "clashes with a built-in agent kind; pick another name",
                ));
            }
            if !valid_name_part(name) {
                return Err(bad(
                    &key,
                    name,
                    "must be letters, digits, '.' or '-' (it becomes part of sandbox names)",
                ));
            }
            if spec.sbx_agent.trim().is_empty() {
                return Err(bad(
                    &format!("{key}.sbxAgent"),
                    &spec.sbx_agent,
                    "must name an sbx agent or kit",
                ));
            }
            if spec.command.first().is_none_or(|c| c.trim().is_empty()) {
                return Err(bad(
                    &format!("{key}.command"),
                    &spec.command,
                    "must start with the agent's program",
                ));
            }
        }
        for kind in self.agent_args.keys() {
            if !self.known_kind(kind) {
                return Err(bad(
                    &format!("agentArgs.{kind}"),
                    kind,
                    "is not a built-in or custom agent kind",
                ));
            }
        }
        if !self.known_kind(&self.agent_kind) {
            let mut kinds: Vec<&str> = agents::built_in_kinds().collect();
            kinds.extend(self.custom_agents.keys().map(String::as_str));
            return Err(bad(
                "agentKind",
                &self.agent_kind,
                &format!("is not one of {}", kinds.join(", ")),
            ));
        }
        Ok(())
    }

    fn known_kind(&self, kind: &str) -> bool {
        agents::built_in(kind, None).is_some() || self.custom_agents.contains_key(kind)
    }

    /// The adapter for `kind` with `agentArgs` applied; a `config` error for an unknown kind.
    pub fn agent(&self, kind: &str) -> Result<Agent> {
        let args = self.agent_args.get(kind).map(Vec::as_slice);
        if let Some(spec) = self.custom_agents.get(kind) {
            return Ok(agents::custom(kind, spec, args));
        }
        agents::built_in(kind, args).ok_or_else(|| {
            bad(
                "agentKind",
                kind,
                "is not a built-in or custom agent kind (was it removed from customAgents?)",
            )
        })
    }

    /// `agentEnv` as pairs.
    pub fn agent_env_pairs(&self) -> Vec<(String, String)> {
        self.agent_env
            .iter()
            .filter_map(|e| e.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
            .collect()
    }
}

mod strict {
    //! A pass over a JSON document that fails on a key repeated inside one object.

    use std::collections::HashSet;
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

    /// Any JSON value whose objects never repeat a key.
    pub struct NoDuplicateKeys;

    impl<'de> Deserialize<'de> for NoDuplicateKeys {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Walk)
        }
    }

    struct Walk;

    impl<'de> Visitor<'de> for Walk {
        type Value = NoDuplicateKeys;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(NoDuplicateKeys)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
            Ok(NoDuplicateKeys)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    return Err(de::Error::custom(format!(
                        "duplicate key {key:?} (only one may appear in an object)"
                    )));
                }
                map.next_value::<NoDuplicateKeys>()?;
            }
            Ok(NoDuplicateKeys)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_is_named() {
        let err = parse("{\n  \"agentKnd\": \"codex\"\n}").expect_err("rejected");
        assert!(err.message.contains("agentKnd"), "{}", err.message);
        assert!(err.message.contains("line 2"), "{}", err.message);
    }

    #[test]
    fn arrays_and_repeated_keys_are_refused() {
        for (text, needle) in [
            ("[]", "one JSON object"),
            ("  [{\"agentKind\": \"codex\"}]", "one JSON object"),
            ("\"codex\"", "one JSON object"),
            (
                r#"{"agentArgs": {"codex": [], "codex": ["x"]}}"#,
                "duplicate key \"codex\"",
            ),
            (r#"{"env": [{"a": 1, "a": 2}]}"#, "duplicate key \"a\""),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.message.contains(needle), "{text}: {}", err.message);
        }
        // The same key in two different objects is fine.
        parse(r#"{"agentArgs": {"codex": []}, "customAgents": {}}"#).expect("valid");
    }

    #[test]
    fn seed_example_parses() {
        let config = parse(
            r#"{"agentKind":"claude-code","agentArgs":{"claude-code":["--dangerously-skip-permissions","--model","opus"]},
                "workspaceMode":"mount","kits":["ghcr.io/example/my-kit:latest"],"env":["CI=1"],"publish":["3000"],"memory":"8g"}"#,
        )
        .expect("valid");
        assert_eq!(config.agent("claude-code").expect("agent").command.len(), 4);
    }

    #[test]
    fn custom_agent_and_bad_values() {
        let config = parse(
            r#"{"agentKind":"aider","customAgents":{"aider":{"title":"Aider","sbxAgent":"shell","command":["aider"],
                "defaultArgs":["--yes"],"herdrDetectionKind":null,"setupScript":"pipx install aider-chat"}}}"#,
        )
        .expect("valid");
        let aider = config.agent("aider").expect("agent");
        assert_eq!(aider.command, ["aider", "--yes"]);
        assert!(aider.herdr_detection_kind.is_none());
        for (text, key) in [
            (r#"{"paneRatio":1.5}"#, "paneRatio"),
            (r#"{"agentKind":"nope"}"#, "agentKind"),
            (r#"{"env":["1BAD=x"]}"#, "env"),
            (
                r#"{"customAgents":{"x":{"sbxAgent":"shell","command":[],"bogus":1}}}"#,
                "bogus",
            ),
            (r#"{"workspaceMode":"copy"}"#, "copy"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.message.contains(key), "{text}: {}", err.message);
        }
    }
}
