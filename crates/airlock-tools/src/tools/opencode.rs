//! OpenCode: its XDG config (shielded), data, state and cache (persistent) dirs.

use super::{Xdg, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Opencode;

impl Tool for Opencode {
    fn name(&self) -> &'static str {
        "opencode"
    }
    fn description(&self) -> &'static str {
        "OpenCode AI assistant"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["opencode"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            xdg(host, Xdg::Config, "opencode", Category::Config),
            xdg(host, Xdg::Data, "opencode", Category::Data),
            xdg(host, Xdg::State, "opencode", Category::State),
            xdg(host, Xdg::Cache, "opencode", Category::Cache),
        ]
    }
}
