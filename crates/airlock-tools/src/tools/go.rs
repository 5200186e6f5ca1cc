//! Go: GOPATH and the build and module caches in the sandbox home, and no toolchain downloads.

use crate::tool::{Extras, Tool, ToolContext};

pub(crate) struct Go;

impl Tool for Go {
    fn name(&self) -> &'static str {
        "go"
    }
    fn description(&self) -> &'static str {
        "Go language environment isolation"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["go"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        // The sandbox home is mounted at the host home's path.
        let home = &ctx.host.home;
        let path = |rel: &str| home.join(rel).to_string_lossy().into_owned();
        Extras {
            env: vec![
                ("GOPATH".into(), path("go")),
                ("GOCACHE".into(), path(".cache/go-build")),
                ("GOMODCACHE".into(), path(".cache/go-mod")),
                ("GOTOOLCHAIN".into(), "local".into()),
            ],
            path_prepend: vec![home.join("go/bin")],
            ..Extras::default()
        }
    }
}
