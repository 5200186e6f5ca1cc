//! When a launch gets the kitty filter, and with which policy (`[tools.kitty]`).
//!
//! Active when all hold: `KITTY_LISTEN_ON` is set on the host, `kitty` is on the host's `PATH`,
//! and an enabled tool declares a kitty capability (revdiff: `launch_overlay`) — or `mode =
//! "enforce"`, which needs none (the filter then denies everything a tool did not declare). The
//! host socket must accept a connection: if it does not, that is a warning in `auto` mode (the
//! launch goes on without the filter) and an error in `enforce`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Arc;

use super::{Capability, KittyPolicy, KittySocket};
use crate::overlay::RevdiffOverlay;

/// The host environment variables kitty sets that the sandbox gets as they are (read-only facts
/// about the window airlock runs in).
pub const PASSED_ENV: &[&str] = &["KITTY_WINDOW_ID", "KITTY_PID"];

/// What the launch does about kitty.
#[derive(Debug)]
pub enum Activation {
    Off,
    /// No filter, and why the user should know.
    Warn(String),
    On {
        policy: KittyPolicy,
        host: KittySocket,
    },
}

/// What the launch's tools and config ask of kitty.
pub struct Request<'a> {
    /// `[tools.kitty] mode`: auto, disabled or enforce.
    pub mode: &'a str,
    /// Whether `kitty` is on the host's PATH.
    pub kitty_on_path: bool,
    /// The capabilities the enabled tools declare, plus `extra_capabilities` (checked by the
    /// config layer: never `launch_*`).
    pub capabilities: BTreeSet<Capability>,
    /// revdiff's overlay, when revdiff is a tool of this launch.
    pub overlay: Option<Arc<RevdiffOverlay>>,
}

/// Decides for one launch; `env` reads the host environment.
pub fn activation(
    request: Request<'_>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Activation, String> {
    let Some(listen_on) = env("KITTY_LISTEN_ON").filter(|v| !v.is_empty()) else {
        return Ok(Activation::Off);
    };
    let enforce = request.mode == "enforce";
    if request.mode == "disabled"
        || !request.kitty_on_path
        || (request.capabilities.is_empty() && !enforce)
    {
        return Ok(Activation::Off);
    }
    let fail = |why: String| {
        if enforce {
            Err(format!("{why} ([tools.kitty] mode = \"enforce\")"))
        } else {
            Ok(Activation::Warn(format!(
                "{why}; the sandbox starts without kitty's socket"
            )))
        }
    };
    let host = match KittySocket::parse(&listen_on.to_string_lossy()) {
        Ok(host) => host,
        Err(why) => return fail(why),
    };
    if let Err(e) = host.connect() {
        return fail(format!(
            "kitty's socket {} does not accept connections ({e}): is kitty running with \
             allow_remote_control socket-only?",
            listen_on.to_string_lossy()
        ));
    }
    let caller_window =
        env("KITTY_WINDOW_ID").and_then(|v| v.to_str().and_then(super::launch::parse_window_id));
    Ok(Activation::On {
        policy: KittyPolicy {
            capabilities: request.capabilities,
            launch_patterns: Vec::new(),
            caller_window,
            overlay: request.overlay,
        },
        host,
    })
}

/// What `airlock tools check kitty` says: the mode, the capabilities a launch from here gets, and
/// whether the filter would be active, or what is missing.
pub fn check_notes(
    mode: &str,
    kitty_on_path: bool,
    capabilities: &BTreeSet<Capability>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<String> {
    let mut notes = vec![format!("mode: {mode}")];
    if mode == "disabled" {
        notes.push("the filter is off: no kitty socket inside".into());
        return notes;
    }
    let names: Vec<&str> = capabilities.iter().map(|c| c.as_str()).collect();
    notes.push(if names.is_empty() {
        "capabilities: none (no enabled tool declares one; revdiff on PATH would)".into()
    } else {
        format!("capabilities: {}", names.join(", "))
    });
    let mut missing = Vec::new();
    let listen_on = env("KITTY_LISTEN_ON").filter(|v| !v.is_empty());
    match &listen_on {
        None => missing
            .push("KITTY_LISTEN_ON is not set (not inside kitty with remote control)".to_owned()),
        Some(value) => match KittySocket::parse(&value.to_string_lossy()) {
            Err(why) => missing.push(why),
            Ok(socket) => {
                if socket.connect().is_err() {
                    missing.push(format!(
                        "kitty's socket {} does not accept connections",
                        value.to_string_lossy()
                    ));
                }
            }
        },
    }
    if !kitty_on_path {
        missing.push("kitty is not on PATH".to_owned());
    }
    if names.is_empty() && mode != "enforce" {
        missing.push("no capability applies".to_owned());
    }
    notes.push(if missing.is_empty() {
        "filter: active for a launch from here".to_owned()
    } else {
        format!("filter: off here: {}", missing.join("; "))
    });
    notes
}
