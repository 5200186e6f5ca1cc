//! The hosts of the `balanced` preset, in one place. `docs/network.md` lists the same hosts (a test
//! keeps the two in step).

/// Model provider APIs used by the agents airlock knows (claude, codex, gemini, opencode, copilot,
/// cursor, aider, pi), including the endpoints their logins refresh tokens against.
pub const MODEL_PROVIDERS: &[&str] = &[
    // Anthropic (claude); platform.claude.com: Claude Code's OAuth token endpoint (seen refused)
    "api.anthropic.com",
    "console.anthropic.com",
    "claude.ai",
    "platform.claude.com",
    // Claude Code's native installer and auto-updater
    "downloads.claude.ai",
    // OpenAI (codex, aider, opencode, pi)
    "api.openai.com",
    "auth.openai.com",
    "chatgpt.com",
    // Google (gemini)
    "generativelanguage.googleapis.com",
    "cloudcode-pa.googleapis.com",
    "oauth2.googleapis.com",
    // gemini's sign-in user info
    "www.googleapis.com",
    // GitHub Copilot
    "api.githubcopilot.com",
    "*.githubcopilot.com",
    "copilot-proxy.githubusercontent.com",
    // Cursor: the API and logins; updates and extensions (the hosts Cursor's docs list together)
    "*.cursor.sh",
    "*.cursorapi.com",
    "*.cursor-cdn.com",
    // opencode's own services
    "opencode.ai",
    "api.opencode.ai",
    "models.opencode.ai",
    "models.dev",
    // Providers that opencode, aider and pi can be pointed at
    "openrouter.ai",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.groq.com",
    "api.x.ai",
];

/// The major package registries.
pub const PACKAGE_REGISTRIES: &[&str] = &[
    // npm, yarn, jsr
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "repo.yarnpkg.com",
    "jsr.io",
    // Python
    "pypi.org",
    "files.pythonhosted.org",
    // Rust
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    // Go
    "proxy.golang.org",
    "sum.golang.org",
    // Ruby
    "rubygems.org",
    "index.rubygems.org",
    // Java / Kotlin
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "services.gradle.org",
    // .NET, PHP, Elixir
    "api.nuget.org",
    "repo.packagist.org",
    "hex.pm",
    "repo.hex.pm",
];

/// Code hosts (clone, fetch, push, release downloads).
pub const CODE_HOSTS: &[&str] = &[
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
    "release-assets.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
    "api.bitbucket.org",
    "codeberg.org",
];

/// Every rule of the `balanced` preset.
pub fn balanced() -> impl Iterator<Item = &'static str> {
    MODEL_PROVIDERS
        .iter()
        .chain(PACKAGE_REGISTRIES)
        .chain(CODE_HOSTS)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Rule;

    #[test]
    fn every_preset_rule_parses_and_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for rule in balanced() {
            Rule::parse(rule, "preset balanced").unwrap();
            assert!(seen.insert(rule), "{rule} listed twice");
        }
    }

    #[test]
    fn docs_list_every_preset_host() {
        let docs = include_str!("../../../docs/network.md");
        for rule in balanced() {
            assert!(
                docs.contains(&format!("`{rule}`")),
                "docs/network.md lacks `{rule}`"
            );
        }
    }
}
