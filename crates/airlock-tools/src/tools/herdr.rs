//! herdr: nothing of it is mounted; inside a herdr pane the sandbox reaches herdr's control socket
//! only through airlock's filter (`airlock_herdr::filter`), per `[tools.herdr] mode`.

use crate::tool::{KeyKind, KeySpec, Tool};

pub(crate) struct Herdr;

/// `[tools.herdr] mode` values.
pub const MODES: &[&str] = &["auto", "disabled", "enforce"];

const KEYS: &[KeySpec] = &[KeySpec {
    name: "mode",
    kind: KeyKind::Choice(MODES),
    default: "\"auto\"",
    help: "auto: the filtered herdr socket when a launch needs it (a direct agent launch in a herdr \
           pane reports its session) and the host socket answers, else a warning; disabled: never; \
           enforce: always inside herdr (ping only unless a capability applies), an unreachable \
           socket is an error",
}];

impl Tool for Herdr {
    fn name(&self) -> &'static str {
        "herdr"
    }
    fn description(&self) -> &'static str {
        "herdr's control socket, filtered (agent session reports)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["herdr"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
}
