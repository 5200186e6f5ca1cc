//! The `[network.credentials]` presets: what `preset = "anthropic"` and the others fill in.

/// The presets: name, hosts, header, value format, the variable inside, the default host variable.
pub(super) const PRESETS: &[Preset] = &[
    Preset {
        name: "anthropic",
        hosts: &["api.anthropic.com"],
        header: "x-api-key",
        format: "{value}",
        inside: "ANTHROPIC_API_KEY",
    },
    Preset {
        name: "openai",
        hosts: &["api.openai.com"],
        header: "authorization",
        format: "Bearer {value}",
        inside: "OPENAI_API_KEY",
    },
    Preset {
        name: "github",
        hosts: &["api.github.com"],
        header: "authorization",
        format: "Bearer {value}",
        inside: "GH_TOKEN",
    },
    Preset {
        name: "github-git",
        hosts: &["github.com"],
        header: "authorization",
        format: "Basic {basic:x-access-token}",
        inside: "GIT_PASSWORD",
    },
    Preset {
        name: "gemini",
        hosts: &["generativelanguage.googleapis.com"],
        header: "x-goog-api-key",
        format: "{value}",
        inside: "GEMINI_API_KEY",
    },
];

pub(super) struct Preset {
    pub(super) name: &'static str,
    pub(super) hosts: &'static [&'static str],
    pub(super) header: &'static str,
    pub(super) format: &'static str,
    pub(super) inside: &'static str,
}

/// The preset names, for messages and docs.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}
