//! Gemini CLI: `~/.gemini` (settings, credentials, session history) as a persistent overlay.

use airlock_sandbox::ToolMountMode;

use super::home;
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Gemini;

impl Tool for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }
    fn description(&self) -> &'static str {
        "Gemini CLI AI assistant"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["gemini"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![home(host, ".gemini", Category::Data).fixed(ToolMountMode::Overlay)]
    }
}
