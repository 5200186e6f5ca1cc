//! Session ids and transcript paths in agent reports.
//!
//! herdr persists the id (or, for pi, the path) and on restore shell-quotes it and types it into
//! a host pane's shell (`claude --resume <id>`), so both are hostile input: restricted to a
//! charset that needs no quoting, and the path confined to the agent's own session store so a
//! report cannot point herdr at `auth.json` or anything else on the host.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The longest session id accepted, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// The longest transcript path accepted, in bytes (Linux's PATH_MAX).
pub const MAX_SESSION_PATH_BYTES: usize = 4096;

/// Where `agent` keeps its sessions on the host: `~/.claude/projects` (or
/// `$CLAUDE_CONFIG_DIR/projects`), `~/.pi/agent/sessions` (`$PI_CODING_AGENT_DIR/sessions`),
/// `~/.codex/sessions` (`$CODEX_HOME/sessions`). `env` looks up the host environment; an empty
/// variable counts as unset. `None` for an agent with no known store, a relative `home`, or a
/// relative override (it would depend on the cwd), so reporting stays off rather than guessing.
pub fn session_dir(
    agent: &str,
    home: &Path,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    let (var, default, leaf) = match agent {
        "claude" => ("CLAUDE_CONFIG_DIR", ".claude", "projects"),
        "pi" => ("PI_CODING_AGENT_DIR", ".pi/agent", "sessions"),
        "codex" => ("CODEX_HOME", ".codex", "sessions"),
        _ => return None,
    };
    let root = match env(var).filter(|value| !value.is_empty()) {
        Some(value) => PathBuf::from(value),
        None => home.join(default),
    };
    if !home.is_absolute() || !root.is_absolute() {
        return None;
    }
    Some(root.join(leaf))
}

/// `[A-Za-z0-9._-]{1,128}`, and not starting with `-`: herdr types the id after the agent's
/// resume flag, where a leading dash would be read as another option (real ids never have one).
pub fn valid_session_id(id: &str) -> bool {
    is_token(id, MAX_SESSION_ID_BYTES) && !id.starts_with('-')
}

/// Why a transcript path was refused; the rule only, never the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPathError {
    TooLong,
    ControlCharacter,
    NotAbsolute,
    Charset,
    DotOrEmptyComponent,
    OutsideSessionDir,
}

impl SessionPathError {
    /// The rule for the denial message and the decision log.
    pub fn rule(self) -> &'static str {
        match self {
            SessionPathError::TooLong => "agent_session_path too long",
            SessionPathError::ControlCharacter => "agent_session_path has a control character",
            SessionPathError::NotAbsolute => "agent_session_path is not absolute",
            SessionPathError::Charset => {
                "agent_session_path has a character outside [A-Za-z0-9._/-]"
            }
            SessionPathError::DotOrEmptyComponent => {
                "agent_session_path has a '..', '.' or empty component"
            }
            SessionPathError::OutsideSessionDir => {
                "agent_session_path is outside the agent's session dir"
            }
        }
    }
}

/// Checks a reported transcript path: absolute, `[A-Za-z0-9._/-]` only, every component a
/// plain name, and strictly inside `session_dir` comparing components. Nothing is normalised
/// or resolved: `a/./b` and `a//b` are refused rather than read as `a/b`.
pub fn check_session_path(path: &str, session_dir: &Path) -> Result<(), SessionPathError> {
    if path.len() > MAX_SESSION_PATH_BYTES {
        return Err(SessionPathError::TooLong);
    }
    if path.chars().any(char::is_control) {
        return Err(SessionPathError::ControlCharacter);
    }
    let Some(relative) = path.strip_prefix('/') else {
        return Err(SessionPathError::NotAbsolute);
    };
    if !path.bytes().all(|b| b == b'/' || is_id_byte(b)) {
        return Err(SessionPathError::Charset);
    }
    let components: Vec<&str> = relative.split('/').collect();
    if components
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(SessionPathError::DotOrEmptyComponent);
    }
    let Some(dir) = plain_components(session_dir) else {
        return Err(SessionPathError::OutsideSessionDir);
    };
    let inside = components.len() > dir.len() && components.iter().zip(&dir).all(|(a, b)| a == b);
    if inside {
        Ok(())
    } else {
        Err(SessionPathError::OutsideSessionDir)
    }
}

/// The names of an absolute, UTF-8 directory's components; `None` when it has anything else
/// (relative, `..`, non-UTF-8), which leaves no path inside it.
fn plain_components(dir: &Path) -> Option<Vec<&str>> {
    let mut components = dir.components();
    if components.next() != Some(Component::RootDir) {
        return None;
    }
    components
        .map(|component| match component {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect()
}

/// `[A-Za-z0-9._-]{1,max_bytes}`: the session-id charset, for other short tokens herdr stores.
pub fn is_token(value: &str, max_bytes: usize) -> bool {
    (1..=max_bytes).contains(&value.len()) && value.bytes().all(is_id_byte)
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}
