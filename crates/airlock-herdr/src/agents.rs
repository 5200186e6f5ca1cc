//! Agent adapters: the six built-in kinds and the custom ones from config.json.

use serde::{Deserialize, Serialize};

/// A resolved adapter: what sbx creates, what runs in the sandbox, what herdr is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub kind: String,
    pub title: String,
    /// The sbx agent (or kit reference) passed to `sbx create`.
    pub sbx_agent: String,
    /// The command and its arguments inside the sandbox.
    pub command: Vec<String>,
    /// The label herdr's screen detection knows; `None` for agents it cannot detect.
    pub herdr_detection_kind: Option<String>,
    pub setup_script: Option<String>,
    pub custom: bool,
}

/// A custom agent as written in config.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomAgent {
    #[serde(default)]
    pub title: Option<String>,
    pub sbx_agent: String,
    pub command: Vec<String>,
    #[serde(default)]
    pub default_args: Vec<String>,
    #[serde(default)]
    pub herdr_detection_kind: Option<String>,
    #[serde(default)]
    pub setup_script: Option<String>,
}

/// `(kind, title, sbx agent, command, default args, herdr label)` of the built-in adapters; the
/// default arguments are the ones Docker's templates use for `sbx run`.
/// One built-in adapter row.
type BuiltIn = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static str,
);

const BUILT_IN: &[BuiltIn] = &[
    (
        "claude-code",
        "Claude Code",
        "claude",
        "claude",
        &["--dangerously-skip-permissions"],
        "claude",
    ),
    (
        "codex",
        "Codex",
        "codex",
        "codex",
        &["--dangerously-bypass-approvals-and-sandbox"],
        "codex",
    ),
    (
        "gemini",
        "Gemini CLI",
        "gemini",
        "gemini",
        &["--yolo"],
        "gemini",
    ),
    (
        "opencode",
        "OpenCode",
        "opencode",
        "opencode",
        &[],
        "opencode",
    ),
    (
        "copilot",
        "Copilot CLI",
        "copilot",
        "copilot",
        &["--yolo"],
        "copilot",
    ),
    (
        "cursor",
        "Cursor Agent",
        "cursor",
        "cursor-agent",
        &["--yolo"],
        "cursor",
    ),
];

/// The built-in kinds, in documentation order.
pub fn built_in_kinds() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|b| b.0)
}

/// The built-in adapter `kind` with its default arguments (or `args` when given).
pub fn built_in(kind: &str, args: Option<&[String]>) -> Option<Agent> {
    let (kind, title, sbx_agent, program, defaults, label) =
        BUILT_IN.iter().find(|b| b.0 == kind)?;
    let mut command = vec![(*program).to_owned()];
    match args {
        Some(args) => command.extend(args.iter().cloned()),
        None => command.extend(defaults.iter().map(|s| (*s).to_owned())),
    }
    Some(Agent {
        kind: (*kind).to_owned(),
        title: (*title).to_owned(),
        sbx_agent: (*sbx_agent).to_owned(),
        command,
        herdr_detection_kind: Some((*label).to_owned()),
        setup_script: None,
        custom: false,
    })
}

/// The custom adapter `kind` (or `args` instead of its default arguments).
pub fn custom(kind: &str, spec: &CustomAgent, args: Option<&[String]>) -> Agent {
    let mut command = spec.command.clone();
    command.extend(args.unwrap_or(&spec.default_args).iter().cloned());
    Agent {
        kind: kind.to_owned(),
        title: spec.title.clone().unwrap_or_else(|| kind.to_owned()),
        sbx_agent: spec.sbx_agent.clone(),
        command,
        herdr_detection_kind: spec.herdr_detection_kind.clone(),
        setup_script: spec.setup_script.clone().filter(|s| !s.trim().is_empty()),
        custom: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_table_matches_the_docs() {
        let cursor = built_in("cursor", None).expect("built in");
        assert_eq!(cursor.command, ["cursor-agent", "--yolo"]);
        assert_eq!(cursor.sbx_agent, "cursor");
        let claude = built_in(
            "claude-code",
            Some(&["--model".to_owned(), "opus".to_owned()]),
        )
        .expect("built in");
        assert_eq!(claude.command, ["claude", "--model", "opus"]);
        assert_eq!(built_in_kinds().count(), 6);
    }
}
