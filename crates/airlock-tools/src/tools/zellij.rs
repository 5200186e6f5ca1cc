//! zellij: opt-in (`[tools.zellij] enabled = true`). zellij's session socket cannot be filtered
//! (it grants full control: typing into every pane, running commands on the host), so it is
//! passed whole, with a warning at every launch: the socket directory bound, `ZELLIJ`,
//! `ZELLIJ_SESSION_NAME` and `ZELLIJ_PANE_ID` forwarded.

use crate::tool::Tool;

pub(crate) struct Zellij;

impl Tool for Zellij {
    fn name(&self) -> &'static str {
        "zellij"
    }
    fn description(&self) -> &'static str {
        "zellij's session socket, unfiltered: full control of your zellij (opt-in)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["zellij"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn enabled_by_default(&self) -> bool {
        false
    }
}
