//! The plugin's error kinds (a public contract: they appear in every failed result line).

use serde::Serialize;

/// How much captured CLI output a result line carries.
pub const OUTPUT_LIMIT: usize = 4000;

/// What went wrong, as orchestrators see it in `errorKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    NotFound,
    Daemon,
    Authentication,
    Conflict,
    Network,
    Permission,
    Cancelled,
    Config,
    Target,
    Startup,
    Unknown,
}

impl ErrorKind {
    /// The spelling used in result lines and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not-found",
            ErrorKind::Daemon => "daemon",
            ErrorKind::Authentication => "authentication",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Network => "network",
            ErrorKind::Permission => "permission",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Config => "config",
            ErrorKind::Target => "target",
            ErrorKind::Startup => "startup",
            ErrorKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of an action, the bridge or a hook: a kind, a message that says what to do, and the
/// captured output of the CLI call that failed (if any).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct PluginError {
    pub kind: ErrorKind,
    pub message: String,
    pub output: Option<String>,
}

impl PluginError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> PluginError {
        PluginError {
            kind,
            message: message.into(),
            output: None,
        }
    }

    /// Attaches captured output (kept whole here; trimmed when rendered).
    pub fn with_output(mut self, output: impl Into<String>) -> PluginError {
        let output = output.into();
        if !output.trim().is_empty() {
            self.output = Some(output);
        }
        self
    }

    pub fn target(message: impl Into<String>) -> PluginError {
        PluginError::new(ErrorKind::Target, message)
    }

    pub fn startup(message: impl Into<String>) -> PluginError {
        PluginError::new(ErrorKind::Startup, message)
    }

    pub fn conflict(message: impl Into<String>) -> PluginError {
        PluginError::new(ErrorKind::Conflict, message)
    }

    pub fn config(message: impl Into<String>) -> PluginError {
        PluginError::new(ErrorKind::Config, message)
    }
}

/// The first `OUTPUT_LIMIT` characters of `output` (characters, not bytes, so UTF-8 stays whole).
pub fn trim_output(output: &str) -> String {
    output.chars().take(OUTPUT_LIMIT).collect()
}

pub type Result<T, E = PluginError> = std::result::Result<T, E>;
