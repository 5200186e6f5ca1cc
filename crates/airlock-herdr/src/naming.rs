//! Sandbox names and the one command string typed into a pane shell.

use sha2::{Digest as _, Sha256};

use crate::error::{PluginError, Result};
use crate::proc;

/// `<prefix>-<agentKind>-<12 hex of sha256(localPath \n paneId \n 16 random hex)>`.
pub fn sandbox_name(prefix: &str, agent_kind: &str, local_path: &str, pane_id: &str) -> String {
    let salt = proc::random_hex(8);
    let digest = Sha256::digest(format!("{local_path}\n{pane_id}\n{salt}").as_bytes());
    format!("{prefix}-{agent_kind}-{}", &proc::hex(&digest)[..12])
}

/// The label of an agent's pane: `airlock <agentKind> <8 hex of the sandbox name>`.
pub fn pane_label(agent_kind: &str, sandbox_name: &str) -> String {
    let id = sandbox_name.rsplit('-').next().unwrap_or(sandbox_name);
    format!("airlock {agent_kind} {}", id.get(..8).unwrap_or(id))
}

/// The git remote sbx registers for a sandbox while `sbx run` is attached.
pub fn sandbox_remote(sandbox_name: &str) -> String {
    format!("sandbox-{sandbox_name}")
}

/// Quotes one word for bash, zsh and fish alike. Control characters and backslashes are refused
/// (`target`): fish and POSIX shells quote a backslash differently, so no quoting is safe for both.
pub fn shell_quote(word: &str) -> Result<String> {
    if let Some(c) = word.chars().find(|c| c.is_control()) {
        return Err(PluginError::target(format!(
            "{word:?} contains the control character {c:?} and cannot be typed into the pane shell. Rename the path or drop the argument."
        )));
    }
    if word.contains('\\') {
        return Err(PluginError::target(format!(
            "{word:?} contains a backslash, which bash and fish quote differently. Rename it before using it with the plugin."
        )));
    }
    if word.is_empty() {
        return Ok("''".to_owned());
    }
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_/.:=@%+,-".contains(c))
    {
        return Ok(word.to_owned());
    }
    Ok(format!("'{}'", word.replace('\'', "'\\''")))
}

/// `env K=V ... argv...` as one line (`env` because fish has no `K=V cmd` prefix form).
pub fn pane_command(env: &[(&str, &str)], argv: &[String]) -> Result<String> {
    let mut words = Vec::new();
    if !env.is_empty() {
        words.push("env".to_owned());
        for (k, v) in env {
            words.push(format!("{k}={}", shell_quote(v)?));
        }
    }
    for a in argv {
        words.push(shell_quote(a)?);
    }
    Ok(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_have_the_documented_shape() {
        let a = sandbox_name("herdr", "claude-code", "/repo", "w1:p2");
        let b = sandbox_name("herdr", "claude-code", "/repo", "w1:p2");
        assert!(a.starts_with("herdr-claude-code-") && a.len() == "herdr-claude-code-".len() + 12);
        assert_ne!(a, b, "a random salt keeps names unique");
    }

    #[test]
    fn pane_labels_name_the_kind_and_the_short_id() {
        assert_eq!(
            pane_label("codex", "herdr-codex-3f9a1c0b2d4e"),
            "airlock codex 3f9a1c0b"
        );
        assert_eq!(pane_label("x", "short"), "airlock x short");
    }

    #[test]
    fn quoting_round_trips_through_sh() {
        let word = "it's a $HOME `x` path";
        let quoted = shell_quote(word).expect("quotable");
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {quoted}")])
            .output()
            .expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), word);
        assert_eq!(
            shell_quote("a\\b").expect_err("refused").kind,
            crate::ErrorKind::Target
        );
        assert_eq!(
            shell_quote("a\nb").expect_err("refused").kind,
            crate::ErrorKind::Target
        );
    }
}
