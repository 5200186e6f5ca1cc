//! Node.js / npm: global packages go to `~/.npm-global` in the sandbox home. `~/.npmrc` is not
//! mounted: it often holds registry tokens.

use crate::tool::{Extras, Tool, ToolContext};

pub(crate) struct Node;

impl Tool for Node {
    fn name(&self) -> &'static str {
        "node"
    }
    fn description(&self) -> &'static str {
        "Node.js / npm with global packages in the sandbox home"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["node", "npm"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let prefix = ctx.host.home.join(".npm-global");
        Extras {
            env: vec![(
                "NPM_CONFIG_PREFIX".into(),
                prefix.to_string_lossy().into_owned(),
            )],
            path_prepend: vec![prefix.join("bin")],
            ..Extras::default()
        }
    }
}
