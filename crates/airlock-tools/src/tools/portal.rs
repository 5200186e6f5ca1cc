//! portal: desktop notifications from the sandbox through the XDG desktop portal, over a
//! per-session `xdg-dbus-proxy` that lets through only the portal's notification calls
//! (`airlock_sockets::portal`). On when `xdg-dbus-proxy` is on PATH and the host has a session
//! bus; `[tools.portal] notifications = false` turns it off.

use crate::tool::{KeyKind, KeySpec, Tool};

pub(crate) struct Portal;

const KEYS: &[KeySpec] = &[KeySpec {
    name: "notifications",
    kind: KeyKind::Bool,
    default: "true",
    help: "false: no session bus inside; true: the notification portal only, when \
           xdg-dbus-proxy and a session bus are there",
}];

impl Tool for Portal {
    fn name(&self) -> &'static str {
        "portal"
    }
    fn description(&self) -> &'static str {
        "desktop notifications through the XDG portal (a filtered session bus)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["xdg-dbus-proxy"]
    }
    fn version_args(&self) -> &'static [&'static str] {
        &["--version"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
}
