//! Cursor CLI (`cursor-agent`): `~/.cursor` as a persistent overlay, its XDG config shielded.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Cursor;

impl Tool for Cursor {
    fn name(&self) -> &'static str {
        "cursor"
    }
    fn description(&self) -> &'static str {
        "Cursor CLI agent"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["cursor-agent", "cursor"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            home(host, ".cursor", Category::Data).fixed(ToolMountMode::Overlay),
            xdg(host, Xdg::Config, "cursor", Category::Config),
        ]
    }
}
