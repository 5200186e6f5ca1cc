//! kitty: nothing of it is mounted; inside kitty with remote control on, the sandbox reaches
//! kitty's control socket only through airlock's filter (`airlock_sockets::kitty`), per
//! `[tools.kitty] mode`, with the capabilities the enabled tools declare (revdiff: overlay
//! launches) plus `extra_capabilities`.

use crate::tool::{KeyKind, KeySpec, Tool};

pub(crate) struct Kitty;

/// `[tools.kitty] mode` values.
pub const MODES: &[&str] = &["auto", "disabled", "enforce"];

/// The capabilities `extra_capabilities` may add: the ones acting on windows the sandbox's
/// own launches created.
pub const EXTRA_CAPABILITIES: &[&str] = &[
    "close_owned",
    "wait_owned",
    "focus_owned",
    "send_text_owned",
    "get_text_owned",
    "set_title_owned",
    "list_owned",
];

const LAUNCH_REFUSED: &str = "launch capabilities run programs on the host and come only with \
                              a tool's declared commands";

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "mode",
        kind: KeyKind::Choice(MODES),
        default: "\"auto\"",
        help: "auto: the filtered kitty socket when an enabled tool declares a kitty capability \
               (revdiff on PATH); disabled: never; enforce: always inside kitty with remote \
               control (nothing allowed beyond what the tools declare)",
    },
    KeySpec {
        name: "extra_capabilities",
        kind: KeyKind::List(
            EXTRA_CAPABILITIES,
            &[
                ("launch_overlay", LAUNCH_REFUSED),
                ("launch_window", LAUNCH_REFUSED),
                ("launch_tab", LAUNCH_REFUSED),
                ("launch_os_window", LAUNCH_REFUSED),
            ],
        ),
        default: "[]",
        help: "owned-window capabilities added to what the tools declare; launch_* is refused",
    },
];

impl Tool for Kitty {
    fn name(&self) -> &'static str {
        "kitty"
    }
    fn description(&self) -> &'static str {
        "kitty's remote-control socket, filtered (overlay launches of declared tools)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["kitty"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
}
