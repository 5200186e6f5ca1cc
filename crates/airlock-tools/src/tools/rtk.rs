//! rtk: config shielded (tmpoverlay), tracking data persistent per sandbox. rtk resolves both
//! through XDG, and inside the sandbox the XDG variables point at the same paths under the home.

use super::{Xdg, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Rtk;

impl Tool for Rtk {
    fn name(&self) -> &'static str {
        "rtk"
    }
    fn description(&self) -> &'static str {
        "rtk CLI proxy (token-optimized output)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["rtk"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            xdg(host, Xdg::Config, "rtk", Category::Config),
            xdg(host, Xdg::Data, "rtk", Category::Data),
        ]
    }
}
